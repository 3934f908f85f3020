//! `/query/logs` parameters and answer bodies (the pure parts; the HTTP route is tested in
//! `cluster-tests/logs.rs`).

use std::collections::BTreeMap;

use hotrule_lal_engine::{ContentType, LogRecord};

use super::*;
use crate::control::outcome::ApplyStatus;
use crate::data::logs::KeptLog;

/// 2025-01-01T12:00:00Z.
const NOW: i64 = 1_735_732_800_000;

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn defaults_and_every_parameter() {
    let filter = log_filter(&[], NOW).expect("defaults");
    assert_eq!(
        filter,
        LogFilter { start_ms: NOW - DEFAULT_SPAN_MS, end_ms: NOW, limit: DEFAULT_LIMIT, order: LogOrder::NewestFirst, ..LogFilter::default() }
    );
    let filter = log_filter(
        &pairs(&[
            ("service", "checkout"),
            ("instance", "checkout-1"),
            ("endpoint", "POST /pay"),
            ("start", "2025-01-01 1100"),
            ("end", "2025-01-01T12:00:00Z"),
            ("tag", "level:ERROR"),
            ("tag", "url:http://x:8080/"),
            ("keyword", " timeout "),
            ("limit", "5"),
            ("order", "OLDEST"),
            ("after", "1735729200000-17"),
        ]),
        NOW,
    )
    .expect("valid");
    assert_eq!(
        filter,
        LogFilter {
            service: Some("checkout".into()),
            instance: Some("checkout-1".into()),
            endpoint: Some("POST /pay".into()),
            start_ms: NOW - 3_600_000,
            end_ms: NOW,
            tags: vec![("level".into(), "ERROR".into()), ("url".into(), "http://x:8080/".into())],
            keyword: Some(" timeout ".into()),
            limit: 5,
            after: Some(LogCursor { timestamp_ms: NOW - 3_600_000, sequence: 17 }),
            order: LogOrder::OldestFirst,
        }
    );
}

#[test]
fn bad_parameters_are_named() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("servce", "a")], "unknown query parameter servce"),
        (&[("service", "a"), ("service", "b")], "service is given more than once"),
        (&[("tag", "level")], "query parameter tag"),
        (&[("tag", ":x")], "query parameter tag"),
        (&[("start", "yesterday")], "query parameter start"),
        (&[("end", "2025-13-01")], "query parameter end"),
        (&[("start", "2025-01-02"), ("end", "2025-01-01")], "before start"),
        (&[("limit", "0")], "query parameter limit"),
        (&[("limit", "10001")], "query parameter limit"),
        (&[("limit", "many")], "query parameter limit"),
        (&[("order", "random")], "query parameter order"),
        (&[("after", "12")], "query parameter after"),
        (&[("after", "a-b")], "query parameter after"),
        (&[("cluster", "maybe")], "query parameter cluster"),
        (&[("after", "12-q1-3")], "is a cluster cursor; read with cluster=true"),
        (&[("cluster", "true"), ("after", "12-3")], "is not a cluster cursor (<timestamp ms>-<node id>-<sequence>"),
        (&[("cluster", "true"), ("after", "12-q1-x")], "is not a cluster cursor"),
    ];
    for (list, needle) in cases {
        let error = log_filter(&pairs(list), NOW).expect_err(needle);
        assert_eq!(error.status, ApplyStatus::InvalidParameter, "{needle}");
        assert!(error.message.contains(needle), "{needle}: {}", error.message);
    }
}

#[test]
fn cursors_round_trip_as_text() {
    for cursor in [LogCursor { timestamp_ms: NOW, sequence: 0 }, LogCursor { timestamp_ms: -5, sequence: u64::MAX }] {
        assert_eq!(parse_cursor(&cursor_text(cursor)), Some(cursor));
    }
    assert_eq!(cursor_text(LogCursor { timestamp_ms: 12, sequence: 3 }), "12-3");
}

