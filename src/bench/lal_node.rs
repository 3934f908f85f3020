//! `hotrule bench lal-node`: log lines/s through a whole node's LAL data plane.
//!
//! An in-process node (the in-memory twin of the key space, or RocksDB with `--dir` in a build
//! with the `rocksdb` feature) gets the shipped `log-mal-rules/nginx.yaml` and `lal/nginx.yaml`
//! through its admin API (`addOrUpdate`, as an operator installs them). Then `--producers`
//! threads submit prepared batches of nginx access and error lines (nine to one, current
//! timestamps, a few services) to the node's dispatcher through its [`LogSink`] for
//! `--seconds`, backing off and retrying on `QueueFull` (each refusal counted). The clock stops
//! when the dispatcher is idle again: every accepted log analysed by the two LAL rules, every
//! kept log written to the log store (synced group-commit writes), every emitted sample
//! evaluated by the log-MAL file into the metric store.
//!
//! The results are checked, not assumed: the logs read back from the log store equal the logs
//! the LAL file kept and the store counted (`logs_stored`), and the stored
//! `meter_nginx_service_error_log_count` values sum to the error lines accepted. A mismatch is
//! an error of the run.
//!
//! CPU is the whole process's (`/proc/self/stat`): producers (cloning prepared batches), LAL
//! threads, stores and the node's other workers, so logs per CPU-second is a node figure,
//! lower than the interpreter's alone (`nginx_throughput` example of `hotrule-lal-engine`).
//! The interpreter alone runs in the same process on the same logs, half its lines before the
//! node starts and half after it stops: on a shared host whose speed drifts, one run before
//! the node alone moved the ratio by several points from run to run.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hotrule_lal_engine::{Body, LogData};

use crate::api::client::{AdminClient, with_query};
use crate::data::seam::{LogBatch, LogProtocol, LogSink, SubmitError};
use crate::data::evaluation::DispatchSettings;
use crate::base::ids::{Catalog, RuleKey, RuleName};
use crate::data::logs::{LogCursor, LogFilter, LogOrder, LogReader, MAX_LIMIT};
use crate::data::metrics::{Granularity, MetricReader, SeriesFilter, Value};
use crate::node::testing::NodeBuilder;
use crate::node::{NodeSettings, RunningNode};
use crate::store::kv::{KvEngine, MemKv};
use crate::base::self_metrics::{SelfMetrics, labels};

/// The log-MAL metric whose values count the error lines.
pub const ERROR_METRIC: &str = "meter_nginx_service_error_log_count";
const LOG_MAL_METRICS: [&str; 2] = [ERROR_METRIC, "meter_nginx_instance_error_log_count"];
/// How long the node may take to drain what was accepted.
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_BACKOFF: Duration = Duration::from_millis(5);
/// Prepared batches per producer (cycled).
const PREPARED: usize = 16;

/// What `bench lal-node` runs.
#[derive(Debug, Clone)]
pub struct LalNodeBench {
    /// The rules directory holding `lal/nginx.yaml` and `log-mal-rules/nginx.yaml`.
    pub rules_dir: PathBuf,
    /// RocksDB here (needs the `rocksdb` feature); none: the in-memory twin.
    pub dir: Option<PathBuf>,
    pub seconds: Duration,
    pub producers: usize,
    /// Logs per batch (one batch per submit call).
    pub batch: usize,
    pub services: usize,
    /// The node's dispatch settings (log queue bound, LAL threads).
    pub dispatch: DispatchSettings,
    /// Lines the interpreter alone runs for the same-run comparison.
    pub interpreter_lines: u64,
}

