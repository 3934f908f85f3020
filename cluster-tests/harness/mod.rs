//! Shared test harness: in-process nodes on ephemeral ports, real `hotrule` processes, and
//! waiting on predicates with a deadline instead of sleeping.

#![allow(dead_code)]

pub mod exact_samples;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hotrule::api::client::{AdminClient, with_query};
use hotrule::node::RunningNode;
use hotrule::node::testing::NodeBuilder;
use hotrule::store::kv::{KvEngine, MemKv};
use hotrule::control::workflow::Peers;

/// The bundled rules shipped in config/rules (a copy of the SkyWalking corpus).
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules")
}

/// Polls `check` until it returns true or `timeout` passes; panics with `what` on timeout.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for: {what}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// An in-process node on a fresh in-memory store with a data listener (receivers and the agent
/// config server) next to its admin listener, both on port 0. `node` is its settings, or a
/// [`NodeBuilder`] with some of its parts replaced.
pub async fn start_with_data_listener(node: impl Into<NodeBuilder>) -> RunningNode {
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let listeners = hotrule::node::Listeners { admin, data: Some(data), grpc: None };
    node.into().start_with_listeners(Arc::new(MemKv::new()), listeners, None).await.expect("node starts")
}

/// An in-process node with a client pointed at it.
pub struct TestNode {
    pub node: RunningNode,
    pub client: AdminClient,
    pub kv: Arc<dyn KvEngine>,
}

impl TestNode {
    /// A node on `kv`; `node` is its settings, or a [`NodeBuilder`] with some of its parts replaced.
    pub async fn start(node: impl Into<NodeBuilder>, kv: Arc<dyn KvEngine>) -> TestNode {
        TestNode::start_with(node, kv, None).await
    }

    pub async fn start_with(node: impl Into<NodeBuilder>, kv: Arc<dyn KvEngine>, peers: Option<Arc<dyn Peers>>) -> TestNode {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let builder = node.into();
        let token = builder.settings().admin_token.clone();
        let builder = match peers {
            Some(peers) => builder.peers(peers),
            None => builder,
        };
        let node = builder.start(kv.clone(), listener).await.expect("node starts");
        let client = AdminClient::new(&node.admin_addr.to_string(), token).expect("client");
        TestNode { node, client, kv }
    }

    /// A node of an in-process cluster on the gossip and bus twins, on a fresh in-memory store,
    /// its admin listener on port 0 (also what it advertises) and a data listener (receivers) on
    /// port 0. `node`'s settings (or the settings of a [`NodeBuilder`]) should have
    /// `membership`'s id as `node_id`.
    pub async fn clustered_in_memory(
        node: impl Into<NodeBuilder>,
        membership: hotrule::cluster::gossip::MembershipSettings,
        gossip: &hotrule::cluster::gossip::GossipNetwork,
        bus: &hotrule::cluster::bus::MemNetwork,
    ) -> TestNode {
        TestNode::clustered_in_memory_on(node, membership, gossip, bus, Arc::new(MemKv::new())).await
    }

    /// The same on `kv` (a restart: the store of a node that was shut down).
    pub async fn clustered_in_memory_on(
        node: impl Into<NodeBuilder>,
        membership: hotrule::cluster::gossip::MembershipSettings,
        gossip: &hotrule::cluster::gossip::GossipNetwork,
        bus: &hotrule::cluster::bus::MemNetwork,
        kv: Arc<dyn KvEngine>,
    ) -> TestNode {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let admin = listener.local_addr().expect("addr").to_string();
        let wiring = hotrule::node::ClusterWiring {
            membership,
            gossip: hotrule::cluster::gossip::GossipTransport::InMemory(gossip.clone()),
            bus: hotrule::node::BusWiring::Memory { network: bus.clone() },
            replication: hotrule::cluster::replication::ReplicationSettings {
                sync_timeout: Duration::from_secs(2),
                ..hotrule::cluster::replication::ReplicationSettings::default()
            },
            admin_advertise: admin.clone(),
        };
        let builder = node.into();
        let token = builder.settings().admin_token.clone();
        let listeners = hotrule::node::Listeners { admin: listener, data: Some(data), grpc: None };
        let node = builder.start_with_listeners(kv.clone(), listeners, Some(wiring)).await.expect("node starts");
        let client = AdminClient::new(&admin, token).expect("client");
        TestNode { node, client, kv }
    }

    /// A node on a fresh in-memory store.
    pub async fn in_memory(node: impl Into<NodeBuilder>) -> (TestNode, Arc<MemKv>) {
        let kv = Arc::new(MemKv::new());
        (TestNode::start(node, kv.clone()).await, kv)
    }

    pub async fn list(&self) -> serde_json::Value {
        self.client.get("/runtime/rule/list").await.expect("list").json().expect("list json")
    }

    pub async fn row(&self, catalog: &str, name: &str) -> Option<serde_json::Value> {
        let list = self.list().await;
        list["rules"].as_array()?.iter().find(|r| r["catalog"] == catalog && r["name"] == name).cloned()
    }

