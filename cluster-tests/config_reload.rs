//! Layered configuration against real processes: a watched file edit changes a live setting
//! (visible in `GET /config` and in behaviour), an invalid edit is rejected while the node keeps
//! serving, SIGHUP reloads, and `config validate` / `config print` report what they should.

mod harness;

use std::process::Command;
use std::time::Duration;

use harness::{ProcessNode, wait_until};
use hotrule::api::client::AdminClient;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hotrule"))
}

async fn config_view(client: &AdminClient) -> serde_json::Value {
    client.get("/config").await.expect("GET /config").json().expect("config json")
}

async fn last_scan(client: &AdminClient) -> u64 {
    let list = client.get("/runtime/rule/list").await.expect("list").json().expect("json");
    list["lastScanTime"].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn editing_the_watched_file_changes_live_settings_and_bad_edits_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("node.yaml");
    std::fs::write(&file, "rules:\n  scan_interval: 1h\nlog:\n  level: info\n").expect("write");
    let uri = format!("file:{}", file.display());
    let node = ProcessNode::spawn(&dir.path().join("n"), &["--config", &uri], &[]).await;
    let view = config_view(&node.client).await;
    assert_eq!(view["config"]["rules"]["scan_interval"], "1h");
    assert_eq!(view["origins"]["rules.scan_interval"], uri.as_str());

    // Live: the scan interval drops to 1 s, visible in /config and in how often scans run.
    std::fs::write(&file, "rules:\n  scan_interval: 1s\nlog:\n  level: debug\n").expect("write");
    wait_until(Duration::from_secs(15), "the edit reaches GET /config", || async {
        config_view(&node.client).await["config"]["rules"]["scan_interval"] == "1s"
    })
    .await;
    let first = last_scan(&node.client).await;
    wait_until(Duration::from_secs(10), "scans now run every second", || async { last_scan(&node.client).await > first }).await;

    // Restart-only: a new lock timeout is recorded as pending, not applied. (The harness sets
    // --admin-listen as a flag, and flags override files, so the listen address cannot move.)
    std::fs::write(&file, "rules:\n  scan_interval: 1s\n  lock_timeout: 5s\nadmin:\n  listen: 127.0.0.1:1\n").expect("write");
    wait_until(Duration::from_secs(15), "pending restart listed", || async {
        config_view(&node.client).await["pendingRestart"].as_array().is_some_and(|p| p.iter().any(|k| k == "rules.lock_timeout"))
    })
    .await;
    let view = config_view(&node.client).await;
    assert_eq!(view["config"]["admin"]["listen"], node.addr.to_string(), "the flag still wins over the file");

    // Invalid: rejected, counted, and the node keeps serving on the previous config.
    std::fs::write(&file, "rules:\n  scan_interval: 0s\n  bogus_key: 1\n").expect("write");
    wait_until(Duration::from_secs(15), "the bad edit is rejected", || async {
        config_view(&node.client).await["reloadFailures"].as_u64() == Some(1)
    })
    .await;
    let view = config_view(&node.client).await;
    assert_eq!(view["config"]["rules"]["scan_interval"], "1s", "previous config kept");
    assert!(view["lastReloadError"].as_str().is_some_and(|e| e.contains("bogus_key")), "{view}");
    assert!(node.client.get("/readyz").await.expect("readyz").status.is_success());
    assert!(node.log_text().contains("configuration reload rejected"), "ERROR logged");

    // Live token: set it in the file; anonymous requests are refused, the token works.
    std::fs::write(&file, "rules:\n  scan_interval: 1s\nadmin:\n  token: from-file\n").expect("write");
    wait_until(Duration::from_secs(15), "the token applies", || async {
        node.client.get("/runtime/rule/list").await.is_ok_and(|r| r.status.as_u16() == 401)
    })
    .await;
    let with_token = AdminClient::new(&node.addr.to_string(), Some("from-file".into())).expect("client");
    let view = config_view(&with_token).await;
    assert_eq!(view["config"]["admin"]["token"], "[REDACTED]");
    assert!(!view.to_string().contains("from-file"), "secret never shown");
}

#[cfg(unix)]
#[tokio::test]
async fn sighup_reloads_when_watching_is_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("node.yaml");
    std::fs::write(&file, "config:\n  watch: false\nrules:\n  self_heal_threshold: 60s\n").expect("write");
    let uri = format!("file:{}", file.display());
    let node = ProcessNode::spawn(&dir.path().join("n"), &["--config", &uri], &[]).await;
    std::fs::write(&file, "config:\n  watch: false\nrules:\n  self_heal_threshold: 5s\n").expect("write");
    let pid = i32::try_from(node.child.id()).expect("pid");
    // SAFETY: sending a signal to our own child process; no memory is shared.
    let sent = unsafe { libc::kill(pid, libc::SIGHUP) };
    assert_eq!(sent, 0, "kill(SIGHUP)");
    wait_until(Duration::from_secs(15), "SIGHUP reload applies", || async {
        config_view(&node.client).await["config"]["rules"]["self_heal_threshold"] == "5s"
    })
    .await;
    assert_eq!(config_view(&node.client).await["reloads"], 1);
}

