//! SkyWalking's own UI reads hotrule: booster-ui (built, `shared/fixtures/booster-ui/dist`)
//! served by a real `hotrule serve` process (`--ui-dir`) on the same origin as `/graphql`, loaded
//! in headless Chromium.
//!
//! - Linux: Debian's node_exporter scraped through the bundled `otel-rules/vm.yaml`; the
//!   Linux-Service dashboard of that host renders its widgets with numbers, not "No Data".
//! - NGINX (a LAL layer): error logs sent to `/v3/logs` through the shipped `lal/nginx.yaml`; the
//!   dashboard's Log tab lists them.
//!
//! The browser saw no GraphQL error: no error toast on the page, and the node counted no
//! `POST /graphql` answer with errors (`hotrule_graphql_requests_total`). Screenshots are kept
//! under `$CARGO_TARGET_TMPDIR/skywalking-ui/` as artifacts of the run. A test whose tools are
//! missing prints `SKIP: …` and passes: `chromium` and `prometheus-node-exporter` come from
//! apt (`.ci/run` installs them); the built UI is read from `$HOTRULE_BOOSTER_UI_DIR`, else
//! `../shared/fixtures/booster-ui/dist` beside the repository.

mod components;
mod harness;

use std::path::{Path, PathBuf};
use std::time::Duration;

use components::hotrule_node::{HotruleNode, node_config};
use components::{NodeExporter, ScrapeJob, require, require_node, scenario, unix_now_ms};
use harness::wait_until;
use serde_json::{Value, json};

/// A start, scrapes and two closed minutes of values on a busy 2-core machine.
const WAIT: Duration = Duration::from_secs(180);
const HOST: &str = "ui-host";

/// Where the shared fixtures keep the built UI, under some directory holding the checkout.
const SHARED_UI: &str = "shared/fixtures/booster-ui/dist";

/// The built UI, or why there is none: `$HOTRULE_BOOSTER_UI_DIR`, else the first
/// `shared/fixtures/booster-ui/dist` beside the checkout or beside one of its parents.
fn booster_ui() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("HOTRULE_BOOSTER_UI_DIR") {
        let dir = PathBuf::from(dir);
        return match dir.join("index.html").is_file() {
            true => Ok(dir),
            false => Err(format!("HOTRULE_BOOSTER_UI_DIR={} has no index.html", dir.display())),
        };
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    checkout
        .ancestors()
        .skip(1)
        .map(|parent| parent.join(SHARED_UI))
        .find(|dir| dir.join("index.html").is_file())
        .ok_or_else(|| format!("no built booster-ui at <a parent of {}>/{SHARED_UI} (set HOTRULE_BOOSTER_UI_DIR to its dist/)", checkout.display()))
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("skywalking-ui");
    std::fs::create_dir_all(&dir).expect("artifact dir");
    dir
}

/// Whether this test can run; prints why not.
fn ready(test: &str) -> Option<PathBuf> {
    if !require(test, &["chromium"]) || !require_node(test) {
        return None;
    }
    match booster_ui() {
        Ok(dir) => Some(dir),
        Err(why) => {
            hotrule::base::skips::skip(test, &why);
            None
        }
    }
}

/// `base64(name).1`, as the UI addresses a service.
fn service_id(name: &str) -> String {
    format!("{}.1", hotrule::base::base64::encode(name.as_bytes()))
}

fn ui_config(ui: &Path) -> String {
    let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ui-templates");
    format!("ui:\n  dir: {}\n  templates_dir: {}\n", json!(ui.display().to_string()), json!(templates.display().to_string()))
}

async fn graphql(node: &HotruleNode, query: &str, variables: Value) -> Value {
    let body = serde_json::to_vec(&json!({"query": query, "variables": variables})).expect("body");
    let reply = node.client.post("/graphql", body).await.expect("graphql");
    reply.json().unwrap_or(Value::Null)
}

/// The last 30 minutes at MINUTE step, as booster-ui asks by default.
fn last_half_hour() -> Value {
    let text = |ms: i64| {
        let bucket = hotrule::api::query::time::bucket_of(hotrule::data::metrics::Granularity::Minute, ms);
        format!("{:04}-{:02}-{:02} {:02}{:02}", bucket / 100_000_000, bucket / 1_000_000 % 100, bucket / 10_000 % 100, bucket / 100 % 100, bucket % 100)
    };
    let now = unix_now_ms();
    json!({"start": text(now - 29 * 60_000), "end": text(now), "step": "MINUTE", "coldStage": false})
}

