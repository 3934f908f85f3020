//! The IO side of hook delivery: the [`AlarmNotifier`] the alarm engine hands each round of
//! messages to, and the one [`HookWorker`] that posts them.
//!
//! - **Never blocking the caller.** [`AlarmNotifier::notify`] plans the round (`plan.rs`), puts
//!   each delivery (one POST) on its lane's queue under a short lock, wakes the worker and
//!   returns. A slow or dead hook never delays alarm evaluation.
//! - **Lanes.** One lane per (hook, URL), each with a bounded queue and at most one delivery
//!   being tried, so deliveries to one receiver keep their order (a recovery never overtakes
//!   its firing) and a dead receiver holds up only its own lane. The lanes' attempts run
//!   concurrently on the worker's task set, each bounded by the timeout.
//! - **Full queue: the oldest goes.** A newer notification says more about now than an older
//!   one, and a receiver coming back after an outage gets the latest state first. Each drop is
//!   counted (`failures{reason="queue_full"}` and `dropped{reason="queue_full"}`) and logged.
//! - **Retries** follow [`super::plan::next_step`]: 5xx, 408, 429, timeouts and unreachable
//!   receivers are retried with exponential backoff up to `max_attempts`, then given up
//!   (`dropped{reason="gave_up"}`); other statuses are dropped at once (`refused`). Every failed
//!   attempt is counted in `failures` by reason.
//! - **Shutdown** drops what is still waiting or in flight, counted as `shutdown`.
//!
//! Metrics: `hotrule_alarm_hook_sent_total{hook,kind}`, `hotrule_alarm_hook_failures_total{hook,reason}`,
//! `hotrule_alarm_hook_dropped_total{hook,reason}` and `hotrule_alarm_hook_queue{hook}`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::Notify;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

use super::message::{AlarmMessage, AlarmRecoveryMessage};
use super::plan::{Delivery, Step, next_step, plan};
use super::sender::{HookError, HookSender};
use super::target::{DeliverySettings, HookTarget, TargetError};
use crate::base::self_metrics::{SelfMetrics, labels};
use crate::base::worker::{Worker, WorkerState};

/// The worker's name in logs and `/readyz`.
pub const WORKER_NAME: &str = "alarm-hooks";

/// How much longer than its timeout the worker lets an attempt run before it ends it itself.
const ATTEMPT_GRACE: Duration = Duration::from_millis(100);

/// A lane: one URL of one hook.
type LaneKey = (Arc<str>, String);

#[derive(Default)]
struct Lane {
    queue: VecDeque<Delivery>,
    /// The worker is trying a delivery of this lane (in flight or waiting to retry).
    busy: bool,
}

/// What the notifier and the worker share: the lanes, and the worker's wake-up.
struct Shared {
    lanes: Mutex<BTreeMap<LaneKey, Lane>>,
    wake: Notify,
    capacity: usize,
    metrics: Arc<SelfMetrics>,
}

impl Shared {
    fn lanes(&self) -> std::sync::MutexGuard<'_, BTreeMap<LaneKey, Lane>> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets `hook`'s queue gauge from `lanes` (the caller holds the lock).
    fn publish_depth(&self, lanes: &BTreeMap<LaneKey, Lane>, hook: &str) {
        let depth: usize = lanes.iter().filter(|((lane_hook, _), _)| &**lane_hook == hook).map(|(_, lane)| lane.queue.len() + usize::from(lane.busy)).sum();
        self.metrics.alarm_hook_queue.get_or_create(&labels([("hook", hook)])).set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    fn count_dropped(&self, hook: &str, reason: &str, deliveries: u64) {
        self.metrics.alarm_hook_dropped.get_or_create(&labels([("hook", hook), ("reason", reason)])).inc_by(deliveries);
    }
}

/// What [`AlarmNotifier::notify`] did with a round.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NotifyReport {
    /// Deliveries queued.
    pub queued: usize,
    /// Older deliveries pushed out of full queues to make room.
    pub pushed_out: usize,
    /// Hook ids named by messages that no hook has.
    pub unknown_hooks: Vec<String>,
}

/// The alarm engine's handle: cheap to clone, never blocks.
#[derive(Clone)]
pub struct AlarmNotifier {
    targets: Arc<RwLock<Arc<BTreeMap<String, HookTarget>>>>,
    shared: Arc<Shared>,
}

/// The notifier and its worker for `targets` (hook ids must be unique). Spawn the worker on the
/// node's [`crate::base::worker::WorkerRunner`]; hand the notifier to the alarm engine.
pub fn hook_delivery(
    targets: Vec<HookTarget>,
    settings: DeliverySettings,
    sender: Arc<dyn HookSender>,
    metrics: Arc<SelfMetrics>,
) -> Result<(AlarmNotifier, HookWorker), TargetError> {
    let targets = by_id(targets)?;
    let shared = Arc::new(Shared { lanes: Mutex::new(BTreeMap::new()), wake: Notify::new(), capacity: settings.queue_capacity.max(1), metrics });
    let notifier = AlarmNotifier { targets: Arc::new(RwLock::new(Arc::new(targets))), shared: shared.clone() };
    let worker = HookWorker { shared, sender, settings, current: BTreeMap::new(), attempts: JoinSet::new(), in_flight: HashMap::new() };
    Ok((notifier, worker))
}

