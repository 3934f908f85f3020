//! `/query/logs` parameters and answer bodies (the pure parts; the HTTP route is tested in
//! `cluster-tests/logs.rs`).

use std::collections::BTreeMap;

use hotrule_lal_engine::{ContentType, LogRecord};

use super::*;
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