#[test]
fn bodies_carry_every_field_and_the_next_cursor() {
    let record = LogRecord {
        service: "checkout".into(),
        instance: "checkout-1".into(),
        endpoint: "/pay".into(),
        layer: "GENERAL".into(),
        timestamp_ms: NOW,
        trace_id: "t".into(),
        segment_id: "s".into(),
        span_id: Some(2),
        content_type: ContentType::Json,
        content: "{}".into(),
        tags: vec![("level".into(), "ERROR".into())],
        output_type: Some("SlowSQL".into()),
        fields: BTreeMap::from([("latency".to_string(), serde_json::json!(12))]),
    };
    let stored = StoredLog {
        cursor: LogCursor { timestamp_ms: NOW, sequence: 4 },
        log: KeptLog { rule: "GENERAL:default".into(), file: "lal/default".into(), record, received_ms: NOW + 1 },
    };
    let json = log_json(&stored);
    assert_eq!(
        json,
        serde_json::json!({
            "cursor": format!("{NOW}-4"), "timestamp": NOW, "time": "2025-01-01T12:00:00.000Z",
            "service": "checkout", "instance": "checkout-1", "endpoint": "/pay", "layer": "GENERAL",
            "traceId": "t", "segmentId": "s", "spanId": 2, "contentType": "JSON", "content": "{}",
            "tags": [{"key": "level", "value": "ERROR"}], "outputType": "SlowSQL", "fields": {"latency": 12},
            "rule": "GENERAL:default", "file": "lal/default", "receivedMs": NOW + 1,
        })
    );
    let full = LogFilter { limit: 1, ..LogFilter::default() };
    assert_eq!(logs_body(&full, std::slice::from_ref(&stored))["next"], format!("{NOW}-4"));
    let roomy = LogFilter { limit: 2, ..LogFilter::default() };
    assert!(logs_body(&roomy, &[stored])["next"].is_null(), "a page that is not full has no next");
}

#[test]
fn cluster_reads_take_cluster_cursors() {
    let (filter, reach) = log_request(&pairs(&[("limit", "3")]), NOW).expect("local");
    assert_eq!((filter.after, reach), (None, LogsReach::Node));
    let (_, reach) = log_request(&pairs(&[("cluster", "true")]), NOW).expect("cluster");
    assert_eq!(reach, LogsReach::Cluster { after: None });
    let (filter, reach) = log_request(&pairs(&[("cluster", "TRUE"), ("after", "12-node-2-3"), ("order", "oldest")]), NOW).expect("cluster cursor");
    assert_eq!(filter.after, None, "each node's position comes from the cluster cursor");
    assert_eq!(reach, LogsReach::Cluster { after: Some(ClusterCursor { timestamp_ms: 12, node: NodeId("node-2".into()), sequence: 3 }) });
    let (filter, reach) = log_request(&pairs(&[("cluster", "false"), ("after", "12-3")]), NOW).expect("local cursor");
    assert_eq!((filter.after, reach), (Some(LogCursor { timestamp_ms: 12, sequence: 3 }), LogsReach::Node));
}

#[test]
fn cluster_bodies_name_each_log_s_node_and_who_did_not_answer() {
    let stored = |timestamp_ms: i64, sequence: u64| StoredLog {
        cursor: LogCursor { timestamp_ms, sequence },
        log: KeptLog { rule: "r".into(), file: "lal/r".into(), record: LogRecord { timestamp_ms, ..LogRecord::default() }, received_ms: 0 },
    };
    let page = ClusterLogs {
        logs: vec![NodeLog { node: NodeId("q1".into()), stored: stored(NOW, 4) }, NodeLog { node: NodeId("q2".into()), stored: stored(NOW, 1) }],
        nodes: vec![NodeId("q1".into()), NodeId("q2".into())],
        missing: vec![Missing { node: NodeId("q3".into()), reason: "no answer within 2s".into() }],
    };
    let full = LogFilter { limit: 2, order: LogOrder::OldestFirst, ..LogFilter::default() };
    let body = cluster_logs_body(&full, &page);
    assert_eq!(body["cluster"], true);
    assert_eq!(body["logs"][0]["node"], "q1");
    assert_eq!(body["logs"][0]["cursor"], format!("{NOW}-q1-4"));
    assert_eq!(body["logs"][1]["cursor"], format!("{NOW}-q2-1"));
    assert_eq!(body["next"], format!("{NOW}-q2-1"));
    assert_eq!(body["nodes"], serde_json::json!(["q1", "q2"]));
    assert_eq!(body["partial"], serde_json::json!([{"node": "q3", "reason": "no answer within 2s"}]));
    let roomy = LogFilter { limit: 3, ..full };
    assert!(cluster_logs_body(&roomy, &page)["next"].is_null());
}
