//! `hotrule bench logs-query`: "on one hour of 10 million logs, a query for a rare keyword or a
//! rare tag value over the whole hour answers in under 100 ms", measured on the block store
//! (format 2, [`LogStore`]) side by side with the scan it replaces (format 1, [`V1LogStore`]).
//!
//! 1. **Load.** The same hour of logs ([`corpus`]: nginx access and application lines, rare
//!    needles planted at known places) into each store, in its own key space, in time order,
//!    [`BATCH`] logs per write call, `--writers` threads taking consecutive batches. The block
//!    store's `flush_all` is inside its clock: turning pending groups into blocks is part of
//!    what a write costs. Wall, logs/s and process CPU per log; the logs' generation alone is
//!    measured first, so its share of the CPU can be taken out.
//! 2. **Queries** over the whole hour, limit 100, newest first (`/query/logs`' default), each
//!    kind `--queries` times cycling through its needles, the two stores alternating: a rare
//!    keyword, a rare tag value, one busy service, the quiet service, no filter.
//! 3. **Checks.** Every answer must be exactly the logs the corpus says (contents, order,
//!    count; so a rare keyword or tag returns exactly the logs it was planted in), and the two
//!    stores' answers must be equal. A mismatch fails the run.
//!
//! On RocksDB with `--dir` (a build with the `rocksdb` feature), else on the in-memory twin of
//! the key space.

pub mod corpus;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use corpus::Corpus;

use super::lal_node::process_cpu_seconds;
use super::store::percentile;
use crate::base::self_metrics::SelfMetrics;
use crate::data::logs::records::v1::V1LogStore;
use crate::data::logs::records::{DEFAULT_RETENTION, LogStore};
use crate::data::logs::{KeptLog, LogFilter, LogOrder, LogReader, LogWriter, StoredLog};
use crate::store::kv::{KvEngine, MemKv};

/// Logs per write call.
pub const BATCH: usize = 1000;
/// The page every query asks for.
pub const LIMIT: usize = 100;

#[derive(Debug, Clone, clap::Args)]
pub struct LogsQueryArgs {
    /// RocksDB in `<dir>/logs-query/v2` and `<dir>/logs-query/v1` (needs the `rocksdb`
    /// feature; removed after the run); default: the in-memory twin.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Logs in the hour.
    #[arg(long, default_value_t = 10_000_000)]
    pub logs: usize,
    /// Busy services (plus one quiet service with 20 logs).
    #[arg(long, default_value_t = 20)]
    pub services: usize,
    /// Runs per query kind, cycling through its needles.
    #[arg(long, default_value_t = 20)]
    pub queries: usize,
    /// Skip the first format's store (the answers are still checked against the corpus).
    #[arg(long)]
    pub no_baseline: bool,
    /// Threads writing, each taking the next batch.
    #[arg(long, default_value_t = 2)]
    pub writers: usize,
}

/// What one query kind asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryKind {
    RareKeyword,
    RareTag,
    BusyService,
    QuietService,
    Newest,
}

impl QueryKind {
    pub const ALL: [QueryKind; 5] = [QueryKind::RareKeyword, QueryKind::RareTag, QueryKind::BusyService, QueryKind::QuietService, QueryKind::Newest];

    pub fn label(self) -> &'static str {
        match self {
            QueryKind::RareKeyword => "rare keyword (~10 logs)",
            QueryKind::RareTag => "rare tag value (~10 logs)",
            QueryKind::BusyService => "newest 100 of one busy service",
            QueryKind::QuietService => "quiet service (20 logs)",
            QueryKind::Newest => "newest 100, no filter",
        }
    }

    /// Run `round` of this kind: its filter and the corpus indices it must return, in order.
    pub fn query(self, corpus: &Corpus, round: usize) -> (LogFilter, Vec<usize>) {
        let hour = LogFilter { start_ms: corpus.start_ms(), end_ms: corpus.end_ms(), limit: LIMIT, order: LogOrder::NewestFirst, ..LogFilter::default() };
        let newest = |mut indices: Vec<usize>| {
            indices.reverse();
            indices.truncate(LIMIT);
            indices
        };
        match self {
            QueryKind::RareKeyword => {
                let n = round % corpus::KEYWORD_NEEDLES;
                (LogFilter { keyword: Some(corpus::keyword(n)), ..hour }, newest(corpus.keyword_indices(n)))
            }
            QueryKind::RareTag => {
                let n = round % corpus::TAG_NEEDLES;
                (LogFilter { tags: vec![(corpus::NEEDLE_TAG.into(), corpus::tag_value(n))], ..hour }, newest(corpus.tag_indices(n)))
            }
            QueryKind::BusyService => {
                let service = corpus.services()[round % corpus.services().len()].clone();
                let indices = (0..corpus.count()).rev().filter(|i| corpus.service_of(*i) == service).take(LIMIT).collect();
                (LogFilter { service: Some(service), ..hour }, indices)
            }
            QueryKind::QuietService => {
                (LogFilter { service: Some(corpus::QUIET_SERVICE.into()), ..hour }, newest(corpus.quiet_indices()))
            }
            QueryKind::Newest => (hour, (0..corpus.count()).rev().take(LIMIT).collect()),
        }
    }
}

