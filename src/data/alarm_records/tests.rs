//! The alarm-record store on the in-memory key space: records written and read back by every
//! filter and page, recoveries joined, retention deleting only what expired, a reopened store
//! keeping its records, and a corrupt value read as an error.

use std::sync::Arc;

use super::store::{AlarmRecordStore, DEFAULT_RETENTION};
use super::*;
use crate::store::series::{MemSeriesKv, SeriesKv, SeriesOp};

/// 2026-11-25T12:00:00Z.
const NOW: i64 = 1_795_608_000_000;

fn message(rule: &str, name: &str, start_time: i64, uuid: &str) -> AlarmMessage {
    AlarmMessage {
        scope_id: 1,
        scope: "SERVICE".into(),
        name: name.into(),
        id0: format!("{name}.1"),
        id1: String::new(),
        rule_name: rule.into(),
        alarm_message: format!("Response time of service {name} is more than 1000ms"),
        tags: vec![Tag::new("level", if rule.contains("sla") { "CRITICAL" } else { "WARNING" })],
        start_time,
        expression: "sum(service_resp_time > 1000) >= 3".into(),
        mqe_metrics_snapshot: [("service_resp_time".to_string(), "[{\"value\":1200}]".to_string())].into(),
        uuid: uuid.into(),
        layers: vec!["GENERAL".into()],
        ..AlarmMessage::default()
    }
}

fn store(kv: &Arc<MemSeriesKv>) -> AlarmRecordStore {
    AlarmRecordStore::open(kv.clone(), DEFAULT_RETENTION).with_clock(Arc::new(|| NOW))
}

fn all() -> AlarmFilter {
    AlarmFilter { start_ms: NOW - 3_600_000, end_ms: NOW, limit: 100, ..AlarmFilter::default() }
}

fn uuids(page: &AlarmPage) -> Vec<&str> {
    page.records.iter().map(|r| r.uuid.as_str()).collect()
}

/// Six fires, a minute apart, oldest `u0`; `u1` and `u4` recovered.
fn filled() -> (Arc<MemSeriesKv>, AlarmRecordStore) {
    let kv = Arc::new(MemSeriesKv::new());
    let store = store(&kv);
    let fires = [
        ("service_resp_time_rule", "checkout"),
        ("service_sla_rule", "checkout"),
        ("service_resp_time_rule", "payment"),
        ("service_sla_rule", "payment"),
        ("service_resp_time_rule", "checkout"),
        ("service_resp_time_rule", "cart"),
    ];
    let messages: Vec<AlarmMessage> =
        fires.iter().enumerate().map(|(i, (rule, name))| message(rule, name, NOW - 600_000 + i as i64 * 60_000, &format!("u{i}"))).collect();
    store.write(&messages[..3], &[]).expect("write");
    let recoveries = [AlarmRecoveryMessage::of(messages[1].clone(), NOW - 100_000), AlarmRecoveryMessage::of(messages[4].clone(), NOW - 50_000)];
    store.write(&messages[3..], &recoveries).expect("write");
    (kv, store)
}

#[test]
fn records_read_back_newest_first_with_every_field_and_their_recoveries() {
    let (_, store) = filled();
    let page = store.query(&all()).expect("read");
    assert_eq!(page.total, 6);
    assert_eq!(uuids(&page), ["u5", "u4", "u3", "u2", "u1", "u0"]);
    let u4 = &page.records[1];
    let mut want = AlarmRecord::firing(&message("service_resp_time_rule", "checkout", NOW - 600_000 + 4 * 60_000, "u4"));
    want.recovery_time = Some(NOW - 50_000);
    assert_eq!(*u4, want);
    assert_eq!(page.records[4].recovery_time, Some(NOW - 100_000));
    assert!(page.records.iter().filter(|r| !["u1", "u4"].contains(&r.uuid.as_str())).all(|r| r.recovery_time.is_none()));
}