/// What one run measured; every count is checked by [`measure`] before it returns.
#[derive(Debug, Clone, PartialEq)]
pub struct LalNodeReport {
    pub store: &'static str,
    /// Logs in every submit call, refused ones included.
    pub logs_offered: u64,
    /// Logs in the batches the dispatcher accepted.
    pub logs_accepted: u64,
    /// Error lines among the accepted logs.
    pub error_lines: u64,
    /// Submit calls refused with `QueueFull` (then retried).
    pub refusals: u64,
    /// From the first submit until the dispatcher was idle.
    pub wall: Duration,
    /// Process CPU seconds over the same span (none where `/proc/self/stat` is unreadable).
    pub cpu_seconds: Option<f64>,
    /// Logs the LAL file kept (its live state).
    pub kept: u64,
    /// `logs_stored{result="stored"}`.
    pub logs_stored: u64,
    /// Logs read back from the log store.
    pub logs_read_back: u64,
    /// Samples the LAL file emitted for the log-MAL file.
    pub samples_out: u64,
    /// `values_stored` of the two `meter_nginx_*` metrics.
    pub values_stored: u64,
    /// The stored minute values of [`ERROR_METRIC`], summed over every service.
    pub error_count_stored: i64,
    /// The interpreter alone on the same logs, in the same process: lines per CPU-second of its
    /// thread over both of its runs, half the lines before the node started and half after it
    /// stopped, so a machine whose speed drifts during the run (a shared host) weighs on both
    /// sides of the ratio.
    pub interpreter_lines_per_cpu_second: Option<f64>,
    /// The interpreter's rate in its run before the node, and in its run after.
    pub interpreter_before_after: Option<(f64, f64)>,
    /// Process CPU seconds over the run by thread kind (name), most first.
    pub cpu_by_thread: Vec<(String, f64)>,
    /// CPU seconds of the LAL threads' steps over the run.
    pub steps: crate::data::evaluation::LogStepCpu,
    /// CPU seconds of the log store's flushes (pending logs into blocks) over the run, on
    /// whichever thread ran them.
    pub flush_cpu_seconds: f64,
}

