//! [`run_agents`]: a fleet of simulated 3.x agents heartbeating against one server for a bounded
//! time, and the report of what they saw (for `hotrule bench agents`).
//!
//! Each agent is one task on one shared HTTP client. Like the real agent, each starts at a random
//! offset within the first interval (the agent sleeps 0–0.9 s before its loop) and then keeps a
//! fixed cadence; a slow answer delays only that agent. The run stops starting heartbeats at the
//! deadline and waits at most one request timeout for those in flight.

use std::time::{Duration, Instant};

use rand::Rng;
use tokio::task::JoinSet;

use super::{AgentClient, REAL_AGENT_CAPABILITIES, SimAgent, SimAgentSpec, SimError};

/// Most agents one run simulates.
pub const MAX_BENCH_AGENTS: usize = 100_000;

/// Longest run.
pub const MAX_BENCH_DURATION: Duration = Duration::from_secs(3600);

/// Distinct error messages kept in a report.
const MAX_REPORTED_ERRORS: usize = 20;

#[derive(Debug, Clone)]
pub struct AgentBenchSettings {
    /// `host:port` of the agent API.
    pub server: String,
    pub agents: usize,
    pub interval: Duration,
    /// How long to keep heartbeating.
    pub duration: Duration,
    pub token: Option<String>,
    /// CA certificates (PEM) to trust for an `https://` server.
    pub ca_file: Option<std::path::PathBuf>,
    /// Tags every simulated agent reports.
    pub tags: Vec<(String, String)>,
    pub capabilities: u64,
    pub request_timeout: Duration,
}

impl AgentBenchSettings {
    /// `agents` agents for three intervals, with the real agent's capabilities and timeout.
    pub fn new(server: impl Into<String>, agents: usize, interval: Duration) -> AgentBenchSettings {
        AgentBenchSettings {
            server: server.into(),
            agents,
            interval,
            duration: interval.saturating_mul(3),
            token: None,
            ca_file: None,
            tags: Vec::new(),
            capabilities: REAL_AGENT_CAPABILITIES,
            request_timeout: Duration::from_secs(15),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentBenchReport {
    pub agents: usize,
    pub elapsed: Duration,
    pub heartbeats_ok: u64,
    pub heartbeats_failed: u64,
    pub fetches_ok: u64,
    pub fetches_failed: u64,
    pub configs_applied: u64,
    pub configs_deleted: u64,
    pub commands_received: u64,
    /// Heartbeat round trips that got an answer.
    pub latency_p50: Duration,
    pub latency_p99: Duration,
    pub latency_max: Duration,
    pub error_count: u64,
    /// The first distinct error messages.
    pub errors: Vec<String>,
}

impl std::fmt::Display for AgentBenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "agents: {} for {:.1?}", self.agents, self.elapsed)?;
        writeln!(
            f,
            "heartbeats: {} ok, {} failed",
            self.heartbeats_ok, self.heartbeats_failed
        )?;
        writeln!(
            f,
            "fetches: {} ok, {} failed",
            self.fetches_ok, self.fetches_failed
        )?;
        writeln!(
            f,
            "configs applied {}, deleted {}; onetime commands received {}",
            self.configs_applied, self.configs_deleted, self.commands_received
        )?;
        writeln!(
            f,
            "heartbeat latency: p50 {:.2?}, p99 {:.2?}, max {:.2?}",
            self.latency_p50, self.latency_p99, self.latency_max
        )?;
        writeln!(f, "errors: {}", self.error_count)?;
        for error in &self.errors {
            writeln!(f, "  {error}")?;
        }
        Ok(())
    }
}

/// What one agent task saw.
#[derive(Default)]
struct TaskStats {
    latencies: Vec<Duration>,
    heartbeats_failed: u64,
    fetches_ok: u64,
    fetches_failed: u64,
    applied: u64,
    deleted: u64,
    commands: u64,
    errors: Vec<SimError>,
}

impl TaskStats {
    fn note_error(&mut self, error: SimError) {
        // Keep a few per task; the report keeps the distinct ones.
        if self.errors.len() < MAX_REPORTED_ERRORS {
            self.errors.push(error);
        }
    }
}

