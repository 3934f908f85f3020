//! The cluster cursor, what each node is asked for and the merge, over real log stores on the
//! in-memory key space: paging through several nodes' logs with small limits, both orders,
//! yields every log exactly once, in the cluster order.

use std::collections::BTreeMap;
use std::sync::Arc;

use hotrule_lal_engine::{ContentType, LogRecord};

use super::*;
use crate::base::self_metrics::SelfMetrics;
use crate::data::logs::records::{DEFAULT_RETENTION, LogStore};
use crate::data::logs::{KeptLog, LogReader, LogWriter};
use crate::store::series::MemSeriesKv;

/// 2026-11-25T12:00:00Z.
const NOW: i64 = 1_795_608_000_000;
const T: i64 = NOW - 60_000;

fn id(text: &str) -> NodeId {
    NodeId(text.to_string())
}

fn kept(timestamp_ms: i64, content: &str) -> KeptLog {
    KeptLog {
        rule: "GENERAL:default".into(),
        file: "lal/default".into(),
        record: LogRecord {
            service: if content.ends_with('0') { "even".into() } else { "odd".into() },
            layer: "GENERAL".into(),
            timestamp_ms,
            content_type: ContentType::Text,
            content: content.into(),
            fields: BTreeMap::new(),
            ..LogRecord::default()
        },
        received_ms: timestamp_ms,
    }
}

fn stored(timestamp_ms: i64, sequence: u64, content: &str) -> StoredLog {
    StoredLog { cursor: LogCursor { timestamp_ms, sequence }, log: kept(timestamp_ms, content) }
}

/// Three nodes (one id holding `-`) whose logs share timestamps; each log's content is
/// `<node>/<index>`, written in index order so the index orders a node's equal timestamps.
fn cluster() -> Vec<(NodeId, LogStore)> {
    let offsets: [(&str, &[i64]); 3] =
        [("a", &[1, 1, 2, 3, 3, 3, 6, 9]), ("b-1", &[1, 2, 2, 3, 5, 9, 9]), ("c", &[0, 1, 3, 3, 6, 6, 9, 10, 10])];
    offsets
        .iter()
        .map(|(node, offsets)| {
            let store = LogStore::open(Arc::new(MemSeriesKv::new()), DEFAULT_RETENTION, Arc::new(SelfMetrics::new()))
                .expect("open")
                .with_clock(Arc::new(|| NOW));
            let logs: Vec<KeptLog> = offsets.iter().enumerate().map(|(i, offset)| kept(T + offset, &format!("{node}/{i}"))).collect();
            store.write(&logs).expect("write");
            (id(node), store)
        })
        .collect()
}

/// Every log of the cluster in its order: (timestamp, node, write index).
fn everything(nodes: &[(NodeId, LogStore)], filter: &LogFilter) -> Vec<String> {
    let mut all: Vec<(i64, NodeId, u64, String)> = Vec::new();
    for (node, store) in nodes {
        let every = LogFilter { limit: 10_000, order: LogOrder::OldestFirst, after: None, ..filter.clone() };
        for log in store.query(&every).expect("read") {
            all.push((log.cursor.timestamp_ms, node.clone(), log.cursor.sequence, log.log.record.content));
        }
    }
    all.sort();
    if filter.order == LogOrder::NewestFirst {
        all.reverse();
    }
    all.into_iter().map(|(_, _, _, content)| content).collect()
}

/// One cluster page, as `QueryService::read_cluster_logs` makes it without the bus.
fn page(nodes: &[(NodeId, LogStore)], filter: &LogFilter, after: Option<&ClusterCursor>) -> Vec<NodeLog> {
    let pages = nodes.iter().map(|(node, store)| (node.clone(), store.query(&node_filter(filter, after, node)).expect("read"))).collect();
    merge_pages(pages, filter.order, filter.limit)
}

