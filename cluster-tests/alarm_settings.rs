//! Issue 23, alarm settings at runtime, on three real `hotrule serve` processes (loopback
//! addresses, real gossip, the signed bus, RocksDB) driven by the real CLI: `hotrule alarm
//! settings diff|push|get|delete` against a node that is not the main; the push converges on
//! every node, its rule fires to its hook, it survives a restart of the whole cluster, and a
//! delete returns every node to its boot file.
#![cfg(feature = "rocksdb")]

mod components;
mod harness;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use components::cluster_member::{Member, live_count};
use harness::wait_until;
use hotrule::api::client::with_query;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(60);

/// The loopback network of this test's members (`127.0.91.x`).
const NET: u8 = 91;

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: aset
metricsRules:
  - name: load
    exp: load.sum(['svc']).downsampling(LATEST)
";

/// The boot file of every node: a rule that never trips, and a hook the pushed settings drop.
fn boot_settings(webhook: &str) -> String {
    format!(
        "rules:
  boot_rule:
    expression: sum(aset_load > 1000000) >= 1
hooks:
  webhook:
    boot:
      is-default: true
      urls: [{webhook}/boot-fire]
"
    )
}

/// The pushed settings: another rule, another hook.
fn pushed_settings(webhook: &str) -> String {
    format!(
        "rules:
  load_rule:
    expression: sum(aset_load > 100) >= 1
    message: load of {{name}} is high
hooks:
  webhook:
    pushed:
      is-default: true
      urls: [{webhook}/pushed-fire]
"
    )
}

