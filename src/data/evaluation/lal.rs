//! LAL dispatch: log batches against the loaded files of the `lal` catalog, gated by the control
//! plane exactly as MAL is.
//!
//! Log receivers submit [`LogBatch`]es through the dispatcher's [`crate::data::seam::LogSink`]; they
//! wait in their own bounded queue (`dispatch.log_queue_batches`, full → `QueueFull`, which the
//! receiver counts as `logs_rejected{protocol, reason="queue_full"}`) for one of `dispatch.log_workers` threads of
//! their own (OS threads, off the async workers). A pool separate from the metric threads keeps
//! a log flood from starving metric evaluation and back, and touches nothing of the MAL path.
//! Two threads by default: a batch is analysed under one lock over every LAL file (routing
//! crosses files, below), so more threads would mostly wait; the second one analyses the next
//! batch while the first writes kept logs and evaluates emitted samples. A thread takes a
//! backlog in groups of whole batches (up to [`GROUP_LOGS`] logs): the group's kept logs go to
//! each writer in one call (one synced write), its samples to each log-MAL file in one metric
//! write, and the gates open once for it. Counters stay per batch (`evaluations` counts each
//! batch a file ran on).
//!
//! **Routing and gates.** SkyWalking routes a log across files: every rule of the log's layer
//! runs, and a log without a layer goes to the `auto` rules of every file, then to the `GENERAL`
//! rules only if none claims it. So a batch is analysed against all files at once
//! (`hotrule_lal_engine::analyze_files`), each file with its own gate and sampler state:
//! - every loaded file's gate is opened with `Runtime::begin_eval` (one content version for the
//!   whole batch) and stays open until the batch's kept logs are written and its emitted samples
//!   evaluated, so a structural apply's drain covers LAL, and after its 200 no log is evaluated
//!   by the old content;
//! - a suspended file's rules do not run; each log one of them could have run on
//!   (`PreparedLalFile::may_run`) is counted for the file as `logs_by_rule{outcome="suspended"}`
//!   and `logsDropped`. The running files route as usual, except that a log without a layer
//!   that an `auto` rule of a suspended file could have claimed does not fall back to `GENERAL`:
//!   the paused file may have claimed it, and storing it as a `GENERAL` log would file it
//!   differently than before and after the pause. It is dropped for that file instead.
//!
//! **Sampler state** (`rateLimit` counters) is per file and lives as long as the file's content:
//! SkyWalking has no filter-only path for LAL (any change is structural) and a recompiled file
//! gets new samplers, so a new content version starts fresh, as does a file unloaded and loaded
//! again. Suspend and resume keep it.
//!
//! **Outputs.** A sink's persisted records become [`KeptLog`]s for every [`LogWriter`]; samples
//! from `metrics {}` go through the MAL path against `log-mal-rules`, one sample per evaluation,
//! as SkyWalking evaluates each LAL sample on its own, and the values of a group's samples
//! are written to the metric store in one call per file (`evaluate::run_each`). Runtime errors are per
//! rule and log: counted, kept as the file's last error; nothing panics (a panic would be
//! contained to its batch, as for MAL).

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use hotrule_lal_engine::{Decision, FileAnalysis, FileRun, LalState, PreparedLalFile, RuleOutcome, analyze_files};
use hotrule_mal_engine::Sample;

use super::queue::LogQueue;
use super::log_stats::{LogEvaluationView, LogStatsMap, LogTally};
use super::queue::PushRefused;
use super::{DispatchError, DispatchSettings, RETRY_AFTER, Shared, evaluate};
use crate::compiler::Compiled;
use crate::data::seam::{Batch, Catalog, LogBatch, Protocol, SubmitError};
use crate::base::ids::{self, ContentHash, RuleKey};
use crate::data::logs::{KeptLog, LogWriter};
use crate::control::runtime::{EvalGuard, GateClosed, LoadedRule};
use crate::base::self_metrics::labels;

