//! One clustered `hotrule serve` process on its own loopback address, for the tests that run a
//! cluster of real processes (`exact_process`, `alarms_cluster`).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use hotrule::api::client::AdminClient;

/// How long a member may take to be ready.
const WAIT: Duration = Duration::from_secs(60);

/// One clustered `hotrule serve` process: node `i` of `127.0.<net>.<i+1>` (admin :17128, data
/// :12800); killed on drop.
pub struct Member {
    child: Child,
    pub i: usize,
    pub host: String,
    pub client: AdminClient,
    pub data: SocketAddr,
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Member {
    /// Starts node `i` (its data dir `dir/n<i>`, kept across restarts) with `config`, and waits
    /// for `/readyz`.
    pub async fn spawn(dir: &Path, net: u8, i: usize, secret: &Path, config: Option<&Path>) -> Member {
        let bin = Path::new(env!("CARGO_BIN_EXE_hotrule"));
        let (mut command, host) = hotrule::bench::cluster::node_command(bin, dir, net, i, secret).expect("log file");
        command.args(["--data-listen", &format!("{host}:12800")]);
        if let Some(config) = config {
            command.args(["--config", &format!("file:{}", config.display())]);
        }
        let child = command.spawn().expect("spawn hotrule");
        let client = AdminClient::new(&format!("{host}:17128"), None).expect("client").with_timeout(Duration::from_secs(10));
        let data: SocketAddr = format!("{host}:12800").parse().expect("data addr");
        let member = Member { child, i, host, client, data };
        let log = dir.join(format!("n{i}.log"));
        let ready = Instant::now() + WAIT;
        while !member.client.get("/readyz").await.is_ok_and(|r| r.status.is_success()) {
            let log_text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(Instant::now() < ready, "{} not ready within {WAIT:?}; log:\n{log_text}", member.host);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        member
    }

    /// The node id (what `partial` names).
    pub fn id(&self) -> String {
        format!("{}:17128", self.host)
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many members `client`'s node holds live.
pub async fn live_count(client: &AdminClient) -> usize {
    let status = client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or_default();
    status["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count())
}
