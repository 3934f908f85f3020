//! Tests against real `hotrule` processes: defaults with no config, the admin-safety refusal,
//! acknowledged writes surviving `kill -9`, the CLI, agents over TLS, and failpoint scenarios
//! (commit deferred, process aborts around the commit point) in builds with `failpoints`.

mod harness;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::{ProcessNode, free_port, hotrule_cli, wait_until};
use hotrule::api::client::{AdminClient, with_query};

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: proc
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc'])
";

fn rule_named(i: usize) -> String {
    RULE.replace("metricPrefix: proc", &format!("metricPrefix: proc{i}"))
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hotrule"))
}

#[tokio::test]
async fn serve_runs_with_no_config_at_all() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut child = bin()
        .args(["serve", "--admin-listen", &format!("127.0.0.1:{port}")])
        .current_dir(cwd.path())
        .env_remove("HOTRULE_ADMIN_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let client = AdminClient::new(&format!("127.0.0.1:{port}"), None).expect("client");
    wait_until(Duration::from_secs(30), "default node ready", || {
        let client = client.clone();
        async move { client.get("/readyz").await.is_ok_and(|r| r.status.is_success()) }
    })
    .await;
    assert!(cwd.path().join("hotrule-data/db").is_dir(), "data in ./hotrule-data by default");
    let reply = client.post("/runtime/rule/addOrUpdate?catalog=otel-rules&name=a", RULE.as_bytes().to_vec()).await.expect("post");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    let _ = child.kill();
    let _ = child.wait();
}

/// The number after `label` in a bench report line such as "heartbeats: 6 ok, 0 failed".
fn count_after(report: &str, label: &str) -> u64 {
    report
        .split(label)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.trim_end_matches([',', ';']).parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} in report:\n{report}"))
}

#[tokio::test]
async fn agents_are_served_over_tls_when_a_certificate_is_configured() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("self-signed certificate");
    let (cert_file, key_file) = (dir.path().join("agent.crt"), dir.path().join("agent.key"));
    std::fs::write(&cert_file, cert.pem()).expect("write cert");
    std::fs::write(&key_file, key.serialize_pem()).expect("write key");
    let node = ProcessNode::spawn(
        &dir.path().join("node"),
        &[
            "--set",
            &format!("agents.tls.cert_file={}", cert_file.display()),
            "--set",
            &format!("agents.tls.key_file={}", key_file.display()),
        ],
        &[],
    )
    .await;
    wait_until(Duration::from_secs(10), "the data listener's address printed", || {
        let printed = node.data_url();
        async move { printed.is_some() }
    })
    .await;
    let url = node.data_url().expect("printed");
    let addr = url.strip_prefix("https://").unwrap_or_else(|| panic!("a TLS listener prints https://, got {url}"));

    // An operator assigns a config to every agent (the default group), through the CLI.
    let server = format!("http://{}", node.addr);
    let pipeline = dir.path().join("nginx.yaml");
    std::fs::write(&pipeline, "inputs:\n  - Type: input_file\n    FilePaths: [/var/log/nginx/access.log]\n").expect("write");
    let admin = [("HOTRULE_SERVER", server.as_str())];
    let (code, out, err) = hotrule_cli(&["agent-config", "push", "--name", "nginx", pipeline.to_str().expect("path")], &admin).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = hotrule_cli(&["agent-config", "apply", "--name", "nginx", "--group", "default"], &admin).await;
    assert_eq!(code, 0, "{out}{err}");

    // Agents that trust the certificate heartbeat over TLS and receive the config.
    let ca = cert_file.to_str().expect("path");
    let bench = |server: String| {
        let ca = ca.to_string();
        async move {
            let args = ["bench", "agents", "--agents", "3", "--interval", "1", "--duration", "3", "--server", &server, "--ca-file", &ca];
            hotrule_cli(&args, &[]).await
        }
    };
    let (code, out, err) = bench(url.clone()).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(count_after(&out, "heartbeats:") >= 3, "{out}");
    assert_eq!(count_after(&out, "configs applied"), 3, "each agent applied the config once over TLS:\n{out}");

    // Plain HTTP to the TLS port is refused (the handshake fails), and the node keeps serving.
    let (code, out, err) = bench(format!("http://{addr}")).await;
    assert_ne!(code, 0, "plain HTTP must not be answered on a TLS port:\n{out}{err}");
    assert!(out.contains("heartbeats: 0 ok"), "{out}");

    // An agent that does not trust the certificate is refused too.
    let stranger = rcgen::KeyPair::generate().expect("key");
    let other_ca = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .expect("params")
        .self_signed(&stranger)
        .expect("cert");
    let other_ca_file = dir.path().join("other.crt");
    std::fs::write(&other_ca_file, other_ca.pem()).expect("write");
    let other_ca = other_ca_file.to_str().expect("path");
    let (code, out, _) = hotrule_cli(
        &["bench", "agents", "--agents", "1", "--interval", "1", "--duration", "1", "--server", &url, "--ca-file", other_ca],
        &[],
    )
    .await;
    assert_ne!(code, 0, "an untrusted certificate must fail verification:\n{out}");

    let (code, out, err) = bench(url).await;
    assert_eq!(code, 0, "still serving after refused clients:\n{out}{err}");
    assert!(node.log_text().contains("agent TLS handshake failed"), "the refused handshake is logged");
}

