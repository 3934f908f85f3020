//! Parity with SkyWalking 11's runtime-rule surface, over HTTP against in-process nodes:
//! ownership is checked before the storage guardrail, a default-mode delete frees the shape
//! (the documented inactivate → delete → re-post way to reshape a metric), the apply-status
//! route (`GET /runtime/rule/status`, `applyId` on structural answers) on one node and on a
//! three-node cluster, and a replay of the e2e `mal-storage` flow (`runtime-rule-flow.sh`).
//!
//! The tests of this binary run one at a time (`SERIAL`): one of them sets a process-wide
//! failpoint.

mod harness;

use std::net::SocketAddr;
use std::time::Duration;

use harness::{TestNode, hotrule_cli, wait_until};
use hotrule::compiler::ScopeType;
use hotrule::node::NodeSettings;
use serde_json::Value;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const WAIT: Duration = Duration::from_secs(20);

/// A MAL file under `metricPrefix: p` with one rule `requests` (metric `p_requests`).
fn rule(exp: &str, suffix: &str) -> String {
    format!("expSuffix: {suffix}\nmetricPrefix: p\nmetricsRules:\n  - name: requests\n    exp: {exp}\n")
}

const SERVICE: &str = "service(['svc'], Layer.GENERAL)";
const INSTANCE: &str = "instance(['svc'], ['inst'], Layer.GENERAL)";

fn phase(scenario: &str, what: &str) {
    eprintln!("[{scenario}] {what}");
}

/// Asserts (HTTP status, applyStatus) and returns the body.
fn expect(got: (u16, Value), code: u16, status: &str) -> Value {
    assert_eq!((got.0, got.1["applyStatus"].as_str().unwrap_or("")), (code, status), "{}", got.1);
    got.1
}

async fn status_of(node: &TestNode, pairs: &[(&str, &str)]) -> Value {
    let reply = node.client.get(&hotrule::api::client::with_query("/runtime/rule/status", pairs)).await.expect("status");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
    reply.json().expect("status json")
}

fn registered_scope(node: &TestNode, metric: &str) -> Option<ScopeType> {
    node.node.state.store.measure(metric).map(|m| m.shape.scope)
}

#[tokio::test]
async fn ownership_is_checked_before_the_guardrail() {
    let _serial = SERIAL.lock().await;
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let a = rule("x_total.sum(['svc','phase'])", SERVICE);
    let b = rule("y_total.sum(['svc'])", SERVICE);
    expect(node.push("otel-rules", "x", &a, &[]).await, 200, "structural_applied");
    // Another shape for p_requests: ownership answers first, with or without approval.
    let json = expect(node.push("otel-rules", "y", &b, &[]).await, 409, "ownership_conflict");
    assert!(json["message"].as_str().unwrap_or("").contains("held by otel-rules/x"), "{json}");
    expect(node.push("otel-rules", "y", &b, &[("allowStorageChange", "true")]).await, 409, "ownership_conflict");
    // The same shape: ownership as well.
    expect(node.push("otel-rules", "y", &a, &[]).await, 409, "ownership_conflict");
    // An INACTIVE holder still owns its names.
    expect(node.post("/runtime/rule/inactivate", &[("catalog", "otel-rules"), ("name", "x")]).await, 200, "inactivated");
    let json = expect(node.push("log-mal-rules", "y", &b, &[]).await, 409, "ownership_conflict");
    assert!(json["message"].as_str().unwrap_or("").contains("held by inactive otel-rules/x"), "{json}");
    assert!(node.row("otel-rules", "y").await.is_none() && node.row("log-mal-rules", "y").await.is_none());
}

