//! Scenario tests through the public API, with an in-memory provider, an injected environment and
//! throw-away directories. Pure merge/expansion tests never touch the process environment.

mod collector_e2e;
mod collector_expand;
mod expand;
mod http;
mod https;
mod merge;
mod null;
mod providers;
mod watch;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{MapEnv, Provider, ProviderError, Resolved, Resolver, ResolverBuilder, Retrieved, Uri};

/// Serves `mem:NAME` from a fixed set of YAML texts.
pub(crate) struct MemoryProvider {
    documents: BTreeMap<String, String>,
}

impl MemoryProvider {
    pub(crate) fn new<'a>(
        documents: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> MemoryProvider {
        MemoryProvider {
            documents: documents
                .into_iter()
                .map(|(name, text)| (name.to_owned(), text.to_owned()))
                .collect(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("no document named `{0}`")]
struct MissingDocument(String);

impl Provider for MemoryProvider {
    fn scheme(&self) -> &str {
        "mem"
    }

    fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError> {
        match self.documents.get(uri.opaque()) {
            Some(text) => Ok(Retrieved::from_yaml(text.clone())),
            None => Err(ProviderError::Custom {
                uri: uri.to_string(),
                source: Box::new(MissingDocument(uri.opaque().to_owned())),
            }),
        }
    }
}

/// A builder with the standard providers over `env`, the in-memory documents, and `uris`.
pub(crate) fn builder<'a>(
    uris: &[&str],
    env: &[(&str, &str)],
    documents: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> ResolverBuilder {
    Resolver::builder()
        .uris(uris.iter().copied())
        .standard_providers(Arc::new(MapEnv::new(env.iter().copied())))
        .provider(MemoryProvider::new(documents))
}

/// Resolves `uris` with the standard providers over `env` and the in-memory documents.
pub(crate) fn resolve<'a>(
    uris: &[&str],
    env: &[(&str, &str)],
    documents: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Resolved, crate::ResolveError> {
    builder(uris, env, documents).build()?.resolve()
}

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "hotrule-confmap-{}-{tag}-{unique}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path.join(name);
        std::fs::write(&path, text).expect("write temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