/// Pages through `filter` following each full page's last cursor, as a client does.
fn page_through(nodes: &[(NodeId, LogStore)], filter: &LogFilter) -> Vec<String> {
    let mut seen = Vec::new();
    let mut after: Option<ClusterCursor> = None;
    for _ in 0..100 {
        let logs = page(nodes, filter, after.as_ref());
        for log in &logs {
            assert!(log.stored.log.record.content.starts_with(&format!("{}/", log.node)), "a log names the node holding it: {log:?}");
        }
        seen.extend(logs.iter().map(|log| log.stored.log.record.content.clone()));
        match logs.last() {
            Some(last) if logs.len() >= filter.limit => after = Some(last.cursor()),
            _ => return seen,
        }
    }
    panic!("paging did not end: {seen:?}");
}

#[test]
fn cursors_carry_the_node_and_read_back() {
    let cursor = ClusterCursor { timestamp_ms: T, node: id("node-2.eu-west"), sequence: 17 };
    let text = cluster_cursor_text(&cursor);
    assert_eq!(text, format!("{T}-node-2.eu-west-17"));
    assert_eq!(parse_cluster_cursor(&text), Some(cursor));
    let negative = ClusterCursor { timestamp_ms: -5, node: id("-x-"), sequence: 0 };
    assert_eq!(parse_cluster_cursor(&cluster_cursor_text(&negative)), Some(negative));
    assert_eq!(parse_cluster_cursor(" 5-q1-3 "), Some(ClusterCursor { timestamp_ms: 5, node: id("q1"), sequence: 3 }));
    assert_eq!(parse_cluster_cursor("5-q1--3"), Some(ClusterCursor { timestamp_ms: 5, node: id("q1-"), sequence: 3 }), "a node id may end in -");
    for bad in ["", "5-3", "5--3", "5-q1-", "-q1-3", "x-q1-3", "5-q1-x", "5-q1-3.0", "é-q1-3", "-", "--", "5-q\u{7}-3"] {
        assert_eq!(parse_cluster_cursor(bad), None, "{bad:?}");
    }
}

#[test]
fn each_node_is_asked_for_what_lies_past_the_cursor_in_the_cluster_order() {
    let filter = LogFilter { start_ms: 0, end_ms: 100, limit: 5, order: LogOrder::OldestFirst, ..LogFilter::default() };
    let cursor = ClusterCursor { timestamp_ms: 50, node: id("b"), sequence: 7 };
    assert_eq!(node_filter(&filter, None, &id("a")), filter, "no cursor: the same read everywhere");
    // Oldest first: a sorts before b, so its logs at 50 are behind; c's are ahead.
    assert_eq!(node_filter(&filter, Some(&cursor), &id("a")), LogFilter { start_ms: 51, ..filter.clone() });
    assert_eq!(node_filter(&filter, Some(&cursor), &id("b")), LogFilter { after: Some(LogCursor { timestamp_ms: 50, sequence: 7 }), ..filter.clone() });
    assert_eq!(node_filter(&filter, Some(&cursor), &id("c")), LogFilter { start_ms: 50, ..filter.clone() });
    // A later start is kept.
    let late = LogFilter { start_ms: 60, ..filter.clone() };
    assert_eq!(node_filter(&late, Some(&cursor), &id("c")).start_ms, 60);
    // Newest first mirrors it.
    let newest = LogFilter { order: LogOrder::NewestFirst, ..filter.clone() };
    assert_eq!(node_filter(&newest, Some(&cursor), &id("a")), LogFilter { end_ms: 50, ..newest.clone() });
    assert_eq!(node_filter(&newest, Some(&cursor), &id("c")), LogFilter { end_ms: 49, ..newest.clone() });
    // At the ends of time there is nothing left to ask for, and nothing overflows.
    let last = ClusterCursor { timestamp_ms: i64::MAX, node: id("b"), sequence: 0 };
    let first = ClusterCursor { timestamp_ms: i64::MIN, node: id("b"), sequence: 0 };
    let empty = |f: LogFilter| f.start_ms > f.end_ms;
    assert!(empty(node_filter(&filter, Some(&last), &id("a"))));
    assert!(empty(node_filter(&newest, Some(&first), &id("c"))));
}