    pub async fn push(&self, catalog: &str, name: &str, content: &str, extra: &[(&str, &str)]) -> (u16, serde_json::Value) {
        let mut pairs = vec![("catalog", catalog), ("name", name)];
        pairs.extend_from_slice(extra);
        let reply = self
            .client
            .post(&with_query("/runtime/rule/addOrUpdate", &pairs), content.as_bytes().to_vec())
            .await
            .expect("push");
        (reply.status.as_u16(), reply.json().unwrap_or_default())
    }

    pub async fn post(&self, route: &str, pairs: &[(&str, &str)]) -> (u16, serde_json::Value) {
        let reply = self.client.post(&with_query(route, pairs), Vec::new()).await.expect("post");
        (reply.status.as_u16(), reply.json().unwrap_or_default())
    }
}

/// Binds port 0 and returns a free port (released again; tiny race accepted in tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

/// A real `hotrule serve` process.
pub struct ProcessNode {
    pub child: Child,
    pub addr: SocketAddr,
    pub client: AdminClient,
    pub log: PathBuf,
}

impl ProcessNode {
    /// Starts `hotrule serve` with `data_dir`, a free admin port and `extra` args/env, and
    /// waits for /readyz.
    pub async fn spawn(data_dir: &Path, extra_args: &[&str], env: &[(&str, &str)]) -> ProcessNode {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let log = data_dir.with_extension(format!("{port}.log"));
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_hotrule"));
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--admin-listen")
            .arg(addr.to_string())
            .args(["--data-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"])
            .arg("--rules-dir")
            .arg(data_dir.join("no-bundled-rules"))
            .args(extra_args)
            .env_remove("HOTRULE_ADMIN_TOKEN")
            .stdout(log_file.try_clone().expect("log file handle"))
            .stderr(log_file);
        for (k, v) in env {
            command.env(k, v);
        }
        let child = command.spawn().expect("spawn hotrule");
        let client = AdminClient::new(&addr.to_string(), None).expect("client");
        let node = ProcessNode { child, addr, client, log };
        let probe = node.client.clone();
        wait_until(Duration::from_secs(30), "process node ready", || {
            let probe = probe.clone();
            async move { probe.get("/readyz").await.is_ok_and(|r| r.status.is_success()) }
        })
        .await;
        node
    }

    /// SIGKILL, as a crash.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The agent data listener's scheme and address, as the node printed them at start
    /// ("hotrule agent config server on http://127.0.0.1:PORT").
    pub fn data_url(&self) -> Option<String> {
        let log = self.log_text();
        let line = log.lines().find(|l| l.starts_with("hotrule agent config server on "))?;
        line.rsplit(' ').next().map(str::to_string)
    }
}

impl Drop for ProcessNode {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// How long one run of the CLI may take.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs the `hotrule` binary with `args` and `env` (no admin or agent token, no default server
/// from the caller's environment), within [`CLI_TIMEOUT`]; echoes what it printed for the test
/// log, and returns (exit code, or -1 when killed by a signal; stdout; stderr).
pub async fn hotrule_cli(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hotrule"));
    command
        .args(args)
        .env_remove("HOTRULE_ADMIN_TOKEN")
        .env_remove("HOTRULE_AGENT_TOKEN")
        .env_remove("HOTRULE_SERVER")
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = tokio::time::timeout(CLI_TIMEOUT, command.output())
        .await
        .expect("the CLI finishes")
        .expect("run hotrule");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!("$ hotrule {}\n{stdout}{stderr}", args.join(" "));
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// A metric writer for dispatch tests: can be held shut (a batch in flight stays in flight)
/// and records when each value was written.
#[derive(Default)]
pub struct SlowWriter {
    held: Mutex<bool>,
    blocked: Mutex<usize>,
    changed: Condvar,
    written: Mutex<Vec<(Instant, String)>>,
}

impl SlowWriter {
    pub fn set_held(&self, held: bool) {
        *self.held.lock().expect("lock") = held;
        self.changed.notify_all();
    }

    pub fn wait_blocked(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut blocked = self.blocked.lock().expect("lock");
        while *blocked == 0 {
            assert!(Instant::now() < deadline, "no write blocked");
            blocked = self.changed.wait_timeout(blocked, Duration::from_millis(50)).expect("wait").0;
        }
    }

    pub fn written(&self) -> Vec<(Instant, String)> {
        self.written.lock().expect("lock").clone()
    }
}

impl hotrule::data::metrics::MetricWriter for SlowWriter {
    fn write(&self, values: &[hotrule::data::seam::MetricValue]) -> Result<(), hotrule::data::metrics::MetricStoreError> {
        let mut held = self.held.lock().expect("lock");
        if *held {
            *self.blocked.lock().expect("lock") += 1;
            self.changed.notify_all();
            while *held {
                held = self.changed.wait(held).expect("wait");
            }
            *self.blocked.lock().expect("lock") -= 1;
        }
        drop(held);
        let now = Instant::now();
        self.written.lock().expect("lock").extend(values.iter().map(|v| (now, v.metric.clone())));
        Ok(())
    }
}

