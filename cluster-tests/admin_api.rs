//! HTTP end-to-end tests of the admin API against a real in-process node on an ephemeral
//! port: every single-node applyStatus, reads, dumps, the token, boot with the corpus, the
//! scan's self-heal, restart persistence on RocksDB, and the scrape status of a lone node.

mod harness;

use std::sync::Arc;
use std::time::Duration;

use harness::{TestNode, corpus_dir, wait_until};
use hotrule::api::client::with_query;
use hotrule::base::ids::{Catalog, NodeId, Revision, RuleKey, RuleName};
use hotrule::node::NodeSettings;
use hotrule::control::runtime::Origin;
use hotrule::control::workflow::{Peers, SuspendVote, peers::BoxFuture};

const RULE: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: e2e
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc'])
";

fn filter_edit(rule: &str) -> String {
    rule.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')")
}

fn settings_with_corpus() -> NodeSettings {
    NodeSettings { rules_dir: Some(corpus_dir()), ..NodeSettings::for_test() }
}

#[tokio::test]
async fn booting_on_the_corpus_loads_every_file_without_an_error() {
    let (node, _kv) = TestNode::in_memory(settings_with_corpus()).await;
    assert!(node.node.boot_report.failed.is_empty(), "{:?}", node.node.boot_report.failed);
    let list = node.list().await;
    let rows = list["rules"].as_array().expect("rows");
    assert_eq!(rows.len(), 98, "one row per bundled file");
    for row in rows {
        assert_eq!(row["status"], "BUNDLED", "{row}");
        assert_eq!(row["localState"], "RUNNING", "{row}");
        assert_eq!(row["lastApplyError"], "", "{row}");
    }
    assert_eq!(list["loaderStats"]["active"], 98);
}

/// Query pairs, body, expected HTTP status, expected applyStatus.
type Case = (&'static [(&'static str, &'static str)], &'static str, u16, &'static str);

#[tokio::test]
async fn request_validation_codes() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let cases: &[Case] = &[
        (&[], "x: 1", 400, "missing_catalog"),
        (&[("catalog", "oal"), ("name", "a")], "x: 1", 400, "invalid_catalog"),
        (&[("catalog", "otel-rules")], "x: 1", 400, "missing_name"),
        (&[("catalog", "otel-rules"), ("name", "../etc")], "x: 1", 400, "invalid_name"),
        (&[("catalog", "otel-rules"), ("name", "a//b")], "x: 1", 400, "invalid_name"),
        (&[("catalog", "otel-rules"), ("name", "a")], "", 400, "empty_body"),
        (&[("catalog", "otel-rules"), ("name", "a")], "  \n", 400, "empty_body"),
    ];
    for (pairs, body, code, apply) in cases {
        let reply = node
            .client
            .post(&with_query("/runtime/rule/addOrUpdate", pairs), body.as_bytes().to_vec())
            .await
            .expect("post");
        let json = reply.json().expect("json");
        assert_eq!((reply.status.as_u16(), json["applyStatus"].as_str()), (*code, Some(*apply)), "{pairs:?}: {json}");
        for field in ["applyStatus", "catalog", "name", "message"] {
            assert!(json[field].is_string(), "{field} missing in {json}");
        }
    }
    let (code, json) = node.post("/runtime/rule/delete", &[("catalog", "lal"), ("name", "a"), ("mode", "wipe")]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (400, Some("invalid_mode")));
    let reply = node.client.get(&with_query("/runtime/rule", &[("catalog", "lal"), ("name", "a"), ("source", "disk")])).await.expect("get");
    assert_eq!(reply.status.as_u16(), 400);
    assert_eq!(reply.json().expect("json")["applyStatus"], "invalid_source");
    let reply = node.client.get("/runtime/rule/list?catalog=nope").await.expect("list");
    assert_eq!((reply.status.as_u16(), reply.json().expect("json")["applyStatus"].clone()), (400, "invalid_catalog".into()));
    let too_big = vec![b'#'; 1_000_001];
    let reply = node
        .client
        .post(&with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "big")]), too_big)
        .await
        .expect("post");
    assert_eq!(reply.status.as_u16(), 413);
    assert_eq!(reply.json().expect("json")["applyStatus"], "payload_too_large");
    // A comment-only file declares nothing: 400 at line 1, column 1 (issue 10), whatever its size.
    let mut comments = vec![b'#'; 1_000_000];
    comments[999_999] = b'\n';
    let reply = node
        .client
        .post(&with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "big")]), comments)
        .await
        .expect("post");
    assert_eq!(reply.status.as_u16(), 400, "{}", reply.text());
    let json = reply.json().expect("json");
    assert_eq!(json["applyStatus"], "compile_failed");
    assert!(json["message"].as_str().is_some_and(|m| m.starts_with("line 1, column 1: the file declares nothing")), "{json}");
    // Exactly at the limit is accepted: an explicitly empty rule file padded with a comment.
    let mut at_limit = b"metricsRules: []\n".to_vec();
    at_limit.resize(1_000_000, b'#');
    at_limit[999_999] = b'\n';
    let reply = node
        .client
        .post(&with_query("/runtime/rule/addOrUpdate", &[("catalog", "otel-rules"), ("name", "big")]), at_limit)
        .await
        .expect("post");
    assert_eq!(reply.status.as_u16(), 200, "{}", reply.text());
}

