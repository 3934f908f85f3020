//! Runtime layers over HTTP against an in-process node: SkyWalking's e2e mal-storage phase 5
//! (illegal layer declarations answer 400 and change nothing; a runtime layer survives a restart
//! and goes with delete), the other `layer_*` answers, `GET /runtime/layers`, the list's
//! `layers` field, and a rule that uses a layer another file declares.

mod harness;

use std::sync::Arc;

use harness::{TestNode, corpus_dir};
use hotrule::node::NodeSettings;
use hotrule::store::kv::KvEngine;
use serde_json::Value;

const SEED: &str = "\
expSuffix: service(['svc'], Layer.GENERAL)
metricPrefix: layers_e2e
metricsRules:
  - name: requests
    exp: requests_total.sum(['svc'])
";

/// A MAL file under `prefix` declaring `layers` (name, ordinal) and scoped to `scope_layer`.
fn declaring(prefix: &str, layers: &[(&str, i64)], scope_layer: &str) -> String {
    let mut text = format!(
        "expSuffix: service(['svc'], Layer.{scope_layer})\nmetricPrefix: {prefix}\nmetricsRules:\n  - name: requests\n    exp: requests_total.sum(['svc'])\n"
    );
    if !layers.is_empty() {
        text.push_str("layerDefinitions:\n");
        for (name, ordinal) in layers {
            text.push_str(&format!("  - name: {name}\n    ordinal: {ordinal}\n    normal: true\n"));
        }
    }
    text
}

fn phase(what: &str) {
    eprintln!("[layers] {what}");
}

fn expect(got: (u16, Value), code: u16, status: &str) -> Value {
    assert_eq!((got.0, got.1["applyStatus"].as_str().unwrap_or("")), (code, status), "{}", got.1);
    got.1
}

async fn registered(node: &TestNode) -> Vec<(String, i64, Vec<String>)> {
    let body = node.client.get("/runtime/layers").await.expect("layers").json().expect("json");
    body["layers"]
        .as_array()
        .expect("layers array")
        .iter()
        .map(|l| {
            let mut by: Vec<String> =
                l["declaredBy"].as_array().expect("declaredBy").iter().map(|k| k.as_str().unwrap_or("").to_owned()).collect();
            by.sort();
            (l["name"].as_str().unwrap_or("").to_owned(), l["ordinal"].as_i64().unwrap_or(-1), by)
        })
        .collect()
}

async fn lifecycle(node: &TestNode, route: &str, catalog: &str, name: &str) -> (u16, Value) {
    node.post(route, &[("catalog", catalog), ("name", name)]).await
}

