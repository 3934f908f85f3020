//! The claims index: which names every known file owns. It covers ACTIVE and INACTIVE entries
//! and bundled files without an entry, so the ownership guard never has to recompile the
//! world. It is kept in step by the workflow (on commit) and the scan (on convergence).

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::ids::RuleKey;
use crate::rules::ownership::FileClaims;

#[derive(Default)]
pub struct ClaimIndex {
    files: RwLock<BTreeMap<RuleKey, FileClaims>>,
}

impl ClaimIndex {
    pub fn set(&self, key: &RuleKey, claims: FileClaims) {
        self.files.write().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), claims);
    }

    pub fn remove(&self, key: &RuleKey) {
        self.files.write().unwrap_or_else(|p| p.into_inner()).remove(key);
    }

    pub fn get(&self, key: &RuleKey) -> Option<FileClaims> {
        self.files.read().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Runs `f` over every file's claims under one read lock.
    pub fn with_all<T>(&self, f: impl FnOnce(&BTreeMap<RuleKey, FileClaims>) -> T) -> T {
        f(&self.files.read().unwrap_or_else(|p| p.into_inner()))
    }
}
