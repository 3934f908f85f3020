//! `hotrule bench mal`: MAL evaluation throughput on one core, parsing excluded.
//!
//! - vm.yaml: every rule of `otel-rules/vm.yaml` on node_exporter-shaped input: the recorded
//!   scrapes of `src/engines/mal-engine/tests/data/node-exporter` (embedded in the binary),
//!   replayed for many hosts (each host's samples get `job_name` and `node_identifier_host_name`,
//!   as the OpenTelemetry collector adds them). Each round is one scrape per host, 60 s after the
//!   previous one, counters advancing by the recorded difference between the two scrapes; one batch
//!   per host, all through one engine state, as one rule file's receiver would see them. The
//!   batches of a round are built before its clock starts.
//! - the corpus: every MAL file under the rules directory on its synthesized input
//!   (`hotrule_mal_engine::synth`), several rounds 60 s apart.
//! - allocations per sample, from the counting allocator a `hotrule` binary built with the
//!   `bench-alloc` feature installs ([`super::alloc`]), over the timed evaluations only; without
//!   the feature the report says they were not counted;
//! - state memory per 10k counter series: the heap bytes still owned by the engine state after
//!   the run (live bytes of the benchmark thread once the batches, outputs and input label maps
//!   are dropped), divided by the state's own series count.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hotrule_mal_engine::{EngineState, LabelMap, Labels, PreparedFile, Sample, exposition, synth};

use super::alloc::{AllocSnapshot, counting};
use crate::compiler::{Compiled, DslKind, compile_bundled};

const SCRAPE_1: &str = include_str!("../engines/mal-engine/tests/data/node-exporter/scrape1.prom");
const SCRAPE_2: &str = include_str!("../engines/mal-engine/tests/data/node-exporter/scrape2.prom");
pub(super) const T0: i64 = 1_795_598_820_000;
const WARM_UP_ROUNDS: usize = 2;

/// What the vm.yaml run measured.
#[derive(Debug, Clone)]
pub struct VmReport {
    pub hosts: usize,
    pub rounds: usize,
    pub samples_per_scrape: usize,
    pub samples_read: usize,
    pub samples: usize,
    pub values: usize,
    pub elapsed: Duration,
    pub alloc: Option<AllocSnapshot>,
    pub state_series: usize,
    pub state_bytes: Option<i64>,
}

/// The two recorded scrapes as (sample, per-round increment) for one host.
pub(super) fn recorded() -> Result<Vec<(Sample, f64)>, String> {
    let first = exposition::parse(SCRAPE_1, T0, usize::MAX).map_err(|e| format!("scrape1.prom: {e}"))?;
    let second = exposition::parse(SCRAPE_2, T0, usize::MAX).map_err(|e| format!("scrape2.prom: {e}"))?;
    let later: HashMap<(&str, &LabelMap), f64> =
        second.samples.iter().map(|s| ((s.name.as_str(), s.labels.as_ref()), s.value)).collect();
    Ok(first
        .samples
        .iter()
        .map(|s| {
            let step = later.get(&(s.name.as_str(), s.labels.as_ref())).map_or(0.0, |v| v - s.value);
            (s.clone(), step)
        })
        .collect())
}

