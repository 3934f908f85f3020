//! Scrape jobs: one worker per node fetches the text exposition of the configured targets it
//! owns on their job's interval, attaches `job` / `instance` / the job's labels as Prometheus
//! does, converts like remote-write and submits one batch per scrape.
//!
//! - Scrape jobs are divided: every node holds every target, but at each due time a target is
//!   scraped only by its owner among the live nodes at that moment (`base::owner`, keyed by job
//!   name and URL). A target owned elsewhere is skipped and stays scheduled, so when its owner
//!   dies it is scraped by the next owner at its next due time, within one interval of the live
//!   set changing. Alone, a node owns every target.
//! - A target is never scraped twice at once: the next scrape of a target starts only once the
//!   previous one has finished (a scrape is bounded by the job's timeout, at most the interval).
//! - Scrapes run at a fixed rate from the first one; one that starts late starts the next
//!   interval from now instead of bunching up.
//! - A full dispatch queue backs the target off: it skips the next interval(s), as many as the
//!   queue's `Retry-After` covers, and the scrape counts as `queue_full`.
//! - `scrapes{job,result}` counts every scrape: `ok`, `error`, `timeout`, `queue_full`, `stopped`.
//!
//! The timing decisions are [`Schedule`]'s (pure); the worker does the IO.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Request, Uri, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::base::clock::wall_clock_ms;
use crate::base::ids::NodeId;
use crate::base::owner::{LiveNodes, LiveSet};
use super::body::{self, Encoding};
use super::config::ScrapeJob;
use super::exposition::{self, ExpositionRefused, TargetLabels};
use super::scrape_board::{LastScrape, ScrapeBoard};
use super::Ingest;
use crate::data::seam::{Batch, Protocol, SubmitError};
use crate::base::self_metrics::{SelfMetrics, labels};
use crate::base::worker::{Worker, WorkerState};

/// The longest a full queue backs a target off (beyond one interval).
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// When one target is scraped next. Pure: the caller passes the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    interval: Duration,
    next_due: Instant,
    in_flight: bool,
}

impl Schedule {
    /// A schedule whose first scrape is due at `first`.
    pub fn new(interval: Duration, first: Instant) -> Schedule {
        Schedule { interval, next_due: first, in_flight: false }
    }

    /// Whether a scrape should start at `now`.
    pub fn is_due(&self, now: Instant) -> bool {
        !self.in_flight && now >= self.next_due
    }

    /// When a scrape is due next, unless one is running.
    pub fn next_due(&self) -> Option<Instant> {
        (!self.in_flight).then_some(self.next_due)
    }

    /// A scrape started at `now`: the next is one interval after this one's due time, or one
    /// interval from now when this one started late by more than an interval.
    pub fn started(&mut self, now: Instant) {
        self.in_flight = true;
        self.next_due += self.interval;
        if self.next_due <= now {
            self.next_due = now + self.interval;
        }
    }

    /// Not scraped here at `now` (another node owns the target): due again one interval after
    /// this due time, as if a scrape had started and finished at once.
    pub fn skipped(&mut self, now: Instant) {
        self.started(now);
        self.in_flight = false;
    }

    /// The scrape finished; `backoff` (a full queue's retry-after) skips the next interval(s):
    /// at least one, as many as the backoff covers.
    pub fn finished(&mut self, backoff: Option<Duration>) {
        self.in_flight = false;
        if let Some(retry_after) = backoff {
            let interval = self.interval.as_secs_f64().max(f64::EPSILON);
            // `as` saturates; the product is bounded so a wild retry-after cannot overflow.
            let skips = (retry_after.as_secs_f64() / interval).ceil().max(1.0) as u32;
            let backoff = self.interval.checked_mul(skips).unwrap_or(MAX_BACKOFF).min(MAX_BACKOFF.max(self.interval));
            self.next_due += backoff;
        }
    }
}

/// Why a scrape produced nothing.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Http(String),
    #[error("answered {0}")]
    Status(u16),
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error(transparent)]
    Exposition(#[from] ExpositionRefused),
}

/// One target of one job.
struct Target {
    job: Arc<ScrapeJob>,
    /// The target as configured (`host:port`), the `instance` label.
    instance: String,
    url: Uri,
    labels: TargetLabels,
    schedule: Schedule,
    /// What decides who scrapes it: the job name and the URL (`job \0 url`).
    owner_key: Vec<u8>,
    /// Whether this node scraped it at its last due time, to log only changes.
    owned: Option<bool>,
    /// Its index on the board (the same as in `targets`).
    board_index: usize,
    /// The last scrape's result, to log only changes.
    last_result: &'static str,
}

/// Scrapes the targets of the configured jobs that this node owns.
pub struct ScrapeWorker {
    ingest: Arc<Ingest>,
    client: Client<HttpConnector, Empty<Bytes>>,
    targets: Vec<Target>,
    live: Arc<dyn LiveNodes>,
    board: Arc<ScrapeBoard>,
    running: JoinSet<(usize, Result<Option<Batch>, ScrapeError>)>,
}

