//! One batch against the files of its catalog, on an evaluation thread.
//!
//! Each file has one [`FileEval`] (its prepared content and its counter windows), locked for a
//! whole evaluation: counter windows must see a series' points in order, so evaluations of one
//! file run one at a time while different files run in parallel. Under that lock the thread
//! opens the file's gate (`Runtime::begin_eval`): a suspended file's samples are dropped and
//! counted; an open gate hands one content version for the whole evaluation, and stays open
//! until the values are written, so a drain also covers the writes.
//!
//! The write happens after the evaluation lock is released (a group commit per file, like the
//! store's): an evaluation queues its values on the file's [`FileSlot`] in evaluation order,
//! releases the lock, and the first thread to take the file's writer lock writes everything
//! queued in one call. So the next batch of the same file evaluates while the previous one's
//! synced write runs, and one synced write carries the values of every evaluation that queued
//! meanwhile; values still reach the writers in evaluation order, and each evaluation's gate
//! closes only once its own values are written.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use hotrule_mal_engine::{EngineState, MetricValue, PreparedFile};

use super::Shared;
use crate::compiler::{Compiled, MetricShape};
use crate::data::seam::Batch;
use crate::base::ids::{ContentHash, RuleKey};
use crate::control::runtime::{EvalGuard, GateClosed, LoadedRule};
use crate::base::fast::{FastMap, FastSet};
use crate::base::self_metrics::labels;

/// A content version ready to evaluate.
pub(super) struct Prepared {
    pub hash: ContentHash,
    pub file: PreparedFile,
    /// Every sample name some rule reads (checked against every batch of the catalog: a fast
    /// hash, seeded per process).
    inputs: FastSet<String>,
    shapes: BTreeMap<String, MetricShape>,
}

impl Prepared {
    fn of(catalog: crate::base::ids::Catalog, hash: &ContentHash, compiled: &Compiled) -> Option<Prepared> {
        let Compiled::Mal(file) = compiled else { return None };
        let file = prepare(catalog, file.clone());
        let inputs = (0..file.file().rules.len()).flat_map(|i| file.inputs_of(i).iter().cloned()).collect();
        let shapes = file.file().metrics();
        Some(Prepared { hash: hash.clone(), file, inputs, shapes })
    }

    /// How many of a batch's samples this file reads, from the batch's count per name.
    fn reads(&self, names: &Names<'_>) -> usize {
        if names.len() < self.inputs.len() {
            names.iter().filter(|(name, _)| self.inputs.contains(**name)).map(|(_, n)| n).sum()
        } else {
            self.inputs.iter().filter_map(|input| names.get(input.as_str())).sum()
        }
    }
}

/// A MAL file of `catalog` ready to evaluate: `histogram()` without a unit reads `le` as the
/// catalog's receivers send it, milliseconds for the agents' meters (`meter-analyzer-config`,
/// as SkyWalking's `MeterProcessor`), seconds for everything else (Prometheus, OpenTelemetry).
pub fn prepare(catalog: crate::base::ids::Catalog, file: hotrule_rule_compiler::MalFile) -> PreparedFile {
    let file = PreparedFile::new(file);
    match catalog {
        crate::base::ids::Catalog::MeterAnalyzerConfig => file.with_default_histogram_unit_ms(1.0),
        _ => file,
    }
}

/// Every sample name some rule of a MAL file reads (empty for other content).
pub(super) fn input_names(compiled: &Compiled) -> HashSet<String> {
    let Compiled::Mal(file) = compiled else { return HashSet::new() };
    let file = PreparedFile::new(file.clone());
    (0..file.file().rules.len()).flat_map(|i| file.inputs_of(i).iter().cloned()).collect()
}

/// Metrics whose counter windows restart when `old` is replaced by `new`: those whose shape
/// changed (removed rules lose theirs in `carry_over` anyway; added ones have none).
pub(super) fn restarted_metrics(old: &BTreeMap<String, MetricShape>, new: &BTreeMap<String, MetricShape>) -> BTreeSet<String> {
    old.iter().filter(|(name, shape)| new.get(*name).is_some_and(|s| s != *shape)).map(|(name, _)| name.clone()).collect()
}

/// A batch's sample count per sample name, counted once for all files.
type Names<'a> = FastMap<&'a str, usize>;

/// One file's evaluation state, owned by dispatch.
#[derive(Default)]
pub(super) struct FileEval {
    prepared: Option<Prepared>,
    state: EngineState,
    /// The runtime version at which `prepared` was last confirmed to be the loaded content:
    /// while the runtime has not changed since, a batch the prepared file reads nothing of is
    /// skipped without opening the gate (the common case: most files read few names).
    verified_at: Option<u64>,
    /// The content whose metric shapes the writers were last told about.
    shapes_ensured: Option<ContentHash>,
}

