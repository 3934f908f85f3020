//! `hotrule bench dispatch`: pause-to-drained under full load.
//!
//! One runtime with `otel-rules/vm.yaml` loaded, one dispatcher (its queue and evaluation threads
//! as configured), a null writer, and a loader thread that keeps the queue full with node_exporter
//! batches (the recorded scrapes of `src/engines/mal-engine/tests/data/node-exporter`, one host's
//! scrape per batch, hosts in turn, each round 60 s after the previous). Repeatedly the file is
//! suspended and the time until its open evaluations have finished (values written) is measured
//! ([`Dispatcher::measure_pause`]), then it is resumed and the load settles again.
//! The goal: p99 < 50 ms.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hotrule_mal_engine::{MetricValue, Sample};

use super::mal::{T0, recorded};
use crate::compiler::{Compiled, DslKind, MetricShape, compile_bundled};
use crate::data::seam::{Batch, BatchSink, Catalog, Protocol};
use crate::data::evaluation::{DispatchSettings, Dispatcher, MeasureRegistry};
use crate::base::ids::{ContentHash, RuleKey};
use crate::data::metrics::{MetricStoreError, MetricWriter};
use crate::control::runtime::{LoaderKind, Runtime, loaded_rule};
use crate::base::self_metrics::SelfMetrics;

/// What one run measured.
#[derive(Debug, Clone)]
pub struct DispatchReport {
    pub workers: usize,
    pub queue_batches: usize,
    pub samples_per_batch: usize,
    /// Pause-to-drained times, sorted.
    pub pauses: Vec<Duration>,
    /// Pauses whose drain passed the bound.
    pub not_drained: usize,
    /// Evaluations open right after the suspends, summed.
    pub in_flight: usize,
    pub batches_submitted: u64,
    pub batches_refused: u64,
    pub values_written: u64,
    pub elapsed: Duration,
}

impl DispatchReport {
    pub fn percentile(&self, p: f64) -> Duration {
        if self.pauses.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.pauses.len() as f64).ceil() as usize;
        self.pauses[rank.clamp(1, self.pauses.len()) - 1]
    }
}

struct Shapes(BTreeMap<String, MetricShape>);

impl MeasureRegistry for Shapes {
    fn shape(&self, metric: &str) -> Option<MetricShape> {
        self.0.get(metric).copied()
    }
}

#[derive(Default)]
struct CountingWriter(AtomicU64);

