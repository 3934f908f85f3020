//! The [`Provider`] interface, what a provider returns ([`Retrieved`]), the scheme registry
//! ([`Providers`]) and the injectable environment ([`Env`]).
//!
//! A provider turns one URI of its scheme into a value. The same registry serves whole sources
//! (`--config file:a.yaml`) and `${scheme:opaque}` references inside values. Providers are
//! synchronous; a provider that can be watched names the file to watch ([`Provider::watch_path`])
//! and the [`crate::watch::Watcher`] does the watching, so providers hold no threads.

mod env;
mod file;
mod http;
mod inline;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use env::{Env, EnvError, EnvProvider, MapEnv, ProcessEnv};
pub use file::{FileError, FileProvider};
pub use http::{HttpError, HttpProvider};
pub use inline::YamlProvider;

use crate::uri::Uri;
use crate::value::Value;
use crate::yaml;

/// Why a provider could not produce a value.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("scheme `{scheme}` of `{uri}` is not supported; known schemes: {known}")]
    UnknownScheme {
        uri: String,
        scheme: String,
        known: String,
    },
    #[error("{0}")]
    File(#[from] FileError),
    #[error("{0}")]
    Env(#[from] EnvError),
    #[error("{0}")]
    Http(#[from] HttpError),
    /// A provider outside this crate failed.
    #[error("{uri}: {source}")]
    Custom {
        uri: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A source of configuration for one URI scheme.
pub trait Provider: Send + Sync {
    /// The scheme this provider serves, without the `:`.
    fn scheme(&self) -> &str;

    /// Produces the value behind `uri` (whose scheme is [`Provider::scheme`]).
    fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError>;

    /// The file whose changes change what `uri` retrieves, if this provider can be watched.
    fn watch_path(&self, _uri: &Uri) -> Option<PathBuf> {
        None
    }
}

/// What a provider returned: a value, the text it came from, and a hint for when that text was not
/// the YAML the caller may have expected.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieved {
    value: Value,
    text: Option<String>,
    error_hint: Option<String>,
}

impl Retrieved {
    /// Parses YAML text, as the Collector's `NewRetrievedFromYAML` does: text that is not valid YAML,
    /// or that parses as a string, is kept verbatim as a string (so `p@ss # w0rd` is not cut at the
    /// comment); otherwise the parsed value is kept together with the text.
    pub fn from_yaml(text: impl Into<String>) -> Retrieved {
        let text = text.into();
        match yaml::parse(&text) {
            Ok(Value::String(_)) => Retrieved {
                value: Value::String(text.clone()),
                text: Some(text),
                error_hint: None,
            },
            Ok(Value::Inferred { value, .. }) => Retrieved {
                value: *value,
                text: Some(text),
                error_hint: None,
            },
            Ok(value) => Retrieved {
                value,
                text: Some(text),
                error_hint: None,
            },
            Err(error) => Retrieved {
                value: Value::String(text.clone()),
                text: Some(text),
                error_hint: Some(format!(
                    "assuming string type since contents are not valid YAML: {error}"
                )),
            },
        }
    }

    /// A value with no text form; it can only be used as a whole value, not inside a longer string.
    pub fn from_value(value: Value) -> Retrieved {
        let text = match &value {
            Value::String(text) => Some(text.clone()),
            _ => None,
        };
        Retrieved {
            value,
            text,
            error_hint: None,
        }
    }

    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The text a string-typed consumer or an embedding string receives, when there is one.
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    pub fn error_hint(&self) -> Option<&str> {
        self.error_hint.as_deref()
    }

    /// The value with its text attached, for a value that is wholly one `${...}` reference.
    pub(crate) fn into_whole_value(self) -> Value {
        match (self.value, self.text) {
            (Value::String(text), _) => Value::String(text),
            (value, Some(text)) => Value::Inferred {
                value: Box::new(value),
                text,
            },
            (value, None) => value,
        }
    }

    pub(crate) fn into_parts(self) -> (Value, Option<String>) {
        (self.value, self.error_hint)
    }
}

/// The providers of one resolver, by scheme.
#[derive(Clone, Default)]
pub struct Providers {
    by_scheme: BTreeMap<String, Arc<dyn Provider>>,
}

impl Providers {
    pub fn new() -> Providers {
        Providers::default()
    }

    /// `file`, `env`, `yaml`, `http` and `https` with their defaults, reading variables from `env`:
    /// `https` trusts the public web CA roots plus the PEM file named by `HOTRULE_CONFIG_CA_FILE`
    /// in `env` ([`HttpProvider::https_from_env`]).
    pub fn standard(env: Arc<dyn Env>) -> Providers {
        let mut providers = Providers::new();
        let standard: [Arc<dyn Provider>; 5] = [
            Arc::new(FileProvider),
            Arc::new(EnvProvider::new(Arc::clone(&env))),
            Arc::new(YamlProvider),
            Arc::new(HttpProvider::http()),
            Arc::new(HttpProvider::https_from_env(env)),
        ];
        for provider in standard {
            providers
                .by_scheme
                .insert(provider.scheme().to_owned(), provider);
        }
        providers
    }

    /// Registers `provider`, replacing any provider of the same scheme; returns whether one was replaced.
    pub fn insert(&mut self, provider: Arc<dyn Provider>) -> bool {
        self.by_scheme
            .insert(provider.scheme().to_owned(), provider)
            .is_some()
    }

    pub fn get(&self, scheme: &str) -> Option<&Arc<dyn Provider>> {
        self.by_scheme.get(scheme)
    }

    pub fn is_empty(&self) -> bool {
        self.by_scheme.is_empty()
    }

    pub fn schemes(&self) -> impl Iterator<Item = &str> {
        self.by_scheme.keys().map(String::as_str)
    }

    /// The registered schemes, comma separated, for error messages.
    pub fn known_schemes(&self) -> String {
        self.by_scheme
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Retrieves `uri` from the provider of its scheme.
    pub fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError> {
        self.provider_for(uri)?.retrieve(uri)
    }

    /// The file to watch for `uri`, if its provider can be watched.
    pub fn watch_path(&self, uri: &Uri) -> Option<PathBuf> {
        self.get(uri.scheme())?.watch_path(uri)
    }

    pub(crate) fn provider_for(&self, uri: &Uri) -> Result<&Arc<dyn Provider>, ProviderError> {
        self.get(uri.scheme())
            .ok_or_else(|| ProviderError::UnknownScheme {
                uri: uri.to_string(),
                scheme: uri.scheme().to_owned(),
                known: self.known_schemes(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_yaml_keeps_strings_verbatim_and_types_the_rest() {
        let secret = Retrieved::from_yaml("p@ss # w0rd");
        assert_eq!(secret.value(), &Value::String("p@ss # w0rd".into()));
        let port = Retrieved::from_yaml("8080");
        assert_eq!(
            (port.value().typed(), port.text()),
            (&Value::Int(8080), Some("8080"))
        );
        let broken = Retrieved::from_yaml("a: b: c");
        assert_eq!(broken.value(), &Value::String("a: b: c".into()));
        assert!(
            broken
                .error_hint()
                .is_some_and(|hint| hint.contains("not valid YAML"))
        );
        assert_eq!(Retrieved::from_yaml("").value(), &Value::Null);
    }

    #[test]
    fn unknown_scheme_lists_the_known_ones() {
        let providers = Providers::standard(Arc::new(MapEnv::default()));
        let uri = Uri::parse("vault:secret/x").expect("valid uri");
        let error = providers.retrieve(&uri).expect_err("unknown scheme");
        assert_eq!(
            error.to_string(),
            "scheme `vault` of `vault:secret/x` is not supported; known schemes: env, file, http, https, yaml"
        );
    }
}
