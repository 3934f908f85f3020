//! What `hotrule bench ingest` checks after a run: that each receiver holds what the stream sent
//! it, and when hotrule's node has finished storing it. Pure: the expected values are derived
//! from the [`Stream`] and the rounds each host had answered 2xx
//! ([`Outcome::accepted_rounds`](super::ingest::Outcome)); the receivers' answers are parsed
//! into the same shape and compared. The IO is in `ingest_node.rs` and `prometheus.rs`.
//!
//! - hotrule evaluates the stream with `otel-rules/vm.yaml` (its filter: `job_name ==
//!   'vm-monitoring'`; the service is the host of `instance`, `host-N`). Two of its rules add
//!   gauges of one scrape and nothing else: `meter_vm_memory_total` = `node_memory_MemTotal_bytes`
//!   (the same every round) and `meter_vm_memory_buff_cache` = `node_memory_Buffers_bytes +
//!   node_memory_Cached_bytes` (it advances every round). An evaluation emits a long
//!   (SkyWalking's `getValue`, [`to_long`]); the minute cell of an `avg` metric holds the sum of
//!   the values emitted in that minute over their count (integer division, at least 1 when the
//!   sum is positive). So a host's expected minute value is that average over its accepted
//!   rounds stamped in the minute: a round lost, evaluated twice, or filed under another host or
//!   minute changes it.
//! - Prometheus holds every sample it answered 2xx for: each host has exactly the stream's series,
//!   and the newest value of a counter (`node_context_switches_total`) and of a gauge
//!   (`node_memory_MemAvailable_bytes`) is what the host's last accepted round sent.

use std::collections::BTreeMap;
use std::fmt;

use hotrule_mal_engine::{minute_bucket, to_long};

use super::ingest_stream::Stream;

/// A stored metric of `otel-rules/vm.yaml` that is the sum of gauges of one host's scrape
/// (`exp: a + b`, or one gauge passed through).
#[derive(Debug, Clone, Copy)]
pub struct GaugeSum {
    pub metric: &'static str,
    pub inputs: &'static [&'static str],
}

/// The hotrule metrics checked, as `otel-rules/vm.yaml` defines them.
pub const HOTRULE_CHECKS: [GaugeSum; 2] = [
    GaugeSum { metric: "meter_vm_memory_total", inputs: &["node_memory_MemTotal_bytes"] },
    GaugeSum { metric: "meter_vm_memory_buff_cache", inputs: &["node_memory_Buffers_bytes", "node_memory_Cached_bytes"] },
];

/// The Prometheus series whose newest value per host is checked.
pub const PROMETHEUS_LAST: [&str; 2] = ["node_context_switches_total", "node_memory_MemAvailable_bytes"];

/// The family of hotrule's `/metrics` that is 0 when its dispatch is idle.
pub const PENDING_FAMILY: &str = "hotrule_dispatch_pending_batches";

/// Where a value is: a host (hotrule's service `host-N`, Prometheus' `instance`) and, for a
/// stored minute, its bucket (`yyyyMMddHHmm`).
pub type Point = (String, Option<i64>);

/// One value a receiver holds that differs from what the stream sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub metric: String,
    pub host: String,
    pub minute: Option<i64>,
    /// None: the stream sent nothing there; `got` None: the receiver holds nothing there.
    pub expected: Option<String>,
    pub got: Option<String>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let or_nothing = |v: &Option<String>| v.clone().unwrap_or_else(|| "nothing".into());
        write!(f, "{} of {}", self.metric, self.host)?;
        if let Some(minute) = self.minute {
            write!(f, " in minute {minute}")?;
        }
        write!(f, ": expected {}, got {}", or_nothing(&self.expected), or_nothing(&self.got))
    }
}

/// Every point where `got` differs from `expected`, a point missing on either side included.
pub fn compare<V: PartialEq + fmt::Display>(metric: &str, expected: &BTreeMap<Point, V>, got: &BTreeMap<Point, V>) -> Vec<Mismatch> {
    let mut points: Vec<&Point> = expected.keys().chain(got.keys()).collect();
    points.sort();
    points.dedup();
    points
        .into_iter()
        .filter_map(|point| {
            let (want, have) = (expected.get(point), got.get(point));
            (want != have).then(|| Mismatch {
                metric: metric.to_string(),
                host: point.0.clone(),
                minute: point.1,
                expected: want.map(ToString::to_string),
                got: have.map(ToString::to_string),
            })
        })
        .collect()
}