#[tokio::test]
async fn a_default_delete_frees_the_shape_and_the_guardrail_keeps_guarding_existing_files() {
    let _serial = SERIAL.lock().await;
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let service = rule("x_total.sum(['svc'])", SERVICE);
    let instance = rule("x_total.sum(['svc','inst'])", INSTANCE);
    let post = |route: &'static str, name: &'static str| {
        let node = &node;
        async move { node.post(route, &[("catalog", "otel-rules"), ("name", name)]).await }
    };

    phase("delete-frees", "same file: inactivate → delete → the new shape, no approval");
    expect(node.push("otel-rules", "a", &service, &[]).await, 200, "structural_applied");
    expect(node.push("otel-rules", "a", &instance, &[]).await, 409, "storage_change_requires_explicit_approval");
    expect(post("/runtime/rule/inactivate", "a").await, 200, "inactivated");
    expect(post("/runtime/rule/delete", "a").await, 200, "deleted");
    assert_eq!(registered_scope(&node, "p_requests"), Some(ScopeType::Service), "delete leaves the measure");
    let json = expect(node.push("otel-rules", "a", &instance, &[]).await, 200, "structural_applied");
    let measure = node.node.state.store.measure("p_requests").expect("measure");
    assert_eq!(measure.shape.scope, ScopeType::ServiceInstance);
    assert_eq!(Some(measure.revision.to_string().as_str()), json["revision"].as_str(), "reshaped in the entry's batch");

    phase("delete-frees", "another file claims a deleted file's names: it starts fresh too");
    expect(post("/runtime/rule/inactivate", "a").await, 200, "inactivated");
    expect(post("/runtime/rule/delete", "a").await, 200, "deleted");
    expect(node.push("otel-rules", "b", &service, &[]).await, 200, "structural_applied");
    let measure = node.node.state.store.measure("p_requests").expect("measure");
    assert_eq!((measure.shape.scope, measure.owner.to_string()), (ScopeType::Service, "otel-rules/b".to_string()));

    phase("delete-frees", "an existing file is still guarded: ACTIVE, then INACTIVE");
    expect(node.push("otel-rules", "b", &instance, &[]).await, 409, "storage_change_requires_explicit_approval");
    expect(post("/runtime/rule/inactivate", "b").await, 200, "inactivated");
    expect(node.push("otel-rules", "b", &instance, &[]).await, 409, "storage_change_requires_explicit_approval");
    expect(node.push("otel-rules", "b", &instance, &[("allowStorageChange", "true")]).await, 200, "structural_applied");
    assert_eq!(registered_scope(&node, "p_requests"), Some(ScopeType::ServiceInstance));
}

#[tokio::test]
async fn bundled_files_keep_their_shapes_and_revert_to_bundled_carries_an_apply_id() {
    let _serial = SERIAL.lock().await;
    let settings = NodeSettings { rules_dir: Some(harness::corpus_dir()), ..NodeSettings::for_test() };
    let (node, _kv) = TestNode::in_memory(settings).await;
    let pairs = |mode: &'static str| [("catalog", "otel-rules"), ("name", "windows"), ("mode", mode)];
    // A bundled file cannot be deleted in default mode, so its names and shapes stay guarded.
    let windows = std::fs::read_to_string(harness::corpus_dir().join("otel-rules/windows.yaml")).expect("windows.yaml");
    let rescoped = windows.replace(
        "service(['node_identifier_host_name'] , Layer.OS_WINDOWS)",
        "instance(['node_identifier_host_name'], ['node_identifier_host_name'], Layer.OS_WINDOWS)",
    );
    assert_ne!(rescoped, windows, "the corpus file changed; adjust the edit");
    expect(node.push("otel-rules", "windows", &rescoped, &[]).await, 409, "storage_change_requires_explicit_approval");
    expect(node.post("/runtime/rule/inactivate", &pairs("")).await, 200, "static_tombstoned");
    expect(node.post("/runtime/rule/delete", &pairs("")).await, 409, "requires_revert_to_bundled");
    expect(node.push("otel-rules", "windows", &rescoped, &[]).await, 409, "storage_change_requires_explicit_approval");
    let json = expect(node.post("/runtime/rule/delete", &pairs("revertToBundled")).await, 200, "reverted_to_bundled");
    let apply_id = json["applyId"].as_str().expect("reverted_to_bundled carries an applyId").to_string();
    let status = status_of(&node, &[("applyId", &apply_id)]).await;
    assert_eq!((status["found"].as_bool(), status["phase"].as_str()), (Some(true), Some("APPLIED")), "{status}");
    let bundled_hash = hotrule::base::ids::ContentHash::of(windows.as_bytes()).0;
    assert_eq!(status["contentHash"].as_str(), Some(bundled_hash.as_str()));
}

