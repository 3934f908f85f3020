//! The node's in-memory rule state: what is loaded, whether dispatch is suspended, and the
//! last apply error of each file, plus the claims index used by the ownership guard.
//!
//! The workflow and the scan change it; HTTP handlers only read it. Every change bumps a
//! `watch` counter so tests and waiters can wait on a condition instead of sleeping.
//! Suspension follows the origin lattice `NONE < {SELF, PEER} < BOTH`: SELF is this node's own
//! apply, PEER a pause from the main. A file is SUSPENDED exactly when its origin is not NONE.
//!
//! Each file also has an evaluation gate (see `gate`): dispatch opens an evaluation with
//! [`Runtime::begin_eval`] under the same lock a suspend takes, so after `suspend` returns no
//! new evaluation starts and [`Runtime::wait_drained`] waits exactly for those already open.

pub mod claims;
pub mod gate;
pub mod handoff;
pub mod locks;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::compiler::Compiled;
use crate::base::ids::{ContentHash, Revision, RuleKey};
pub use claims::ClaimIndex;
pub use gate::{EvalGuard, Gate, GateClosed};

/// The default bound of a drain wait (`dispatch.drain_timeout`).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the loaded content came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoaderKind {
    Runtime,
    Bundled,
}

impl LoaderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LoaderKind::Runtime => "RUNTIME",
            LoaderKind::Bundled => "BUNDLED",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspendOrigin {
    None,
    SelfOrigin,
    Peer,
    Both,
}

impl SuspendOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            SuspendOrigin::None => "NONE",
            SuspendOrigin::SelfOrigin => "SELF",
            SuspendOrigin::Peer => "PEER",
            SuspendOrigin::Both => "BOTH",
        }
    }
}

/// The requested origin of a suspend or resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    SelfOrigin,
    Peer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspendResult {
    Suspended,
    AlreadySuspended,
    NotPresent,
    /// Already suspended by the other origin.
    Rejected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeResult {
    Resumed,
    NotSuspendedBySender,
    NotPresent,
    /// The other origin still holds the file.
    PartiallyResumed,
}

/// Compiled content in service on this node.
#[derive(Debug, Clone)]
pub struct LoadedRule {
    pub compiled: Arc<Compiled>,
    pub content_hash: ContentHash,
    /// The entry revision this content came from (None for bundled content).
    pub revision: Option<Revision>,
    pub kind: LoaderKind,
    pub loaded_at_ms: u64,
}

/// A runtime record for compiled content, loaded now.
pub fn loaded_rule(compiled: Compiled, hash: ContentHash, revision: Option<Revision>, kind: LoaderKind) -> LoadedRule {
    LoadedRule { compiled: Arc::new(compiled), content_hash: hash, revision, kind, loaded_at_ms: crate::base::clock::now_ms() }
}

/// Everything this node knows about one file at run time.
#[derive(Debug, Clone)]
pub struct RuleRuntime {
    pub loaded: Option<LoadedRule>,
    pub origin: SuspendOrigin,
    pub suspended_since: Option<Instant>,
    pub last_apply_error: String,
    /// Metrics disabled because their stored shape differs from the file's (boot mismatch).
    pub disabled_metrics: BTreeSet<String>,
}

impl RuleRuntime {
    fn empty() -> RuleRuntime {
        RuleRuntime {
            loaded: None,
            origin: SuspendOrigin::None,
            suspended_since: None,
            last_apply_error: String::new(),
            disabled_metrics: BTreeSet::new(),
        }
    }

    /// RUNNING, SUSPENDED or NOT_LOADED.
    pub fn local_state(&self) -> &'static str {
        match (&self.loaded, self.origin) {
            (_, o) if o != SuspendOrigin::None => "SUSPENDED",
            (Some(_), _) => "RUNNING",
            (None, _) => "NOT_LOADED",
        }
    }

    /// How long the file has been suspended with origin exactly PEER.
    pub fn peer_suspended_for(&self, now: Instant) -> Option<Duration> {
        match (self.origin, self.suspended_since) {
            (SuspendOrigin::Peer, Some(since)) => Some(now.saturating_duration_since(since)),
            _ => None,
        }
    }
}

