//! The periodic scan: brings this node's in-memory state into line with storage.
//!
//! Every interval (and whenever it is poked) the scan reads every entry from storage, plans
//! with [`plan::plan`] and carries the actions out, each under a *try* of the file's lock: a
//! file that is busy is skipped until the next scan. A storage read error leaves in-memory
//! state untouched; the scan simply runs again later. This is the loop the consistency
//! contract rests on: broadcasts only make convergence faster.
//!
//! Rolls (issue 15): every scan also reads the roll records and applies
//! `rolling::content_for(record, this node)` to each file a roll holds. The rolling content is
//! loaded through the local apply path (`load_rolling`: filter-only swaps in place, anything
//! else pauses this node only, drains, swaps, resumes); the master side needs nothing special,
//! since a roll leaves the entry (the master) untouched. A roll put moves the store's change
//! counter, so nodes react by notice as to an entry.
//!
//! The main may create measures (create-if-absent); peers never change schema. The scan writes no
//! rule entry: a tombstone past its retention is purged by the one writer ([`TombstonePurger`],
//! the workflow).

pub mod boot;
pub mod plan;
pub mod registry;
pub mod rolling;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::control::bundled::Bundled;
use crate::base::clock::now_ms;
use crate::base::ids::{Revision, RuleKey};
use crate::control::rules::ownership::FileClaims;
use crate::control::runtime::locks::FileLocks;
use crate::control::compile_pool::compile_off_thread;
use crate::control::runtime::{LoaderKind, Origin, Runtime, loaded_rule};
use crate::store::{Change, EntryStatus, RuleEntry, Store};
use crate::base::self_metrics::{SelfMetrics, labels};
use crate::base::worker::{Worker, WorkerState};
use plan::{Action, LocalView, PlanInput};

/// What became of a tombstone the scan asked to purge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purged {
    Purged,
    /// The entry is no longer that tombstone (a newer write arrived): kept.
    Moved,
    /// The file is locked by a write in progress: the next scan asks again.
    Busy,
}

pub type PurgeFuture<'a> = crate::BoxFuture<'a, Result<Purged, PurgeError>>;

/// Why the writer could not purge a tombstone (the scan asks again next time).
#[derive(Debug, thiserror::Error)]
pub enum PurgeError {
    #[error("reading {key}: {source}")]
    Read { key: RuleKey, source: crate::store::StoreError },
    #[error("removing {key}: {source}")]
    Write { key: RuleKey, source: crate::store::StoreError },
}

/// The one writer of rule entries (the workflow), as the scan sees it. The scan decides that a
/// tombstone has outlived its retention; the writer purges it under the file's lock, and only if
/// the stored entry is still that tombstone, so a purge never removes a write that arrived
/// after the scan read storage.
pub trait TombstonePurger: Send + Sync {
    fn purge_tombstone<'a>(&'a self, key: &'a RuleKey, revision: &'a Revision) -> PurgeFuture<'a>;
}

#[derive(Debug, Clone)]
pub struct ScanSettings {
    pub interval: Duration,
    pub self_heal_after: Duration,
    pub tombstone_retention: Duration,
}

impl Default for ScanSettings {
    fn default() -> Self {
        ScanSettings {
            interval: Duration::from_secs(30),
            self_heal_after: Duration::from_secs(60),
            tombstone_retention: Duration::from_secs(24 * 3600),
        }
    }
}

/// Why one scan action failed (the scan goes on with the others and retries next time).
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("compile_failed: {0}")]
    Compile(crate::compiler::CompileError),
    #[error("purging tombstone: {0}")]
    Purge(crate::store::StoreError),
}

/// What one scan did.
#[derive(Debug, Default, Clone)]
pub struct ScanReport {
    pub actions: Vec<Action>,
    pub skipped_busy: Vec<RuleKey>,
    pub failed: Vec<(RuleKey, String)>,
    pub storage_error: Option<String>,
}

