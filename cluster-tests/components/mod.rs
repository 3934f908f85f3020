//! Real components for end-to-end tests: Debian's `prometheus-node-exporter` and `prometheus`,
//! `promtool`, `prometheus-alertmanager`, Python's OpenTelemetry OTLP exporter, and
//! `hotrule serve` with a configuration file and a rules directory of the test's choosing.
//!
//! - Each test first asks [`require`] for the binaries it needs; when one is missing it prints
//!   `SKIP: …` with the way to install it and returns, so a machine without them still passes.
//! - Every process listens on 127.0.0.1 only, on a port taken by binding port 0 and releasing it;
//!   a start that loses the port to another process (it exits before it is ready) is retried on
//!   a fresh port, a bounded number of times.
//! - Every wait is bounded in time and polls a condition ([`crate::harness::wait_until`], or the
//!   bounded loops here); nothing sleeps for a fixed time.
//! - Processes are killed when their handle drops; their output goes to a log file beside their
//!   data, quoted in panics.

#![allow(dead_code)]

pub mod alertmanager;
pub mod cluster_member;
pub mod hotrule_node;
pub mod prom;
pub mod scenario;
pub mod webhook;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hotrule::api::client::AdminClient;

pub use prom::{PromSample, PromSeries, parse_matrix, parse_vector};

/// How long a component may take to become ready.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How many fresh ports a start tries before it gives up.
const START_ATTEMPTS: usize = 5;

/// The first executable named `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// True when every binary in `names` is on `PATH`; otherwise prints why the test is skipped.
pub fn require(test: &str, names: &[&str]) -> bool {
    let missing: Vec<&str> = names.iter().copied().filter(|name| which(name).is_none()).collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!("{} not installed; apt-get install prometheus prometheus-node-exporter (promtool comes with prometheus)", missing.join(", "));
    hotrule::base::skips::skip(test, &why)
}

/// A port that was free a moment ago (bind 0, read, release).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A started child process with its log file; killed on drop.
pub struct Proc {
    pub name: String,
    pub addr: SocketAddr,
    pub log: PathBuf,
    child: Child,
}

