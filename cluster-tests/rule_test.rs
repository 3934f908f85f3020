//! `POST /runtime/rule/test` over HTTP against an in-process node, and `hotrule rule test` end to
//! end (the real CLI binary against the same kind of node): hand-checked values over two batches
//! 60 s apart, compile errors with their position, per-rule evaluation errors, bounded input,
//! and nothing stored; and a LAL file (`lal/nginx.yaml`) on sample nginx logs with `--logs`.

mod harness;

use harness::{TestNode, hotrule_cli};
use hotrule::api::client::with_query;
use hotrule::node::NodeSettings;
use serde_json::{Value, json};

/// 2023-11-14T22:14:00Z, a whole minute.
const T0: i64 = 1_700_000_040_000;

const FILE: &str = "\
expSuffix: service(['host'], Layer.OS_LINUX)
metricPrefix: t
metricsRules:
  - name: cpu
    exp: cpu_seconds_total.tagNotEqual('mode', 'idle').sum(['host']).rate('PT1M')
  - name: mem_used
    exp: mem_total_bytes.sum(['host']) - mem_free_bytes.sum(['host'])
  - name: by_mode
    exp: cpu_seconds_total.sum(['host', 'mode']).increase('PT1M')
  - name: broken
    exp: mem_total_bytes.tag({tags -> tags.nothing = tags.absent.toUpperCase()}).sum(['host'])
";