/// Every expression of one bundled dashboard.
fn template_expressions(id: &str) -> Vec<String> {
    let set = hotrule::api::graphql::templates::TemplateSet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ui-templates")).expect("templates");
    let configuration: Value = serde_json::from_str(&set.templates[id].configuration).expect("configuration");
    hotrule::api::graphql::templates::expressions(&configuration)
}

/// Whether `expression` has at least one value for `service` in the last half hour.
async fn has_value(node: &HotruleNode, expression: &str, service: &str) -> bool {
    let query = "query ($e: String!, $entity: Entity!, $duration: Duration!) { r: execExpression(expression: $e, entity: $entity, duration: $duration) { error results { values { value } } } }";
    let answer = graphql(node, query, json!({"e": expression, "entity": {"serviceName": service, "normal": true}, "duration": last_half_hour()})).await;
    let result = &answer["data"]["r"];
    result["error"].is_null() && result["results"].as_array().into_iter().flatten().any(|r| r["values"].as_array().into_iter().flatten().any(|v| !v["value"].is_null()))
}

/// Chromium's rendered DOM of `url` (after the app settled), and a screenshot of it.
async fn render(url: &str, screenshot: &Path) -> String {
    let common = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1600,1200", "--virtual-time-budget=25000"];
    let run = |extra: Vec<String>| {
        let mut command = tokio::process::Command::new("chromium");
        command.args(common).args(extra).arg(url).kill_on_drop(true);
        async move { tokio::time::timeout(Duration::from_secs(120), command.output()).await.expect("chromium finished in 2 minutes").expect("chromium ran") }
    };
    let dom = run(vec!["--dump-dom".to_string()]).await;
    assert!(dom.status.success(), "chromium --dump-dom: {}", String::from_utf8_lossy(&dom.stderr));
    let shot = run(vec![format!("--screenshot={}", screenshot.display())]).await;
    assert!(shot.status.success() && screenshot.is_file(), "chromium --screenshot: {}", String::from_utf8_lossy(&shot.stderr));
    eprintln!("[ui] screenshot: {}", screenshot.display());
    String::from_utf8_lossy(&dom.stdout).into_owned()
}