impl MetricWriter for CountingWriter {
    fn write(&self, values: &[MetricValue]) -> Result<(), MetricStoreError> {
        self.0.fetch_add(values.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// Per-host batches of round `round`.
fn round_batches(scrape: &[(Sample, f64)], hosts: usize, round: usize) -> Vec<Batch> {
    let ts = T0 + round as i64 * 60_000;
    (0..hosts)
        .map(|h| {
            let samples = scrape
                .iter()
                .map(|(s, step)| {
                    let mut labels = s.labels.as_ref().clone();
                    labels.insert("job_name".into(), "vm-monitoring".into());
                    labels.insert("node_identifier_host_name".into(), format!("host-{h}"));
                    Sample::new(s.name.clone(), Arc::new(labels), s.value + step * round as f64, ts)
                })
                .collect();
            Batch { protocol: Protocol::RemoteWrite, catalog: Catalog::Otel, samples, received_ms: ts }
        })
        .collect()
}

/// Runs `pauses` pauses of vm.yaml while `hosts` hosts' batches keep the queue full.
pub async fn measure(rules_dir: &Path, settings: DispatchSettings, hosts: usize, pauses: usize) -> Result<DispatchReport, String> {
    let path = rules_dir.join("otel-rules/vm.yaml");
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let compiled = compile_bundled(DslKind::Mal, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let Compiled::Mal(file) = &compiled else { return Err("vm.yaml is not a MAL file".into()) };
    let shapes = Shapes(file.metrics());
    let key = RuleKey::new(crate::base::ids::Catalog::OtelRules, crate::base::ids::RuleName::parse("vm").map_err(|e| e.to_string())?);
    let runtime = Arc::new(Runtime::new());
    runtime.install(&key, loaded_rule(compiled, ContentHash::of(&bytes), None, LoaderKind::Bundled), Default::default());
    let writer = Arc::new(CountingWriter::default());
    let dispatcher = Arc::new(
        Dispatcher::new(settings.clone(), runtime, Arc::new(shapes), Arc::new(SelfMetrics::new()), vec![writer.clone()])
            .map_err(|e| e.to_string())?,
    );
    let scrape = recorded()?;
    let samples_per_batch = scrape.len();
    // Two rounds built ahead; the loader cycles through them (timestamps repeat, which the
    // counter windows take as out-of-order points: evaluation work is the same).
    let rounds: Vec<Vec<Batch>> = (0..2).map(|r| round_batches(&scrape, hosts.max(1), r)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (submitted, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let loader = {
        let (dispatcher, stop, submitted, refused) = (dispatcher.clone(), stop.clone(), submitted.clone(), refused.clone());
        std::thread::Builder::new()
            .name("bench-loader".into())
            .spawn(move || {
                for batch in rounds.iter().flatten().cycle() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    match dispatcher.submit(vec![batch.clone()]) {
                        Ok(()) => submitted.fetch_add(1, Ordering::Relaxed),
                        Err(_) => {
                            std::thread::yield_now();
                            refused.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
            .map_err(|e| e.to_string())?
    };
    let started = Instant::now();
    let mut report = DispatchReport {
        workers: settings.workers,
        queue_batches: settings.queue_batches,
        samples_per_batch,
        pauses: Vec::with_capacity(pauses),
        not_drained: 0,
        in_flight: 0,
        batches_submitted: 0,
        batches_refused: 0,
        values_written: 0,
        elapsed: Duration::ZERO,
    };
    // Full load first: the queue at its bound.
    let full = Instant::now() + Duration::from_secs(10);
    while dispatcher.queued() < settings.queue_batches / 2 && Instant::now() < full {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for _ in 0..pauses {
        let evaluated = dispatcher.evaluation(&key).evaluations;
        if let Some(timing) = dispatcher.measure_pause(&key).await {
            report.pauses.push(timing.elapsed);
            report.in_flight += timing.in_flight;
            report.not_drained += usize::from(!timing.drained);
        }
        // Let the threads take up the file again before the next pause.
        let settle = Instant::now() + Duration::from_secs(5);
        while dispatcher.evaluation(&key).evaluations < evaluated + settings.workers as u64 && Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    report.elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    loader.join().map_err(|_| "the loader thread panicked".to_string())?;
    let stopping = dispatcher.clone();
    tokio::task::spawn_blocking(move || stopping.stop()).await.map_err(|e| e.to_string())?;
    report.pauses.sort();
    report.batches_submitted = submitted.load(Ordering::Relaxed);
    report.batches_refused = refused.load(Ordering::Relaxed);
    report.values_written = writer.0.load(Ordering::Relaxed);
    Ok(report)
}

/// Runs the measurement and prints it; missing the goal is a result, not an error.
pub async fn run(rules_dir: &Path, settings: DispatchSettings, hosts: usize, pauses: usize) -> Result<(), String> {
    let report = measure(rules_dir, settings, hosts, pauses.max(1)).await?;
    let p99 = report.percentile(99.0);
    println!(
        "dispatch, otel-rules/vm.yaml under full load: {} evaluation threads, queue of {} batches, {} samples per batch (one node_exporter scrape), {} hosts",
        report.workers, report.queue_batches, report.samples_per_batch, hosts
    );
    println!(
        "  pause-to-drained over {} pauses: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; {:.2} evaluations open per pause; {} not drained within the bound; goal p99 < 50 ms: {}",
        report.pauses.len(),
        report.percentile(50.0).as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        report.pauses.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        report.in_flight as f64 / report.pauses.len().max(1) as f64,
        report.not_drained,
        if p99 < Duration::from_millis(50) && report.not_drained == 0 { "met" } else { "NOT met" }
    );
    println!(
        "  load: {} batches accepted ({:.0} samples/s offered), {} submissions refused (queue full), {} values written, in {:.2} s",
        report.batches_submitted,
        (report.batches_submitted as f64 * report.samples_per_batch as f64) / report.elapsed.as_secs_f64().max(1e-9),
        report.batches_refused,
        report.values_written,
        report.elapsed.as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_run_measures_every_pause_under_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules");
        let settings = DispatchSettings { queue_batches: 8, workers: 2, drain_timeout: Duration::from_secs(5), ..DispatchSettings::default() };
        let report = measure(&dir, settings, 4, 5).await.expect("run");
        assert_eq!(report.pauses.len(), 5);
        assert_eq!(report.not_drained, 0);
        assert_eq!(report.samples_per_batch, 507);
        assert!(report.batches_submitted > 0 && report.values_written > 0, "{report:?}");
        assert!(report.percentile(50.0) <= report.percentile(99.0));
    }
}