pub struct Scanner {
    store: Arc<Store>,
    runtime: Arc<Runtime>,
    bundled: Arc<Bundled>,
    locks: Arc<FileLocks>,
    purger: Arc<dyn TombstonePurger>,
    settings: std::sync::RwLock<ScanSettings>,
    poke: Notify,
    /// Keys whose entry changed since the last scan ([`Scanner::poke_keys`]): a scan woken only
    /// for them reads and plans only them.
    dirty: std::sync::Mutex<std::collections::BTreeSet<RuleKey>>,
    /// A full scan was asked for ([`Scanner::poke`]).
    full_requested: std::sync::atomic::AtomicBool,
    scans: AtomicU64,
    last_scan_ms: AtomicU64,
    storage_errors: AtomicU64,
    /// Where scan durations and results are counted (`scan_seconds`, `scan_results{result}`).
    telemetry: Arc<SelfMetrics>,
    /// This node, for the content a roll assigns it (`rolling::content_for`).
    node_id: crate::base::ids::NodeId,
}

impl Scanner {
    pub fn new(
        store: Arc<Store>,
        runtime: Arc<Runtime>,
        bundled: Arc<Bundled>,
        locks: Arc<FileLocks>,
        settings: ScanSettings,
        purger: Arc<dyn TombstonePurger>,
    ) -> Scanner {
        Scanner {
            store,
            runtime,
            bundled,
            locks,
            purger,
            settings: std::sync::RwLock::new(settings),
            poke: Notify::new(),
            dirty: std::sync::Mutex::default(),
            full_requested: std::sync::atomic::AtomicBool::new(false),
            scans: AtomicU64::new(0),
            last_scan_ms: AtomicU64::new(0),
            storage_errors: AtomicU64::new(0),
            telemetry: Arc::new(SelfMetrics::new()),
            node_id: crate::base::ids::NodeId(String::new()),
        }
    }

    /// Names this node, so the scan runs the content rolls assign it. Without it the node is in
    /// no roll's list and runs the master until each roll finishes.
    pub fn with_node(mut self, node_id: crate::base::ids::NodeId) -> Scanner {
        self.node_id = node_id;
        self
    }

    /// Counts scans in the node's telemetry instead of a private one.
    pub fn with_telemetry(mut self, telemetry: Arc<SelfMetrics>) -> Scanner {
        // Every result shows from the start, at 0, so a rate over it is defined.
        for result in SCAN_RESULTS {
            let _ = telemetry.scan_results.get_or_create(&labels([("result", result)]));
        }
        self.telemetry = telemetry;
        self
    }

