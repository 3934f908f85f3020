//! The handoff worker: partial state goes to its entity's owner (SkyWalking's L1 → L2 hop).
//!
//! Every [`HandoffSettings::interval`] the worker looks at the cells written since its last
//! round, moves those of entities this node does not own into outbox records
//! (`cells::handoff`), and sends each owner its records over the [`HandoffSender`] seam (the
//! signed bus in a node, an in-memory twin in tests). An owner that applied a record answers
//! with its applied mark; the record then leaves the outbox.
//!
//! - **Alone**, the worker does nothing (a lone node owns everything), and records left from a
//!   time with peers come back into the cells.
//! - **Membership changes**: on a new live set (and at start), the cells of the last
//!   [`RECENT_MINUTES`] minutes are looked at again, so what this node held as the owner moves to
//!   the new owner, and what a crash left unmoved moves now.
//! - **An owner gone** before applying its records: they come back into this node's cells and
//!   move to the new owner. A record whose send had no answer (a timeout: the owner may have
//!   applied it), or that was in the outbox when the node started (it may have been sent before
//!   a crash), waits [`HandoffSettings::ambiguous_grace`] for its owner to come back first.
//! - **Backpressure**: past [`HandoffSettings::max_records`] waiting records nothing more
//!   moves; the cells stay here, where reads find them. Nothing is dropped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::ids::NodeId;
use crate::base::owner::{LiveNodes, LiveSet};
use crate::base::self_metrics::{SelfMetrics, labels};
use crate::base::worker::{Worker, WorkerState};

use super::Entity;
use super::cells::MetricStore;
use super::cells::handoff::HandoffRecord;

/// How far back a new live set (or a start) looks for cells to move.
pub const RECENT_MINUTES: i64 = 2;

/// How the worker paces itself.
#[derive(Debug, Clone)]
pub struct HandoffSettings {
    /// Between rounds (SkyWalking's L1 flushes every 500 ms).
    pub interval: Duration,
    /// Records waiting before cells stop moving.
    pub max_records: usize,
    /// Records sent to one owner in one call.
    pub send_batch: usize,
    /// How long a record whose send had no answer waits for its gone owner.
    pub ambiguous_grace: Duration,
}

impl Default for HandoffSettings {
    fn default() -> HandoffSettings {
        HandoffSettings {
            interval: Duration::from_millis(500),
            max_records: 256,
            send_batch: 16,
            ambiguous_grace: Duration::from_secs(300),
        }
    }
}

/// Why a send failed: `ambiguous` when the owner may have applied the records (no answer in
/// time), not when it surely did not (unreachable, refused, an error answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct SendFailure {
    pub ambiguous: bool,
    pub reason: String,
}

/// Where records go to their owner: the bus in a node.
#[async_trait::async_trait]
pub trait HandoffSender: Send + Sync + 'static {
    /// Sends `records` (one owner's, in sequence order); the owner's applied mark for this node
    /// after applying them.
    async fn send(&self, owner: &NodeId, records: Vec<HandoffRecord>) -> Result<u64, SendFailure>;
}

/// The owner's side: applies a peer's records in order; the applied mark after them.
pub trait HandoffReceiver: Send + Sync + 'static {
    fn apply(&self, sender: &NodeId, records: &[HandoffRecord]) -> Result<u64, String>;
}

/// Minute series whose cells an applied record changed: what the exporter marks.
pub type AppliedMinutes = Arc<dyn Fn(&[(String, Entity, i64)]) + Send + Sync>;

/// The node's receiver: its metric store, and the exporter's marking when export is on.
pub struct StoreReceiver {
    pub store: Arc<MetricStore>,
    pub on_applied: Option<AppliedMinutes>,
    pub telemetry: Arc<SelfMetrics>,
}

