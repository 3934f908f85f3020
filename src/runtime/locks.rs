//! Per-file locks: writes to one (catalog, name) serialize; different files never contend.
//! The workflow waits for a lock (bounded); the scan only tries and skips a busy file.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use crate::ids::RuleKey;

pub type FileGuard = OwnedMutexGuard<()>;

#[derive(Default)]
pub struct FileLocks {
    locks: Mutex<HashMap<RuleKey, Arc<tokio::sync::Mutex<()>>>>,
}

impl FileLocks {
    fn handle(&self, key: &RuleKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(key.clone()).or_default().clone()
    }

    /// Waits up to `timeout` for the file's lock.
    pub async fn lock(&self, key: &RuleKey, timeout: Duration) -> Option<FileGuard> {
        tokio::time::timeout(timeout, self.handle(key).lock_owned()).await.ok()
    }

    /// Takes the file's lock only if it is free.
    pub fn try_lock(&self, key: &RuleKey) -> Option<FileGuard> {
        self.handle(key).try_lock_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Catalog, RuleName};

    fn key(n: &str) -> RuleKey {
        RuleKey::new(Catalog::OtelRules, RuleName::parse(n).expect("name"))
    }

    #[tokio::test]
    async fn one_file_serializes_and_different_files_do_not_contend() {
        let locks = FileLocks::default();
        let held = locks.lock(&key("a"), Duration::from_secs(1)).await.expect("free");
        assert!(locks.try_lock(&key("a")).is_none(), "same file is busy");
        assert!(locks.lock(&key("a"), Duration::from_millis(20)).await.is_none(), "times out");
        assert!(locks.try_lock(&key("b")).is_some(), "another file is free");
        drop(held);
        assert!(locks.try_lock(&key("a")).is_some(), "released");
    }
}
