//! SkyWalking's dashboard mutations (`addTemplate` / `changeTemplate` / `disableTemplate`) over
//! `POST /graphql` on in-process nodes: on a node that is not the main of a three-node cluster
//! (forwarded to the main, written as `ui-template` entries, replicated), every node's
//! `getAllTemplates` / `getTemplate` shows the change; a bundled dashboard is changed like a
//! stored one; the cluster restarted on its stores still has them; bad inputs are answered
//! `status: false` and change nothing. No RocksDB needed.

mod harness;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::api::client::AdminClient;
use hotrule::base::ids::NodeId;
use hotrule::cluster::bus::MemNetwork;
use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
use hotrule::node::NodeSettings;
use hotrule::store::kv::{KvEngine, MemKv};
use serde_json::{Value as Json, json};

const WAIT: Duration = Duration::from_secs(30);

const ADD: &str = "mutation($s: NewDashboardSetting!) { addTemplate(setting: $s) { id status message } }";
const CHANGE: &str = "mutation($s: DashboardSetting!) { changeTemplate(setting: $s) { id status message } }";
const DISABLE: &str = "mutation($id: String!) { disableTemplate(id: $id) { id status message } }";
const ALL: &str = "{ getAllTemplates { id configuration } }";
const ONE: &str = "query($id: String!) { getTemplate(id: $id) { id configuration } }";

fn templates_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ui-templates")
}

fn settings(node_id: Option<String>) -> NodeSettings {
    NodeSettings { ui_templates_dir: Some(templates_dir()), node_id, ..NodeSettings::for_test() }
}

/// The data of a GraphQL answer that must have no errors.
async fn data(client: &AdminClient, query: &str, variables: Json) -> Json {
    let body = serde_json::to_vec(&json!({"query": query, "variables": variables})).expect("body");
    let reply = client.post("/graphql", body).await.expect("request");
    let status = reply.status.as_u16();
    let body: Json = reply.json().unwrap_or(Json::Null);
    assert_eq!(status, 200, "{body}");
    assert!(body.get("errors").is_none(), "{query}: {body}");
    body["data"].clone()
}

async fn add(client: &AdminClient, configuration: &str) -> Json {
    data(client, ADD, json!({"s": {"configuration": configuration}})).await["addTemplate"].clone()
}

async fn change(client: &AdminClient, id: &str, configuration: &str) -> Json {
    data(client, CHANGE, json!({"s": {"id": id, "configuration": configuration}})).await["changeTemplate"].clone()
}

async fn disable(client: &AdminClient, id: &str) -> Json {
    data(client, DISABLE, json!({"id": id})).await["disableTemplate"].clone()
}

/// Every enabled dashboard: id → configuration.
async fn all(client: &AdminClient) -> std::collections::BTreeMap<String, String> {
    let answer = data(client, ALL, Json::Null).await;
    answer["getAllTemplates"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|t| (t["id"].as_str().expect("id").to_string(), t["configuration"].as_str().expect("configuration").to_string()))
        .collect()
}

/// `getTemplate`'s configuration (none: null).
async fn one(client: &AdminClient, id: &str) -> Option<String> {
    data(client, ONE, json!({"id": id})).await["getTemplate"]["configuration"].as_str().map(str::to_string)
}

fn configuration(name: &str) -> String {
    json!({"layer": "OS_LINUX", "entity": "Service", "name": name, "isRoot": false, "children": []}).to_string()
}

/// Bad inputs: status false, a message, and nothing changed.
async fn bad_inputs_change_nothing(client: &AdminClient) {
    let before = all(client).await;
    for (answer, what) in [
        (change(client, "no-such-template", &configuration("x")).await, "unknown id"),
        (disable(client, "no-such-template").await, "unknown id"),
        (add(client, "not json").await, "not JSON"),
        (add(client, "[1, 2]").await, "not an object"),
        (change(client, "Linux-Service", "{\"layer\":").await, "not JSON"),
        (change(client, "Linux-Service", "\"text\"").await, "not an object"),
        (change(client, "", &configuration("x")).await, "empty id"),
    ] {
        assert_eq!(answer["status"], false, "{what}: {answer}");
        assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {answer}");
    }
    let unknown = change(client, "no-such-template", &configuration("x")).await;
    assert_eq!(unknown["id"], "no-such-template");
    assert!(unknown["message"].as_str().unwrap_or_default().contains("Can't find the template"), "{unknown}");
    assert_eq!(all(client).await, before, "bad inputs change nothing");
    assert_eq!(one(client, "no-such-template").await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_node_adds_changes_and_disables_and_refuses_bad_inputs() {
    let (node, _kv) = TestNode::in_memory(settings(None)).await;
    let client = &node.client;
    let bundled = all(client).await;
    assert!(bundled.contains_key("Linux-Service") && bundled.len() > 80, "{} dashboards", bundled.len());
    bad_inputs_change_nothing(client).await;

    let added = add(client, &configuration("mine")).await;
    assert_eq!(added["status"], true, "{added}");
    let id = added["id"].as_str().expect("an id").to_string();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(one(client, &id).await, Some(configuration("mine")));
    assert_eq!(all(client).await.len(), bundled.len() + 1);

    assert_eq!(change(client, &id, &configuration("mine, changed")).await["status"], true);
    assert_eq!(one(client, &id).await, Some(configuration("mine, changed")));
    assert_eq!(change(client, "Linux-Service", &configuration("linux")).await["status"], true);
    assert_eq!(one(client, "Linux-Service").await, Some(configuration("linux")));

    assert_eq!(disable(client, &id).await["status"], true);
    assert_eq!(disable(client, &id).await["status"], true, "disabling twice is no change");
    assert_eq!(one(client, &id).await, None);
    assert!(!all(client).await.contains_key(&id));
    // A disabled template can still be changed (OAP finds it by id), which enables it again.
    assert_eq!(change(client, &id, &configuration("back")).await["status"], true);
    assert_eq!(one(client, &id).await, Some(configuration("back")));
    node.node.shutdown().await;
}

// ---- a cluster ----

fn node_id(i: usize) -> NodeId {
    NodeId(format!("t{i}"))
}

fn gossip_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 44_000 + i as u16))
}