/// One LAL file's evaluation state, owned by dispatch.
#[derive(Default)]
struct FileLal {
    prepared: Option<(ContentHash, Arc<PreparedLalFile>)>,
    state: LalState,
}

impl FileLal {
    /// Makes `loaded` the prepared version (once per content version; a new one starts with
    /// fresh sampler state). False for non-LAL content.
    fn prepare(&mut self, key: &RuleKey, loaded: &LoadedRule) -> bool {
        let Compiled::Lal(file) = &*loaded.compiled else { return false };
        if self.prepared.as_ref().is_none_or(|(hash, _)| *hash != loaded.content_hash) {
            self.prepared = Some((loaded.content_hash.clone(), Arc::new(PreparedLalFile::new(file.clone()))));
            self.state = LalState::with_seed(seed_of(key));
        }
        true
    }
}

/// A per-file seed, so two files' `possibility` samplers do not draw the same sequence.
fn seed_of(key: &RuleKey) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

/// The loaded LAL files, refreshed when the runtime changes; in key order (the file order of
/// the routing).
#[derive(Default)]
struct LalFiles {
    runtime_version: Option<u64>,
    files: BTreeMap<RuleKey, FileLal>,
}

/// One file's part in one batch.
struct FileTally {
    key: RuleKey,
    /// `lal/<name>`, for the kept logs and the labels.
    file: String,
    /// The file's rules ran (its gate was open).
    evaluated: bool,
    tally: LogTally,
    /// `(batch, log)` indices of the last log counted in `logs_in`.
    last_log: Option<(usize, usize)>,
    /// Batches of the group with a log counted in `logs_in` (each an evaluation).
    batches_in: u64,
}

/// What the analysis of a batch hands to the writes: the open gates are closed (dropped) only
/// after the writes.
#[derive(Default)]
struct Analysis {
    guards: Vec<EvalGuard>,
    files: Vec<FileTally>,
    /// The kept logs, and for each the index into `files` of the file that kept it. Apart, so
    /// the logs go to the writers as they are (no copy of a group's thousands of records).
    kept: Vec<KeptLog>,
    kept_by: Vec<usize>,
    /// Emitted samples with their batch's receipt time.
    samples: Vec<(Sample, i64)>,
}

impl Analysis {
    /// Counts `outcome` for file `index` and takes its kept logs, samples and rule name (by
    /// reference: an outcome is a few hundred bytes, not worth a copy per log).
    fn record(&mut self, index: usize, log: (usize, usize), outcome: &mut RuleOutcome, received_ms: i64) {
        let Some(file) = self.files.get_mut(index) else { return };
        let tally = &mut file.tally;
        if file.last_log != Some(log) {
            tally.logs_in += 1;
            if file.last_log.is_none_or(|(batch, _)| batch != log.0) {
                file.batches_in += 1;
            }
            file.last_log = Some(log);
        }
        let counter = match outcome.decision {
            Decision::Kept => &mut tally.kept,
            Decision::Dropped => &mut tally.dropped,
            Decision::SampledOut => &mut tally.sampled,
            Decision::Aborted => &mut tally.aborted,
            Decision::NoLayer => &mut tally.no_layer,
            Decision::NoSink => &mut tally.no_sink,
            Decision::Failed => &mut tally.failed,
        };
        *counter += 1;
        if let Some(error) = &outcome.error {
            tally.last_error = Some(error.to_string());
        }
        for warning in &outcome.warnings {
            tracing::debug!(file = %file.key, ?warning, "LAL warning");
        }
        tally.samples_out += outcome.samples.len() as u64;
        self.samples.extend(outcome.samples.drain(..).map(|sample| (sample, received_ms)));
        // The outcome ends here: its rule name goes to its last kept log, a copy to the others.
        let last = outcome.persisted.len().saturating_sub(1);
        for (at, record) in outcome.persisted.drain(..).enumerate() {
            let rule = if at == last { std::mem::take(&mut outcome.rule) } else { outcome.rule.clone() };
            self.kept.push(KeptLog { rule, file: file.file.clone(), record, received_ms });
            self.kept_by.push(index);
        }
    }
}

