//! Query-parameter validation for the rule routes, in the reference's order:
//! `missing_catalog`, `invalid_catalog`, `missing_name`, `invalid_name`, then the flags.
//!
//! Every admin route that reads a query string reads it through [`Params::from`], which refuses
//! a parameter given more than once (`catalog=lal&catalog=otel-rules` is `invalid_parameter`,
//! naming it, never "last wins").

use std::collections::HashMap;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;

use crate::base::ids::{Catalog, RuleKey, RuleName};
use crate::control::outcome::{ApplyStatus, Outcome};

pub type RawQuery = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// Parsed query parameters, with what the response echoes back even on failure.
pub struct Params {
    pub map: HashMap<String, String>,
}

impl Params {
    pub fn from(raw: RawQuery) -> Result<Params, Outcome> {
        match raw {
            Ok(Query(pairs)) => Params::from_pairs(pairs),
            Err(e) => Err(Outcome::new(ApplyStatus::InvalidParameter, format!("query string: {e}"))),
        }
    }

    /// The parameters, each at most once.
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Result<Params, Outcome> {
        let mut map = HashMap::with_capacity(pairs.len());
        for (name, value) in pairs {
            if map.contains_key(&name) {
                return Err(Outcome::new(
                    ApplyStatus::InvalidParameter,
                    format!("query parameter {name} is given more than once; give it once"),
                ));
            }
            map.insert(name, value);
        }
        Ok(Params { map })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    /// The echo of `catalog` and `name` for responses.
    pub fn echo(&self) -> (String, String) {
        (self.get("catalog").unwrap_or("").to_string(), self.get("name").unwrap_or("").to_string())
    }

    pub fn catalog(&self, fixed: Option<Catalog>) -> Result<Catalog, Outcome> {
        if let Some(catalog) = fixed {
            return Ok(catalog);
        }
        match self.get("catalog").map(str::trim) {
            None | Some("") => Err(Outcome::new(ApplyStatus::MissingCatalog, "query parameter catalog is required")),
            Some(text) => Catalog::parse(text).ok_or_else(|| {
                let known: Vec<&str> = Catalog::ALL.iter().map(|c| c.as_str()).collect();
                Outcome::new(ApplyStatus::InvalidCatalog, format!("unknown catalog {text:?}; known: {}", known.join(", ")))
            }),
        }
    }

    pub fn key(&self, fixed: Option<Catalog>) -> Result<RuleKey, Outcome> {
        let catalog = self.catalog(fixed)?;
        let name = match self.get("name") {
            None | Some("") => return Err(Outcome::new(ApplyStatus::MissingName, "query parameter name is required")),
            Some(text) => RuleName::parse(text).map_err(|e| Outcome::new(ApplyStatus::InvalidName, e.to_string()))?,
        };
        Ok(RuleKey::new(catalog, name))
    }

    /// True when the trimmed value is `true`, `1` or `yes` in any case.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params { map: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
    }

    #[test]
    fn validation_order_and_codes() {
        let status = |p: Params| p.key(None).err().map(|o| o.status);
        assert_eq!(status(params(&[])), Some(ApplyStatus::MissingCatalog));
        assert_eq!(status(params(&[("catalog", "oal")])), Some(ApplyStatus::InvalidCatalog));
        assert_eq!(status(params(&[("catalog", "lal")])), Some(ApplyStatus::MissingName));
        assert_eq!(status(params(&[("catalog", "lal"), ("name", "../x")])), Some(ApplyStatus::InvalidName));
        assert_eq!(status(params(&[("catalog", "lal"), ("name", "a/b")])), None);
    }

    #[test]
    fn a_repeated_parameter_is_refused_and_named() {
        let pairs = |list: &[(&str, &str)]| list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let refused = Params::from_pairs(pairs(&[("catalog", "lal"), ("name", "a"), ("catalog", "otel-rules")]))
            .err()
            .expect("refused");
        assert_eq!(refused.status, ApplyStatus::InvalidParameter);
        assert!(refused.message.contains("catalog"), "{}", refused.message);
        let params = Params::from_pairs(pairs(&[("catalog", "lal"), ("name", "a")])).expect("accepted");
        assert_eq!(params.get("catalog"), Some("lal"));
    }

    #[test]
    fn flags_accept_true_one_yes_in_any_case() {
        for yes in ["true", "TRUE", " 1 ", "Yes"] {
            assert!(params(&[("force", yes)]).flag("force"), "{yes}");
        }
        for no in ["false", "0", "no", "", "y"] {
            assert!(!params(&[("force", no)]).flag("force"), "{no}");
        }
        assert!(!params(&[]).flag("force"));
    }
}