#[tokio::test]
async fn malformed_input_gets_a_4xx_and_the_node_keeps_serving() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let (code, json) = {
        let reply = node
            .client
            .post(&with_query("/runtime/rule/addOrUpdate", &[("catalog", "lal"), ("name", "bin")]), garbage)
            .await
            .expect("post");
        (reply.status.as_u16(), reply.json().expect("json"))
    };
    assert_eq!((code, json["applyStatus"].as_str()), (400, Some("compile_failed")), "{json}");
    let reply = node.client.post("/runtime/rule/addOrUpdate?catalog=%ZZ&name=a", b"x".to_vec()).await.expect("post");
    assert!(reply.status.is_client_error(), "{}", reply.status);
    let reply = node.client.get("/no/such/route").await.expect("get");
    assert_eq!(reply.status.as_u16(), 404);
    assert_eq!(reply.json().expect("json")["applyStatus"], "not_found");
    assert!(node.client.get("/healthz").await.expect("healthz").status.is_success());
}

#[tokio::test]
async fn the_write_statuses_of_a_runtime_rule() {
    let (node, kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let push = |content: String, extra: Vec<(&'static str, &'static str)>| {
        let node = &node;
        async move { node.push("otel-rules", "e2e", &content, &extra).await }
    };
    let expect = |got: (u16, serde_json::Value), code: u16, status: &str| {
        assert_eq!((got.0, got.1["applyStatus"].as_str().unwrap_or("")), (code, status), "{}", got.1);
        got.1
    };
    let broken = RULE.replace("requests_total.sum(['svc'])", "requests_total.sum(['svc']");
    let json = expect(push(broken, vec![]).await, 400, "compile_failed");
    assert!(json["message"].as_str().unwrap_or("").contains("line 5"), "{json}");
    expect(push(RULE.into(), vec![]).await, 200, "structural_applied");
    expect(push(RULE.into(), vec![]).await, 200, "no_change");
    expect(push(RULE.into(), vec![("force", "true")]).await, 200, "structural_applied");
    expect(push(filter_edit(RULE), vec![]).await, 200, "filter_only_applied");
    let rescoped = RULE.replace("service(['svc'], Layer.GENERAL)", "endpoint(['svc'], ['ep'], Layer.GENERAL)");
    expect(push(rescoped.clone(), vec![]).await, 409, "storage_change_requires_explicit_approval");
    expect(push(rescoped.clone(), vec![("allowStorageChange", "true")]).await, 200, "structural_applied");
    let (code, json) = node.push("otel-rules", "thief", &rescoped, &[]).await;
    expect((code, json), 409, "ownership_conflict");

    // update_in_progress: hold the file's lock while a write arrives.
    let key = RuleKey::new(Catalog::OtelRules, RuleName::parse("e2e").expect("name"));
    {
        let _held = node.node.state.workflow.file_locks().try_lock(&key).expect("lock free");
        expect(push(RULE.into(), vec![]).await, 409, "update_in_progress");
    }
    // origin_conflict: the file is PEER-suspended on this node.
    node.node.state.runtime.suspend(&key, Origin::Peer, true);
    expect(push(RULE.into(), vec![("allowStorageChange", "true")]).await, 409, "origin_conflict");
    node.node.state.runtime.resume(&key, Origin::Peer);
    // persist_failed: the store refuses writes; nothing changes.
    let before = node.row("otel-rules", "e2e").await.expect("row");
    kv.set_fail_writes(true);
    expect(push(RULE.into(), vec![("allowStorageChange", "true")]).await, 500, "persist_failed");
    expect(push(filter_edit(&rescoped), vec![]).await, 500, "persist_failed");
    kv.set_fail_writes(false);
    let after = node.row("otel-rules", "e2e").await.expect("row");
    assert_eq!(before["contentHash"], after["contentHash"]);
    assert_eq!(after["localState"], "RUNNING");
    // storage_unavailable: the prior row cannot be read.
    kv.set_fail_reads(true);
    expect(push(RULE.into(), vec![]).await, 503, "storage_unavailable");
    let reply = node.client.get("/runtime/rule?catalog=otel-rules&name=e2e").await.expect("get");
    assert_eq!(reply.status.as_u16(), 503);
    kv.set_fail_reads(false);

    let lifecycle = |route: &'static str, extra: Vec<(&'static str, &'static str)>| {
        let node = &node;
        async move {
            let mut pairs = vec![("catalog", "otel-rules"), ("name", "e2e")];
            pairs.extend(extra);
            node.post(route, &pairs).await
        }
    };
    expect(lifecycle("/runtime/rule/delete", vec![]).await, 409, "requires_inactivate_first");
    expect(lifecycle("/runtime/rule/inactivate", vec![]).await, 200, "inactivated");
    let row = node.row("otel-rules", "e2e").await.expect("row");
    assert_eq!((row["status"].as_str(), row["localState"].as_str()), (Some("INACTIVE"), Some("NOT_LOADED")));
    expect(lifecycle("/runtime/rule/inactivate", vec![]).await, 200, "already_inactive");
    expect(lifecycle("/runtime/rule/delete", vec![("mode", "revertToBundled")]).await, 400, "no_bundled_twin");
    expect(lifecycle("/runtime/rule/delete", vec![]).await, 200, "deleted");
    expect(lifecycle("/runtime/rule/delete", vec![]).await, 200, "not_found");
    expect(lifecycle("/runtime/rule/inactivate", vec![]).await, 200, "not_found");
    assert!(node.row("otel-rules", "e2e").await.is_none());
    let reply = node.client.get("/runtime/rule?catalog=otel-rules&name=e2e").await.expect("get");
    assert_eq!((reply.status.as_u16(), reply.json().expect("json")["applyStatus"].clone()), (404, "not_found".into()));
}