/// Hands a reset's metrics to the peers' alarm rules (without waiting for them).
pub type AlarmResetPeers = Arc<dyn Fn(BTreeSet<String>) + Send + Sync>;

/// A recorded alarm-window reset: the metrics a rule change named, and the alarm rules that
/// read one of them (their windows and states were dropped, without a recovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmReset {
    pub key: RuleKey,
    pub metrics: BTreeSet<String>,
    pub alarm_rules: Vec<String>,
}

/// The rule states and their evaluation gates, under one lock: a suspend (write lock) and an
/// evaluation's start (read lock, see [`Runtime::begin_eval`]) exclude each other.
#[derive(Default)]
struct Files {
    rules: BTreeMap<RuleKey, RuleRuntime>,
    /// One gate per key with a state, kept past the state's removal while an evaluation still
    /// holds it (`orphans`), so a drain after an unload still sees that evaluation.
    gates: HashMap<RuleKey, Arc<Gate>>,
    orphans: Vec<RuleKey>,
}

pub struct Runtime {
    files: RwLock<Files>,
    pub claims: ClaimIndex,
    /// Replicated content compiled on apply, waiting for the scan that loads it.
    pub handoff: handoff::CompiledHandoff,
    changes_tx: watch::Sender<u64>,
    alarm_resets: AtomicU64,
    last_alarm_reset: RwLock<Option<AlarmReset>>,
    /// The running alarm rules, once the node has built them.
    alarms: RwLock<Option<crate::control::alarms::SharedAlarms>>,
    /// Tells the peers' alarm rules about a reset (in a cluster).
    alarm_reset_peers: RwLock<Option<AlarmResetPeers>>,
    /// The alarm settings in force, which each scan converges to the stored entry.
    alarm_settings: RwLock<Option<Arc<crate::control::alarms::live::LiveSettings>>>,
    drain_timeout_ms: AtomicU64,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new()
    }
}

impl Runtime {
    pub fn new() -> Runtime {
        let (changes_tx, _) = watch::channel(0);
        Runtime {
            files: RwLock::new(Files::default()),
            claims: ClaimIndex::default(),
            handoff: handoff::CompiledHandoff::default(),
            changes_tx,
            alarm_resets: AtomicU64::new(0),
            last_alarm_reset: RwLock::new(None),
            alarms: RwLock::new(None),
            alarm_reset_peers: RwLock::new(None),
            alarm_settings: RwLock::new(None),
            drain_timeout_ms: AtomicU64::new(DEFAULT_DRAIN_TIMEOUT.as_millis() as u64),
        }
    }

