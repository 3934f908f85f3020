//! The real SkyWalking Python agent (PyPI `apache-skywalking` 1.2.0) with its default protocol,
//! gRPC, pointed at a `hotrule serve` process's gRPC port with an `authentication` token
//! (issue 27):
//!
//! - its meter reporter's PVM meters come out of the bundled
//!   `meter-analyzer-config/python-runtime.yaml` as stored `meter_instance_pvm_*` values for the
//!   agent's service and instance;
//! - its log reporter's records reach `/query/logs` through the bundled `lal/default.yaml`;
//! - its `reportInstanceProperties` and `keepAlive` list the instance (language PYTHON, its
//!   properties) in SkyWalking's GraphQL `listInstances`.
//!
//! The program under the agent is `fixtures/skywalking_python_app.py`, run with the Python of
//! `$HOTRULE_SWPY_VENV` (default `~/.cache/hotrule-swpy-venv`, made by `.ci/run`). Without it,
//! or with a `hotrule` built without RocksDB, the test prints `SKIP: …` (a failure under CI).

mod components;
mod harness;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use components::hotrule_node::HotruleNode;
use components::{fixture, require_node, unix_now_ms};
use harness::wait_until;
use hotrule::api::client::with_query;
use serde_json::{Value as Json, json};

const WAIT: Duration = Duration::from_secs(90);
const SERVICE: &str = "py-e2e";
const INSTANCE: &str = "py-e2e-1";
const TOKEN: &str = "agent-token-27";

