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

/// The layouts every read is checked on: everything pending in memory (the default bound is
/// not reached), everything flushed into blocks by each write, a mix of small blocks (a
/// few logs each, many per slice) and pending groups, and a write's parts of two or more logs
/// of a service written as blocks at once, beside the single logs pending.
fn layouts() -> Vec<(&'static str, LogStore)> {
    let with = |limits: buffer::FlushLimits| open(&Arc::new(MemSeriesKv::new())).with_limits(limits);
    vec![
        ("pending", with(buffer::FlushLimits::default())),
        ("blocks", with(buffer::FlushLimits { max_bytes: 0, ..buffer::FlushLimits::default() })),
        ("mixed", with(buffer::FlushLimits { max_bytes: 2048, block_bytes: 600, ..buffer::FlushLimits::default() })),
        // One and a half rows of the tests' logs: two logs of a service in a write are a part
        // written as a block, one is pending.
        ("direct", with(buffer::FlushLimits { direct_bytes: row_bytes() * 3 / 2, block_bytes: 600, ..buffer::FlushLimits::default() })),
    ]
}

/// The raw bytes of one row of a typical log of these tests.
fn row_bytes() -> usize {
    block::ROW_HEADER + codec::encode_log(&log("a", NOW, "log number 10")).len()
}

fn filter(start_ms: i64, end_ms: i64, limit: usize, order: LogOrder) -> LogFilter {
    LogFilter { start_ms, end_ms, limit, order, ..LogFilter::default() }
}

fn contents(logs: &[StoredLog]) -> Vec<&str> {
    logs.iter().map(|l| l.log.record.content.as_str()).collect()
}

