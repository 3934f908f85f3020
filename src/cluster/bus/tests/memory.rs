//! The in-memory twin: real encoding, routing by node id, cuts, isolation, delays,
//! deterministic drops and the shared drop switch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::super::messages::tests as samples;
use super::*;
use crate::base::ids::Revision;

fn mem_cluster(ids: &[&str]) -> (MemNetwork, Vec<Arc<ScriptedHandler>>) {
    let network = MemNetwork::new();
    let handlers = ids
        .iter()
        .map(|id| {
            let handler = ScriptedHandler::new(id);
            network.register(node(id), handler.clone());
            handler
        })
        .collect();
    (network, handlers)
}

#[tokio::test]
async fn mem_network_encodes_every_message_and_routes_by_node_id() {
    let (network, handlers) = mem_cluster(&["a", "b"]);
    let client = network.client(node("a"));
    for request in samples::every_request() {
        let expected = handlers[1].answer(&request);
        assert_eq!(
            client
                .call(&node("b"), "ignored", request, CALL_TIMEOUT)
                .await,
            Ok(expected)
        );
    }
    assert_eq!(handlers[1].seen(), samples::every_request());
    assert_eq!(network.delivered(&node("a"), &node("b"), "forward"), 7);
    let answer = client
        .call(&node("nobody"), "", digest(), CALL_TIMEOUT)
        .await;
    assert!(
        matches!(answer, Err(BusError::Unreachable { .. })),
        "{answer:?}"
    );
}