#[test]
fn serve_refuses_a_non_loopback_admin_port_without_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = bin()
        .args(["serve", "--admin-listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("HOTRULE_ADMIN_TOKEN")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("refusing") && stderr.contains("--admin-token"), "{stderr}");
    assert!(!dir.path().join("db").exists(), "nothing opened before the refusal");
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("node");
    let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_secs(120);
    for round in 0..3usize {
        let mut node = ProcessNode::spawn(&data, &[], &[]).await;
        let mut writers = Vec::new();
        for writer in 0..4usize {
            let client = node.client.clone();
            let acked = acked.clone();
            writers.push(tokio::spawn(async move {
                // Bounded in count and in time; the kill below ends it sooner.
                for i in 0..400usize {
                    let name = format!("r{round}-{writer}-{i}");
                    let content = rule_named(round * 100_000 + writer * 1000 + i);
                    let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", &name)]);
                    match client.post(&path, content.clone().into_bytes()).await {
                        Ok(reply) if reply.status.as_u16() == 200 => {
                            acked.lock().expect("acked").push((name, hotrule::base::ids::ContentHash::of(content.as_bytes()).0));
                        }
                        _ => return,
                    }
                }
            }));
        }
        // Kill at a moment that varies per round, while writes are in flight.
        let before = acked.lock().expect("acked").len();
        wait_until(Duration::from_secs(30), "some writes acknowledged", || {
            let acked = acked.clone();
            async move { acked.lock().expect("acked").len() >= before + 10 + round * 15 }
        })
        .await;
        node.kill9();
        for w in writers {
            let _ = w.await;
        }
        assert!(Instant::now() < deadline, "crash rounds took too long");
    }
    let node = ProcessNode::spawn(&data, &[], &[]).await;
    let list = node.client.get("/runtime/rule/list").await.expect("list").json().expect("json");
    let stored: std::collections::HashMap<String, String> = list["rules"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["name"].as_str().unwrap_or("").to_string(), r["contentHash"].as_str().unwrap_or("").to_string()))
        .collect();
    let acked = acked.lock().expect("acked").clone();
    assert!(acked.len() >= 60, "only {} writes acknowledged", acked.len());
    let lost: Vec<_> = acked.iter().filter(|(name, hash)| stored.get(name) != Some(hash)).collect();
    assert!(lost.is_empty(), "{} of {} acknowledged writes lost: {:?}", lost.len(), acked.len(), &lost[..lost.len().min(5)]);
    for row in list["rules"].as_array().expect("rows") {
        assert_eq!(row["localState"], "RUNNING", "{row}");
    }
}

