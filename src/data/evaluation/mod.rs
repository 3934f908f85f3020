//! Dispatch: the part of the data plane between receivers and storage, gated by the control
//! plane.
//!
//! Receivers submit [`Batch`]es through [`BatchSink`]; the [`Dispatcher`] keeps them in a
//! bounded queue (full → [`SubmitError::QueueFull`], counted as `samples_rejected{reason=
//! "queue_full"}`) and a fixed pool of evaluation threads (off the async workers) takes them one
//! by one. A batch is evaluated against every loaded MAL file of its catalog (see `evaluate`):
//! each evaluation opens the file's gate in the runtime, so a suspended file's samples are
//! dropped and counted, and a drain after a suspend waits exactly for the evaluations already
//! open. A value is written only when its metric is registered with the shape it carries
//! ([`MeasureRegistry`]); it then goes to every [`MetricWriter`] (storage, exporter).
//! Per-file live state (`stats`) feeds `/runtime/rule/list`.
//!
//! Log batches ([`crate::data::seam::LogSink`]) take the LAL path (`lal`): their own bounded queue
//! and threads, every `lal` file's gate opened the same way, kept logs to every
//! [`LogWriter`], emitted samples through the MAL path above against `log-mal-rules`.

pub mod config;
mod evaluate;
pub use evaluate::prepare;
mod lal;
pub use lal::LogStepCpu;
pub mod log_stats;
mod queue;
pub mod stats;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hotrule_mal_engine::MetricValue;

pub use config::{DispatchSettings, RawDispatch};
pub use log_stats::LogEvaluationView;
pub use stats::EvaluationView;

use crate::compiler::{Compiled, MetricShape};
use crate::data::seam::{Batch, BatchSink, Catalog, LogBatch, LogSink, SubmitError};
use crate::data::logs::LogWriter;
use crate::base::ids::{self, ContentHash, RuleKey};
use crate::data::metrics::MetricWriter;
use crate::control::runtime::{Origin, Runtime, SuspendResult};
use crate::base::self_metrics::{SelfMetrics, labels};
use evaluate::Slot;
use queue::{BatchQueue, PushRefused};

/// What a full queue tells a receiver to wait before retrying.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The shapes of registered measures: a value is written only when its metric is here with the
/// same shape. The node's is [`NodeRegistry`]; tests use a map.
pub trait MeasureRegistry: Send + Sync + 'static {
    fn shape(&self, metric: &str) -> Option<MetricShape>;
}

/// The node's registry: the measure its schema registry (`Store`) holds; for a metric it holds
/// none of, the shape an ACTIVE file (entry or bundled) claims for it. Measures are written on
/// the main only (with the entry that needs them, or by the main's scan), so a peer's store
/// lacks them; the claims, which follow the entries everywhere, stand for the registry there.
pub struct NodeRegistry {
    store: Arc<crate::store::Store>,
    runtime: Arc<Runtime>,
}

impl NodeRegistry {
    pub fn new(store: Arc<crate::store::Store>, runtime: Arc<Runtime>) -> NodeRegistry {
        NodeRegistry { store, runtime }
    }
}

impl MeasureRegistry for NodeRegistry {
    fn shape(&self, metric: &str) -> Option<MetricShape> {
        if let Some(measure) = self.store.measure(metric) {
            return Some(measure.shape);
        }
        self.runtime.claims.with_all(|files| {
            files.values().filter(|held| !held.inactive).find_map(|held| match &held.claims {
                crate::control::rules::classify::Claims::Mal(metrics) => metrics.get(metric).copied(),
                crate::control::rules::classify::Claims::Lal(_) => None,
            })
        })
    }
}

/// Sees every evaluation's written values with the content version that computed them, while
/// the file's gate is still open (tests, and the boundary check of the end-to-end run).
pub trait EvaluationProbe: Send + Sync + 'static {
    fn evaluated(&self, key: &RuleKey, content: &ContentHash, values: &[MetricValue]);
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("starting evaluation thread {index}: {source}")]
    Spawn { index: usize, source: std::io::Error },
}

/// The catalogs dispatch evaluates, as rule catalogs.
pub fn rule_catalog(catalog: Catalog) -> ids::Catalog {
    match catalog {
        Catalog::Otel => ids::Catalog::OtelRules,
        Catalog::Telegraf => ids::Catalog::TelegrafRules,
        Catalog::LogMal => ids::Catalog::LogMalRules,
        Catalog::Meter => ids::Catalog::MeterAnalyzerConfig,
    }
}