impl ScrapeWorker {
    /// A worker over `jobs`, dividing their targets by `live`, showing them on `board`.
    pub fn new(ingest: Arc<Ingest>, jobs: &[ScrapeJob], live: Arc<dyn LiveNodes>, board: Arc<ScrapeBoard>) -> ScrapeWorker {
        let now = Instant::now();
        let mut targets = Vec::new();
        for job in jobs {
            let job = Arc::new(job.clone());
            for instance in &job.targets {
                let Ok(url) = format!("http://{instance}{}", job.metrics_path).parse::<Uri>() else {
                    // Validation checked both parts; a target that still does not form a URL is skipped.
                    tracing::error!(job = %job.name, target = %instance, "scrape target does not form a URL; skipped");
                    continue;
                };
                let url_text = url.to_string();
                targets.push(Target {
                    labels: TargetLabels::new(&job.name, Some(instance), &job.labels),
                    owner_key: owner_key(&job.name, &url_text),
                    board_index: board.register(&job.name, instance, &url_text),
                    instance: instance.clone(),
                    url,
                    schedule: Schedule::new(job.interval, now),
                    job: job.clone(),
                    owned: None,
                    last_result: "ok",
                });
            }
        }
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(crate::base::listen::CLIENT_POOL_IDLE_TIMEOUT)
            .build_http::<Empty<Bytes>>();
        ScrapeWorker { ingest, client, targets, live, board, running: JoinSet::new() }
    }


    /// Counts and submits a finished scrape; says how long the target should back off.
    fn finished(&mut self, index: usize, outcome: Result<Option<Batch>, ScrapeError>) {
        let Some(target) = self.targets.get_mut(index) else { return };
        let error = outcome.as_ref().err().map(ToString::to_string);
        let (result, backoff) = match outcome {
            Ok(batch) => match self.ingest.submit(Protocol::Scrape, batch.into_iter().collect()) {
                Ok(()) => ("ok", None),
                Err(SubmitError::QueueFull { retry_after }) => ("queue_full", Some(retry_after)),
                Err(SubmitError::Stopped) => ("stopped", None),
            },
            Err(ScrapeError::Timeout(after)) => {
                log_change(target, "timeout", &format!("no answer within {after:?}"));
                ("timeout", None)
            }
            Err(e) => {
                log_change(target, "error", &e.to_string());
                ("error", None)
            }
        };
        if result == "ok" && target.last_result != "ok" {
            tracing::info!(job = %target.job.name, target = %target.url, "scrape target answers again");
        }
        target.last_result = result;
        target.schedule.finished(backoff);
        self.board.scraped(target.board_index, LastScrape { result, time_ms: wall_clock_ms(), error });
        self.ingest.telemetry().scrapes.get_or_create(&labels([("job", target.job.name.as_str()), ("result", result)])).inc();
    }
}

/// The target is due: whether this node owns it under the live set now. The decision is shown
/// on the board and in `scrape_target_owned`; a change is logged.
fn owns(target: &mut Target, live: &LiveSet, board: &ScrapeBoard, telemetry: &SelfMetrics) -> bool {
    let owner = live.owner(&target.owner_key);
    let here = live.owns(&target.owner_key);
    board.decided(target.board_index, owner, here);
    let gauge = labels([("job", target.job.name.as_str()), ("target", target.instance.as_str())]);
    telemetry.scrape_target_owned.get_or_create(&gauge).set(i64::from(here));
    if target.owned != Some(here) {
        log_owner(target, owner, here, live.self_id());
        target.owned = Some(here);
    }
    here
}

/// What decides who scrapes a target: its job's name and its URL.
pub fn owner_key(job: &str, url: &str) -> Vec<u8> {
    format!("{job}\u{0}{url}").into_bytes()
}

fn log_owner(target: &Target, owner: &NodeId, here: bool, self_id: &NodeId) {
    match here {
        true => tracing::info!(job = %target.job.name, target = %target.url, node = %self_id, "scrape target is scraped by this node"),
        false => tracing::info!(job = %target.job.name, target = %target.url, %owner, "scrape target is scraped by another node"),
    }
}

fn log_change(target: &Target, result: &'static str, reason: &str) {
    if target.last_result != result {
        tracing::warn!(job = %target.job.name, target = %target.url, %reason, "scrape failed");
    } else {
        tracing::debug!(job = %target.job.name, target = %target.url, %reason, "scrape failed");
    }
}