#[tokio::test]
async fn the_apply_status_surface_on_one_node() {
    let _serial = SERIAL.lock().await;
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let v1 = rule("x_total.sum(['svc'])", SERVICE);
    let json = expect(node.push("otel-rules", "st", &v1, &[]).await, 200, "structural_applied");
    let apply_id = json["applyId"].as_str().expect("structural_applied carries an applyId").to_string();
    let hash = hotrule::base::ids::ContentHash::of(v1.as_bytes()).0;

    let by_id = status_of(&node, &[("applyId", &apply_id)]).await;
    assert_eq!((by_id["found"].as_bool(), by_id["phase"].as_str()), (Some(true), Some("APPLIED")), "{by_id}");
    assert_eq!((by_id["catalog"].as_str(), by_id["name"].as_str()), (Some("otel-rules"), Some("st")));
    assert_eq!(by_id["contentHash"].as_str(), Some(hash.as_str()));
    assert_eq!(by_id["servedBy"].as_str(), Some(node.node.state.node_id.0.as_str()));
    let (started, updated) = (by_id["startedAtMs"].as_u64().expect("startedAtMs"), by_id["updatedAtMs"].as_u64().expect("updatedAtMs"));
    assert!(started > 0 && started <= updated, "{by_id}");
    assert!(by_id.get("failureReason").is_none() && by_id.get("derivedFrom").is_none(), "{by_id}");

    let by_key = status_of(&node, &[("catalog", "otel-rules"), ("name", "st")]).await;
    assert_eq!(by_key["applyId"].as_str(), Some(apply_id.as_str()));
    let by_hash = status_of(&node, &[("catalog", "otel-rules"), ("name", "st"), ("contentHash", &hash)]).await;
    assert_eq!(by_hash["applyId"].as_str(), Some(apply_id.as_str()));

    // Filter-only changes take no structural path: no applyId.
    let v2 = v1.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    let json = expect(node.push("otel-rules", "st", &v2, &[]).await, 200, "filter_only_applied");
    assert!(json.get("applyId").is_none(), "{json}");
    // ...so a query for exactly that content is answered from the stored row.
    let v2_hash = hotrule::base::ids::ContentHash::of(v2.as_bytes()).0;
    let durable = status_of(&node, &[("catalog", "otel-rules"), ("name", "st"), ("contentHash", &v2_hash)]).await;
    assert_eq!(
        (durable["found"].as_bool(), durable["phase"].as_str(), durable["derivedFrom"].as_str()),
        (Some(true), Some("APPLIED"), Some("durable-dao")),
        "{durable}"
    );
    assert!(durable["note"].is_string() && durable.get("applyId").is_none(), "{durable}");

    // Unknown: 200, found=false, UNKNOWN.
    let unknown = status_of(&node, &[("applyId", "no-such-apply")]).await;
    assert_eq!((unknown["found"].as_bool(), unknown["phase"].as_str()), (Some(false), Some("UNKNOWN")), "{unknown}");
    let nothing = status_of(&node, &[("catalog", "otel-rules"), ("name", "never")]).await;
    assert_eq!((nothing["found"].as_bool(), nothing["phase"].as_str()), (Some(false), Some("UNKNOWN")), "{nothing}");
    // A malformed query is a 400 with the usual codes.
    let reply = node.client.get("/runtime/rule/status").await.expect("status");
    assert_eq!((reply.status.as_u16(), reply.json().expect("json")["applyStatus"].clone()), (400, "missing_catalog".into()));
    let reply = node.client.get("/runtime/rule/status?catalog=oal&name=x").await.expect("status");
    assert_eq!(reply.status.as_u16(), 400);

    // A failed structural apply is FAILED, readable by catalog and name.
    let v3 = rule("x_total.sum(['svc'])", INSTANCE);
    _kv.set_fail_writes(true);
    expect(node.push("otel-rules", "st", &v3, &[("allowStorageChange", "true")]).await, 500, "persist_failed");
    _kv.set_fail_writes(false);
    let failed = status_of(&node, &[("catalog", "otel-rules"), ("name", "st")]).await;
    assert_eq!(failed["phase"].as_str(), Some("FAILED"), "{failed}");
    assert!(failed["failureReason"].as_str().unwrap_or("").contains("not persisted"), "{failed}");

    // commit_deferred: committed, the local finish deferred → DEGRADED (failpoint builds only;
    // otherwise a plain structural apply).
    #[cfg(feature = "failpoints")]
    fail::cfg(hotrule::control::workflow::faults::AFTER_PERSIST, "return(test)").expect("failpoint");
    let deferred = node.push("otel-rules", "st", &v3, &[("allowStorageChange", "true")]).await;
    #[cfg(feature = "failpoints")]
    fail::remove(hotrule::control::workflow::faults::AFTER_PERSIST);
    let (deferred_status, deferred_phase) =
        if cfg!(feature = "failpoints") { (500, "DEGRADED") } else { (200, "APPLIED") };
    let json = expect(deferred, deferred_status, if cfg!(feature = "failpoints") { "commit_deferred" } else { "structural_applied" });
    let deferred_id = json["applyId"].as_str().expect("the answer carries an applyId").to_string();
    let degraded = status_of(&node, &[("applyId", &deferred_id)]).await;
    assert_eq!((degraded["found"].as_bool(), degraded["phase"].as_str()), (Some(true), Some(deferred_phase)), "{degraded}");
    if cfg!(feature = "failpoints") {
        assert!(degraded["failureReason"].as_str().unwrap_or("").contains("next scan retries"), "{degraded}");
    }

    // The CLI: a readable line, and the JSON.
    let server = node.node.admin_addr.to_string();
    let (code, out, _) = hotrule_cli(&["rule", "status", "--server", &server, "--apply-id", &apply_id], &[]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("APPLIED otel-rules/st") && out.contains(&format!("applyId={apply_id}")), "{out}");
    let (code, out, _) =
        hotrule_cli(&["rule", "status", "--server", &server, "--catalog", "otel-rules", "--name", "st", "--json"], &[]).await;
    assert_eq!(code, 0);
    let json: Value = serde_json::from_str(out.trim()).expect("--json prints the answer");
    assert_eq!(json["applyId"].as_str(), Some(deferred_id.as_str()));
    let (code, out, _) = hotrule_cli(&["rule", "status", "--server", &server, "--apply-id", "gone"], &[]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("UNKNOWN") && out.contains("(not found)"), "{out}");
    let (code, _, err) = hotrule_cli(&["rule", "status", "--server", &server, "--catalog", "otel-rules"], &[]).await;
    assert_eq!(code, 2, "{err}");
}