impl LalNodeReport {
    pub fn logs_per_second(&self) -> f64 {
        self.logs_accepted as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    pub fn logs_per_cpu_second(&self) -> Option<f64> {
        self.cpu_seconds.filter(|c| *c > 0.0).map(|c| self.logs_accepted as f64 / c)
    }

    /// The node's logs per CPU-second as a share of the interpreter's alone.
    pub fn share_of_interpreter(&self) -> Option<f64> {
        self.logs_per_cpu_second().zip(self.interpreter_lines_per_cpu_second).map(|(node, alone)| node / alone)
    }

    /// Why the counts do not add up, if they do not.
    pub fn inconsistency(&self) -> Option<String> {
        let checks = [
            (self.kept == self.logs_accepted, "every accepted log kept by one nginx rule", self.kept, self.logs_accepted),
            (self.logs_stored == self.kept, "logs_stored equals the kept logs", self.logs_stored, self.kept),
            (self.logs_read_back == self.kept, "logs read back equal the kept logs", self.logs_read_back, self.kept),
            (self.samples_out == self.error_lines, "one sample per error line", self.samples_out, self.error_lines),
            (
                self.error_count_stored == self.error_lines as i64,
                "stored error counts sum to the error lines",
                self.error_count_stored.max(0) as u64,
                self.error_lines,
            ),
        ];
        checks.iter().find(|(ok, ..)| !ok).map(|(_, what, got, want)| format!("{what}: {got} != {want}; {self:?}"))
    }
}

/// utime + stime of this process in seconds (Linux).
pub fn process_cpu_seconds() -> Option<f64> {
    stat_cpu_seconds(&std::fs::read_to_string("/proc/self/stat").ok()?).map(|(_, cpu)| cpu)
}

/// The name and utime + stime seconds of a `/proc/<pid>[/task/<tid>]/stat` line.
fn stat_cpu_seconds(stat: &str) -> Option<(&str, f64)> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(').map_or("?", |(_, n)| n);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some((name, (utime + stime) / if ticks > 0 { ticks as f64 } else { 100.0 }))
}

/// `(year, month, day, hour, minute, second)` of `ms` in UTC.
fn civil(ms: i64) -> (i64, u32, u32, i64, i64, i64) {
    let (year, month, day) = hotrule_mal_engine::civil_from_days(ms.div_euclid(86_400_000));
    let seconds = ms.rem_euclid(86_400_000) / 1000;
    (year, month as u32, day as u32, seconds / 3600, seconds / 60 % 60, seconds % 60)
}

/// An nginx error log line at `ms` (the rule reads its time back, to the second, in UTC).
fn error_line(i: usize, ms: i64) -> String {
    let (y, mo, d, h, mi, s) = civil(ms);
    format!(
        "{y:04}/{mo:02}/{d:02} {h:02}:{mi:02}:{s:02} [error] 12#12: *{i} connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.{}.{}",
        i / 256 % 256,
        i % 256
    )
}

fn access_line(i: usize, ms: i64) -> String {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (y, mo, d, h, mi, s) = civil(ms);
    let month = MONTHS[(mo.clamp(1, 12) - 1) as usize];
    format!(
        "10.0.{}.{} - - [{d:02}/{month}/{y}:{h:02}:{mi:02}:{s:02} +0000] \"GET /api/v1/orders/{i}?page=2 HTTP/1.1\" {} {} \"-\" \"Mozilla/5.0 (X11; Linux x86_64)\"",
        i / 256 % 256,
        i % 256,
        [200, 200, 201, 304, 404, 500][i % 6],
        100 + i % 5000
    )
}

/// One prepared batch and its error lines: every tenth log an error line.
fn prepared_batch(producer: usize, index: usize, size: usize, services: usize, now_ms: i64) -> (LogBatch, u64) {
    let mut errors = 0;
    let logs = (0..size)
        .map(|j| {
            let i = (producer * PREPARED + index) * size + j;
            let service = format!("nginx-bench-{}", i % services.max(1));
            let (kind, body) = if i % 10 == 9 {
                errors += 1;
                ("NGINX_ERROR_LOG", error_line(i, now_ms))
            } else {
                ("NGINX_ACCESS_LOG", access_line(i, now_ms))
            };
            LogData {
                timestamp_ms: now_ms,
                service_instance: format!("{service}-{}", i % 3),
                service,
                layer: "NGINX".into(),
                body: Body::Text(body),
                tags: vec![("LOG_KIND".into(), kind.into())],
                ..LogData::default()
            }
        })
        .collect();
    (LogBatch { protocol: LogProtocol::SkyWalking, logs, received_ms: now_ms }, errors)
}

#[derive(Default)]
struct Counts {
    offered: AtomicU64,
    accepted: AtomicU64,
    errors: AtomicU64,
    refusals: AtomicU64,
}

/// One producer: its prepared batches in turn until `stop`, each retried after a short backoff
/// while the queue is full.
fn produce(sink: &dyn LogSink, batches: &[(LogBatch, u64)], stop: &AtomicBool, counts: &Counts) -> Result<(), String> {
    for (batch, errors) in batches.iter().cycle() {
        let mut backoff = Duration::from_micros(50);
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            counts.offered.fetch_add(batch.logs.len() as u64, Ordering::Relaxed);
            match sink.submit_logs(vec![batch.clone()]) {
                Ok(()) => {
                    counts.accepted.fetch_add(batch.logs.len() as u64, Ordering::Relaxed);
                    counts.errors.fetch_add(*errors, Ordering::Relaxed);
                    break;
                }
                Err(SubmitError::QueueFull { .. }) => {
                    counts.refusals.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(e) => return Err(format!("submit refused: {e}")),
            }
        }
    }
    Ok(())
}

async fn install(client: &AdminClient, catalog: &str, rules_dir: &std::path::Path) -> Result<(), String> {
    let path = rules_dir.join(catalog).join("nginx.yaml");
    let content = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let route = with_query("/runtime/rule/addOrUpdate", &[("catalog", catalog), ("name", "nginx")]);
    let reply = client.post(&route, content).await.map_err(|e| e.to_string())?;
    let status = reply.json().and_then(|j| j["applyStatus"].as_str().map(str::to_string)).unwrap_or_default();
    if !reply.status.is_success() || status != "structural_applied" {
        return Err(format!("installing {catalog}/nginx: {} {}", reply.status, reply.text()));
    }
    Ok(())
}

/// Every stored log in `[start_ms, end_ms]`, counted page by page.
fn count_stored(reader: &dyn LogReader, start_ms: i64, end_ms: i64) -> Result<u64, String> {
    let mut after: Option<LogCursor> = None;
    let mut total = 0u64;
    loop {
        let filter = LogFilter { start_ms, end_ms, limit: MAX_LIMIT, after, order: LogOrder::OldestFirst, ..LogFilter::default() };
        let page = reader.query(&filter).map_err(|e| format!("reading the log store: {e}"))?;
        total += page.len() as u64;
        match page.last() {
            Some(last) if page.len() == MAX_LIMIT => after = Some(last.cursor),
            _ => return Ok(total),
        }
    }
}

/// The stored minute values of [`ERROR_METRIC`] in `[start_ms, end_ms]`, summed over every
/// service and label group.
fn error_count_stored(reader: &dyn MetricReader, start_ms: i64, end_ms: i64) -> Result<i64, String> {
    let filter = SeriesFilter { metric: ERROR_METRIC.into(), ..SeriesFilter::default() };
    let series = reader.read(&filter, Granularity::Minute, start_ms, end_ms).map_err(|e| format!("reading the metric store: {e}"))?;
    let mut sum = 0i64;
    for point in series.iter().flat_map(|s| &s.points) {
        match &point.value {
            Value::Single(v) => sum += v,
            // The sum keeps `level` and `service_instance_id` beside the service: one count per
            // label group.
            Value::Labeled(groups) => sum += groups.iter().map(|(_, v)| v).sum::<i64>(),
            other => return Err(format!("{ERROR_METRIC} holds a {other:?}, not counts")),
        }
    }
    Ok(sum)
}

/// The interpreter alone: `lal/nginx.yaml` (`hotrule_lal_engine::bench::drive`, as the
/// `nginx_throughput` example runs it) over `logs` on this thread, a warm-up, then `lines`;
/// the CPU seconds of those lines (None when the thread clock is unavailable).
fn interpreter_alone(rules_dir: &std::path::Path, logs: &[LogData], lines: u64) -> Result<Option<f64>, String> {
    let path = rules_dir.join("lal").join("nginx.yaml");
    let source = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let Ok(hotrule_rule_compiler::Compiled::Lal(file)) = hotrule_rule_compiler::compile_bundled(hotrule_rule_compiler::DslKind::Lal, &source) else {
        return Err(format!("{} does not compile as LAL", path.display()));
    };
    let file = hotrule_lal_engine::PreparedLalFile::new(file);
    hotrule_lal_engine::bench::drive(&file, logs, lines / 10);
    let before = crate::base::clock::thread_cpu_seconds();
    let driven = hotrule_lal_engine::bench::drive(&file, logs, lines);
    let cpu = crate::base::clock::thread_cpu_seconds().zip(before).map(|(after, before)| after - before);
    if driven.errors > 0 || driven.kept != lines {
        return Err(format!("the interpreter alone: {} errors, {} of {lines} lines kept", driven.errors, driven.kept));
    }
    Ok(cpu.filter(|c| *c > 0.0))
}

/// [`interpreter_alone`] on a blocking thread, for `lines` lines.
async fn interpreter_run(rules_dir: &std::path::Path, logs: &Arc<Vec<LogData>>, lines: u64) -> Result<Option<f64>, String> {
    let (rules_dir, logs) = (rules_dir.to_path_buf(), logs.clone());
    tokio::task::spawn_blocking(move || interpreter_alone(&rules_dir, &logs, lines)).await.map_err(|e| e.to_string())?
}

/// CPU seconds of each of this process's threads by name (`/proc/self/task`); threads that
/// ended are missing, so take it while the node still runs.
fn cpu_by_thread() -> std::collections::BTreeMap<(u32, String), f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        let Some((name, cpu)) = stat_cpu_seconds(&stat) else { continue };
        let id = task.file_name().to_string_lossy().parse().unwrap_or(0);
        out.insert((id, name.to_string()), cpu);
    }
    out
}

