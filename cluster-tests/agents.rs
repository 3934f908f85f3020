//! The agent config server end to end: the management API on the admin port, the ConfigServer
//! protocol v2 on the data listener, a simulated LoongCollector agent, and a 3-node in-process
//! cluster where a config written through one node reaches an agent heartbeating another.
//! Every wait is on a predicate with a bound; each scenario is a sequence of logged phases.

mod harness;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use harness::{hotrule_cli, wait_until};
use hotrule::control::agents::model::ConfigKind;
use hotrule::api::agents::{DetailDelivery, LivenessPolicy};
use hotrule::control::agents::proto;
use hotrule::api::agents::sim::{AgentClient, REAL_AGENT_CAPABILITIES, SimAgent, SimAgentSpec};
use hotrule::api::agents::state::ApplyStatus;
use hotrule::cluster::bus::MemNetwork;
use hotrule::api::client::{AdminClient, with_query};
use hotrule::cluster::gossip::{GossipNetwork, GossipTransport, MembershipSettings};
use hotrule::base::ids::NodeId;
use hotrule::node::testing::NodeBuilder;
use hotrule::node::{BusWiring, ClusterWiring, Listeners, NodeSettings, RunningNode};
use hotrule::cluster::replication::ReplicationSettings;
use hotrule::store::kv::{KvEngine, MemKv};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

const NGINX_V1: &str = "inputs:\n  - Type: input_file\n    FilePaths: [/var/log/nginx/access.log]\nflushers:\n  - Type: flusher_stdout\n";
const NGINX_V2: &str = "inputs:\n  - Type: input_file\n    FilePaths: [/var/log/nginx/*.log]\nflushers:\n  - Type: flusher_stdout\n";

fn phase(scenario: &str, what: &str) {
    eprintln!("[{scenario}] {what}");
}

fn now_s() -> i64 {
    i64::try_from(hotrule::base::clock::now_ms() / 1000).unwrap_or(0)
}

async fn bind() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind port 0")
}

/// A single node with a data listener, and clients for both ports.
async fn single_node(kv: Arc<dyn KvEngine>) -> (RunningNode, AdminClient, AgentClient) {
    single_node_with(NodeSettings::for_test(), kv).await
}

/// As [`single_node`], with the given settings.
async fn single_node_with(
    settings: NodeSettings,
    kv: Arc<dyn KvEngine>,
) -> (RunningNode, AdminClient, AgentClient) {
    let listeners = Listeners {
        admin: bind().await,
        data: Some(bind().await),
        grpc: None,
    };
    let node = NodeBuilder::new(settings).start_with_listeners(kv, listeners, None)
        .await
        .expect("node starts");
    let admin = AdminClient::new(&node.admin_addr.to_string(), None).expect("admin client");
    let data = node.data_addr.expect("data listener");
    let agents = AgentClient::new(&data.to_string(), None).expect("agent client");
    (node, admin, agents)
}

async fn post_json(client: &AdminClient, path: &str, body: Value) -> (u16, Value) {
    let reply = client
        .post(path, body.to_string().into_bytes())
        .await
        .expect("post");
    (reply.status.as_u16(), reply.json().unwrap_or(Value::Null))
}

async fn post(client: &AdminClient, path: &str) -> (u16, Value) {
    let reply = client.post(path, Vec::new()).await.expect("post");
    (reply.status.as_u16(), reply.json().unwrap_or(Value::Null))
}

async fn get(client: &AdminClient, path: &str) -> (u16, Value) {
    let reply = client.get(path).await.expect("get");
    (reply.status.as_u16(), reply.json().unwrap_or(Value::Null))
}

async fn push(client: &AdminClient, name: &str, content: &str) -> (u16, Value) {
    post_json(
        client,
        "/agent/configs",
        json!({"kind": "pipeline", "name": name, "content": content, "format": "yaml"}),
    )
    .await
}

fn web_agent() -> SimAgent {
    let mut spec = SimAgentSpec::numbered(7);
    spec.tags = vec![("env".into(), "prod".into())];
    spec.capabilities = REAL_AGENT_CAPABILITIES | proto::AGENT_ACCEPTS_ONETIME;
    SimAgent::new(spec, now_s())
}