/// Whether files of `catalog` are evaluated by dispatch (and show an `evaluation` in the list).
pub fn evaluates(catalog: ids::Catalog) -> bool {
    matches!(
        catalog,
        ids::Catalog::OtelRules | ids::Catalog::TelegrafRules | ids::Catalog::LogMalRules | ids::Catalog::MeterAnalyzerConfig | ids::Catalog::Lal
    )
}

/// A list row's `evaluation`: a MAL file's or a LAL file's live state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum RuleEvaluation {
    Metrics(EvaluationView),
    Logs(LogEvaluationView),
}

/// The loaded files per catalog, rebuilt when the runtime changes.
#[derive(Default)]
struct Slots {
    runtime_version: Option<u64>,
    by_key: HashMap<RuleKey, Slot>,
    by_catalog: HashMap<ids::Catalog, Arc<Vec<(RuleKey, Slot)>>>,
    /// Every sample name the loaded files (suspended included) of a catalog read.
    reads: HashMap<ids::Catalog, Arc<HashSet<String>>>,
    /// The names each loaded content version reads, kept across rebuilds.
    inputs: HashMap<ContentHash, Arc<HashSet<String>>>,
}

pub(crate) struct Shared {
    queue: BatchQueue,
    runtime: Arc<Runtime>,
    registry: Arc<dyn MeasureRegistry>,
    telemetry: Arc<SelfMetrics>,
    writers: RwLock<Vec<Arc<dyn MetricWriter>>>,
    probe: RwLock<Option<Arc<dyn EvaluationProbe>>>,
    slots: Mutex<Slots>,
    stats: stats::StatsMap,
}

impl Shared {
    /// The loaded MAL files of `catalog` with their evaluation state.
    fn files_of(&self, catalog: Catalog) -> Arc<Vec<(RuleKey, Slot)>> {
        self.with_current(|slots| slots.by_catalog.get(&rule_catalog(catalog)).cloned().unwrap_or_default())
    }

    /// Every sample name the loaded files of `catalog` read (see [`BatchSink::reads`]).
    fn reads_of(&self, catalog: Catalog) -> Arc<HashSet<String>> {
        self.with_current(|slots| slots.reads.get(&rule_catalog(catalog)).cloned().unwrap_or_default())
    }

    /// Reads the slots, rebuilt first if the runtime changed since they were built.
    fn with_current<T>(&self, read: impl FnOnce(&Slots) -> T) -> T {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        let version = self.runtime.version();
        if slots.runtime_version != Some(version) {
            self.rebuild(&mut slots, version);
        }
        read(&slots)
    }

    /// Keeps the state of files still loaded, adds new ones, forgets unloaded ones (a file
    /// loaded again starts with fresh counter windows) and the stats of files that are gone.
    fn rebuild(&self, slots: &mut Slots, version: u64) {
        type Loaded = (RuleKey, ContentHash, Arc<Compiled>);
        let (loaded, known): (Vec<Loaded>, HashSet<RuleKey>) = self.runtime.with_all(|rules| {
            let loaded = rules
                .iter()
                .filter(|(key, _)| evaluates(key.catalog))
                .filter_map(|(key, state)| {
                    let l = state.loaded.as_ref().filter(|l| matches!(*l.compiled, Compiled::Mal(_)))?;
                    Some((key.clone(), l.content_hash.clone(), l.compiled.clone()))
                })
                .collect();
            (loaded, rules.keys().filter(|key| evaluates(key.catalog)).cloned().collect())
        });
        let mut by_key: HashMap<RuleKey, Slot> = HashMap::with_capacity(loaded.len());
        let mut by_catalog: HashMap<ids::Catalog, Vec<(RuleKey, Slot)>> = HashMap::new();
        let mut inputs: HashMap<ContentHash, Arc<HashSet<String>>> = HashMap::with_capacity(loaded.len());
        let mut reads: HashMap<ids::Catalog, HashSet<String>> = HashMap::new();
        for (key, hash, compiled) in loaded {
            let names = match slots.inputs.remove(&hash).or_else(|| inputs.get(&hash).cloned()) {
                Some(names) => names,
                None => Arc::new(evaluate::input_names(&compiled)),
            };
            reads.entry(key.catalog).or_default().extend(names.iter().cloned());
            inputs.insert(hash, names);
            let slot = slots.by_key.remove(&key).unwrap_or_default();
            by_catalog.entry(key.catalog).or_default().push((key.clone(), slot.clone()));
            by_key.insert(key, slot);
        }
        slots.by_key = by_key;
        slots.by_catalog = by_catalog.into_iter().map(|(c, files)| (c, Arc::new(files))).collect();
        slots.reads = reads.into_iter().map(|(c, names)| (c, Arc::new(names))).collect();
        slots.inputs = inputs;
        slots.runtime_version = Some(version);
        // A file keeps its stats while the node knows it (loaded, suspended, or an entry or
        // bundled file that claims names, INACTIVE included).
        self.runtime.claims.with_all(|claims| self.stats.retain(|key| known.contains(key) || claims.contains_key(key)));
    }