/// `loaderStats.pending` counts the rule files waiting to apply on the node: a commit whose local
/// finish was deferred is one until a scan applies it.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn loader_stats_count_the_files_waiting_to_apply() {
    let _serial = SERIAL.lock().await;
    let mut settings = NodeSettings::for_test();
    // No periodic scan during the test: only the one it runs.
    settings.scan.interval = std::time::Duration::from_secs(3600);
    let (node, _kv) = TestNode::in_memory(settings).await;
    let pending = |list: &Value| list["loaderStats"]["pending"].as_u64();
    expect(node.push("otel-rules", "lp", &rule("x_total.sum(['svc'])", SERVICE), &[]).await, 200, "structural_applied");
    assert_eq!(pending(&node.list().await), Some(0), "applied: nothing waits");

    fail::cfg(hotrule::control::workflow::faults::AFTER_PERSIST, "return(test)").expect("failpoint");
    let deferred = node.push("otel-rules", "lp", &rule("x_total.sum(['svc', 'instance'])", SERVICE), &[("allowStorageChange", "true")]).await;
    fail::remove(hotrule::control::workflow::faults::AFTER_PERSIST);
    expect(deferred, 500, "commit_deferred");
    assert_eq!(pending(&node.list().await), Some(1), "committed, not yet running here");

    node.node.state.scanner.run_once(true).await;
    assert_eq!(pending(&node.list().await), Some(0), "the scan applied it");
}