fn held_version(agent: &SimAgent, name: &str) -> Option<i64> {
    agent
        .configs(ConfigKind::Pipeline)
        .get(name)
        .map(|h| h.version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_reaches_an_agent_is_updated_removed_and_commands_arrive() {
    let s = "e2e";
    let kv = Arc::new(MemKv::new());
    let (node, admin, data) = single_node(kv.clone()).await;

    phase(
        s,
        "create group web (env=prod*), push nginx, apply it to web",
    );
    let group = json!({"name": "web", "description": "web servers", "selector": {"tags": [{"name": "env", "value": "prod*"}]}});
    let (code, body) = post_json(&admin, "/agent/groups", group).await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    let (code, body) = push(&admin, "nginx", NGINX_V1).await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    let v1 = body["version"].as_i64().expect("version");
    let (code, body) = post(
        &admin,
        &with_query("/agent/configs/pipeline/nginx/apply", &[("group", "web")]),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str(), body["version"].as_i64()),
        (200, Some("stored"), Some(v1)),
        "{body}"
    );
    let (code, body) = push(&admin, "nginx", NGINX_V1).await;
    assert_eq!(
        (code, body["applyStatus"].as_str(), body["version"].as_i64()),
        (200, Some("no_change"), Some(v1)),
        "{body}"
    );

    phase(s, "the agent receives v1, applies it, and reports APPLIED");
    let mut agent = web_agent();
    let mut outsider = SimAgent::new(SimAgentSpec::numbered(8), now_s());
    let round = agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!(round.applied, 1);
    assert_eq!(held_version(&agent, "nginx"), Some(v1));
    let detail: Value =
        serde_json::from_slice(&agent.configs(ConfigKind::Pipeline)["nginx"].detail)
            .expect("JSON detail");
    assert_eq!(
        detail["flushers"][0]["Type"], "flusher_stdout",
        "YAML is delivered as JSON"
    );
    outsider
        .heartbeat(&data, now_s())
        .await
        .expect("outsider heartbeat");
    assert!(
        outsider.configs(ConfigKind::Pipeline).is_empty(),
        "an agent outside web gets nothing"
    );
    agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!(
        agent.configs(ConfigKind::Pipeline)["nginx"].status,
        ApplyStatus::Applied
    );
    let (code, status) = get(&admin, "/agent/configs/pipeline/nginx/status").await;
    assert_eq!(code, 200, "{status}");
    let applied = status["agents"]["applied"].as_array().expect("applied");
    assert_eq!(applied.len(), 1, "{status}");
    assert_eq!(applied[0]["instanceId"], agent.instance_id());

    phase(
        s,
        "the agent list and the agent view show it with its groups and config versions",
    );
    let (_, list) = get(&admin, &with_query("/agent/agents", &[("group", "web")])).await;
    let rows = list["agents"].as_array().expect("agents");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["groups"], json!(["default", "web"]));
    let (_, all) = get(&admin, "/agent/agents").await;
    assert_eq!(all["agents"].as_array().map(Vec::len), Some(2));
    let (_, offline) = get(&admin, &with_query("/agent/agents", &[("offline", "true")])).await;
    assert_eq!(offline["agents"].as_array().map(Vec::len), Some(0));
    let (code, shown) = get(&admin, &format!("/agent/agents/{}", agent.instance_id())).await;
    assert_eq!(code, 200, "{shown}");
    assert_eq!(
        shown["configs"][0]["desiredVersion"].as_i64(),
        Some(v1),
        "{shown}"
    );
    assert_eq!(shown["configs"][0]["status"], "APPLIED", "{shown}");

    phase(
        s,
        "an update gets a new, larger version and reaches the agent",
    );
    let (code, body) = push(&admin, "nginx", NGINX_V2).await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    let v2 = body["version"].as_i64().expect("version");
    assert!(v2 > v1, "versions grow: {v1} -> {v2}");
    agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!(held_version(&agent, "nginx"), Some(v2));

    phase(s, "removing it from web tells the agent to delete it (-1)");
    let (code, body) = post(
        &admin,
        &with_query("/agent/configs/pipeline/nginx/remove", &[("group", "web")]),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    let round = agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!(round.deleted, 1);
    assert_eq!(held_version(&agent, "nginx"), None);

    phase(s, "a onetime command for web reaches the agent");
    let command = json!({"name": "collect-once", "content": "inputs: []\n", "expireTime": now_s() + 3600, "group": "web"});
    let (code, body) = post_json(&admin, "/agent/commands", command).await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    let round = agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!(round.commands_received, 1);
    assert!(agent.commands().contains_key("collect-once"));

    phase(
        s,
        "agent state is flushed and survives a restart of the node",
    );
    node.shutdown().await;
    let (node, admin, _data) = single_node(kv.clone()).await;
    let (_, all) = get(&admin, "/agent/agents").await;
    let ids: Vec<&str> = all["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["instance_id"].as_str())
        .collect();
    assert!(ids.contains(&agent.instance_id()), "{all}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_management_requests_are_refused_with_4xx() {
    let kv = Arc::new(MemKv::new());
    let (node, admin, _data) = single_node(kv).await;
    let (code, body) = push(&admin, "bad", "inputs: [\n  - a\nflushers: {").await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (400, Some("compile_failed")),
        "{body}"
    );
    assert!(
        body["message"].as_str().is_some_and(|m| m.contains("line")),
        "the position is given: {body}"
    );
    let (code, body) = post_json(
        &admin,
        "/agent/configs",
        json!({"kind": "pipeline", "name": "j", "content": "{\"a\": ", "format": "json"}),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (400, Some("compile_failed")),
        "{body}"
    );
    let (code, body) = push(&admin, "list", "- a\n- b\n").await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (400, Some("compile_failed")),
        "top level must be an object: {body}"
    );
    let (code, body) = post_json(
        &admin,
        "/agent/configs",
        json!({"kind": "daemon", "name": "x", "content": "a: 1"}),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (400, Some("invalid_parameter")),
        "{body}"
    );
    let reply = admin
        .post("/agent/configs", b"not json".to_vec())
        .await
        .expect("post");
    assert_eq!(reply.status.as_u16(), 400);
    let (code, body) = push(&admin, "../etc", "a: 1\n").await;
    assert_eq!(code, 400, "{body}");
    let (code, body) = post_json(
        &admin,
        "/agent/groups",
        json!({"name": "empty", "selector": {"tags": []}}),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (400, Some("invalid_parameter")),
        "{body}"
    );
    let (code, body) = post_json(
        &admin,
        "/agent/groups",
        json!({"name": "default", "selector": {"tags": [{"name": "a", "value": "*"}]}}),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (409, Some("delete_refused")),
        "{body}"
    );
    let reply = admin.delete("/agent/groups/default").await.expect("delete");
    assert_eq!(
        reply.status.as_u16(),
        409,
        "the default group cannot be deleted"
    );
    // A missing agent object has its own status, not a rule's `not_found` (issue 11).
    let reply = admin.delete("/agent/groups/nope").await.expect("delete");
    assert_eq!(reply.status.as_u16(), 404);
    assert_eq!(reply.json().expect("json")["applyStatus"], "group_not_found");
    let reply = admin.delete("/agent/commands/nope").await.expect("delete");
    assert_eq!(reply.status.as_u16(), 404);
    assert_eq!(reply.json().expect("json")["applyStatus"], "command_not_found");
    let (code, body) = post(
        &admin,
        &with_query(
            "/agent/configs/pipeline/missing/apply",
            &[("group", "default")],
        ),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (404, Some("config_not_found")),
        "{body}"
    );
    let (code, _) = push(&admin, "ok", "a: 1\n").await;
    assert_eq!(code, 200);
    let (code, body) = post(
        &admin,
        &with_query("/agent/configs/pipeline/ok/apply", &[("group", "nope")]),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (404, Some("group_not_found")),
        "{body}"
    );
    let (code, body) = post(&admin, "/agent/configs/pipeline/ok/apply").await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (400, Some("invalid_parameter")),
        "group is required: {body}"
    );
    let command = json!({"name": "c", "content": "a: 1", "expireTime": 0, "group": "default"});
    let (code, body) = post_json(&admin, "/agent/commands", command).await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (400, Some("invalid_parameter")),
        "{body}"
    );
    let (code, _) = get(&admin, "/agent/agents/unknown-instance").await;
    assert_eq!(code, 404);
    let (code, body) = get(
        &admin,
        &with_query("/agent/agents", &[("offline", "maybe")]),
    )
    .await;
    assert_eq!(code, 400, "{body}");

    // Agent catalogs are not rule catalogs: the rule API refuses them and never lists them.
    let reply = admin
        .post(
            &with_query(
                "/runtime/rule/addOrUpdate",
                &[("catalog", "agent-groups"), ("name", "x")],
            ),
            b"a: 1".to_vec(),
        )
        .await
        .expect("post");
    assert_eq!(reply.status.as_u16(), 400);
    assert_eq!(
        reply.json().expect("json")["applyStatus"],
        "invalid_catalog"
    );
    let (_, list) = get(&admin, "/runtime/rule/list").await;
    assert_eq!(list["rules"].as_array().map(Vec::len), Some(0), "{list}");
    node.shutdown().await;
}