    pub fn settings(&self) -> ScanSettings {
        self.settings.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Changes the interval or thresholds of a running scanner (live config reload).
    pub fn update_settings(&self, settings: ScanSettings) {
        *self.settings.write().unwrap_or_else(|p| p.into_inner()) = settings;
        self.poke.notify_one();
    }

    /// Asks the worker to scan now instead of at the next tick.
    pub fn poke(&self) {
        self.full_requested.store(true, Ordering::SeqCst);
        self.poke.notify_one();
    }

    /// Asks the worker to bring `keys` in line with storage now: a replicated write changed only
    /// them. Unless a full scan is due anyway, the worker reads and plans only these keys (a
    /// point read each), instead of rereading every stored entry for each commit notice.
    pub fn poke_keys(&self, keys: impl IntoIterator<Item = RuleKey>) {
        self.dirty.lock().unwrap_or_else(|p| p.into_inner()).extend(keys);
        self.poke.notify_one();
    }

    /// The keys poked since the last call, and whether a full scan was asked for.
    fn take_pokes(&self) -> (std::collections::BTreeSet<RuleKey>, bool) {
        let keys = std::mem::take(&mut *self.dirty.lock().unwrap_or_else(|p| p.into_inner()));
        (keys, self.full_requested.swap(false, Ordering::SeqCst))
    }

    pub fn scan_count(&self) -> u64 {
        self.scans.load(Ordering::SeqCst)
    }

    pub fn last_scan_ms(&self) -> u64 {
        self.last_scan_ms.load(Ordering::SeqCst)
    }

    pub fn storage_error_count(&self) -> u64 {
        self.storage_errors.load(Ordering::SeqCst)
    }

    /// One scan. `is_main` allows measure creation (create-if-absent). Its duration and result
    /// are counted here, for the boot scan and the periodic ones alike.
    pub async fn run_once(&self, is_main: bool) -> ScanReport {
        let started = Instant::now();
        let report = self.scan(is_main).await;
        let result = scan_result(&report);
        self.telemetry.scan_seconds.get_or_create(&Vec::new()).observe(started.elapsed().as_secs_f64());
        self.telemetry.scan_results.get_or_create(&labels([("result", result)])).inc();
        report
    }

    /// A scan of `keys` only: the same plan and actions as a full scan gives them, from a point
    /// read of each (no other entry is read, no measure is created). Not counted as a scan: the
    /// periodic full scan still runs on its interval.
    pub async fn run_keys(&self, keys: &std::collections::BTreeSet<RuleKey>, is_main: bool) -> ScanReport {
        let mut entries = Vec::with_capacity(keys.len());
        for key in keys {
            match self.store.get_entry(key).await {
                Ok(Some(entry)) => entries.push(entry),
                Ok(None) => {}
                Err(e) => {
                    self.storage_errors.fetch_add(1, Ordering::SeqCst);
                    tracing::warn!(error = %e, "scan: storage unreadable; in-memory state kept as is");
                    return ScanReport { storage_error: Some(e.to_string()), ..ScanReport::default() };
                }
            }
        }
        let mut report = ScanReport::default();
        let new_measures = self.converge(&entries, Some(keys), is_main, &mut report).await;
        if is_main && !new_measures.is_empty() {
            // The main creates measures on its next full scan; none is missed, only later.
            tracing::debug!(count = new_measures.len(), "measures left for the next full scan");
            self.full_requested.store(true, Ordering::SeqCst);
            self.poke.notify_one();
        }
        report
    }

    async fn scan(&self, is_main: bool) -> ScanReport {
        let mut report = ScanReport::default();
        let entries = match self.store.read_all_entries().await {
            Ok(entries) => entries,
            Err(e) => {
                self.storage_errors.fetch_add(1, Ordering::SeqCst);
                tracing::warn!(error = %e, "scan: storage unreadable; in-memory state kept as is");
                report.storage_error = Some(e.to_string());
                return report;
            }
        };
        let new_measures = self.converge(&entries, None, is_main, &mut report).await;
        self.refresh_claims(&entries).await;
        if is_main && !new_measures.is_empty() {
            let change = Change { measures: new_measures, ..Change::default() };
            if let Err(e) = self.store.commit(change).await {
                tracing::warn!(error = %e, "scan: creating measures failed; retried next scan");
            }
        }
        self.scans.fetch_add(1, Ordering::SeqCst);
        self.last_scan_ms.store(now_ms(), Ordering::SeqCst);
        report
    }

    /// Plans `entries` against this node's runtime and bundled files (all of them, or only
    /// `only` keys) and carries the actions out; returns the measures the main should create.
    async fn converge(
        &self,
        entries: &[RuleEntry],
        only: Option<&std::collections::BTreeSet<RuleKey>>,
        is_main: bool,
        report: &mut ScanReport,
    ) -> Vec<crate::store::Measure> {
        let wanted = |key: &RuleKey| only.is_none_or(|keys| keys.contains(key));
        let settings = self.settings();
        let metas: Vec<_> = entries.iter().map(RuleEntry::meta).collect();
        let by_key: BTreeMap<&RuleKey, &RuleEntry> = entries.iter().map(|e| (&e.key, e)).collect();
        // The alarm settings in force follow their entry (or its absence: the boot file).
        let alarm_settings = crate::control::alarms::live::settings_key();
        if wanted(alarm_settings)
            && let Some(live) = self.runtime.alarm_settings()
        {
            let pushed = by_key.get(alarm_settings).filter(|e| e.status == EntryStatus::Active);
            live.sync(pushed.map(|e| crate::control::alarms::live::Pushed { content: &e.content, revision: &e.revision }));
        }
        let now = Instant::now();
        let local: BTreeMap<RuleKey, LocalView> = self
            .runtime
            .snapshot()
            .into_iter()
            .filter(|(key, _)| wanted(key))
            .map(|(key, state)| {
                let view = LocalView {
                    loaded: state.loaded.as_ref().map(|l| (l.content_hash.clone(), l.kind)),
                    peer_suspended_for: state.peer_suspended_for(now),
                };
                (key, view)
            })
            .collect();
        let bundled: BTreeMap<RuleKey, _> =
            self.bundled.iter().filter(|b| wanted(&b.key)).map(|b| (b.key.clone(), b.hash.clone())).collect();
        let rolls = self.assigned_rolls().await;
        let rolling: BTreeMap<RuleKey, crate::base::ids::ContentHash> =
            rolls.iter().filter(|(key, _)| wanted(key)).map(|(key, roll)| (key.clone(), roll.rolling.hash.clone())).collect();
        report.actions = plan::plan(&PlanInput {
            rolling: &rolling,
            stored: &metas,
            local: &local,
            bundled: &bundled,
            now_ms: now_ms(),
            self_heal_after: settings.self_heal_after,
            tombstone_retention: settings.tombstone_retention,
        });
        let mut new_measures = Vec::new();
        let actions = std::mem::take(&mut report.actions);
        for action in &actions {
            let key = action_key(action);
            if let Action::PurgeTombstone(_) = action {
                // The writer takes the file's lock itself.
                if let Some(entry) = by_key.get(key) {
                    self.purge(&entry.key, &entry.revision, report).await;
                }
                continue;
            }
            let Some(_guard) = self.locks.try_lock(key) else {
                report.skipped_busy.push(key.clone());
                continue;
            };
            let result = match action {
                Action::LoadEntry(key) => match by_key.get(key) {
                    Some(entry) => self.load_entry(entry, is_main, &mut new_measures).await,
                    None => Ok(()),
                },
                Action::LoadBundled(key) => self.load_bundled(key, is_main, &mut new_measures).await,
                Action::Unload(key) => {
                    self.runtime.unload(key);
                    self.runtime.resume(key, Origin::Peer);
                    Ok(())
                }
                Action::SelfHeal(key) => {
                    tracing::warn!(rule = %key, "self-heal: PEER suspension outlived the threshold with an unmoved entry; resuming");
                    self.runtime.resume(key, Origin::Peer);
                    Ok(())
                }
                Action::PurgeTombstone(_) => Ok(()),
                Action::LoadRolling(key) => match rolls.get(key) {
                    Some(roll) => self.load_rolling(key, roll, is_main, &mut new_measures).await,
                    None => Ok(()),
                },
            };
            if let Err(error) = result {
                let message = error.to_string();
                self.runtime.set_error(key, message.clone());
                report.failed.push((key.clone(), message));
            }
        }
        report.actions = actions;
        new_measures
    }

    async fn load_entry(
        &self,
        entry: &RuleEntry,
        is_main: bool,
        new_measures: &mut Vec<crate::store::Measure>,
    ) -> Result<(), ScanError> {
        let compiled = match self.runtime.handoff.take(&entry.key, &entry.content_hash) {
            Some(compiled) => compiled,
            None => compile_off_thread(&entry.key, &entry.content).await.map_err(ScanError::Compile)?,
        };
        let reconciled = registry::reconcile(&self.store, &entry.key, &compiled, &entry.revision);
        if is_main {
            new_measures.extend(reconciled.to_create);
        }
        self.runtime.install(
            &entry.key,
            loaded_rule(compiled, entry.content_hash.clone(), Some(entry.revision.clone()), LoaderKind::Runtime),
            reconciled.disabled,
        );
        if let Some(error) = reconciled.error {
            self.runtime.set_error(&entry.key, error);
        }
        self.runtime.resume(&entry.key, Origin::Peer);
        Ok(())
    }

    /// The files whose rolling content a roll assigns this node (rolls holding their file
    /// only: a finished roll's outcome is the entry). An unreadable record is logged and
    /// ignored: the node runs the entry for that file.
    async fn assigned_rolls(&self) -> BTreeMap<RuleKey, rolling::Assigned> {
        if self.store.roll_hashes().is_empty() {
            return BTreeMap::new();
        }
        let stored = match self.store.list_rolls().await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!(error = %e, "scan: roll records unreadable; running the entries");
                return BTreeMap::new();
            }
        };
        stored.iter().filter_map(|s| rolling::assigned(s, &self.node_id)).collect()
    }

    /// Loads a roll's rolling content on this node only: a filter-only change (against the
    /// master that runs) swaps in place; anything else pauses this node's dispatch of the file,
    /// drains it (bounded by `dispatch.drain_timeout`), swaps and resumes. No peer is paused.
    async fn load_rolling(
        &self,
        key: &RuleKey,
        roll: &rolling::Assigned,
        is_main: bool,
        new_measures: &mut Vec<crate::store::Measure>,
    ) -> Result<(), ScanError> {
        let compiled = compile_off_thread(key, &roll.rolling.bytes).await.map_err(ScanError::Compile)?;
        let reconciled = registry::reconcile(&self.store, key, &compiled, &roll.revision);
        if is_main {
            new_measures.extend(reconciled.to_create);
        }
        let filter_only = rolling::is_filter_only(self.runtime.get(key).and_then(|s| s.loaded), roll, &compiled);
        let paused = !filter_only
            && matches!(self.runtime.suspend(key, Origin::SelfOrigin, true), crate::control::runtime::SuspendResult::Suspended);
        if paused {
            let deadline = Instant::now() + self.runtime.drain_timeout();
            if !self.runtime.wait_drained(key, deadline).await {
                tracing::warn!(rule = %key, "rolling content swapped before the local drain finished");
            }
        }
        let loaded = loaded_rule(compiled, roll.rolling.hash.clone(), Some(roll.revision.clone()), LoaderKind::Runtime);
        self.runtime.install(key, loaded, reconciled.disabled);
        if let Some(error) = reconciled.error {
            self.runtime.set_error(key, error);
        }
        if paused {
            self.runtime.resume(key, Origin::SelfOrigin);
        }
        self.runtime.resume(key, Origin::Peer);
        tracing::info!(rule = %key, hash = %roll.rolling.hash, filter_only, "rolling content loaded on this node");
        Ok(())
    }

    async fn load_bundled(
        &self,
        key: &RuleKey,
        is_main: bool,
        new_measures: &mut Vec<crate::store::Measure>,
    ) -> Result<(), ScanError> {
        let Some(bundled) = self.bundled.get(key) else { return Ok(()) };
        let compiled = compile_off_thread(key, &bundled.content).await.map_err(ScanError::Compile)?;
        let reconciled = registry::reconcile(&self.store, key, &compiled, &crate::base::ids::Revision::zero());
        if is_main {
            new_measures.extend(reconciled.to_create);
        }
        self.runtime.claims.set(key, FileClaims::of(&compiled, false, true));
        self.runtime.install(key, loaded_rule(compiled, bundled.hash.clone(), None, LoaderKind::Bundled), reconciled.disabled);
        if let Some(error) = reconciled.error {
            self.runtime.set_error(key, error);
        }
        self.runtime.resume(key, Origin::Peer);
        Ok(())
    }

    async fn purge(&self, key: &RuleKey, revision: &Revision, report: &mut ScanReport) {
        match self.purger.purge_tombstone(key, revision).await {
            Ok(Purged::Purged) => {}
            Ok(Purged::Moved) => tracing::debug!(rule = %key, "tombstone replaced before its purge; kept"),
            Ok(Purged::Busy) => report.skipped_busy.push(key.clone()),
            Err(e) => {
                let message = format!("purging tombstone: {e}");
                self.runtime.set_error(key, message.clone());
                report.failed.push((key.clone(), message));
            }
        }
    }

    /// Makes sure every stored live entry has claims in the index (INACTIVE ones included).
    async fn refresh_claims(&self, entries: &[RuleEntry]) {
        for entry in entries {
            if entry.status == EntryStatus::Deleted || self.runtime.claims.get(&entry.key).is_some() {
                continue;
            }
            if let Ok(compiled) = compile_off_thread(&entry.key, &entry.content).await {
                self.runtime.claims.set(
                    &entry.key,
                    FileClaims::of(&compiled, entry.status == EntryStatus::Inactive, self.bundled.contains(&entry.key)),
                );
            }
        }
    }
}