impl FileEval {
    /// Makes `loaded` the prepared version: prepared once per content version; a new version
    /// takes over the counter windows its rules still own. False for non-MAL content.
    fn prepare(&mut self, key: &RuleKey, loaded: &LoadedRule) -> bool {
        if self.prepared.as_ref().is_none_or(|p| p.hash != loaded.content_hash) {
            let Some(next) = Prepared::of(key.catalog, &loaded.content_hash, &loaded.compiled) else { return false };
            match &self.prepared {
                Some(previous) => {
                    let restarted = restarted_metrics(&previous.shapes, &next.shapes);
                    self.state.carry_over(&next.file, &restarted);
                }
                None => self.state = EngineState::default(),
            }
            self.prepared = Some(next);
        }
        true
    }
}

/// One file's evaluation state and its queue of values waiting to be written.
#[derive(Default)]
pub(super) struct FileSlot {
    eval: Mutex<FileEval>,
    /// Evaluated values not yet written, in evaluation order.
    queued: Mutex<Vec<QueuedWrite>>,
    /// Held by the one thread writing the queued values.
    writer: Mutex<()>,
}

pub(super) type Slot = Arc<FileSlot>;

/// One evaluation's values waiting for the write, and where the write's outcome goes.
struct QueuedWrite {
    values: Vec<MetricValue>,
    hash: ContentHash,
    /// How many of the values some writer refused, once written.
    outcome: Arc<Mutex<Option<usize>>>,
}

/// An evaluation whose values are queued: its gate stays open until they are written.
struct Queued {
    guard: EvalGuard,
    outcome: Arc<Mutex<Option<usize>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until `queued`'s values are written (writing every queued write of the file as one
/// group if no other thread has), then closes its gate.
fn finish(shared: &Shared, key: &RuleKey, slot: &FileSlot, queued: Queued) {
    {
        let _writer = lock(&slot.writer);
        loop {
            if lock(&queued.outcome).is_some() {
                break;
            }
            let group = std::mem::take(&mut *lock(&slot.queued));
            if group.is_empty() {
                // Only a writer that failed midway (a panic) leaves an outcome unset.
                tracing::error!(rule = %key, "queued values lost");
                break;
            }
            write_group(shared, key, group);
        }
    }
    // The gate closes only now: a drain covers the writes of the content it drained.
    drop(queued.guard);
}

/// Writes the values of several evaluations of one file in one call, in their order.
fn write_group(shared: &Shared, key: &RuleKey, group: Vec<QueuedWrite>) {
    let mut all = Vec::with_capacity(group.iter().map(|q| q.values.len()).sum());
    let mut parts = Vec::with_capacity(group.len());
    for write in group {
        let start = all.len();
        all.extend(write.values);
        parts.push((start..all.len(), write.hash, write.outcome));
    }
    let failed = shared.write(key, &all);
    let stats = shared.stats.of(key);
    stats.values_out.add((all.len() - failed) as u64);
    stats.values_rejected.add(failed as u64);
    for (range, hash, outcome) in parts {
        shared.observe_written(key, &hash, &all[range.clone()]);
        *lock(&outcome) = Some(if failed > 0 { range.len() } else { 0 });
    }
}

/// Evaluates `batch` against every loaded MAL file of its catalog: files whose lock is free
/// first, then the busy ones in turn.
pub(super) fn run_batch(shared: &Shared, batch: &Batch) {
    let files = shared.files_of(batch.catalog);
    let batch = [(batch, names_of(batch))];
    let mut pending: Vec<&(RuleKey, Slot)> = files.iter().collect();
    while !pending.is_empty() {
        let mut busy = Vec::with_capacity(pending.len());
        for entry in pending.drain(..) {
            let (key, slot) = entry;
            let queued = match slot.eval.try_lock() {
                Ok(mut file) => evaluate_file(shared, key, &mut file, &slot.queued, &batch),
                Err(std::sync::TryLockError::Poisoned(p)) => evaluate_file(shared, key, &mut p.into_inner(), &slot.queued, &batch),
                Err(std::sync::TryLockError::WouldBlock) => {
                    busy.push(entry);
                    continue;
                }
            };
            if let Some(queued) = queued {
                finish(shared, key, slot, queued);
            }
        }
        // Everything left was busy: wait for the first, then try the rest again.
        if let Some((key, slot)) = busy.first().copied() {
            let queued = evaluate_file(shared, key, &mut lock(&slot.eval), &slot.queued, &batch);
            if let Some(queued) = queued {
                finish(shared, key, slot, queued);
            }
            busy.remove(0);
        }
        pending = busy;
    }
}

/// How many samples of each name `batch` holds.
fn names_of(batch: &Batch) -> Names<'_> {
    let mut names: Names<'_> = FastMap::default();
    for sample in &batch.samples {
        *names.entry(sample.name.as_str()).or_default() += 1;
    }
    names
}