/// The CPU each thread name used between two [`cpu_by_thread`] readings, most first; numbers
/// in names are dropped so a pool is one line.
fn cpu_delta(before: &std::collections::BTreeMap<(u32, String), f64>, after: &std::collections::BTreeMap<(u32, String), f64>) -> Vec<(String, f64)> {
    let mut by_name: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for (key, cpu) in after {
        let used = cpu - before.get(key).copied().unwrap_or(0.0);
        let name: String = key.1.chars().filter(|c| !c.is_ascii_digit()).collect();
        *by_name.entry(name.trim_end_matches(['-', ':']).to_string()).or_default() += used;
    }
    let mut out: Vec<(String, f64)> = by_name.into_iter().filter(|(_, cpu)| *cpu > 0.0).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

fn engine(dir: Option<&std::path::Path>) -> Result<(Arc<dyn KvEngine>, &'static str), String> {
    let Some(dir) = dir else { return Ok((Arc::new(MemKv::new()), "the in-memory twin")) };
    let path = dir.join("lal-node-db");
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((super::store::engine(&path)?, "RocksDB"))
}

/// Runs the bench on a node of its own and checks its counts; the node is shut down after.
pub async fn measure(bench: &LalNodeBench) -> Result<LalNodeReport, String> {
    if bench.producers == 0 || bench.batch == 0 || bench.services == 0 {
        return Err("--producers, --batch and --services must be at least 1".into());
    }
    let start_ms = crate::base::clock::now_ms() as i64;
    let prepared: Vec<Vec<(LogBatch, u64)>> = (0..bench.producers)
        .map(|p| (0..PREPARED).map(|i| prepared_batch(p, i, bench.batch, bench.services, start_ms)).collect())
        .collect();
    let all_logs: Arc<Vec<LogData>> = Arc::new(prepared.iter().flatten().flat_map(|(batch, _)| batch.logs.iter().cloned()).collect());
    let half = bench.interpreter_lines.div_ceil(2);
    let before = interpreter_run(&bench.rules_dir, &all_logs, half).await?;
    let (kv, store) = engine(bench.dir.as_deref())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let settings = NodeSettings { dispatch: bench.dispatch.clone(), ..NodeSettings::for_test() };
    let node = NodeBuilder::new(settings).start(kv, listener).await.map_err(|e| e.to_string())?;
    let result = run_on(&node, bench, store, prepared, start_ms).await;
    node.shutdown().await;
    let mut report = result?;
    let after = interpreter_run(&bench.rules_dir, &all_logs, half).await?;
    if let (Some(before), Some(after)) = (before, after) {
        let lines = half as f64;
        report.interpreter_lines_per_cpu_second = Some(2.0 * lines / (before + after));
        report.interpreter_before_after = Some((lines / before, lines / after));
    }
    Ok(report)
}

async fn run_on(node: &RunningNode, bench: &LalNodeBench, store: &'static str, prepared: Vec<Vec<(LogBatch, u64)>>, start_ms: i64) -> Result<LalNodeReport, String> {
    let client = AdminClient::new(&node.admin_addr.to_string(), None).map_err(|e| e.to_string())?;
    install(&client, "log-mal-rules", &bench.rules_dir).await?;
    install(&client, "lal", &bench.rules_dir).await?;

    let dispatcher = node.state.dispatcher.clone();
    let (stop, counts) = (Arc::new(AtomicBool::new(false)), Arc::new(Counts::default()));
    let seconds = bench.seconds;
    let timed = tokio::task::spawn_blocking({
        let (dispatcher, stop, counts, log_store) = (dispatcher.clone(), stop.clone(), counts.clone(), node.log_store.clone());
        move || -> Result<(Duration, Option<f64>, Vec<(String, f64)>, crate::data::evaluation::LogStepCpu, f64), String> {
            let threads_before = cpu_by_thread();
            let (steps_before, flush_before) = (dispatcher.log_step_cpu(), log_store.flush_stats());
            let cpu_before = process_cpu_seconds();
            let started = Instant::now();
            let produced: Vec<Result<(), String>> = std::thread::scope(|scope| {
                let handles: Result<Vec<_>, String> = prepared
                    .iter()
                    .map(|batches| {
                        let (dispatcher, stop, counts) = (&dispatcher, &stop, &counts);
                        std::thread::Builder::new()
                            .name("bench-producer".into())
                            .spawn_scoped(scope, move || produce(dispatcher.as_ref(), batches, stop, counts))
                    })
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("starting a producer: {e}"));
                let handles: Vec<_> = match handles {
                    Ok(handles) => handles,
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        return vec![Err(e)];
                    }
                };
                let until = started + seconds;
                while Instant::now() < until {
                    std::thread::sleep(until.saturating_duration_since(Instant::now()).min(Duration::from_millis(50)));
                }
                stop.store(true, Ordering::Relaxed);
                handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a producer panicked".into()))).collect()
            });
            produced.into_iter().collect::<Result<Vec<()>, String>>()?;
            if !dispatcher.wait_idle(IDLE_TIMEOUT) {
                return Err(format!("the dispatcher was not idle {IDLE_TIMEOUT:?} after the load stopped"));
            }
            // Logs still pending in memory are flushed into blocks inside the clock: their
            // compression and indexing are part of storing them.
            log_store.flush_all().map_err(|e| format!("flushing the log store: {e}"))?;
            let wall = started.elapsed();
            let cpu = process_cpu_seconds().zip(cpu_before).map(|(after, before)| after - before);
            let (steps, flush) = (dispatcher.log_step_cpu(), log_store.flush_stats());
            let steps = crate::data::evaluation::LogStepCpu {
                analysis: steps.analysis - steps_before.analysis,
                store: steps.store - steps_before.store,
                log_mal: steps.log_mal - steps_before.log_mal,
            };
            Ok((wall, cpu, cpu_delta(&threads_before, &cpu_by_thread()), steps, flush.cpu_seconds - flush_before.cpu_seconds))
        }
    });
    let (wall, cpu_seconds, cpu_by_thread, steps, flush_cpu_seconds) = timed.await.map_err(|e| e.to_string())??;

    let end_ms = crate::base::clock::now_ms() as i64;
    // Error lines carry their time to the second; a margin on both sides of the run.
    let (from, to) = (start_ms - 120_000, end_ms + 120_000);
    let lal = RuleKey::new(Catalog::Lal, RuleName::parse("nginx").map_err(|e| e.to_string())?);
    let view = match dispatcher.evaluation_of(&lal) {
        crate::data::evaluation::RuleEvaluation::Logs(view) => view,
        crate::data::evaluation::RuleEvaluation::Metrics(_) => return Err("lal/nginx has no log evaluation state".into()),
    };
    if view.errors > 0 {
        return Err(format!("lal/nginx rule errors: {} (last: {})", view.errors, view.last_error));
    }
    let telemetry = &node.telemetry;
    let log_store = node.log_store.clone();
    let metric_reader = node.metric_reader();
    let (logs_read_back, error_count) = tokio::task::spawn_blocking(move || {
        Ok::<_, String>((count_stored(log_store.as_ref(), from, to)?, error_count_stored(metric_reader.as_ref(), from, to)?))
    })
    .await
    .map_err(|e| e.to_string())??;
    let report = LalNodeReport {
        store,
        logs_offered: counts.offered.load(Ordering::Relaxed),
        logs_accepted: counts.accepted.load(Ordering::Relaxed),
        error_lines: counts.errors.load(Ordering::Relaxed),
        refusals: counts.refusals.load(Ordering::Relaxed),
        wall,
        cpu_seconds,
        kept: view.kept,
        logs_stored: SelfMetrics::counter_value(&telemetry.logs_stored, &labels([("result", "stored")])),
        logs_read_back,
        samples_out: view.samples_out,
        values_stored: LOG_MAL_METRICS
            .iter()
            .map(|m| SelfMetrics::counter_value(&telemetry.values_stored, &labels([("metric", m)])))
            .sum(),
        error_count_stored: error_count,
        interpreter_lines_per_cpu_second: None,
        interpreter_before_after: None,
        cpu_by_thread,
        steps,
        flush_cpu_seconds,
    };
    match report.inconsistency() {
        Some(why) => Err(format!("the results do not add up: {why}")),
        None => Ok(report),
    }
}