#[tokio::test]
async fn the_cli_pushes_lists_gets_and_reports_failures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = ProcessNode::spawn(&dir.path().join("node"), &[], &[]).await;
    let server = format!("http://{}", node.addr);
    let file = dir.path().join("vm.yaml");
    std::fs::write(&file, RULE).expect("write rule");
    let run = |args: &[&str]| {
        let output = bin().arg("rule").args(args).env("HOTRULE_SERVER", &server).env_remove("HOTRULE_ADMIN_TOKEN").output().expect("cli");
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (code, out, err) = run(&["push", "--catalog", "otel-rules", "--name", "vm", file.to_str().expect("path")]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("structural_applied otel-rules/vm"), "{out}");
    let (code, out, _) = run(&["list"]);
    assert_eq!(code, Some(0));
    assert!(out.lines().next().is_some_and(|h| h.starts_with("CATALOG")), "{out}");
    assert!(out.contains("otel-rules") && out.contains("ACTIVE") && out.contains("RUNNING"), "{out}");
    let (_, out, _) = run(&["list", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&out).expect("list --json is JSON");
    assert_eq!(json["rules"][0]["name"], "vm");
    let (code, out, _) = run(&["get", "--catalog", "otel-rules", "--name", "vm"]);
    assert_eq!((code, out.as_str()), (Some(0), RULE));
    std::fs::write(&file, "metricsRules: [").expect("write");
    let (code, _, err) = run(&["push", "--catalog", "otel-rules", "--name", "vm", file.to_str().expect("path")]);
    assert_eq!(code, Some(1));
    assert!(err.contains("400 compile_failed"), "{err}");
    let (code, _, err) = run(&["delete", "--catalog", "otel-rules", "--name", "vm"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("409 requires_inactivate_first"), "{err}");
    assert_eq!(run(&["inactivate", "--catalog", "otel-rules", "--name", "vm"]).0, Some(0));
    let dump = dir.path().join("d.tar.gz");
    assert_eq!(run(&["dump", "-o", dump.to_str().expect("path")]).0, Some(0));
    assert!(std::fs::metadata(&dump).expect("dump written").len() > 0);
    assert_eq!(run(&["delete", "--catalog", "otel-rules", "--name", "vm"]).0, Some(0));
    let (code, _, err) = run(&["--server", "http://127.0.0.1:1", "list"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("failed"), "{err}");
}

#[cfg(feature = "failpoints")]
mod failpoints {
    use super::*;

    async fn push(node: &ProcessNode, name: &str, content: &str) -> Result<(u16, serde_json::Value), String> {
        let path = with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", name)]);
        node.client
            .post(&path, content.as_bytes().to_vec())
            .await
            .map(|r| (r.status.as_u16(), r.json().unwrap_or_default()))
            .map_err(|e| e.to_string())
    }

    async fn row(node: &ProcessNode, name: &str) -> Option<serde_json::Value> {
        let list = node.client.get("/runtime/rule/list").await.ok()?.json()?;
        list["rules"].as_array()?.iter().find(|r| r["name"] == name).cloned()
    }

    #[tokio::test]
    async fn commit_deferred_is_repaired_by_the_next_scan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = [("FAILPOINTS", "workflow::after_persist=1*return(boom)")];
        let node = ProcessNode::spawn(&dir.path().join("n"), &["--scan-interval", "1"], &env).await;
        let (code, json) = push(&node, "deferred", RULE).await.expect("answer");
        assert_eq!((code, json["applyStatus"].as_str()), (500, Some("commit_deferred")), "{json}");
        let first = row(&node, "deferred").await.expect("row");
        assert_eq!(first["status"], "ACTIVE", "storage is authoritative");
        wait_until(Duration::from_secs(15), "the scan applies the deferred commit", || async {
            row(&node, "deferred").await.is_some_and(|r| {
                r["localState"] == "RUNNING" && r["appliedContentHash"] == r["contentHash"] && r["lastApplyError"] == ""
            })
        })
        .await;
    }

    #[tokio::test]
    async fn filter_only_persisted_and_teardown_deferred_are_reported_and_repaired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let node = ProcessNode::spawn(&dir.path().join("n"), &["--scan-interval", "1"], &[]).await;
        assert_eq!(push(&node, "f", RULE).await.expect("answer").0, 200);
        let set = |name: &str, action: &str| {
            with_query("/debug/failpoints", &[("name", name), ("action", action)])
        };
        assert!(node.client.post(&set("workflow::after_persist", "1*return(x)"), Vec::new()).await.expect("set").status.is_success());
        let edited = RULE.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
        let (code, json) = push(&node, "f", &edited).await.expect("answer");
        assert_eq!((code, json["applyStatus"].as_str()), (200, Some("filter_only_persisted")), "{json}");
        wait_until(Duration::from_secs(15), "the scan swaps in the persisted filter", || async {
            row(&node, "f").await.is_some_and(|r| r["appliedContentHash"] == r["contentHash"] && r["lastApplyError"] == "")
        })
        .await;
        assert!(node.client.post(&set("workflow::teardown", "1*return(x)"), Vec::new()).await.expect("set").status.is_success());
        let reply = node.client.post("/runtime/rule/inactivate?catalog=otel-rules&name=f", Vec::new()).await.expect("post");
        assert_eq!((reply.status.as_u16(), reply.json().expect("json")["applyStatus"].clone()), (500, "teardown_deferred".into()));
        wait_until(Duration::from_secs(15), "the scan tears the rule down", || async {
            row(&node, "f").await.is_some_and(|r| r["status"] == "INACTIVE" && r["localState"] == "NOT_LOADED")
        })
        .await;
        let reply = node.client.post(&set("no::such", "return"), Vec::new()).await.expect("post");
        assert_eq!(reply.status.as_u16(), 400);
    }

    #[tokio::test]
    async fn a_crash_after_the_commit_point_keeps_the_write_and_before_it_loses_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("n");
        {
            let env = [("FAILPOINTS", "workflow::after_persist=return(abort)")];
            let mut node = ProcessNode::spawn(&data, &[], &env).await;
            assert!(push(&node, "after", RULE).await.is_err(), "the process aborts before answering");
            node.kill9();
        }
        {
            let env = [("FAILPOINTS", "workflow::before_persist=return(abort)")];
            let mut node = ProcessNode::spawn(&data, &[], &env).await;
            assert!(push(&node, "before", &rule_named(2)).await.is_err(), "the process aborts before answering");
            node.kill9();
        }
        let node = ProcessNode::spawn(&data, &[], &[]).await;
        let after = row(&node, "after").await.expect("persisted before the crash");
        assert_eq!((after["status"].as_str(), after["localState"].as_str()), (Some("ACTIVE"), Some("RUNNING")));
        assert!(row(&node, "before").await.is_none(), "nothing persisted before the commit point");
    }
}