const BATCH_1: &str = "\
# TYPE cpu_seconds_total counter
cpu_seconds_total{host=\"h1\",mode=\"idle\"} 100
cpu_seconds_total{host=\"h1\",mode=\"user\"} 10
cpu_seconds_total{host=\"h1\",mode=\"system\"} 5
mem_total_bytes{host=\"h1\"} 1000
mem_free_bytes{host=\"h1\"} 400
";

/// 60 s later: idle +50, user +90, system +30; memory unchanged.
const BATCH_2: &str = "\
cpu_seconds_total{host=\"h1\",mode=\"idle\"} 150
cpu_seconds_total{host=\"h1\",mode=\"user\"} 100
cpu_seconds_total{host=\"h1\",mode=\"system\"} 35
mem_total_bytes{host=\"h1\"} 1000
mem_free_bytes{host=\"h1\"} 400
";

fn request(content: &str, batches: &[(i64, &str)]) -> Vec<u8> {
    let batches: Vec<Value> = batches.iter().map(|(ts, text)| json!({"timestampMs": ts, "exposition": text})).collect();
    serde_json::to_vec(&json!({"content": content, "batches": batches})).expect("json")
}

async fn post_test(node: &TestNode, catalog: &str, name: &str, body: Vec<u8>) -> (u16, Value) {
    let path = with_query("/runtime/rule/test", &[("catalog", catalog), ("name", name)]);
    let reply = node.client.post(&path, body).await.expect("post");
    (reply.status.as_u16(), reply.json().unwrap_or_default())
}

fn rule<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["rules"].as_array().and_then(|rules| rules.iter().find(|r| r["rule"] == name)).expect("rule in the report")
}

/// The value of `name` for batch `batch`.
fn value_in(report: &Value, name: &str, batch: u64) -> Value {
    let values = rule(report, name)["values"].as_array().cloned().unwrap_or_default();
    values.into_iter().find(|v| v["batch"] == batch).map(|v| v["value"].clone()).unwrap_or(Value::Null)
}

#[tokio::test]
async fn dry_run_yields_hand_checked_values_and_stores_nothing() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let before = node.list().await;
    let (code, report) = post_test(&node, "otel-rules", "t", request(FILE, &[(T0, BATCH_1), (T0 + 60_000, BATCH_2)])).await;
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["applyStatus"], "no_change");
    assert_eq!(report["compiled"], true);
    assert_eq!(report["batches"][1]["samples"], 5);
    assert_eq!(report["batches"][1]["bucket"], 202_311_142_215_i64);
    // cpu: non-idle 15 → 135 over 60 s = 2 per second; the first batch has no history (0).
    assert_eq!(value_in(&report, "cpu", 0), json!(0));
    assert_eq!(value_in(&report, "cpu", 1), json!(2));
    let cpu = &rule(&report, "cpu")["values"][1];
    assert_eq!(cpu["entity"], json!({"scope": "SERVICE", "service": "h1", "layer": "OS_LINUX"}));
    assert_eq!(cpu["metric"], Value::Null, "the metric is on the rule row");
    assert_eq!(rule(&report, "cpu")["metric"], "t_cpu");
    assert_eq!(cpu["bucket"], 202_311_142_215_i64);
    // mem_used: 1000 − 400 in both batches.
    assert_eq!(value_in(&report, "mem_used", 0), json!(600));
    assert_eq!(value_in(&report, "mem_used", 1), json!(600));
    // by_mode: a labeled increase per mode.
    assert_eq!(value_in(&report, "by_mode", 1), json!({"mode=idle": 50, "mode=system": 30, "mode=user": 90}));
    assert_eq!(rule(&report, "by_mode")["values"][1]["type"], "labeled");
    // broken: its closure calls a method on null; it fails in both batches, the others still ran.
    let broken = rule(&report, "broken");
    assert_eq!(broken["values"], json!([]));
    let errors = broken["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 2, "{broken}");
    assert!(errors[0]["message"].as_str().is_some_and(|m| m.starts_with("line 11:")), "{broken}");
    assert!(rule(&report, "cpu")["errors"].is_null());
    // Nothing stored: the list is unchanged and the rule does not exist.
    assert_eq!(node.list().await["rules"], before["rules"]);
    let reply = node.client.get(&with_query("/runtime/rule", &[("catalog", "otel-rules"), ("name", "t")])).await.expect("get");
    assert_eq!(reply.status.as_u16(), 404);
}

#[tokio::test]
async fn compile_errors_answer_400_with_their_position_like_the_write_route() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let bad = "metricsRules:\n  - name: x\n    exp: cpu_seconds_total.sum(['host'\n";
    let (code, answer) = post_test(&node, "otel-rules", "bad", request(bad, &[(T0, BATCH_1)])).await;
    assert_eq!(code, 400, "{answer}");
    assert_eq!(answer["applyStatus"], "compile_failed");
    assert_eq!(answer["compiled"], false);
    assert_eq!(answer["line"], 3, "{answer}");
    assert!(answer["column"].as_u64().is_some_and(|c| c > 0), "{answer}");
    let (write_code, written) = node.push("otel-rules", "bad", bad, &[]).await;
    assert_eq!((write_code, &written["applyStatus"]), (400, &answer["applyStatus"]));
    assert_eq!(written["message"], answer["message"], "the same message as the write route");
    assert!(node.row("otel-rules", "bad").await.is_none());
}

#[tokio::test]
async fn refused_input_answers_413_or_400() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    // The body limit.
    let (code, answer) = post_test(&node, "otel-rules", "t", vec![b' '; 16 * 1024 * 1024 + 1]).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (413, Some("payload_too_large")), "{answer}");
    // Too many batches.
    let many: Vec<(i64, &str)> = (0..33).map(|i| (T0 + i * 60_000, "a 1")).collect();
    let (code, answer) = post_test(&node, "otel-rules", "t", request(FILE, &many)).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (413, Some("payload_too_large")), "{answer}");
    // Too many samples in one batch.
    let big: String = (0..100_001).map(|i| format!("s{{i=\"{i}\"}} 1\n")).collect();
    let (code, answer) = post_test(&node, "otel-rules", "t", request(FILE, &[(T0, &big)])).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (413, Some("payload_too_large")), "{answer}");
    assert_eq!(answer["line"], 100_001);
    // Bad exposition: the batch and the line.
    let (code, answer) = post_test(&node, "otel-rules", "t", request(FILE, &[(T0, BATCH_1), (T0 + 60_000, "ok 1\nbad{x=\"1} 2\n")])).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (400, Some("invalid_parameter")), "{answer}");
    assert_eq!((answer["batch"].clone(), answer["line"].clone()), (json!(1), json!(2)));
    // Not JSON, no batch, no content.
    for body in [b"yaml: not json".to_vec(), request(FILE, &[]), request(" ", &[(T0, "a 1")])] {
        let (code, answer) = post_test(&node, "otel-rules", "t", body).await;
        assert_eq!(code, 400, "{answer}");
    }
    // A LAL file takes logs, not sample batches.
    let (code, answer) = post_test(&node, "lal", "t", request("rules: []", &[(T0, "a 1")])).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (400, Some("invalid_parameter")));
    assert!(answer["message"].as_str().is_some_and(|m| m.contains("not a LAL test request")), "{answer}");
    let (code, answer) = post_test(&node, "otel-rules", "", request(FILE, &[(T0, "a 1")])).await;
    assert_eq!((code, answer["applyStatus"].as_str()), (400, Some("missing_name")));
    assert!(node.list().await["rules"].as_array().is_none_or(Vec::is_empty));
}