/// Runs the bench and prints its report.
pub async fn run(bench: &LalNodeBench) -> Result<(), String> {
    println!(
        "lal/nginx.yaml + log-mal-rules/nginx.yaml on an in-process node ({}): {} producers, {} logs per batch (9 access : 1 error), {} services, {:?} of load; {} LAL threads, log queue of {} batches",
        if bench.dir.is_some() { "RocksDB" } else { "in-memory twin" },
        bench.producers,
        bench.batch,
        bench.services,
        bench.seconds,
        bench.dispatch.log_workers,
        bench.dispatch.log_queue_batches
    );
    println!("load average before: {}", super::store::load_average());
    let report = measure(bench).await?;
    println!(
        "  {} logs accepted ({} offered, {} submit calls refused with QueueFull and retried), {} error lines",
        report.logs_accepted, report.logs_offered, report.refusals, report.error_lines
    );
    println!("  {:.3} s wall (load + drain to idle) = {:.0} logs/s", report.wall.as_secs_f64(), report.logs_per_second());
    match (report.cpu_seconds, report.logs_per_cpu_second()) {
        (Some(cpu), Some(rate)) => println!("  {cpu:.2} s of process CPU = {rate:.0} logs per CPU-core-second (goal ≥ 200,000)"),
        _ => println!("  process CPU unavailable"),
    }
    if let (Some(alone), Some((before, after))) = (report.interpreter_lines_per_cpu_second, report.interpreter_before_after) {
        println!("  the interpreter alone, same logs, same process: {alone:.0} lines per CPU-second (half the lines before the node: {before:.0}; half after: {after:.0})");
    }
    if let Some(share) = report.share_of_interpreter() {
        println!("  the node runs at {:.1}% of the interpreter's rate (goal ≥ 75%)", share * 100.0);
    }
    let per_log = |cpu: f64| cpu * 1e6 / (report.logs_accepted.max(1) as f64);
    println!("  CPU per log by thread (threads that ended, the producers, are the rest of the process CPU):");
    let threads: f64 = report.cpu_by_thread.iter().map(|(_, c)| c).sum();
    for (name, cpu) in &report.cpu_by_thread {
        println!("    {name:<18} {cpu:>7.2} s  {:>6.2} µs per log", per_log(*cpu));
    }
    if let Some(total) = report.cpu_seconds {
        println!("    {:<18} {:>7.2} s  {:>6.2} µs per log", "the rest", (total - threads).max(0.0), per_log((total - threads).max(0.0)));
    }
    let steps = report.steps;
    println!("  CPU per log by step (thread CPU clocks):");
    println!("    LAL analysis       {:>6.2} µs", per_log(steps.analysis));
    println!("    log store write    {:>6.2} µs  (encode, group commit, synced batch; a large group's blocks and a writer's flushes are in it too)", per_log(steps.store));
    println!("    log-MAL            {:>6.2} µs", per_log(steps.log_mal));
    println!("    flush into blocks  {:>6.2} µs  (pending groups: group, index, compress, write; on any thread)", per_log(report.flush_cpu_seconds));
    println!(
        "  checked on {}: {} kept = {} logs_stored = {} read back; {} samples out, {} log-MAL values stored, {ERROR_METRIC} sums to {}",
        report.store, report.kept, report.logs_stored, report.logs_read_back, report.samples_out, report.values_stored, report.error_count_stored
    );
    println!("load average after: {}", super::store::load_average());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_run_through_a_node_adds_up() {
        let bench = LalNodeBench {
            rules_dir: std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules"),
            dir: None,
            seconds: Duration::from_millis(500),
            producers: 2,
            batch: 50,
            services: 3,
            dispatch: DispatchSettings { log_queue_batches: 4, ..DispatchSettings::for_test() },
            interpreter_lines: 20_000,
        };
        let report = measure(&bench).await.expect("the bench runs and its counts add up");
        assert_eq!(report.store, "the in-memory twin");
        assert!(report.logs_accepted > 0, "{report:?}");
        assert_eq!(report.logs_accepted % 50, 0, "whole batches: {report:?}");
        assert_eq!(report.error_lines * 10, report.logs_accepted, "one error line in ten: {report:?}");
        assert_eq!(report.logs_offered, report.logs_accepted + report.refusals * 50, "a refused batch is offered again: {report:?}");
        assert_eq!((report.kept, report.logs_stored, report.logs_read_back), (report.logs_accepted, report.logs_accepted, report.logs_accepted));
        assert_eq!(report.error_count_stored, report.error_lines as i64);
        assert!(report.values_stored > 0, "{report:?}");
        assert!(report.logs_per_second() > 0.0);
        assert!(report.inconsistency().is_none());
        assert!(report.interpreter_lines_per_cpu_second.is_some_and(|r| r > 0.0), "{report:?}");
        // The combined rate lies between the runs before and after the node.
        let (before, after) = report.interpreter_before_after.expect("both interpreter runs timed");
        let combined = report.interpreter_lines_per_cpu_second.unwrap_or_default();
        assert!(before.min(after) <= combined * 1.000_001 && combined <= before.max(after) * 1.000_001, "{report:?}");
        assert!(report.cpu_by_thread.iter().any(|(name, _)| name.starts_with("hotrule-lal")), "{:?}", report.cpu_by_thread);
    }

    #[test]
    fn a_report_that_does_not_add_up_says_why() {
        let good = LalNodeReport {
            store: "the in-memory twin",
            logs_offered: 100,
            logs_accepted: 100,
            error_lines: 10,
            refusals: 0,
            wall: Duration::from_secs(1),
            cpu_seconds: Some(0.5),
            kept: 100,
            logs_stored: 100,
            logs_read_back: 100,
            samples_out: 10,
            values_stored: 4,
            error_count_stored: 10,
            interpreter_lines_per_cpu_second: Some(400.0),
            interpreter_before_after: Some((390.0, 410.0)),
            cpu_by_thread: Vec::new(),
            steps: Default::default(),
            flush_cpu_seconds: 0.0,
        };
        assert_eq!(good.share_of_interpreter(), Some(0.5));
        assert_eq!(good.inconsistency(), None);
        assert_eq!(good.logs_per_cpu_second(), Some(200.0));
        let lost = LalNodeReport { logs_read_back: 99, ..good.clone() };
        assert!(lost.inconsistency().expect("inconsistent").contains("read back"));
        let miscounted = LalNodeReport { error_count_stored: 9, ..good };
        assert!(miscounted.inconsistency().expect("inconsistent").contains("error lines"));
    }
}