/// Every value of `scan_results{result}`.
pub const SCAN_RESULTS: [&str; 3] = ["ok", "action_failed", "storage_error"];

/// How a scan ended, as `scan_results{result}` counts it: `storage_error` (storage unreadable,
/// nothing done), `action_failed` (at least one action failed; retried next scan), else `ok`.
pub fn scan_result(report: &ScanReport) -> &'static str {
    if report.storage_error.is_some() {
        "storage_error"
    } else if !report.failed.is_empty() {
        "action_failed"
    } else {
        "ok"
    }
}

fn action_key(action: &Action) -> &RuleKey {
    match action {
        Action::LoadEntry(k)
        | Action::LoadBundled(k)
        | Action::Unload(k)
        | Action::SelfHeal(k)
        | Action::PurgeTombstone(k)
        | Action::LoadRolling(k) => k,
    }
}

/// The scan worker: one scan per interval or poke. It learns whether this node is the main
/// (only the main creates measures) from the cluster view; a lone node always is.
pub struct ScanWorker {
    scanner: Arc<Scanner>,
    main_view: Option<Box<dyn MainView>>,
    /// The interval passed since the last scan: the next one is a full scan.
    interval_passed: bool,
    /// Roll records stored here (written on this node or replicated to it).
    roll_changes: tokio::sync::watch::Receiver<u64>,
}

