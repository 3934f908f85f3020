//! The cluster secret against an attacker on the network, with in-process nodes on real sockets
//! (sealed UDP gossip and the HMAC bus on 127.0.0.1): a node without the secret, or with
//! another one, never joins or becomes main, even with the smallest id, and what it writes never
//! reaches the cluster; a captured bus call replayed is refused; cluster-wide reads go over the
//! bus and never carry the operator's token.
//! Every wait is on a predicate with a bound; each scenario is a sequence of logged phases.

mod harness;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use harness::{TestNode, wait_until};
use hotrule::cluster::bus::{BusAuth, MemNetwork};
use hotrule::cluster::gossip::{GossipNetwork, GossipTransport, MembershipSettings};
use hotrule::base::ids::NodeId;
use hotrule::node::testing::NodeBuilder;
use hotrule::node::{BusWiring, ClusterWiring, NodeSettings};
use hotrule::cluster::replication::ReplicationSettings;
use hotrule::store::kv::{KvEngine, MemKv};

const WAIT: Duration = Duration::from_secs(20);
const SECRET: &str = "the cluster secret";
const TOKEN: &str = "operator-token";

fn phase(scenario: &str, what: &str) {
    eprintln!("[{scenario}] {what}");
}

fn rule(prefix: &str) -> String {
    format!(
        "expSuffix: service(['svc'], Layer.GENERAL)\nmetricPrefix: {prefix}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc']).rate('PT1M')\n"
    )
}

/// UDP ports free on 127.0.0.1 right now (the advertised gossip address must be known before
/// chitchat binds; the race with other processes is acceptable in a test).
fn free_udp_ports<const N: usize>() -> [u16; N] {
    let sockets: Vec<_> = (0..N)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").expect("bind"))
        .collect();
    std::array::from_fn(|i| sockets[i].local_addr().expect("addr").port())
}