#[test]
fn every_field_round_trips() {
    for (layout, store) in layouts() {
        eprintln!("layout: {layout}");
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
}

#[test]
fn filters_select_by_names_tags_keyword_and_time() {
    for (layout, store) in layouts() {
        eprintln!("layout: {layout}");
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
    for (layout, store) in layouts() {
        eprintln!("layout: {layout}");
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
}

#[test]
fn tailing_with_after_returns_each_new_log_once() {
    for (layout, store) in layouts() {
        eprintln!("layout: {layout}");
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
}

#[test]
fn the_limit_is_capped() {
    for (layout, store) in layouts() {
        eprintln!("layout: {layout}");
        let logs: Vec<KeptLog> = (0..(MAX_LIMIT as i64 + 5)).map(|i| log("a", NOW - 20_000 + i, "x")).collect();
        store.write(&logs).expect("write");
        for order in [LogOrder::OldestFirst, LogOrder::NewestFirst] {
            let read = store.query(&filter(NOW - HOUR, NOW, usize::MAX, order)).expect("read");
            assert_eq!(read.len(), MAX_LIMIT, "{order:?}");
        }
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
    // A slice goes once its end is past the cutoff: at most a slice after its logs expired.
    let later = NOW + HOUR / 2 + keys::SLICE_MS;
    now.store(later, std::sync::atomic::Ordering::SeqCst);
    assert!(store.expire(later).expect("expire"));
    assert_eq!(all(), "new");
    assert!(!store.expire(later).expect("expire"), "an idle round deletes nothing");
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
    for (layout, store) in layouts() {
        eprintln!("layout: {layout}");
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

    // A pending group cut short: reads that reach it report it, naming its key.
    kv.put_raw(keys::pending_key(keys::slice_of(NOW - 5), 999), vec![block::FORMAT_VERSION, 0, 0]);
    let fresh = LogStore::open(kv.clone(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new()));
    match fresh {
        Err(LogStoreError::Corrupt { key, detail }) => assert!(key.starts_with('w') && detail.contains("cut short"), "{key}: {detail}"),
        other => panic!("a store with a bad pending group does not open: {:?}", other.err()),
    }
    kv.put_raw(keys::pending_key(keys::slice_of(NOW - 5), 999), encode_pending_of(&[(LogCursor { timestamp_ms: NOW - 5, sequence: 999 }, vec![1, 0, 0])]));
    let reopened = open(&kv);
    match reopened.query(&filter(NOW - HOUR, NOW, 10, LogOrder::NewestFirst)) {
        Err(LogStoreError::Corrupt { key, detail }) => assert!(key.starts_with('w') && detail.contains("cut short"), "{key}: {detail}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A flush refuses the group too, and keeps it pending.
    assert!(matches!(reopened.flush_all(), Err(LogStoreError::Corrupt { .. })));
    assert!(reopened.pending_bytes() > 0);
    // Reads that do not reach the bad value still work.
    assert_eq!(contents(&store.query(&filter(NOW - HOUR, NOW - 10, 10, LogOrder::NewestFirst)).expect("read")), ["fine"]);

    kv.put_raw(keys::SEQUENCE_KEY.to_vec(), vec![1, 2]);
    assert!(matches!(LogStore::open(kv.clone(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new())), Err(LogStoreError::Corrupt { .. })));
}

fn encode_pending_of(rows: &[(LogCursor, Vec<u8>)]) -> Vec<u8> {
    let mut value = vec![block::FORMAT_VERSION];
    for (cursor, row) in rows {
        block::push_row(&mut value, *cursor, row);
    }
    value
}

#[test]
fn bad_blocks_and_metas_are_reported_not_panicking() {
    let (kv, store) = store();
    store.write(&[log("a", NOW - 10, "kept")]).expect("write");
    store.flush_all().expect("flush");
    let (meta_key, meta) = kv.dump().into_iter().find(|(k, _)| k[0] == keys::META_PREFIX).expect("a meta");
    let block_key = keys::with_prefix(&meta_key, keys::BLOCK_PREFIX);
    let block_value = kv.dump().into_iter().find(|(k, _)| *k == block_key).expect("its block").1;
    let read = |store: &LogStore| store.query(&filter(NOW - HOUR, NOW, 10, LogOrder::NewestFirst));
    assert_eq!(contents(&read(&store).expect("read")), ["kept"]);
    for bad_block in [vec![], vec![block::FORMAT_VERSION, 9, 0, 0, 0, 1], block_value[..block_value.len() - 1].to_vec()] {
        kv.put_raw(block_key.clone(), bad_block);
        match read(&store) {
            Err(LogStoreError::Corrupt { key, .. }) => assert!(key.starts_with('b'), "{key}"),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }
    kv.put_raw(block_key.clone(), block_value);
    kv.put_raw(meta_key.clone(), meta[..meta.len() - 1].to_vec());
    assert!(matches!(read(&store), Err(LogStoreError::Corrupt { key, .. }) if key.starts_with('m')));
    kv.put_raw(meta_key.clone(), meta);
    assert_eq!(contents(&read(&store).expect("read")), ["kept"]);
    // A meta without its block (not expected: they are written and expired together).
    kv.put_raw(keys::block_key(keys::META_PREFIX, keys::slice_of(NOW - 5), "a", 77), kv.dump().into_iter().find(|(k, _)| k[0] == keys::META_PREFIX).expect("meta").1);
    assert!(matches!(read(&store), Err(LogStoreError::Corrupt { detail, .. }) if detail.contains("without its block")));
    // A key in the meta range that is not a meta key.
    let (kv, store) = self::store();
    let mut short = keys::slice_start(keys::META_PREFIX, keys::slice_of(NOW - 5));
    short.push(0);
    kv.put_raw(short, Vec::new());
    assert!(matches!(store.query(&filter(NOW - HOUR, NOW, 10, LogOrder::OldestFirst)), Err(LogStoreError::Corrupt { .. })));
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
    for (layout, store) in layouts() {
        eprintln!("layout: {layout}");
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
}

#[test]
fn retention_deletes_whole_slices_of_blocks_metas_and_pending_groups() {
    let kv = Arc::new(MemSeriesKv::new());
    let store = LogStore::open(kv.clone(), Duration::from_secs(3600), Arc::new(SelfMetrics::new())).expect("open").with_clock(Arc::new(|| NOW));
    store.write(&[log("a", NOW - HOUR / 2, "a-old"), log("b", NOW - HOUR / 2, "b-old")]).expect("write");
    store.flush_all().expect("flush");
    store.write(&[log("b", NOW - HOUR / 2 + 1, "b-old-pending"), log("b", NOW, "b-new")]).expect("write");
    let prefixes = |kv: &MemSeriesKv| kv.dump().into_iter().map(|(k, _)| k[0] as char).collect::<String>();
    assert_eq!(prefixes(&kv), "bbmmsww", "two blocks and metas, the sequence, pending groups of two slices");
    // Cutoff inside the old logs' slice: the slice is kept whole.
    assert!(!store.expire(NOW + HOUR / 2 + 1).expect("expire"), "the slice has not ended before the cutoff");
    assert!(store.expire(NOW + HOUR / 2 + keys::SLICE_MS).expect("expire"));
    assert_eq!(prefixes(&kv), "sw", "only the sequence and the newest slice's pending group are left");
    let all = store.query(&filter(0, NOW + HOUR, 10, LogOrder::OldestFirst)).expect("read");
    assert_eq!(contents(&all), ["b-new"], "expired pending logs left memory too");
    assert!(!store.expire(NOW + HOUR / 2 + keys::SLICE_MS).expect("expire"), "an idle round deletes nothing");
}

#[test]
fn the_layouts_hold_what_they_say() {
    for (layout, store) in layouts() {
        // Ten slices, oldest first: the mixed layout flushes the oldest and keeps the newest.
        let logs: Vec<KeptLog> = (0..40).map(|i| log(["a", "b"][i % 2], NOW - 600_000 + i as i64 * 15_000, &format!("log number {i}"))).collect();
        // Writes of three: two logs of one service (a block at once in the direct layout), one of
        // the other (pending there).
        for chunk in logs.chunks(3) {
            store.write(chunk).expect("write");
        }
        let blocks = store.kv.scan_range(&[keys::META_PREFIX], &[keys::META_PREFIX + 1], usize::MAX).expect("metas").len();
        let pending = store.pending_bytes();
        match layout {
            "pending" => assert!(blocks == 0 && pending > 0, "{layout}: {blocks} blocks, {pending} bytes pending"),
            "blocks" => assert!(blocks > 0 && pending == 0, "{layout}: {blocks} blocks, {pending} bytes pending"),
            "mixed" => assert!(blocks > 4 && pending > 0, "{layout}: {blocks} blocks, {pending} bytes pending"),
            _ => {
                let written = |source| SelfMetrics::counter_value(&store.telemetry.log_blocks_written, &labels([("source", source)]));
                assert!(blocks > 4 && pending > 0, "{layout}: {blocks} blocks, {pending} bytes pending");
                assert_eq!((written("write"), written("flush")), (blocks as u64, 0), "{layout}: every block written by a write");
            }
        }
    }
}

/// Logs with words and tags drawn from a fixed pseudo-random sequence: a few words and tag
/// values are rare, most are common.
fn varied_logs(count: usize) -> Vec<KeptLog> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let words = ["GET", "POST", "/api/orders", "/api/users", "timeout", "refused", "ok", "slow", "retry", "cache-miss"];
    (0..count)
        .map(|i| {
            let r = next();
            let service = ["checkout", "payments", "search"][(r % 3) as usize];
            let rare = if r % 97 == 0 { " deadline-exceeded" } else { "" };
            let content = format!("{} {} {}ms{rare}", words[(r >> 8) as usize % words.len()], words[(r >> 16) as usize % words.len()], r % 1000);
            let mut kept = log(service, NOW - 600_000 + (i as i64) * 37 % 600_000, &content);
            kept.record.instance = format!("{service}-{}", (r >> 24) % 4);
            kept.record.tags = vec![("status".into(), ["200", "200", "404", "500"][(r >> 32) as usize % 4].into())];
            if r % 89 == 0 {
                kept.record.tags.push(("user".into(), format!("vip-{}", r % 7)));
            }
            kept
        })
        .collect()
}

#[test]
fn indexed_reads_match_a_brute_force_filter_in_every_layout_and_order() {
    let logs = varied_logs(3000);
    let filters: Vec<LogFilter> = vec![
        LogFilter { keyword: Some("deadline-exceeded".into()), ..LogFilter::default() },
        LogFilter { keyword: Some("ms deadline".into()), ..LogFilter::default() },
        LogFilter { keyword: Some("timeout".into()), ..LogFilter::default() },
        LogFilter { keyword: Some("no such words".into()), ..LogFilter::default() },
        LogFilter { keyword: Some("9m".into()), ..LogFilter::default() },
        LogFilter { tags: vec![("user".into(), "vip-3".into())], ..LogFilter::default() },
        LogFilter { tags: vec![("status".into(), "500".into()), ("user".into(), "vip-1".into())], ..LogFilter::default() },
        LogFilter { instance: Some("search-2".into()), keyword: Some("refused".into()), ..LogFilter::default() },
        LogFilter { service: Some("payments".into()), tags: vec![("status".into(), "404".into())], ..LogFilter::default() },
        LogFilter { endpoint: Some("nowhere".into()), ..LogFilter::default() },
    ];
    for (layout, store) in layouts() {
        for chunk in logs.chunks(50) {
            store.write(chunk).expect("write");
        }
        let everything = store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("all");
        assert_eq!(everything.len(), logs.len(), "{layout}");
        for wanted in &filters {
            let expected: Vec<&StoredLog> = everything
                .iter()
                .filter(|l| {
                    let r = &l.log.record;
                    wanted.service.as_ref().is_none_or(|s| *s == r.service)
                        && wanted.instance.as_ref().is_none_or(|s| *s == r.instance)
                        && wanted.endpoint.as_ref().is_none_or(|s| *s == r.endpoint)
                        && wanted.tags.iter().all(|t| r.tags.contains(t))
                        && wanted.keyword.as_ref().is_none_or(|k| r.content.contains(k.as_str()))
                })
                .collect();
            for order in [LogOrder::OldestFirst, LogOrder::NewestFirst] {
                for page in [3, MAX_LIMIT] {
                    let mut got = Vec::new();
                    let mut after = None;
                    for _ in 0..2000 {
                        let f = LogFilter { after, order, limit: page, start_ms: NOW - HOUR, end_ms: NOW, ..wanted.clone() };
                        let read = store.query(&f).expect("read");
                        let Some(last) = read.last() else { break };
                        after = Some(last.cursor);
                        got.extend(read);
                    }
                    if order == LogOrder::NewestFirst {
                        got.reverse();
                    }
                    let got: Vec<&StoredLog> = got.iter().collect();
                    assert_eq!(got, expected, "{layout} {order:?} pages of {page}: {wanted:?}");
                }
            }
        }
        // The rare words and tags are there at all (the filters are not vacuous).
        let count = |f: &LogFilter| everything.iter().filter(|l| f.keyword.as_ref().is_none_or(|k| l.log.record.content.contains(k.as_str()))).count();
        assert!((5..200).contains(&count(&filters[0])), "{layout}: {}", count(&filters[0]));
    }
}

#[test]
fn pending_groups_survive_a_restart_and_a_failed_flush_keeps_them() {
    let kv = Arc::new(MemSeriesKv::new());
    let first = open(&kv);
    first.write(&[log("a", NOW - 10, "one"), log("b", NOW - 5, "two")]).expect("write");
    first.flush_all().expect("flush");
    first.write(&[log("a", NOW - 3, "three")]).expect("write");
    // A flush whose batch fails leaves the group pending and readable.
    kv.set_fail_writes(true);
    assert!(first.flush_all().is_err());
    kv.set_fail_writes(false);
    let all = |store: &LogStore| contents(&store.query(&filter(NOW - HOUR, NOW, 100, LogOrder::OldestFirst)).expect("read")).join(",");
    assert_eq!(all(&first), "one,two,three");
    assert!(first.pending_bytes() > 0);
    drop(first);
    // No flush after the last write: the restarted store reads the pending group back.
    let second = open(&kv);
    assert!(second.pending_bytes() > 0);
    assert_eq!(all(&second), "one,two,three");
    second.flush_all().expect("flush");
    assert_eq!(second.pending_bytes(), 0);
    assert_eq!(all(&second), "one,two,three", "each log once after the flush");
    assert!(kv.dump().iter().all(|(k, _)| k[0] != keys::PENDING_PREFIX), "flushed groups' keys are deleted");
    let third = open(&kv);
    assert_eq!(all(&third), "one,two,three");
}

#[test]
fn due_slices_are_flushed_by_the_worker_call_and_memory_far_past_the_bound_by_the_writer() {
    let kv = Arc::new(MemSeriesKv::new());
    let now = Arc::new(std::sync::atomic::AtomicI64::new(NOW));
    let clock = now.clone();
    let store = open(&kv).with_clock(Arc::new(move || clock.load(std::sync::atomic::Ordering::SeqCst)));
    store.write(&[log("a", NOW - 10, "closed-slice"), log("a", NOW + 1, "open-slice")]).expect("write");
    assert_eq!(store.flush_due().expect("flush"), 0, "nothing is due while the slices may still get logs");
    now.store(NOW + 5_000, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(store.flush_due().expect("flush"), 1, "the slice that ended before NOW is closed and quiet");
    now.store(NOW + keys::SLICE_MS + 5_000 + 2_000, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(store.flush_due().expect("flush"), 1);
    assert_eq!(store.pending_bytes(), 0);

    let small = open(&Arc::new(MemSeriesKv::new())).with_limits(buffer::FlushLimits { max_bytes: 4096, ..buffer::FlushLimits::default() });
    for i in 0..200 {
        small.write(&[log("a", NOW - 1000 + i, "a log line of some length to fill the buffer")]).expect("write");
        // No worker here: past twice the bound the writer flushes on its own thread.
        assert!(small.pending_bytes() <= 2 * 4096 + 200, "the writer flushes past twice the bound: {}", small.pending_bytes());
    }
    assert_eq!(small.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read").len(), 200);
}

#[test]
fn the_first_format_is_converted_at_open_with_the_same_cursors() {
    let kv = Arc::new(MemSeriesKv::new());
    let old = v1::V1LogStore::open(kv.clone(), Arc::new(SelfMetrics::new())).expect("open v1");
    let logs = varied_logs(1200);
    for chunk in logs.chunks(100) {
        old.write(chunk).expect("write v1");
    }
    let before = old.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read v1");
    assert_eq!(before.len(), 1200);
    drop(old);
    let telemetry = Arc::new(SelfMetrics::new());
    let store = LogStore::open(kv.clone(), DEFAULT_RETENTION, telemetry.clone()).expect("open migrates").with_clock(Arc::new(|| NOW));
    assert!(kv.dump().iter().all(|(k, _)| k[0] != b'l' && k[0] != b'x'), "no key of the first format is left");
    assert!(telemetry.log_blocks_written.get_or_create(&labels([("source", "migration")])).get() > 0);
    let after = store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read");
    assert_eq!(after, before, "every log, with its cursor");
    // The sequence goes on after the migrated logs.
    store.write(&[log("a", NOW - 1, "new")]).expect("write");
    let newest = store.query(&filter(NOW - HOUR, NOW, 1, LogOrder::NewestFirst)).expect("read");
    assert!(newest[0].cursor.sequence > before.iter().map(|l| l.cursor.sequence).max().unwrap_or(0));
    // A second open has nothing to convert.
    drop(store);
    assert_eq!(open(&kv).query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read").len(), 1201);
}

#[test]
fn a_migration_goes_chunk_by_chunk_and_one_cut_by_a_crash_goes_on_at_the_next_open() {
    let kv = Arc::new(MemSeriesKv::new());
    let logs = varied_logs(1000);
    let old = v1::V1LogStore::open(kv.clone(), Arc::new(SelfMetrics::new())).expect("open v1");
    for chunk in logs[..600].chunks(100) {
        old.write(chunk).expect("write v1");
    }
    let first_part = old.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read v1");
    drop(old);
    // Converted 70 at a time: nine chunks, each converted and deleted in one synced batch.
    let telemetry = Arc::new(SelfMetrics::new());
    let store = LogStore::open_migrating(kv.clone(), DEFAULT_RETENTION, telemetry.clone(), 70).expect("open").with_clock(Arc::new(|| NOW));
    let blocks = telemetry.log_blocks_written.get_or_create(&labels([("source", "migration")])).get();
    assert!(blocks >= 9, "at least a block per chunk: {blocks}");
    assert_eq!(store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read"), first_part);
    drop(store);
    // What a crash between two chunks leaves: blocks of the converted part, the rest in the
    // first format (written here by the first format's writer, which goes on with the
    // sequence).
    let old = v1::V1LogStore::open(kv.clone(), Arc::new(SelfMetrics::new())).expect("open v1");
    for chunk in logs[600..].chunks(100) {
        old.write(chunk).expect("write v1");
    }
    let rest = old.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read v1");
    assert_eq!(rest.len(), 400);
    drop(old);
    let store = LogStore::open_migrating(kv.clone(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new()), 70).expect("open").with_clock(Arc::new(|| NOW));
    let all = store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read");
    let mut expected: Vec<StoredLog> = first_part.into_iter().chain(rest).collect();
    expected.sort_by_key(|l| l.cursor);
    assert_eq!(all, expected, "every log once, with its cursor");
    assert!(kv.dump().iter().all(|(k, _)| k[0] != b'l' && k[0] != b'x'));
}

#[cfg(feature = "rocksdb")]
#[test]
fn on_rocksdb_the_first_format_is_converted_and_pending_groups_survive_a_reopen() {
    use crate::store::kv::{KvEngine, RocksEngine};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let logs = varied_logs(3000);
    let before = {
        let engine = RocksEngine::open(&path).expect("open");
        let old = v1::V1LogStore::open(engine.logs(), Arc::new(SelfMetrics::new())).expect("v1");
        for chunk in logs.chunks(250) {
            old.write(chunk).expect("write v1");
        }
        old.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read v1")
    };
    assert_eq!(before.len(), 3000);
    let after_migration = {
        let engine = RocksEngine::open(&path).expect("reopen");
        let store = LogStore::open_migrating(engine.logs(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new()), 700).expect("migrates").with_clock(Arc::new(|| NOW));
        let read = store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read");
        // More logs, left pending (no flush) when the database closes.
        store.write(&[log("late", NOW - 2, "pending at close")]).expect("write");
        read
    };
    assert_eq!(after_migration, before, "the same logs with the same cursors");
    let engine = RocksEngine::open(&path).expect("reopen");
    let (start, end) = (vec![b'l'], vec![b'y']);
    let left: Vec<u8> = engine.logs().scan_range(&start, &end, usize::MAX).expect("scan").iter().map(|(k, _)| k[0]).filter(|p| *p == b'l' || *p == b'x').collect();
    assert!(left.is_empty(), "no key of the first format is left");
    let store = LogStore::open(engine.logs(), DEFAULT_RETENTION, Arc::new(SelfMetrics::new())).expect("open").with_clock(Arc::new(|| NOW));
    assert!(store.pending_bytes() > 0, "the pending group is read back");
    let keyword = LogFilter { keyword: Some("pending at close".into()), ..filter(NOW - HOUR, NOW, 10, LogOrder::NewestFirst) };
    assert_eq!(contents(&store.query(&keyword).expect("read")), ["pending at close"]);
    store.flush_all().expect("flush");
    assert_eq!(store.query(&filter(NOW - HOUR, NOW, MAX_LIMIT, LogOrder::OldestFirst)).expect("read").len(), 3001);
}