fn membership(i: usize) -> MembershipSettings {
    let mut membership = MembershipSettings::for_test(node_id(i), gossip_addr(i));
    membership.seeds = (1..=3).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
    membership
}

async fn start(kvs: &[Arc<dyn KvEngine>], gossip: &GossipNetwork, bus: &MemNetwork) -> Vec<TestNode> {
    let mut nodes = Vec::new();
    for (k, kv) in kvs.iter().enumerate() {
        let i = k + 1;
        nodes.push(TestNode::clustered_in_memory_on(settings(Some(node_id(i).0)), membership(i), gossip, bus, kv.clone()).await);
    }
    nodes
}

/// Waits until every node sees three live members and the same main; returns the main's index.
async fn settled(nodes: &[TestNode]) -> usize {
    let status = |k: usize| async move { nodes[k].client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or(Json::Null) };
    wait_until(WAIT, "three live members agreeing on the main", || async {
        let mut mains = Vec::new();
        for k in 0..nodes.len() {
            let s: Json = status(k).await;
            let live = s["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
            if live != 3 {
                return false;
            }
            mains.push(s["main"].clone());
        }
        mains.iter().all(|m| m.is_string() && *m == mains[0])
    })
    .await;
    let main: Json = status(0).await["main"].clone();
    (1..=3).position(|i| main == node_id(i).0).expect("the main is a member")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_on_a_peer_show_on_every_node_and_survive_a_restart() {
    let (gossip, bus) = (GossipNetwork::new(), MemNetwork::new());
    let kvs: Vec<Arc<dyn KvEngine>> = (0..3).map(|_| Arc::new(MemKv::new()) as Arc<dyn KvEngine>).collect();
    let nodes = start(&kvs, &gossip, &bus).await;
    let main = settled(&nodes).await;
    let peer = (main + 1) % 3;
    let client = &nodes[peer].client;
    let bundled_linux = one(client, "Linux-Service").await.expect("bundled Linux-Service");

    // addTemplate on a node that is not the main: forwarded, written by the main (the revision
    // in the message names the writer), replicated.
    let added = add(client, &configuration("added")).await;
    assert_eq!(added["status"], true, "{added}");
    let written_by_main = |answer: &Json| answer["message"].as_str().is_some_and(|m| m.ends_with(&format!("@{})", node_id(main + 1).0)));
    assert!(written_by_main(&added), "{added}");
    let id = added["id"].as_str().expect("id").to_string();
    for node in &nodes {
        wait_until(WAIT, "the added dashboard on every node", || async {
            all(&node.client).await.get(&id) == Some(&configuration("added"))
        })
        .await;
        assert_eq!(one(&node.client, &id).await, Some(configuration("added")));
    }

    // changeTemplate of a bundled dashboard.
    let changed = change(client, "Linux-Service", &configuration("linux, changed")).await;
    assert_eq!((changed["status"].clone(), changed["id"].clone()), (json!(true), json!("Linux-Service")), "{changed}");
    assert!(written_by_main(&changed), "{changed}");
    assert_ne!(bundled_linux, configuration("linux, changed"));
    for node in &nodes {
        wait_until(WAIT, "the changed Linux-Service on every node", || async {
            one(&node.client, "Linux-Service").await == Some(configuration("linux, changed"))
                && all(&node.client).await.get("Linux-Service") == Some(&configuration("linux, changed"))
        })
        .await;
    }

    // disableTemplate hides it everywhere; so does disabling a bundled one.
    let disabled = disable(client, &id).await;
    assert!(disabled["status"] == true && written_by_main(&disabled), "{disabled}");
    assert_eq!(disable(client, "Linux-Root").await["status"], true);
    for node in &nodes {
        wait_until(WAIT, "the disabled dashboards gone on every node", || async {
            let all = all(&node.client).await;
            !all.contains_key(&id) && !all.contains_key("Linux-Root") && all.contains_key("Linux-Service")
        })
        .await;
        assert_eq!(one(&node.client, &id).await, None);
        assert_eq!(one(&node.client, "Linux-Root").await, None);
    }

    // Bad inputs through the peer (and on the main) are refused and change nothing anywhere.
    bad_inputs_change_nothing(client).await;
    bad_inputs_change_nothing(&nodes[main].client).await;
    let expected = all(client).await;
    for node in &nodes {
        assert_eq!(all(&node.client).await, expected);
    }

    // The whole cluster restarted on its stores still has every change.
    for node in nodes {
        node.node.shutdown().await;
    }
    let nodes = start(&kvs, &gossip, &bus).await;
    for node in &nodes {
        assert_eq!(all(&node.client).await, expected, "after the restart, from the node's own store");
        assert_eq!(one(&node.client, "Linux-Service").await, Some(configuration("linux, changed")));
        assert_eq!(one(&node.client, &id).await, None);
    }
    // ... and writes on: changing the disabled one on a peer enables it everywhere again.
    let main = settled(&nodes).await;
    let peer = (main + 2) % 3;
    assert_eq!(change(&nodes[peer].client, &id, &configuration("again")).await["status"], true);
    for node in &nodes {
        wait_until(WAIT, "the re-enabled dashboard on every node", || async {
            one(&node.client, &id).await == Some(configuration("again"))
        })
        .await;
    }
    for node in nodes {
        node.node.shutdown().await;
    }
}