#[test]
fn validate_lists_every_error_and_print_shows_origins_without_secrets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "admin:\n  listen: 0.0.0.0:17128\nrules:\n  scan_interval: 0s\n  self_heal_threshold: 10s\n").expect("write");
    let output = bin().args(["config", "validate", "--config"]).arg(format!("file:{}", bad.display())).output().expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("2 configuration error(s)"), "{stderr}");
    assert!(stderr.contains("admin.token") && stderr.contains("rules.scan_interval: must be greater than zero"), "{stderr}");

    let typo = dir.path().join("typo.yaml");
    std::fs::write(&typo, "admin:\n  listn: 127.0.0.1:1\n").expect("write");
    let output = bin().args(["config", "validate", "--config"]).arg(typo.display().to_string()).output().expect("run");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("did you mean `admin.listen`"));

    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "admin:\n  token: hunter2\nrules:\n  scan_interval: 10s\n").expect("write");
    let uri = format!("file:{}", good.display());
    let output = bin().args(["config", "validate", "--config", &uri]).output().expect("run");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let output = bin().args(["config", "print", "--show-origin", "--config", &uri, "--set", "log.level=debug"]).output().expect("run");
    assert_eq!(output.status.code(), Some(0));
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(printed.contains("[REDACTED]"), "{printed}");
    assert!(printed.contains(&format!("# from {uri}")), "{printed}");
    assert!(printed.contains("level: debug"), "{printed}");
    assert!(printed.contains("data_dir: ./hotrule-data"), "defaults are printed too: {printed}");
}

/// Collector parity (issue 9, section 6) through the CLI: empty nested keys and unset variables
/// keep their defaults, and `--show-origin` output with a multi-line `yaml:` source is still YAML.
#[test]
fn config_print_with_nulls_and_a_multi_line_source_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("nulls.yaml");
    std::fs::write(&file, "agents:\n  tls:\ncluster:\n  seeds:\nconfig:\n  watch: null\nrules:\n  scan_interval: ${env:HR_TEST_UNSET}\n").expect("write");
    let uri = format!("file:{}", file.display());
    let output = bin()
        .args(["config", "print", "--show-origin", "--config", &uri, "--config", "yaml:log:\n  level: debug\n"])
        .env_remove("HR_TEST_UNSET")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unset environment variable `HR_TEST_UNSET`"));
    let printed = String::from_utf8_lossy(&output.stdout);
    let reread = hotrule_confmap::parse_yaml(&printed).unwrap_or_else(|e| panic!("{e}:\n{printed}")).to_json();
    assert_eq!(reread["log"]["level"], "debug", "{printed}");
    assert_eq!(reread["rules"]["scan_interval"], "30s", "{printed}");
    assert_eq!(reread["config"]["watch"], true, "{printed}");
    assert!(printed.contains("# from yaml:log:\\n  level: debug\\n"), "{printed}");
}

#[tokio::test]
async fn flags_override_files_and_env_expansion_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("node.yaml");
    std::fs::write(&file, "rules:\n  scan_interval: ${env:HR_TEST_SCAN:-40s}\n  self_heal_threshold: 30s\n").expect("write");
    let uri = format!("file:{}", file.display());
    let node = ProcessNode::spawn(&dir.path().join("n"), &["--config", &uri, "--self-heal-threshold", "7"], &[("HR_TEST_SCAN", "13s")]).await;
    let view = config_view(&node.client).await;
    assert_eq!(view["config"]["rules"]["scan_interval"], "13s");
    assert_eq!(view["config"]["rules"]["self_heal_threshold"], "7s", "the flag overrides the file");
}

/// Every leaf key path of a YAML document (lists and nulls are leaves).
fn leaf_paths(value: &serde_json::Value, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                leaf_paths(child, &path, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

#[test]
fn the_example_config_is_valid_and_lists_every_key() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/node.yaml");
    let uri = format!("file:{}", example.display());
    let output = bin().args(["config", "validate", "--config", &uri]).output().expect("run");
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = bin().args(["config", "print", "--config", &uri]).output().expect("run");
    assert_eq!(printed.status.code(), Some(0));
    let parse = |text: &str| hotrule_confmap::parse_yaml(text).expect("yaml").to_json();
    let mut documented = std::collections::BTreeSet::new();
    leaf_paths(&parse(&std::fs::read_to_string(&example).expect("read")), "", &mut documented);
    let mut known = std::collections::BTreeSet::new();
    leaf_paths(&parse(&String::from_utf8_lossy(&printed.stdout)), "", &mut known);
    let missing: Vec<_> = known.difference(&documented).collect();
    assert!(missing.is_empty(), "config/node.yaml does not list: {missing:?}");
    let unknown: Vec<_> = documented.difference(&known).collect();
    assert!(unknown.is_empty(), "config/node.yaml lists keys the node does not know: {unknown:?}");
}