/// CPU seconds the LAL threads spent in each step of a batch (thread CPU clocks): analysing
/// logs against the LAL files, handing kept logs to the writers (the log store's synced write),
/// and evaluating emitted samples with the log-MAL files.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LogStepCpu {
    pub analysis: f64,
    pub store: f64,
    pub log_mal: f64,
}

/// [`LogStepCpu`] as nanoseconds, added to by every LAL thread.
#[derive(Default)]
struct StepNanos([std::sync::atomic::AtomicU64; 3]);

impl StepNanos {
    fn add(&self, step: usize, from: Option<f64>, to: Option<f64>) {
        if let (Some(from), Some(to), Some(slot)) = (from, to, self.0.get(step)) {
            slot.fetch_add(((to - from).max(0.0) * 1e9) as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The LAL half of the dispatcher: its queue, threads' shared state, log writers and stats.
pub(super) struct LogPlane {
    queue: LogQueue,
    shared: Arc<Shared>,
    writers: RwLock<Vec<Arc<dyn LogWriter>>>,
    files: Mutex<LalFiles>,
    stats: LogStatsMap,
    steps: StepNanos,
}

impl LogPlane {
    /// The plane and its `settings.log_workers` threads; on a failed spawn the threads already
    /// started are stopped.
    pub(super) fn start(
        settings: &DispatchSettings,
        shared: Arc<Shared>,
    ) -> Result<(Arc<LogPlane>, Vec<JoinHandle<()>>), DispatchError> {
        let plane = Arc::new(LogPlane {
            queue: LogQueue::new(settings.log_queue_batches),
            shared,
            writers: RwLock::new(Vec::new()),
            files: Mutex::new(LalFiles::default()),
            stats: LogStatsMap::default(),
            steps: StepNanos::default(),
        });
        let mut threads = Vec::with_capacity(settings.log_workers);
        for index in 0..settings.log_workers.max(1) {
            let for_thread = plane.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("hotrule-lal-{index}"))
                .spawn(move || log_loop(&for_thread))
                .map_err(|source| DispatchError::Spawn { index, source });
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    plane.queue.stop();
                    return Err(e);
                }
            }
        }
        Ok((plane, threads))
    }

    /// Queues `batches` whole or refuses them whole. The receiver that submitted them counts a
    /// refusal (`logs_rejected{protocol, reason}`), once, where it knows the protocol.
    pub(super) fn submit(&self, batches: Vec<LogBatch>) -> Result<(), SubmitError> {
        match self.queue.push(batches) {
            Ok(()) => Ok(()),
            Err(PushRefused::Stopped) => Err(SubmitError::Stopped),
            Err(PushRefused::Full) => Err(SubmitError::QueueFull { retry_after: RETRY_AFTER }),
        }
    }

    pub(super) fn add_writer(&self, writer: Arc<dyn LogWriter>) {
        self.writers.write().unwrap_or_else(|p| p.into_inner()).push(writer);
    }

    pub(super) fn step_cpu(&self) -> LogStepCpu {
        let read = |i: usize| self.steps.0.get(i).map_or(0.0, |n| n.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e9);
        LogStepCpu { analysis: read(0), store: read(1), log_mal: read(2) }
    }

    pub(super) fn view(&self, key: &RuleKey) -> LogEvaluationView {
        self.stats.view(key)
    }

    pub(super) fn queued(&self) -> usize {
        self.queue.len()
    }

    pub(super) fn pending(&self) -> usize {
        self.queue.pending()
    }

    pub(super) fn wait_idle(&self, deadline: Instant) -> bool {
        self.queue.wait_idle(deadline.saturating_duration_since(std::time::Instant::now()))
    }

    /// Refuses new batches; the threads finish what is queued, then end.
    pub(super) fn stop(&self) {
        self.queue.stop();
    }

    fn lock_files(&self) -> MutexGuard<'_, LalFiles> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the state of files still loaded, adds new ones, forgets unloaded ones, and the
    /// stats of files the node no longer knows.
    fn refresh(&self, files: &mut LalFiles) {
        let runtime = &self.shared.runtime;
        let version = runtime.version();
        if files.runtime_version == Some(version) {
            return;
        }
        let (loaded, known): (HashSet<RuleKey>, HashSet<RuleKey>) = runtime.with_all(|rules| {
            let lal = || rules.iter().filter(|(key, _)| key.catalog == ids::Catalog::Lal);
            let loaded = lal()
                .filter(|(_, state)| state.loaded.as_ref().is_some_and(|l| matches!(*l.compiled, Compiled::Lal(_))))
                .map(|(key, _)| key.clone())
                .collect();
            (loaded, lal().map(|(key, _)| key.clone()).collect())
        });
        files.files.retain(|key, _| loaded.contains(key));
        for key in loaded {
            files.files.entry(key).or_default();
        }
        files.runtime_version = Some(version);
        runtime.claims.with_all(|claims| self.stats.retain(|key| known.contains(key) || claims.contains_key(key)));
    }

    /// Opens the gates and runs the group's logs through the running files, under the files'
    /// lock; the gates stay open in the result.
    fn analyze(&self, batches: &[LogBatch], now_ms: i64) -> Analysis {
        let mut files = self.lock_files();
        self.refresh(&mut files);
        let mut analysis = Analysis::default();
        // Sized once for a group of thousands of logs, not grown (each growth copies the records).
        let logs: usize = batches.iter().map(|batch| batch.logs.len()).sum();
        analysis.kept.reserve(logs);
        analysis.kept_by.reserve(logs);
        // (index into analysis.files) per run, and the suspended files' content.
        let mut running: Vec<usize> = Vec::new();
        let mut runs: Vec<FileRun<'_>> = Vec::new();
        let mut suspended: Vec<(usize, Arc<PreparedLalFile>)> = Vec::new();
        for (key, file) in files.files.iter_mut() {
            let tally = |evaluated| FileTally { key: key.clone(), file: key.to_string(), evaluated, tally: LogTally::default(), last_log: None, batches_in: 0 };
            match self.shared.runtime.begin_eval(key) {
                Ok(guard) => {
                    if !file.prepare(key, &guard.loaded) {
                        continue;
                    }
                    let FileLal { prepared, state } = file;
                    let Some((_, prepared)) = prepared.as_ref() else { continue };
                    running.push(analysis.files.len());
                    analysis.files.push(tally(true));
                    analysis.guards.push(guard);
                    runs.push(FileRun { file: prepared, state });
                }
                Err(GateClosed::Suspended(loaded)) => {
                    if file.prepare(key, &loaded)
                        && let Some((_, prepared)) = &file.prepared
                    {
                        suspended.push((analysis.files.len(), prepared.clone()));
                        analysis.files.push(tally(false));
                    }
                }
                Err(GateClosed::NotLoaded) => {}
            }
        }
        if runs.is_empty() && suspended.is_empty() {
            return analysis;
        }
        let logs = batches.iter().enumerate().flat_map(|(b, batch)| batch.logs.iter().enumerate().map(move |(l, log)| ((b, l), log, batch.received_ms)));
        for (index, log, received_ms) in logs {
            let mut general_fallback = true;
            for (file, prepared) in &suspended {
                if prepared.may_run(log)
                    && let Some(f) = analysis.files.get_mut(*file)
                {
                    f.tally.suspended += 1;
                }
                general_fallback &= !prepared.may_claim(log);
            }
            if runs.is_empty() {
                continue;
            }
            let FileAnalysis::Ran(outcomes) = analyze_files(&mut runs, log, now_ms, general_fallback) else { continue };
            for (run, mut outcome) in outcomes {
                if let Some(&file) = running.get(run) {
                    analysis.record(file, index, &mut outcome, received_ms);
                }
            }
        }
        analysis
    }

    /// One group of batches (one, or a backlog's first few): analysis under the lock, then the
    /// writes with the gates still open (one log write and one metric write per file for the
    /// whole group), then the counters, then the gates close.
    fn run(&self, batches: &[LogBatch]) {
        let now_ms = crate::base::clock::now_ms();
        let started = crate::base::clock::thread_cpu_seconds();
        let mut analysis = self.analyze(batches, i64::try_from(now_ms).unwrap_or(i64::MAX));
        let analysed = crate::base::clock::thread_cpu_seconds();
        self.steps.add(0, started, analysed);
        if analysis.files.is_empty() {
            return;
        }
        self.write(&mut analysis);
        let written = crate::base::clock::thread_cpu_seconds();
        self.steps.add(1, analysed, written);
        let emitted: Vec<Batch> = std::mem::take(&mut analysis.samples)
            .into_iter()
            .map(|(sample, received_ms)| Batch { protocol: Protocol::Lal, catalog: Catalog::LogMal, samples: vec![sample], received_ms })
            .collect();
        evaluate::run_each(&self.shared, &emitted);
        self.steps.add(2, written, crate::base::clock::thread_cpu_seconds());
        let telemetry = &self.shared.telemetry;
        for file in &analysis.files {
            for (outcome, count) in file.tally.outcomes() {
                if count > 0 {
                    telemetry.logs_by_rule.get_or_create(&labels([("rule", file.file.as_str()), ("outcome", outcome)])).inc_by(count);
                }
            }
            if file.tally.failed > 0 {
                telemetry.evaluation_errors.get_or_create(&labels([("rule", file.file.as_str())])).inc_by(file.tally.failed);
            }
            // A file none of whose rules ran on any log of a batch did not evaluate that batch.
            let evaluated = if file.evaluated { file.batches_in } else { 0 };
            if evaluated > 0 || file.tally != LogTally::default() {
                self.stats.of(&file.key).add(&file.tally, evaluated, now_ms);
            }
        }
        // The gates close only now: a drain covers the writes of the content it drained.
        drop(analysis);
    }

    /// Hands the kept logs to every writer; a refusal counts against the files that kept them.
    fn write(&self, analysis: &mut Analysis) {
        if analysis.kept.is_empty() {
            return;
        }
        let (logs, owners) = (std::mem::take(&mut analysis.kept), std::mem::take(&mut analysis.kept_by));
        let writers = self.writers.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut failed = false;
        for writer in writers {
            if let Err(e) = writer.write(&logs) {
                tracing::warn!(logs = logs.len(), error = %e, "kept logs not written");
                failed = true;
            }
        }
        if failed {
            for owner in owners {
                if let Some(file) = analysis.files.get_mut(owner) {
                    file.tally.kept_not_written += 1;
                }
            }
        }
    }
}

/// One LAL thread: a batch at a time until the queue stops and empties.
fn log_loop(plane: &LogPlane) {
    while let Some(group) = plane.queue.take_up_to(GROUP_LOGS, |batch| batch.logs.len()) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| plane.run(&group)));
        if outcome.is_err() {
            let logs: usize = group.iter().map(|batch| batch.logs.len()).sum();
            let protocol = group.first().map_or("", |batch| batch.protocol.as_str());
            tracing::error!(protocol, batches = group.len(), logs, "LAL evaluation panicked; batches lost");
        }
        plane.queue.done_many(group.len());
    }
}

/// The logs a LAL thread takes from a backlog at once, in whole batches (the first whatever its
/// size): a group shares one synced log write, one metric write per log-MAL file and one
/// opening of the gates. Without a backlog a thread takes one batch.
const GROUP_LOGS: usize = 16384;