impl Proc {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn client(&self) -> AdminClient {
        AdminClient::new(&self.url(), None).expect("client").with_timeout(Duration::from_secs(10))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// True when the process has exited.
    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `program` with the arguments `args(port)` on a fresh port until `ready(addr)` holds.
/// A process that exits before it is ready because its port was taken in between ("address
/// already in use" in its log) is restarted on another port, at most [`START_ATTEMPTS`] times;
/// any other early exit fails the test with the log.
async fn start_on_free_port<A, R, Fut>(name: &str, program: &str, log: &Path, args: A, env: &[(String, String)], ready: R) -> Proc
where
    A: Fn(u16) -> Vec<String>,
    R: Fn(AdminClient) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut last_log = String::new();
    for attempt in 1..=START_ATTEMPTS {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let log_file = std::fs::File::create(log).expect("log file");
        let child = Command::new(program)
            .args(args(port))
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("HOTRULE_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log handle"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        let mut proc = Proc { name: name.to_string(), addr, log: log.to_path_buf(), child };
        let client = proc.client();
        let deadline = Instant::now() + START_TIMEOUT;
        let mut pause = Duration::from_millis(10);
        loop {
            if ready(client.clone()).await {
                return proc;
            }
            if proc.exited() {
                last_log = proc.log_text();
                assert!(
                    last_log.to_ascii_lowercase().contains("address already in use"),
                    "{name} exited before it was ready; log:\n{last_log}"
                );
                eprintln!("{name} lost port {port} to another process (attempt {attempt}); retrying on another port");
                break;
            }
            assert!(Instant::now() < deadline, "{name} not ready on {addr} within {START_TIMEOUT:?}; log:\n{}", proc.log_text());
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }
    panic!("{name} did not start in {START_ATTEMPTS} attempts; last log:\n{last_log}")
}

async fn answers_ok(client: AdminClient, path: &str) -> bool {
    client.get(path).await.is_ok_and(|r| r.status.is_success())
}

/// Debian's `prometheus-node-exporter` on a loopback port.
pub struct NodeExporter {
    pub proc: Proc,
}

impl NodeExporter {
    pub async fn start(dir: &Path) -> NodeExporter {
        std::fs::create_dir_all(dir).expect("exporter dir");
        let proc = start_on_free_port(
            "prometheus-node-exporter",
            "prometheus-node-exporter",
            &dir.join("node-exporter.log"),
            |port| {
                vec![
                    format!("--web.listen-address=127.0.0.1:{port}"),
                    // No systemd in containers; its collector would log an error every scrape.
                    "--no-collector.systemd".to_string(),
                    "--log.level=warn".to_string(),
                ]
            },
            &[],
            |client| answers_ok(client, "/metrics"),
        )
        .await;
        NodeExporter { proc }
    }

    /// `host:port`, as a scrape target.
    pub fn target(&self) -> String {
        self.proc.addr.to_string()
    }

    /// One scrape of `/metrics`, as text.
    pub async fn scrape(&self) -> String {
        let reply = self.proc.client().get("/metrics").await.expect("scrape node-exporter");
        assert!(reply.status.is_success(), "node-exporter /metrics: {}", reply.status);
        reply.text()
    }
}

/// One scrape job of a generated Prometheus configuration.
#[derive(Debug, Clone)]
pub struct ScrapeJob {
    pub job_name: String,
    pub targets: Vec<String>,
    /// Extra target labels (`static_configs[].labels`).
    pub labels: Vec<(String, String)>,
}

/// What a test Prometheus does.
#[derive(Debug, Clone, Default)]
pub struct PrometheusSettings {
    pub scrape: Vec<ScrapeJob>,
    /// `remote_write` URLs.
    pub remote_write: Vec<String>,
    /// `--web.enable-remote-write-receiver`.
    pub receiver: bool,
}

/// The `prometheus.yml` for `settings`: 1 s scrapes, and remote-write sent within about a second
/// (one shard, large batches: one scrape usually travels in one request).
pub fn prometheus_config(settings: &PrometheusSettings) -> String {
    let mut out = String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n");
    if !settings.scrape.is_empty() {
        out.push_str("scrape_configs:\n");
    }
    for job in &settings.scrape {
        out.push_str(&format!("  - job_name: {}\n    static_configs:\n      - targets: [", yaml_string(&job.job_name)));
        out.push_str(&job.targets.iter().map(|t| yaml_string(t)).collect::<Vec<_>>().join(", "));
        out.push_str("]\n");
        if !job.labels.is_empty() {
            out.push_str("        labels:\n");
            for (name, value) in &job.labels {
                out.push_str(&format!("          {name}: {}\n", yaml_string(value)));
            }
        }
    }
    if !settings.remote_write.is_empty() {
        out.push_str("remote_write:\n");
        for url in &settings.remote_write {
            out.push_str(&format!(
                "  - url: {}\n    queue_config:\n      batch_send_deadline: 1s\n      min_shards: 1\n      max_shards: 1\n      max_samples_per_send: 10000\n      capacity: 20000\n      min_backoff: 100ms\n      max_backoff: 1s\n",
                yaml_string(url)
            ));
        }
    }
    out
}

/// A double-quoted YAML scalar.
fn yaml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Debian's `prometheus` with a generated configuration and its own TSDB directory.
pub struct Prometheus {
    pub proc: Proc,
    pub dir: PathBuf,
}

impl Prometheus {
    pub async fn start(dir: &Path, settings: &PrometheusSettings) -> Prometheus {
        std::fs::create_dir_all(dir).expect("prometheus dir");
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, prometheus_config(settings)).expect("write prometheus.yml");
        let receiver = settings.receiver;
        let (config_arg, tsdb_arg) = (format!("--config.file={}", config.display()), format!("--storage.tsdb.path={}", dir.join("tsdb").display()));
        let proc = start_on_free_port(
            "prometheus",
            "prometheus",
            &dir.join("prometheus.log"),
            |port| {
                let mut args = vec![
                    config_arg.clone(),
                    tsdb_arg.clone(),
                    format!("--web.listen-address=127.0.0.1:{port}"),
                    "--log.level=warn".to_string(),
                ];
                if receiver {
                    args.push("--web.enable-remote-write-receiver".to_string());
                }
                args
            },
            &[],
            |client| answers_ok(client, "/-/ready"),
        )
        .await;
        Prometheus { proc, dir: dir.to_path_buf() }
    }

    pub fn url(&self) -> String {
        self.proc.url()
    }

    /// The remote-write receiver's URL (needs `receiver: true`).
    pub fn write_url(&self) -> String {
        format!("{}/api/v1/write", self.url())
    }

    /// An instant query through `/api/v1/query`; `None` on any failure (not yet up, bad answer).
    pub async fn query(&self, expr: &str) -> Option<Vec<PromSample>> {
        api_query(&self.proc.client(), expr).await
    }
}

/// `GET {server}/api/v1/query?query=expr` and its vector, or `None` when the answer is not a
/// successful vector.
pub async fn api_query(client: &AdminClient, expr: &str) -> Option<Vec<PromSample>> {
    let path = hotrule::api::client::with_query("/api/v1/query", &[("query", expr)]);
    let reply = client.get(&path).await.ok()?;
    let json = reply.json()?;
    if json["status"] != "success" || json["data"]["resultType"] != "vector" {
        return None;
    }
    parse_vector(&json["data"]["result"]).ok()
}

/// `GET {server}/api/v1/query_range` and its matrix, or `None`.
pub async fn api_query_range(client: &AdminClient, expr: &str, start: i64, end: i64, step_secs: u64) -> Option<Vec<PromSeries>> {
    let (start, end, step) = (start.to_string(), end.to_string(), step_secs.to_string());
    let path = hotrule::api::client::with_query("/api/v1/query_range", &[("query", expr), ("start", &start), ("end", &end), ("step", &step)]);
    let reply = client.get(&path).await.ok()?;
    let json = reply.json()?;
    if json["status"] != "success" || json["data"]["resultType"] != "matrix" {
        return None;
    }
    parse_matrix(&json["data"]["result"]).ok()
}

/// How long one run of promtool may take.
const PROMTOOL_TIMEOUT: Duration = Duration::from_secs(20);

async fn promtool(args: &[String]) -> Result<String, String> {
    let mut command = tokio::process::Command::new("promtool");
    command.args(args).kill_on_drop(true);
    let out = tokio::time::timeout(PROMTOOL_TIMEOUT, command.output())
        .await
        .map_err(|_| format!("promtool {args:?} did not finish within {PROMTOOL_TIMEOUT:?}"))?
        .map_err(|e| format!("running promtool: {e}"))?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    if !out.status.success() {
        return Err(format!("promtool {} failed ({}): {stdout}{stderr}", args.join(" "), out.status));
    }
    Ok(stdout)
}

/// `promtool query instant -o json <server> <expr>`, parsed.
pub async fn promtool_instant(server: &str, expr: &str) -> Result<Vec<PromSample>, String> {
    promtool_instant_at(server, expr, None).await
}

/// `promtool query instant -o json [--time=<time>] <server> <expr>` (time in RFC 3339 or Unix
/// seconds), parsed.
pub async fn promtool_instant_at(server: &str, expr: &str, time: Option<&str>) -> Result<Vec<PromSample>, String> {
    let mut args: Vec<String> = ["query", "instant", "-o", "json"].map(String::from).to_vec();
    args.extend(time.map(|t| format!("--time={t}")));
    args.extend([server.to_string(), expr.to_string()]);
    let text = promtool(&args).await?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("promtool printed no JSON ({e}): {text}"))?;
    parse_vector(&json)
}

/// `promtool query range -o json --start --end --step <server> <expr>` (times in Unix seconds),
/// parsed.
pub async fn promtool_range(server: &str, expr: &str, start: i64, end: i64, step_secs: u64) -> Result<Vec<PromSeries>, String> {
    let args = vec![
        "query".to_string(),
        "range".to_string(),
        "-o".to_string(),
        "json".to_string(),
        format!("--start={start}"),
        format!("--end={end}"),
        format!("--step={step_secs}s"),
        server.to_string(),
        expr.to_string(),
    ];
    let text = promtool(&args).await?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("promtool printed no JSON ({e}): {text}"))?;
    parse_matrix(&json)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// Milliseconds since the Unix epoch.
pub fn unix_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A fixture file of `cluster-tests/fixtures/`.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster-tests/fixtures").join(relative)
}