    /// A receiver that sees a new value after every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes_tx.subscribe()
    }

    /// A counter that moves on every change (what `subscribe` receivers see).
    pub fn version(&self) -> u64 {
        *self.changes_tx.borrow()
    }

    pub fn get(&self, key: &RuleKey) -> Option<RuleRuntime> {
        read(&self.files).rules.get(key).cloned()
    }

    pub fn snapshot(&self) -> BTreeMap<RuleKey, RuleRuntime> {
        read(&self.files).rules.clone()
    }

    /// Runs `f` over every file's state under one read lock (no copy).
    pub fn with_all<T>(&self, f: impl FnOnce(&BTreeMap<RuleKey, RuleRuntime>) -> T) -> T {
        f(&read(&self.files).rules)
    }

    /// Runs `f` on the file's state (created empty if absent) and publishes the change.
    fn update<T>(&self, key: &RuleKey, f: impl FnOnce(&mut RuleRuntime) -> T) -> T {
        let mut files = write(&self.files);
        let Files { rules, gates, orphans } = &mut *files;
        let state = rules.entry(key.clone()).or_insert_with(RuleRuntime::empty);
        let out = f(state);
        gates.entry(key.clone()).or_default();
        if state.loaded.is_none() && state.origin == SuspendOrigin::None && state.last_apply_error.is_empty() {
            rules.remove(key);
            if !orphans.contains(key) {
                orphans.push(key.clone());
            }
        }
        // A gate outlives its state only while an evaluation still holds it.
        orphans.retain(|orphan| {
            let busy = !rules.contains_key(orphan) && gates.get(orphan).is_some_and(|g| g.in_flight() > 0);
            if !busy && !rules.contains_key(orphan) {
                gates.remove(orphan);
            }
            busy
        });
        drop(files);
        self.changes_tx.send_modify(|v| *v = v.wrapping_add(1));
        out
    }

    /// Opens an evaluation of the file's loaded content: the guard counts it in flight until it
    /// is dropped. Refused while the file is suspended (the caller drops and counts the
    /// samples) or not loaded. Taken under the lock a suspend takes, so once `suspend` has
    /// returned no new evaluation starts, and [`Runtime::wait_drained`] waits exactly for the
    /// ones already open.
    pub fn begin_eval(&self, key: &RuleKey) -> Result<EvalGuard, GateClosed> {
        let files = read(&self.files);
        let Some(state) = files.rules.get(key) else { return Err(GateClosed::NotLoaded) };
        let Some(loaded) = &state.loaded else { return Err(GateClosed::NotLoaded) };
        if state.origin != SuspendOrigin::None {
            return Err(GateClosed::Suspended(loaded.clone()));
        }
        let Some(gate) = files.gates.get(key) else { return Err(GateClosed::NotLoaded) };
        Ok(EvalGuard::open(gate.clone(), loaded.clone(), state.disabled_metrics.clone()))
    }

    /// Evaluations of the file open now (0 when none or unknown).
    pub fn in_flight(&self, key: &RuleKey) -> usize {
        read(&self.files).gates.get(key).map_or(0, |g| g.in_flight())
    }

    /// Waits until no evaluation of the file is open, or `deadline` passes. True when drained.
    /// Exact after a suspend or unload: no evaluation can start in between (see `begin_eval`).
    pub async fn wait_drained(&self, key: &RuleKey, deadline: Instant) -> bool {
        let gate = read(&self.files).gates.get(key).cloned();
        match gate {
            Some(gate) => gate.wait_idle(deadline).await,
            None => true,
        }
    }

    /// How long a drain may take before the waiter gives up (`dispatch.drain_timeout`).
    pub fn drain_timeout(&self) -> Duration {
        Duration::from_millis(self.drain_timeout_ms.load(Ordering::Relaxed))
    }

    pub fn set_drain_timeout(&self, timeout: Duration) {
        self.drain_timeout_ms.store(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Swaps in compiled content and clears the last error and the disabled set.
    pub fn install(&self, key: &RuleKey, loaded: LoadedRule, disabled_metrics: BTreeSet<String>) {
        self.update(key, |s| {
            s.loaded = Some(loaded);
            s.last_apply_error.clear();
            s.disabled_metrics = disabled_metrics;
        });
    }

    /// Drops the loaded content (the backend measure is untouched).
    pub fn unload(&self, key: &RuleKey) {
        self.update(key, |s| {
            s.loaded = None;
            s.last_apply_error.clear();
            s.disabled_metrics.clear();
        });
    }

    pub fn set_error(&self, key: &RuleKey, message: impl Into<String>) {
        let message = message.into();
        self.update(key, |s| s.last_apply_error = message);
    }

    /// Applies the suspend lattice for `origin`.
    pub fn suspend(&self, key: &RuleKey, origin: Origin, require_present: bool) -> SuspendResult {
        self.update(key, |s| {
            if require_present && s.loaded.is_none() {
                return SuspendResult::NotPresent;
            }
            let (same, other) = lattice_parts(s.origin, origin);
            if same {
                return SuspendResult::AlreadySuspended;
            }
            if other {
                return SuspendResult::Rejected;
            }
            s.origin = match origin {
                Origin::SelfOrigin => SuspendOrigin::SelfOrigin,
                Origin::Peer => SuspendOrigin::Peer,
            };
            s.suspended_since = Some(Instant::now());
            SuspendResult::Suspended
        })
    }

    /// Clears `origin` from the file's suspension; the other origin, if set, stays.
    pub fn resume(&self, key: &RuleKey, origin: Origin) -> ResumeResult {
        if !read(&self.files).rules.contains_key(key) {
            return ResumeResult::NotPresent;
        }
        self.update(key, |s| {
            let (same, other) = lattice_parts(s.origin, origin);
            if !same {
                return ResumeResult::NotSuspendedBySender;
            }
            if other {
                s.origin = match origin {
                    Origin::SelfOrigin => SuspendOrigin::Peer,
                    Origin::Peer => SuspendOrigin::SelfOrigin,
                };
                s.suspended_since = Some(Instant::now());
                return ResumeResult::PartiallyResumed;
            }
            s.origin = SuspendOrigin::None;
            s.suspended_since = None;
            ResumeResult::Resumed
        })
    }

    /// The alarm rules that [`Runtime::reset_alarm_windows`] resets.
    pub fn set_alarms(&self, alarms: crate::control::alarms::SharedAlarms) {
        *write(&self.alarms) = Some(alarms);
    }

    /// Where a reset goes besides this node's rules: the peers (each entity's alarm state lives
    /// on its owner).
    pub fn set_alarm_reset_peers(&self, peers: AlarmResetPeers) {
        *write(&self.alarm_reset_peers) = Some(peers);
    }

    /// The node's alarm settings, which scans converge to the stored entry.
    pub fn set_alarm_settings(&self, live: Arc<crate::control::alarms::live::LiveSettings>) {
        *write(&self.alarm_settings) = Some(live);
    }

    /// The node's alarm settings (none before the node built them).
    pub fn alarm_settings(&self) -> Option<Arc<crate::control::alarms::live::LiveSettings>> {
        read(&self.alarm_settings).clone()
    }

    /// The running alarm rules (none before the node built them).
    pub fn alarms(&self) -> Option<crate::control::alarms::SharedAlarms> {
        read(&self.alarms).clone()
    }

    /// The contract's alarm reset (SkyWalking's `AlarmKernelService.reset`): every alarm rule
    /// reading one of `metrics` drops its windows and states, without a recovery. Counted in
    /// `/runtime/rule/list`'s `alarmResets` (one per rule change that named metrics) and logged
    /// with the alarm rules reset; returns those rules.
    pub fn reset_alarm_windows(&self, key: &RuleKey, metrics: BTreeSet<String>) -> Vec<String> {
        if metrics.is_empty() {
            return Vec::new();
        }
        let alarm_rules = match read(&self.alarms).as_ref() {
            Some(alarms) => alarms.lock().unwrap_or_else(|p| p.into_inner()).reset(&metrics),
            None => Vec::new(),
        };
        if let Some(peers) = read(&self.alarm_reset_peers).as_ref() {
            peers(metrics.clone());
        }
        tracing::info!(rule = %key, metrics = ?metrics, alarm_rules = ?alarm_rules, "alarm windows reset");
        self.alarm_resets.fetch_add(1, Ordering::SeqCst);
        *write(&self.last_alarm_reset) = Some(AlarmReset { key: key.clone(), metrics, alarm_rules: alarm_rules.clone() });
        alarm_rules
    }

    pub fn alarm_reset_count(&self) -> u64 {
        self.alarm_resets.load(Ordering::SeqCst)
    }

    pub fn last_alarm_reset(&self) -> Option<AlarmReset> {
        read(&self.last_alarm_reset).clone()
    }
}

/// (is `requested` already set, is the other origin set).
fn lattice_parts(current: SuspendOrigin, requested: Origin) -> (bool, bool) {
    let has_self = matches!(current, SuspendOrigin::SelfOrigin | SuspendOrigin::Both);
    let has_peer = matches!(current, SuspendOrigin::Peer | SuspendOrigin::Both);
    match requested {
        Origin::SelfOrigin => (has_self, has_peer),
        Origin::Peer => (has_peer, has_self),
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
