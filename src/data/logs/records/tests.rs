//! The log store over the in-memory twin of the `logs` key space.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hotrule_lal_engine::{ContentType, LogRecord};
use serde_json::json;

use super::*;
use crate::data::logs::{LogCursor, LogOrder};
use crate::store::series::MemSeriesKv;
use crate::base::self_metrics::labels;

/// 2026-11-25T12:00:00Z.
const NOW: i64 = 1_795_608_000_000;
const HOUR: i64 = 3_600_000;

fn log(service: &str, timestamp_ms: i64, content: &str) -> KeptLog {
    KeptLog {
        rule: "GENERAL:default".into(),
        file: "lal/default".into(),
        record: LogRecord {
            service: service.into(),
            instance: format!("{service}-1"),
            endpoint: String::new(),
            layer: "GENERAL".into(),
            timestamp_ms,
            trace_id: String::new(),
            segment_id: String::new(),
            span_id: None,
            content_type: ContentType::Text,
            content: content.into(),
            tags: Vec::new(),
            output_type: None,
            fields: BTreeMap::new(),
        },
        received_ms: timestamp_ms + 5,
    }
}

fn open(kv: &Arc<MemSeriesKv>) -> LogStore {
    LogStore::open(kv.clone(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new())).expect("open").with_clock(Arc::new(|| NOW))
}

fn store() -> (Arc<MemSeriesKv>, LogStore) {
    let kv = Arc::new(MemSeriesKv::new());
    let store = open(&kv);
    (kv, store)
}

fn filter(start_ms: i64, end_ms: i64, limit: usize, order: LogOrder) -> LogFilter {
    LogFilter { start_ms, end_ms, limit, order, ..LogFilter::default() }
}

fn contents(logs: &[StoredLog]) -> Vec<&str> {
    logs.iter().map(|l| l.log.record.content.as_str()).collect()
}

#[test]
fn every_field_round_trips() {
    let (_kv, store) = store();
    let mut full = log("checkout", NOW - 1000, "{\"status\":500}");
    full.record.endpoint = "POST /pay".into();
    full.record.layer = "MYSQL".into();
    full.record.trace_id = "trace-1".into();
    full.record.segment_id = "segment-1".into();
    full.record.span_id = Some(-3);
    full.record.content_type = ContentType::Json;
    full.record.tags = vec![("level".into(), "ERROR".into()), ("level".into(), "WARN".into()), ("ü".into(), "".into())];
    full.record.output_type = Some("SlowSQL".into());
    full.record.fields = BTreeMap::from([
        ("latency".to_string(), json!(1234)),
        ("statement".to_string(), json!("select 1")),
        ("nested".to_string(), json!({"a": [1, 2.5, null, true]})),
    ]);
    let mut bare = log("checkout", NOW - 500, "");
    bare.record.content_type = ContentType::None;
    let mut yaml = log("checkout", NOW - 400, "a: 1");
    yaml.record.content_type = ContentType::Yaml;
    store.write(&[full.clone(), bare.clone(), yaml.clone()]).expect("write");

    let read = store.query(&filter(NOW - HOUR, NOW, 10, LogOrder::OldestFirst)).expect("read");
    let logs: Vec<KeptLog> = read.iter().map(|s| s.log.clone()).collect();
    assert_eq!(logs, vec![full, bare, yaml]);
    assert_eq!(read[0].cursor.timestamp_ms, NOW - 1000);
}