#[tokio::test]
async fn illegal_layer_declarations_answer_400_and_change_nothing() {
    // mal-storage phase 5e-5g, plus the two codes the e2e does not reach.
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    expect(node.push("otel-rules", "seed", SEED, &[]).await, 200, "structural_applied");
    let before = node.row("otel-rules", "seed").await.expect("row");

    phase("5e: ordinal below 100000");
    let low = declaring("layers_e2e", &[("MY_LAYER", 99_999)], "GENERAL");
    let json = expect(node.push("otel-rules", "seed", &low, &[]).await, 400, "layer_ordinal_out_of_range");
    assert!(json["message"].as_str().unwrap_or("").contains("99999"), "{json}");
    phase("5f: a bad layer name");
    let bad = declaring("layers_e2e", &[("my-layer", 100_001)], "GENERAL");
    expect(node.push("otel-rules", "seed", &bad, &[]).await, 400, "layer_name_invalid");
    phase("5g: redeclaring the built-in MESH");
    let mesh = declaring("layers_e2e", &[("MESH", 100_002)], "GENERAL");
    let json = expect(node.push("otel-rules", "seed", &mesh, &[]).await, 400, "layer_name_conflict");
    let message = json["message"].as_str().unwrap_or("");
    assert!(message.contains("built-in SkyWalking layer MESH"), "the message names the built-in layer: {message}");
    phase("a missing ordinal counts as 0");
    let missing = SEED.to_owned() + "layerDefinitions:\n  - name: MY_LAYER\n";
    expect(node.push("otel-rules", "seed", &missing, &[]).await, 400, "layer_ordinal_out_of_range");

    phase("nothing changed: same content, still running, no layer registered");
    let after = node.row("otel-rules", "seed").await.expect("row");
    assert_eq!(before["contentHash"], after["contentHash"]);
    assert_eq!((after["localState"].as_str(), after["suspendOrigin"].as_str()), (Some("RUNNING"), Some("NONE")));
    assert!(registered(&node).await.is_empty());

    phase("a new file with a bad layer is not persisted");
    expect(node.push("otel-rules", "fresh", &declaring("fresh", &[("FRESH", 5)], "GENERAL"), &[]).await, 400, "layer_ordinal_out_of_range");
    assert!(node.row("otel-rules", "fresh").await.is_none());

    phase("layer_ordinal_collision: another file holds the ordinal under another name");
    expect(node.push("otel-rules", "holder", &declaring("holder", &[("HELD", 100_100)], "GENERAL"), &[]).await, 200, "structural_applied");
    let colliding = declaring("layers_e2e", &[("OTHER", 100_100)], "GENERAL");
    let json = expect(node.push("otel-rules", "seed", &colliding, &[]).await, 400, "layer_ordinal_collision");
    assert!(json["message"].as_str().unwrap_or("").contains("otel-rules/holder"), "{json}");
    phase("layer_name_conflict: another file holds the name with another ordinal");
    let renumbered = declaring("layers_e2e", &[("HELD", 100_101)], "GENERAL");
    expect(node.push("otel-rules", "seed", &renumbered, &[]).await, 400, "layer_name_conflict");
    phase("a name twice in one file with different ordinals, and one ordinal under two names");
    let twice = declaring("layers_e2e", &[("TWICE", 100_200), ("TWICE", 100_201)], "GENERAL");
    expect(node.push("otel-rules", "seed", &twice, &[]).await, 400, "layer_name_conflict");
    let shared = declaring("layers_e2e", &[("ONE", 100_300), ("TWO", 100_300)], "GENERAL");
    expect(node.push("otel-rules", "seed", &shared, &[]).await, 400, "layer_ordinal_collision");
    assert_eq!(node.row("otel-rules", "seed").await.expect("row")["contentHash"], before["contentHash"]);
    assert_eq!(registered(&node).await, vec![("HELD".to_owned(), 100_100, vec!["otel-rules/holder".to_owned()])]);
}

#[tokio::test]
async fn an_override_of_a_bundled_file_may_not_declare_layers() {
    let settings = NodeSettings { rules_dir: Some(corpus_dir()), ..NodeSettings::for_test() };
    let (node, _kv) = TestNode::in_memory(settings).await;
    let vm = std::fs::read_to_string(corpus_dir().join("otel-rules/vm.yaml")).expect("vm");
    let with_layers = format!("{vm}\nlayerDefinitions:\n  - name: VM_EXTRA\n    ordinal: 100500\n");
    let json = expect(node.push("otel-rules", "vm", &with_layers, &[]).await, 400, "layer_override_forbidden");
    assert!(json["message"].as_str().unwrap_or("").contains("VM_EXTRA"), "{json}");
    let row = node.row("otel-rules", "vm").await.expect("row");
    assert_eq!(row["status"], "BUNDLED", "nothing persisted: {row}");
    assert!(registered(&node).await.is_empty());
}