/// SkyWalking's e2e `mal-storage` flow (`test/e2e-v2/cases/runtime-rule/`), phase by phase,
/// against one node.
#[tokio::test]
async fn the_mal_storage_e2e_flow() {
    let _serial = SERIAL.lock().await;
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let scenario = "mal-storage";
    let seed = rule("x_total.sum(['svc','step'])", SERVICE);
    let post = |route: &'static str| {
        let node = &node;
        async move { node.post(route, &[("catalog", "otel-rules"), ("name", "flow")]).await }
    };
    let hash_in_list = || {
        let node = &node;
        async move { node.row("otel-rules", "flow").await.and_then(|r| r["contentHash"].as_str().map(str::to_string)) }
    };

    phase(scenario, "1 CREATE the seed rule");
    let json = expect(node.push("otel-rules", "flow", &seed, &[]).await, 200, "structural_applied");
    assert!(json["applyId"].is_string(), "{json}");
    phase(scenario, "2 UPDATE-FILTER: same shape");
    let filtered = seed.replace("sum(['svc','step'])", "sum(['svc','step']) * 10");
    expect(node.push("otel-rules", "flow", &filtered, &[]).await, 200, "filter_only_applied");
    phase(scenario, "3 UPDATE-STRUCTURAL: a pool metric is added");
    let pooled = format!("{filtered}  - name: pool\n    exp: pool_total.sum(['svc'])\n");
    expect(node.push("otel-rules", "flow", &pooled, &[]).await, 200, "structural_applied");
    phase(scenario, "4 the dump holds the manifest and the rule (and, hotrule's addition, its three revisions)");
    let dump = node.client.get("/runtime/rule/dump").await.expect("dump");
    assert_eq!(dump.status.as_u16(), 200);
    let names = tar_names(&dump.body);
    let (history, upstream): (Vec<&String>, Vec<&String>) = names.iter().partition(|n| n.starts_with("runtime-rule-dump/history/"));
    assert_eq!(upstream, ["runtime-rule-dump/otel-rules/flow.yaml", "runtime-rule-dump/manifest.yaml"], "{names:?}");
    assert_eq!(history.len(), 3, "one history file per pushed revision: {names:?}");
    assert!(history.iter().all(|n| n.starts_with("runtime-rule-dump/history/otel-rules/flow/")), "{names:?}");

    phase(scenario, "5 illegal pushes leave the rule as it is");
    let before = hash_in_list().await;
    let malformed = pooled.replace("sum(['svc'])", "sum(['svc']");
    expect(node.push("otel-rules", "flow", &malformed, &[]).await, 400, "compile_failed");
    let flipped = pooled.replace(SERVICE, INSTANCE).replace("'step'", "'inst','step'");
    expect(node.push("otel-rules", "flow", &flipped, &[]).await, 409, "storage_change_requires_explicit_approval");
    expect(post("/runtime/rule/delete").await, 409, "requires_inactivate_first");
    let sibling = rule("other_total.sum(['svc'])", SERVICE);
    expect(node.push("otel-rules", "flow-sibling", &sibling, &[]).await, 409, "ownership_conflict");
    // ---- h-layers: phases 5e–5h (illegal runtime layers, a dynamic layer across a restart
    // ---- and its removal on delete) go here.
    assert_eq!(hash_in_list().await, before, "contentHash unchanged by the illegal pushes");
    assert_eq!(node.row("otel-rules", "flow").await.expect("row")["localState"], "RUNNING");

    phase(scenario, "6 SHAPE-BREAK: inactivate → delete → an INSTANCE-scope rule, no approval");
    expect(post("/runtime/rule/inactivate").await, 200, "inactivated");
    expect(post("/runtime/rule/delete").await, 200, "deleted");
    let json = expect(node.push("otel-rules", "flow", &flipped, &[]).await, 200, "structural_applied");
    assert!(json["applyId"].is_string(), "{json}");
    assert_eq!(registered_scope(&node, "p_requests"), Some(ScopeType::ServiceInstance), "storage reshaped");
    assert_eq!(registered_scope(&node, "p_pool"), Some(ScopeType::ServiceInstance));

    phase(scenario, "7 INACTIVATE");
    expect(post("/runtime/rule/inactivate").await, 200, "inactivated");
    let row = node.row("otel-rules", "flow").await.expect("row");
    assert_eq!((row["status"].as_str(), row["localState"].as_str()), (Some("INACTIVE"), Some("NOT_LOADED")));

    phase(scenario, "8 ACTIVATE by re-posting the same content");
    expect(node.push("otel-rules", "flow", &flipped, &[]).await, 200, "structural_applied");
    let row = node.row("otel-rules", "flow").await.expect("row");
    assert_eq!((row["status"].as_str(), row["localState"].as_str()), (Some("ACTIVE"), Some("RUNNING")));

    phase(scenario, "9 DELETE: inactivate + delete; the row is gone");
    expect(post("/runtime/rule/inactivate").await, 200, "inactivated");
    expect(post("/runtime/rule/delete").await, 200, "deleted");
    assert!(node.row("otel-rules", "flow").await.is_none());

    phase(scenario, "10 the final dump holds only the manifest (and the deleted file's history, kept until retention removes it)");
    let dump = node.client.get("/runtime/rule/dump").await.expect("dump");
    let names = tar_names(&dump.body);
    let (history, upstream): (Vec<&String>, Vec<&String>) = names.iter().partition(|n| n.starts_with("runtime-rule-dump/history/otel-rules/flow/"));
    assert_eq!(upstream, ["runtime-rule-dump/manifest.yaml"], "{names:?}");
    let kept = node.client.get(&hotrule::api::client::with_query("/runtime/rule/history", &[("catalog", "otel-rules"), ("name", "flow")])).await.expect("history");
    let kept = kept.json().and_then(|j| j["revisions"].as_array().map(Vec::len)).unwrap_or(0);
    assert_eq!(history.len(), kept, "one history file per kept revision, the delete included: {names:?}");
}

