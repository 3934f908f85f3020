//! PromQL checked against a real Prometheus as the oracle (issue 25).
//!
//! An in-process node holds six hours of `meter_vm_*` series of three hosts (gauges, labeled
//! values, counters with resets, two kinds of `le` histograms, negative values, gaps), written as
//! dispatch writes them; the node's own remote-write exporter sends them to Debian's Prometheus
//! (`--web.enable-remote-write-receiver`), so both hold the same series
//! ([`hotrule::bench::promql`]). Then:
//!
//! - every query of `fixtures/promql/corpus.promql` (Grafana's Node Exporter Full panels
//!   rewritten on `meter_vm_*`, and cases after Prometheus' own `promql/testdata`) is asked of
//!   both, as five instant queries and three range queries at different times and steps; the
//!   answers must agree (same label sets, values within 1e-9 relative, the same `errorType` when
//!   both fail) except for the queries the corpus marks `#! differs: <reason>`, which must still
//!   differ (a stale note fails too). The report (how many agree, each difference with its
//!   reason) is printed, and written to `$HOTRULE_PROMQL_REPORT` when that is set;
//! - `promtool query instant` and `promtool query range` read a handful of them from the node and
//!   from Prometheus alike.
//!
//! Without `prometheus`/`promtool` the test prints `SKIP: …` (a failure under CI=true).

mod components;
mod harness;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use components::{promtool_instant_at, promtool_range, require};
use hotrule::bench::promql::{Answer, Eval, Pair, START_MS, close, difference, evaluations};

/// The hosts and minutes of the data.
const HOSTS: usize = 3;
const MINUTES: i64 = 360;
/// Queries asked at once of each server.
const CONCURRENCY: usize = 4;

struct Case {
    query: String,
    /// The reason given by `#! differs:`, when the corpus expects a difference.
    expected: Option<String>,
}

fn corpus() -> Vec<Case> {
    let text = include_str!("fixtures/promql/corpus.promql");
    let mut cases = Vec::new();
    let mut note = None;
    for line in text.lines().map(str::trim) {
        if let Some(reason) = line.strip_prefix("#! differs:") {
            note = Some(reason.trim().to_string());
        } else if !line.is_empty() && !line.starts_with('#') {
            cases.push(Case { query: line.to_string(), expected: note.take() });
        }
    }
    cases
}