fn udp(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A node on real UDP gossip and a real HTTP bus, both under `auth`.
async fn start_udp_node(id: &str, gossip_port: u16, seeds: &[u16], auth: BusAuth) -> TestNode {
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let admin_addr = admin.local_addr().expect("addr").to_string();
    let bus = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let bus_addr = bus.local_addr().expect("addr").to_string();
    let mut membership = MembershipSettings::for_test(NodeId(id.into()), udp(gossip_port));
    membership.seeds = seeds.iter().map(|port| udp(*port).to_string()).collect();
    let wiring = ClusterWiring {
        membership,
        gossip: GossipTransport::Udp(auth.clone()),
        bus: BusWiring::Http {
            listener: bus,
            advertise: bus_addr,
            auth,
        },
        replication: ReplicationSettings {
            sync_timeout: Duration::from_secs(2),
            ..ReplicationSettings::default()
        },
        admin_advertise: admin_addr.clone(),
    };
    let settings = NodeSettings {
        node_id: Some(id.into()),
        ..NodeSettings::for_test()
    };
    let kv: Arc<dyn KvEngine> = Arc::new(MemKv::new());
    let node = NodeBuilder::new(settings).start_clustered(kv.clone(), admin, wiring)
        .await
        .expect("node starts");
    let client = hotrule::api::client::AdminClient::new(&admin_addr, None).expect("client");
    TestNode { node, client, kv }
}

async fn status(node: &TestNode) -> serde_json::Value {
    node.client
        .get("/cluster/status")
        .await
        .expect("status")
        .json()
        .expect("json")
}

fn member_ids(status: &serde_json::Value) -> Vec<String> {
    status["members"]
        .as_array()
        .map(|members| {
            members
                .iter()
                .filter_map(|m| m["nodeId"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

async fn holds(node: &TestNode, name: &str) -> bool {
    node.row("otel-rules", name).await.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_without_the_secret_never_join_become_main_or_get_their_writes_in() {
    let s = "rogue";
    let [p1, p2, rogue_port, wrong_port] = free_udp_ports::<4>();
    phase(s, "n1 and n2 share the secret");
    let n1 = start_udp_node("n1", p1, &[p2], BusAuth::secret(SECRET)).await;
    let n2 = start_udp_node("n2", p2, &[p1], BusAuth::secret(SECRET)).await;
    for node in [&n1, &n2] {
        wait_until(WAIT, "n1 and n2 agree, n1 main", || async {
            let status = status(node).await;
            status["main"] == "n1" && member_ids(&status) == ["n1", "n2"]
        })
        .await;
    }

    phase(
        s,
        "an --insecure-bus node and a wrong-secret node, both with smaller ids, seed n1 and n2",
    );
    let rogue = start_udp_node("0-rogue", rogue_port, &[p1, p2], BusAuth::Insecure).await;
    let wrong = start_udp_node("0-wrong", wrong_port, &[p1, p2], BusAuth::secret("a guess")).await;
    for node in [&n1, &n2] {
        wait_until(WAIT, "their datagrams dropped and counted", || async {
            let gossip = status(node).await["security"]["gossip"].clone();
            gossip["malformed"].as_u64() >= Some(3) && gossip["badMac"].as_u64() >= Some(3)
        })
        .await;
    }
    for node in [&n1, &n2] {
        let status = status(node).await;
        assert_eq!(status["main"], "n1", "{status}");
        assert_eq!(member_ids(&status), ["n1", "n2"], "{status}");
        assert_eq!(
            status["security"]["gossip"]["authenticated"], true,
            "{status}"
        );
    }
    for stranger in [&rogue, &wrong] {
        let status = status(stranger).await;
        assert_eq!(member_ids(&status).len(), 1, "alone: {status}");
        assert_eq!(status["main"], status["self"], "{status}");
    }

    phase(
        s,
        "the strangers' writes stay theirs; the cluster's writes stay the cluster's",
    );
    let (code, json) = rogue
        .push("otel-rules", "rogue-rule", &rule("rogue"), &[])
        .await;
    assert_eq!(code, 200, "applied on the lone rogue itself: {json}");
    let (code, json) = n2.push("otel-rules", "real", &rule("real"), &[]).await;
    assert_eq!(
        code, 200,
        "forwarded to n1 over the authenticated bus: {json}"
    );
    wait_until(WAIT, "n1 and n2 hold the cluster's write", || async {
        holds(&n1, "real").await && holds(&n2, "real").await
    })
    .await;
    assert!(!holds(&n1, "rogue-rule").await && !holds(&n2, "rogue-rule").await);
    assert!(!holds(&rogue, "real").await && !holds(&wrong, "real").await);

    for node in [rogue, wrong, n2, n1] {
        node.node.shutdown().await;
    }
}

/// Answers every request on a fake admin address and counts those that carry a token.
async fn token_trap() -> (String, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let counter = seen.clone();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let counter = counter.clone();
        async move {
            if request
                .headers()
                .contains_key(axum::http::header::AUTHORIZATION)
            {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            axum::Json(serde_json::json!({"rules": [], "agents": []}))
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_reads_go_over_the_bus_and_never_send_the_token() {
    let s = "fan-out";
    let gossip = GossipNetwork::new();
    let bus = MemNetwork::new();
    let (trap, tokens_seen) = token_trap().await;
    let mut nodes = Vec::new();
    phase(
        s,
        "two nodes with an admin token; n2 gossips a trap as its admin address",
    );
    for i in 1..=2u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let admin = listener.local_addr().expect("addr").to_string();
        let mut membership = MembershipSettings::for_test(NodeId(format!("n{i}")), udp(i));
        membership.seeds = vec![udp(3 - i).to_string()];
        let wiring = ClusterWiring {
            membership,
            gossip: GossipTransport::InMemory(gossip.clone()),
            bus: BusWiring::Memory {
                network: bus.clone(),
            },
            replication: ReplicationSettings::default(),
            admin_advertise: if i == 2 { trap.clone() } else { admin.clone() },
        };
        let settings = NodeSettings {
            node_id: Some(format!("n{i}")),
            admin_token: Some(TOKEN.into()),
            ..NodeSettings::for_test()
        };
        let kv: Arc<dyn KvEngine> = Arc::new(MemKv::new());
        let node = NodeBuilder::new(settings).start_clustered(kv.clone(), listener, wiring)
            .await
            .expect("starts");
        let client = hotrule::api::client::AdminClient::new(&admin, Some(TOKEN.into())).expect("client");
        nodes.push(TestNode { node, client, kv });
    }
    wait_until(WAIT, "n1 sees n2 live", || async {
        let status = status(&nodes[0]).await;
        status["members"]
            .as_array()
            .is_some_and(|m| m.iter().filter(|m| m["live"] == true).count() == 2)
    })
    .await;
    let (code, json) = nodes[1].push("otel-rules", "fan", &rule("fan"), &[]).await;
    assert_eq!(code, 200, "{json}");

    phase(
        s,
        "list?cluster=true and the agent list on n1 reach n2 over the bus",
    );
    wait_until(
        WAIT,
        "n1's cluster list has n2's row for the rule",
        || async {
            let list = nodes[0]
                .client
                .get("/runtime/rule/list?cluster=true")
                .await
                .expect("list")
                .json()
                .expect("json");
            list["unreachable"].as_array().is_some_and(Vec::is_empty)
                && list["rules"].as_array().is_some_and(|rows| {
                    rows.iter().any(|r| r["node"] == "n2" && r["name"] == "fan")
                })
        },
    )
    .await;
    let agents = nodes[0]
        .client
        .get("/agent/agents")
        .await
        .expect("agents")
        .json()
        .expect("json");
    assert_eq!(
        agents["unreachableNodes"],
        serde_json::json!([]),
        "{agents}"
    );
    assert_eq!(
        tokens_seen.load(Ordering::SeqCst),
        0,
        "the operator's token went to a gossiped address"
    );

    for node in nodes {
        node.node.shutdown().await;
    }
}

/// Posts a captured bus call (body and auth headers) as is; the status code of the answer.
async fn post_captured(bus_addr: &str, body: &[u8], signature: &hotrule::cluster::bus::auth::Signature) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(bus_addr).await.expect("connect");
    let head = format!(
        "POST {} HTTP/1.1\r\nhost: {bus_addr}\r\ncontent-length: {}\r\n{}: {}\r\n{}: {}\r\n{}: {}\r\nconnection: close\r\n\r\n",
        hotrule::cluster::bus::BUS_PATH,
        body.len(),
        hotrule::cluster::bus::auth::TIMESTAMP_HEADER,
        signature.timestamp,
        hotrule::cluster::bus::auth::NONCE_HEADER,
        signature.nonce_hex,
        hotrule::cluster::bus::auth::MAC_HEADER,
        signature.mac_hex,
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(body).await.expect("body");
    let mut answer = vec![0u8; 64];
    let read = tokio::time::timeout(WAIT, stream.read(&mut answer)).await.expect("answered").expect("read");
    String::from_utf8_lossy(&answer[..read]).split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_forward_replayed_cannot_overwrite_a_newer_write() {
    let s = "replay";
    let [p1] = free_udp_ports::<1>();
    let n1 = start_udp_node("n1", p1, &[], BusAuth::secret(SECRET)).await;
    let bus_addr = status(&n1).await["members"][0]["busAddr"].as_str().expect("bus address").to_string();

    phase(s, "a member's signed forward of version A is captured on the wire, and delivered");
    let key = hotrule::base::ids::RuleKey::new(
        hotrule::base::ids::Catalog::OtelRules,
        hotrule::base::ids::RuleName::parse("replayed").expect("name"),
    );
    let forward = hotrule::cluster::bus::BusRequest::Forward {
        op: hotrule::cluster::bus::ForwardOp::AddOrUpdate { key, content: rule("old").into_bytes(), allow_storage_change: false, force: false },
        sender: NodeId("n2".into()),
        issued_at_ms: hotrule::base::clock::now_ms(),
    };
    let body = hotrule::cluster::bus::messages::encode_request(&forward).expect("encode");
    let signature = BusAuth::secret(SECRET)
        .sign(hotrule::base::clock::now_ms(), &hotrule::cluster::bus::auth::new_nonce(), hotrule::cluster::bus::BUS_PATH, &body)
        .expect("signs");
    assert_eq!(post_captured(&bus_addr, &body, &signature).await, 200);
    let old_hash = hotrule::base::ids::ContentHash::of(rule("old").as_bytes()).0;
    assert_eq!(n1.row("otel-rules", "replayed").await.map(|r| r["contentHash"].clone()), Some(old_hash.into()));

    phase(s, "the operator writes version B; the captured forward is replayed");
    let (code, json) = n1.push("otel-rules", "replayed", &rule("new"), &[]).await;
    assert_eq!(code, 200, "{json}");
    for _ in 0..3 {
        assert_eq!(post_captured(&bus_addr, &body, &signature).await, 401, "a replay is refused");
    }
    let new_hash = hotrule::base::ids::ContentHash::of(rule("new").as_bytes()).0;
    assert_eq!(n1.row("otel-rules", "replayed").await.map(|r| r["contentHash"].clone()), Some(new_hash.into()));
    let bus = status(&n1).await["security"]["bus"].clone();
    assert_eq!(bus["replayed"], 3, "{bus}");
    n1.node.shutdown().await;
}