#[test]
fn filters_select_by_names_tags_keyword_and_time() {
    let (_kv, store) = store();
    let mut tagged = log("a", NOW - 3000, "GET /x took 12ms");
    tagged.record.tags = vec![("level".into(), "ERROR".into()), ("region".into(), "eu".into())];
    tagged.record.endpoint = "/x".into();
    let other = log("b", NOW - 2000, "GET /y took 3ms");
    let late = log("a", NOW - 1000, "POST /z");
    store.write(&[tagged, other, late]).expect("write");

    let read = |f: LogFilter| contents(&store.query(&f).expect("read")).into_iter().map(str::to_string).collect::<Vec<_>>();
    let all = filter(NOW - HOUR, NOW, 10, LogOrder::OldestFirst);
    assert_eq!(read(LogFilter { service: Some("a".into()), ..all.clone() }), ["GET /x took 12ms", "POST /z"]);
    assert_eq!(read(LogFilter { instance: Some("b-1".into()), ..all.clone() }), ["GET /y took 3ms"]);
    assert_eq!(read(LogFilter { endpoint: Some("/x".into()), ..all.clone() }), ["GET /x took 12ms"]);
    assert_eq!(read(LogFilter { tags: vec![("level".into(), "ERROR".into())], ..all.clone() }), ["GET /x took 12ms"]);
    let both = vec![("level".into(), "ERROR".into()), ("region".into(), "us".into())];
    assert!(read(LogFilter { tags: both, ..all.clone() }).is_empty(), "every tag must match");
    assert_eq!(read(LogFilter { keyword: Some("took".into()), ..all.clone() }), ["GET /x took 12ms", "GET /y took 3ms"]);
    assert!(read(LogFilter { keyword: Some("TOOK".into()), ..all.clone() }).is_empty(), "keywords are case-sensitive");
    // Inclusive bounds on both ends.
    assert_eq!(read(filter(NOW - 3000, NOW - 2000, 10, LogOrder::OldestFirst)), ["GET /x took 12ms", "GET /y took 3ms"]);
    assert_eq!(read(filter(NOW - 2000, NOW - 2000, 10, LogOrder::NewestFirst)), ["GET /y took 3ms"]);
    assert!(read(filter(NOW - 999, NOW, 10, LogOrder::OldestFirst)).is_empty());
    assert!(read(filter(NOW, NOW - HOUR, 10, LogOrder::OldestFirst)).is_empty(), "an inverted range is empty");
    assert!(read(LogFilter { limit: 0, ..all }).is_empty());
}

/// Pages through every log of the range in `order`, `page` at a time.
fn page_through(store: &LogStore, order: LogOrder, page: usize, start_ms: i64, end_ms: i64) -> Vec<StoredLog> {
    let mut out = Vec::new();
    let mut after = None;
    for _ in 0..10_000 {
        let got = store.query(&LogFilter { after, ..filter(start_ms, end_ms, page, order) }).expect("page");
        let Some(last) = got.last() else { return out };
        after = Some(last.cursor);
        out.extend(got);
    }
    panic!("paging did not end");
}

