//! Running Java regular expressions (LAL `regexp`, `=~`) on the `regex` crate.
//!
//! The translation: `(?<name>` becomes `(?P<name>`; the shorthand classes `\d`, `\w`, `\s` and
//! the word boundary `\b`, which Java keeps ASCII-only unless a flag says otherwise, are made
//! ASCII-only (the `regex` crate's are Unicode-aware; their negations `\D`, `\W`, `\S` stay so). Java-only syntax
//! (look-around, atomic groups, `\k<name>`, `\G`, `\Z`) cannot run: compiling fails with the
//! reason, and the rule using it fails per log.

use std::sync::Arc;

use regex::Regex;

use crate::backtrack::{Outcome, Program};

const JAVA_ONLY: &[&str] = &["(?=", "(?!", "(?<=", "(?<!", "(?>", "\\k<", "\\G", "\\Z"];

/// A compiled pattern: the `regex` crate's, and the backtracking program that finds its groups
/// faster when the pattern is within what it runs (`backtrack`). Derefs to the `Regex`.
#[derive(Debug)]
pub(crate) struct JavaRegex {
    regex: Regex,
    program: Option<Program>,
}

impl std::ops::Deref for JavaRegex {
    type Target = Regex;

    fn deref(&self) -> &Regex {
        &self.regex
    }
}

impl JavaRegex {
    /// The text of each group of the first match (Java's `find()`), or None without a match:
    /// the program's answer, or the `regex` crate's when there is no program or it gave up.
    pub(crate) fn groups(&self, text: &str) -> Option<Vec<Option<String>>> {
        let group = |range: Option<(usize, usize)>| range.and_then(|(start, end)| text.get(start..end)).map(str::to_owned);
        if let Some(program) = &self.program {
            match program.search(text) {
                Outcome::Matched(slots) => return Some(slots.chunks(2).map(|s| group(s.first().copied().flatten().zip(s.get(1).copied().flatten()))).collect()),
                Outcome::NoMatch => return None,
                Outcome::GaveUp => {}
            }
        }
        let captures = self.regex.captures(text)?;
        Some(captures.iter().map(|m| group(m.map(|m| (m.start(), m.end())))).collect())
    }
}

/// The compiled pattern, or why it cannot run.
pub(crate) fn compile(pattern: &str) -> Result<Arc<JavaRegex>, String> {
    if let Some(construct) = JAVA_ONLY.iter().find(|c| pattern.contains(**c)) {
        return Err(format!(
            "'{construct}' (Java-only regex syntax) is not supported by hotrule"
        ));
    }
    let translated = translate(pattern);
    let regex = Regex::new(&translated).map_err(|e| {
        e.to_string()
            .lines()
            .find_map(|l| l.strip_prefix("error: "))
            .unwrap_or("invalid regular expression")
            .to_owned()
    })?;
    // A program must agree with the regex on the groups it reports.
    let program = Program::compile(&translated).filter(|p| p.slots() == regex.captures_len() * 2);
    Ok(Arc::new(JavaRegex { regex, program }))
}

fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                // The negations stay Unicode-aware: ASCII-only negated classes could match
                // inside a multi-byte character, which a `str` regex may not.
                Some(class @ ('d' | 'w' | 's' | 'b')) if !in_class => {
                    out.push_str("(?-u:\\");
                    out.push(class);
                    out.push(')');
                }
                Some('d') if in_class => out.push_str("0-9"),
                Some('w') if in_class => out.push_str("a-zA-Z0-9_"),
                Some('s') if in_class => out.push_str(" \\t\\n\\x0B\\f\\r"),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                // A leading `]` is a literal in Java, not the end of the class.
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '(' if !in_class && chars.peek() == Some(&'?') => {
                out.push_str("(?");
                chars.next();
                if chars.peek() == Some(&'<') {
                    out.push('P');
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_spelling_is_translated() {
        assert_eq!(
            translate(r"(?<n>\d+)[\w.]\s\\d[]a](?:x)"),
            r"(?P<n>(?-u:\d)+)[a-zA-Z0-9_.](?-u:\s)\\d[\]a](?:x)"
        );
        assert_eq!(translate(r"\[(?<level>.+)].*"), r"\[(?P<level>.+)].*");
    }

    #[test]
    fn shorthand_classes_are_ascii_as_in_java() {
        let digits = compile(r"^\d+$").expect("compiles");
        assert!(digits.is_match("123"));
        // Arabic-Indic digits are `\d` in the regex crate's Unicode mode, not in Java.
        assert!(!digits.is_match("\u{0663}"));
        assert!(compile(r"\D+\W\S\B").is_ok());
        assert!(compile(r"(?<=a)b").is_err());
        assert!(compile(r"a(").is_err());
    }
}
