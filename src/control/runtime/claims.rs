//! The claims index: which names every known file owns. It covers ACTIVE and INACTIVE entries
//! and bundled files without an entry, so the ownership guard never has to recompile the
//! world. It is kept in step by the workflow (on commit) and the scan (on convergence).
//!
//! The runtime layer registry is derived from it (files that are not INACTIVE claim the layers
//! they declare), so layers follow the entries through replication, restarts and deletes.

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::base::ids::RuleKey;
use crate::control::rules::layers::{FileLayers, Registry};
use crate::control::rules::ownership::FileClaims;

#[derive(Default)]
pub struct ClaimIndex {
    files: RwLock<BTreeMap<RuleKey, FileClaims>>,
    /// Bumped on every change, so cached views (the list) know when to render again.
    version: AtomicU64,
}

impl ClaimIndex {
    pub fn set(&self, key: &RuleKey, claims: FileClaims) {
        self.files.write().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), claims);
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    pub fn remove(&self, key: &RuleKey) {
        self.files.write().unwrap_or_else(|p| p.into_inner()).remove(key);
        self.version.fetch_add(1, Ordering::SeqCst);
    }

    pub fn get(&self, key: &RuleKey) -> Option<FileClaims> {
        self.files.read().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Runs `f` over every file's claims under one read lock.
    pub fn with_all<T>(&self, f: impl FnOnce(&BTreeMap<RuleKey, FileClaims>) -> T) -> T {
        f(&self.files.read().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// The runtime layers registered now: those declared by files that are not INACTIVE.
    pub fn layer_registry(&self) -> Registry {
        self.with_all(layer_registry_of)
    }
}

/// The layer registry of a set of files' claims.
pub fn layer_registry_of(files: &BTreeMap<RuleKey, FileClaims>) -> Registry {
    Registry::of(
        files
            .iter()
            .filter(|(_, held)| !held.inactive)
            .map(|(key, held)| FileLayers { key, layers: &held.layers, bundled: held.bundled }),
    )
}