/// The run's error for `mismatches` found at `receiver`, the first ten spelled out; none when
/// there are none.
pub fn failure(receiver: &str, mismatches: &[Mismatch]) -> Option<String> {
    if mismatches.is_empty() {
        return None;
    }
    let first: Vec<String> = mismatches.iter().take(10).map(|m| format!("  {m}")).collect();
    Some(format!("{receiver} does not hold what the stream sent ({} mismatches):\n{}", mismatches.len(), first.join("\n")))
}

/// The service hotrule files host `host`'s values under (the host part of its `instance`).
pub fn service_of(host: usize) -> String {
    let instance = Stream::instance(host);
    instance.rsplit_once(':').map_or(instance.clone(), |(name, _)| name.to_string())
}

/// The minute values of `check` hotrule must hold for `accepted` (per host, the rounds answered
/// 2xx), per service and minute.
pub fn expected_minutes(stream: &Stream, accepted: &BTreeMap<usize, Vec<usize>>, check: &GaugeSum) -> Result<BTreeMap<Point, i64>, String> {
    // (sum, count) of the emitted longs per point.
    let mut cells: BTreeMap<Point, (i64, i64)> = BTreeMap::new();
    for (&host, rounds) in accepted {
        for &round in rounds {
            let mut value: Option<f64> = None;
            for input in check.inputs {
                let sent = stream
                    .value(host, input, &[], round)
                    .ok_or_else(|| format!("{}: the stream has no series {input}", check.metric))?;
                value = Some(value.map_or(sent, |sum| sum + sent));
            }
            let value = value.ok_or_else(|| format!("{}: no inputs", check.metric))?;
            let cell = cells.entry((service_of(host), Some(minute_bucket(stream.timestamp_ms(round))))).or_default();
            cell.0 += to_long(value);
            cell.1 += 1;
        }
    }
    Ok(cells
        .into_iter()
        .map(|(point, (sum, count))| {
            let mean = sum / count;
            (point, if mean == 0 && sum > 0 { 1 } else { mean })
        })
        .collect())
}

/// `/query/metrics`' answer as (the metric's storage function, its single values per service
/// and minute).
pub fn stored_minutes(answer: &serde_json::Value) -> Result<(String, BTreeMap<Point, i64>), String> {
    let function = answer["metric"]["function"].as_str().unwrap_or("none (the node knows no such metric)").to_string();
    let series = answer["series"].as_array().ok_or_else(|| format!("no series in {answer}"))?;
    let mut values = BTreeMap::new();
    for one in series {
        let service = one["entity"]["service"].as_str().ok_or_else(|| format!("a series without a service: {one}"))?;
        for point in one["points"].as_array().ok_or_else(|| format!("a series without points: {one}"))? {
            let (Some(bucket), Some(value)) = (point["bucket"].as_i64(), point["value"].as_i64()) else {
                return Err(format!("{service}: not a single value in a minute bucket: {point}"));
            };
            values.insert((service.to_string(), Some(bucket)), value);
        }
    }
    Ok((function, values))
}

/// The newest value of `name` (no labels besides `job` and `instance`) per `instance` for the
/// last rounds Prometheus answered 2xx.
pub fn expected_last(stream: &Stream, last_rounds: &BTreeMap<usize, usize>, name: &str) -> Result<BTreeMap<Point, f64>, String> {
    last_rounds
        .iter()
        .map(|(&host, &round)| {
            let value = stream.value(host, name, &[], round).ok_or_else(|| format!("the stream has no series {name}"))?;
            Ok(((Stream::instance(host), None), value))
        })
        .collect()
}

/// Series Prometheus must hold per `instance`: the whole scrape for every host with an accepted
/// round.
pub fn expected_series(stream: &Stream, last_rounds: &BTreeMap<usize, usize>) -> BTreeMap<Point, f64> {
    last_rounds.keys().map(|&host| ((Stream::instance(host), None), stream.series_per_host() as f64)).collect()
}