fn by_id(targets: Vec<HookTarget>) -> Result<BTreeMap<String, HookTarget>, TargetError> {
    let mut out = BTreeMap::new();
    for target in targets {
        let id = target.id.clone();
        if out.insert(id.clone(), target).is_some() {
            return Err(TargetError::Duplicate { hook: id });
        }
    }
    Ok(out)
}

impl AlarmNotifier {
    /// Queues one round of messages (SkyWalking's `doAlarm(firing)` and
    /// `doAlarmRecovery(recoveries)` of one tick) for delivery, grouped by hook. Returns at once.
    pub fn notify(&self, firing: &[AlarmMessage], recoveries: &[AlarmRecoveryMessage]) -> NotifyReport {
        if firing.is_empty() && recoveries.is_empty() {
            return NotifyReport::default();
        }
        let targets = self.targets.read().unwrap_or_else(|p| p.into_inner()).clone();
        let planned = plan(&targets, firing, recoveries);
        for hook in &planned.unknown_hooks {
            tracing::warn!(%hook, "alarm messages name a hook that is not configured; not sent");
            self.shared.count_dropped(hook, "unknown_hook", 1);
        }
        for (hook, error) in &planned.unencodable {
            tracing::error!(%hook, %error, "alarm messages could not be encoded; not sent");
            self.shared.count_dropped(hook, "encode", 1);
        }
        let mut report = NotifyReport { unknown_hooks: planned.unknown_hooks.into_iter().collect(), ..NotifyReport::default() };
        for delivery in planned.deliveries {
            report.queued += 1;
            if self.enqueue(delivery) {
                report.pushed_out += 1;
            }
        }
        report
    }

    /// Queues one delivery on its lane; true when the lane was full and its oldest delivery was
    /// dropped to make room. Never blocks beyond a short lock.
    pub fn enqueue(&self, delivery: Delivery) -> bool {
        let hook = delivery.hook.clone();
        let key: LaneKey = (hook.clone(), delivery.url.to_string());
        let pushed_out = {
            let mut lanes = self.shared.lanes();
            let lane = lanes.entry(key).or_default();
            let pushed_out = if lane.queue.len() >= self.shared.capacity { lane.queue.pop_front() } else { None };
            lane.queue.push_back(delivery);
            self.shared.publish_depth(&lanes, &hook);
            pushed_out
        };
        self.shared.wake.notify_one();
        let Some(old) = pushed_out else { return false };
        tracing::warn!(hook = %old.hook, url = %old.url, kind = old.kind.as_str(), messages = old.messages, capacity = self.shared.capacity, "alarm hook queue full; the oldest notification is dropped");
        let metrics = &self.shared.metrics;
        metrics.alarm_hook_failures.get_or_create(&labels([("hook", &hook), ("reason", "queue_full")])).inc();
        self.shared.count_dropped(&hook, "queue_full", 1);
        true
    }

    /// The ids of the hooks deliveries go to.
    pub fn target_ids(&self) -> Vec<String> {
        self.targets.read().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect()
    }

    /// Replaces the hooks (an `alarm-settings.yml` reload). Deliveries already queued still go out.
    pub fn replace_targets(&self, targets: Vec<HookTarget>) -> Result<(), TargetError> {
        let targets = by_id(targets)?;
        *self.targets.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(targets);
        Ok(())
    }
}

/// The delivery a lane is trying.
struct Current {
    delivery: Delivery,
    /// Attempts made so far.
    attempts: u32,
    /// None while an attempt is in flight; else when the next one may start.
    next_at: Option<Instant>,
}

/// Posts every lane's deliveries: one bounded attempt each, retries after backoff.
pub struct HookWorker {
    shared: Arc<Shared>,
    sender: Arc<dyn HookSender>,
    settings: DeliverySettings,
    current: BTreeMap<LaneKey, Current>,
    attempts: JoinSet<Result<StatusCode, HookError>>,
    in_flight: HashMap<Id, LaneKey>,
}

