//! What the scrape worker shows of its targets: for each target, who owned it at its last due
//! time, whether this node scraped it then, and this node's last scrape of it. The worker is the
//! one writer; `GET /status/scrape` reads it.
//!
//! A node holds the whole list, owned or not, so that every node of a cluster can answer who
//! scrapes what, and the operator can check that all nodes agree.

use std::sync::RwLock;

use crate::base::ids::NodeId;

/// One target as the worker last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetStatus {
    pub job: String,
    /// The target as configured (`host:port`), the `instance` label.
    pub target: String,
    pub url: String,
    /// The owner under the live set of the target's last due time; none before the first.
    pub owner: Option<NodeId>,
    /// Whether this node scraped the target at its last due time.
    pub scraped_here: bool,
    /// This node's last finished scrape of the target; none when it never scraped it.
    pub last_scrape: Option<LastScrape>,
}

/// A finished scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastScrape {
    /// `ok`, `error`, `timeout`, `queue_full` or `stopped`, as `scrapes{result}` counts it.
    pub result: &'static str,
    /// When it finished, epoch ms.
    pub time_ms: i64,
    /// Why it produced nothing, when it did not.
    pub error: Option<String>,
}

/// The targets of one node's scrape worker, in its order.
#[derive(Debug, Default)]
pub struct ScrapeBoard {
    targets: RwLock<Vec<TargetStatus>>,
}

impl ScrapeBoard {
    pub fn new() -> ScrapeBoard {
        ScrapeBoard::default()
    }

    /// Adds a target; its index is the worker's.
    pub(super) fn register(&self, job: &str, target: &str, url: &str) -> usize {
        let mut targets = self.write();
        targets.push(TargetStatus {
            job: job.to_string(),
            target: target.to_string(),
            url: url.to_string(),
            owner: None,
            scraped_here: false,
            last_scrape: None,
        });
        targets.len() - 1
    }

    /// The target was due: `owner` owns it, and this node scrapes it when `here`.
    pub(super) fn decided(&self, index: usize, owner: &NodeId, here: bool) {
        if let Some(status) = self.write().get_mut(index) {
            status.owner = Some(owner.clone());
            status.scraped_here = here;
        }
    }

    /// This node finished a scrape of the target.
    pub(super) fn scraped(&self, index: usize, last: LastScrape) {
        if let Some(status) = self.write().get_mut(index) {
            status.last_scrape = Some(last);
        }
    }

    /// Every target, in the worker's order.
    pub fn snapshot(&self) -> Vec<TargetStatus> {
        self.targets.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<TargetStatus>> {
        self.targets.write().unwrap_or_else(|p| p.into_inner())
    }
}
