//! The `env` provider (`env:NAME`, `env:NAME:-default`) and the injectable environment it reads.
//!
//! The variable's value is parsed as YAML (`PORT=8080` is an integer that remembers its text).
//! Names must match `^[a-zA-Z_][a-zA-Z0-9_]*$`. An empty default (`env:X:-`) is the empty string.
//! `env:X:?message` requires X: unset, it is [`EnvError::Required`] (an error even inside a value);
//! set, even to empty, it is the value.
//! An unset variable without a default is [`EnvError::Unset`]: an error for a whole source; the
//! resolver turns it into null plus a warning for a `${env:X}` reference, as the Collector does.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Provider, ProviderError, Retrieved};
use crate::uri::Uri;
use crate::value::Value;

/// Why an `env:` URI could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum EnvError {
    #[error(
        "environment variable `{name}` has an invalid name: it must match ^[a-zA-Z_][a-zA-Z0-9_]*$"
    )]
    InvalidName { name: String },
    #[error("environment variable `{name}` is not set")]
    Unset { name: String },
    /// `env:NAME:?message` with NAME unset: an error even inside a value.
    #[error("environment variable `{name}` is required: {}", if message.is_empty() { "empty error message" } else { message.as_str() })]
    Required { name: String, message: String },
}

/// Where variables are read from. Tests use [`MapEnv`] so they never touch the process environment.
pub trait Env: Send + Sync {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment. A value that is not valid UTF-8 counts as unset (and is logged).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        match std::env::var(name) {
            Ok(value) => Some(value),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                tracing::warn!(
                    name,
                    "environment variable is not valid UTF-8; treating it as unset"
                );
                None
            }
        }
    }
}

/// A fixed set of variables.
#[derive(Debug, Clone, Default)]
pub struct MapEnv {
    vars: BTreeMap<String, String>,
}

impl MapEnv {
    pub fn new<K: Into<String>, V: Into<String>>(vars: impl IntoIterator<Item = (K, V)>) -> MapEnv {
        MapEnv {
            vars: vars
                .into_iter()
                .map(|(name, value)| (name.into(), value.into()))
                .collect(),
        }
    }
}

impl Env for MapEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }
}

/// Serves `env:` URIs from an [`Env`].
pub struct EnvProvider {
    env: Arc<dyn Env>,
}

impl EnvProvider {
    pub fn new(env: Arc<dyn Env>) -> EnvProvider {
        EnvProvider { env }
    }
}

impl Provider for EnvProvider {
    fn scheme(&self) -> &str {
        "env"
    }

    fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError> {
        let opaque = uri.opaque();
        let (name, when_unset) = match opaque.split_once(':') {
            Some((name, rest)) if rest.starts_with('-') || rest.starts_with('?') => {
                (name, Some(rest.split_at(1)))
            }
            _ => (opaque, None),
        };
        if !is_valid_name(name) {
            return Err(EnvError::InvalidName {
                name: name.to_owned(),
            }
            .into());
        }
        match (self.env.var(name), when_unset) {
            (Some(value), _) => Ok(Retrieved::from_yaml(value)),
            (None, Some(("-", ""))) => Ok(Retrieved::from_value(Value::String(String::new()))),
            (None, Some(("-", default))) => Ok(Retrieved::from_yaml(default)),
            (None, Some((_, message))) => Err(EnvError::Required {
                name: name.to_owned(),
                message: message.to_owned(),
            }
            .into()),
            (None, None) => Err(EnvError::Unset {
                name: name.to_owned(),
            }
            .into()),
        }
    }
}

fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retrieve(opaque: &str) -> Result<Retrieved, ProviderError> {
        let provider = EnvProvider::new(Arc::new(MapEnv::new([("PORT", "8080"), ("EMPTY", "")])));
        provider.retrieve(&Uri::parse(&format!("env:{opaque}")).expect("valid uri"))
    }

    #[test]
    fn values_defaults_and_errors() {
        assert_eq!(
            retrieve("PORT").expect("set").value().typed(),
            &Value::Int(8080)
        );
        assert_eq!(
            retrieve("MISSING:-9090").expect("default").value().typed(),
            &Value::Int(9090)
        );
        assert_eq!(
            retrieve("MISSING:-").expect("empty default").value(),
            &Value::String(String::new())
        );
        assert_eq!(
            retrieve("PORT:-1").expect("set wins").value().typed(),
            &Value::Int(8080)
        );
        let unset = retrieve("MISSING").expect_err("unset");
        assert_eq!(
            unset.to_string(),
            "environment variable `MISSING` is not set"
        );
        // upstream envprovider `TestEnvWithErrorMessage`.
        let required = retrieve("MISSING:?set MISSING to the port").expect_err("required");
        assert_eq!(
            required.to_string(),
            "environment variable `MISSING` is required: set MISSING to the port"
        );
        assert!(
            retrieve("MISSING:?")
                .expect_err("required")
                .to_string()
                .ends_with("empty error message")
        );
        assert_eq!(
            retrieve("EMPTY:?foo").expect("set, if empty").value(),
            &Value::Null
        );
        assert_eq!(
            retrieve("PORT:?foo").expect("set").value().typed(),
            &Value::Int(8080)
        );
        // upstream envprovider `TestEnvWithDefaultValue`: a default may hold `:` and `%`.
        assert_eq!(
            retrieve("MISSING:-default % value:-x")
                .expect("default")
                .value(),
            &Value::String("default % value:-x".into())
        );
        assert!(matches!(
            retrieve("A:B"),
            Err(ProviderError::Env(EnvError::InvalidName { .. }))
        ));
        assert!(matches!(
            retrieve("1BAD"),
            Err(ProviderError::Env(EnvError::InvalidName { .. }))
        ));
        assert!(matches!(
            retrieve(""),
            Err(ProviderError::Env(EnvError::InvalidName { .. }))
        ));
    }
}
