//! The [`Resolver`]: retrieves each source URI in order, merges them, expands `${...}` references,
//! runs the converters, and returns the tree with the origin of every leaf ([`Resolved`]).
//!
//! The steps follow the Collector's `Resolver.Resolve` (`confmap/resolver.go`): merge all sources,
//! then expand (then unescape `$$`), then convert. Building validates what can be checked before
//! any IO: at least one and at most [`MAX_URIS`] URIs, well-formed and unique schemes, a known
//! scheme for every source, a registered default scheme.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

use crate::converter::{ConvertError, Converter};
use crate::decode::{DecodeError, from_value};
use crate::expand::{ExpandError, Expander, unescape_dollars};
use crate::merge::{Tracker, merge_maps, split_delimited_keys};
use crate::provider::{Env, EnvError, Provider, ProviderError, Providers, Retrieved};
use crate::uri::{Uri, UriError, is_valid_scheme};
use crate::value::{Map, Value};

/// Most source URIs one resolver accepts (the Collector's documented limit).
pub const MAX_URIS: usize = 100;
/// Default limit on rounds of recursive `${...}` expansion for one value.
pub const DEFAULT_MAX_EXPANSION_DEPTH: usize = 10;
/// The scheme a reference without one (`${NAME}`) uses by default, as `otelcol` sets it.
pub const DEFAULT_SCHEME: &str = "env";

