//! Membership scenarios on in-process clusters: chitchat's in-memory transport (no sockets) for
//! agreement, failure, partition and restart, and real UDP on loopback for two nodes.
//!
//! Each scenario is a sequence of logged phases; every wait is on the view channel with a
//! bound, never a sleep.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::base::ids::NodeId;

/// The bound on every wait. Failure detection at the test gossip interval (100 ms) takes about
/// a second; the margin is for a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(15);

fn node(id: &str) -> NodeId {
    NodeId(id.into())
}

fn ids(names: &[&str]) -> Vec<NodeId> {
    names.iter().map(|name| node(name)).collect()
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn phase(scenario: &str, what: &str) {
    eprintln!("[{scenario}] {what}");
}

fn settings(id: &str, port: u16, seeds: &[u16], generation: u64) -> MembershipSettings {
    let mut settings = MembershipSettings::for_test(node(id), addr(port));
    settings.generation = generation;
    settings.seeds = seeds.iter().map(|seed| addr(*seed).to_string()).collect();
    settings.initial_facts = vec![(Fact::BusAddr, format!("127.0.0.1:{}", port + 1000))];
    settings
}

async fn start_in(
    network: &GossipNetwork,
    id: &str,
    port: u16,
    seeds: &[u16],
    generation: u64,
) -> Membership {
    Membership::start(
        settings(id, port, seeds, generation),
        &GossipTransport::InMemory(network.clone()),
    )
    .await
    .expect("membership starts")
}

/// Three nodes n1, n2, n3 on ports 1, 2, 3, all seeded with n1.
async fn three_nodes(network: &GossipNetwork) -> Vec<Membership> {
    vec![
        start_in(network, "n1", 1, &[2, 3], 1).await,
        start_in(network, "n2", 2, &[1], 1).await,
        start_in(network, "n3", 3, &[1], 1).await,
    ]
}

/// Waits until `membership`'s view satisfies `condition`, and returns that view.
async fn wait_until(
    membership: &Membership,
    what: &str,
    mut condition: impl FnMut(&ClusterView) -> bool,
) -> ClusterView {
    let mut view_rx = membership.view();
    let outcome = tokio::time::timeout(WAIT, view_rx.wait_for(|view| condition(view)))
        .await
        .map(|waited| waited.map(|view| view.clone()));
    match outcome {
        Ok(Ok(view)) => view,
        Ok(Err(_closed)) => panic!(
            "{}: view channel closed while waiting for {what}",
            membership.self_id()
        ),
        Err(_elapsed) => {
            panic!(
                "{}: no view with {what} within {WAIT:?}; last: {:#?}",
                membership.self_id(),
                *view_rx.borrow()
            )
        }
    }
}

async fn wait_all(members: &[&Membership], what: &str, condition: impl Fn(&ClusterView) -> bool) {
    for membership in members {
        wait_until(membership, what, &condition).await;
    }
}

#[test]
fn membership_can_be_shared_across_tasks() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<Membership>();
    shared::<ClusterView>();
    shared::<GossipNetwork>();
}

