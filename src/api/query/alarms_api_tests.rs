//! `/query/alarms` parameters, the merge of several nodes' pages, and the answer body (the
//! pure parts); the route itself is tested in `cluster-tests/alarm_records.rs`.

use std::sync::Arc;

use super::*;
use crate::control::outcome::ApplyStatus;
use crate::control::alarms::hooks::message::{AlarmMessage, Tag};
use crate::data::alarm_records::store::{AlarmRecordStore, DEFAULT_RETENTION};
use crate::data::alarm_records::{AlarmRecordReader, AlarmRecordWriter};
use crate::store::series::MemSeriesKv;

/// 2026-11-25T12:00:00Z.
const NOW: i64 = 1_795_608_000_000;

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn refused(list: &[(&str, &str)]) -> String {
    match alarm_request(&pairs(list), NOW) {
        Ok(filter) => panic!("accepted {list:?}: {filter:?}"),
        Err(outcome) => {
            assert_eq!(outcome.status, ApplyStatus::InvalidParameter);
            outcome.message
        }
    }
}

#[test]
fn defaults_and_every_parameter() {
    let (filter, cluster) = alarm_request(&[], NOW).expect("defaults");
    assert_eq!(filter, AlarmFilter { start_ms: NOW - DEFAULT_SPAN_MS, end_ms: NOW, limit: 20, ..AlarmFilter::default() });
    assert_eq!(cluster, None, "the node's default");
    let (filter, cluster) = alarm_request(
        &pairs(&[
            ("start", "2026-11-25 1100"),
            ("end", "1795608000000"),
            ("scope", "SERVICE"),
            ("entity", "checkout"),
            ("id", "Y2hlY2tvdXQ=.1"),
            ("rule", "a_rule, b_rule"),
            ("rule", "c_rule"),
            ("tag", "level=WARNING"),
            ("tag", "url=http://x/?a=b"),
            ("keyword", " more than "),
            ("pageNum", "3"),
            ("pageSize", "50"),
            ("cluster", "false"),
        ]),
        NOW,
    )
    .expect("every parameter");
    assert_eq!(
        filter,
        AlarmFilter {
            start_ms: NOW - 3_600_000,
            end_ms: NOW,
            scope: Some("SERVICE".into()),
            entity_name: Some("checkout".into()),
            entity_id: Some("Y2hlY2tvdXQ=.1".into()),
            rules: vec!["a_rule".into(), "b_rule".into(), "c_rule".into()],
            tags: vec![("level".into(), "WARNING".into()), ("url".into(), "http://x/?a=b".into())],
            keyword: Some(" more than ".into()),
            skip: 100,
            limit: 50,
        }
    );
    assert_eq!(cluster, Some(false));
}

#[test]
fn bad_parameters_are_refused_naming_them() {
    assert!(refused(&[("service", "x")]).contains("unknown query parameter service"));
    assert!(refused(&[("tag", "level")]).contains("key=value"));
    assert!(refused(&[("entity", "a"), ("entity", "b")]).contains("more than once"));
    assert!(refused(&[("start", "yesterday")]).contains("start"));
    assert!(refused(&[("start", "2000"), ("end", "1000")]).contains("before start"));
    assert!(refused(&[("pageSize", "0")]).contains("pageSize"));
    assert!(refused(&[("pageSize", "1001")]).contains("pageSize"));
    assert!(refused(&[("pageNum", "-1")]).contains("pageNum"));
    assert!(refused(&[("pageNum", "11"), ("pageSize", "1000")]).contains("reach past"));
    assert!(refused(&[("cluster", "maybe")]).contains("cluster"));
}

fn message(name: &str, start_time: i64, uuid: &str) -> AlarmMessage {
    AlarmMessage {
        scope_id: 1,
        scope: "SERVICE".into(),
        name: name.into(),
        id0: format!("{name}.1"),
        rule_name: "service_resp_time_rule".into(),
        alarm_message: format!("Response time of service {name} is more than 1000ms"),
        tags: vec![Tag::new("level", "WARNING")],
        start_time,
        expression: "sum(service_resp_time > 1000) >= 3".into(),
        mqe_metrics_snapshot: [("service_resp_time".to_string(), "[{\"value\":\"1200\"}]".to_string())].into(),
        uuid: uuid.into(),
        ..AlarmMessage::default()
    }
}

/// Two nodes' stores; paging through the merge with small pages yields every record once,
/// newest first, and the total of both.
#[test]
fn pages_of_several_nodes_merge_newest_first_without_gaps_or_repeats() {
    let nodes: Vec<(NodeId, AlarmRecordStore)> = [("a", [0, 2, 3, 7]), ("b", [1, 3, 5, 6])]
        .iter()
        .map(|(node, offsets)| {
            let store = AlarmRecordStore::open(Arc::new(MemSeriesKv::new()), DEFAULT_RETENTION).with_clock(Arc::new(|| NOW));
            let messages: Vec<AlarmMessage> = offsets.iter().map(|o| message("svc", NOW - 60_000 + o, &format!("{node}{o}"))).collect();
            store.write(&messages, &[]).expect("write");
            (NodeId(node.to_string()), store)
        })
        .collect();
    let mut seen = Vec::new();
    for page_num in 0..4u64 {
        let filter = AlarmFilter { start_ms: NOW - 3_600_000, end_ms: NOW, skip: page_num * 3, limit: 3, ..AlarmFilter::default() };
        let each = AlarmFilter { skip: 0, limit: filter.skip + filter.limit, ..filter.clone() };
        let pages = nodes.iter().map(|(node, store)| (node.clone(), store.query(&each).expect("read"))).collect();
        let (records, total) = merge_pages(pages, &filter);
        assert_eq!(total, 8);
        seen.extend(records.iter().map(|(node, r)| format!("{}:{}", node.0, r.uuid)));
    }
    assert_eq!(seen, ["a:a7", "b:b6", "b:b5", "b:b3", "a:a3", "a:a2", "b:b1", "a:a0"]);
}

#[test]
fn the_body_has_skywalkings_fields() {
    let mut record = AlarmRecord::firing(&message("checkout", NOW - 1000, "u1"));
    record.recovery_time = Some(NOW);
    let page = ClusterAlarms {
        records: vec![(NodeId("a".into()), record)],
        total: 7,
        nodes: vec![NodeId("a".into())],
        missing: vec![Missing { node: NodeId("b".into()), reason: "no answer within 2s".into() }],
    };
    let body = alarms_body(&page);
    let msg = &body["msgs"][0];
    assert_eq!(msg["startTime"], json!(NOW - 1000));
    assert_eq!(msg["recoveryTime"], json!(NOW));
    assert_eq!(msg["scope"], "SERVICE");
    assert_eq!(msg["scopeId"], 1);
    assert_eq!(msg["id"], "checkout.1");
    assert_eq!(msg["id1"], "");
    assert_eq!(msg["message"], "Response time of service checkout is more than 1000ms");
    assert_eq!(msg["ruleName"], "service_resp_time_rule");
    assert_eq!(msg["uuid"], "u1");
    assert_eq!(msg["tags"], json!([{"key": "level", "value": "WARNING"}]));
    assert_eq!(msg["snapshot"]["expression"], "sum(service_resp_time > 1000) >= 3");
    assert_eq!(msg["snapshot"]["metrics"], json!([{"name": "service_resp_time", "results": [{"value": "1200"}]}]));
    assert_eq!(body["total"], 7);
    assert_eq!(body["nodes"], json!(["a"]));
    assert_eq!(body["partial"], json!([{"node": "b", "reason": "no answer within 2s"}]));
}