#[test]
fn every_filter_narrows_and_pages_count_the_total() {
    let (_, store) = filled();
    let read = |filter: AlarmFilter| store.query(&filter).expect("read");
    let by_rule = read(AlarmFilter { rules: vec!["service_sla_rule".into()], ..all() });
    assert_eq!((uuids(&by_rule), by_rule.total), (vec!["u3", "u1"], 2));
    let two_rules = read(AlarmFilter { rules: vec!["service_sla_rule".into(), "service_resp_time_rule".into()], ..all() });
    assert_eq!(two_rules.total, 6);
    assert_eq!(uuids(&read(AlarmFilter { entity_name: Some("checkout".into()), ..all() })), ["u4", "u1", "u0"]);
    assert_eq!(uuids(&read(AlarmFilter { entity_id: Some("payment.1".into()), ..all() })), ["u3", "u2"]);
    assert_eq!(uuids(&read(AlarmFilter { scope: Some("service".into()), ..all() })).len(), 6, "scope in any case");
    assert_eq!(read(AlarmFilter { scope: Some("ENDPOINT".into()), ..all() }).total, 0);
    assert_eq!(uuids(&read(AlarmFilter { tags: vec![("level".into(), "CRITICAL".into())], ..all() })), ["u3", "u1"]);
    assert_eq!(uuids(&read(AlarmFilter { keyword: Some("service cart".into()), ..all() })), ["u5"]);
    assert_eq!(read(AlarmFilter { keyword: Some("SERVICE CART".into()), ..all() }).total, 0, "case-sensitive");
    // Time bounds are inclusive, on the start time.
    let range = read(AlarmFilter { start_ms: NOW - 540_000, end_ms: NOW - 420_000, ..all() });
    assert_eq!(uuids(&range), ["u3", "u2", "u1"]);
    // Pages: two of two, the third partly full, the fourth empty; the total every time.
    let page = |skip, limit| read(AlarmFilter { skip, limit, ..all() });
    assert_eq!((uuids(&page(0, 2)), page(0, 2).total), (vec!["u5", "u4"], 6));
    assert_eq!(uuids(&page(2, 2)), ["u3", "u2"]);
    assert_eq!(uuids(&page(4, 4)), ["u1", "u0"]);
    assert_eq!((uuids(&page(6, 2)).len(), page(6, 2).total), (0, 6));
    assert_eq!(page(0, 0).total, 6, "a zero page still counts");
    assert_eq!(read(AlarmFilter { start_ms: NOW, end_ms: NOW - 1, ..all() }), AlarmPage::default());
}

#[test]
fn retention_deletes_only_expired_records_and_recoveries() {
    let kv = Arc::new(MemSeriesKv::new());
    let store = store(&kv);
    let day = 24 * 3_600_000;
    let old = message("r", "old", NOW - 2 * day, "old");
    let kept = message("r", "kept", NOW - day, "kept");
    store.write(&[old.clone(), kept.clone()], &[AlarmRecoveryMessage::of(old, NOW - 2 * day + 60_000)]).expect("write");
    let wide = AlarmFilter { start_ms: 0, end_ms: NOW, ..all() };
    assert_eq!(store.query(&wide).expect("read").total, 2);
    // A day and a half later the old one (started 3.5 days ago) is gone, with its recovery.
    assert!(!store.expire(NOW).expect("nothing expired yet"));
    assert!(store.expire(NOW + day + day / 2).expect("expire"));
    let page = store.query(&wide).expect("read");
    assert_eq!(uuids(&page), ["kept"]);
    let recoveries = kv.scan_range(&[keys::RECOVERY_PREFIX], &[keys::RECOVERY_PREFIX + 1], 10).expect("scan");
    assert!(recoveries.is_empty(), "the recovery expired with its record");
    assert!(!store.expire(NOW + day + day / 2).expect("idle"), "an idle round issues nothing");
    // A fire already past retention is not written.
    store.write(&[message("r", "late", NOW - 4 * day, "late")], &[]).expect("write");
    assert_eq!(store.query(&wide).expect("read").total, 1);
}

#[test]
fn a_reopened_store_keeps_its_records() {
    let (kv, store) = filled();
    drop(store);
    let reopened = self::store(&kv);
    let page = reopened.query(&all()).expect("read");
    assert_eq!(page.total, 6);
    assert_eq!(page.records[1].recovery_time, Some(NOW - 50_000));
}

#[test]
fn a_corrupt_value_is_an_error_naming_the_key() {
    let (kv, store) = filled();
    let cut = |value: &[u8]| value[..value.len() - 1].to_vec();
    let good = codec::encode_record(&AlarmRecord::firing(&message("r", "x", NOW - 1000, "bad")));
    for (key, value) in [
        (keys::record_key(NOW - 1000, "bad"), cut(&good)),
        (keys::record_key(NOW - 1000, "bad"), vec![9]),
        (keys::record_key(NOW - 1000, "bad"), [good.as_slice(), &[0]].concat()),
    ] {
        kv.write(&[SeriesOp::Put { key, value }], true).expect("put");
        match store.query(&all()) {
            Err(AlarmRecordError::Corrupt { key, .. }) => assert!(key.contains("bad"), "{key}"),
            other => panic!("not a corrupt error: {other:?}"),
        }
    }
    kv.write(&[SeriesOp::Put { key: keys::record_key(NOW - 1000, "bad"), value: good }], true).expect("put");
    kv.write(&[SeriesOp::Put { key: keys::recovery_key(NOW - 1000, "bad"), value: vec![1, 2] }], true).expect("put");
    assert!(matches!(store.query(&all()), Err(AlarmRecordError::Corrupt { .. })), "a corrupt recovery too");
    // A forged count does not allocate: it is refused.
    let mut forged = vec![codec::FORMAT_VERSION, 0, 0, 0, 1];
    for _ in 0..6 {
        forged.extend_from_slice(&0u32.to_be_bytes());
    }
    forged.extend_from_slice(&u32::MAX.to_be_bytes());
    assert!(codec::decode_record(&forged, 0, "u").is_err());
}

#[test]
fn a_failed_write_is_an_error() {
    let kv = Arc::new(MemSeriesKv::new());
    kv.set_fail_writes(true);
    assert!(matches!(store(&kv).write(&[message("r", "x", NOW, "u")], &[]), Err(AlarmRecordError::Kv(_))));
}
