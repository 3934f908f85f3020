//! Issue 23, exactly once in a cluster, on three real `hotrule serve` processes (loopback
//! addresses, real gossip, the signed bus, RocksDB): an alarm rule fires once, from the entity's
//! owner; the owner is killed -9 while the alarm is firing; a survivor becomes the owner and
//! resumes the alarm from the state the old owner handed it: no second FIRING, and one
//! recovery, with the first fire's uuid, once the value falls back.
#![cfg(feature = "rocksdb")]

mod components;
mod harness;

use std::time::Duration;

use components::cluster_member::{Member, live_count};
use harness::wait_until;
use hotrule::api::client::{AdminClient, with_query};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: ac
metricsRules:
  - name: load
    exp: load.sum(['svc']).downsampling(LATEST)
";

/// A window of `period` minutes; silence `silence` checks (seconds, at one check a second): the
/// kill, the failover and the fall back happen inside it, so a repeat fire cannot hide a
/// duplicate.
fn settings(webhook: &str, period: u32, silence: u32) -> String {
    format!(
        "rules:
  load_rule:
    expression: sum(ac_load > 100) >= 1
    period: {period}
    silence-period: {silence}
hooks:
  webhook:
    test:
      is-default: true
      urls: [{webhook}/fire]
      recovery-urls: [{webhook}/recover]
"
    )
}

async fn push(member: &Member, value: i64, at_ms: i64) {
    let client = AdminClient::new(&member.data.to_string(), None).expect("client");
    let path = with_query("/ingest/prometheus", &[("job", "alarms"), ("instance", "i")]);
    let reply = client.post(&path, format!("load{{svc=\"s\"}} {value} {at_ms}\n").into_bytes()).await.expect("push");
    assert_eq!(reply.status.as_u16(), 204, "{}", reply.text());
}

/// The member whose alarm rules hold the entity `s` (its owner), if exactly one does.
async fn owner(members: &[Option<Member>]) -> Option<usize> {
    let mut holders = Vec::new();
    for (k, member) in members.iter().enumerate() {
        let Some(member) = member else { continue };
        let rules: Value = member.client.get("/runtime/alarm/rules").await.ok().and_then(|r| r.json()).unwrap_or_default();
        if rules["rules"][0]["entities"].as_array().is_some_and(|e| !e.is_empty()) {
            holders.push(k);
        }
    }
    (holders.len() == 1).then(|| holders[0])
}

/// A three-member cluster on `127.0.<net>.x` whose nodes check `settings` (a webhook to
/// `webhook`, a window of `period` minutes, silence `silence` checks) every second, running the
/// MAL rule: its members and the test's directory (kept for restarts).
async fn start_cluster(net: u8, webhook: &str, period: u32, silence: u32) -> (Vec<Option<Member>>, tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("alarms-cluster-secret-{net}")).expect("secret");
    let alarm_settings = dir.path().join("alarm-settings.yml");
    std::fs::write(&alarm_settings, settings(webhook, period, silence)).expect("settings");
    let config = dir.path().join("node.yaml");
    std::fs::write(&config, format!("alarms:\n  settings_file: {}\n  check_interval: 1s\n", alarm_settings.display())).expect("config");
    let mut members = Vec::new();
    for i in 1..=3 {
        members.push(Some(Member::spawn(dir.path(), net, i, &secret, Some(&config)).await));
    }
    for member in members.iter().flatten() {
        wait_until(WAIT, "three live members", || async { live_count(&member.client).await == 3 }).await;
    }
    let first = members[0].as_ref().expect("member");
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "alarms")]);
    let reply = first.client.post(&path, RULE.as_bytes().to_vec()).await.expect("rule");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    (members, dir, secret, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_firing_owner_sends_no_second_fire_and_one_recovery() {
    let (webhook, received) = components::webhook::start().await;
    let (mut members, _dir, _, _) = start_cluster(89, &webhook, 1, 10).await;
    let first = members[0].as_ref().expect("member");

    // A minute with room for the whole scenario (samples at seconds 1 to 4 stay in the past).
    wait_until(Duration::from_secs(70), "seconds 5 to 25 of a minute", || async {
        (5_000..25_000).contains(&(hotrule::base::clock::wall_clock_ms() % 60_000))
    })
    .await;
    let minute = hotrule::base::clock::wall_clock_ms() / 60_000 * 60_000;
    wait_until(WAIT, "the rule runs on every member", || async {
        let mut running = 0;
        for member in members.iter().flatten() {
            let list = member.client.get("/runtime/rule/list").await.ok().and_then(|r| r.json()).unwrap_or_default();
            running += usize::from(list["rules"].as_array().is_some_and(|r| r.iter().any(|r| r["name"] == "alarms" && r["localState"] == "RUNNING")));
        }
        running == 3
    })
    .await;
    push(first, 150, minute + 1_000).await;
    wait_until(WAIT, "load_rule fired", || async { !received.of_rule("fire", "load_rule").is_empty() }).await;
    let fired = received.of_rule("fire", "load_rule");
    assert_eq!(fired.len(), 1, "one fire, from one node: {fired:?}");
    let uuid = fired[0]["uuid"].clone();
    wait_until(WAIT, "one member holds the entity", || async { owner(&members).await.is_some() }).await;
    let owner_k = owner(&members).await.expect("owner");
    eprintln!("[alarms-cluster] member {owner_k} fired {uuid}; kill -9");
    members[owner_k] = None;

    let survivors: Vec<usize> = (0..3).filter(|k| *k != owner_k).collect();
    for &k in &survivors {
        let member = members[k].as_ref().expect("survivor");
        wait_until(WAIT, "the survivors hold the owner dead", || async { live_count(&member.client).await == 2 }).await;
    }
    // Still above on a survivor (the new owner takes the state: silenced, no fire), then below.
    let survivor = members[survivors[0]].as_ref().expect("survivor");
    push(survivor, 140, minute + 2_000).await;
    wait_until(WAIT, "a survivor resumed the entity", || async { owner(&members).await.is_some() }).await;
    push(survivor, 10, minute + 4_000).await;
    wait_until(WAIT, "load_rule recovered", || async { !received.of_rule("recover", "load_rule").is_empty() }).await;
    let recovered = received.of_rule("recover", "load_rule");
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0]["uuid"], uuid, "the recovery names the first fire");
    assert_eq!(received.of_rule("fire", "load_rule").len(), 1, "no second FIRING: {:?}", received.of_rule("fire", "load_rule"));
}