impl HookWorker {
    /// Takes the next delivery of every idle lane, and starts every attempt that is due.
    fn start_due(&mut self) {
        let now = Instant::now();
        {
            let mut lanes = self.shared.lanes();
            for (key, lane) in lanes.iter_mut() {
                if lane.busy || self.current.contains_key(key) {
                    continue;
                }
                if let Some(delivery) = lane.queue.pop_front() {
                    lane.busy = true;
                    self.current.insert(key.clone(), Current { delivery, attempts: 0, next_at: Some(now) });
                }
            }
        }
        for (key, current) in self.current.iter_mut() {
            if current.next_at.is_none_or(|at| at > now) {
                continue;
            }
            current.next_at = None;
            current.attempts += 1;
            let (sender, delivery, timeout) = (self.sender.clone(), current.delivery.clone(), self.settings.timeout);
            let handle = self.attempts.spawn(async move {
                // The sender bounds its attempt by `timeout`; this bound holds even if one does not.
                let url = delivery.url.to_string();
                let attempt = sender.post(&delivery.url, &delivery.headers, delivery.body, timeout);
                match tokio::time::timeout(timeout + ATTEMPT_GRACE, attempt).await {
                    Ok(answer) => answer,
                    Err(_elapsed) => Err(HookError::Timeout { url, timeout }),
                }
            });
            self.in_flight.insert(handle.id(), key.clone());
        }
    }

    /// Applies the outcome of one finished attempt.
    fn finished(&mut self, joined: Result<(Id, Result<StatusCode, HookError>), tokio::task::JoinError>) {
        let (id, result) = match joined {
            Ok((id, result)) => (id, result),
            Err(e) => {
                let reason = format!("the attempt failed: {e}");
                (e.id(), Err(HookError::Unreachable { url: String::new(), reason }))
            }
        };
        let Some(key) = self.in_flight.remove(&id) else { return };
        let Some(current) = self.current.get_mut(&key) else { return };
        let delivery = &current.delivery;
        let hook: &str = &delivery.hook;
        let metrics = &self.shared.metrics;
        match next_step(&result, current.attempts, &self.settings) {
            Step::Delivered => {
                metrics.alarm_hook_sent.get_or_create(&labels([("hook", hook), ("kind", delivery.kind.as_str())])).inc();
                self.lane_done(&key);
            }
            Step::Retry { reason, delay } => {
                metrics.alarm_hook_failures.get_or_create(&labels([("hook", hook), ("reason", reason.as_str())])).inc();
                tracing::debug!(%hook, url = %delivery.url, reason = reason.as_str(), attempt = current.attempts, ?delay, ?result, "alarm hook attempt failed; retrying");
                current.next_at = Some(Instant::now() + delay);
            }
            Step::GiveUp { reason, refused } => {
                metrics.alarm_hook_failures.get_or_create(&labels([("hook", hook), ("reason", reason.as_str())])).inc();
                let dropped = if refused { "refused" } else { "gave_up" };
                tracing::warn!(%hook, url = %delivery.url, kind = delivery.kind.as_str(), messages = delivery.messages, attempts = current.attempts, reason = reason.as_str(), ?result, "alarm notification not delivered ({dropped})");
                self.shared.count_dropped(hook, dropped, 1);
                self.lane_done(&key);
            }
        }
    }

    fn lane_done(&mut self, key: &LaneKey) {
        self.current.remove(key);
        let mut lanes = self.shared.lanes();
        if let Some(lane) = lanes.get_mut(key) {
            lane.busy = false;
        }
        self.shared.publish_depth(&lanes, &key.0);
    }

    /// The earliest time a waiting retry is due.
    fn next_retry(&self) -> Option<Instant> {
        self.current.values().filter_map(|current| current.next_at).min()
    }

    fn has_ready_lane(&self) -> bool {
        self.shared.lanes().iter().any(|(key, lane)| !lane.busy && !lane.queue.is_empty() && !self.current.contains_key(key))
    }
}

#[async_trait::async_trait]
impl Worker for HookWorker {
    fn name(&self) -> &'static str {
        WORKER_NAME
    }

    fn initial_state(&self) -> WorkerState {
        WorkerState::Idle
    }

    async fn work(&mut self) -> WorkerState {
        while let Some(joined) = self.attempts.try_join_next_with_id() {
            self.finished(joined);
        }
        self.start_due();
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        if self.has_ready_lane() || self.next_retry().is_some_and(|at| at <= Instant::now()) {
            return WorkerState::Busy;
        }
        let retry_at = self.next_retry();
        tokio::select! {
            Some(joined) = self.attempts.join_next_with_id() => {
                self.finished(joined);
                WorkerState::Busy
            }
            () = self.shared.wake.notified() => WorkerState::Busy,
            () = sleep_until_or_forever(retry_at) => WorkerState::Busy,
        }
    }

    async fn finish(&mut self) {
        self.attempts.abort_all();
        let mut lanes = self.shared.lanes();
        let mut hooks: BTreeMap<Arc<str>, u64> = BTreeMap::new();
        for ((hook, _), lane) in lanes.iter_mut() {
            let left = lane.queue.len() + usize::from(lane.busy);
            if left > 0 {
                *hooks.entry(hook.clone()).or_default() += left as u64;
            }
            lane.queue.clear();
            lane.busy = false;
        }
        for (hook, left) in hooks {
            tracing::warn!(%hook, notifications = left, "alarm notifications not delivered before shutdown");
            self.shared.count_dropped(&hook, "shutdown", left);
            self.shared.publish_depth(&lanes, &hook);
        }
        self.current.clear();
    }
}

async fn sleep_until_or_forever(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
