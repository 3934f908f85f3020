//! The `yaml` provider: the opaque part is the YAML itself (`yaml:server::port: 8080`).
//!
//! As in the Collector, `::` in a key separates path segments; that splitting is done by the
//! resolver for every source (see `crate::resolver`), so this provider only parses.

use super::{Provider, ProviderError, Retrieved};
use crate::uri::Uri;

/// Serves inline `yaml:` URIs.
#[derive(Debug, Clone, Copy, Default)]
pub struct YamlProvider;

impl Provider for YamlProvider {
    fn scheme(&self) -> &str {
        "yaml"
    }

    fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError> {
        Ok(Retrieved::from_yaml(uri.opaque()))
    }
}