/// p50 and p99 of a set of latencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    pub p50: Duration,
    pub p99: Duration,
}

impl Times {
    pub fn of(mut samples: Vec<Duration>) -> Times {
        samples.sort();
        Times { p50: percentile(&samples, 0.5), p99: percentile(&samples, 0.99) }
    }
}

/// Where two answers first differ.
#[derive(Debug, Clone, PartialEq)]
pub enum Difference {
    Count { left: usize, right: usize },
    At { position: usize, left: String, right: String },
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Difference::Count { left, right } => write!(f, "{left} logs against {right}"),
            Difference::At { position, left, right } => write!(f, "log {position} differs: {left} against {right}"),
        }
    }
}

/// The first difference between two answers (contents and order; cursors are each store's own).
pub fn first_difference(left: &[KeptLog], right: &[KeptLog]) -> Option<Difference> {
    if let Some(position) = left.iter().zip(right).position(|(l, r)| l != r) {
        let show = |log: &KeptLog| format!("{} {} {:?} {:?}", log.record.timestamp_ms, log.record.service, log.record.content, log.record.tags);
        return Some(Difference::At { position, left: show(&left[position]), right: show(&right[position]) });
    }
    (left.len() != right.len()).then_some(Difference::Count { left: left.len(), right: right.len() })
}

/// One store's load.
#[derive(Debug, Clone)]
pub struct Load {
    pub wall: Duration,
    pub cpu_seconds: f64,
    /// The directory's size after the load (RocksDB only).
    pub disk_bytes: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct KindReport {
    pub kind: QueryKind,
    pub v2: Times,
    pub v1: Option<Times>,
    /// Logs per answer, smallest and largest.
    pub found: (usize, usize),
}

#[derive(Debug, Clone)]
pub struct Report {
    pub logs: usize,
    pub store: &'static str,
    pub generation: Load,
    pub v2: Load,
    pub v1: Option<Load>,
    pub kinds: Vec<KindReport>,
}

/// A store under test: where it is, and its reader.
struct Measured<'a> {
    name: &'static str,
    reader: &'a dyn LogReader,
}

pub fn run(args: &LogsQueryArgs) -> Result<(), String> {
    let report = measure(args)?;
    print_report(&report, args);
    Ok(())
}