#[tokio::test]
async fn a_lone_node_is_its_own_main_at_once_and_refuses_bad_input() {
    let network = GossipNetwork::new();
    let lone = start_in(&network, "10.0.0.9:17128", 9, &[], 1).await;
    let view = lone.view().borrow().clone();
    assert_eq!(
        view.main,
        Some(node("10.0.0.9:17128")),
        "no gossip round needed"
    );
    assert!(lone.is_main() && view.is_main());
    assert_eq!(view.live_ids(), ids(&["10.0.0.9:17128"]));
    assert_eq!(
        view.me().and_then(|me| me.bus_addr.clone()),
        Some("127.0.0.1:1009".into())
    );

    let too_large = lone
        .set_fact(Fact::Digest, "x".repeat(MAX_FACT_VALUE_BYTES + 1))
        .await;
    assert!(
        matches!(
            too_large,
            Err(ClusterError::FactTooLarge { fact: "digest", .. })
        ),
        "{too_large:?}"
    );
    lone.set_fact(Fact::Digest, "abc")
        .await
        .expect("small values pass");
    wait_until(&lone, "own digest", |view| {
        view.me().and_then(|me| me.digest.as_deref()) == Some("abc")
    })
    .await;

    let mut port_zero = settings("n0", 0, &[], 1);
    port_zero.gossip_advertise_addr = addr(0);
    let refused = Membership::start(port_zero, &GossipTransport::InMemory(network.clone())).await;
    assert!(matches!(refused, Err(ClusterError::InvalidSettings { .. })));
    let mut huge_fact = settings("n0", 10, &[], 1);
    huge_fact
        .initial_facts
        .push((Fact::AdminAddr, "x".repeat(2_000)));
    let refused = Membership::start(huge_fact, &GossipTransport::InMemory(network.clone())).await;
    assert!(matches!(refused, Err(ClusterError::FactTooLarge { .. })));
    let taken = Membership::start(
        settings("n9-twin", 9, &[], 1),
        &GossipTransport::InMemory(network.clone()),
    )
    .await;
    assert!(
        matches!(taken, Err(ClusterError::Start { .. })),
        "the address is in use"
    );
    lone.shutdown().await.expect("clean shutdown");
}

#[tokio::test]
async fn three_nodes_agree_on_the_smallest_id_and_see_each_others_facts() {
    let scenario = "agree";
    let network = GossipNetwork::new();
    let nodes = three_nodes(&network).await;
    let all: Vec<&Membership> = nodes.iter().collect();

    phase(scenario, "every node sees n1, n2, n3 live and n1 as main");
    wait_all(&all, "three live members", |view| {
        view.live_ids() == ids(&["n1", "n2", "n3"]) && view.main == Some(node("n1"))
    })
    .await;
    assert!(nodes[0].is_main() && !nodes[1].is_main() && !nodes[2].is_main());

    phase(scenario, "initial facts and later facts propagate");
    nodes[2].set_fact(Fact::Digest, "d3").await.expect("set");
    nodes[1].set_ready(true).await.expect("set");
    nodes[1]
        .set_last_scan_ms(1_700_000_000_000)
        .await
        .expect("set");
    wait_all(&all, "everyone's facts", |view| {
        let n2 = view.member(&node("n2"));
        let n3 = view.member(&node("n3"));
        view.members.iter().all(|m| m.bus_addr.is_some())
            && n3.and_then(|m| m.digest.as_deref()) == Some("d3")
            && n2.is_some_and(|m| m.ready && m.last_scan_ms == Some(1_700_000_000_000))
    })
    .await;
    let view = nodes[0].view().borrow().clone();
    assert_eq!(
        view.member(&node("n3")).and_then(|m| m.bus_addr.clone()),
        Some("127.0.0.1:1003".into())
    );
    assert!(
        !view.member(&node("n1")).is_some_and(|m| m.ready),
        "n1 never said it was ready"
    );
    assert_eq!(
        view.live_peers()
            .map(|m| m.node_id.clone())
            .collect::<Vec<_>>(),
        ids(&["n2", "n3"])
    );
}

#[tokio::test]
async fn when_the_main_dies_the_next_smallest_id_takes_over_everywhere() {
    let scenario = "failover";
    let network = GossipNetwork::new();
    let mut nodes = three_nodes(&network).await;
    let all: Vec<&Membership> = nodes.iter().collect();
    wait_all(&all, "three live members", |view| {
        view.live_ids().len() == 3
    })
    .await;

    phase(scenario, "stop n1, the main");
    let stopped_at = Instant::now();
    nodes.remove(0).shutdown().await.expect("clean shutdown");
    let survivors: Vec<&Membership> = nodes.iter().collect();
    wait_all(&survivors, "n2 as main and n1 listed dead", |view| {
        view.main == Some(node("n2")) && view.member(&node("n1")).is_some_and(|m| !m.live)
    })
    .await;
    phase(
        scenario,
        &format!("n2 took over after {:?}", stopped_at.elapsed()),
    );
    assert!(nodes[0].is_main());
}