/// An instant-vector answer of Prometheus' `/api/v1/query` as a value per `instance`.
pub fn vector_by_instance(answer: &serde_json::Value) -> Result<BTreeMap<Point, f64>, String> {
    if answer["status"] != "success" || answer["data"]["resultType"] != "vector" {
        return Err(format!("not a vector: {answer}"));
    }
    let mut values = BTreeMap::new();
    for sample in answer["data"]["result"].as_array().into_iter().flatten() {
        let instance = sample["metric"]["instance"].as_str().ok_or_else(|| format!("a sample without an instance: {sample}"))?;
        let value = sample["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("{instance}: not a value: {sample}"))?;
        if values.insert((instance.to_string(), None), value).is_some() {
            return Err(format!("{instance} twice in {answer}"));
        }
    }
    Ok(values)
}

/// The metric batches pending in a node's dispatch, from its `/metrics` exposition; None when
/// the node does not expose [`PENDING_FAMILY`].
pub fn pending_batches(exposition: &str) -> Option<u64> {
    exposition.lines().find_map(|line| {
        let rest = line.strip_prefix(PENDING_FAMILY)?.strip_prefix('{')?;
        let (labels, value) = rest.split_once("} ")?;
        if !labels.split(',').any(|label| label == "queue=\"metrics\"") {
            return None;
        }
        value.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 58 s into a minute, so rounds 0 and 1 fall in one minute and rounds 2 to 61 in the next.
    const T0_MS: i64 = 1_795_600_020_000 - 2_000;

    fn stream() -> Stream {
        Stream::node_exporter(3, T0_MS).expect("stream")
    }

    fn rounds(pairs: &[(usize, &[usize])]) -> BTreeMap<usize, Vec<usize>> {
        pairs.iter().map(|(host, rounds)| (*host, rounds.to_vec())).collect()
    }

    fn point(service: &str, minute: i64) -> Point {
        (service.to_string(), Some(minute))
    }

    #[test]
    fn expected_minutes_average_the_emitted_longs_of_the_accepted_rounds_per_host_and_minute() {
        let stream = stream();
        let (first, second) = (minute_bucket(T0_MS), minute_bucket(T0_MS + 2_000));
        assert_eq!(second - first, 1, "rounds 2.. are in the next minute");
        // Host 0: rounds 0, 1 | 2, 3, 5 (4 refused); host 2: round 0 only; host 1: nothing.
        let accepted = rounds(&[(0, &[0, 1, 2, 3, 5]), (2, &[0])]);
        let total = expected_minutes(&stream, &accepted, &HOTRULE_CHECKS[0]).expect("memory_total");
        // scrape1.prom's node_memory_MemTotal_bytes, the same in scrape2.prom.
        let mem_total = 25_276_510_208;
        let want: BTreeMap<Point, i64> =
            [(point("host-0", first), mem_total), (point("host-0", second), mem_total), (point("host-2", first), mem_total)].into();
        assert_eq!(total, want);
        // Buffers + Cached: 38866944 + 20958851072 in round 0, (573440 + 206876672) more each round.
        let buff_cache = expected_minutes(&stream, &accepted, &HOTRULE_CHECKS[1]).expect("memory_buff_cache");
        let at = |round: i64| 20_997_718_016 + 207_450_112 * round;
        let want: BTreeMap<Point, i64> = [
            (point("host-0", first), (at(0) + at(1)) / 2),
            (point("host-0", second), (at(2) + at(3) + at(5)) / 3),
            (point("host-2", first), at(0)),
        ]
        .into();
        assert_eq!(buff_cache, want);
        // A round evaluated twice is another average.
        let twice = expected_minutes(&stream, &rounds(&[(0, &[0, 1, 1])]), &HOTRULE_CHECKS[1]).expect("twice");
        assert_eq!(twice[&point("host-0", first)], (at(0) + 2 * at(1)) / 3);
        let unknown = GaugeSum { metric: "meter_x", inputs: &["node_no_such_gauge"] };
        assert!(expected_minutes(&stream, &accepted, &unknown).is_err(), "a series the stream lacks is an error");
    }

    #[test]
    fn stored_minutes_read_the_query_answer_and_compare_reports_every_difference() {
        let answer = serde_json::json!({
            "metric": {"name": "meter_vm_memory_total", "function": "avg"},
            "series": [
                {"entity": {"scope": "SERVICE", "service": "host-0"},
                 "points": [{"bucket": 202601011200_i64, "value": 7}, {"bucket": 202601011201_i64, "value": 8}]},
                {"entity": {"scope": "SERVICE", "service": "host-1"}, "points": [{"bucket": 202601011200_i64, "value": 9}]}
            ]
        });
        let (function, stored) = stored_minutes(&answer).expect("parsed");
        assert_eq!(function, "avg");
        let expected: BTreeMap<Point, i64> =
            [(point("host-0", 202601011200), 7), (point("host-0", 202601011201), 8), (point("host-1", 202601011200), 9)].into();
        assert_eq!(stored, expected);
        assert!(compare("meter_vm_memory_total", &expected, &stored).is_empty(), "equal values pass");
        assert_eq!(failure("hotrule", &[]), None);

        let mut want = expected.clone();
        want.insert(point("host-1", 202601011200), 10);
        want.insert(point("host-2", 202601011200), 9);
        want.remove(&point("host-0", 202601011201));
        let mismatches = compare("meter_vm_memory_total", &want, &stored);
        let lines: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "meter_vm_memory_total of host-0 in minute 202601011201: expected nothing, got 8",
                "meter_vm_memory_total of host-1 in minute 202601011200: expected 10, got 9",
                "meter_vm_memory_total of host-2 in minute 202601011200: expected 9, got nothing",
            ]
        );
        let message = failure("hotrule", &mismatches).expect("a failure");
        assert!(message.contains("3 mismatches") && message.contains("expected 10, got 9"), "{message}");

        let labeled = serde_json::json!({"metric": null, "series": [{"entity": {"service": "host-0"}, "points": [{"bucket": 1, "value": {"a": 1}}]}]});
        assert!(stored_minutes(&labeled).is_err(), "only single values are read");
        assert!(stored_minutes(&serde_json::json!({"status": "error"})).is_err());
    }

    #[test]
    fn prometheus_must_hold_each_hosts_whole_scrape_and_its_last_values() {
        let stream = stream();
        let last_rounds: BTreeMap<usize, usize> = [(0, 4), (1, 7), (2, 0)].into();
        let series = expected_series(&stream, &last_rounds);
        assert_eq!(series.len(), 3);
        assert_eq!(series[&(String::from("host-1:9100"), None)], stream.series_per_host() as f64);
        let switches = expected_last(&stream, &last_rounds, PROMETHEUS_LAST[0]).expect("counter");
        // node_context_switches_total: 3425683 in scrape1.prom, 3566219 in scrape2.prom.
        assert_eq!(switches[&(String::from("host-1:9100"), None)], 3_425_683.0 + 140_536.0 * 7.0);
        assert_eq!(switches[&(String::from("host-2:9100"), None)], 3_425_683.0);
        assert!(expected_last(&stream, &last_rounds, PROMETHEUS_LAST[1]).is_ok(), "the gauge is in the stream");

        let answer = |values: &[(&str, f64)]| {
            let result: Vec<serde_json::Value> = values
                .iter()
                .map(|(instance, v)| serde_json::json!({"metric": {"instance": instance}, "value": [1.5, v.to_string()]}))
                .collect();
            serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": result}})
        };
        let all = [("host-0:9100", 3_425_683.0 + 140_536.0 * 4.0), ("host-1:9100", 4_409_435.0), ("host-2:9100", 3_425_683.0)];
        let held = vector_by_instance(&answer(&all)).expect("vector");
        assert!(compare(PROMETHEUS_LAST[0], &switches, &held).is_empty(), "{:?}", compare(PROMETHEUS_LAST[0], &switches, &held));
        // Host 2 missing, host 0 one round behind.
        let behind = vector_by_instance(&answer(&[("host-0:9100", 3_425_683.0 + 140_536.0 * 3.0), ("host-1:9100", 4_409_435.0)])).expect("vector");
        let mismatches = compare(PROMETHEUS_LAST[0], &switches, &behind);
        assert_eq!(mismatches.len(), 2, "{mismatches:?}");
        assert_eq!(mismatches[0].host, "host-0:9100");
        assert_eq!(mismatches[1].to_string(), "node_context_switches_total of host-2:9100: expected 3425683, got nothing");
        assert!(vector_by_instance(&serde_json::json!({"status": "error"})).is_err());
    }

    #[test]
    fn the_pending_gauge_is_read_for_the_metrics_queue_only() {
        let exposition = "# TYPE hotrule_dispatch_pending_batches gauge\n\
            hotrule_dispatch_pending_batches{queue=\"logs\"} 0\n\
            hotrule_dispatch_pending_batches{queue=\"metrics\"} 12\n\
            hotrule_values_stored_total{metric=\"meter_vm_cpu_load1\"} 4\n# EOF\n";
        assert_eq!(pending_batches(exposition), Some(12));
        assert_eq!(pending_batches(&exposition.replace("} 12", "} 0")), Some(0), "idle");
        assert_eq!(pending_batches("hotrule_dispatch_pending_batches{queue=\"logs\"} 3\n"), None, "the log queue is not it");
        assert_eq!(pending_batches("hotrule_values_stored_total 1\n"), None, "a node without the gauge");
        // The gauge as the node renders it.
        let telemetry = crate::base::self_metrics::SelfMetrics::new();
        telemetry.dispatch_pending_batches.get_or_create(&crate::base::self_metrics::labels([("queue", "metrics")])).set(5);
        assert_eq!(pending_batches(&telemetry.render()), Some(5));
    }
}
