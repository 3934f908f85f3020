//! Sealed gossip on real UDP sockets (127.0.0.1): nodes with the secret form a cluster; a node
//! without it (plain chitchat, as `--insecure-bus` runs) or with another secret never joins,
//! even with the smallest id; forged and stale datagrams are dropped and counted.

use std::net::SocketAddr;
use std::time::Duration;

use chitchat::{ChitchatId, Serializable};

use super::sealed::{GossipCounterSnapshot, seal};
use super::*;
use crate::cluster::bus::BusAuth;
use crate::base::ids::NodeId;

const WAIT: Duration = Duration::from_secs(15);
const SECRET: &str = "gossip-secret";

fn node(id: &str) -> NodeId {
    NodeId(id.into())
}

fn free_udp_ports<const N: usize>() -> [u16; N] {
    // The advertised address must be known before chitchat binds; keep all sockets until every
    // port is chosen so they differ (the race with other processes is acceptable in a test).
    let sockets: Vec<_> = (0..N)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").expect("bind"))
        .collect();
    std::array::from_fn(|i| sockets[i].local_addr().expect("addr").port())
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

async fn start(id: &str, port: u16, seeds: &[u16], auth: BusAuth) -> Membership {
    let mut settings = MembershipSettings::for_test(node(id), addr(port));
    settings.generation = 1;
    settings.seeds = seeds.iter().map(|seed| addr(*seed).to_string()).collect();
    Membership::start(settings, &GossipTransport::Udp(auth))
        .await
        .expect("membership starts")
}

async fn wait_view(membership: &Membership, what: &str, condition: impl Fn(&ClusterView) -> bool) {
    let mut view_rx = membership.view();
    let waited = tokio::time::timeout(WAIT, view_rx.wait_for(|view| condition(view))).await;
    assert!(
        matches!(waited, Ok(Ok(_))),
        "{}: no view with {what} after {WAIT:?}; last: {:?}",
        membership.self_id(),
        *membership.view().borrow()
    );
}

/// Waits (polling, bounded) until `membership`'s gossip counters satisfy `condition`.
async fn wait_counters(
    membership: &Membership,
    what: &str,
    condition: impl Fn(&GossipCounterSnapshot) -> bool,
) -> GossipCounterSnapshot {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let counters = membership.gossip_counters();
        if condition(&counters) {
            return counters;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: counters never showed {what}: {counters:?}",
            membership.self_id()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn live(names: &[&str]) -> Vec<NodeId> {
    names.iter().map(|name| node(name)).collect()
}

#[tokio::test]
async fn nodes_without_the_secret_never_join_or_become_main() {
    let [p1, p2, rogue_port, wrong_port] = free_udp_ports::<4>();
    // n1 also lists the strangers' addresses as seeds, so it gossips to them: the other way in.
    let n1 = start("n1", p1, &[p2, rogue_port, wrong_port], BusAuth::secret(SECRET)).await;
    let n2 = start("n2", p2, &[p1], BusAuth::secret(SECRET)).await;
    for member in [&n1, &n2] {
        wait_view(member, "n1 and n2 live, n1 main", |view| {
            view.live_ids() == live(&["n1", "n2"]) && view.main == Some(node("n1"))
        })
        .await;
    }
    let before = n1.gossip_counters();
    assert!(before.authenticated && before.accepted > 0, "{before:?}");

    // Smaller ids than n1: either would be main at once if it were let in.
    let rogue = start("0-rogue", rogue_port, &[p1, p2], BusAuth::Insecure).await;
    let wrong = start("0-wrong", wrong_port, &[p1, p2], BusAuth::secret("not-it")).await;
    for member in [&n1, &n2] {
        wait_counters(member, "the strangers' datagrams dropped", |c| {
            c.malformed >= before.malformed + 3 && c.bad_mac >= 3
        })
        .await;
    }
    // Their datagrams were dropped before chitchat saw them, so no view can hold them.
    for member in [&n1, &n2] {
        let view = member.view().borrow().clone();
        assert_eq!(view.main, Some(node("n1")));
        assert_eq!(
            view.members
                .iter()
                .map(|m| m.node_id.clone())
                .collect::<Vec<_>>(),
            live(&["n1", "n2"])
        );
    }
    for stranger in [&rogue, &wrong] {
        let view = stranger.view().borrow().clone();
        assert_eq!(
            view.live_ids(),
            vec![stranger.self_id().clone()],
            "{view:?}"
        );
    }
    // The other way: n1's sealed datagrams reach the strangers and are not taken either (the
    // plain chitchat node drops them as invalid payloads; the other secret counts bad MACs).
    wait_counters(&wrong, "n1's datagrams refused", |c| c.bad_mac >= 2 && c.accepted == 0).await;
    let plain = rogue.gossip_counters();
    assert!(!plain.authenticated && plain.accepted == 0, "{plain:?}");
    for stranger in [&rogue, &wrong] {
        assert_eq!(stranger.view().borrow().live_ids(), vec![stranger.self_id().clone()]);
    }
    for membership in [rogue, wrong, n1, n2] {
        membership.shutdown().await.expect("stops");
    }
}

/// The 67-byte attack: a plain chitchat SYN whose digest claims n2's heartbeat is 2^63.
fn forged_heartbeat_syn(n2: &ChitchatId, cluster_id: &str) -> Vec<u8> {
    let mut datagram = 45_139u16.to_le_bytes().to_vec();
    datagram.push(0); // protocol V0
    datagram.push(0); // SYN
    1u16.serialize(&mut datagram);
    n2.serialize(&mut datagram);
    (1u64 << 63).serialize(&mut datagram); // the heartbeat
    0u64.serialize(&mut datagram);
    0u64.serialize(&mut datagram);
    cluster_id.to_string().serialize(&mut datagram);
    datagram
}

#[tokio::test]
async fn forged_and_stale_datagrams_are_dropped_and_counted() {
    let [p1, p2] = free_udp_ports::<2>();
    let n1 = start("n1", p1, &[p2], BusAuth::secret(SECRET)).await;
    let n2 = start("n2", p2, &[p1], BusAuth::secret(SECRET)).await;
    wait_view(&n1, "n2 live", |view| {
        view.live_ids() == live(&["n1", "n2"])
    })
    .await;
    let before = n1.gossip_counters();

    let attacker = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let n2_id = ChitchatId::new("n2".to_string(), 1, addr(p2));
    let forged = forged_heartbeat_syn(&n2_id, &membership::default_cluster_id());
    let now = crate::base::clock::now_ms();
    let skew = crate::cluster::bus::auth::MAX_CLOCK_SKEW.as_millis() as u64;
    let datagrams = [
        forged.clone(),
        b"junk".to_vec(),
        seal(b"guessed", now, &forged),
        seal(SECRET.as_bytes(), now - skew - 1_000, &forged),
    ];
    for datagram in &datagrams {
        attacker.send_to(datagram, addr(p1)).await.expect("sent");
    }
    let after = wait_counters(&n1, "two malformed, one bad MAC, one stale", |c| {
        c.malformed >= before.malformed + 2 && c.bad_mac > before.bad_mac && c.stale > before.stale
    })
    .await;
    assert_eq!(after.undecodable, before.undecodable);

    // n2 stays live through several seconds of gossip (had the forged heartbeat been believed,
    // it would be dead within about a second), and a fact it sets now still reaches n1.
    let accepted = n1.gossip_counters().accepted;
    wait_counters(&n1, "150 more genuine datagrams", |c| {
        c.accepted >= accepted + 150
    })
    .await;
    assert_eq!(n1.view().borrow().live_ids(), live(&["n1", "n2"]));
    n2.set_fact(Fact::AdminAddr, "127.0.0.1:1")
        .await
        .expect("set");
    wait_view(&n1, "n2's new fact, n2 live", |view| {
        view.live_ids() == live(&["n1", "n2"])
            && view
                .member(&node("n2"))
                .and_then(|m| m.admin_addr.as_deref())
                == Some("127.0.0.1:1")
    })
    .await;
    for membership in [n1, n2] {
        membership.shutdown().await.expect("stops");
    }
}

#[tokio::test]
async fn a_member_relaying_an_absurd_heartbeat_is_not_believed() {
    let [p1, p2] = free_udp_ports::<2>();
    let n1 = start("n1", p1, &[p2], BusAuth::secret(SECRET)).await;
    let n2 = start("n2", p2, &[p1], BusAuth::secret(SECRET)).await;
    wait_view(&n1, "n2 live", |view| {
        view.live_ids() == live(&["n1", "n2"])
    })
    .await;
    let before = n1.gossip_counters();

    // A buggy member (it has the secret) claims n2's heartbeat is 2^63.
    let member = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let n2_id = ChitchatId::new("n2".to_string(), 1, addr(p2));
    let forged = forged_heartbeat_syn(&n2_id, &membership::default_cluster_id());
    for _ in 0..2 {
        let sealed = seal(SECRET.as_bytes(), crate::base::clock::now_ms(), &forged);
        member.send_to(&sealed, addr(p1)).await.expect("sent");
    }
    wait_counters(&n1, "both datagrams dropped as heartbeat jumps", |c| {
        c.heartbeat_jumps >= before.heartbeat_jumps + 2
    })
    .await;

    // Had n1 believed it, n2's real heartbeats would lag forever and n2 would go dead within
    // about a second (failure detection at the 100 ms test interval). Wait for 150 more genuine
    // datagrams (several seconds of gossip); n2 is still live, and a fact it sets arrives.
    let accepted = n1.gossip_counters().accepted;
    wait_counters(&n1, "150 more genuine datagrams", |c| {
        c.accepted >= accepted + 150
    })
    .await;
    assert_eq!(n1.view().borrow().live_ids(), live(&["n1", "n2"]));
    n2.set_fact(Fact::AdminAddr, "127.0.0.1:2")
        .await
        .expect("set");
    wait_view(&n1, "n2's new fact, n2 live", |view| {
        view.live_ids() == live(&["n1", "n2"])
            && view
                .member(&node("n2"))
                .and_then(|m| m.admin_addr.as_deref())
                == Some("127.0.0.1:2")
    })
    .await;
    for membership in [n1, n2] {
        membership.shutdown().await.expect("stops");
    }
}