fn unix_now_s() -> i64 {
    i64::try_from(crate::base::clock::now_ms() / 1000).unwrap_or(i64::MAX)
}

/// Runs the fleet and reports. Bad settings (unparsable server, zero agents or interval) give a
/// report with the error and no heartbeats.
pub async fn run_agents(settings: AgentBenchSettings) -> AgentBenchReport {
    let agents = settings.agents.min(MAX_BENCH_AGENTS);
    let mut report = AgentBenchReport {
        agents,
        ..AgentBenchReport::default()
    };
    if agents == 0 || settings.interval.is_zero() {
        report.error_count = 1;
        report
            .errors
            .push("need at least one agent and a non-zero interval".to_string());
        return report;
    }
    let client = match AgentClient::with_ca_file(
        &settings.server,
        settings.token.clone(),
        settings.ca_file.as_deref(),
    ) {
        Ok(client) => client.with_timeout(settings.request_timeout),
        Err(e) => {
            report.error_count = 1;
            report.errors.push(e.to_string());
            return report;
        }
    };
    let started = Instant::now();
    let deadline = started + settings.duration.min(MAX_BENCH_DURATION);
    let mut tasks = JoinSet::new();
    for index in 0..agents {
        let mut spec = SimAgentSpec::numbered(index);
        spec.tags = settings.tags.clone();
        spec.capabilities = settings.capabilities;
        let interval = settings.interval;
        let offset = interval.mul_f64(rand::rng().random_range(0.0..1.0));
        let client = client.clone();
        tasks.spawn(run_one(
            SimAgent::new(spec, unix_now_s()),
            client,
            started + offset,
            interval,
            deadline,
        ));
    }
    let mut latencies = Vec::new();
    let mut distinct = std::collections::BTreeSet::new();
    while let Some(joined) = tasks.join_next().await {
        let Ok(stats) = joined else {
            report.error_count += 1;
            continue;
        };
        latencies.extend(stats.latencies.iter().copied());
        report.heartbeats_failed += stats.heartbeats_failed;
        report.fetches_ok += stats.fetches_ok;
        report.fetches_failed += stats.fetches_failed;
        report.configs_applied += stats.applied;
        report.configs_deleted += stats.deleted;
        report.commands_received += stats.commands;
        report.error_count += stats.heartbeats_failed + stats.fetches_failed;
        for error in stats.errors {
            if distinct.len() < MAX_REPORTED_ERRORS {
                distinct.insert(error.to_string());
            }
        }
    }
    report.elapsed = started.elapsed();
    report.heartbeats_ok = latencies.len() as u64;
    latencies.sort_unstable();
    report.latency_p50 = percentile(&latencies, 50.0);
    report.latency_p99 = percentile(&latencies, 99.0);
    report.latency_max = latencies.last().copied().unwrap_or_default();
    report.errors = distinct.into_iter().collect();
    report
}

async fn run_one(
    mut agent: SimAgent,
    client: AgentClient,
    first: Instant,
    interval: Duration,
    deadline: Instant,
) -> TaskStats {
    let mut stats = TaskStats::default();
    let mut next = first;
    while next < deadline {
        tokio::time::sleep_until(next.into()).await;
        match agent.heartbeat(&client, unix_now_s()).await {
            Ok(round) => {
                stats.latencies.push(round.latency);
                stats.fetches_ok += (round.fetches - round.fetch_errors.len()) as u64;
                stats.fetches_failed += round.fetch_errors.len() as u64;
                stats.applied += round.applied as u64;
                stats.deleted += round.deleted as u64;
                stats.commands += round.commands_received as u64;
                for error in round.fetch_errors {
                    stats.note_error(error);
                }
            }
            Err(e) => {
                stats.heartbeats_failed += 1;
                stats.note_error(e);
            }
        }
        // A fixed cadence, skipping ticks that a slow answer overran.
        next += interval;
        let now = Instant::now();
        while next < now {
            next += interval;
        }
    }
    stats
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], percent: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((percent / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
