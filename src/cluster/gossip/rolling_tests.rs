//! Roll reports: the value codec (size bound, lenient reading of peer values) and a round trip
//! through two memberships on the in-memory gossip twin.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::cluster::gossip::{Fact, GossipNetwork, GossipTransport, MembershipSettings};
use crate::base::ids::{Catalog, RuleName};

const WAIT: Duration = Duration::from_secs(15);

fn key(name: &str) -> RuleKey {
    RuleKey::new(Catalog::OtelRules, RuleName::parse(name).expect("valid name"))
}

fn report(content: &str) -> HealthReport {
    HealthReport {
        running_hash: Some(ContentHash::of(content.as_bytes())),
        running_since_ms: 1_700_000_000_000,
        reported_ms: 1_700_000_031_000,
        apply_error: None,
        dispatch_running: true,
        eval_errors_rise: 0,
        samples_in: 1200,
        values_out: 300,
    }
}

#[test]
fn roll_keys_name_the_file() {
    assert_eq!(roll_health_key(&key("k8s/node")), "roll/otel-rules/k8s/node");
    assert!(roll_health_key(&key("vm")).starts_with(ROLL_KEY_PREFIX));
}

#[test]
fn a_report_round_trips_small() {
    let typical = report("rolling");
    let value = encode_report(&key("vm"), &typical).expect("encodes");
    assert!(value.len() < 100, "a typical report is small: {} chars", value.len());
    assert_eq!(decode_report(&value), Some(typical));

    let nothing = HealthReport { running_hash: None, apply_error: Some("parse error at 3:7".into()), ..report("x") };
    assert_eq!(decode_report(&encode_report(&key("vm"), &nothing).expect("encodes")), Some(nothing));
}

#[test]
fn the_worst_case_stays_under_the_bound_and_cuts_the_apply_error() {
    let worst = HealthReport {
        running_hash: Some(ContentHash::of(b"x")),
        running_since_ms: 0,
        reported_ms: u64::MAX,
        apply_error: Some("é".repeat(500)),
        dispatch_running: true,
        eval_errors_rise: u64::MAX,
        samples_in: u64::MAX,
        values_out: u64::MAX,
    };
    let value = encode_report(&key("vm"), &worst).expect("encodes");
    assert!(value.len() <= MAX_ROLL_REPORT_BYTES, "{} chars", value.len());
    let read = decode_report(&value).expect("decodes");
    let error = read.apply_error.clone().expect("an error");
    assert!(error.len() <= MAX_APPLY_ERROR_BYTES && error.ends_with('…'), "{error}");
    assert_eq!(read, HealthReport { apply_error: Some(error), ..worst });
}

#[test]
fn a_hash_that_is_not_sha256_hex_is_refused() {
    let odd = HealthReport { running_hash: Some(ContentHash("abc".into())), ..report("x") };
    assert_eq!(encode_report(&key("vm"), &odd), Err(ClusterError::RollReportHash { key: "otel-rules/vm".into() }));
}

#[test]
fn peer_values_that_do_not_decode_read_as_no_report() {
    let value = encode_report(&key("vm"), &report("x")).expect("encodes");
    assert_eq!(decode_report(""), None);
    assert_eq!(decode_report("not base64!"), None);
    assert_eq!(decode_report(&value[..value.len() - 4]), None, "truncated");
    assert_eq!(decode_report(&format!("{value}AAAA")), None, "trailing bytes");
    let mut bytes = base64::decode(&value).expect("base64");
    bytes[0] = 2;
    assert_eq!(decode_report(&base64::encode(&bytes)), None, "another format version");
    assert_eq!(decode_report(&"A".repeat(MAX_ROLL_REPORT_BYTES + 4)), None);
}

fn settings(id: &str, port: u16, seeds: &[u16]) -> MembershipSettings {
    let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let mut settings = MembershipSettings::for_test(NodeId(id.into()), addr(port));
    settings.generation = 1;
    settings.seeds = seeds.iter().map(|seed| addr(*seed).to_string()).collect();
    settings.initial_facts = vec![(Fact::BusAddr, format!("127.0.0.1:{}", port + 1000))];
    settings
}

/// Polls `read` until `condition` holds, bounded by [`WAIT`]; gossip has no per-key watch.
async fn wait_for<T: std::fmt::Debug>(
    what: &str,
    mut read: impl AsyncFnMut() -> T,
    condition: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = read().await;
        if condition(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "no {what} within {WAIT:?}; last: {value:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn of<'a>(health: &'a [RollHealth], node: &str) -> Option<&'a RollHealth> {
    health.iter().find(|h| h.node.0 == node)
}

#[tokio::test]
async fn reports_travel_through_gossip_and_disappear_when_the_roll_ends() {
    let network = GossipNetwork::new();
    let start = |id, port, seeds: &'static [u16]| {
        let network = network.clone();
        async move {
            Membership::start(settings(id, port, seeds), &GossipTransport::InMemory(network)).await.expect("starts")
        }
    };
    let a = start("a", 31, &[32]).await;
    let b = start("b", 32, &[31]).await;
    let file = key("vm");
    let other = key("k8s");

    eprintln!("[roll-health] a publishes reports for two files; b reads them");
    let reports = BTreeMap::from([(file.clone(), report("rolling")), (other.clone(), report("other"))]);
    a.publish_roll_health(&reports).await.expect("published");
    let seen = wait_for(
        "a's report at b",
        async || b.roll_health(&file).await,
        |health| of(health, "a").is_some_and(|h| h.live && h.report.is_some()),
    )
    .await;
    assert_eq!(of(&seen, "a").and_then(|h| h.report.clone()), Some(report("rolling")));
    assert_eq!(of(&seen, "b").map(|h| (h.live, h.report.is_none())), Some((true, true)), "b itself, no report");
    assert_eq!(of(&a.roll_health(&other).await, "a").and_then(|h| h.report.clone()), Some(report("other")));

    eprintln!("[roll-health] the roll of one file ends: a stops publishing it");
    a.publish_roll_health(&BTreeMap::from([(other.clone(), report("other"))])).await.expect("published");
    wait_for(
        "a's report removed at b",
        async || b.roll_health(&file).await,
        |health| of(health, "a").is_some_and(|h| h.live && h.report.is_none()),
    )
    .await;
    let still = b.roll_health(&other).await;
    assert_eq!(of(&still, "a").and_then(|h| h.report.clone()), Some(report("other")), "the other roll stays");

    eprintln!("[roll-health] every value a holds stays under the bound");
    let values = a.member_values(&roll_health_key(&other)).await;
    assert!(!values.is_empty() && values.values().all(|v| v.len() <= MAX_ROLL_REPORT_BYTES));

    a.shutdown().await.expect("a stops");
    b.shutdown().await.expect("b stops");
}