/// The bundled `otel-rules/vm.yaml`.
pub fn bundled_vm_yaml() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules/otel-rules/vm.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// True when this build's `hotrule` binary can run a node (it needs the `rocksdb` feature);
/// otherwise prints why the test is skipped.
pub fn require_node(test: &str) -> bool {
    if cfg!(feature = "rocksdb") {
        return true;
    }
    hotrule::base::skips::skip(test, "this build of hotrule has no RocksDB (built without the `rocksdb` feature), so `hotrule serve` cannot run")
}

/// The modules the OTLP fixture imports.
const OTLP_MODULES: &str = "import opentelemetry.sdk.metrics, opentelemetry.exporter.otlp.proto.http.metric_exporter";

/// A Python that has the OpenTelemetry SDK and its OTLP/HTTP exporter: `$HOTRULE_OTLP_PYTHON`,
/// else the virtualenv `.ci/run` creates (`$HOTRULE_OTLP_VENV`, default
/// `~/.cache/hotrule-otlp-venv`), else `python3` on `PATH`.
pub fn otlp_python() -> Option<PathBuf> {
    let venv = std::env::var_os("HOTRULE_OTLP_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/hotrule-otlp-venv")));
    let candidates = [
        std::env::var_os("HOTRULE_OTLP_PYTHON").map(PathBuf::from),
        venv.map(|v| v.join("bin/python")),
        which("python3"),
    ];
    candidates.into_iter().flatten().find(|python| {
        Command::new(python)
            .args(["-c", OTLP_MODULES])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// [`otlp_python`], or prints why the test is skipped.
pub fn require_otlp_python(test: &str) -> Option<PathBuf> {
    let found = otlp_python();
    if found.is_none() {
        hotrule::base::skips::skip(
            test,
            "no Python with opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http; .ci/run installs them \
             (python3 -m venv ~/.cache/hotrule-otlp-venv && ~/.cache/hotrule-otlp-venv/bin/pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http)",
        );
    }
    found
}

/// Runs `fixtures/otlp_send.py` once: one OTLP/HTTP export to `endpoint` (the full
/// `…/v1/metrics` URL). `Err` with its output when the exporter did not report success.
pub async fn send_otlp_fixture(python: &Path, endpoint: &str, service: &str) -> Result<String, String> {
    let mut command = tokio::process::Command::new(python);
    command.arg(fixture("otlp_send.py")).args([endpoint, service]).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .map_err(|_| "otlp_send.py did not finish within 30 s".to_string())?
        .map_err(|e| format!("running {}: {e}", python.display()))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() { Ok(text) } else { Err(format!("otlp_send.py failed ({}): {text}", out.status)) }
}
