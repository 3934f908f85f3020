//! Debian's Prometheus Alertmanager (`prometheus-alertmanager`): started on a loopback port with
//! its own storage directory, a minimal configuration (one receiver that sends nowhere) and
//! clustering off, and read back through its API v2 (`GET /api/v2/alerts`).

use std::path::{Path, PathBuf};

use super::{Proc, answers_ok, start_on_free_port, which};

/// The binary Debian's `prometheus-alertmanager` package installs.
pub const ALERTMANAGER: &str = "prometheus-alertmanager";

/// True when [`ALERTMANAGER`] is on `PATH`; otherwise prints why the test is skipped.
pub fn require_alertmanager(test: &str) -> bool {
    if which(ALERTMANAGER).is_some() {
        return true;
    }
    hotrule::base::skips::skip(test, &format!("{ALERTMANAGER} not installed; apt-get install prometheus-alertmanager"))
}

/// Every alert goes to a receiver without integrations: the test reads alerts through the API.
const CONFIG: &str = "route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n";

/// A running Alertmanager.
pub struct Alertmanager {
    pub proc: Proc,
    pub dir: PathBuf,
}

impl Alertmanager {
    pub async fn start(dir: &Path) -> Alertmanager {
        std::fs::create_dir_all(dir).expect("alertmanager dir");
        let config = dir.join("alertmanager.yml");
        std::fs::write(&config, CONFIG).expect("write alertmanager.yml");
        let (config_arg, storage_arg) = (format!("--config.file={}", config.display()), format!("--storage.path={}", dir.join("data").display()));
        let proc = start_on_free_port(
            "alertmanager",
            ALERTMANAGER,
            &dir.join("alertmanager.log"),
            |port| {
                vec![
                    config_arg.clone(),
                    storage_arg.clone(),
                    format!("--web.listen-address=127.0.0.1:{port}"),
                    // No gossip: an empty address turns clustering off (it would bind :9094).
                    "--cluster.listen-address=".to_string(),
                    "--log.level=warn".to_string(),
                ]
            },
            &[],
            |client| answers_ok(client, "/-/ready"),
        )
        .await;
        Alertmanager { proc, dir: dir.to_path_buf() }
    }

    pub fn url(&self) -> String {
        self.proc.url()
    }

    /// `GET /api/v2/alerts` (active, silenced, inhibited and unprocessed alerts; resolved ones
    /// are not listed); `None` on any failure.
    pub async fn alerts(&self) -> Option<Vec<serde_json::Value>> {
        let reply = self.proc.client().get("/api/v2/alerts").await.ok()?;
        if !reply.status.is_success() {
            return None;
        }
        reply.json()?.as_array().cloned()
    }
}