    fn reject(&self, reason: &str, values: usize) {
        self.telemetry.values_rejected.get_or_create(&labels([("reason", reason)])).inc_by(values as u64);
    }

    /// Tells every writer the shapes of a newly prepared version (see `MetricWriter::ensure_shape`).
    fn ensure_shapes(&self, key: &RuleKey, shapes: &std::collections::BTreeMap<String, hotrule_rule_compiler::MetricShape>) {
        let writers = self.writers.read().unwrap_or_else(|p| p.into_inner()).clone();
        for (name, shape) in shapes {
            let info = crate::data::metrics::MetricInfo {
                name: name.clone(),
                scope: shape.scope,
                data_type: shape.data_type,
                downsampling: shape.downsampling,
            };
            for writer in &writers {
                if let Err(e) = writer.ensure_shape(&info) {
                    tracing::warn!(rule = %key, metric = %name, error = %e, "metric shape not applied to storage");
                }
            }
        }
    }

    /// Writes `values` to every writer; returns how many values some writer refused.
    fn write(&self, key: &RuleKey, values: &[MetricValue]) -> usize {
        let writers = self.writers.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut failed = 0;
        for writer in writers {
            if let Err(e) = writer.write(values) {
                self.reject("storage_error", values.len());
                tracing::warn!(rule = %key, values = values.len(), error = %e, "metric values not written");
                failed = values.len();
            }
        }
        failed
    }

    fn observe_written(&self, key: &RuleKey, content: &ContentHash, values: &[MetricValue]) {
        let probe = self.probe.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(probe) = probe {
            probe.evaluated(key, content, values);
        }
    }
}

/// How long one pause took to drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseTiming {
    /// From the suspend call to the last open evaluation's end.
    pub elapsed: Duration,
    /// False when the drain bound passed first.
    pub drained: bool,
    /// Evaluations open right after the suspend.
    pub in_flight: usize,
}

/// The dispatcher: a bounded queue and a pool of evaluation threads. Dropping it stops the
/// threads once they have finished what is queued; [`Dispatcher::stop`] also waits for them.
pub struct Dispatcher {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    settings: DispatchSettings,
    logs: Arc<lal::LogPlane>,
}