/// Runs the real CLI against `member`.
fn cli(member: &Member, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hotrule"))
        .args(args)
        .args(["--server", &format!("http://{}", member.id())])
        .env_remove("HOTRULE_ADMIN_TOKEN")
        .env_remove("HOTRULE_SERVER")
        .output()
        .expect("run hotrule")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn described(output: &Output) -> String {
    format!("status {:?}\nstdout:\n{}\nstderr:\n{}", output.status, stdout(output), String::from_utf8_lossy(&output.stderr))
}

async fn in_force(member: &Member) -> Value {
    member.client.get("/runtime/alarm/settings").await.ok().and_then(|r| r.json()).unwrap_or_default()
}

/// Whether every member puts in force settings from `source` with exactly `rules`.
async fn all_in_force(members: &[Member], source: &str, rules: &[&str]) -> bool {
    for member in members {
        let body = in_force(member).await;
        if body["source"] != source || body["rules"] != serde_json::json!(rules) {
            return false;
        }
    }
    true
}

async fn start_all(dir: &Path, secret: &Path, config: &Path) -> Vec<Member> {
    let mut members = Vec::new();
    for i in 1..=3 {
        members.push(Member::spawn(dir, NET, i, secret, Some(config)).await);
    }
    for member in &members {
        wait_until(WAIT, "three live members", || async { live_count(&member.client).await == 3 }).await;
    }
    members
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_pushed_to_any_node_converge_fire_survive_a_restart_and_delete_back_to_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (webhook, received) = components::webhook::start().await;
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "alarm-settings-secret").expect("secret");
    let boot = dir.path().join("alarm-settings.yml");
    std::fs::write(&boot, boot_settings(&webhook)).expect("boot settings");
    let pushed = dir.path().join("pushed.yml");
    std::fs::write(&pushed, pushed_settings(&webhook)).expect("pushed settings");
    let invalid = dir.path().join("invalid.yml");
    std::fs::write(&invalid, "rules:\n  top_rule:\n    expression: top_n(aset_load, 3, des) > 1\n").expect("invalid settings");
    let config = dir.path().join("node.yaml");
    std::fs::write(&config, format!("alarms:\n  settings_file: {}\n  check_interval: 1s\n", boot.display())).expect("config");
    let members = start_all(dir.path(), &secret, &config).await;
    assert!(all_in_force(&members, "file", &["boot_rule"]).await, "the boot file is in force: {}", in_force(&members[0]).await);
    // The main is the lexicographically-first live node: member 1. Member 3 forwards.
    let other = &members[2];

    // diff: what the push would change, against the settings in force.
    let diff = cli(other, &["alarm", "settings", "diff", &pushed.display().to_string()]);
    assert!(diff.status.success(), "{}", described(&diff));
    for line in ["+ rule load_rule: added", "- rule boot_rule: removed, its alarms dropped without a recovery", "+ hook webhook.pushed: added", "- hook webhook.boot: removed"] {
        assert!(stdout(&diff).lines().any(|l| l == line), "{line:?} in {}", described(&diff));
    }

    // An invalid push is refused with the rule's name, and nothing changes.
    let refused = cli(other, &["alarm", "settings", "push", &invalid.display().to_string()]);
    assert!(!refused.status.success(), "{}", described(&refused));
    assert!(described(&refused).contains("top_rule"), "{}", described(&refused));
    assert!(all_in_force(&members, "file", &["boot_rule"]).await);

    // The push, through a node that is not the main, converges on every node.
    let push = cli(other, &["alarm", "settings", "push", &pushed.display().to_string()]);
    assert!(push.status.success(), "{}", described(&push));
    assert!(
        stdout(&push).starts_with("stored: alarm settings stored: 1 rule(s), 1 hook(s); in force on the main (started fresh: load_rule; removed: boot_rule)"),
        "{}",
        described(&push)
    );
    wait_until(WAIT, "the pushed settings in force on every node", || async { all_in_force(&members, "runtime", &["load_rule"]).await }).await;
    let get = cli(&members[1], &["alarm", "settings", "get"]);
    assert!(get.status.success(), "{}", described(&get));
    assert_eq!(stdout(&get), pushed_settings(&webhook), "get prints the YAML in force");
    assert!(String::from_utf8_lossy(&get.stderr).contains("pushed at runtime, revision"), "{}", described(&get));

    // The pushed rule runs and fires to the pushed hook (not to the boot file's).
    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "alarm-settings")]);
    let reply = members[0].client.post(&path, RULE.as_bytes().to_vec()).await.expect("rule");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    let data = hotrule::api::client::AdminClient::new(&members[1].data.to_string(), None).expect("data client");
    let ingest = with_query("/ingest/prometheus", &[("job", "alarm-settings"), ("instance", "i")]);
    wait_until(WAIT, "load_rule fired to the pushed hook", || async {
        let now = hotrule::base::clock::wall_clock_ms();
        let _ = data.post(&ingest, format!("load{{svc=\"s\"}} 150 {now}\n").into_bytes()).await;
        !received.of_rule("pushed-fire", "load_rule").is_empty()
    })
    .await;
    let fired = received.of_rule("pushed-fire", "load_rule");
    assert_eq!(fired[0]["alarmMessage"], "load of s is high", "{fired:?}");
    assert!(received.messages("boot-fire").is_empty(), "the boot file's hook is not in force");

    // The whole cluster restarts (kill -9): each node finds the pushed settings on its own disk
    // before it is ready (the boot scan runs before the admin port serves).
    drop(members);
    let members = start_all(dir.path(), &secret, &config).await;
    for member in &members {
        let body = in_force(member).await;
        assert_eq!((body["source"].as_str(), body["rules"].clone()), (Some("runtime"), serde_json::json!(["load_rule"])), "{} after restart", member.id());
    }

    // Delete: every node returns to its boot file.
    let delete = cli(&members[1], &["alarm", "settings", "delete"]);
    assert!(delete.status.success(), "{}", described(&delete));
    assert!(stdout(&delete).starts_with("deleted:"), "{}", described(&delete));
    wait_until(WAIT, "the boot file back in force on every node", || async { all_in_force(&members, "file", &["boot_rule"]).await }).await;
    let again = cli(&members[2], &["alarm", "settings", "delete"]);
    assert!(stdout(&again).starts_with("not_found:"), "{}", described(&again));
}