#[test]
fn pages_in_both_orders_have_no_gaps_or_repeats() {
    let (_kv, store) = store();
    // Bursts in one millisecond, gaps of hours, a log at each bound.
    let mut logs = Vec::new();
    for (i, ts) in [NOW - 30 * HOUR, NOW - 2 * HOUR, NOW - 2 * HOUR, NOW - 2 * HOUR, NOW - 1, NOW - 1, NOW].iter().enumerate() {
        logs.push(log("a", *ts, &format!("log-{i}")));
    }
    for i in 7..40 {
        logs.push(log("a", NOW - 10 * HOUR + i * 7, &format!("log-{i}")));
    }
    store.write(&logs).expect("write");
    let everything = store.query(&filter(NOW - 40 * HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("all");
    assert_eq!(everything.len(), logs.len());
    assert!(everything.windows(2).all(|w| w[0].cursor < w[1].cursor), "oldest first is ascending");

    for page in [1, 3, 7, 100] {
        let oldest = page_through(&store, LogOrder::OldestFirst, page, NOW - 40 * HOUR, NOW);
        assert_eq!(oldest, everything, "oldest first, pages of {page}");
        let mut newest = page_through(&store, LogOrder::NewestFirst, page, NOW - 40 * HOUR, NOW);
        newest.reverse();
        assert_eq!(newest, everything, "newest first, pages of {page}");
    }
    // Newest first returns the newest of the range even when it is wide and sparse.
    let newest = store.query(&filter(i64::MIN, i64::MAX, 2, LogOrder::NewestFirst)).expect("newest");
    assert_eq!(contents(&newest), ["log-6", "log-5"]);
    let oldest_by_newest = store.query(&filter(NOW - 40 * HOUR, NOW - 20 * HOUR, 5, LogOrder::NewestFirst)).expect("old");
    assert_eq!(contents(&oldest_by_newest), ["log-0"]);
}

#[test]
fn tailing_with_after_returns_each_new_log_once() {
    let (_kv, store) = store();
    store.write(&[log("a", NOW - 10, "one"), log("a", NOW - 5, "two")]).expect("write");
    let tail = |after: Option<LogCursor>| {
        store.query(&LogFilter { after, ..filter(NOW - HOUR, NOW + HOUR, 100, LogOrder::OldestFirst) }).expect("tail")
    };
    let first = tail(None);
    assert_eq!(contents(&first), ["one", "two"]);
    let cursor = first.last().map(|l| l.cursor);
    assert!(tail(cursor).is_empty());
    // A new log in the same millisecond as the last one shown still comes after it.
    store.write(&[log("a", NOW - 5, "three"), log("a", NOW, "four")]).expect("write");
    let second = tail(cursor);
    assert_eq!(contents(&second), ["three", "four"]);
    assert!(tail(second.last().map(|l| l.cursor)).is_empty());
}

#[test]
fn the_limit_is_capped() {
    let (_kv, store) = store();
    let logs: Vec<KeptLog> = (0..(MAX_LIMIT as i64 + 5)).map(|i| log("a", NOW - 20_000 + i, "x")).collect();
    store.write(&logs).expect("write");
    for order in [LogOrder::OldestFirst, LogOrder::NewestFirst] {
        let read = store.query(&filter(NOW - HOUR, NOW, usize::MAX, order)).expect("read");
        assert_eq!(read.len(), MAX_LIMIT, "{order:?}");
    }
}

#[test]
fn retention_deletes_expired_logs_and_the_write_path_refuses_them() {
    let kv = Arc::new(MemSeriesKv::new());
    let telemetry = Arc::new(SelfMetrics::new());
    let retention = Duration::from_secs(3600);
    let store = LogStore::open(kv.clone(), retention, telemetry.clone()).expect("open");
    let now = Arc::new(std::sync::atomic::AtomicI64::new(NOW));
    let clock = now.clone();
    let store = store.with_clock(Arc::new(move || clock.load(std::sync::atomic::Ordering::SeqCst)));
    store.write(&[log("a", NOW - 2 * HOUR, "expired"), log("a", NOW - HOUR / 2, "old"), log("a", NOW, "new")]).expect("write");
    assert_eq!(telemetry.logs_stored.get_or_create(&labels([("result", "expired")])).get(), 1);
    assert_eq!(telemetry.logs_stored.get_or_create(&labels([("result", "stored")])).get(), 2);
    let all = || contents(&store.query(&filter(0, NOW + HOUR, 100, LogOrder::OldestFirst)).expect("read")).join(",");
    assert_eq!(all(), "old,new");

    assert!(!store.expire(NOW).expect("expire"), "nothing expired yet");
    now.store(NOW + HOUR / 2 + 1, std::sync::atomic::Ordering::SeqCst);
    assert!(store.expire(NOW + HOUR / 2 + 1).expect("expire"));
    assert_eq!(all(), "new");
    assert!(!store.expire(NOW + HOUR / 2 + 1).expect("expire"), "an idle round deletes nothing");
    // The sequence record is outside the log range: it survives retention.
    assert!(kv.dump().iter().any(|(k, _)| k.as_slice() == keys::SEQUENCE_KEY));
}

#[test]
fn a_reopened_store_keeps_acknowledged_logs_and_never_reuses_a_sequence() {
    let kv = Arc::new(MemSeriesKv::new());
    let first = open(&kv);
    first.write(&[log("a", NOW - 10, "before-1"), log("a", NOW - 10, "before-2")]).expect("write");
    // A failed write is not acknowledged and not kept; its sequences are not handed out again.
    kv.set_fail_writes(true);
    assert!(matches!(first.write(&[log("a", NOW - 10, "lost")]), Err(LogStoreError::Kv(_))));
    kv.set_fail_writes(false);
    first.write(&[log("a", NOW - 10, "before-3")]).expect("write");
    drop(first);

    let second = open(&kv);
    second.write(&[log("a", NOW - 10, "after-1"), log("a", NOW - 20, "after-2")]).expect("write");
    let read = second.query(&filter(NOW - HOUR, NOW, 100, LogOrder::OldestFirst)).expect("read");
    assert_eq!(contents(&read), ["after-2", "before-1", "before-2", "before-3", "after-1"]);
    let sequences: BTreeSet<u64> = read.iter().map(|l| l.cursor.sequence).collect();
    assert_eq!(sequences.len(), read.len(), "sequences are unique across the restart: {sequences:?}");
    let before_max = read.iter().filter(|l| l.log.record.content.starts_with("before")).map(|l| l.cursor.sequence).max();
    let after_min = read.iter().filter(|l| l.log.record.content.starts_with("after")).map(|l| l.cursor.sequence).min();
    assert!(after_min > before_max, "the restarted store goes on after the last sequence");
}

#[test]
fn concurrent_writers_are_all_acknowledged_with_unique_positions() {
    let (_kv, store) = store();
    let store = Arc::new(store);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    store.write(&[log(&format!("s{t}"), NOW - 1000 + i, &format!("{t}-{i}"))]).expect("write");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("writer thread");
    }
    let read = store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read");
    assert_eq!(read.len(), 400);
    let cursors: BTreeSet<LogCursor> = read.iter().map(|l| l.cursor).collect();
    assert_eq!(cursors.len(), 400);
    let s3 = store.query(&LogFilter { service: Some("s3".into()), ..filter(NOW - HOUR, NOW, 100, LogOrder::OldestFirst) }).expect("s3");
    assert_eq!(s3.len(), 50);
}

/// The stored bytes of a log and of the sequence record, byte for byte: stores written by
/// earlier builds must read back.
#[test]
fn the_value_format_is_pinned() {
    fn text(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&(text.len() as u32).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    let mut kept = log("s", 1, "c");
    kept.record.tags = vec![("k".into(), "v".into())];
    kept.record.span_id = Some(-2);
    let mut expected = vec![codec::FORMAT_VERSION];
    for name in ["s", "s-1", "", "GENERAL", "", ""] {
        text(&mut expected, name);
    }
    expected.extend_from_slice(&[1, 0xff, 0xff, 0xff, 0xfe, ContentType::Text as u8]);
    text(&mut expected, "c");
    expected.extend_from_slice(&1u32.to_be_bytes());
    for part in ["k", "v"] {
        text(&mut expected, part);
    }
    expected.push(0);
    for part in ["", "GENERAL:default", "lal/default"] {
        text(&mut expected, part);
    }
    expected.extend_from_slice(&6i64.to_be_bytes());
    assert_eq!(codec::encode_log(&kept), expected);
    assert_eq!(codec::decode_log(&expected, 1).expect("decodes"), kept);
    assert_eq!(codec::encode_sequence(7), [1, 0, 0, 0, 0, 0, 0, 0, 7]);
    assert_eq!(codec::decode_sequence(&[1]).expect_err("cut").to_string(), "cut short: 8 bytes wanted, 0 left");
    assert_eq!(codec::decode_sequence(&[2]).expect_err("version").to_string(), "format version 2, this build reads 1");
}

#[test]
fn corrupt_values_are_reported_not_panicking() {
    let (kv, store) = store();
    let good = log("a", NOW - 10, "fine");
    store.write(std::slice::from_ref(&good)).expect("write");
    let encoded = codec::encode_log(&good);
    // Every cut of a valid value, and a few mangled ones, decode to an error.
    for len in 0..encoded.len() {
        assert!(codec::decode_log(&encoded[..len], 0).is_err(), "cut at {len}");
    }
    let mut trailing = encoded.clone();
    trailing.push(0);
    let mut version = encoded.clone();
    version[0] = 9;
    let mut huge_string = encoded.clone();
    huge_string[1..5].copy_from_slice(&u32::MAX.to_be_bytes());
    for bad in [trailing, version, huge_string] {
        assert!(codec::decode_log(&bad, 0).is_err());
    }

    let key = keys::log_key(LogCursor { timestamp_ms: NOW - 5, sequence: 999 });
    kv.put_raw(key, vec![1, 0, 0]);
    match store.query(&filter(NOW - HOUR, NOW, 10, LogOrder::NewestFirst)) {
        Err(LogStoreError::Corrupt { key, detail }) => assert!(key.starts_with('l') && detail.contains("cut short"), "{key}: {detail}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Reads that do not reach the bad value still work.
    assert_eq!(contents(&store.query(&filter(NOW - HOUR, NOW - 10, 10, LogOrder::NewestFirst)).expect("read")), ["fine"]);

    kv.put_raw(keys::SEQUENCE_KEY.to_vec(), vec![1, 2]);
    assert!(matches!(LogStore::open(kv.clone(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new())), Err(LogStoreError::Corrupt { .. })));
}

#[test]
fn read_failures_are_errors() {
    let (kv, store) = store();
    kv.set_fail_reads(true);
    assert!(matches!(store.query(&filter(NOW - HOUR, NOW, 10, LogOrder::NewestFirst)), Err(LogStoreError::Kv(_))));
    assert!(store.expire(NOW).is_err());
}

#[test]
fn service_reads_through_the_index_match_a_filtered_scan() {
    let (_kv, store) = store();
    // A busy service, a quiet one, more than one resolve chunk of each, some rejected by a tag.
    let mut logs = Vec::new();
    for i in 0..1200i64 {
        let service = if i % 4 == 0 { "quiet" } else { "busy" };
        let mut kept = log(service, NOW - 100_000 + i * 50, &format!("{service}-{i}"));
        kept.record.tags = vec![("even".into(), (i % 2 == 0).to_string())];
        logs.push(kept);
    }
    store.write(&logs).expect("write");
    let everything = store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("all");
    for (service, tags) in [("quiet", vec![]), ("busy", vec![]), ("busy", vec![("even".to_string(), "true".to_string())]), ("none", vec![])] {
        let expected: Vec<StoredLog> = everything
            .iter()
            .filter(|l| l.log.record.service == service && tags.iter().all(|t| l.log.record.tags.contains(t)))
            .cloned()
            .collect();
        let wanted = LogFilter { service: Some(service.to_string()), tags: tags.clone(), ..filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst) };
        assert_eq!(store.query(&wanted).expect("oldest"), expected, "{service} {tags:?} oldest first");
        for page in [7, 300] {
            let mut paged = Vec::new();
            let mut after = None;
            for _ in 0..1000 {
                let got = store.query(&LogFilter { after, limit: page, order: LogOrder::NewestFirst, ..wanted.clone() }).expect("page");
                let Some(last) = got.last() else { break };
                after = Some(last.cursor);
                paged.extend(got);
            }
            paged.reverse();
            assert_eq!(paged, expected, "{service} {tags:?} newest first, pages of {page}");
        }
    }
}

#[test]
fn retention_deletes_index_keys_with_their_logs() {
    let kv = Arc::new(MemSeriesKv::new());
    let store = LogStore::open(kv.clone(), Duration::from_secs(3600), Arc::new(SelfMetrics::new())).expect("open").with_clock(Arc::new(|| NOW));
    store.write(&[log("a", NOW - HOUR / 2, "a-old"), log("b", NOW - HOUR / 2, "b-old"), log("b", NOW, "b-new")]).expect("write");
    assert!(store.expire(NOW + HOUR / 2 + 1).expect("expire"));
    let index_keys: Vec<Vec<u8>> = kv.dump().into_iter().map(|(k, _)| k).filter(|k| k[0] == keys::INDEX_PREFIX).collect();
    assert_eq!(index_keys, vec![keys::service_key("b", read_one_cursor(&store, "b"))]);
    assert!(!store.expire(NOW + HOUR / 2 + 1).expect("expire"), "an idle round deletes nothing");
}

fn read_one_cursor(store: &LogStore, service: &str) -> LogCursor {
    let read = store.query(&LogFilter { service: Some(service.into()), ..filter(0, NOW + HOUR, 10, LogOrder::OldestFirst) }).expect("read");
    assert_eq!(read.len(), 1);
    read[0].cursor
}

#[test]
fn a_bad_index_key_is_reported_and_a_dangling_one_skipped() {
    let (kv, store) = store();
    store.write(&[log("a", NOW - 10, "kept")]).expect("write");
    // An index key whose log is gone (not expected: they are written and expired together).
    kv.put_raw(keys::service_key("a", LogCursor { timestamp_ms: NOW - 5, sequence: 77 }), Vec::new());
    let by_service = LogFilter { service: Some("a".into()), ..filter(NOW - HOUR, NOW, 10, LogOrder::NewestFirst) };
    assert_eq!(contents(&store.query(&by_service).expect("read")), ["kept"]);
    let mut bad = keys::service_key("a", LogCursor { timestamp_ms: NOW - 3, sequence: 1 });
    bad.push(0);
    kv.put_raw(bad, Vec::new());
    assert!(matches!(store.query(&by_service), Err(LogStoreError::Corrupt { .. })));
    // Retention reads one key per service: a key too short to name one is reported.
    assert!(store.expire(NOW).is_ok());
    kv.put_raw(vec![keys::INDEX_PREFIX, 0], Vec::new());
    assert!(matches!(store.expire(NOW), Err(LogStoreError::Corrupt { .. })));
}