#[tokio::test]
async fn the_cli_prints_values_json_and_the_difference_from_the_stored_file() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let server = node.node.admin_addr.to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };
    let working = FILE.replace(
        "  - name: broken\n    exp: mem_total_bytes.tag({tags -> tags.nothing = tags.absent.toUpperCase()}).sum(['host'])\n",
        "",
    );
    let file = write("t.yaml", &working);
    let (a, b) = (write("a.prom", BATCH_1), write("b.prom", BATCH_2));
    let base = ["rule", "test", "--server", server.as_str(), "--catalog", "otel-rules"];
    let args = |extra: &[&str]| -> Vec<String> {
        base.iter().chain([file.as_str(), "--samples", a.as_str(), "--samples", b.as_str()].iter()).chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |args: Vec<String>| async move {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        hotrule_cli(&refs, &[]).await
    };

    // The table: one row per value (labeled values one row per key).
    let (code, out, err) = run(args(&[])).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("METRIC"), "{out}");
    let row = out.lines().rfind(|l| l.starts_with("t_cpu ")).expect("a t_cpu row");
    assert!(row.contains("SERVICE layer=OS_LINUX service=h1") && row.trim_end().ends_with(" 2"), "{row}");
    assert!(out.lines().any(|l| l.starts_with("t_by_mode ") && l.contains("mode=user") && l.trim_end().ends_with(" 90")), "{out}");

    // --json: the node's answer, for scripts.
    let (code, out, _) = run(args(&["--json"])).await;
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(out.trim()).expect("--json prints JSON");
    assert_eq!(value_in(&report, "cpu", 1), json!(2));
    let stamps: Vec<i64> = report["batches"].as_array().expect("batches").iter().filter_map(|b| b["timestampMs"].as_i64()).collect();
    assert_eq!(stamps[1] - stamps[0], 60_000, "batches are an --interval apart");

    // A rule error: printed on stderr, exit 1, the other values still printed.
    let broken = write("broken.yaml", FILE);
    let (code, out, err) =
        run(vec!["rule", "test", "--server", &server, "--catalog", "otel-rules", &broken, "--samples", &a].into_iter().map(String::from).collect()).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("rule broken (metric t_broken), batch 0: line 11"), "{err}");
    assert!(out.contains("t_mem_used"), "{out}");

    // A compile error: exit 1 with the position.
    let bad = write("bad.yaml", "metricsRules:\n  - name: x\n    exp: a.sum(['h'\n");
    let (code, _, err) =
        run(vec!["rule", "test", "--server", &server, "--catalog", "otel-rules", &bad, "--samples", &a].into_iter().map(String::from).collect()).await;
    assert_eq!(code, 1);
    assert!(err.contains("compile_failed") && err.contains("line 3, column"), "{err}");

    // --against-current: store a version whose cpu rule does not exclude idle, and compare.
    let stored = working.replace(".tagNotEqual('mode', 'idle')", "").replace("  - name: mem_used\n    exp: mem_total_bytes.sum(['host']) - mem_free_bytes.sum(['host'])\n", "");
    let (code, answer) = node.push("otel-rules", "t", &stored, &[]).await;
    assert_eq!(code, 200, "{answer}");
    let list_before = node.list().await;
    let (code, out, err) = run(args(&["--against-current"])).await;
    assert_eq!(code, 0, "{err}");
    // cpu with idle: 115 → 285 is 170 / 60 = 2.83 → 3 in the stored file, 2 in the candidate.
    assert!(out.lines().any(|l| l.starts_with("changed") && l.contains("t_cpu") && l.split_whitespace().rev().take(2).collect::<Vec<_>>() == ["2", "3"]), "{out}");
    assert!(out.lines().any(|l| l.starts_with("added") && l.contains("t_mem_used")), "{out}");
    assert!(out.contains("added, 0 removed, 1 changed"), "{out}");
    let (code, out, _) = run(args(&["--against-current", "--json"])).await;
    assert_eq!(code, 0);
    let both: Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(both["diff"]["changed"][0]["metric"], "t_cpu");
    assert_eq!((both["diff"]["changed"][0]["current"].as_str(), both["diff"]["changed"][0]["candidate"].as_str()), (Some("3"), Some("2")));
    // Testing changed nothing on the node.
    assert_eq!(node.list().await["rules"], list_before["rules"]);

    // Usage errors exit 2.
    let (code, _, err) = run(args(&["--interval", "5w"])).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(args(&["--label", "novalue"])).await;
    assert_eq!(code, 2, "{err}");

    // --against-current without a stored file of that name fails clearly.
    let (code, _, err) = run(args(&["--against-current", "--name", "nothing-here"])).await;
    assert_eq!(code, 1);
    assert!(err.contains("404") && err.contains("not_found"), "{err}");
}

