//! The node `hotrule bench ingest` starts when no `--target` is given: this binary's `serve` in a
//! child process (RocksDB in the bench directory, the bundled rules, loopback ports), so the
//! load generator and the node are measured as separate processes, as with Prometheus.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::api::client::AdminClient;

const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub struct IngestNode {
    child: Child,
    data_addr: String,
    admin: AdminClient,
}

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
        let mut node = IngestNode { child, data_addr, admin };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if node.admin.get("/readyz").await.is_ok_and(|r| r.status.is_success()) {
                return Ok(node);
            }
            if !matches!(node.child.try_wait(), Ok(None)) || Instant::now() >= deadline {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("hotrule serve did not become ready on {admin_addr}; log:\n{text}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn write_url(&self) -> String {
        format!("http://{}/api/v1/write", self.data_addr)
    }

    /// The node's own count of remote-write samples received, values stored and samples
    /// refused (its `/metrics`), for the report.
    pub async fn received_line(&self) -> String {
        let Ok(reply) = self.admin.get("/metrics").await else {
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
}

impl Drop for IngestNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