/// `hotrule_graphql_requests_total` by outcome.
async fn graphql_outcomes(node: &HotruleNode) -> (f64, f64) {
    let text = node.own_metrics().await;
    let count = |outcome: &str| {
        text.lines()
            .filter(|l| l.starts_with("hotrule_graphql_requests_total{") && l.contains(&format!("outcome=\"{outcome}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    (count("ok"), count("field_error") + count("document_error"))
}

/// The page's text without tags (what a user reads).
fn visible_text(dom: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in dom.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn booster_ui_renders_the_linux_dashboard_of_a_node_exporter_host() {
    let test = "booster_ui_renders_the_linux_dashboard_of_a_node_exporter_host";
    if !require(test, &["prometheus-node-exporter"]) {
        return;
    }
    let Some(ui) = ready(test) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let exporter = NodeExporter::start(&dir.path().join("exporter")).await;
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(rules.join("otel-rules")).expect("rules");
    std::fs::write(rules.join("otel-rules/vm.yaml"), components::bundled_vm_yaml()).expect("vm.yaml");
    let job = ScrapeJob { job_name: scenario::VM_JOB.into(), targets: vec![exporter.target()], labels: scenario::vm_labels(HOST) };
    let config = format!("{}{}", node_config(&[job], None), ui_config(&ui));
    let node = HotruleNode::start(&dir.path().join("node"), &rules, &config, &[]).await;

    eprintln!("[linux] waiting until every expression of Linux-Service has a value for {HOST}");
    let expressions = template_expressions("Linux-Service");
    assert!(expressions.len() >= 20, "{expressions:?}");
    // A host without swap has no swap percentage (0 / 0): OAP shows that card empty too.
    let swapless = components::prom::exposition_value(&exporter.scrape().await, "node_memory_SwapTotal_bytes", &[]) == Some(0.0);
    let impossible: &[&str] = if swapless { &["avg(meter_vm_memory_swap_percentage)"] } else { &[] };
    wait_until(WAIT, "every Linux-Service expression has a value", || async {
        let mut still = Vec::new();
        for e in expressions.iter().filter(|e| !impossible.contains(&e.as_str())) {
            if !has_value(&node, e, HOST).await {
                still.push(e.as_str());
            }
        }
        eprintln!("[linux] {} expressions still without a value: {still:?}", still.len());
        still.is_empty()
    })
    .await;

    let (_, errors_before) = graphql_outcomes(&node).await;
    let url = format!("{}/dashboard/OS_LINUX/Service/{}/Linux-Service", node.admin_url(), service_id(HOST));
    let dom = render(&url, &artifacts().join("linux-service.png")).await;
    std::fs::write(artifacts().join("linux-service.html"), &dom).expect("dom artifact");
    let text = visible_text(&dom);
    assert!(text.contains("CPU Usage"), "the dashboard rendered (a widget title): {}", &text[..text.len().min(2000)]);
    let empty = text.matches("No Data").count();
    eprintln!("[linux] widgets showing No Data: {empty} (expected at most {} on this host)", impossible.len());
    assert!(empty <= impossible.len(), "every widget shows data: {}", &text[..text.len().min(4000)]);
    assert!(!dom.contains("el-message--error"), "no error toast");
    // Card widgets print their number as text: the CPU usage card holds a percentage.
    let (ok, errors) = graphql_outcomes(&node).await;
    assert!(ok > 5.0, "the page queried /graphql ({ok} answers)");
    assert_eq!(errors, errors_before, "no GraphQL answer with errors while the page loaded");
    drop(exporter);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn booster_ui_lists_nginx_logs_in_the_log_widget() {
    let test = "booster_ui_lists_nginx_logs_in_the_log_widget";
    let Some(ui) = ready(test) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = dir.path().join("rules");
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/rules");
    for (catalog, file) in [("lal", "nginx.yaml"), ("log-mal-rules", "nginx.yaml")] {
        std::fs::create_dir_all(rules.join(catalog)).expect("rules");
        std::fs::copy(corpus.join(catalog).join(file), rules.join(catalog).join(file)).expect("copy rule");
    }
    let node = HotruleNode::start(&dir.path().join("node"), &rules, &ui_config(&ui), &[]).await;
    let service = "nginx-ui";
    let now = unix_now_ms();
    let nginx_time = |ms: i64| {
        let secs = ms / 1000;
        let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = hotrule_mal_engine::civil_from_days(days);
        format!("{y:04}/{m:02}/{d:02} {:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60)
    };
    let logs: Vec<Value> = (0..5)
        .map(|seq| {
            json!({
                "service": service, "serviceInstance": "nginx-ui-1", "layer": "NGINX", "timestamp": now,
                "tags": {"data": [{"key": "LOG_KIND", "value": "NGINX_ERROR_LOG"}]},
                "body": {"text": {"text": format!("{} [error] 7#7: *{seq} connect() failed (111: Connection refused) ui-seq={seq}", nginx_time(now))}},
            })
        })
        .collect();
    let client = hotrule::api::client::AdminClient::new(&node.data_addr().expect("data listener").to_string(), None).expect("client");
    let reply = client.post("/v3/logs", serde_json::to_vec(&logs).expect("logs")).await.expect("post logs");
    assert!(reply.status.is_success(), "/v3/logs: {}", reply.text());

    eprintln!("[nginx] waiting until queryLogs lists the five logs");
    let id = service_id(service);
    wait_until(WAIT, "queryLogs lists the logs", || async {
        let text = |ms: i64| {
            let s = ms / 1000;
            let (days, rest) = (s.div_euclid(86_400), s.rem_euclid(86_400));
            let (y, m, d) = hotrule_mal_engine::civil_from_days(days);
            format!("{y:04}-{m:02}-{d:02} {:02}{:02}{:02}", rest / 3600, rest / 60 % 60, rest % 60)
        };
        let condition = json!({"serviceId": id, "queryDuration": {"start": text(now - 900_000), "end": text(now + 60_000), "step": "SECOND"}, "paging": {"pageNum": 1, "pageSize": 21}});
        let answer = graphql(&node, "query ($c: LogQueryCondition) { queryLogs(condition: $c) { logs { content } } }", json!({"c": condition})).await;
        answer["data"]["queryLogs"]["logs"].as_array().is_some_and(|l| l.len() == 5)
    })
    .await;

    let (_, errors_before) = graphql_outcomes(&node).await;
    let url = format!("{}/dashboard/NGINX/Service/{id}/Nginx-Service/tab/3", node.admin_url());
    let dom = render(&url, &artifacts().join("nginx-log.png")).await;
    std::fs::write(artifacts().join("nginx-log.html"), &dom).expect("dom artifact");
    let text = visible_text(&dom);
    for seq in 0..5 {
        assert!(text.contains(&format!("ui-seq={seq}")), "the Log widget lists log {seq}: {}", &text[..text.len().min(4000)]);
    }
    assert!(!dom.contains("el-message--error"), "no error toast");
    let (ok, errors) = graphql_outcomes(&node).await;
    assert!(ok > 3.0, "the page queried /graphql ({ok} answers)");
    assert_eq!(errors, errors_before, "no GraphQL answer with errors while the page loaded");
}