/// Loads both stores, runs and checks the queries.
pub fn measure(args: &LogsQueryArgs) -> Result<Report, String> {
    if args.queries == 0 || args.writers == 0 {
        return Err("--queries and --writers must be at least 1".into());
    }
    let end_ms = crate::base::clock::now_ms() as i64 - 60_000;
    let corpus = Corpus::new(args.logs, args.services, end_ms, BATCH)?;
    let store = if args.dir.is_some() { "RocksDB" } else { "the in-memory twin of the key space" };
    println!(
        "logs-query on {store}: {} logs over one hour ({} busy services and {}), {BATCH} per write call, {} writers",
        corpus.count(),
        corpus.services().len(),
        corpus::QUIET_SERVICE,
        args.writers
    );
    println!("load average before: {}", super::store::load_average());

    let generation = load(&corpus, args.writers, "generation only", &|_: &[KeptLog]| Ok(()))?;
    println!("generated the logs alone in {:.1?} ({:.2} µs CPU per log)", generation.wall, micros_per_log(&generation, corpus.count()));

    let (v2_engine, v2_path) = open_engine(args.dir.as_deref(), "v2")?;
    let v2 = LogStore::open(v2_engine.logs(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new())).map_err(|e| format!("opening the v2 store: {e}"))?;
    let mut v2_load = load(&corpus, args.writers, "v2", &|logs: &[KeptLog]| v2.write(logs).map_err(|e| e.to_string()))?;
    let (begin, begin_cpu) = (Instant::now(), process_cpu_seconds().unwrap_or(0.0));
    let blocks = v2.flush_all().map_err(|e| format!("flushing the v2 store: {e}"))?;
    v2_load.wall += begin.elapsed();
    v2_load.cpu_seconds += process_cpu_seconds().unwrap_or(0.0) - begin_cpu;
    v2_load.disk_bytes = v2_path.as_deref().map(dir_bytes);
    println!("v2: flush_all wrote {blocks} blocks in {:.1?}", begin.elapsed());

    let mut v1_parts = None;
    if !args.no_baseline {
        let (engine, path) = open_engine(args.dir.as_deref(), "v1")?;
        let store = V1LogStore::open(engine.logs(), Arc::new(SelfMetrics::new())).map_err(|e| format!("opening the v1 store: {e}"))?;
        let mut loaded = load(&corpus, args.writers, "v1", &|logs: &[KeptLog]| store.write(logs).map_err(|e| e.to_string()))?;
        loaded.disk_bytes = path.as_deref().map(dir_bytes);
        v1_parts = Some((engine, store, loaded));
    }

    let v2_measured = Measured { name: "v2", reader: &v2 };
    let v1_measured = v1_parts.as_ref().map(|(_, store, _)| Measured { name: "v1", reader: store });
    let mut kinds = Vec::new();
    for kind in QueryKind::ALL {
        kinds.push(query_kind(&corpus, kind, args.queries, &v2_measured, v1_measured.as_ref())?);
    }
    println!("load average after: {}", super::store::load_average());

    let v1 = v1_parts.map(|(engine, store, loaded)| {
        drop(store);
        drop(engine);
        loaded
    });
    drop(v2);
    drop(v2_engine);
    if let Some(dir) = &args.dir {
        let _ = std::fs::remove_dir_all(dir.join("logs-query"));
    }
    Ok(Report { logs: corpus.count(), store, generation, v2: v2_load, v1, kinds })
}