#[tokio::test]
async fn a_runtime_layer_survives_a_restart_and_goes_with_delete() {
    // mal-storage phase 5h, on an in-process node restarted on the same store.
    let (node, kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let kv: Arc<dyn KvEngine> = kv;
    let content = declaring("dyn", &[("DYN_LAYER", 100_000)], "DYN_LAYER");
    let json = expect(node.push("otel-rules", "dyn", &content, &[]).await, 200, "structural_applied");
    assert!(json["message"].as_str().unwrap_or("").contains("layers registered [DYN_LAYER]"), "{json}");
    assert_eq!(registered(&node).await, vec![("DYN_LAYER".to_owned(), 100_000, vec!["otel-rules/dyn".to_owned()])]);
    let row = node.row("otel-rules", "dyn").await.expect("row");
    assert_eq!(row["layers"], serde_json::json!([{"name": "DYN_LAYER", "ordinal": 100000, "normal": true}]), "{row}");
    let all = node.client.get("/runtime/layers?builtIn=true").await.expect("layers").json().expect("json");
    let all = all["layers"].as_array().expect("layers").clone();
    assert_eq!(all.len(), 52, "51 built-in layers and DYN_LAYER");
    assert_eq!((&all[1]["name"], &all[1]["source"], &all[51]["source"]), (&"MESH".into(), &"built-in".into(), &"runtime".into()));
    let table = hotrule::cli::admin::rule::render_layers(&serde_json::json!({"layers": [all[51].clone()]}));
    assert!(table.contains("DYN_LAYER") && table.contains("100000") && table.contains("otel-rules/dyn"), "{table}");

    phase("restart on the same store");
    let TestNode { node: running, client, kv: _ } = node;
    drop(client);
    running.shutdown().await;
    let node = TestNode::start(NodeSettings::for_test(), kv).await;
    assert!(node.node.boot_report.failed.is_empty(), "{:?}", node.node.boot_report.failed);
    assert_eq!(registered(&node).await, vec![("DYN_LAYER".to_owned(), 100_000, vec!["otel-rules/dyn".to_owned()])]);
    let row = node.row("otel-rules", "dyn").await.expect("row");
    assert_eq!((row["localState"].as_str(), row["layers"][0]["name"].as_str()), (Some("RUNNING"), Some("DYN_LAYER")), "{row}");

    phase("inactivate: an INACTIVE file claims no layer; delete removes the file");
    expect(lifecycle(&node, "/runtime/rule/inactivate", "otel-rules", "dyn").await, 200, "inactivated");
    assert!(registered(&node).await.is_empty());
    assert_eq!(node.row("otel-rules", "dyn").await.expect("row")["layers"], serde_json::json!([]));
    expect(lifecycle(&node, "/runtime/rule/delete", "otel-rules", "dyn").await, 200, "deleted");
    assert!(registered(&node).await.is_empty());
    assert!(node.row("otel-rules", "dyn").await.is_none());

    phase("reactivating by re-posting re-registers the layer");
    expect(node.push("otel-rules", "dyn", &content, &[]).await, 200, "structural_applied");
    assert_eq!(registered(&node).await.len(), 1);
}

#[tokio::test]
async fn a_rule_may_use_a_runtime_layer_only_while_it_is_registered() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let user = declaring("user", &[], "SHARED_LAYER");
    phase("before any file declares it, Layer.SHARED_LAYER is unknown");
    let json = expect(node.push("otel-rules", "user", &user, &[]).await, 400, "compile_failed");
    let message = json["message"].as_str().unwrap_or("");
    assert!(message.contains("line 1, column 29") && message.contains("unknown layer 'SHARED_LAYER'"), "{message}");
    let lal_user = "rules:\n  - name: shared\n    layer: SHARED_LAYER\n    dsl: \"filter { sink {} }\"\n";
    expect(node.push("lal", "user", lal_user, &[]).await, 400, "compile_failed");

    phase("a file that declares the layer may use it itself");
    let owner = declaring("owner", &[("SHARED_LAYER", 100_700)], "SHARED_LAYER");
    expect(node.push("otel-rules", "owner", &owner, &[]).await, 200, "structural_applied");
    phase("another MAL file and a LAL file may use it while it is registered");
    expect(node.push("otel-rules", "user", &user, &[]).await, 200, "structural_applied");
    expect(node.push("lal", "user", lal_user, &[]).await, 200, "structural_applied");
    assert_eq!(node.row("lal", "user").await.expect("row")["localState"], "RUNNING");

    phase("the owner leaves: the layer is gone and new uses are refused");
    expect(lifecycle(&node, "/runtime/rule/inactivate", "otel-rules", "owner").await, 200, "inactivated");
    expect(lifecycle(&node, "/runtime/rule/delete", "otel-rules", "owner").await, 200, "deleted");
    assert!(registered(&node).await.is_empty());
    let edited = user.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    let json = expect(node.push("otel-rules", "user", &edited, &[]).await, 400, "compile_failed");
    assert!(json["message"].as_str().unwrap_or("").contains("unknown layer 'SHARED_LAYER'"), "{json}");
    phase("rules already running keep running");
    assert_eq!(node.row("otel-rules", "user").await.expect("row")["localState"], "RUNNING");
}