/// The first evaluation at which the two servers differ, and why.
async fn first_difference(pair: &Pair, query: &str, evals: &[Eval]) -> Option<(Eval, String)> {
    let ordered = query.starts_with("sort(") || query.starts_with("sort_desc(");
    for eval in evals {
        let (hotrule, oracle) = pair.ask(query, eval).await;
        // Only an instant vector's order is defined (`sort`); a range query's series are not.
        let ordered = ordered && matches!(eval, Eval::Instant { .. });
        if let Some(why) = difference(&hotrule, &oracle, ordered) {
            return Some((*eval, why));
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_agrees_with_a_real_prometheus() {
    let test = "the_corpus_agrees_with_a_real_prometheus";
    if !require(test, &["prometheus", "promtool"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let pair = Pair::start(dir.path(), HOSTS, MINUTES, true).await.expect("a node and Prometheus holding the same series");
    let cases = corpus();
    assert!(cases.len() >= 200, "the corpus has {} queries", cases.len());
    let evals = evaluations(MINUTES);

    // Both hold the same samples, every one: the check every comparison rests on.
    let everything = format!("{{__name__=~\"meter_vm_.+\"}}[{}m]", MINUTES + 5);
    let at_end = Eval::Instant { t_ms: START_MS + MINUTES * 60_000 };
    let (hotrule, oracle) = pair.ask(&everything, &at_end).await;
    let Answer::Series { series, .. } = &hotrule else { panic!("{everything}: {hotrule:?}") };
    assert_eq!(series.iter().map(|(_, points)| points.len()).sum::<usize>(), pair.samples, "hotrule holds every sample written");
    assert_eq!(difference(&hotrule, &oracle, false), None, "Prometheus holds the same samples as hotrule");

    let outcomes: Vec<Option<(Eval, String)>> = {
        use futures_util::StreamExt;
        futures_util::stream::iter(cases.iter().map(|case| first_difference(&pair, &case.query, &evals))).buffered(CONCURRENCY).collect().await
    };

    let mut report = String::new();
    let agreeing = outcomes.iter().filter(|o| o.is_none()).count();
    let _ = writeln!(
        report,
        "{agreeing} of {} queries agree with Prometheus at all {} evaluations ({} answers compared).",
        cases.len(),
        evals.len(),
        cases.len() * evals.len()
    );
    let mut unexpected = Vec::new();
    for (case, outcome) in cases.iter().zip(&outcomes) {
        match (outcome, &case.expected) {
            (None, None) => {}
            (Some((eval, why)), Some(reason)) => {
                let _ = writeln!(report, "- `{}` ({eval}): {reason}. Seen: {why}", case.query);
            }
            (Some((eval, why)), None) => unexpected.push(format!("`{}` differs ({eval}): {why}", case.query)),
            (None, Some(reason)) => unexpected.push(format!("`{}` agrees, but the corpus says it differs ({reason})", case.query)),
        }
    }
    // By design: a range query's step of an hour or more reads hour buckets (each a whole
    // hour's value, `avg` truncated to an integer as SkyWalking's), where Prometheus reads the raw
    // minute samples. The hour value is the minutes' average, as Prometheus computes it.
    let cpu = r#"meter_vm_cpu_load1{service="vm-1"}"#;
    let hourly = Eval::Range { start_ms: START_MS + 60 * 60_000, end_ms: START_MS + 300 * 60_000, step_ms: 3_600_000 };
    let (hotrule, oracle) = pair.ask(cpu, &hourly).await;
    let why = difference(&hotrule, &oracle, false).expect("an hour step reads hour buckets, not Prometheus' minute samples");
    let _ = writeln!(report, "- By design, `{cpu}` ({hourly}): a step of 1h or more reads hour buckets, not minute samples. Seen: {why}");
    let Answer::Series { series, .. } = &hotrule else { panic!("{hotrule:?}") };
    for (t_ms, value) in &series[0].1 {
        let minutes_of_the_hour = format!("floor(avg_over_time({cpu}[59m] @ {}))", (t_ms + 59 * 60_000) / 1000);
        let (_, average) = pair.ask(&minutes_of_the_hour, &Eval::Instant { t_ms: *t_ms }).await;
        let Answer::Series { series: averaged, .. } = &average else { panic!("{average:?}") };
        assert_eq!(averaged[0].1[0].1, *value, "the hour at +{}m is its minutes' average", (t_ms - START_MS) / 60_000);
    }

    println!("{report}");
    if let Ok(path) = std::env::var("HOTRULE_PROMQL_REPORT") {
        std::fs::write(&path, &report).expect("write the report");
    }
    assert!(unexpected.is_empty(), "{} unexpected outcomes:\n{}", unexpected.len(), unexpected.join("\n"));

    // promtool reads the node as it reads Prometheus.
    let time = format!("{}", (START_MS + 197 * 60_000) / 1000);
    for query in [
        "sum by (service) (rate(meter_vm_network_receive[5m]))",
        "(1 - (meter_vm_memory_available / meter_vm_memory_total)) * 100",
        "topk(2, meter_vm_filesystem_percentage)",
        "histogram_quantile(0.9, sum by (le) (rate(meter_vm_request_duration[5m])))",
    ] {
        let from_node = promtool_instant_at(&pair.hotrule_url(), query, Some(&time)).await.expect("promtool query instant on the node");
        let from_prometheus = promtool_instant_at(&pair.oracle_url(), query, Some(&time)).await.expect("promtool query instant on Prometheus");
        assert!(!from_node.is_empty(), "{query}: promtool read nothing from the node");
        let values = |samples: Vec<components::PromSample>| samples.into_iter().map(|s| (s.labels, s.value)).collect::<BTreeMap<_, _>>();
        let (a, b) = (values(from_node), values(from_prometheus));
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{query}: the same series through promtool");
        assert!(a.iter().all(|(labels, v)| close(*v, b[labels])), "{query}: {a:?} vs {b:?}");
    }
    let (start, end) = ((START_MS + 60 * 60_000) / 1000, (START_MS + 180 * 60_000) / 1000);
    let query = "avg by (service) (meter_vm_cpu_load1)";
    let from_node = promtool_range(&pair.hotrule_url(), query, start, end, 300).await.expect("promtool query range on the node");
    let from_prometheus = promtool_range(&pair.oracle_url(), query, start, end, 300).await.expect("promtool query range on Prometheus");
    assert_eq!(from_node.len(), HOSTS, "{from_node:?}");
    let points = |series: Vec<components::PromSeries>| series.into_iter().map(|s| (s.labels, s.values)).collect::<BTreeMap<_, _>>();
    assert_eq!(points(from_node), points(from_prometheus), "{query}: promtool query range");
    tokio::time::timeout(Duration::from_secs(30), pair.shutdown()).await.expect("the node stops");
}