/// Evaluates each of `batches` on its own (as SkyWalking evaluates each sample a LAL rule emits:
/// one MAL run per sample) against every loaded MAL file of their catalog, and writes each
/// file's values of all of them in one call, in their order. The same values reach the store as
/// one `run_batch` per batch would write, with one gate opening, one queued write and one store
/// write per file instead of one per batch.
pub(super) fn run_each(shared: &Shared, batches: &[Batch]) {
    let Some(first) = batches.first() else { return };
    let files = shared.files_of(first.catalog);
    let each: Vec<(&Batch, Names<'_>)> = batches.iter().map(|batch| (batch, names_of(batch))).collect();
    for (key, slot) in files.iter() {
        let queued = evaluate_file(shared, key, &mut lock(&slot.eval), &slot.queued, &each);
        if let Some(queued) = queued {
            finish(shared, key, slot, queued);
        }
    }
}

/// Evaluates each of `batches` on its own, with the file's lock held and its gate opened once
/// for all of them; the values, if any, are queued for the write as one (see [`finish`]), with
/// the gate still open.
fn evaluate_file(
    shared: &Shared,
    key: &RuleKey,
    file: &mut FileEval,
    queue: &Mutex<Vec<QueuedWrite>>,
    batches: &[(&Batch, Names<'_>)],
) -> Option<Queued> {
    let version = shared.runtime.version();
    let reads = |p: &Prepared| batches.iter().map(|(_, names)| p.reads(names)).sum::<usize>();
    if file.verified_at == Some(version) && file.prepared.as_ref().is_some_and(|p| reads(p) == 0) {
        return None;
    }
    let guard = match shared.runtime.begin_eval(key) {
        Ok(guard) => guard,
        Err(GateClosed::NotLoaded) => return None,
        Err(GateClosed::Suspended(loaded)) => {
            let dropped = match file.prepare(key, &loaded) {
                true => file.prepared.as_ref().map_or(0, reads),
                false => 0,
            };
            file.verified_at = Some(version);
            if dropped > 0 {
                let rule = key.to_string();
                shared.telemetry.samples_dropped.get_or_create(&labels([("rule", &rule), ("reason", "suspended")])).inc_by(dropped as u64);
                shared.stats.of(key).samples_dropped.add(dropped as u64);
            }
            return None;
        }
    };
    if !file.prepare(key, &guard.loaded) {
        return None;
    }
    file.verified_at = Some(version);
    // A new version's shapes reach the writers before its first values: a metric whose shape
    // changed starts its new series there (the old version drained before this one loaded).
    if let Some(p) = file.prepared.as_ref()
        && file.shapes_ensured.as_ref() != Some(&p.hash)
    {
        shared.ensure_shapes(key, &p.shapes);
        file.shapes_ensured = Some(p.hash.clone());
    }
    let FileEval { prepared, state, .. } = file;
    let Some(prepared) = prepared.as_ref() else { return None };
    let stats = shared.stats.of(key);
    let rule = key.to_string();
    let seconds = shared.telemetry.evaluation_seconds.get_or_create(&labels([("rule", &rule)])).clone();
    let now_ms = crate::base::clock::now_ms();
    let (mut values, mut evaluations, mut errors) = (Vec::new(), 0, 0);
    for (batch, names) in batches {
        let read = prepared.reads(names);
        if read == 0 {
            continue;
        }
        let started = Instant::now();
        let evaluation = prepared.file.evaluate(&batch.samples, i64::try_from(now_ms).unwrap_or(i64::MAX), state);
        seconds.observe(started.elapsed().as_secs_f64());
        stats.samples_in.add(read as u64);
        evaluations += 1;
        if let Some(last) = evaluation.errors.last() {
            errors += evaluation.errors.len();
            stats.runs.set_error(last.to_string(), now_ms);
            tracing::debug!(rule = %key, errors = evaluation.errors.len(), last = %last, "evaluation errors");
        }
        values.extend(evaluation.values);
    }
    if evaluations == 0 {
        return None;
    }
    stats.runs.evaluated_times(evaluations, now_ms);
    if errors > 0 {
        shared.telemetry.evaluation_errors.get_or_create(&labels([("rule", &rule)])).inc_by(errors as u64);
        stats.errors.add(errors as u64);
    }
    let accepted = registered(shared, &guard.disabled_metrics, values);
    let unregistered = accepted.rejected;
    if unregistered > 0 {
        shared.reject("unregistered_measure", unregistered);
        stats.values_rejected.add(unregistered as u64);
    }
    if accepted.values.is_empty() {
        return None;
    }
    let outcome = Arc::new(Mutex::new(None));
    lock(queue).push(QueuedWrite { values: accepted.values, hash: prepared.hash.clone(), outcome: outcome.clone() });
    Some(Queued { guard, outcome })
}

struct Accepted {
    values: Vec<MetricValue>,
    rejected: usize,
}

/// The values whose metric is registered with the shape they carry and is not disabled.
fn registered(shared: &Shared, disabled: &BTreeSet<String>, values: Vec<MetricValue>) -> Accepted {
    let mut known: HashMap<String, Option<MetricShape>> = HashMap::new();
    let mut accepted = Accepted { values: Vec::with_capacity(values.len()), rejected: 0 };
    for value in values {
        let shape = MetricShape { scope: value.entity.scope, downsampling: value.downsampling, data_type: value.data_type };
        let registered = match known.get(&value.metric) {
            Some(shape) => *shape,
            None => {
                let found = shared.registry.shape(&value.metric);
                known.insert(value.metric.clone(), found);
                found
            }
        };
        if registered == Some(shape) && !disabled.contains(&value.metric) {
            accepted.values.push(value);
        } else {
            accepted.rejected += 1;
        }
    }
    accepted
}
