//! Label matchers, as Prometheus applies them: `=`, `!=`, `=~`, `!~`; regexes are RE2 (the
//! `regex` crate) fully anchored as `^(?s:re)$`, so `.` also matches a newline. A series that
//! lacks a label is matched as if the label were empty, so `{l=""}` and `{l=~"x|"}` select it.

use crate::data::metrics::prom::Labels;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    Equal,
    NotEqual,
    Regex,
    NotRegex,
}

impl MatchOp {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid regular expression {pattern:?} for label {label}: {reason}")]
pub struct MatcherError {
    pub label: String,
    pub pattern: String,
    pub reason: String,
}

/// One label matcher.
#[derive(Debug, Clone)]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
    regex: Option<regex::Regex>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Matcher) -> bool {
        self.name == other.name && self.op == other.op && self.value == other.value
    }
}

/// The largest compiled regex accepted (a hostile pattern must not take the node's memory).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

impl Matcher {
    pub fn new(name: &str, op: MatchOp, value: &str) -> Result<Matcher, MatcherError> {
        let regex = match op {
            MatchOp::Regex | MatchOp::NotRegex => Some(
                regex::RegexBuilder::new(&format!("^(?s:{value})$"))
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| MatcherError { label: name.to_string(), pattern: value.to_string(), reason: e.to_string() })?,
            ),
            MatchOp::Equal | MatchOp::NotEqual => None,
        };
        Ok(Matcher { name: name.to_string(), op, value: value.to_string(), regex })
    }

    /// Whether a label value (empty when the series lacks the label) passes.
    pub fn matches(&self, value: &str) -> bool {
        match (self.op, &self.regex) {
            (MatchOp::Equal, _) => value == self.value,
            (MatchOp::NotEqual, _) => value != self.value,
            (MatchOp::Regex, Some(regex)) => regex.is_match(value),
            (MatchOp::NotRegex, Some(regex)) => !regex.is_match(value),
            // `new` always compiles a regex for the regex operators.
            (MatchOp::Regex | MatchOp::NotRegex, None) => false,
        }
    }
}

/// Whether a series' labels pass every matcher (matchers on the same label are AND-ed).
pub fn matches_all(matchers: &[Matcher], labels: &Labels) -> bool {
    matchers.iter().all(|m| m.matches(labels.get(&m.name).map_or("", String::as_str)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn m(name: &str, op: MatchOp, value: &str) -> Matcher {
        Matcher::new(name, op, value).expect("valid matcher")
    }

    #[test]
    fn regexes_are_fully_anchored_and_dot_matches_newline() {
        let re = m("l", MatchOp::Regex, "a.c");
        assert!(re.matches("abc"));
        assert!(re.matches("a\nc"));
        assert!(!re.matches("xabc"), "anchored at the start");
        assert!(!re.matches("abcx"), "anchored at the end");
        let alternation = m("l", MatchOp::Regex, "foo|bar");
        assert!(alternation.matches("bar"));
        assert!(!alternation.matches("foobar"), "alternation is inside the anchors");
        assert!(m("l", MatchOp::NotRegex, "a.*").matches("ba"));
        assert!(!m("l", MatchOp::NotRegex, "a.*").matches("ab"));
    }

    #[test]
    fn empty_matching_matchers_select_series_lacking_the_label() {
        let without = labels(&[("__name__", "up")]);
        let with = labels(&[("__name__", "up"), ("env", "prod")]);
        let empty = m("env", MatchOp::Equal, "");
        assert!(matches_all(std::slice::from_ref(&empty), &without));
        assert!(!matches_all(std::slice::from_ref(&empty), &with));
        let optional = m("env", MatchOp::Regex, "prod|");
        assert!(matches_all(std::slice::from_ref(&optional), &without));
        assert!(matches_all(std::slice::from_ref(&optional), &with));
        let not_prod = m("env", MatchOp::NotEqual, "prod");
        assert!(matches_all(std::slice::from_ref(&not_prod), &without));
        assert!(!matches_all(&[not_prod], &with));
        assert!(!matches_all(&[m("env", MatchOp::Regex, ".+")], &without));
    }

    #[test]
    fn matchers_on_the_same_label_are_and_ed() {
        let both = [m("env", MatchOp::Regex, "p.*"), m("env", MatchOp::NotEqual, "prod")];
        assert!(matches_all(&both, &labels(&[("env", "preprod")])));
        assert!(!matches_all(&both, &labels(&[("env", "prod")])));
        assert!(!matches_all(&both, &labels(&[("env", "dev")])));
    }

    #[test]
    fn a_bad_regex_is_an_error_naming_the_label() {
        let error = Matcher::new("job", MatchOp::Regex, "(").expect_err("unbalanced");
        assert_eq!(error.label, "job");
        assert!(error.to_string().contains("invalid regular expression"));
    }
}