/// Writes the corpus through `write` from `writers` threads, each taking the next batch.
fn load(corpus: &Corpus, writers: usize, name: &str, write: &(dyn Fn(&[KeptLog]) -> Result<(), String> + Sync)) -> Result<Load, String> {
    let next_batch = AtomicUsize::new(0);
    let written = AtomicUsize::new(0);
    let (begin, begin_cpu) = (Instant::now(), process_cpu_seconds().unwrap_or(0.0));
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|_| {
                scope.spawn(|| {
                    loop {
                        let b = next_batch.fetch_add(1, Ordering::Relaxed);
                        if b >= corpus.batches() {
                            return Ok(());
                        }
                        let logs = corpus.batch(b);
                        write(&logs)?;
                        let before = written.fetch_add(logs.len(), Ordering::Relaxed);
                        let after = before + logs.len();
                        if after * 10 / corpus.count() > before * 10 / corpus.count() && name != "generation only" {
                            println!("loaded {after} of {} logs ({name}) in {:.1?}", corpus.count(), begin.elapsed());
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a writer panicked".to_string()))).collect()
    });
    for result in results {
        result.map_err(|e| format!("loading the {name} store: {e}"))?;
    }
    Ok(Load { wall: begin.elapsed(), cpu_seconds: process_cpu_seconds().unwrap_or(0.0) - begin_cpu, disk_bytes: None })
}

/// Runs one kind `queries` times on each store, alternating, and checks every answer.
fn query_kind(corpus: &Corpus, kind: QueryKind, queries: usize, v2: &Measured<'_>, v1: Option<&Measured<'_>>) -> Result<KindReport, String> {
    let mut v2_times = Vec::with_capacity(queries);
    let mut v1_times = Vec::with_capacity(queries);
    let mut found = (usize::MAX, 0);
    for round in 0..queries {
        let (filter, indices) = kind.query(corpus, round);
        let expected: Vec<KeptLog> = indices.iter().map(|i| corpus.log(*i)).collect();
        let (v2_logs, took) = timed_query(v2, &filter)?;
        v2_times.push(took);
        check(v2.name, kind, &filter, &v2_logs, &expected, "the corpus")?;
        found = (found.0.min(v2_logs.len()), found.1.max(v2_logs.len()));
        if let Some(v1) = v1 {
            let (v1_logs, took) = timed_query(v1, &filter)?;
            v1_times.push(took);
            check(v1.name, kind, &filter, &v1_logs, &expected, "the corpus")?;
            check(v1.name, kind, &filter, &v1_logs, &v2_logs, "v2")?;
        }
    }
    let report = KindReport { kind, v2: Times::of(v2_times), v1: v1.map(|_| Times::of(v1_times)), found };
    println!("queried {}: {queries} runs per store, answers checked", kind.label());
    Ok(report)
}

fn timed_query(store: &Measured<'_>, filter: &LogFilter) -> Result<(Vec<KeptLog>, Duration), String> {
    let begin = Instant::now();
    let answer: Vec<StoredLog> = store.reader.query(filter).map_err(|e| format!("a {} query failed: {e}", store.name))?;
    let took = begin.elapsed();
    Ok((answer.into_iter().map(|stored| stored.log).collect(), took))
}

fn check(store: &str, kind: QueryKind, filter: &LogFilter, got: &[KeptLog], expected: &[KeptLog], against: &str) -> Result<(), String> {
    match first_difference(got, expected) {
        None => Ok(()),
        Some(difference) => Err(format!("{store}'s answer to {} ({filter:?}) differs from {against}'s: {difference}", kind.label())),
    }
}

/// A fresh key space: RocksDB in `<dir>/logs-query/<name>`, or the in-memory twin.
fn open_engine(dir: Option<&Path>, name: &str) -> Result<(Arc<dyn KvEngine>, Option<PathBuf>), String> {
    let Some(dir) = dir else { return Ok((Arc::new(MemKv::new()), None)) };
    let path = dir.join("logs-query").join(name);
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(dir.join("logs-query")).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((super::store::engine(&path)?, Some(path)))
}

/// Bytes of the files under `path`.
fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => dir_bytes(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

fn micros_per_log(load: &Load, logs: usize) -> f64 {
    load.cpu_seconds * 1e6 / logs.max(1) as f64
}

/// v1's p50 over v2's: two decimals below 10 (below 1: v2 is the slower), else whole.
fn speed_up(ratio: f64) -> String {
    if ratio >= 10.0 { format!("{ratio:.0}x") } else { format!("{ratio:.2}x") }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn print_report(report: &Report, args: &LogsQueryArgs) {
    println!();
    println!("load ({} logs, {} writers; CPU is the process's, generation included):", report.logs, args.writers);
    let generation_us = micros_per_log(&report.generation, report.logs);
    for (name, load) in [("v2 blocks, flush_all included", Some(&report.v2)), ("v1 one key per log", report.v1.as_ref())] {
        let Some(load) = load else { continue };
        let disk = load.disk_bytes.map(|b| format!(", {:.1} MiB on disk", b as f64 / (1 << 20) as f64)).unwrap_or_default();
        println!(
            "  {name:<30} {:>8.1} s wall {:>10.0} logs/s {:>8.1} s CPU {:>6.2} µs CPU/log ({:.2} without generation){disk}",
            load.wall.as_secs_f64(),
            report.logs as f64 / load.wall.as_secs_f64(),
            load.cpu_seconds,
            micros_per_log(load, report.logs),
            micros_per_log(load, report.logs) - generation_us
        );
    }
    println!();
    println!("queries over the whole hour, limit {LIMIT}, newest first, {} runs each (wall ms):", args.queries);
    println!("  {:<32} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}", "query", "v2 p50", "v2 p99", "v1 p50", "v1 p99", "speed-up", "logs");
    for kind in &report.kinds {
        let (v1_p50, v1_p99, speed_up) = match kind.v1 {
            Some(v1) => (format!("{:.2}", ms(v1.p50)), format!("{:.2}", ms(v1.p99)), speed_up(ms(v1.p50) / ms(kind.v2.p50).max(1e-6))),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let found = if kind.found.0 == kind.found.1 { kind.found.0.to_string() } else { format!("{}-{}", kind.found.0, kind.found.1) };
        println!(
            "  {:<32} {:>9.2} {:>9.2} {:>9} {:>9} {:>9} {:>8}",
            kind.kind.label(),
            ms(kind.v2.p50),
            ms(kind.v2.p99),
            v1_p50,
            v1_p99,
            speed_up,
            found
        );
    }
    println!("every answer checked against the corpus{} (contents, order and count)", if report.v1.is_some() { " and v1 against v2" } else { "" });
    println!("store: {}", report.store);
}

#[cfg(test)]
mod tests;
