//! A real Prometheus (Debian's `prometheus`) for the ingest anchor of `hotrule bench ingest`: a
//! remote-write receiver (`--web.enable-remote-write-receiver`) with no scrape jobs, on a free
//! loopback port, its TSDB in the bench directory; killed when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::api::client::AdminClient;

/// How long Prometheus may take to answer `/-/ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Fresh ports tried when a start loses its port to another process.
const START_ATTEMPTS: usize = 5;

pub struct Prometheus {
    child: Child,
    pub addr: String,
    client: AdminClient,
}

impl Prometheus {
    /// Starts a receiver-only Prometheus in `dir` (its TSDB and log go there) and waits until it
    /// is ready.
    pub async fn start_receiver(dir: &Path) -> Result<Prometheus, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let config = dir.join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 15s\n").map_err(|e| format!("{}: {e}", config.display()))?;
        let log = dir.join("prometheus.log");
        for attempt in 1..=START_ATTEMPTS {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("finding a free port: {e}"))?
                .port();
            let addr = format!("127.0.0.1:{port}");
            let log_file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            let err_file = log_file.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
            let child = Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--web.enable-remote-write-receiver")
                .arg("--log.level=warn")
                .stdin(Stdio::null())
                .stdout(log_file)
                .stderr(err_file)
                .spawn()
                .map_err(|e| format!("starting prometheus (Debian: apt-get install prometheus): {e}"))?;
            let client = AdminClient::new(&addr, None).map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(5));
            let mut prometheus = Prometheus { child, addr, client };
            match prometheus.wait_ready().await {
                Ok(()) => return Ok(prometheus),
                Err(exited) if exited && attempt < START_ATTEMPTS => continue,
                Err(_) => {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    return Err(format!("prometheus did not become ready on {}; log:\n{text}", prometheus.addr));
                }
            }
        }
        Err("prometheus did not start".into())
    }

    /// `Err(true)` when the process exited first (its port was taken), `Err(false)` on timeout.
    async fn wait_ready(&mut self) -> Result<(), bool> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if self.client.get("/-/ready").await.is_ok_and(|r| r.status.is_success()) {
                return Ok(());
            }
            if !matches!(self.child.try_wait(), Ok(None)) {
                return Err(true);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(false)
    }

    pub fn write_url(&self) -> String {
        format!("http://{}/api/v1/write", self.addr)
    }

    /// The whole answer of the instant query `expr` at `time_ms` (epoch ms).
    pub async fn query_at(&self, expr: &str, time_ms: i64) -> Result<serde_json::Value, String> {
        let time = format!("{}.{:03}", time_ms.div_euclid(1000), time_ms.rem_euclid(1000));
        let path = crate::api::client::with_query("/api/v1/query", &[("query", expr), ("time", &time)]);
        let reply = self.client.get(&path).await.map_err(|e| format!("prometheus {path}: {e}"))?;
        reply.json().ok_or_else(|| format!("prometheus {path} answered {}: {}", reply.status, reply.text()))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