impl HandoffReceiver for StoreReceiver {
    fn apply(&self, sender: &NodeId, records: &[HandoffRecord]) -> Result<u64, String> {
        let mut through = 0;
        for record in records {
            let applied = self.store.apply_handoff(sender, record).map_err(|e| e.to_string())?;
            through = applied.through;
            if applied.cells > 0 {
                self.telemetry.handoff_cells.get_or_create(&labels([("direction", "applied")])).inc_by(applied.cells as u64);
            }
            if !applied.minutes.is_empty()
                && let Some(mark) = &self.on_applied
            {
                mark(&applied.minutes);
            }
        }
        Ok(through)
    }
}

/// The worker.
pub struct HandoffWorker {
    store: Arc<MetricStore>,
    live: Arc<dyn LiveNodes>,
    sender: Arc<dyn HandoffSender>,
    telemetry: Arc<SelfMetrics>,
    settings: HandoffSettings,
    /// The live set of the previous round (none before the first).
    last: Option<LiveSet>,
    /// Records whose send had no answer, since when.
    ambiguous: HashMap<(NodeId, u64), Instant>,
    /// Whether the outbox was looked at since the start (see
    /// [`HandoffWorker::note_records_found_at_start`]).
    started: bool,
}

impl HandoffWorker {
    pub fn new(
        store: Arc<MetricStore>,
        live: Arc<dyn LiveNodes>,
        sender: Arc<dyn HandoffSender>,
        telemetry: Arc<SelfMetrics>,
        settings: HandoffSettings,
    ) -> HandoffWorker {
        HandoffWorker { store, live, sender, telemetry, settings, last: None, ambiguous: HashMap::new(), started: false }
    }

    /// One round; errors are logged, and the next round tries again.
    pub async fn round(&mut self) {
        if !self.started {
            self.started = self.note_records_found_at_start().await;
        }
        let live = self.live.live();
        let changed = self.last.as_ref() != Some(&live);
        let store = self.store.clone();
        let max_records = self.settings.max_records;
        let view = live.clone();
        let moved = tokio::task::spawn_blocking(move || move_cells(&store, &view, changed, max_records)).await;
        match moved {
            Ok(Ok(cells)) if cells > 0 => {
                self.telemetry.handoff_cells.get_or_create(&labels([("direction", "moved")])).inc_by(cells as u64);
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "handoff: moving cells to the outbox failed; they stay here"),
            Err(e) => tracing::error!(error = %e, "handoff: the move task failed"),
        }
        self.last = Some(live.clone());
        if let Err(e) = self.send_outbox(&live).await {
            tracing::warn!(error = %e, "handoff: reading the outbox failed");
        }
    }

    /// Records in the outbox at the start may have been sent before a crash: they wait for
    /// their owner like a send without an answer, rather than being taken back while the view
    /// is still forming. False when the outbox could not be read (tried again next round).
    async fn note_records_found_at_start(&mut self) -> bool {
        let store = self.store.clone();
        let limit = self.settings.max_records;
        match tokio::task::spawn_blocking(move || store.outbox(limit)).await {
            Ok(Ok(records)) => {
                let now = Instant::now();
                for record in records {
                    self.ambiguous.insert((record.owner, record.seq), now);
                }
                true
            }
            _ => false,
        }
    }