/// Why a resolver could not be built or could not resolve.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("no configuration URIs given")]
    NoUris,
    #[error("{count} configuration URIs given; at most {limit} are supported")]
    TooManyUris { count: usize, limit: usize },
    #[error("{0}")]
    BadUri(#[from] UriError),
    #[error("no providers registered")]
    NoProviders,
    #[error("provider scheme `{scheme}` must match [A-Za-z][A-Za-z0-9+.-]+")]
    BadProviderScheme { scheme: String },
    #[error("two providers for scheme `{scheme}`")]
    DuplicateScheme { scheme: String },
    #[error("default scheme `{scheme}` has no provider; known schemes: {known}")]
    DefaultSchemeNotRegistered { scheme: String, known: String },
    #[error("{uri}: {source}")]
    Retrieve { uri: String, source: ProviderError },
    #[error("{uri}: retrieved a {kind}, but a configuration source must be a map{}", hint.as_ref().map(|hint| format!(" ({hint})")).unwrap_or_default())]
    NotAMap {
        uri: String,
        kind: &'static str,
        hint: Option<String>,
    },
    #[error("{0}")]
    Expand(#[from] ExpandError),
    #[error("{0}")]
    Convert(#[from] ConvertError),
}

/// A resolved configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The effective configuration (always a map).
    pub value: Value,
    /// For every leaf (dotted key path; list elements by index), the source that set its final value:
    /// the source URI, followed by ` via ${ref}, ...` when `${...}` expansion produced it.
    pub origins: BTreeMap<String, String>,
    /// Things the operator should fix (null-map trap, unset variables, deprecated keys); also logged.
    pub warnings: Vec<String>,
    /// The files behind `file:` sources and `${file:...}` references, to watch for changes.
    pub watched_files: Vec<PathBuf>,
}

impl Resolved {
    /// Deserializes the configuration into a typed value (typing rules: [`crate::from_value`]).
    pub fn decode<'de, T: Deserialize<'de>>(&'de self) -> Result<T, DecodeError> {
        from_value(&self.value)
    }
}

/// Resolves a fixed list of source URIs. Cheap to call again (on a watch event or SIGHUP).
pub struct Resolver {
    uris: Vec<Uri>,
    providers: Providers,
    converters: Vec<Box<dyn Converter>>,
    default_scheme: Option<String>,
    max_expansion_depth: usize,
}

impl Resolver {
    pub fn builder() -> ResolverBuilder {
        ResolverBuilder {
            uris: Vec::new(),
            providers: Providers::new(),
            duplicate_scheme: None,
            converters: Vec::new(),
            default_scheme: Some(DEFAULT_SCHEME.to_owned()),
            max_expansion_depth: DEFAULT_MAX_EXPANSION_DEPTH,
        }
    }

    pub fn uris(&self) -> &[Uri] {
        &self.uris
    }

    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    pub fn resolve(&self) -> Result<Resolved, ResolveError> {
        let mut merged = Map::new();
        let mut origins = BTreeMap::new();
        let mut warnings = Vec::new();
        let mut watched_files = Vec::new();
        for uri in &self.uris {
            let source = uri.to_string();
            watched_files.extend(self.providers.watch_path(uri));
            let retrieved = match self.providers.retrieve(uri) {
                Ok(retrieved) => retrieved,
                // As the Collector: a whole source from an unset variable is an empty
                // configuration, and a warning names the variable.
                Err(ProviderError::Env(EnvError::Unset { name })) => {
                    let warning = format!("source `{source}`: environment variable `{name}` is not set; the source is empty");
                    tracing::warn!(source = %source, name, "{warning}");
                    warnings.push(warning);
                    Retrieved::from_value(Value::Null)
                }
                Err(error) => {
                    return Err(ResolveError::Retrieve {
                        uri: source.clone(),
                        source: error,
                    });
                }
            };
            let (value, hint) = retrieved.into_parts();
            let conf = match value {
                Value::Null => Map::new(),
                Value::Map(map) => map,
                other => {
                    return Err(ResolveError::NotAMap {
                        uri: source,
                        kind: other.kind(),
                        hint,
                    });
                }
            };
            let tracker = Tracker {
                source: &source,
                origins: &mut origins,
                warnings: &mut warnings,
            };
            merge_maps(
                &mut merged,
                split_delimited_keys(conf),
                "",
                &mut Some(tracker),
            );
        }

        let mut expander = Expander::new(
            &self.providers,
            self.default_scheme.as_deref(),
            self.max_expansion_depth,
        );
        let expanded = expander.expand_tree(Value::Map(merged), "", &mut origins)?;
        warnings.append(&mut expander.warnings);
        watched_files.append(&mut expander.watched_files);

        let mut resolved = Resolved {
            value: unescape_dollars(expanded),
            origins,
            warnings,
            watched_files,
        };
        for converter in &self.converters {
            converter.convert(&mut resolved)?;
        }
        dedup_in_order(&mut resolved.warnings);
        dedup_in_order(&mut resolved.watched_files);
        Ok(resolved)
    }
}

/// Collects what a [`Resolver`] needs; [`ResolverBuilder::build`] validates it.
pub struct ResolverBuilder {
    uris: Vec<String>,
    providers: Providers,
    duplicate_scheme: Option<String>,
    converters: Vec<Box<dyn Converter>>,
    default_scheme: Option<String>,
    max_expansion_depth: usize,
}

impl ResolverBuilder {
    /// Adds a source; later sources win.
    pub fn uri(mut self, uri: impl Into<String>) -> ResolverBuilder {
        self.uris.push(uri.into());
        self
    }

    pub fn uris<S: Into<String>>(mut self, uris: impl IntoIterator<Item = S>) -> ResolverBuilder {
        self.uris.extend(uris.into_iter().map(Into::into));
        self
    }

    /// Registers a provider; two providers for one scheme are a build error.
    pub fn provider(mut self, provider: impl Provider + 'static) -> ResolverBuilder {
        self.insert_provider(Arc::new(provider));
        self
    }

    /// Registers `file`, `env` (reading `env`), `yaml`, `http` and `https` with their defaults.
    pub fn standard_providers(mut self, env: Arc<dyn Env>) -> ResolverBuilder {
        let standard = Providers::standard(env);
        for scheme in ["file", "env", "yaml", "http", "https"] {
            if let Some(provider) = standard.get(scheme) {
                self.insert_provider(Arc::clone(provider));
            }
        }
        self
    }

    pub fn converter(mut self, converter: impl Converter + 'static) -> ResolverBuilder {
        self.converters.push(Box::new(converter));
        self
    }

    /// The scheme for `${NAME}` references; `None` leaves them as text. Defaults to `env`.
    pub fn default_scheme(mut self, scheme: Option<&str>) -> ResolverBuilder {
        self.default_scheme = scheme.map(str::to_owned);
        self
    }

    pub fn max_expansion_depth(mut self, depth: usize) -> ResolverBuilder {
        self.max_expansion_depth = depth;
        self
    }

    fn insert_provider(&mut self, provider: Arc<dyn Provider>) {
        let scheme = provider.scheme().to_owned();
        if self.providers.insert(provider) && self.duplicate_scheme.is_none() {
            self.duplicate_scheme = Some(scheme);
        }
    }

    pub fn build(self) -> Result<Resolver, ResolveError> {
        if self.uris.is_empty() {
            return Err(ResolveError::NoUris);
        }
        if self.uris.len() > MAX_URIS {
            return Err(ResolveError::TooManyUris {
                count: self.uris.len(),
                limit: MAX_URIS,
            });
        }
        if self.providers.is_empty() {
            return Err(ResolveError::NoProviders);
        }
        if let Some(scheme) = self.duplicate_scheme {
            return Err(ResolveError::DuplicateScheme { scheme });
        }
        let known = self.providers.known_schemes();
        if let Some(scheme) = self
            .providers
            .schemes()
            .find(|scheme| !is_valid_scheme(scheme))
        {
            return Err(ResolveError::BadProviderScheme {
                scheme: scheme.to_owned(),
            });
        }
        if let Some(scheme) = &self.default_scheme
            && self.providers.get(scheme).is_none()
        {
            return Err(ResolveError::DefaultSchemeNotRegistered {
                scheme: scheme.clone(),
                known,
            });
        }
        let mut uris = Vec::with_capacity(self.uris.len());
        for text in &self.uris {
            let uri = Uri::parse(text)?;
            if let Err(source) = self.providers.provider_for(&uri) {
                return Err(ResolveError::Retrieve {
                    uri: uri.to_string(),
                    source,
                });
            }
            uris.push(uri);
        }
        Ok(Resolver {
            uris,
            providers: self.providers,
            converters: self.converters,
            default_scheme: self.default_scheme,
            max_expansion_depth: self.max_expansion_depth,
        })
    }
}

fn dedup_in_order<T: PartialEq>(items: &mut Vec<T>) {
    let mut kept: Vec<T> = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        if !kept.contains(&item) {
            kept.push(item);
        }
    }
    *items = kept;
}