impl Dispatcher {
    /// Starts `settings.workers` evaluation threads. Also sets the runtime's drain bound.
    pub fn new(
        settings: DispatchSettings,
        runtime: Arc<Runtime>,
        registry: Arc<dyn MeasureRegistry>,
        telemetry: Arc<SelfMetrics>,
        writers: Vec<Arc<dyn MetricWriter>>,
    ) -> Result<Dispatcher, DispatchError> {
        runtime.set_drain_timeout(settings.drain_timeout);
        let shared = Arc::new(Shared {
            queue: BatchQueue::new(settings.queue_batches),
            runtime,
            registry,
            telemetry,
            writers: RwLock::new(writers),
            probe: RwLock::new(None),
            slots: Mutex::new(Slots::default()),
            stats: stats::StatsMap::default(),
        });
        let mut threads = Vec::with_capacity(settings.workers);
        for index in 0..settings.workers.max(1) {
            let for_thread = shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("hotrule-eval-{index}"))
                .spawn(move || evaluation_loop(&for_thread))
                .map_err(|source| DispatchError::Spawn { index, source });
            match thread {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    shared.queue.stop();
                    return Err(e);
                }
            }
        }
        let (logs, log_threads) = match lal::LogPlane::start(&settings, shared.clone()) {
            Ok(started) => started,
            Err(e) => {
                shared.queue.stop();
                return Err(e);
            }
        };
        threads.extend(log_threads);
        Ok(Dispatcher { shared, threads: Mutex::new(threads), settings, logs })
    }

    pub fn settings(&self) -> &DispatchSettings {
        &self.settings
    }

    /// The node's own metrics this dispatcher counts into.
    pub fn telemetry(&self) -> &Arc<SelfMetrics> {
        &self.shared.telemetry
    }

    /// Adds a destination of computed values (storage, exporter, a test twin).
    pub fn add_writer(&self, writer: Arc<dyn MetricWriter>) {
        self.shared.writers.write().unwrap_or_else(|p| p.into_inner()).push(writer);
    }

    /// Adds a destination of kept logs (storage, exporter, a test twin).
    pub fn add_log_writer(&self, writer: Arc<dyn LogWriter>) {
        self.logs.add_writer(writer);
    }

    pub fn set_probe(&self, probe: Option<Arc<dyn EvaluationProbe>>) {
        *self.shared.probe.write().unwrap_or_else(|p| p.into_inner()) = probe;
    }

    /// The live evaluation state of one file (zeros when it was never evaluated).
    pub fn evaluation(&self, key: &RuleKey) -> EvaluationView {
        self.shared.stats.view(key)
    }

    /// The live state of one file: a LAL file's logs, any other file's samples.
    pub fn evaluation_of(&self, key: &RuleKey) -> RuleEvaluation {
        match key.catalog {
            ids::Catalog::Lal => RuleEvaluation::Logs(self.logs.view(key)),
            _ => RuleEvaluation::Metrics(self.evaluation(key)),
        }
    }

    /// Batches waiting for a thread.
    pub fn queued(&self) -> usize {
        self.shared.queue.len()
    }

    /// Log batches waiting for a LAL thread.
    /// CPU the LAL threads spent in each step of their batches so far.
    pub fn log_step_cpu(&self) -> lal::LogStepCpu {
        self.logs.step_cpu()
    }

    pub fn queued_logs(&self) -> usize {
        self.logs.queued()
    }

    /// Metric batches queued or being evaluated (their values not yet all written): 0 when
    /// every batch a receiver handed over has been evaluated and stored
    /// (`hotrule_dispatch_pending_batches{queue="metrics"}`).
    pub fn pending(&self) -> usize {
        self.shared.queue.pending()
    }

    /// Log batches queued or being analysed (`hotrule_dispatch_pending_batches{queue="logs"}`).
    pub fn pending_logs(&self) -> usize {
        self.logs.pending()
    }

    /// Waits until nothing is queued or being evaluated, logs included (blocking; tests and
    /// benchmarks).
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        self.logs.wait_idle(deadline) && self.shared.queue.wait_idle(deadline.saturating_duration_since(Instant::now()))
    }

    /// Suspends `key` (origin SELF), waits for its drain (up to the runtime's drain bound) and
    /// resumes it: the pause-to-drained time the benchmark reports. None when the file could
    /// not be suspended (not loaded, or suspended already).
    pub async fn measure_pause(&self, key: &RuleKey) -> Option<PauseTiming> {
        let runtime = &self.shared.runtime;
        let started = Instant::now();
        if runtime.suspend(key, Origin::SelfOrigin, true) != SuspendResult::Suspended {
            return None;
        }
        let in_flight = runtime.in_flight(key);
        let drained = runtime.wait_drained(key, started + runtime.drain_timeout()).await;
        let elapsed = started.elapsed();
        runtime.resume(key, Origin::SelfOrigin);
        Some(PauseTiming { elapsed, drained, in_flight })
    }

    /// Refuses new batches, lets the threads finish what is queued, and waits for them
    /// (blocking).
    pub fn stop(&self) {
        self.shared.queue.stop();
        self.logs.stop();
        let threads: Vec<JoinHandle<()>> = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("an evaluation thread panicked");
            }
        }
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.shared.queue.stop();
        self.logs.stop();
    }
}

impl LogSink for Dispatcher {
    fn submit_logs(&self, batches: Vec<LogBatch>) -> Result<(), SubmitError> {
        self.logs.submit(batches)
    }
}

impl BatchSink for Dispatcher {
    fn reads(&self, catalog: Catalog) -> Option<Arc<HashSet<String>>> {
        Some(self.shared.reads_of(catalog))
    }

    fn has_room(&self) -> bool {
        self.shared.queue.has_room()
    }

    /// Queues `batches` whole or refuses them whole. The receiver counts a refusal
    /// (`samples_rejected{protocol, reason}`), once, where it knows the protocol.
    fn submit(&self, batches: Vec<Batch>) -> Result<(), SubmitError> {
        match self.shared.queue.push(batches) {
            Ok(()) => Ok(()),
            Err(PushRefused::Stopped) => Err(SubmitError::Stopped),
            Err(PushRefused::Full) => Err(SubmitError::QueueFull { retry_after: RETRY_AFTER }),
        }
    }
}

/// One evaluation thread: a batch at a time until the queue stops and empties. A panic in an
/// evaluation is contained to its batch (the engine should never panic; this keeps a bug from
/// shrinking the pool).
fn evaluation_loop(shared: &Shared) {
    while let Some(batch) = shared.queue.take() {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| evaluate::run_batch(shared, &batch)));
        if outcome.is_err() {
            tracing::error!(catalog = batch.catalog.as_str(), samples = batch.samples.len(), "evaluation panicked; batch lost");
        }
        shared.queue.done();
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod lal_tests;