#[tokio::test]
async fn layer_changes_are_structural_and_shared_layers_are_reference_counted() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let first = declaring("counted", &[("COUNTED", 100_800)], "GENERAL");
    expect(node.push("otel-rules", "a", &first, &[]).await, 200, "structural_applied");
    phase("a filter-only edit stays filter-only");
    let filtered = first.replace("sum(['svc'])", "sum(['svc']).rate('PT1M')");
    expect(node.push("otel-rules", "a", &filtered, &[]).await, 200, "filter_only_applied");
    phase("changing only a layer's ordinal is structural; the sole claimant may renumber");
    let renumbered = filtered.replace("100800", "100801");
    expect(node.push("otel-rules", "a", &renumbered, &[]).await, 200, "structural_applied");
    assert_eq!(registered(&node).await[0].1, 100_801);

    phase("a second file declaring the same layer shares it");
    let second = declaring("counted_b", &[("COUNTED", 100_801)], "COUNTED");
    expect(node.push("otel-rules", "b", &second, &[]).await, 200, "structural_applied");
    let lal = "layerDefinitions:\n  - name: COUNTED\n    ordinal: 100801\nrules:\n  - name: counted\n    layer: COUNTED\n    dsl: \"filter { sink {} }\"\n";
    expect(node.push("lal", "c", lal, &[]).await, 200, "structural_applied");
    let claimants = ["lal/c", "otel-rules/a", "otel-rules/b"].map(String::from).to_vec();
    assert_eq!(registered(&node).await, vec![("COUNTED".to_owned(), 100_801, claimants)]);
    phase("one claimant cannot renumber a shared layer alone");
    let alone = renumbered.replace("100801", "100802");
    expect(node.push("otel-rules", "a", &alone, &[]).await, 400, "layer_name_conflict");

    phase("the layer lives until its last claimant goes");
    for (catalog, name) in [("otel-rules", "a"), ("lal", "c")] {
        expect(lifecycle(&node, "/runtime/rule/inactivate", catalog, name).await, 200, "inactivated");
        assert_eq!(registered(&node).await.len(), 1, "still claimed after {catalog}/{name} left");
    }
    expect(lifecycle(&node, "/runtime/rule/inactivate", "otel-rules", "b").await, 200, "inactivated");
    assert!(registered(&node).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_files_claiming_one_name_differently_get_one_200_and_one_conflict() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    for round in 0..5 {
        let name = format!("RACE_{round}");
        let a = declaring(&format!("race_a{round}"), &[(&name, 101_000 + round)], "GENERAL");
        let b = declaring(&format!("race_b{round}"), &[(&name, 102_000 + round)], "GENERAL");
        let (file_a, file_b) = (format!("race-a{round}"), format!("race-b{round}"));
        let (first, second) =
            tokio::join!(node.push("otel-rules", &file_a, &a, &[]), node.push("otel-rules", &file_b, &b, &[]));
        let mut statuses = [first.1["applyStatus"].as_str().unwrap_or("").to_owned(), second.1["applyStatus"].as_str().unwrap_or("").to_owned()];
        statuses.sort();
        assert_eq!(statuses, ["layer_name_conflict", "structural_applied"], "round {round}: {first:?} {second:?}");
    }
    let layers = registered(&node).await;
    assert_eq!(layers.len(), 5, "{layers:?}");
    assert!(layers.iter().all(|(_, _, by)| by.len() == 1), "{layers:?}");
    let body = node.client.get("/runtime/layers").await.expect("layers").json().expect("json");
    assert!(body.get("shadowed").is_none(), "no contradicting declaration got in: {body}");
}