struct RejectingPeers;

impl Peers for RejectingPeers {
    fn suspend_all<'a>(&'a self, _key: &'a RuleKey) -> BoxFuture<'a, SuspendVote> {
        Box::pin(async { SuspendVote::Rejected { peer: NodeId("127.0.0.9:17128".into()), detail: "ORIGIN CONFLICT".into() } })
    }
    fn resume_all<'a>(&'a self, _key: &'a RuleKey) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
    fn notify_committed<'a>(&'a self, _entry: &'a hotrule::store::RuleEntry, _previous: Option<&'a Revision>) -> BoxFuture<'a, usize> {
        Box::pin(async { 0 })
    }
}

#[tokio::test]
async fn a_rejecting_peer_gives_split_brain_detected_and_nothing_is_persisted() {
    let kv = Arc::new(hotrule::store::kv::MemKv::new());
    let node = TestNode::start_with(NodeSettings::for_test(), kv, Some(Arc::new(RejectingPeers))).await;
    let (code, json) = node.push("otel-rules", "sb", RULE, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (409, Some("split_brain_detected")), "{json}");
    assert!(node.row("otel-rules", "sb").await.is_none());
}

#[tokio::test]
async fn bundled_rules_statuses_reads_and_etags() {
    let (node, _kv) = TestNode::in_memory(settings_with_corpus()).await;
    let vm = std::fs::read_to_string(corpus_dir().join("otel-rules/vm.yaml")).expect("vm.yaml");
    let (code, json) = node.push("otel-rules", "vm", &vm, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("no_change")));
    // GET falls back to the bundled file, byte-identical, with an ETag.
    let reply = node.client.get("/runtime/rule?catalog=otel-rules&name=vm").await.expect("get");
    assert_eq!(reply.status.as_u16(), 200);
    assert_eq!(reply.body.as_ref(), vm.as_bytes());
    assert_eq!(reply.headers["x-sw-status"], "BUNDLED");
    assert_eq!(reply.headers["content-type"], "application/x-yaml; charset=utf-8");
    let etag = reply.headers["etag"].to_str().expect("etag").to_string();
    let conditional = conditional_get(&node, "/runtime/rule?catalog=otel-rules&name=vm", &etag).await;
    assert_eq!(conditional, 304);

    // The bundled twin (telegraf-rules/vm) shares meter_vm_* names; overriding one twin with
    // the same shapes is allowed.
    let override_vm = vm.replace("metricsRules:", "metricsRules:\n  - name: extra_metric_for_override\n    exp: node_load1 * 1");
    let (code, json) = node.push("otel-rules", "vm", &override_vm, &[]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("structural_applied")), "{json}");
    let json_get = node
        .client
        .send(hyper::Method::GET, "/runtime/rule?catalog=otel-rules&name=vm", Vec::new(), Some("application/json"))
        .await
        .expect("get")
        .json()
        .expect("json");
    assert_eq!((json_get["status"].as_str(), json_get["source"].as_str()), (Some("ACTIVE"), Some("runtime")));
    assert_eq!(json_get["content"].as_str(), Some(override_vm.as_str()));
    let bundled = node.client.get("/runtime/rule/bundled?catalog=otel-rules&withContent=false").await.expect("bundled");
    let rows = bundled.json().expect("json");
    let vm_row = rows.as_array().expect("array").iter().find(|r| r["name"] == "vm").cloned().expect("vm row");
    assert_eq!(vm_row["overridden"], true);
    assert!(vm_row.get("content").is_none());
    let bundled_raw = node.client.get("/runtime/rule?catalog=otel-rules&name=vm&source=bundled").await.expect("get");
    assert_eq!(bundled_raw.body.as_ref(), vm.as_bytes());

    let post = |route: &'static str, mode: &'static str| {
        let node = &node;
        async move { node.post(route, &[("catalog", "otel-rules"), ("name", "vm"), ("mode", mode)]).await }
    };
    assert_eq!(post("/runtime/rule/inactivate", "").await.1["applyStatus"], "inactivated");
    assert_eq!(post("/runtime/rule/delete", "").await.1["applyStatus"], "requires_revert_to_bundled");
    let (code, json) = post("/runtime/rule/delete", "revertToBundled").await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("reverted_to_bundled")), "{json}");
    let row = node.row("otel-rules", "vm").await.expect("row");
    assert_eq!((row["status"].as_str(), row["localState"].as_str()), (Some("BUNDLED"), Some("RUNNING")));
    // A bundled-only rule is tombstoned by inactivate (via the shortcut route).
    let (code, json) = node.post("/runtime/mal/otel/inactivate", &[("name", "windows")]).await;
    assert_eq!((code, json["applyStatus"].as_str()), (200, Some("static_tombstoned")), "{json}");
    assert_eq!(node.row("otel-rules", "windows").await.expect("row")["status"], "INACTIVE");
    let (_, json) = node.post("/runtime/lal/inactivate", &[("name", "nginx")]).await;
    assert_eq!(json["applyStatus"], "static_tombstoned");
    assert_eq!(json["catalog"], "lal");
}

