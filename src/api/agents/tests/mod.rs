//! Tests of the agent protocol: wire compatibility against hand-built bytes, one test per
//! behaviour rule over the pure functions, the seams, and HTTP end to end with the simulated
//! agent. Shared builders live here.

mod delivery;
mod holding;
mod http_errors;
mod http_flow;
mod rules;
mod seams;
mod simulator;
mod wire;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::control::agents::matching::ValuePattern;
use crate::control::agents::model::{
    AgentGroup, ConfigEntry, ConfigKind, ContentFormat, GroupSelector, OnetimeCommand, TagMatch,
};
use crate::control::agents::proto;
use super::protocol::{DetailDelivery, decide_heartbeat};
use super::registry::AgentRegistry;
use super::service::{AgentService, AgentServiceSettings};
use super::snapshot::ConfigSnapshot;
use super::source::MemConfigSource;
use super::state::{AgentRecord, MemAgentStateStore};

/// The fixed time of pure tests and of in-process servers: 2023-11-14T22:13:20Z.
pub const NOW_MS: u64 = 1_700_000_000_000;
pub const NOW_S: i64 = 1_700_000_000;

/// A group holding agents tagged `env=prod`.
pub fn prod_group() -> AgentGroup {
    AgentGroup {
        name: "prod".to_string(),
        description: "production hosts".to_string(),
        selector: GroupSelector {
            tags: vec![TagMatch {
                name: "env".to_string(),
                value: ValuePattern::new("prod"),
            }],
            ip_cidrs: Vec::new(),
        },
    }
}

pub fn config(kind: ConfigKind, name: &str, version: i64, groups: &[&str]) -> ConfigEntry {
    ConfigEntry {
        kind,
        name: name.to_string(),
        content: format!(
            "{{\"inputs\":[{{\"Type\":\"input_file\",\"FilePaths\":[\"/var/log/{name}.log\"]}}]}}"
        ),
        format: ContentFormat::Json,
        version,
        groups: groups
            .iter()
            .map(|g| g.to_string())
            .collect::<BTreeSet<_>>(),
    }
}

pub fn command(name: &str, group: &str, expire_time_s: i64) -> OnetimeCommand {
    OnetimeCommand {
        name: name.to_string(),
        content: "{\"inputs\":[{\"Type\":\"input_static_file_onetime\"}]}".to_string(),
        format: ContentFormat::Json,
        expire_time_s,
        group: group.to_string(),
    }
}

pub fn snapshot(configs: Vec<ConfigEntry>, commands: Vec<OnetimeCommand>) -> ConfigSnapshot {
    ConfigSnapshot::build(vec![prod_group()], configs, commands)
}

pub fn info(name: &str, version: i64, status: proto::ConfigStatus) -> proto::ConfigInfo {
    proto::ConfigInfo {
        name: name.to_string(),
        version,
        status: status as i32,
        ..Default::default()
    }
}

/// A heartbeat as the 3.x agent sends it: full state, no `FullState` flag, tagged `env=prod`.
pub fn agent_heartbeat(
    instance_id: &str,
    sequence_num: u64,
    capabilities: u64,
) -> proto::HeartbeatRequest {
    proto::HeartbeatRequest {
        request_id: format!("req-{sequence_num}").into_bytes(),
        sequence_num,
        capabilities,
        instance_id: instance_id.as_bytes().to_vec(),
        agent_type: "LoongCollector".to_string(),
        attributes: Some(proto::AgentAttributes {
            version: b"3.3.2".to_vec(),
            ip: b"10.1.2.3".to_vec(),
            hostname: b"web-1".to_vec(),
            ..Default::default()
        }),
        tags: vec![proto::AgentGroupTag {
            name: "env".to_string(),
            value: "prod".to_string(),
        }],
        running_status: "running".to_string(),
        startup_time: NOW_S,
        ..Default::default()
    }
}

/// A compressed heartbeat: only the instance id and the sequence number.
pub fn compressed_heartbeat(instance_id: &str, sequence_num: u64) -> proto::HeartbeatRequest {
    proto::HeartbeatRequest {
        sequence_num,
        instance_id: instance_id.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// The heartbeat decision `AgentService::heartbeat` makes, for a node serving `snapshot`.
pub fn decide(
    request: &proto::HeartbeatRequest,
    remembered: Option<&AgentRecord>,
    snapshot: &ConfigSnapshot,
    delivery: DetailDelivery,
    now_ms: u64,
) -> (AgentRecord, proto::HeartbeatResponse) {
    decide_heartbeat(request, remembered, Some(snapshot), delivery, now_ms).expect("a valid heartbeat")
}

/// An agent API server on 127.0.0.1:0 over an in-memory source and store, at a fixed time.
pub struct TestServer {
    pub addr: SocketAddr,
    pub source: Arc<MemConfigSource>,
    pub service: Arc<AgentService>,
    pub store: Arc<MemAgentStateStore>,
    stop_tx: Option<oneshot::Sender<()>>,
}

impl TestServer {
    pub async fn start(settings: AgentServiceSettings) -> TestServer {
        let source = Arc::new(MemConfigSource::new());
        let store = Arc::new(MemAgentStateStore::new());
        let registry = Arc::new(
            AgentRegistry::load(store.clone(), settings.max_agents).expect("empty store loads"),
        );
        let service = Arc::new(
            AgentService::new(settings, source.clone(), registry).with_clock(Arc::new(|| NOW_MS)),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let addr = listener.local_addr().expect("bound address");
        let app = super::http::router(service.clone());
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .await;
        });
        TestServer {
            addr,
            source,
            service,
            store,
            stop_tx: Some(stop_tx),
        }
    }

    pub fn client(&self) -> super::sim::AgentClient {
        super::sim::AgentClient::new(&self.addr.to_string(), None).expect("a host:port address")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop_tx) = self.stop_tx.take() {
            let _ = stop_tx.send(());
        }
    }
}