/// SkyWalking's mal-storage phases 5e-5h as the e2e runs them: each illegal file is posted under
/// a sibling name next to the primary rule `e2e_rr`; the sibling never appears, the primary's
/// content is untouched, and a sibling with a valid layer survives a restart and goes with
/// inactivate + delete.
#[tokio::test]
async fn mal_storage_phase_5_replay() {
    let (node, kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let kv: Arc<dyn KvEngine> = kv;
    let primary = "metricPrefix: e2e_rr\nexpSuffix: service(['service_name'], Layer.GENERAL)\nmetricsRules:\n  - name: requests\n    exp: e2e_rr_request_count_total.sum(['service_name'])\n";
    expect(node.push("otel-rules", "e2e_rr", primary, &[]).await, 200, "structural_applied");
    let primary_hash = node.row("otel-rules", "e2e_rr").await.expect("primary")["contentHash"].clone();
    let sibling = |prefix: &str, layer: &str| {
        format!(
            "metricPrefix: {prefix}\nlayerDefinitions:\n{layer}expSuffix: service(['service_name'], Layer.GENERAL)\nmetricsRules:\n  - name: test\n    exp: e2e_rr_request_count_total.sum(['service_name'])\n"
        )
    };
    let illegal = [
        ("5e", sibling("e2e_rr_dyn_ooor", "  - name: E2E_RR_BAD_RANGE\n    ordinal: 99999\n"), "layer_ordinal_out_of_range"),
        ("5f", sibling("e2e_rr_dyn_inv", "  - name: bad-name\n    ordinal: 200000\n    normal: true\n"), "layer_name_invalid"),
        ("5g", sibling("e2e_rr_dyn_nc", "  - name: MESH\n    ordinal: 200000\n    normal: true\n"), "layer_name_conflict"),
    ];
    for (phase_name, content, status) in &illegal {
        phase(&format!("{phase_name}: {status}"));
        let json = expect(node.push("otel-rules", "e2e_rr_sibling", content, &[]).await, 400, status);
        if *phase_name == "5g" {
            assert!(json["message"].as_str().unwrap_or("").contains("built-in"), "labels the source as built-in: {json}");
        }
        assert!(node.row("otel-rules", "e2e_rr_sibling").await.is_none(), "{phase_name}: no sibling row");
        let row = node.row("otel-rules", "e2e_rr").await.expect("primary");
        assert_eq!((&row["contentHash"], row["localState"].as_str()), (&primary_hash, Some("RUNNING")), "{phase_name}");
    }

    phase("5h: a sibling declaring E2E_RR_DYN_LAYER (normal omitted: true)");
    let with_layer = sibling("e2e_rr_dyn_layer", "  - name: E2E_RR_DYN_LAYER\n    ordinal: 100050\n");
    expect(node.push("otel-rules", "e2e_rr_sibling", &with_layer, &[]).await, 200, "structural_applied");
    let expected = vec![("E2E_RR_DYN_LAYER".to_owned(), 100_050, vec!["otel-rules/e2e_rr_sibling".to_owned()])];
    assert_eq!(registered(&node).await, expected);
    let TestNode { node: running, client, kv: _ } = node;
    drop(client);
    running.shutdown().await;
    let node = TestNode::start(NodeSettings::for_test(), kv).await;
    assert_eq!(registered(&node).await, expected, "the layer survives the restart");
    assert_eq!(node.row("otel-rules", "e2e_rr_sibling").await.expect("sibling")["status"], "ACTIVE");
    assert_eq!(node.row("otel-rules", "e2e_rr_sibling").await.expect("sibling")["layers"][0]["normal"], true);
    for route in ["/runtime/rule/inactivate", "/runtime/rule/delete"] {
        let (code, json) = lifecycle(&node, route, "otel-rules", "e2e_rr_sibling").await;
        assert_eq!(code, 200, "{route}: {json}");
    }
    assert!(node.row("otel-rules", "e2e_rr_sibling").await.is_none());
    assert!(registered(&node).await.is_empty(), "the layer is gone with the sibling");
    assert_eq!(node.row("otel-rules", "e2e_rr").await.expect("primary")["contentHash"], primary_hash);
}
