//! The pure parts of a cluster-wide `/query/logs` (`cluster=true`): the cluster cursor, what
//! each node is asked for, and the merge of the nodes' pages. No IO; `QueryService::read_cluster_logs`
//! carries them out.
//!
//! Each node keeps the logs it received, ordered by `(timestamp, sequence)` with a sequence of
//! its own. Across nodes the order is `(timestamp, node id, sequence)`: a total order, since a
//! node's sequences never repeat. A cluster cursor is a position in that order, written
//! `<timestamp ms>-<node id>-<sequence>` (the node id may itself hold `-`: the timestamp ends at
//! the first `-` after its optional sign, the sequence starts after the last one).
//!
//! A page after a cursor `(T, N, S)` asks every node for its own page strictly past that
//! position in the read's order. Oldest first: node `N` reads after its own `(T, S)`; a node
//! sorting before `N` reads from `T + 1` (its logs at `T` come before the cursor); a node
//! sorting after `N` reads from `T` (its logs at `T` come after it). Newest first mirrors it.
//! The first `limit` logs past the cursor in the merged order are among the first `limit` of
//! each node, so merging the pages and keeping `limit` of them loses nothing and repeats
//! nothing.

use std::cmp::Ordering;

use crate::base::ids::NodeId;
use crate::data::logs::{LogCursor, LogFilter, LogOrder, StoredLog};

use super::super::Missing;

/// A position in the cluster's log order: `(timestamp, node, sequence)`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterCursor {
    pub timestamp_ms: i64,
    pub node: NodeId,
    pub sequence: u64,
}

/// A cluster cursor as the API writes it: `<timestamp ms>-<node id>-<sequence>`.
pub fn cluster_cursor_text(cursor: &ClusterCursor) -> String {
    format!("{}-{}-{}", cursor.timestamp_ms, cursor.node, cursor.sequence)
}

/// A cluster cursor back from its text; `None` when it is not one (a node's own cursor
/// `<timestamp ms>-<sequence>` is not).
pub fn parse_cluster_cursor(text: &str) -> Option<ClusterCursor> {
    let text = text.trim();
    let (head, sequence) = text.rsplit_once('-')?;
    // The timestamp ends at the first `-` after its sign.
    let sign = usize::from(head.starts_with('-'));
    let end = sign + head.get(sign..)?.find('-')?;
    let (timestamp, node) = (head.get(..end)?, head.get(end + 1..)?);
    if node.is_empty() {
        return None;
    }
    Some(ClusterCursor { timestamp_ms: timestamp.parse().ok()?, node: NodeId::parse(node).ok()?, sequence: sequence.parse().ok()? })
}

/// A log and the node that holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLog {
    pub node: NodeId,
    pub stored: StoredLog,
}

impl NodeLog {
    /// The log's position in the cluster's order.
    pub fn cursor(&self) -> ClusterCursor {
        ClusterCursor { timestamp_ms: self.stored.cursor.timestamp_ms, node: self.node.clone(), sequence: self.stored.cursor.sequence }
    }

    fn order_key(&self) -> (i64, &NodeId, u64) {
        (self.stored.cursor.timestamp_ms, &self.node, self.stored.cursor.sequence)
    }
}

/// A cluster-wide page: the merged logs, the nodes that contributed and those that did not.
#[derive(Debug, Default)]
pub struct ClusterLogs {
    pub logs: Vec<NodeLog>,
    pub nodes: Vec<NodeId>,
    pub missing: Vec<Missing>,
}

/// What `node` is asked for: `filter`'s logs on that node strictly past `after` in the cluster
/// order (the module doc has the three cases).
pub fn node_filter(filter: &LogFilter, after: Option<&ClusterCursor>, node: &NodeId) -> LogFilter {
    let mut own = LogFilter { after: None, ..filter.clone() };
    let Some(after) = after else { return own };
    let at = after.timestamp_ms;
    match (filter.order, node.cmp(&after.node)) {
        (_, Ordering::Equal) => own.after = Some(LogCursor { timestamp_ms: at, sequence: after.sequence }),
        // Oldest first: this node's logs at `at` come before the cursor.
        (LogOrder::OldestFirst, Ordering::Less) => match at.checked_add(1) {
            Some(next) => own.start_ms = own.start_ms.max(next),
            None => return nothing(own),
        },
        // Oldest first: this node's logs at `at` come after the cursor.
        (LogOrder::OldestFirst, Ordering::Greater) => own.start_ms = own.start_ms.max(at),
        // Newest first: this node's logs at `at` come after the cursor in the read's order.
        (LogOrder::NewestFirst, Ordering::Less) => own.end_ms = own.end_ms.min(at),
        // Newest first: this node's logs at `at` come before the cursor in the read's order.
        (LogOrder::NewestFirst, Ordering::Greater) => match at.checked_sub(1) {
            Some(previous) => own.end_ms = own.end_ms.min(previous),
            None => return nothing(own),
        },
    }
    own
}

/// A read of no logs (an empty range: the store returns nothing for it).
fn nothing(filter: LogFilter) -> LogFilter {
    LogFilter { start_ms: i64::MAX, end_ms: i64::MIN, ..filter }
}

/// The first `limit` logs of the nodes' pages in the cluster order of `order`.
pub fn merge_pages(pages: Vec<(NodeId, Vec<StoredLog>)>, order: LogOrder, limit: usize) -> Vec<NodeLog> {
    let mut logs: Vec<NodeLog> =
        pages.into_iter().flat_map(|(node, page)| page.into_iter().map(move |stored| NodeLog { node: node.clone(), stored })).collect();
    match order {
        LogOrder::OldestFirst => logs.sort_by(|a, b| a.order_key().cmp(&b.order_key())),
        LogOrder::NewestFirst => logs.sort_by(|a, b| b.order_key().cmp(&a.order_key())),
    }
    logs.truncate(limit);
    logs
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