/// Whether this node is the main right now, read at every scan. The node gives the scan the
/// cluster view's watch channel through this (the scan itself never imports the cluster).
pub trait MainView: Send + Sync {
    fn is_main(&self) -> bool;
}

impl ScanWorker {
    /// `main_view` is `None` for a lone node, which is always the main.
    pub fn new(scanner: Arc<Scanner>, main_view: Option<Box<dyn MainView>>) -> ScanWorker {
        let roll_changes = scanner.store.subscribe_rolls();
        ScanWorker { scanner, main_view, interval_passed: false, roll_changes }
    }

    fn is_main(&self) -> bool {
        self.main_view.as_ref().is_none_or(|view| view.is_main())
    }
}

#[async_trait::async_trait]
impl Worker for ScanWorker {
    fn name(&self) -> &'static str {
        "scan"
    }

    /// Boot has just scanned: the first scan waits for the interval or a poke.
    fn initial_state(&self) -> WorkerState {
        WorkerState::Idle
    }

    async fn work(&mut self) -> WorkerState {
        let (keys, full_requested) = self.scanner.take_pokes();
        if full_requested || std::mem::take(&mut self.interval_passed) {
            let report = self.scanner.run_once(self.is_main()).await;
            if !report.actions.is_empty() || !report.failed.is_empty() {
                tracing::info!(actions = ?report.actions, failed = ?report.failed, "scan applied changes");
            }
        } else if !keys.is_empty() {
            // One per replicated write under load: debug, not info.
            let report = self.scanner.run_keys(&keys, self.is_main()).await;
            if !report.failed.is_empty() {
                tracing::info!(actions = ?report.actions, failed = ?report.failed, "scan of changed keys failed");
            } else if !report.actions.is_empty() {
                tracing::debug!(actions = ?report.actions, "scan of changed keys applied changes");
            }
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        let interval = self.scanner.settings().interval;
        tokio::select! {
            _ = tokio::time::sleep(interval) => self.interval_passed = true,
            _ = self.scanner.poke.notified() => {}
            // A roll record moved: the content this node is assigned may have changed.
            Ok(()) = self.roll_changes.changed() => self.scanner.full_requested.store(true, Ordering::SeqCst),
        }
        WorkerState::Busy
    }
}

#[cfg(test)]
mod tests;
