//! The node `hotrule bench ingest` starts when no `--target` is given: this binary's `serve` in a
//! child process (RocksDB in the bench directory, the bundled rules, loopback ports), so the
//! load generator and the node are measured as separate processes, as with Prometheus. A build
//! without RocksDB has no `serve`; it runs the node in-process on the in-memory key space
//! instead (for checking the bench and the node, not for the figure). Also
//! what the bench reads from a node's admin API (this one's or `--target-admin`'s): when its
//! dispatch is idle, its own counts, the values it stored.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Child;
#[cfg(feature = "rocksdb")]
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::ingest_stream::Stream;
use crate::api::client::AdminClient;

#[cfg(feature = "rocksdb")]
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a node may take to evaluate and store what it accepted.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the pending gauge is read while waiting.
const IDLE_POLL: Duration = Duration::from_millis(10);

pub struct IngestNode {
    child: Option<Child>,
    /// A build without RocksDB cannot `serve`: its node runs in this process, on the in-memory
    /// twin of the key space (said in the report).
    in_process: Option<crate::node::RunningNode>,
    data_addr: String,
    admin: AdminClient,
}

#[cfg(feature = "rocksdb")]
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

impl IngestNode {
    pub async fn start(dir: &Path, rules_dir: &Path) -> Result<IngestNode, String> {
        // Without the bundled rules no series is read: every sample would be skipped unevaluated
        // and the figure would measure the decoder alone.
        if !rules_dir.join("otel-rules").is_dir() {
            return Err(format!(
                "{} has no otel-rules directory: run from the repository root or pass --rules-dir",
                rules_dir.display()
            ));
        }
        #[cfg(not(feature = "rocksdb"))]
        {
            let _ = dir;
            return IngestNode::start_in_process(rules_dir).await;
        }
        #[cfg(feature = "rocksdb")]
        IngestNode::start_serve(dir, rules_dir).await
    }

    #[cfg(not(feature = "rocksdb"))]
    async fn start_in_process(rules_dir: &Path) -> Result<IngestNode, String> {
        use crate::node::{Listeners, NodeSettings};
        println!("node: in this process on the in-memory key space (this build has no RocksDB, so no `serve`)");
        let settings = NodeSettings { rules_dir: Some(rules_dir.to_path_buf()), ..NodeSettings::for_test() };
        let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
        let (admin, data) = (bind().await.map_err(|e| e.to_string())?, bind().await.map_err(|e| e.to_string())?);
        let listeners = Listeners { admin, data: Some(data), grpc: None };
        let kv: std::sync::Arc<dyn crate::store::kv::KvEngine> = std::sync::Arc::new(crate::store::kv::MemKv::new());
        let node = crate::node::testing::NodeBuilder::new(settings).start_with_listeners(kv, listeners, None).await.map_err(|e| e.to_string())?;
        let data_addr = node.data_addr.ok_or("the node has no data listener")?.to_string();
        let admin = AdminClient::new(&node.admin_addr.to_string(), None).map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(10));
        Ok(IngestNode { child: None, in_process: Some(node), data_addr, admin })
    }

    #[cfg(feature = "rocksdb")]
    async fn start_serve(dir: &Path, rules_dir: &Path) -> Result<IngestNode, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let exe = std::env::current_exe().map_err(|e| format!("locating this binary: {e}"))?;
        let (admin_port, data_port) = (free_port()?, free_port()?);
        let admin_addr = format!("127.0.0.1:{admin_port}");
        let data_addr = format!("127.0.0.1:{data_port}");
        let log = dir.join("node.log");
        let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err_file = log_file.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(exe)
            .arg("serve")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--admin-listen", &admin_addr, "--data-listen", &data_addr, "--grpc-listen", "off"])
            .arg("--rules-dir")
            .arg(rules_dir)
            .args(["--set", "log.level=warn"])
            .env_remove("HOTRULE_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .spawn()
            .map_err(|e| format!("starting hotrule serve: {e}"))?;
        let admin = AdminClient::new(&admin_addr, None).map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(10));
        let mut node = IngestNode { child: Some(child), in_process: None, data_addr, admin };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if node.admin.get("/readyz").await.is_ok_and(|r| r.status.is_success()) {
                return Ok(node);
            }
            let exited = node.child.as_mut().is_some_and(|child| !matches!(child.try_wait(), Ok(None)));
            if exited || Instant::now() >= deadline {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("hotrule serve did not become ready on {admin_addr}; log:\n{text}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn write_url(&self) -> String {
        format!("http://{}/api/v1/write", self.data_addr)
    }

    pub fn admin(&self) -> &AdminClient {
        &self.admin
    }
}