/// The Python of the agent's virtualenv, when it has the agent.
fn agent_python() -> Option<PathBuf> {
    let venv = std::env::var_os("HOTRULE_SWPY_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/hotrule-swpy-venv")))?;
    let python = venv.join("bin/python");
    let ok = std::process::Command::new(&python)
        .args(["-c", "import skywalking.agent, skywalking.protocol.language_agent.Meter_pb2, psutil"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

/// A rules directory with the two bundled files the agent's data goes through.
fn rules_dir(dir: &Path) -> PathBuf {
    let rules = dir.join("rules");
    for file in ["meter-analyzer-config/python-runtime.yaml", "lal/default.yaml"] {
        let to = rules.join(file);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("rules dir");
        std::fs::copy(harness::corpus_dir().join(file), &to).expect("copy a bundled rule");
    }
    rules
}

/// The kept logs of the agent's service holding `marker`: (content, level tag).
async fn agent_logs(node: &HotruleNode, marker: &str) -> Vec<(String, String)> {
    let start = (unix_now_ms() - 600_000).to_string();
    let path = with_query("/query/logs", &[("service", SERVICE), ("keyword", marker), ("start", &start), ("limit", "1000")]);
    let Ok(reply) = node.client.get(&path).await else { return Vec::new() };
    let body: Json = reply.json().unwrap_or_default();
    body["logs"]
        .as_array()
        .map(|logs| {
            logs.iter()
                .map(|l| {
                    let level = l["tags"].as_array().and_then(|tags| tags.iter().find(|t| t["key"] == "level")).and_then(|t| t["value"].as_str());
                    (l["content"].as_str().unwrap_or("").to_string(), level.unwrap_or("").to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The instances GraphQL lists for the agent's service.
async fn listed_instances(node: &HotruleNode) -> Vec<Json> {
    let query = "query($id: ID!, $d: Duration!) { listInstances(duration: $d, serviceId: $id) { name language attributes { name value } } }";
    let minute = |ms: i64| {
        let (y, m, d) = hotrule_mal_engine::civil_from_days(ms.div_euclid(86_400_000));
        let s = ms.rem_euclid(86_400_000) / 1000;
        format!("{y:04}-{m:02}-{d:02} {:02}{:02}", s / 3600, s / 60 % 60)
    };
    let now = unix_now_ms();
    let variables = json!({"id": hotrule::base::entity_ids::service_id(SERVICE), "d": {"start": minute(now - 3_600_000), "end": minute(now), "step": "MINUTE"}});
    let body = serde_json::to_vec(&json!({"query": query, "variables": variables})).expect("body");
    let Ok(reply) = node.client.post("/graphql", body).await else { return Vec::new() };
    reply.json().and_then(|b: Json| b["data"]["listInstances"].as_array().cloned()).unwrap_or_default()
}

/// The latest stored value of `metric` for the agent's instance, if any.
async fn latest(node: &HotruleNode, metric: &str) -> Option<f64> {
    let now = unix_now_ms();
    let (start, end) = ((now - 600_000).to_string(), (now + 60_000).to_string());
    let pairs = [("name", metric), ("service", SERVICE), ("instance", INSTANCE), ("start", start.as_str()), ("end", end.as_str())];
    let body: Json = node.client.get(&with_query("/query/metrics", &pairs)).await.ok()?.json()?;
    let series = body["series"].as_array()?;
    let ours = series.iter().find(|s| s["entity"]["service_instance"] == INSTANCE)?;
    ours["points"].as_array()?.iter().rev().find_map(|p| p["value"].as_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_agent_reports_meters_logs_and_itself_over_grpc() {
    const TEST: &str = "skywalking_python::the_python_agent_reports_meters_logs_and_itself_over_grpc";
    if !require_node(TEST) {
        return;
    }
    let Some(python) = agent_python() else {
        hotrule::base::skips::skip(
            TEST,
            "no SkyWalking Python agent; .ci/run installs it (python3 -m venv ~/.cache/hotrule-swpy-venv && \
             ~/.cache/hotrule-swpy-venv/bin/pip install apache-skywalking==1.2.0 grpcio protobuf psutil==5.9.5)",
        );
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = format!("ingest:\n  grpc:\n    authentication: {TOKEN}\n");
    let node = HotruleNode::start(&dir.path().join("node"), &rules_dir(dir.path()), &config, &[]).await;
    let grpc = node.grpc_addr().expect("the node prints its gRPC port");

    let marker = format!("hotrule-py-{}", unix_now_ms());
    let log = std::fs::File::create(dir.path().join("agent.log")).expect("agent log");
    let mut agent = tokio::process::Command::new(&python)
        .arg(fixture("skywalking_python_app.py"))
        .env("SW_AGENT_COLLECTOR_BACKEND_SERVICES", grpc.to_string())
        .env("SW_AGENT_NAME", SERVICE)
        .env("SW_AGENT_INSTANCE_NAME", INSTANCE)
        .env("SW_AGENT_AUTHENTICATION", TOKEN)
        .env("HOTRULE_MARKER", &marker)
        .env("HOTRULE_DURATION_SECS", "120")
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python agent");
    let agent_log = || std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();

    // Meters: the PVM gauges through python-runtime.yaml, for the agent's instance.
    for metric in ["meter_instance_pvm_thread_active_count", "meter_instance_pvm_total_mem_utilization", "meter_instance_pvm_gc_g0"] {
        wait_until(WAIT, &format!("{metric} of {SERVICE}"), || async { latest(&node, metric).await.is_some() }).await;
    }
    let threads = latest(&node, "meter_instance_pvm_thread_active_count").await.expect("value");
    assert!(threads >= 1.0, "the agent runs threads: {threads}");
    let memory = latest(&node, "meter_instance_pvm_total_mem_utilization").await.expect("value");
    assert!((1.0..=100.0).contains(&memory), "a percentage: {memory}");

    // Logs: the warnings and the error, with their level tags.
    wait_until(WAIT, "the agent's warning and error logs in /query/logs", || async {
        let logs = agent_logs(&node, &marker).await;
        logs.iter().any(|(c, l)| c.contains("warning first") && l == "WARNING") && logs.iter().any(|(c, l)| c.contains("error once") && l == "ERROR")
    })
    .await;

    // Management: the instance listed with what it reported of itself.
    wait_until(WAIT, "the agent's instance in listInstances", || async {
        listed_instances(&node).await.iter().any(|i| i["name"] == INSTANCE && i["language"] == "PYTHON")
    })
    .await;
    let instance = listed_instances(&node).await.into_iter().find(|i| i["name"] == INSTANCE).expect("listed");
    let attributes = instance["attributes"].as_array().cloned().unwrap_or_default();
    assert!(attributes.iter().any(|a| a["name"] == "python_implementation" && a["value"] == "CPython"), "{attributes:?}");

    let own = node.own_metrics().await;
    for (service, method) in [("ManagementService", "reportInstanceProperties"), ("ManagementService", "keepAlive"), ("MeterReportService", "collect"), ("LogReportService", "collect")] {
        let line = format!("hotrule_grpc_calls_total{{service=\"{service}\",method=\"{method}\",code=\"ok\"}}");
        assert!(own.contains(&line), "{line} missing:\n{own}\nagent:\n{}", agent_log());
    }
    assert!(!own.contains("code=\"permission_denied\""), "the agent's token was accepted:\n{own}");
    let _ = agent.kill().await;
}
