//! Layered configuration resolution, modelled on the OpenTelemetry Collector's `confmap`.
//!
//! A [`Resolver`] takes an ordered list of source URIs (`file:node.yaml`, `env:HOTRULE_CONFIG`,
//! `yaml:server::port: 8080`, `https://host/conf.yaml`; a bare path means `file:`), retrieves each
//! through the [`Provider`] of its scheme, and merges them: maps deeply, everything else replaced
//! by the later source, an explicit null included. It then expands `${scheme:opaque}` references
//! inside string values (`${PORT}` means `${env:PORT}`; `$$` is a literal `$`) and runs the
//! [`Converter`]s (such as [`RenameKeys`] for deprecated keys). The result, [`Resolved`], carries
//! the tree, the source of every leaf, warnings for the operator, and the files to watch.
//!
//! The standard providers ([`Providers::standard`], [`ResolverBuilder::standard_providers`]):
//!
//! | scheme | example | what it yields |
//! | --- | --- | --- |
//! | `file` | `file:node.yaml`, or a bare path | the file parsed as YAML; the file is watched |
//! | `env` | `env:HOTRULE_CONFIG`, `${env:PORT:-8080}`, `${env:PORT:?message}` | the variable parsed as YAML |
//! | `yaml` | `yaml:server::port: 8080` | the inline YAML (`::` separates nested keys) |
//! | `http` | `http://host:8080/node.yaml` | one GET (5 s timeout, 1 MiB limit), body parsed as YAML |
//! | `https` | `https://host/node.yaml` | the same over TLS; the certificate is verified against the public web CA roots plus the PEM file named by `HOTRULE_CONFIG_CA_FILE` (for a private CA) |
//!
//! The crate knows nothing about what the keys mean: callers decode the tree into their own types
//! with [`Resolved::decode`], print it with [`to_yaml_string`] (after [`redact`]), and re-resolve
//! when a [`Watcher`] reports a change, keeping the last good configuration if that fails.
//!
//! Module map: `uri` (URI syntax, `--set`), `yaml` (YAML reading), `value` (the tree),
//! `provider` (providers and the environment), `merge`, `expand`, `converter`, `resolver`,
//! `decode` (serde), `print` (redaction and YAML printing), `watch`.

mod converter;
mod decode;
mod expand;
mod merge;
mod print;
mod provider;
mod resolver;
mod uri;
mod value;
mod watch;
mod yaml;

#[cfg(test)]
mod tests;

pub use converter::{ConvertError, Converter, RenameKeys};
pub use decode::{DecodeError, from_value};
pub use expand::ExpandError;
pub use print::{REDACTED, redact, redact_origins, to_yaml_string};
pub use provider::{
    Env, EnvError, EnvProvider, FileError, FileProvider, HttpError, HttpProvider, MapEnv,
    ProcessEnv, Provider, ProviderError, Providers, Retrieved, YamlProvider,
};
pub use resolver::{
    DEFAULT_MAX_EXPANSION_DEPTH, DEFAULT_SCHEME, MAX_URIS, ResolveError, Resolved, Resolver,
    ResolverBuilder,
};
pub use uri::{Uri, UriError, is_valid_scheme, set_to_yaml_uri};
pub use value::{Map, Value};
pub use watch::{WatchBackend, WatchError, WatchEvent, WatchMode, WatchOptions, Watcher};
pub use yaml::{YamlError, parse as parse_yaml};