fn prepare(path: &Path) -> Result<PreparedFile, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match compile_bundled(DslKind::Mal, &bytes) {
        Ok(Compiled::Mal(file)) => Ok(PreparedFile::new(file)),
        Ok(Compiled::Lal(_)) => Err(format!("{} is not a MAL file", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Runs vm.yaml on `hosts` node_exporter hosts for `rounds` timed rounds.
pub fn vm(rules_dir: &Path, hosts: usize, rounds: usize) -> Result<VmReport, String> {
    let file = prepare(&rules_dir.join("otel-rules/vm.yaml"))?;
    let scrape = recorded()?;
    let read: std::collections::HashSet<&str> =
        (0..file.file().rules.len()).flat_map(|i| file.inputs_of(i)).map(String::as_str).collect();
    let samples_read = scrape.iter().filter(|(s, _)| read.contains(s.name.as_str())).count();
    let before_state = AllocSnapshot::now();
    // One label map per host and series, shared by every round (a receiver would build them
    // per batch; that is parsing, excluded here).
    let host_labels: Vec<Vec<Labels>> = (0..hosts)
        .map(|h| {
            scrape
                .iter()
                .map(|(s, _)| {
                    let mut labels = s.labels.as_ref().clone();
                    labels.insert("job_name".into(), "vm-monitoring".into());
                    labels.insert("node_identifier_host_name".into(), format!("host-{h}"));
                    Arc::new(labels)
                })
                .collect()
        })
        .collect();
    let mut state = EngineState::default();
    let mut report = VmReport {
        hosts,
        rounds,
        samples_per_scrape: scrape.len(),
        samples_read,
        samples: 0,
        values: 0,
        elapsed: Duration::ZERO,
        alloc: None,
        state_series: 0,
        state_bytes: None,
    };
    let mut allocated = AllocSnapshot::default();
    for round in 0..WARM_UP_ROUNDS + rounds {
        let ts = T0 + round as i64 * 60_000;
        let batches: Vec<Vec<Sample>> = host_labels
            .iter()
            .map(|labels| {
                scrape
                    .iter()
                    .zip(labels)
                    .map(|((s, step), l)| Sample::new(s.name.clone(), l.clone(), s.value + step * round as f64, ts))
                    .collect()
            })
            .collect();
        let timed = round >= WARM_UP_ROUNDS;
        let start_alloc = AllocSnapshot::now();
        let start = Instant::now();
        for batch in &batches {
            let evaluation = file.evaluate(batch, ts, &mut state);
            if let Some(error) = evaluation.errors.first() {
                return Err(format!("vm.yaml: {error}"));
            }
            if timed {
                report.values += evaluation.values.len();
            }
        }
        if timed {
            report.elapsed += start.elapsed();
            let spent = AllocSnapshot::now().since(start_alloc);
            allocated.allocations += spent.allocations;
            allocated.allocated_bytes += spent.allocated_bytes;
            report.samples += batches.iter().map(Vec::len).sum::<usize>();
        }
    }
    drop(host_labels);
    report.state_series = state.counters.len();
    if counting() {
        report.alloc = Some(allocated);
        report.state_bytes = Some(AllocSnapshot::now().since(before_state).live_bytes);
    }
    drop(state);
    Ok(report)
}

/// What the corpus-wide run measured.
#[derive(Debug, Clone)]
pub struct CorpusReport {
    pub files: usize,
    pub rules: usize,
    pub samples: usize,
    pub values: usize,
    pub errors: usize,
    pub elapsed: Duration,
    pub alloc: Option<AllocSnapshot>,
}

/// Every MAL file under `rules_dir` (LAL files are skipped) on its synthesized input.
pub fn corpus(rules_dir: &Path, rounds: usize) -> Result<CorpusReport, String> {
    let (bundled, _) = crate::control::bundled::Bundled::load(rules_dir).map_err(|e| e.to_string())?;
    let mut report = CorpusReport {
        files: 0,
        rules: 0,
        samples: 0,
        values: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        alloc: None,
    };
    let mut allocated = AllocSnapshot::default();
    for rule in bundled.iter() {
        if rule.key.catalog.dsl() != Some(DslKind::Mal) {
            continue;
        }
        let file = match compile_bundled(DslKind::Mal, &rule.content) {
            Ok(Compiled::Mal(file)) => PreparedFile::new(file),
            _ => return Err(format!("{} does not compile", rule.key)),
        };
        report.files += 1;
        report.rules += file.file().rules.len();
        let mut state = EngineState::default();
        for round in 0..rounds.max(2) {
            let ts = T0 + round as i64 * 60_000;
            let batch = synth::synthesize(&file, 100.0 + 60.0 * round as f64, ts);
            let start_alloc = AllocSnapshot::now();
            let start = Instant::now();
            let evaluation = file.evaluate(&batch, ts, &mut state);
            report.elapsed += start.elapsed();
            let spent = AllocSnapshot::now().since(start_alloc);
            allocated.allocations += spent.allocations;
            allocated.allocated_bytes += spent.allocated_bytes;
            report.samples += batch.len();
            report.values += evaluation.values.len();
            report.errors += evaluation.errors.len();
        }
    }
    if counting() {
        report.alloc = Some(allocated);
    }
    Ok(report)
}

fn per_second(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}

fn alloc_line(alloc: Option<AllocSnapshot>, samples: usize) -> String {
    match alloc {
        Some(a) => format!(
            "{:.2} allocations and {:.0} bytes allocated per sample",
            a.allocations as f64 / samples.max(1) as f64,
            a.allocated_bytes as f64 / samples.max(1) as f64
        ),
        None => "allocations NOT counted: the counting allocator is in benchmark builds only (build with --features bench-alloc)".into(),
    }
}

/// Runs both measurements and prints them; an error when vm.yaml misses its goal is not
/// raised: the figure is the result.
pub fn run(rules_dir: &Path, hosts: usize, rounds: usize, corpus_rounds: usize) -> Result<(), String> {
    let vm = vm(rules_dir, hosts.max(1), rounds.max(1))?;
    let rate = per_second(vm.samples, vm.elapsed);
    println!(
        "vm.yaml, node_exporter input: {} hosts x {} rounds (+{WARM_UP_ROUNDS} warm-up), {} samples per scrape ({} read by the rules)",
        vm.hosts, vm.rounds, vm.samples_per_scrape, vm.samples_read
    );
    println!(
        "  {} samples in {:.3} s: {:.0} samples/s on one core ({:.0} read samples/s), {} values; goal 1000000: {}",
        vm.samples,
        vm.elapsed.as_secs_f64(),
        rate,
        per_second(vm.samples / vm.samples_per_scrape.max(1) * vm.samples_read, vm.elapsed),
        vm.values,
        if rate >= 1_000_000.0 { "met" } else { "NOT met" }
    );
    println!("  {}", alloc_line(vm.alloc, vm.samples));
    match vm.state_bytes {
        Some(bytes) => println!(
            "  state: {} counter series, {} bytes live after the run: {:.2} MiB per 10k series (measured: live heap bytes)",
            vm.state_series,
            bytes,
            bytes as f64 * 10_000.0 / vm.state_series.max(1) as f64 / (1024.0 * 1024.0)
        ),
        None => println!("  state: {} counter series (memory NOT measured without the counting allocator: build with --features bench-alloc)", vm.state_series),
    }
    let corpus = corpus(rules_dir, corpus_rounds)?;
    println!(
        "corpus: {} MAL files, {} rules, synthesized input, {} rounds each: {} samples in {:.3} s: {:.0} samples/s, {} values, {} rule errors",
        corpus.files,
        corpus.rules,
        corpus_rounds.max(2),
        corpus.samples,
        corpus.elapsed.as_secs_f64(),
        per_second(corpus.samples, corpus.elapsed),
        corpus.values,
        corpus.errors
    );
    println!("  {}", alloc_line(corpus.alloc, corpus.samples));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules")
    }

    #[test]
    fn a_small_vm_run_produces_values() {
        let report = vm(&rules_dir(), 2, 1).expect("vm run");
        assert_eq!(report.samples_per_scrape, 507);
        assert_eq!(report.samples, 2 * 507);
        assert!(report.samples_read > 20 && report.samples_read < 507, "{}", report.samples_read);
        assert!(report.values > 0);
        assert!(report.state_series > 0);
    }

    #[test]
    fn the_corpus_run_covers_every_mal_file_without_errors() {
        let report = corpus(&rules_dir(), 2).expect("corpus run");
        assert!(report.files >= 80, "{}", report.files);
        assert_eq!(report.errors, 0);
        assert!(report.values > 0);
    }
}