/// `otel-rules/vm.yaml` on the engine's two recorded node_exporter scrapes, sent as exposition
/// text with the labels the OpenTelemetry collector adds: the route gives the values the engine's
/// own node_exporter test checks by hand.
#[tokio::test]
async fn vm_yaml_on_the_recorded_node_exporter_scrapes() {
    let (node, _kv) = TestNode::in_memory(NodeSettings::for_test()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(root.join(path)).expect("read");
    let vm = read("config/rules/otel-rules/vm.yaml");
    let labels = json!({"job_name": "vm-monitoring", "node_identifier_host_name": "recorded-host"});
    let body = json!({
        "content": vm,
        "batches": [
            {"timestampMs": 1_795_598_809_582_i64, "exposition": read("src/engines/mal-engine/tests/data/node-exporter/scrape1.prom"), "labels": labels},
            {"timestampMs": 1_795_598_871_551_i64, "exposition": read("src/engines/mal-engine/tests/data/node-exporter/scrape2.prom"), "labels": labels},
        ],
    });
    let (code, report) = post_test(&node, "otel-rules", "vm", serde_json::to_vec(&body).expect("json")).await;
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["batches"][0]["samples"], 507);
    let single = |rule_name: &str| value_in(&report, rule_name, 1);
    assert_eq!(single("cpu_total_percentage"), json!(203));
    assert_eq!(single("memory_total"), json!(25_276_510_208_i64));
    assert_eq!(single("memory_used"), json!(3_069_497_344_i64));
    assert_eq!(value_in(&report, "filesystem_percentage", 1), json!({"mountpoint=/": 77}));
    assert_eq!(rule(&report, "cpu_total_percentage")["values"][1]["entity"]["service"], "recorded-host");
    assert!(report["rules"].as_array().expect("rules").iter().all(|r| r["errors"].is_null()), "{report}");
}

/// nginx access and error logs, as `POST /v3/logs` takes them (one per line), with a blank line
/// and two bad lines among them.
const NGINX_LOGS: &str = concat!(
    r#"{"service":"nginx-1","serviceInstance":"i1","layer":"NGINX","timestamp":1700000000000,"tags":{"data":[{"key":"LOG_KIND","value":"NGINX_ACCESS_LOG"}]},"body":{"text":{"text":"10.0.0.1 - - [14/Nov/2023:22:13:20 +0000] \"GET /index.html HTTP/1.1\" 404 153 \"-\" \"curl/8\""}}}"#,
    "\n",
    r#"{"service":"nginx-1","serviceInstance":"i1","layer":"NGINX","timestamp":1700000000000,"tags":{"data":[{"key":"LOG_KIND","value":"NGINX_ACCESS_LOG"}]},"body":{"text":{"text":"10.0.0.2 - - [14/Nov/2023:22:13:21 +0000] \"POST /api HTTP/1.1\" 200 12 \"-\" \"curl/8\""}}}"#,
    "\n\n",
    r#"{"service":"nginx-1","serviceInstance":"i1","layer":"NGINX","timestamp":1700000000000,"tags":{"data":[{"key":"LOG_KIND","value":"NGINX_ERROR_LOG"}]},"body":{"text":{"text":"2023/11/14 22:13:20 [error] 7#7: *1 open() \"/usr/share/nginx/html/x\" failed"}}}"#,
    "\n",
    "{not json\n",
    r#"{"service":["a"]}"#,
    "\n",
);