async fn conditional_get(node: &TestNode, path: &str, etag: &str) -> u16 {
    use http_body_util::Full;
    use hyper_util::client::legacy::Client;
    let client: Client<_, Full<bytes::Bytes>> =
        Client::builder(hyper_util::rt::TokioExecutor::new()).build(hyper_util::client::legacy::connect::HttpConnector::new());
    let request = hyper::Request::get(format!("{}{path}", node.client.base()))
        .header("if-none-match", etag)
        .body(Full::new(bytes::Bytes::new()))
        .expect("request");
    client.request(request).await.expect("conditional get").status().as_u16()
}

#[tokio::test]
async fn the_token_protects_every_route_but_healthz() {
    let settings = NodeSettings { admin_token: Some("s3cret".into()), ..NodeSettings::for_test() };
    let (node, _kv) = TestNode::in_memory(settings).await;
    let anonymous = hotrule::api::client::AdminClient::new(&node.node.admin_addr.to_string(), None).expect("client");
    let wrong = hotrule::api::client::AdminClient::new(&node.node.admin_addr.to_string(), Some("nope".into())).expect("client");
    assert!(anonymous.get("/healthz").await.expect("healthz").status.is_success());
    for client in [&anonymous, &wrong] {
        for path in ["/runtime/rule/list", "/readyz", "/runtime/rule/dump"] {
            let reply = client.get(path).await.expect("get");
            assert_eq!(reply.status.as_u16(), 401, "{path}");
            assert_eq!(reply.json().expect("json body")["applyStatus"], "unauthorized");
        }
        let reply = client.post("/runtime/rule/addOrUpdate?catalog=otel-rules&name=a", RULE.as_bytes().to_vec()).await.expect("post");
        assert_eq!(reply.status.as_u16(), 401);
    }
    assert!(node.client.get("/runtime/rule/list").await.expect("list").status.is_success());
    let (code, _) = node.push("otel-rules", "a", RULE, &[]).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn dumps_hold_active_and_inactive_entries_and_a_manifest() {
    let (node, _kv) = TestNode::in_memory(settings_with_corpus()).await;
    node.push("otel-rules", "custom/one", RULE, &[]).await;
    let lal = "rules:\n  - name: dumped\n    layer: GENERAL\n    dsl: |\n      filter {\n        sink {\n        }\n      }\n";
    node.push("lal", "dumped", lal, &[]).await;
    node.post("/runtime/rule/inactivate", &[("catalog", "lal"), ("name", "dumped")]).await;
    let reply = node.client.get("/runtime/rule/dump").await.expect("dump");
    assert_eq!(reply.status.as_u16(), 200);
    let disposition = reply.headers["content-disposition"].to_str().expect("header").to_string();
    assert!(disposition.starts_with("attachment; filename=\"runtime-rule-dump-") && !disposition.contains(':'), "{disposition}");
    let files = untar(&reply.body);
    // Entries in key order, then the history of the dumped files (lal/dumped: its push and its
    // inactivate; custom/one: its push), then the manifest; bundled-only rules are never dumped.
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert_eq!(&names[..2], ["runtime-rule-dump/inactive/lal/dumped.yaml", "runtime-rule-dump/otel-rules/custom/one.yaml"]);
    assert!(names[2..4].iter().all(|n| n.starts_with("runtime-rule-dump/history/lal/dumped/")), "{names:?}");
    assert!(names[4].starts_with("runtime-rule-dump/history/otel-rules/custom/one/"), "{names:?}");
    assert_eq!(names[5], "runtime-rule-dump/manifest.yaml");
    assert_eq!(files[1].1, RULE.as_bytes());
    assert_eq!(files[4].1, RULE.as_bytes(), "a history file holds the revision's content");
    let manifest = String::from_utf8(files[5].1.clone()).expect("utf8");
    assert!(manifest.contains("status: INACTIVE") && manifest.contains("name: \"custom/one\""), "{manifest}");
    assert!(manifest.contains("action: inactivate"), "{manifest}");
    let only_lal = untar(&node.client.get("/runtime/rule/dump/lal").await.expect("dump").body);
    assert_eq!(only_lal.len(), 4, "the entry, its two revisions, the manifest");
    assert_eq!(node.client.get("/runtime/rule/dump/oal").await.expect("dump").status.as_u16(), 400);
}

fn untar(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut out = Vec::new();
    for entry in archive.entries().expect("entries") {
        let mut entry = entry.expect("entry");
        let name = entry.path().expect("path").display().to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).expect("read");
        out.push((name, data));
    }
    out
}