/// Waits until the node's dispatch is idle (`hotrule_dispatch_pending_batches{queue="metrics"}`
/// reads 0: every batch its receivers answered 2xx for is evaluated and its values written),
/// polling its `/metrics`; how long that took. An error when the node does not expose the gauge
/// or is still busy after [`IDLE_TIMEOUT`].
pub async fn wait_dispatch_idle(admin: &AdminClient) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        let reply = admin.get("/metrics").await.map_err(|e| format!("the node's /metrics: {e}"))?;
        if !reply.status.is_success() {
            return Err(format!("the node's /metrics answered {}", reply.status));
        }
        let pending = super::ingest_check::pending_batches(&reply.text()).ok_or_else(|| {
            format!("the node's /metrics has no {}{{queue=\"metrics\"}}: it cannot tell when it has stored what it accepted", super::ingest_check::PENDING_FAMILY)
        })?;
        if pending == 0 {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= IDLE_TIMEOUT {
            return Err(format!("the node's dispatch still held {pending} batches after {} s", IDLE_TIMEOUT.as_secs()));
        }
        tokio::time::sleep(IDLE_POLL).await;
    }
}

/// `/query/metrics` for `metric` over `[start_ms, end_ms]`, minute buckets, every service.
pub async fn query_minutes(admin: &AdminClient, metric: &str, start_ms: i64, end_ms: i64) -> Result<serde_json::Value, String> {
    let (start, end) = (start_ms.to_string(), end_ms.to_string());
    let path = crate::api::client::with_query("/query/metrics", &[("name", metric), ("start", &start), ("end", &end), ("step", "MINUTE")]);
    let reply = admin.get(&path).await.map_err(|e| format!("{path}: {e}"))?;
    if !reply.status.is_success() {
        return Err(format!("{path} answered {}: {}", reply.status, reply.text()));
    }
    reply.json().ok_or_else(|| format!("{path}: not JSON: {}", reply.text()))
}

/// The node's own count of remote-write samples received, values stored and samples refused
/// (its `/metrics`), for the report.
pub async fn received_line(admin: &AdminClient) -> String {
    let Ok(reply) = admin.get("/metrics").await else {
        return "the node's /metrics did not answer".into();
    };
    let text = reply.text();
    let sum = |family: &str, filter: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(family) && l.contains(filter))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            // fold from +0.0: an empty `sum()` of f64 is -0.0, printed "-0".
            .fold(0.0, |total, v| total + v)
    };
    format!(
        "node /metrics: {} remote-write samples received, {} rejected, {} dropped, {} values stored",
        sum("hotrule_samples_received_total", "remote_write"),
        sum("hotrule_samples_rejected_total", ""),
        sum("hotrule_samples_dropped_total", ""),
        sum("hotrule_values_stored_total", ""),
    )
}

impl Drop for IngestNode {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(self.in_process.take());
    }
}

/// Reads back the values of [`HOTRULE_CHECKS`](super::ingest_check::HOTRULE_CHECKS) for every
/// host and compares them with what the rules must have made of the rounds the node accepted
/// (`accepted`: per host, the rounds answered 2xx). A summary line, or the mismatches as the
/// error. Call it once dispatch is idle.
pub async fn check_stored(admin: &AdminClient, stream: &Stream, accepted: &BTreeMap<usize, Vec<usize>>) -> Result<String, String> {
    use super::ingest_check::{HOTRULE_CHECKS, compare, expected_minutes, failure, stored_minutes};
    if accepted.len() < stream.hosts() {
        return Err(format!("the node accepted no round of {} of the {} hosts", stream.hosts() - accepted.len(), stream.hosts()));
    }
    let last_round = accepted.values().flatten().max().copied().unwrap_or(0);
    // A minute either side of the stream's, so a value filed in a wrong minute is seen too.
    let (start_ms, end_ms) = (stream.timestamp_ms(0) - 60_000, stream.timestamp_ms(last_round) + 60_000);
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for check in &HOTRULE_CHECKS {
        let expected = expected_minutes(stream, accepted, check)?;
        let (function, stored) = stored_minutes(&query_minutes(admin, check.metric, start_ms, end_ms).await?)?;
        if function != "avg" {
            return Err(format!("{} is stored with {function}; the check expects avg (otel-rules/vm.yaml)", check.metric));
        }
        mismatches.extend(compare(check.metric, &expected, &stored));
        checked += expected.len();
    }
    match failure("hotrule", &mismatches) {
        Some(error) => Err(error),
        None => Ok(format!(
            "stored values checked: {} of {} hosts, {checked} minute values, as the stream's accepted rounds make them",
            HOTRULE_CHECKS.map(|c| c.metric).join(" and "),
            accepted.len()
        )),
    }
}