#[test]
fn pages_merge_by_time_then_node_then_sequence() {
    let pages = vec![
        (id("b"), vec![stored(T, 0, "b/0"), stored(T + 1, 1, "b/1")]),
        (id("a"), vec![stored(T, 4, "a/4"), stored(T, 5, "a/5"), stored(T + 2, 6, "a/6")]),
        (id("c"), vec![]),
    ];
    let contents = |logs: Vec<NodeLog>| logs.into_iter().map(|l| format!("{}:{}", l.node, l.stored.log.record.content)).collect::<Vec<_>>();
    assert_eq!(contents(merge_pages(pages.clone(), LogOrder::OldestFirst, 10)), ["a:a/4", "a:a/5", "b:b/0", "b:b/1", "a:a/6"]);
    assert_eq!(contents(merge_pages(pages.clone(), LogOrder::OldestFirst, 3)), ["a:a/4", "a:a/5", "b:b/0"]);
    let newest: Vec<_> = pages.into_iter().map(|(node, mut page)| {
        page.reverse();
        (node, page)
    }).collect();
    assert_eq!(contents(merge_pages(newest, LogOrder::NewestFirst, 4)), ["a:a/6", "b:b/1", "b:b/0", "a:a/5"]);
}

#[test]
fn paging_with_small_limits_yields_every_log_once_in_order() {
    let nodes = cluster();
    let whole = LogFilter { start_ms: T - 1_000, end_ms: T + 1_000, ..LogFilter::default() };
    for order in [LogOrder::OldestFirst, LogOrder::NewestFirst] {
        let expected = everything(&nodes, &LogFilter { order, ..whole.clone() });
        assert_eq!(expected.len(), 24);
        for limit in [1, 2, 3, 4, 5, 7, 24, 25] {
            let filter = LogFilter { order, limit, ..whole.clone() };
            assert_eq!(page_through(&nodes, &filter), expected, "{order:?}, limit {limit}");
        }
        // Filtered (the service index path) and over a narrower range, the same holds.
        let narrow = LogFilter { order, limit: 2, service: Some("odd".into()), start_ms: T + 1, end_ms: T + 9, ..whole.clone() };
        let expected = everything(&nodes, &narrow);
        assert!(expected.len() > 4 && expected.iter().all(|c| !c.ends_with('0')), "{expected:?}");
        assert_eq!(page_through(&nodes, &narrow), expected, "{order:?}, filtered");
    }
}

#[test]
fn tailing_from_the_last_cursor_picks_up_only_newer_logs_on_any_node() {
    let nodes = cluster();
    let filter = LogFilter { start_ms: T - 1_000, end_ms: T + 1_000, limit: 1_000, order: LogOrder::OldestFirst, ..LogFilter::default() };
    let shown = page(&nodes, &filter, None);
    let last = shown.last().map(NodeLog::cursor).expect("logs");
    assert_eq!(last, ClusterCursor { timestamp_ms: T + 10, node: id("c"), sequence: 8 });
    assert!(page(&nodes, &filter, Some(&last)).is_empty(), "nothing new");
    // New logs: on a, at the last log's millisecond (a sorts before c: already behind) and
    // later; on b-1, later.
    nodes[0].1.write(&[kept(T + 10, "a/late"), kept(T + 11, "a/8")]).expect("write");
    nodes[1].1.write(&[kept(T + 12, "b-1/7")]).expect("write");
    let contents: Vec<String> = page(&nodes, &filter, Some(&last)).into_iter().map(|l| l.stored.log.record.content).collect();
    assert_eq!(contents, ["a/8", "b-1/7"]);
}
