//! Java regular expressions run with the `regex` crate, compiled once per pattern and kept.
//!
//! `String.matches` is anchored to the whole string (`^(?:re)$`); `=~` and `replaceAll` search.
//! Java-only syntax (look-around, back-references, possessive quantifiers) fails to compile and
//! becomes an evaluation error of the rule that uses it.

use std::collections::HashMap;

use regex::Regex;

use crate::error::EvalError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    Whole,
    Find,
}

/// Compiled patterns; failures are remembered too so a bad pattern is not recompiled per sample.
#[derive(Debug, Default, Clone)]
pub struct RegexCache {
    compiled: HashMap<(String, Mode), Result<Regex, String>>,
}

impl RegexCache {
    pub(crate) fn get(
        &mut self,
        pattern: &str,
        mode: Mode,
        line: usize,
    ) -> Result<&Regex, EvalError> {
        let entry = self
            .compiled
            .entry((pattern.to_owned(), mode))
            .or_insert_with(|| {
                let source = match mode {
                    Mode::Whole => format!("^(?:{pattern})$"),
                    Mode::Find => pattern.to_owned(),
                };
                Regex::new(&source).map_err(|error| {
                    error
                        .to_string()
                        .lines()
                        .last()
                        .unwrap_or_default()
                        .to_owned()
                })
            });
        entry.as_ref().map_err(|reason| EvalError::Regex {
            pattern: pattern.to_owned(),
            reason: reason.clone(),
            line,
        })
    }
}

/// Java's replacement syntax (`$1`, `${name}`, `\$`) in the `regex` crate's (`${1}`, `$$`).
pub(crate) fn java_replacement(replacement: &str) -> String {
    let mut out = String::with_capacity(replacement.len());
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                if chars.peek() == Some(&'{') {
                    out.push('$');
                    continue;
                }
                let mut digits = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    digits.push(d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}