fn tar_names(bytes: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    archive
        .entries()
        .expect("entries")
        .map(|entry| entry.expect("entry").path().expect("path").display().to_string())
        .collect()
}

/// A status read on a node that is not the main is served by the main.
#[tokio::test]
async fn a_status_read_on_a_peer_is_served_by_the_main() {
    let _serial = SERIAL.lock().await;
    use hotrule::cluster::bus::MemNetwork;
    use hotrule::cluster::gossip::{GossipNetwork, MembershipSettings};
    use hotrule::base::ids::NodeId;

    let scenario = "status-on-a-peer";
    let gossip = GossipNetwork::new();
    let bus = MemNetwork::new();
    let gossip_addr = |i: usize| SocketAddr::from(([127, 0, 0, 1], 41_000 + i as u16));
    let mut nodes = Vec::new();
    phase(scenario, "start three nodes");
    for i in 1..=3usize {
        let mut membership = MembershipSettings::for_test(NodeId(format!("n{i}")), gossip_addr(i));
        membership.seeds = (1..=3).filter(|j| *j != i).map(|j| gossip_addr(j).to_string()).collect();
        let settings = NodeSettings { node_id: Some(format!("n{i}")), ..NodeSettings::for_test() };
        nodes.push(TestNode::clustered_in_memory(settings, membership, &gossip, &bus).await);
    }
    for node in &nodes {
        wait_until(WAIT, "every node sees n1 as main and three live members", || async {
            let status = node.client.get("/cluster/status").await.ok().and_then(|r| r.json()).unwrap_or(Value::Null);
            let live = status["members"].as_array().map_or(0, |m| m.iter().filter(|m| m["live"] == true).count());
            status["main"] == "n1" && live == 3
        })
        .await;
    }

    phase(scenario, "a structural write on n3 is forwarded to the main, which answers with an applyId");
    let content = rule("x_total.sum(['svc'])", SERVICE);
    let json = expect(nodes[2].push("otel-rules", "fwd", &content, &[]).await, 200, "structural_applied");
    let apply_id = json["applyId"].as_str().expect("applyId").to_string();

    phase(scenario, "status reads on n2 and n3 are served by n1");
    for peer in [&nodes[1], &nodes[2]] {
        let by_id = status_of(peer, &[("applyId", &apply_id)]).await;
        assert_eq!(
            (by_id["found"].as_bool(), by_id["phase"].as_str(), by_id["servedBy"].as_str()),
            (Some(true), Some("APPLIED"), Some("n1")),
            "{by_id}"
        );
        let by_key = status_of(peer, &[("catalog", "otel-rules"), ("name", "fwd")]).await;
        assert_eq!((by_key["applyId"].as_str(), by_key["servedBy"].as_str()), (Some(apply_id.as_str()), Some("n1")));
    }
    let on_main = status_of(&nodes[0], &[("applyId", &apply_id)]).await;
    assert_eq!(on_main["servedBy"].as_str(), Some("n1"));

    phase(scenario, "with the main gone, a peer answers from its replica");
    let hash = hotrule::base::ids::ContentHash::of(content.as_bytes()).0;
    wait_until(WAIT, "n2 holds the entry", || async {
        nodes[1].row("otel-rules", "fwd").await.is_some_and(|r| r["contentHash"] == hash.as_str())
    })
    .await;
    bus.unregister(&NodeId("n1".into()));
    let fallback = status_of(&nodes[1], &[("catalog", "otel-rules"), ("name", "fwd")]).await;
    assert_eq!(
        (fallback["found"].as_bool(), fallback["phase"].as_str(), fallback["derivedFrom"].as_str(), fallback["servedBy"].as_str()),
        (Some(true), Some("APPLIED"), Some("durable-dao"), Some("n2")),
        "{fallback}"
    );

    for TestNode { node, client, kv } in nodes.into_iter().rev() {
        drop((client, kv));
        node.shutdown().await;
    }
}