#[tokio::test]
async fn a_partition_gives_each_side_its_main_and_healing_converges() {
    let scenario = "partition";
    let network = GossipNetwork::new();
    let nodes = three_nodes(&network).await;
    let all: Vec<&Membership> = nodes.iter().collect();
    wait_all(&all, "three live members", |view| {
        view.live_ids().len() == 3
    })
    .await;

    phase(scenario, "cut n3 from n1 and n2");
    network.cut(addr(1), addr(3)).await;
    network.cut(addr(2), addr(3)).await;
    wait_until(&nodes[2], "n3 alone and its own main", |view| {
        view.live_ids() == ids(&["n3"]) && view.main == Some(node("n3"))
    })
    .await;
    wait_all(&all[..2], "n1 and n2 without n3", |view| {
        view.live_ids() == ids(&["n1", "n2"]) && view.main == Some(node("n1"))
    })
    .await;

    phase(scenario, "heal");
    network.heal(addr(1), addr(3)).await;
    network.heal(addr(2), addr(3)).await;
    wait_all(&all, "one cluster with n1 as main", |view| {
        view.live_ids() == ids(&["n1", "n2", "n3"]) && view.main == Some(node("n1"))
    })
    .await;
}

#[tokio::test]
async fn a_restarted_node_is_listed_once_under_its_new_generation() {
    let scenario = "restart";
    let network = GossipNetwork::new();
    let mut nodes = three_nodes(&network).await;
    let all: Vec<&Membership> = nodes.iter().collect();
    wait_all(&all, "three live members", |view| {
        view.live_ids().len() == 3
    })
    .await;

    phase(scenario, "restart n2 on the same address with generation 2");
    nodes.remove(1).shutdown().await.expect("clean shutdown");
    let restarted = start_in(&network, "n2", 2, &[1], 2).await;
    restarted
        .set_fact(Fact::Digest, "after-restart")
        .await
        .expect("set");
    let others: Vec<&Membership> = nodes.iter().collect();
    wait_all(&others, "n2 once, generation 2, live", |view| {
        let n2 = view.member(&node("n2"));
        view.members.len() == 3
            && n2.is_some_and(|m| {
                m.generation == 2 && m.live && m.digest.as_deref() == Some("after-restart")
            })
            && view.main == Some(node("n1"))
    })
    .await;
    let own = wait_until(&restarted, "the cluster, and not its old self", |view| {
        view.live_ids().len() == 3
    })
    .await;
    assert_eq!(own.members.len(), 3);
    assert_eq!(own.me().map(|me| me.generation), Some(2));
    assert_eq!(own.main, Some(node("n1")));
}

/// Two ports free on 127.0.0.1 right now. The advertised address must be known before chitchat
/// binds, so port 0 cannot be used directly; the tiny race with other processes is acceptable
/// in a test.
fn free_udp_ports() -> (u16, u16) {
    let first = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let second = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    (
        first.local_addr().expect("addr").port(),
        second.local_addr().expect("addr").port(),
    )
}

#[tokio::test]
async fn two_nodes_gossip_over_real_udp() {
    let scenario = "udp";
    let (port_a, port_b) = free_udp_ports();
    let a = Membership::start(settings("a", port_a, &[port_b], 1), &GossipTransport::Udp(crate::cluster::bus::BusAuth::Insecure))
        .await
        .expect("starts");
    let b = Membership::start(settings("b", port_b, &[port_a], 1), &GossipTransport::Udp(crate::cluster::bus::BusAuth::Insecure))
        .await
        .expect("starts");

    phase(scenario, "both see both, a is main, facts cross");
    b.set_fact(Fact::AdminAddr, "127.0.0.1:17128")
        .await
        .expect("set");
    wait_all(
        &[&a, &b],
        "a and b live, a main, b's admin address",
        |view| {
            view.live_ids() == ids(&["a", "b"])
                && view.main == Some(node("a"))
                && view
                    .member(&node("b"))
                    .and_then(|m| m.admin_addr.as_deref())
                    == Some("127.0.0.1:17128")
        },
    )
    .await;

    phase(scenario, "a stops; b becomes main");
    a.shutdown().await.expect("clean shutdown");
    wait_until(&b, "b alone as main", |view| {
        view.main == Some(node("b")) && view.live_ids() == ids(&["b"])
    })
    .await;
}