// ---- three nodes ----

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 41_000 + i as u16))
}

struct ClusterNode {
    node: RunningNode,
    admin: AdminClient,
    data: AgentClient,
}

async fn start_cluster(size: usize) -> (Vec<ClusterNode>, MemNetwork) {
    let gossip = GossipNetwork::new();
    let bus = MemNetwork::new();
    let mut nodes = Vec::new();
    for i in 1..=size {
        let listeners = Listeners {
            admin: bind().await,
            data: Some(bind().await),
            grpc: None,
        };
        let admin_addr = listeners.admin.local_addr().expect("addr").to_string();
        let mut membership = MembershipSettings::for_test(NodeId(format!("n{i}")), gossip_addr(i));
        membership.seeds = (1..=size)
            .filter(|j| *j != i)
            .map(|j| gossip_addr(j).to_string())
            .collect();
        let wiring = ClusterWiring {
            membership,
            gossip: GossipTransport::InMemory(gossip.clone()),
            bus: BusWiring::Memory {
                network: bus.clone(),
            },
            replication: ReplicationSettings {
                sync_timeout: Duration::from_secs(2),
                ..ReplicationSettings::default()
            },
            admin_advertise: admin_addr.clone(),
        };
        let settings = NodeSettings {
            node_id: Some(format!("n{i}")),
            ..NodeSettings::for_test()
        };
        let kv: Arc<dyn KvEngine> = Arc::new(MemKv::new());
        let node = NodeBuilder::new(settings).start_with_listeners(kv, listeners, Some(wiring))
            .await
            .expect("node starts");
        let admin = AdminClient::new(&admin_addr, None).expect("client");
        let data = AgentClient::new(&node.data_addr.expect("data").to_string(), None)
            .expect("agent client");
        nodes.push(ClusterNode { node, admin, data });
    }
    for (i, n) in nodes.iter().enumerate() {
        wait_until(
            WAIT,
            &format!("n{} sees main n1 and {size} live members", i + 1),
            || async {
                let (_, status) = get(&n.admin, "/cluster/status").await;
                let live = status["members"]
                    .as_array()
                    .map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
                status["main"] == "n1" && live == size
            },
        )
        .await;
    }
    (nodes, bus)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_written_on_one_node_reaches_an_agent_heartbeating_another() {
    let s = "cluster";
    let (nodes, bus) = start_cluster(3).await;

    phase(
        s,
        "push and apply through n2 (not the main: forwarded to n1)",
    );
    let (code, body) = push(&nodes[1].admin, "nginx", NGINX_V1).await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (200, Some("stored")),
        "{body}"
    );
    let v1 = body["version"].as_i64().expect("version");
    let (code, body) = post(
        &nodes[1].admin,
        &with_query(
            "/agent/configs/pipeline/nginx/apply",
            &[("group", "default")],
        ),
    )
    .await;
    assert_eq!(
        (code, body["applyStatus"].as_str()),
        (200, Some("stored")),
        "{body}"
    );

    phase(s, "an agent heartbeating n3 receives it");
    let mut agent = SimAgent::new(SimAgentSpec::numbered(3), now_s());
    let data = nodes[2].data.clone();
    let mut held = None;
    let deadline = std::time::Instant::now() + WAIT;
    while held != Some(v1) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent on n3 never received nginx v{v1}"
        );
        agent.heartbeat(&data, now_s()).await.expect("heartbeat");
        held = held_version(&agent, "nginx");
        if held != Some(v1) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    agent.heartbeat(&data, now_s()).await.expect("heartbeat");

    phase(
        s,
        "listing agents on n1 fans out: the agent is held by n3 and has applied v1",
    );
    wait_until(WAIT, "n1 sees the agent applied on n3", || async {
        let (_, status) = get(&nodes[0].admin, "/agent/configs/pipeline/nginx/status").await;
        status["agents"]["applied"].as_array().is_some_and(|a| {
            a.iter()
                .any(|x| x["instanceId"] == agent.instance_id() && x["node"] == "n3")
        })
    })
    .await;
    let (_, list) = get(&nodes[0].admin, "/agent/agents").await;
    let rows = list["agents"].as_array().expect("agents");
    assert_eq!(rows.len(), 1, "{list}");
    assert_eq!(rows[0]["node"], "n3");

    phase(
        s,
        "an update written on n1 reaches the agent on n3 with a new version",
    );
    let (code, body) = push(&nodes[0].admin, "nginx", NGINX_V2).await;
    assert_eq!(code, 200, "{body}");
    let v2 = body["version"].as_i64().expect("version");
    let deadline = std::time::Instant::now() + WAIT;
    while held_version(&agent, "nginx") != Some(v2) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent on n3 never received v{v2}"
        );
        agent.heartbeat(&data, now_s()).await.expect("heartbeat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    phase(
        s,
        "with the bus to n3 cut, a write misses its commit notice; the periodic digest sync brings it",
    );
    bus.cut(&NodeId("n1".into()), &NodeId("n3".into()));
    let v3_content = NGINX_V2.replace("flusher_stdout", "flusher_sls");
    let (code, body) = push(&nodes[0].admin, "nginx", &v3_content).await;
    assert_eq!(code, 200, "{body}");
    let v3 = body["version"].as_i64().expect("version");
    agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_ne!(
        held_version(&agent, "nginx"),
        Some(v3),
        "n3 cannot have pulled it over a cut bus"
    );
    bus.heal(&NodeId("n1".into()), &NodeId("n3".into()));
    let deadline = std::time::Instant::now() + WAIT;
    while held_version(&agent, "nginx") != Some(v3) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent on n3 never received v{v3} after the heal"
        );
        agent.heartbeat(&data, now_s()).await.expect("heartbeat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for n in nodes {
        n.node.shutdown().await;
    }
}

