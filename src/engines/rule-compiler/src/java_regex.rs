//! Checking Java regular expressions (LAL `regexp`, MAL `tagMatch`) with the `regex` crate's parser.
//!
//! Upstream compiles these with `java.util.regex`. Only syntax matters here, so the pattern is
//! parsed (and translated to HIR, which catches bad classes and ranges) by `regex-syntax` without
//! building automata, which would cost far more than the rest of a compile. That parser agrees with
//! Java on the common syntax, including named groups `(?<name>...)` (also rewritten to the
//! `(?P<name>...)` spelling older parsers required). Java features it lacks (look-around,
//! back-references, atomic groups, possessive quantifiers, `\G`, `\Z`, `\Q...\E`, `\h`, `\e`,
//! `\cX`, octal `\0n`, property classes) cannot be checked here: a pattern using them is accepted
//! unjudged rather than rejected, because rejecting valid Java would break rules that run fine
//! upstream. Only patterns the parser can judge are reported as errors.

/// Java-only constructs; their presence means the `regex` crate cannot judge the pattern.
/// Property classes (`\p{...}`) are here too: the engines name properties differently.
const JAVA_ONLY: &[&str] = &[
    "(?=", "(?!", "(?<=", "(?<!", "(?>", "*+", "++", "?+", "}+", "\\G", "\\Z", "\\Q", "\\k<",
    "\\p{", "\\P{", "\\R", "\\X", "\\h", "\\H", "\\e", "\\c", "\\0",
];

/// Bounds nesting so a hostile pattern cannot exhaust the parser's stack.
const NEST_LIMIT: u32 = 100;

/// `Ok` when the pattern is valid (or uses Java-only syntax we cannot judge); otherwise the
/// `regex` crate's explanation.
pub(crate) fn check(pattern: &str) -> Result<(), String> {
    if JAVA_ONLY
        .iter()
        .any(|construct| pattern.contains(construct))
        || has_back_reference(pattern)
    {
        return Ok(());
    }
    let translated = pattern.replace("(?<", "(?P<");
    match regex_syntax::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(&translated)
    {
        Ok(_) => Ok(()),
        Err(error) => Err(first_line_of_explanation(&error.to_string())),
    }
}

/// `\1`..`\9`: a back-reference. (Also matched inside a character class, where it only means the
/// pattern goes unjudged.)
fn has_back_reference(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        // The escaped character is consumed either way, so `\\1` is not mistaken for `\1`.
        if c == '\\'
            && chars
                .next()
                .is_some_and(|next| next.is_ascii_digit() && next != '0')
        {
            return true;
        }
    }
    false
}

/// The crate's messages draw the pattern with carets over several lines; keep the verdict only.
fn first_line_of_explanation(message: &str) -> String {
    message
        .lines()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or_else(|| message.lines().last().unwrap_or(message))
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn java_named_groups_and_corpus_patterns_pass() {
        assert_eq!(
            check(r#".+ \"(?<request>.+)\" (?<status>\d{3}) .+"#),
            Ok(())
        );
        assert_eq!(
            check(r"(?<time>\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) \[(?<level>.+)].*"),
            Ok(())
        );
        assert_eq!(check("idle|idle in transaction (aborted)"), Ok(()));
    }

    #[test]
    fn java_only_syntax_is_accepted_unjudged() {
        assert_eq!(check(r"(?<=a)b(?!c)"), Ok(()));
        assert_eq!(check(r"(a)\1"), Ok(()));
    }

    #[test]
    fn broken_patterns_are_reported() {
        let message = check("(?<name>abc").err().unwrap_or_default();
        assert!(message.contains("unclosed group"), "{message}");
        assert!(check("a[b").is_err());
    }
}