    async fn send_outbox(&mut self, live: &LiveSet) -> Result<(), String> {
        let store = self.store.clone();
        let limit = self.settings.max_records;
        let records = tokio::task::spawn_blocking(move || store.outbox(limit)).await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
        self.telemetry.handoff_outbox.get_or_create(&Vec::new()).set(records.len() as i64);

        let mut by_owner: BTreeMap<NodeId, Vec<HandoffRecord>> = BTreeMap::new();
        for record in records {
            by_owner.entry(record.owner.clone()).or_default().push(record);
        }
        for (owner, records) in by_owner {
            if live.is_alone() || !live.nodes().contains(&owner) {
                self.take_back(&owner, records).await;
                continue;
            }
            for batch in records.chunks(self.settings.send_batch.max(1)) {
                if !self.send(&owner, batch.to_vec()).await {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Sends one batch; false when it failed (the rest of the owner's records wait).
    async fn send(&mut self, owner: &NodeId, batch: Vec<HandoffRecord>) -> bool {
        let started = Instant::now();
        match self.sender.send(owner, batch.clone()).await {
            Ok(through) => {
                self.telemetry.handoff_send_seconds.get_or_create(&Vec::new()).observe(started.elapsed().as_secs_f64());
                for record in batch {
                    self.ambiguous.remove(&(record.owner.clone(), record.seq));
                    if record.seq <= through {
                        let store = self.store.clone();
                        let seq = record.seq;
                        let done = tokio::task::spawn_blocking(move || store.delivered(record)).await;
                        if !matches!(done, Ok(Ok(()))) {
                            tracing::warn!(%owner, seq, "handoff: a delivered record could not leave the outbox; it is sent again (and not applied twice)");
                        }
                    }
                }
                true
            }
            Err(failure) => {
                let result = if failure.ambiguous { "ambiguous" } else { "failed" };
                self.telemetry.handoff_send_errors.get_or_create(&labels([("result", result)])).inc();
                tracing::debug!(%owner, error = %failure, "handoff: send failed; retried next round");
                if failure.ambiguous {
                    let now = Instant::now();
                    for record in &batch {
                        self.ambiguous.entry((record.owner.clone(), record.seq)).or_insert(now);
                    }
                }
                false
            }
        }
    }

    /// The owner left: its records come back into the cells (those whose send had no answer
    /// only after the grace).
    async fn take_back(&mut self, owner: &NodeId, records: Vec<HandoffRecord>) {
        let grace = self.settings.ambiguous_grace;
        for record in records {
            let id = (record.owner.clone(), record.seq);
            if self.ambiguous.get(&id).is_some_and(|since| since.elapsed() < grace) {
                continue;
            }
            let store = self.store.clone();
            match tokio::task::spawn_blocking(move || store.take_back(&record)).await {
                Ok(Ok(())) => {
                    self.ambiguous.remove(&id);
                    self.telemetry.handoff_records_taken_back.get_or_create(&Vec::new()).inc();
                    tracing::info!(%owner, seq = id.1, "handoff: the owner left; its record is taken back");
                }
                Ok(Err(e)) => tracing::warn!(%owner, error = %e, "handoff: taking a record back failed"),
                Err(e) => tracing::error!(error = %e, "handoff: the take-back task failed"),
            }
        }
    }
}

/// Moves this round's cells: alone, none (tracking off); with a new live set, the recent window
/// is looked at too.
fn move_cells(store: &MetricStore, live: &LiveSet, changed: bool, max_records: usize) -> Result<usize, super::MetricStoreError> {
    if live.is_alone() {
        store.set_handoff_tracking(false);
        return Ok(0);
    }
    store.set_handoff_tracking(true);
    let (mut keys, overflowed) = store.take_dirty();
    if changed || overflowed {
        // The recent window holds most of the dirty keys again: `move_to_outbox` moves a key
        // given twice once.
        store.mark_recent(crate::base::clock::wall_clock_ms(), RECENT_MINUTES)?;
        keys.extend(store.take_dirty().0);
    }
    if keys.is_empty() {
        return Ok(0);
    }
    let self_id = live.self_id().clone();
    let owner_of = |entity: &[u8]| {
        let owner = live.owner(entity);
        (*owner != self_id).then(|| owner.clone())
    };
    Ok(store.move_to_outbox(keys, &owner_of, max_records)?.cells)
}

#[async_trait::async_trait]
impl Worker for HandoffWorker {
    fn name(&self) -> &'static str {
        "metric-handoff"
    }

    async fn work(&mut self) -> WorkerState {
        self.round().await;
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        tokio::time::sleep(self.settings.interval).await;
        WorkerState::Busy
    }

    async fn finish(&mut self) {
        // A last round, so what this node holds for others leaves before it stops.
        self.round().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use hotrule_mal_engine::{DataType, Downsampling, MetricValue, ScopeType, Value};

    use super::*;
    use crate::base::owner::Fixed;
    use crate::data::metrics::cells::Retention;
    use crate::data::metrics::{MetricReader, MetricWriter, SeriesFilter};
    use crate::store::series::MemSeriesKv;

    /// The sender twin: records every call and answers with the highest sequence number sent
    /// (an owner that applied them), or with `fail` when set.
    #[derive(Default)]
    struct MemSender {
        calls: Mutex<Vec<(NodeId, Vec<u64>)>>,
        fail: Mutex<Option<SendFailure>>,
    }

    #[async_trait::async_trait]
    impl HandoffSender for MemSender {
        async fn send(&self, owner: &NodeId, records: Vec<HandoffRecord>) -> Result<u64, SendFailure> {
            self.calls.lock().expect("calls").push((owner.clone(), records.iter().map(|r| r.seq).collect()));
            match self.fail.lock().expect("fail").clone() {
                Some(failure) => Err(failure),
                None => Ok(records.iter().map(|r| r.seq).max().unwrap_or(0)),
            }
        }
    }

    fn id(name: &str) -> NodeId {
        NodeId(name.to_string())
    }

    fn store() -> Arc<MetricStore> {
        let telemetry = Arc::new(SelfMetrics::new());
        Arc::new(MetricStore::open(Arc::new(MemSeriesKv::new()), Retention::default(), telemetry).expect("open"))
    }

    /// Writes one value for each of `services` in the current minute.
    fn write(store: &MetricStore, services: &[String]) {
        let now = crate::base::clock::wall_clock_ms();
        let values: Vec<MetricValue> = services
            .iter()
            .map(|name| {
                let mut entity = Entity::new(ScopeType::Service);
                entity.service_name = name.clone();
                MetricValue {
                    metric: "m".into(),
                    rule: "r".into(),
                    entity,
                    time_bucket: hotrule_mal_engine::minute_bucket(now),
                    timestamp_ms: now,
                    value: Value::Single(1),
                    data_type: DataType::Single,
                    downsampling: Downsampling::Sum,
                }
            })
            .collect();
        store.write(&values).expect("write");
    }

    fn local_series(store: &MetricStore) -> usize {
        let now = crate::base::clock::wall_clock_ms();
        let filter = SeriesFilter { metric: "m".into(), ..SeriesFilter::default() };
        store.read_partials(&filter, crate::data::metrics::Granularity::Minute, now - 120_000, now).expect("read").len()
    }

    fn worker(store: &Arc<MetricStore>, live: &Arc<Fixed>, sender: &Arc<MemSender>) -> HandoffWorker {
        let settings = HandoffSettings { ambiguous_grace: Duration::from_secs(600), ..HandoffSettings::default() };
        HandoffWorker::new(store.clone(), live.clone(), sender.clone(), Arc::new(SelfMetrics::new()), settings)
    }

    #[tokio::test]
    async fn a_round_sends_what_others_own_and_a_gone_owner_gives_it_back() {
        let store = store();
        let set = LiveSet::new(id("a"), vec![id("b")]);
        let live = Arc::new(Fixed::new(set.clone()));
        let sender = Arc::new(MemSender::default());
        let mut worker = worker(&store, &live, &sender);
        let services: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
        worker.round().await;
        write(&store, &services);
        worker.round().await;
        let owned_here = services
            .iter()
            .filter(|s| {
                let mut e = Entity::new(ScopeType::Service);
                e.service_name = (*s).clone();
                set.owns(&crate::data::metrics::cells::keys::owner_key(&e))
            })
            .count();
        assert!(owned_here > 0 && owned_here < services.len());
        assert_eq!(local_series(&store), owned_here, "what b owns left");
        assert_eq!(sender.calls.lock().expect("calls").len(), 1);
        assert!(store.outbox(10).expect("outbox").is_empty(), "b applied it: delivered");

        // b stops answering (refused: surely not applied), then leaves: the records come back.
        *sender.fail.lock().expect("fail") = Some(SendFailure { ambiguous: false, reason: "refused".into() });
        write(&store, &services);
        worker.round().await;
        assert_eq!(store.outbox(10).expect("outbox").len(), 1, "waiting for b");
        live.set(LiveSet::alone(id("a")));
        worker.round().await;
        assert!(store.outbox(10).expect("outbox").is_empty());
        assert_eq!(local_series(&store), services.len(), "alone, a holds everything again");
    }

    /// The case a real cluster met right after an owner's restart: a round with dirty keys (a
    /// record just taken back) and a new live set (the owner is back) names each key twice, and
    /// the record it moved held every cell twice, so every read of it counted it twice.
    #[tokio::test]
    async fn a_round_with_dirty_keys_and_a_new_live_set_moves_each_cell_once() {
        let store = store();
        let live = Arc::new(Fixed::new(LiveSet::new(id("a"), vec![id("c")])));
        let sender = Arc::new(MemSender { fail: Mutex::new(Some(SendFailure { ambiguous: false, reason: "refused".into() })), ..MemSender::default() });
        let mut worker = worker(&store, &live, &sender);
        worker.round().await;
        let services: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
        write(&store, &services);
        // b joins in the round that sees the writes: every cell b owns is dirty and recent.
        live.set(LiveSet::new(id("a"), vec![id("b"), id("c")]));
        worker.round().await;
        let records = store.outbox(100).expect("outbox");
        assert!(!records.is_empty(), "b owns some of 40 services");
        for record in &records {
            let mut keys: Vec<&Vec<u8>> = record.cells.iter().map(|(k, _)| k).collect();
            let all = keys.len();
            keys.sort();
            keys.dedup();
            assert_eq!(keys.len(), all, "each cell once in the record to {}", record.owner);
        }
        // Each moved service holds one value: its cells once, whichever node they are on.
        let now = crate::base::clock::wall_clock_ms();
        let filter = SeriesFilter { metric: "m".into(), ..SeriesFilter::default() };
        let in_flight = store.in_flight(&filter, crate::data::metrics::Granularity::Minute, now - 120_000, now).expect("in flight");
        let moved: Vec<usize> = in_flight.records.iter().flat_map(|r| &r.series).map(|s| s.cells.len()).collect();
        assert!(moved.iter().all(|cells| *cells == 1), "one minute cell per moved service: {moved:?}");
        assert_eq!(moved.len() + local_series(&store), services.len());
    }

    #[tokio::test]
    async fn records_found_at_a_start_wait_for_their_owner() {
        let store = store();
        store.set_handoff_tracking(true);
        write(&store, &["s1".to_string()]);
        let (keys, _) = store.take_dirty();
        store.move_to_outbox(keys, &|_| Some(id("b")), 10).expect("move");
        assert_eq!(store.outbox(10).expect("outbox").len(), 1);
        // A restart: b is not (yet) in the view. The record may have reached b before the crash.
        let live = Arc::new(Fixed::new(LiveSet::new(id("a"), vec![id("c")])));
        let sender = Arc::new(MemSender::default());
        let mut worker = worker(&store, &live, &sender);
        worker.round().await;
        assert_eq!(store.outbox(10).expect("outbox").len(), 1, "not taken back within the grace");
        // b comes back: it gets the record (and dedupes it if it had it).
        live.set(LiveSet::new(id("a"), vec![id("b"), id("c")]));
        worker.round().await;
        assert!(sender.calls.lock().expect("calls").iter().any(|(owner, _)| *owner == id("b")));
        assert!(store.outbox(10).expect("outbox").is_empty());
    }
}