#[tokio::test]
async fn the_scan_self_heals_a_peer_suspension_and_catches_up_storage() {
    let (node, kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    node.push("otel-rules", "heal", RULE, &[]).await;
    let key = RuleKey::new(Catalog::OtelRules, RuleName::parse("heal").expect("name"));
    node.node.state.runtime.suspend(&key, Origin::Peer, true);
    assert_eq!(node.row("otel-rules", "heal").await.expect("row")["suspendOrigin"], "PEER");
    wait_until(Duration::from_secs(10), "self-heal resumes the PEER suspension", || async {
        node.row("otel-rules", "heal").await.is_some_and(|r| r["suspendOrigin"] == "NONE" && r["localState"] == "RUNNING")
    })
    .await;
    // Storage unreadable: the scan keeps in-memory state, then resumes when storage returns.
    kv.set_fail_reads(true);
    let errors = node.node.state.scanner.storage_error_count();
    wait_until(Duration::from_secs(10), "a scan hits the storage error", || async {
        node.node.state.scanner.storage_error_count() > errors
    })
    .await;
    assert_eq!(node.row("otel-rules", "heal").await.expect("row")["localState"], "RUNNING");
    kv.set_fail_reads(false);
    let scans = node.node.state.scanner.scan_count();
    wait_until(Duration::from_secs(10), "scans resume", || async { node.node.state.scanner.scan_count() > scans }).await;
}

#[cfg(feature = "rocksdb")]
#[tokio::test]
async fn entries_survive_a_restart_on_rocksdb() {
    use hotrule::store::kv::RocksEngine;
    let dir = tempfile::tempdir().expect("tempdir");
    let open = || -> Arc<dyn hotrule::store::kv::KvEngine> { Arc::new(RocksEngine::open(&dir.path().join("db")).expect("rocksdb")) };
    let node = TestNode::start(settings_with_corpus(), open()).await;
    node.push("otel-rules", "runtime-only", RULE, &[]).await;
    node.post("/runtime/mal/otel/inactivate", &[("name", "windows")]).await;
    let vm = std::fs::read_to_string(corpus_dir().join("otel-rules/vm.yaml")).expect("vm");
    let override_vm = vm.replace("metricsRules:", "metricsRules:\n  - name: restart_extra\n    exp: node_load1 * 1");
    let (code, json) = node.push("otel-rules", "vm", &override_vm, &[]).await;
    assert_eq!(code, 200, "{json}");
    let before = node.list().await;
    // Every handle on the engine must go before it can be reopened (RocksDB's LOCK file).
    let TestNode { node: running, client, kv } = node;
    drop((client, kv));
    running.shutdown().await;

    let node = TestNode::start(settings_with_corpus(), open()).await;
    assert!(node.node.boot_report.failed.is_empty(), "{:?}", node.node.boot_report.failed);
    let after = node.list().await;
    let pick = |list: &serde_json::Value| -> Vec<(String, String, String, String)> {
        let mut rows: Vec<_> = list["rules"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
                (s("catalog"), s("name"), s("status"), s("contentHash"))
            })
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(pick(&before), pick(&after));
    let row = node.row("otel-rules", "runtime-only").await.expect("row");
    assert_eq!((row["status"].as_str(), row["localState"].as_str()), (Some("ACTIVE"), Some("RUNNING")));
    let row = node.row("otel-rules", "windows").await.expect("row");
    assert_eq!((row["status"].as_str(), row["localState"].as_str()), (Some("INACTIVE"), Some("NOT_LOADED")));
    let row = node.row("otel-rules", "vm").await.expect("row");
    assert_eq!((row["loaderKind"].as_str(), row["lastApplyError"].as_str()), (Some("RUNTIME"), Some("")));
    let body = node.client.get("/runtime/rule?catalog=otel-rules&name=vm").await.expect("get").body;
    assert_eq!(body.as_ref(), override_vm.as_bytes());
}

/// A worker whose first unit of work panics.
struct PanicsAtOnce;

#[async_trait::async_trait]
impl hotrule::base::worker::Worker for PanicsAtOnce {
    fn name(&self) -> &'static str {
        "test-panicker"
    }
    async fn work(&mut self) -> hotrule::base::worker::WorkerState {
        panic!("test worker broke on purpose")
    }
    async fn wait_for_work(&mut self) -> hotrule::base::worker::WorkerState {
        hotrule::base::worker::WorkerState::Busy
    }
}