/// The owner is killed while its alarm fires, a survivor resumes it, and the old owner comes
/// back (same data dir) and owns the entity again: the survivor hands the state back, so there
/// is still one FIRING, and one recovery with its uuid. The value is fed every 200 ms with the
/// current time, so the scenario may cross minute boundaries. The window is two minutes: a check
/// a second can run in the first instant of a minute, before any of the minute's samples has
/// reached the owner, and a one-minute window would then be empty, so the entity would expire
/// with its state and no recovery, as SkyWalking's `RunningRule` expires empty windows. A minute
/// at 150 then stays in the window up to a minute after the value falls, so the silence outlasts
/// that: a check that still matches after the silence would fire again, as it should.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_that_returns_resumes_the_alarm_from_the_node_that_held_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};
    const NET: u8 = 92;
    let (webhook, received) = components::webhook::start().await;
    // Silence 90 checks (90 s): the kill, the failover, the return and a minute at 150 leaving
    // the window fit inside it, so a repeat fire cannot hide a duplicate.
    let (mut members, dir, secret, config) = start_cluster(NET, &webhook, 2, 90).await;

    // The feeder: the current value, now, to whichever member answers (bounded: it stops with
    // the test, at most one post per 200 ms).
    let value = Arc::new(AtomicI64::new(150));
    let targets: Vec<std::net::SocketAddr> = members.iter().flatten().map(|m| m.data).collect();
    let feeder = {
        let value = value.clone();
        tokio::spawn(async move {
            for round in 0..3_000usize {
                let target = targets[round % targets.len()];
                if let Ok(client) = hotrule::api::client::AdminClient::new(&target.to_string(), None) {
                    let client = client.with_timeout(Duration::from_millis(500));
                    let path = with_query("/ingest/prometheus", &[("job", "alarms"), ("instance", "i")]);
                    let now = hotrule::base::clock::wall_clock_ms();
                    let _ = client.post(&path, format!("load{{svc=\"s\"}} {} {now}\n", value.load(Ordering::SeqCst)).into_bytes()).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    wait_until(WAIT, "load_rule fired", || async { !received.of_rule("fire", "load_rule").is_empty() }).await;
    let uuid = received.of_rule("fire", "load_rule")[0]["uuid"].clone();
    wait_until(WAIT, "one member holds the entity", || async { owner(&members).await.is_some() }).await;
    let owner_k = owner(&members).await.expect("owner");
    eprintln!("[alarms-return] member {owner_k} fired {uuid}; kill -9");
    members[owner_k] = None;
    wait_until(WAIT, "a survivor resumed the entity", || async { owner(&members).await.is_some_and(|k| k != owner_k) }).await;

    // The old owner returns and takes the entity back.
    members[owner_k] = Some(Member::spawn(dir.path(), NET, owner_k + 1, &secret, Some(&config)).await);
    for member in members.iter().flatten() {
        wait_until(WAIT, "three live members again", || async { live_count(&member.client).await == 3 }).await;
    }
    wait_until(WAIT, "the returned member holds the entity", || async { owner(&members).await == Some(owner_k) }).await;
    assert_eq!(received.of_rule("fire", "load_rule").len(), 1, "no second FIRING: {:?}", received.of_rule("fire", "load_rule"));

    value.store(10, Ordering::SeqCst);
    // The silence ends 90 checks after the fire.
    wait_until(Duration::from_secs(150), "load_rule recovered", || async { !received.of_rule("recover", "load_rule").is_empty() }).await;
    feeder.abort();
    let recovered = received.of_rule("recover", "load_rule");
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0]["uuid"], uuid, "the recovery names the first fire");
    assert_eq!(received.of_rule("fire", "load_rule").len(), 1, "no second FIRING: {:?}", received.of_rule("fire", "load_rule"));
}