/// Whether `client` gets an answer from `to`, checked against [`MemNetwork::can_reach`].
async fn reaches(network: &MemNetwork, client: &MemBusClient, to: NodeId) -> bool {
    let expected = network.can_reach(client.node(), &to);
    let answer = client.call(&to, "", digest(), CALL_TIMEOUT).await;
    assert_eq!(
        answer.is_ok(),
        expected,
        "can_reach agrees for {} -> {to}",
        client.node()
    );
    match answer {
        Ok(_) => true,
        Err(BusError::Unreachable { .. }) => false,
        Err(other) => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn mem_network_cuts_isolates_and_heals_links_both_ways() {
    let (network, _handlers) = mem_cluster(&["a", "b", "c"]);
    let (a, b, c) = (
        network.client(node("a")),
        network.client(node("b")),
        network.client(node("c")),
    );
    network.cut(&node("a"), &node("b"));
    let started = Instant::now();
    assert!(!reaches(&network, &a, node("b")).await && !reaches(&network, &b, node("a")).await);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a cut link fails at once, not after the timeout"
    );
    assert!(reaches(&network, &a, node("c")).await && reaches(&network, &c, node("b")).await);
    network.heal(&node("b"), &node("a"));
    assert!(reaches(&network, &a, node("b")).await && reaches(&network, &b, node("a")).await);

    network.isolate(&node("c"));
    assert!(
        !reaches(&network, &a, node("c")).await
            && !reaches(&network, &c, node("b")).await
            && reaches(&network, &a, node("b")).await
    );
    assert!(
        reaches(&network, &c, node("c")).await,
        "a node can still call itself"
    );
    network.rejoin(&node("c"));
    assert!(reaches(&network, &a, node("c")).await && reaches(&network, &c, node("b")).await);

    network.cut(&node("a"), &node("c"));
    network.isolate(&node("b"));
    network.heal_all();
    assert!(reaches(&network, &a, node("c")).await && reaches(&network, &b, node("a")).await);
    network.unregister(&node("b"));
    assert!(
        !reaches(&network, &a, node("b")).await,
        "a stopped node is unreachable"
    );
}

#[tokio::test]
async fn mem_network_delays_each_way_and_times_out_slow_links() {
    let (network, _handlers) = mem_cluster(&["a", "b"]);
    let client = network.client(node("a"));
    network.set_delay(&node("b"), &node("a"), Duration::from_millis(100));
    let started = Instant::now();
    assert!(
        client
            .call(&node("b"), "", digest(), CALL_TIMEOUT)
            .await
            .is_ok()
    );
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    let answer = client
        .call(&node("b"), "", digest(), Duration::from_millis(150))
        .await;
    assert_eq!(
        answer,
        Err(BusError::Timeout {
            to: node("b"),
            after: Duration::from_millis(150)
        })
    );
}

#[tokio::test]
async fn mem_network_drops_a_deterministic_fraction_of_requests_or_answers() {
    let (network, handlers) = mem_cluster(&["a", "b"]);
    let client = network.client(node("a"));
    let short = Duration::from_millis(30);
    network.drop_requests(&node("a"), &node("b"), 0.5);
    let mut outcomes = Vec::new();
    for _ in 0..6 {
        outcomes.push(client.call(&node("b"), "", digest(), short).await.is_ok());
    }
    assert_eq!(outcomes, [true, false, true, false, true, false]);
    assert_eq!(
        handlers[1].seen().len(),
        3,
        "dropped requests never reach the handler"
    );

    network.drop_requests(&node("a"), &node("b"), 0.0);
    network.drop_responses(&node("a"), &node("b"), 1.0);
    let answer = client.call(&node("b"), "", suspend(), short).await;
    assert!(
        matches!(answer, Err(BusError::Timeout { .. })),
        "{answer:?}"
    );
    assert_eq!(
        network.delivered(&node("a"), &node("b"), "suspend"),
        1,
        "the handler ran; only the answer was lost"
    );
}

#[tokio::test]
async fn mem_clients_honour_a_shared_drop_switch() {
    let (network, handlers) = mem_cluster(&["a", "b"]);
    let switch = DropSwitch::new();
    let client = network.client(node("a")).with_drop_switch(switch.clone());
    switch.drop_calls_to(node("b"));
    let answer = client.call(&node("b"), "", suspend(), CALL_TIMEOUT).await;
    assert_eq!(
        answer,
        Err(BusError::Dropped {
            to: node("b"),
            request: "suspend"
        })
    );
    let held = BusRequest::ConfirmHeld {
        key: key(),
        revision: Revision::zero(),
    };
    assert_eq!(
        client.call(&node("b"), "", held, CALL_TIMEOUT).await,
        Ok(BusResponse::Held { held: false })
    );
    switch.restore_all();
    assert!(
        client
            .call(&node("b"), "", suspend(), CALL_TIMEOUT)
            .await
            .is_ok()
    );
    assert_eq!(handlers[1].seen().len(), 2);
}

#[tokio::test]
async fn the_counted_client_counts_calls_and_errors_by_message() {
    let (network, _handlers) = mem_cluster(&["a", "b"]);
    let telemetry = Arc::new(crate::base::self_metrics::SelfMetrics::new());
    let client = CountedBusClient::new(Arc::new(network.client(node("a"))), telemetry.clone());
    assert!(client.call(&node("b"), "", digest(), CALL_TIMEOUT).await.is_ok());
    assert!(client.call(&node("b"), "", digest(), CALL_TIMEOUT).await.is_ok());
    assert!(client.call(&node("nobody"), "", digest(), CALL_TIMEOUT).await.is_err());
    assert!(client.call(&node("nobody"), "", suspend(), CALL_TIMEOUT).await.is_err());
    let count = |family: &crate::base::self_metrics::CounterFamily, message: &str| {
        crate::base::self_metrics::SelfMetrics::counter_value(family, &crate::base::self_metrics::labels([("message", message)]))
    };
    assert_eq!(count(&telemetry.bus_calls, "digest"), 3);
    assert_eq!(count(&telemetry.bus_errors, "digest"), 1);
    assert_eq!(count(&telemetry.bus_calls, "suspend"), 1);
    assert_eq!(count(&telemetry.bus_errors, "suspend"), 1);
}