#[tokio::test]
async fn the_cli_runs_a_lal_file_on_sample_logs() {
    // The node's bundled rules include log-mal-rules/nginx.yaml.
    let (node, _kv) = TestNode::in_memory(NodeSettings { rules_dir: Some(harness::corpus_dir()), ..NodeSettings::for_test() }).await;
    let list_before = node.list().await;
    let server = node.node.admin_addr.to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lal = root.join("config/rules/lal/nginx.yaml").display().to_string();
    let mal = root.join("config/rules/log-mal-rules/nginx.yaml").display().to_string();
    let logs = dir.path().join("nginx.jsonl");
    std::fs::write(&logs, NGINX_LOGS).expect("write");
    let logs = logs.display().to_string();
    let run = |extra: &[&str]| {
        let mut args: Vec<String> =
            ["rule", "test", "--server", server.as_str(), "--catalog", "lal", lal.as_str(), "--logs", logs.as_str()]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            hotrule_cli(&refs, &[]).await
        }
    };

    // The table: per log and rule, the extraction and decision; the bad lines on stderr.
    let (code, out, err) = run(&["--mal", &mal]).await;
    assert_eq!(code, 1, "two bad lines fail the run:\n{out}{err}");
    for expected in [
        "line 1: service=nginx-1 layer=NGINX",
        "  rule NGINX:nginx-access-log: kept",
        "    tags       LOG_KIND=NGINX_ACCESS_LOG, http.status_code=404",
        "    tags       LOG_KIND=NGINX_ACCESS_LOG, http.status_code=200",
        "  rule NGINX:nginx-error-log: no_sink",
        "line 4: service=nginx-1 layer=NGINX",
        "  rule NGINX:nginx-error-log: kept",
        "    tags       LOG_KIND=NGINX_ERROR_LOG, level=error",
        "    sample     nginx_error_log_count{level=error, service=nginx-1, service_instance_id=i1} 1.0 @1700000000000",
        "line 5: not run: not JSON",
        "line 6: not run: not a LogData",
        "log-mal-rules: log-mal-rules/nginx (request)",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    // The error log's timestamp comes from its text (yyyy/MM/dd HH:mm:ss, in the node's zone).
    let error_block = out.split("line 4:").nth(1).expect("line 4");
    assert!(error_block.contains("    timestamp  "), "{error_block}");
    let metric_lines: Vec<&str> = error_block.lines().filter(|l| l.starts_with("    metric ")).collect();
    assert_eq!(metric_lines.len(), 2, "{error_block}");
    assert!(metric_lines[0].contains("meter_nginx_service_error_log_count SERVICE") && metric_lines[0].contains("service=nginx-1"), "{metric_lines:?}");
    // sum(['level','service','service_instance_id']) then service(['service']): labeled by what is left.
    assert!(metric_lines[0].trim_end().ends_with("= level=error,service_instance_id=i1: 1 (log-mal-rules/nginx)"), "{metric_lines:?}");
    assert!(metric_lines[1].trim_end().ends_with("= level=error: 1 (log-mal-rules/nginx)"), "{metric_lines:?}");
    assert!(metric_lines[1].contains("meter_nginx_instance_error_log_count SERVICE_INSTANCE") && metric_lines[1].contains("instance=i1"), "{metric_lines:?}");
    let summary = out.lines().find(|l| l.starts_with("NGINX:nginx-access-log")).expect("summary row");
    assert_eq!(summary.split_whitespace().collect::<Vec<_>>(), vec!["NGINX:nginx-access-log", "2", "0", "0", "0", "1", "0", "0"]);
    assert!(err.contains("nginx.jsonl:5: not JSON") && err.contains("nginx.jsonl:6: not a LogData"), "{err}");
    assert!(err.contains("2 bad log line(s), 0 rule evaluation(s) failed"), "{err}");

    // --json: the node's answer; without --mal the node's bundled log-mal-rules apply.
    let (code, out, _) = run(&["--json"]).await;
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(out.trim()).expect("--json prints JSON");
    let logs = report["logs"].as_array().expect("logs");
    assert_eq!(logs.iter().map(|l| l["line"].as_i64().unwrap_or(0)).collect::<Vec<_>>(), vec![1, 2, 4, 5, 6]);
    let error_rule = &logs[2]["rules"][1];
    assert_eq!(error_rule["record"]["instance"], "i1");
    assert_eq!(error_rule["samples"][0]["labels"]["service_instance_id"], "i1");
    assert!(report["mal"].as_array().expect("mal").iter().any(|m| m["name"] == "nginx" && m["source"] == "bundled"), "{}", report["mal"]);
    assert_eq!(error_rule["metrics"].as_array().map(Vec::len), Some(2), "{error_rule}");

    // Only good lines: exit 0. Usage errors: exit 2.
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, NGINX_LOGS.lines().take(2).collect::<Vec<_>>().join("\n")).expect("write");
    let good = good.display().to_string();
    let (code, _, err) = hotrule_cli(&["rule", "test", "--server", &server, "--catalog", "lal", &lal, "--logs", &good], &[]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = hotrule_cli(&["rule", "test", "--server", &server, "--catalog", "otel-rules", &lal, "--logs", &good], &[]).await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = hotrule_cli(&["rule", "test", "--server", &server, "--catalog", "lal", &lal, "--logs", &good, "--samples", &good], &[]).await;
    assert_eq!(code, 2, "--logs and --samples conflict: {err}");
    assert_eq!(node.list().await["rules"], list_before["rules"], "testing changed nothing on the node");
}