// ---- CLI, status buckets, liveness filters, instance configs ----

/// The data rows of a CLI table (header dropped), split on whitespace.
fn table_rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The instance ids of an agent list answer.
fn listed_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = list["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["instance_id"].as_str().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

fn sorted(ids: &[&str]) -> Vec<String> {
    let mut ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cli_manages_groups_configs_and_shows_agents() {
    let s = "cli";
    let (node, admin, data) = single_node(Arc::new(MemKv::new())).await;
    let server = format!("http://{}", node.admin_addr);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("nginx.yaml");
    std::fs::write(&file, NGINX_V1).expect("write config file");
    let file = file.display().to_string();
    let srv = ["--server", server.as_str()];
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().chain(&srv).map(|a| a.to_string()).collect();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            hotrule_cli(&args, &[]).await
        }
    };

    phase(s, "agent-group create with a tag selector and an IP range");
    let (code, out, err) = run(&[
        "agent-group", "create", "--name", "web", "--description", "web servers",
        "--tag", "env=prod*", "--ip-cidr", "10.0.0.0/24",
    ])
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("stored agent-groups/web"), "{out}");
    let (code, _, err) = run(&["agent-group", "create", "--name", "bad", "--tag", "novalue"]).await;
    assert_eq!(code, 2, "a tag that is not name=value is a usage error");
    assert!(err.contains("\"novalue\" is not name=value"), "{err}");

    phase(s, "agent-group list, as a table and as JSON");
    let (code, out, err) = run(&["agent-group", "list"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("NAME"), "a header first: {out}");
    let rows = table_rows(&out);
    assert!(
        rows.contains(&vec!["web".into(), "env=prod*".into(), "10.0.0.0/24".into(), "web".into(), "servers".into()]),
        "{out}"
    );
    assert!(rows.iter().any(|r| r[0] == "default"), "{out}");
    let (code, out, err) = run(&["agent-group", "list", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let groups: Value = serde_json::from_str(&out).expect("--json prints JSON");
    let web = groups["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "web"))
        .unwrap_or_else(|| panic!("web listed: {groups}"));
    assert_eq!(web["selector"]["tags"], json!([{"name": "env", "value": "prod*"}]), "{web}");
    assert_eq!(web["selector"]["ip_cidrs"], json!(["10.0.0.0/24"]), "{web}");

    phase(s, "agent-config push and apply");
    let (code, out, err) = run(&["agent-config", "push", "--name", "nginx", &file]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("stored agent-pipeline-configs/nginx"), "{out}");
    let (_, stored) = get(&admin, "/agent/configs/pipeline/nginx").await;
    let v1 = stored["version"].as_i64().expect("version");
    assert!(out.contains(&format!("version {v1}")), "the version is printed: {out}");
    // Through HOTRULE_SERVER rather than --server.
    let (code, out, err) = hotrule_cli(
        &["agent-config", "apply", "--name", "nginx", "--group", "web"],
        &[("HOTRULE_SERVER", server.as_str())],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("stored agent-pipeline-configs/nginx"), "{out}");
    let (code, _, err) = run(&["agent-config", "apply", "--name", "nginx", "--group", "nope"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("404 group_not_found"), "{err}");

    phase(s, "an agent of web applies it; outsiders (IP outside the range, or no tag) do not get it");
    let mut agent = web_agent();
    let id = agent.instance_id().to_string();
    let mut far = {
        let mut spec = SimAgentSpec::numbered(300);
        spec.tags = vec![("env".into(), "prod".into())];
        SimAgent::new(spec, now_s())
    };
    let mut untagged = SimAgent::new(SimAgentSpec::numbered(8), now_s());
    assert_eq!(agent.heartbeat(&data, now_s()).await.expect("heartbeat").applied, 1);
    agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!(agent.configs(ConfigKind::Pipeline)["nginx"].status, ApplyStatus::Applied);
    for outsider in [&mut far, &mut untagged] {
        let round = outsider.heartbeat(&data, now_s()).await.expect("heartbeat");
        assert_eq!(round.applied, 0, "{} is not in web", outsider.instance_id());
    }

    phase(s, "agent-config status shows the agent as applied");
    let (code, out, err) = run(&["agent-config", "status", "--name", "nginx"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("pipeline nginx version {v1} groups [\"web\"]")), "{out}");
    let rows = table_rows(&out);
    assert_eq!(rows.len(), 2, "a header and one agent: {out}");
    assert_eq!(rows[1][..4], ["applied".to_string(), id.clone(), node.state.node_id.0.clone(), v1.to_string()], "{out}");
    let (code, out, _) = run(&["agent-config", "status", "--name", "nginx", "--json"]).await;
    assert_eq!(code, 0);
    let status: Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(status["agents"]["applied"][0]["instanceId"], id.as_str(), "{status}");

    phase(s, "agent list, filtered by a group that matches and one that does not");
    let (code, out, err) = run(&["agent", "list"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(table_rows(&out).len(), 3, "{out}");
    let (code, out, err) = run(&["agent", "list", "--group", "web"]).await;
    assert_eq!(code, 0, "{err}");
    let rows = table_rows(&out);
    assert_eq!(rows.len(), 1, "only the web agent: {out}");
    assert_eq!(
        rows[0],
        [id.as_str(), "10.0.0.7", "sim-agent-7", "online", "running", node.state.node_id.0.as_str(), "default,web"],
        "{out}"
    );
    let (code, out, _) = run(&["agent", "list", "--group", "db"]).await;
    assert_eq!(code, 0);
    assert!(table_rows(&out).is_empty(), "no agent in an unknown group: {out}");
    let (code, out, _) = run(&["agent", "list", "--group", "web", "--json"]).await;
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(listed_ids(&list), [id.as_str()]);

    phase(s, "agent show");
    let (code, out, err) = run(&["agent", "show", &id]).await;
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).expect("show prints JSON");
    assert_eq!(shown["instance_id"], id.as_str());
    assert_eq!(shown["groups"], json!(["default", "web"]));
    assert_eq!(
        shown["configs"],
        json!([{"kind": "pipeline", "name": "nginx", "desiredVersion": v1, "reportedVersion": v1, "status": "APPLIED", "message": ""}]),
        "{shown}"
    );
    let (code, _, err) = run(&["agent", "show", "no-such-agent"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("404") && err.contains("no-such-agent"), "{err}");

    phase(s, "agent-config remove: the agent is told -1 on its next heartbeat");
    let (code, out, err) = run(&["agent-config", "remove", "--name", "nginx", "--group", "web"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("stored agent-pipeline-configs/nginx"), "{out}");
    let round = agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    let updates: Vec<(&str, i64)> = round
        .response
        .continuous_pipeline_config_updates
        .iter()
        .map(|u| (u.name.as_str(), u.version))
        .collect();
    assert_eq!(updates, [("nginx", -1)]);
    assert_eq!(round.deleted, 1);
    assert_eq!(held_version(&agent, "nginx"), None);

    phase(s, "agent-group delete: web goes, default is refused with a clear message");
    let (code, out, err) = run(&["agent-group", "delete", "web"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("deleted agent-groups/web: group \"web\" deleted"), "{out}");
    let (_, groups) = get(&admin, "/agent/groups").await;
    assert!(
        groups["groups"].as_array().is_some_and(|g| g.iter().all(|g| g["name"] != "web")),
        "{groups}"
    );
    let (code, out, err) = run(&["agent-group", "delete", "default"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        err.starts_with("hotrule: 409 delete_refused:") && err.contains("\"default\" group always exists"),
        "{err}"
    );
    let (code, _, err) = hotrule_cli(&["agent", "list", "--server", "ftp://nowhere"], &[]).await;
    assert_eq!(code, 2, "a bad server address is a usage error: {err}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_status_sorts_agents_into_applied_applying_failed_and_removing() {
    let s = "status";
    let (node, admin, data) = single_node(Arc::new(MemKv::new())).await;
    let tagged = |index: usize, name: &str, value: &str| {
        let mut spec = SimAgentSpec::numbered(index);
        spec.tags = vec![(name.into(), value.into())];
        SimAgent::new(spec, now_s())
    };
    let bucket = |status: &Value, name: &str| -> Vec<String> {
        let mut ids: Vec<String> = status["agents"][name]
            .as_array()
            .unwrap_or_else(|| panic!("bucket {name} is always present: {status}"))
            .iter()
            .filter_map(|a| a["instanceId"].as_str().map(str::to_string))
            .collect();
        ids.sort();
        ids
    };

    phase(s, "nginx is applied to web (env=prod) and to old (role=legacy)");
    for group in [
        json!({"name": "web", "selector": {"tags": [{"name": "env", "value": "prod"}]}}),
        json!({"name": "old", "selector": {"tags": [{"name": "role", "value": "legacy"}]}}),
    ] {
        let (code, body) = post_json(&admin, "/agent/groups", group).await;
        assert_eq!(code, 200, "{body}");
    }
    let (code, body) = push(&admin, "nginx", NGINX_V1).await;
    assert_eq!(code, 200, "{body}");
    let v1 = body["version"].as_i64().expect("version");
    for group in ["web", "old"] {
        let (code, body) = post(&admin, &with_query("/agent/configs/pipeline/nginx/apply", &[("group", group)])).await;
        assert_eq!(code, 200, "{body}");
    }

    phase(s, "applied: two heartbeats; applying: received, not yet confirmed");
    let mut done = tagged(1, "env", "prod");
    let mut pending = tagged(2, "env", "prod");
    let mut broken = tagged(3, "env", "prod");
    let mut legacy = tagged(4, "role", "legacy");
    for agent in [&mut done, &mut legacy] {
        agent.heartbeat(&data, now_s()).await.expect("heartbeat");
        agent.heartbeat(&data, now_s()).await.expect("heartbeat");
        assert_eq!(agent.configs(ConfigKind::Pipeline)["nginx"].status, ApplyStatus::Applied);
    }
    assert_eq!(pending.heartbeat(&data, now_s()).await.expect("heartbeat").applied, 1);

    phase(s, "failed: the agent reports FAILED with a message for the current version");
    assert_eq!(broken.heartbeat(&data, now_s()).await.expect("heartbeat").applied, 1);
    let mut report = broken.build_heartbeat(now_s());
    let held = report
        .continuous_pipeline_configs
        .iter_mut()
        .find(|c| c.name == "nginx")
        .expect("nginx reported");
    assert_eq!(held.version, v1);
    held.status = proto::ConfigStatus::Failed as i32;
    held.message = "input_file: permission denied".into();
    let answer: proto::HeartbeatResponse = data.call("/Agent/Heartbeat", &report).await.expect("heartbeat");
    assert!(answer.continuous_pipeline_config_updates.is_empty(), "the version is current: nothing to resend");

    phase(s, "removing: nginx leaves old while legacy still holds it");
    let (code, body) = post(&admin, &with_query("/agent/configs/pipeline/nginx/remove", &[("group", "old")])).await;
    assert_eq!(code, 200, "{body}");

    let (code, status) = get(&admin, "/agent/configs/pipeline/nginx/status").await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["version"].as_i64(), Some(v1), "{status}");
    assert_eq!(bucket(&status, "applied"), [done.instance_id()], "{status}");
    assert_eq!(bucket(&status, "applying"), [pending.instance_id()], "{status}");
    assert_eq!(bucket(&status, "failed"), [broken.instance_id()], "{status}");
    assert_eq!(bucket(&status, "removing"), [legacy.instance_id()], "{status}");
    let failed = &status["agents"]["failed"][0];
    assert_eq!(
        (failed["reportedVersion"].as_i64(), failed["status"].as_str(), failed["message"].as_str()),
        (Some(v1), Some("FAILED"), Some("input_file: permission denied")),
        "{status}"
    );
    let applying = &status["agents"]["applying"][0];
    assert_eq!(applying["reportedVersion"], Value::Null, "not reported yet: {status}");
    let removing = &status["agents"]["removing"][0];
    assert_eq!(
        (removing["reportedVersion"].as_i64(), removing["status"].as_str()),
        (Some(v1), Some("APPLIED")),
        "{status}"
    );

    phase(s, "the next heartbeats move pending to applied and legacy out of removing");
    pending.heartbeat(&data, now_s()).await.expect("heartbeat");
    let round = legacy.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!(round.deleted, 1);
    let (_, status) = get(&admin, "/agent/configs/pipeline/nginx/status").await;
    assert_eq!(
        bucket(&status, "applied"),
        sorted(&[done.instance_id(), pending.instance_id()]),
        "{status}"
    );
    assert!(bucket(&status, "applying").is_empty(), "{status}");
    assert_eq!(
        bucket(&status, "removing"),
        [legacy.instance_id()],
        "its last report still listed nginx: {status}"
    );
    legacy.heartbeat(&data, now_s()).await.expect("heartbeat");
    let (_, status) = get(&admin, "/agent/configs/pipeline/nginx/status").await;
    assert!(bucket(&status, "removing").is_empty(), "deleted and reported so: {status}");
    assert_eq!(bucket(&status, "failed"), [broken.instance_id()], "{status}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_list_filters_by_running_status_and_by_an_agent_that_really_went_offline() {
    let s = "liveness";
    let mut settings = NodeSettings::for_test();
    settings.agents.liveness = LivenessPolicy {
        heartbeat_interval_ms: 250,
        missed_intervals: 4,
        retention_ms: 10 * 60 * 1000,
    };
    let (node, admin, data) = single_node_with(settings, Arc::new(MemKv::new())).await;
    let list = |pairs: &'static [(&'static str, &'static str)]| {
        let admin = admin.clone();
        async move {
            let (code, body) = get(&admin, &with_query("/agent/agents", pairs)).await;
            assert_eq!(code, 200, "{body}");
            body
        }
    };

    phase(s, "three agents: two running, one stopping (built by hand), all online");
    let mut gone = SimAgent::new(SimAgentSpec::numbered(1), now_s());
    let mut alive = SimAgent::new(SimAgentSpec::numbered(2), now_s());
    let mut stopping = SimAgent::new(SimAgentSpec::numbered(3), now_s());
    gone.heartbeat(&data, now_s()).await.expect("heartbeat");
    alive.heartbeat(&data, now_s()).await.expect("heartbeat");
    let mut report = stopping.build_heartbeat(now_s());
    report.running_status = "stopping".into();
    let _: proto::HeartbeatResponse = data.call("/Agent/Heartbeat", &report).await.expect("heartbeat");
    assert_eq!(
        listed_ids(&list(&[("status", "running")]).await),
        sorted(&[gone.instance_id(), alive.instance_id()])
    );
    assert_eq!(listed_ids(&list(&[("status", "stopping")]).await), [stopping.instance_id()]);
    assert!(listed_ids(&list(&[("status", "crashed")]).await).is_empty());

    phase(s, "gone stops heartbeating and turns offline; alive and stopping keep heartbeating");
    let agents = Arc::new(tokio::sync::Mutex::new((alive, stopping)));
    wait_until(WAIT, "gone is the only offline agent", || {
        let (agents, admin, data) = (agents.clone(), admin.clone(), data.clone());
        async move {
            let mut guard = agents.lock().await;
            let (alive, stopping) = &mut *guard;
            alive.heartbeat(&data, now_s()).await.expect("heartbeat");
            let mut report = stopping.build_heartbeat(now_s());
            report.running_status = "stopping".into();
            let _: proto::HeartbeatResponse = data.call("/Agent/Heartbeat", &report).await.expect("heartbeat");
            let (_, offline) = get(&admin, &with_query("/agent/agents", &[("offline", "true")])).await;
            offline["agents"].as_array().is_some_and(|a| !a.is_empty())
        }
    })
    .await;
    let guard = agents.lock().await;
    let (alive, stopping) = &*guard;

    let offline = list(&[("offline", "true")]).await;
    assert_eq!(listed_ids(&offline), [gone.instance_id()], "{offline}");
    assert_eq!(offline["agents"][0]["liveness"], "offline", "{offline}");
    let online = list(&[("offline", "false")]).await;
    assert_eq!(
        listed_ids(&online),
        sorted(&[alive.instance_id(), stopping.instance_id()]),
        "{online}"
    );
    assert!(
        online["agents"].as_array().expect("agents").iter().all(|a| a["liveness"] == "online"),
        "{online}"
    );
    assert_eq!(
        listed_ids(&list(&[("status", "running")]).await),
        sorted(&[gone.instance_id(), alive.instance_id()]),
        "an offline agent keeps its last reported status"
    );
    assert_eq!(
        listed_ids(&list(&[("status", "running"), ("offline", "true")]).await),
        [gone.instance_id()]
    );
    assert_eq!(
        listed_ids(&list(&[("status", "running"), ("offline", "false")]).await),
        [alive.instance_id()]
    );
    assert!(listed_ids(&list(&[("status", "stopping"), ("offline", "true")]).await).is_empty());
    let (code, shown) = get(&admin, &format!("/agent/agents/{}", gone.instance_id())).await;
    assert_eq!((code, shown["liveness"].as_str()), (200, Some("offline")), "{shown}");
    assert_eq!(listed_ids(&list(&[]).await).len(), 3, "offline is not forgotten");

    phase(s, "a heartbeat brings it back online");
    gone.heartbeat(&data, now_s()).await.expect("heartbeat");
    let (_, shown) = get(&admin, &format!("/agent/agents/{}", gone.instance_id())).await;
    assert_eq!(shown["liveness"], "online", "{shown}");
    drop(guard);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_config_reaches_an_agent_through_the_fetch_path() {
    let s = "instance-fetch";
    let mut settings = NodeSettings::for_test();
    settings.agents.detail_delivery = DetailDelivery::Fetch;
    let (node, admin, data) = single_node_with(settings, Arc::new(MemKv::new())).await;

    phase(s, "an instance config, applied to web");
    let group = json!({"name": "web", "selector": {"tags": [{"name": "env", "value": "prod*"}]}});
    let (code, body) = post_json(&admin, "/agent/groups", group).await;
    assert_eq!(code, 200, "{body}");
    let content = "{\"max_bytes_per_sec\": 20971520, \"cpu_usage_limit\": 0.4}";
    let (code, body) = post_json(
        &admin,
        "/agent/configs",
        json!({"kind": "instance", "name": "limits", "content": content, "format": "json"}),
    )
    .await;
    assert_eq!((code, body["applyStatus"].as_str()), (200, Some("stored")), "{body}");
    let version = body["version"].as_i64().expect("version");
    let (code, body) = post(&admin, &with_query("/agent/configs/instance/limits/apply", &[("group", "web")])).await;
    assert_eq!(code, 200, "{body}");

    phase(s, "the heartbeat announces it without detail; the agent fetches it");
    let mut agent = web_agent();
    let round = agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    let fetch_bits = proto::RESPONSE_FETCH_PIPELINE_DETAIL | proto::RESPONSE_FETCH_INSTANCE_DETAIL;
    assert_eq!(round.response.flags & fetch_bits, fetch_bits, "both fetch bits");
    let announced: Vec<(&str, i64, usize)> = round
        .response
        .instance_config_updates
        .iter()
        .map(|u| (u.name.as_str(), u.version, u.detail.len()))
        .collect();
    assert_eq!(announced, [("limits", version, 0)], "names and versions only");
    assert!(round.response.continuous_pipeline_config_updates.is_empty());
    assert_eq!(round.fetches, 2, "the 3.x agent calls both fetch paths");
    assert!(round.fetch_errors.is_empty(), "{:?}", round.fetch_errors);
    assert_eq!(round.applied, 1);
    let held = &agent.configs(ConfigKind::Instance)["limits"];
    assert_eq!(held.version, version);
    assert_eq!(held.detail, content.as_bytes(), "JSON is delivered as stored");
    assert!(agent.configs(ConfigKind::Pipeline).is_empty());

    phase(s, "/Agent/FetchInstanceConfig answers instance_config_updates with the detail");
    let request = proto::FetchConfigRequest {
        request_id: b"fetch-1".to_vec(),
        instance_id: agent.instance_id().as_bytes().to_vec(),
        instance_configs: vec![proto::ConfigInfo { name: "limits".into(), version, ..Default::default() }],
        ..Default::default()
    };
    let fetched: proto::FetchConfigResponse =
        data.call("/Agent/FetchInstanceConfig", &request).await.expect("fetch");
    let details: Vec<(&str, i64, &[u8])> = fetched
        .instance_config_updates
        .iter()
        .map(|u| (u.name.as_str(), u.version, u.detail.as_slice()))
        .collect();
    assert_eq!(details, [("limits", version, content.as_bytes())]);

    phase(s, "the next heartbeat confirms it: the status shows it applied");
    let round = agent.heartbeat(&data, now_s()).await.expect("heartbeat");
    assert_eq!((round.fetches, round.applied), (0, 0), "nothing more to fetch");
    let (code, status) = get(&admin, "/agent/configs/instance/limits/status").await;
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["agents"]["applied"][0]["instanceId"], agent.instance_id(), "{status}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_content_is_refused_with_its_position() {
    let (node, admin, _data) = single_node(Arc::new(MemKv::new())).await;
    let (code, body) = post_json(
        &admin,
        "/agent/configs",
        json!({"kind": "pipeline", "name": "j", "content": "{\"inputs\": [1,\n  2,, 3]}", "format": "json"}),
    )
    .await;
    assert_eq!((code, body["applyStatus"].as_str()), (400, Some("compile_failed")), "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("not valid JSON"), "{body}");
    assert!(message.contains("line 2 column 5"), "the position is given: {body}");
    let (code, _) = get(&admin, "/agent/configs/pipeline/j").await;
    assert_eq!(code, 404, "nothing was stored");
    node.shutdown().await;
}