#[tokio::test]
async fn a_worker_that_panics_makes_readyz_fail_and_names_it() {
    let (mut node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let ready = node.client.get("/readyz").await.expect("readyz");
    assert_eq!(ready.status.as_u16(), 200);
    node.node.spawn_worker(PanicsAtOnce);
    let client = &node.client;
    wait_until(Duration::from_secs(5), "readyz to report the dead worker", || async {
        client.get("/readyz").await.expect("readyz").status.as_u16() == 503
    })
    .await;
    let body = node.client.get("/readyz").await.expect("readyz").json().expect("json");
    assert_eq!(body["applyStatus"], "not_ready");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("test-panicker")), "{body}");
    assert!(body["deadWorkers"]["test-panicker"].as_str().is_some_and(|m| m.contains("broke on purpose")), "{body}");
    assert!(body["deadWorkers"].get("scan").is_none(), "only the dead worker is named: {body}");
    // The other workers still run, and the node still stops within the bound.
    let TestNode { node: running, client, kv } = node;
    drop((client, kv));
    tokio::time::timeout(Duration::from_secs(5), running.shutdown()).await.expect("shutdown within 5 s");
}

/// `GET /status/scrape` on a node alone: it owns every target and shows its last scrape (here of
/// a port nothing listens on); `/metrics` says it scrapes the target.
#[tokio::test]
async fn a_lone_node_shows_it_scrapes_every_target() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let mut settings = NodeSettings::for_test();
    settings.ingest.scrape_jobs = vec![hotrule::data::ingest::ScrapeJob {
        name: "alone".into(),
        interval: Duration::from_millis(200),
        timeout: Duration::from_millis(100),
        metrics_path: "/metrics".into(),
        targets: vec![free.to_string()],
        labels: Default::default(),
    }];
    let (node, _kv) = TestNode::in_memory(settings).await;
    let self_id = node.node.state.node_id.0.clone();
    wait_until(Duration::from_secs(10), "a scrape shown on /status/scrape", || async {
        let status = node.client.get("/status/scrape").await.ok().and_then(|r| r.json()).unwrap_or_default();
        status["targets"][0]["lastScrape"]["result"].is_string()
    })
    .await;
    let status = node.client.get("/status/scrape").await.expect("get").json().expect("json");
    let row = &status["targets"][0];
    assert_eq!(status["node"], self_id.as_str(), "{status}");
    assert_eq!((row["job"].as_str(), row["target"].as_str()), (Some("alone"), Some(free.to_string().as_str())), "{status}");
    assert_eq!((row["owner"].as_str(), row["scrapedHere"].as_bool()), (Some(self_id.as_str()), Some(true)), "{status}");
    assert!(matches!(row["lastScrape"]["result"].as_str(), Some("error" | "timeout")), "{status}");
    assert!(row["lastScrape"]["error"].is_string(), "{status}");
    let metrics = node.client.get("/metrics").await.expect("metrics").text();
    let gauge = format!("hotrule_scrape_target_owned{{job=\"alone\",target=\"{free}\"}} 1");
    assert!(metrics.contains(&gauge), "{metrics}");
}
