//! Per-file locks: writes to one (catalog, name) serialize; different files never contend.
//! The workflow waits for a lock (bounded); the scan only tries and skips a busy file.
//!
//! The map stays bounded: an entry nobody holds or waits for (the map's reference is its only
//! one) is dropped when the map has grown to twice its size after the last sweep. Under the
//! map's mutex nobody can take a new reference, so a dropped entry was idle and unlocked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use crate::base::ids::RuleKey;

pub type FileGuard = OwnedMutexGuard<()>;

/// The map is swept no more often than when it reaches this many entries.
const MIN_SWEEP_AT: usize = 256;

#[derive(Default)]
pub struct FileLocks {
    locks: Mutex<LockMap>,
}

#[derive(Default)]
struct LockMap {
    entries: HashMap<RuleKey, Arc<tokio::sync::Mutex<()>>>,
    /// The size at which the next sweep runs (amortized: twice the size after the last one).
    sweep_at: usize,
}

impl LockMap {
    fn sweep_if_grown(&mut self) {
        if self.entries.len() < self.sweep_at.max(MIN_SWEEP_AT) {
            return;
        }
        self.entries.retain(|_, lock| Arc::strong_count(lock) > 1);
        self.sweep_at = self.entries.len() * 2;
    }
}

impl FileLocks {
    fn handle(&self, key: &RuleKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        if !locks.entries.contains_key(key) {
            locks.sweep_if_grown();
        }
        locks.entries.entry(key.clone()).or_default().clone()
    }

    /// How many files have an entry in the map (held, awaited, or not yet swept).
    pub fn len(&self) -> usize {
        self.locks.lock().unwrap_or_else(|p| p.into_inner()).entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    use crate::base::ids::{Catalog, RuleName};

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

    #[tokio::test]
    async fn the_map_stays_bounded_and_never_drops_a_held_or_awaited_lock() {
        let locks = Arc::new(FileLocks::default());
        let held = locks.lock(&key("held"), Duration::from_secs(1)).await.expect("free");
        // A waiter on the held file keeps its entry alive too.
        let waiter = tokio::spawn({
            let locks = locks.clone();
            async move { locks.lock(&key("held"), Duration::from_secs(30)).await.is_some() }
        });
        let queued = tokio::time::timeout(Duration::from_secs(5), async {
            // The map, the guard, the waiter and this probe.
            while Arc::strong_count(&locks.handle(&key("held"))) < 4 {
                tokio::task::yield_now().await;
            }
        });
        assert!(queued.await.is_ok(), "the waiter queued on the held lock");
        let mut largest = 0;
        for n in 0..10_000 {
            let guard = locks.lock(&key(&format!("f{n}")), Duration::from_secs(1)).await.expect("free");
            drop(guard);
            largest = largest.max(locks.len());
        }
        assert!(largest <= 2 * MIN_SWEEP_AT, "map grew to {largest} entries for 10000 idle files");
        assert!(locks.try_lock(&key("held")).is_none(), "the held lock survived every sweep");
        drop(held);
        assert!(waiter.await.expect("waiter"), "the waiter got the same lock");
    }
}