#[async_trait::async_trait]
impl Worker for ScrapeWorker {
    fn name(&self) -> &'static str {
        "scrape"
    }

    async fn work(&mut self) -> WorkerState {
        let now = Instant::now();
        let limit = self.ingest.limits().max_decompressed_bytes;
        // The live set is read once per pass, and only when a target is due.
        let mut live = None;
        for (index, target) in self.targets.iter_mut().enumerate() {
            if !target.schedule.is_due(now) {
                continue;
            }
            let live = live.get_or_insert_with(|| self.live.live());
            if !owns(target, live, &self.board, self.ingest.telemetry()) {
                target.schedule.skipped(now);
                continue;
            }
            target.schedule.started(now);
            let client = self.client.clone();
            let url = target.url.clone();
            let timeout = target.job.timeout;
            let labels = target.labels.clone();
            self.running.spawn(async move { (index, scrape(client, url, timeout, limit, labels).await) });
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        let next_due = self.targets.iter().filter_map(|t| t.schedule.next_due()).min();
        tokio::select! {
            Some(joined) = self.running.join_next() => {
                match joined {
                    Ok((index, outcome)) => self.finished(index, outcome),
                    // A scrape task cannot panic on any input; if it did, its target would stay
                    // in flight forever, so this is logged loudly.
                    Err(e) => tracing::error!(error = %e, "scrape task failed"),
                }
                WorkerState::Busy
            }
            _ = sleep_until(next_due) => WorkerState::Busy,
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One scrape: GET within `timeout`, read at most `limit` bytes, parse, convert.
pub async fn scrape(
    client: Client<HttpConnector, Empty<Bytes>>,
    url: Uri,
    timeout: Duration,
    limit: usize,
    labels: TargetLabels,
) -> Result<Option<Batch>, ScrapeError> {
    let started_ms = wall_clock_ms();
    let fetch = async {
        let request = Request::get(url)
            .header(header::ACCEPT, "text/plain;version=0.0.4;q=1,*/*;q=0.1")
            .header("X-Prometheus-Scrape-Timeout-Seconds", format!("{}", timeout.as_secs_f64()))
            .body(Empty::<Bytes>::new())
            .map_err(|e| ScrapeError::Http(e.to_string()))?;
        let response = client.request(request).await.map_err(|e| {
            let reason = match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            };
            ScrapeError::Http(reason)
        })?;
        if !response.status().is_success() {
            return Err(ScrapeError::Status(response.status().as_u16()));
        }
        let encoding = body::encoding(response.headers(), &[Encoding::Identity, Encoding::Gzip]).map_err(|e| ScrapeError::Http(e.to_string()))?;
        let raw = match Limited::new(response.into_body(), limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(ScrapeError::TooLarge(limit)),
            Err(e) => return Err(ScrapeError::Http(e.to_string())),
        };
        body::decoded(raw, encoding, limit).map_err(|_| ScrapeError::TooLarge(limit))
    };
    let text = tokio::time::timeout(timeout, fetch).await.map_err(|_| ScrapeError::Timeout(timeout))??;
    let parsed = tokio::task::spawn_blocking(move || exposition::to_batch(&text, &labels, Protocol::Scrape, started_ms))
        .await
        .map_err(|e| ScrapeError::Http(format!("parsing task: {e}")))?;
    Ok(parsed?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_run_at_a_fixed_rate_and_never_overlap() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(10);
        let mut schedule = Schedule::new(interval, t0);
        assert!(schedule.is_due(t0));
        schedule.started(t0);
        assert!(!schedule.is_due(t0 + Duration::from_secs(30)), "in flight: not due again");
        assert_eq!(schedule.next_due(), None);
        schedule.finished(None);
        assert_eq!(schedule.next_due(), Some(t0 + interval));
        // Started 2 s late: the next one keeps the fixed rate.
        schedule.started(t0 + Duration::from_secs(12));
        schedule.finished(None);
        assert_eq!(schedule.next_due(), Some(t0 + 2 * interval));
        // Started 25 s late: the next is one interval from now.
        let late = t0 + 2 * interval + Duration::from_secs(25);
        schedule.started(late);
        schedule.finished(None);
        assert_eq!(schedule.next_due(), Some(late + interval));
    }

    #[test]
    fn a_skipped_target_stays_scheduled_at_the_same_rate() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(10);
        let mut schedule = Schedule::new(interval, t0);
        schedule.skipped(t0 + Duration::from_secs(1));
        assert_eq!(schedule.next_due(), Some(t0 + interval), "not in flight, due one interval later");
        let late = t0 + Duration::from_secs(35);
        schedule.skipped(late);
        assert_eq!(schedule.next_due(), Some(late + interval));
        assert!(schedule.is_due(late + interval));
    }

    #[test]
    fn the_owner_key_separates_the_job_from_the_url() {
        assert_ne!(owner_key("a", "bc"), owner_key("ab", "c"));
        assert_eq!(owner_key("vm", "http://h:1/metrics"), b"vm\0http://h:1/metrics".to_vec());
    }

    #[test]
    fn a_full_queue_skips_the_intervals_its_retry_after_covers() {
        let t0 = Instant::now();
        let interval = Duration::from_secs(10);
        let mut schedule = Schedule::new(interval, t0);
        schedule.started(t0);
        schedule.finished(Some(Duration::from_secs(1)));
        assert_eq!(schedule.next_due(), Some(t0 + 2 * interval), "at least one interval skipped");
        let t1 = t0 + 2 * interval;
        schedule.started(t1);
        schedule.finished(Some(Duration::from_secs(25)));
        assert_eq!(schedule.next_due(), Some(t1 + interval + 3 * interval), "25 s covers three intervals");
        let t2 = t1 + 4 * interval;
        schedule.started(t2);
        schedule.finished(Some(Duration::MAX));
        assert_eq!(schedule.next_due(), Some(t2 + interval + MAX_BACKOFF), "a wild retry-after is bounded");
    }
}
