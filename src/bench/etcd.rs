//! `hotrule bench etcd`: the anchor for failover. A three-member etcd cluster (Debian's
//! `etcd-server`, real processes on loopback addresses, default heartbeat and election
//! settings) measured exactly as `hotrule bench cluster` measures hotrule: one write every
//! 50 ms through a member that survives, kill -9 of the leader, then
//! - **failover**: from the kill to the completion of the first write sent after it that
//!   succeeds;
//! - **errors**: writes sent during the failover (from the kill until that first success) that
//!   the client saw fail.
//!
//! Writes go through etcd's HTTP/JSON gateway (`POST /v3/kv/put`) with a 10 s client timeout,
//! so a request that etcd holds during its election counts as held, not as an error.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper::Method;

use super::cluster::wait_for;
use crate::api::client::AdminClient;

/// How often the writer sends, as in the hotrule measurement.
pub const WRITE_EVERY: Duration = Duration::from_millis(50);
/// How long one write may take before the client gives up on it.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one round may take from the kill before it is abandoned.
const ROUND_LIMIT: Duration = Duration::from_secs(30);

/// One failover, as a client writing through a survivor saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailoverRound {
    /// From the kill to the first accepted write sent after it.
    pub failover: Duration,
    /// Writes sent during the failover that failed.
    pub errors: usize,
}

/// What the writer saw of one write: when it was sent, when it completed, and whether it
/// succeeded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteOutcome {
    pub sent: Instant,
    pub done: Instant,
    pub ok: bool,
}

/// The pure measurement of one round from the writer's outcomes (shared with the hotrule side).
/// `None` when no write sent after the kill succeeded.
pub fn measure(killed_at: Instant, outcomes: &[WriteOutcome]) -> Option<FailoverRound> {
    let first_ok = outcomes.iter().filter(|w| w.ok && w.sent >= killed_at).map(|w| w.done).min()?;
    let errors = outcomes.iter().filter(|w| !w.ok && w.sent >= killed_at && w.sent <= first_ok).count();
    Some(FailoverRound { failover: first_ok.duration_since(killed_at), errors })
}

/// Median, min and max of the rounds, and the errors, as one line.
pub fn summarize(name: &str, rounds: &[FailoverRound]) -> String {
    if rounds.is_empty() {
        return format!("{name}: no round completed");
    }
    let mut times: Vec<Duration> = rounds.iter().map(|r| r.failover).collect();
    times.sort();
    let errors: Vec<usize> = rounds.iter().map(|r| r.errors).collect();
    format!(
        "{name}: {} rounds; kill -9 to first accepted write: median {:.2} s (min {:.2} s, max {:.2} s); client-visible errors per failover: total {}, max {}",
        rounds.len(),
        times[times.len() / 2].as_secs_f64(),
        times[0].as_secs_f64(),
        times[times.len() - 1].as_secs_f64(),
        errors.iter().sum::<usize>(),
        errors.iter().max().copied().unwrap_or(0),
    )
}

struct Member {
    name: String,
    host: String,
    data: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    client: AdminClient,
}

impl Member {
    fn start(&mut self, initial_cluster: &str) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let child = Command::new("etcd")
            .args(["--name", &self.name])
            .args(["--data-dir", &self.data.display().to_string()])
            .args(["--listen-client-urls", &format!("http://{}:2379", self.host)])
            .args(["--advertise-client-urls", &format!("http://{}:2379", self.host)])
            .args(["--listen-peer-urls", &format!("http://{}:2380", self.host)])
            .args(["--initial-advertise-peer-urls", &format!("http://{}:2380", self.host)])
            .args(["--initial-cluster", initial_cluster])
            .args(["--initial-cluster-token", "hotrule-bench"])
            .args(["--initial-cluster-state", "new"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting etcd (Debian: apt-get install etcd-server): {e}"))?;
        self.child = Some(child);
        Ok(())
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn healthy(&self) -> bool {
        let reply = self.client.get("/health").await.ok().and_then(|r| r.json());
        reply.is_some_and(|r| r["health"] == "true")
    }

    /// This member's id and the leader's id it reports, both as decimal strings.
    async fn status(&self) -> Option<(String, String)> {
        let reply = self.client.send(Method::POST, "/v3/maintenance/status", b"{}".to_vec(), None).await.ok()?;
        let json = reply.json()?;
        let id = json["header"]["member_id"].as_str()?.to_string();
        let leader = json["leader"].as_str()?.to_string();
        Some((id, leader))
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn put(client: &AdminClient, i: usize) -> bool {
    put_key(client, "bench", i).await
}

async fn put_key(client: &AdminClient, key: &str, i: usize) -> bool {
    let body = format!(r#"{{"key":"{}","value":"{}"}}"#, base64(key.as_bytes()), base64(i.to_string().as_bytes()));
    match client.send(Method::POST, "/v3/kv/put", body.into_bytes(), None).await {
        Ok(reply) => reply.status.is_success() && reply.json().is_some_and(|j| j.get("error").is_none()),
        Err(_) => false,
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for (k, shift) in [18u32, 12, 6, 0].iter().enumerate() {
            if k <= chunk.len() {
                out.push(ALPHABET[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Runs `rounds` failovers of a three-member etcd cluster on `127.0.<net>.1-3`, after a
/// closed-loop write load on the leader when `throughput` (clients, duration) is given.
pub async fn failover(
    dir: &Path,
    rounds: usize,
    net: u8,
    throughput: Option<(usize, Duration)>,
) -> Result<Vec<FailoverRound>, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let hosts: Vec<String> = (1..=3).map(|i| format!("127.0.{net}.{i}")).collect();
    let initial_cluster =
        hosts.iter().enumerate().map(|(i, h)| format!("e{}=http://{h}:2380", i + 1)).collect::<Vec<_>>().join(",");
    let mut members = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let client = AdminClient::new(&format!("http://{host}:2379"), None)
            .map_err(|e| e.to_string())?
            .with_timeout(WRITE_TIMEOUT);
        let mut member = Member {
            name: format!("e{}", i + 1),
            host: host.clone(),
            data: dir.join(format!("e{}", i + 1)),
            log: dir.join(format!("e{}.log", i + 1)),
            child: None,
            client,
        };
        member.start(&initial_cluster)?;
        members.push(member);
    }
    if let Some((clients, duration)) = throughput {
        for member in &members {
            wait_for(&format!("etcd {} healthy", member.name), Duration::from_secs(60), async || member.healthy().await)
                .await?;
        }
        let leader = members[find_leader(&members).await?].client.clone();
        let run = super::throughput::closed_loop(clients, duration, move |client, step| {
            let leader = leader.clone();
            async move { put_key(&leader, &format!("tp-{client}"), step).await }
        })
        .await;
        println!("{}", run.line("writes to the etcd leader of 3 members"));
    }
    let mut results = Vec::with_capacity(rounds);
    for round in 0..rounds {
        for member in &members {
            wait_for(&format!("etcd {} healthy", member.name), Duration::from_secs(60), async || member.healthy().await)
                .await?;
        }
        let leader = find_leader(&members).await?;
        let writer_index = (leader + 1) % members.len();
        let writer = members[writer_index].client.clone();
        // Warm up: the writer's path works before the kill.
        wait_for("a write through a follower", Duration::from_secs(30), async || put(&writer, 0).await).await?;
        let (outcomes_tx, mut outcomes_rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = tokio_util::sync::CancellationToken::new();
        let writer_task = tokio::spawn(write_every(writer, outcomes_tx, stop.clone()));
        tokio::time::sleep(4 * WRITE_EVERY).await;
        // As in `bench cluster`: the clock starts once the process is gone (killed and reaped).
        members[leader].kill();
        let killed_at = Instant::now();
        let mut outcomes = Vec::new();
        let measured = loop {
            match tokio::time::timeout_at((killed_at + ROUND_LIMIT).into(), outcomes_rx.recv()).await {
                Ok(Some(outcome)) => {
                    outcomes.push(outcome);
                    if let Some(measured) = measure(killed_at, &outcomes) {
                        break Some(measured);
                    }
                }
                Ok(None) | Err(_) => break None,
            }
        };
        stop.cancel();
        let _ = writer_task.await;
        let measured = measured.ok_or_else(|| format!("round {round}: no write succeeded within {ROUND_LIMIT:?}"))?;
        eprintln!(
            "etcd round {}: killed {}, failover {:.2} s, {} errors",
            round + 1,
            members[leader].name,
            measured.failover.as_secs_f64(),
            measured.errors
        );
        results.push(measured);
        members[leader].start(&initial_cluster)?;
    }
    Ok(results)
}

async fn find_leader(members: &[Member]) -> Result<usize, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let mut ids = Vec::new();
        let mut leader_id = None;
        for member in members {
            if let Some((id, leader)) = member.status().await {
                leader_id = Some(leader);
                ids.push(Some(id));
            } else {
                ids.push(None);
            }
        }
        if let Some(leader_id) = leader_id
            && let Some(index) = ids.iter().position(|id| id.as_deref() == Some(leader_id.as_str()))
        {
            return Ok(index);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err("no etcd leader within 30 s".into())
}

/// Sends one write every [`WRITE_EVERY`], each on its own task so a held write does not delay
/// the next, until `stop`; reports every outcome.
async fn write_every(
    client: AdminClient,
    outcomes_tx: tokio::sync::mpsc::UnboundedSender<WriteOutcome>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(WRITE_EVERY);
    let mut i = 1usize;
    // Bounded: the caller cancels within ROUND_LIMIT; the count bounds it too.
    while i < (ROUND_LIMIT.as_millis() / WRITE_EVERY.as_millis()) as usize * 2 {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let client = client.clone();
        let outcomes_tx = outcomes_tx.clone();
        tokio::spawn(async move {
            let sent = Instant::now();
            let ok = put(&client, i).await;
            let _ = outcomes_tx.send(WriteOutcome { sent, done: Instant::now(), ok });
        });
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (input, expected) in
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("bench", "YmVuY2g=")]
        {
            assert_eq!(base64(input.as_bytes()), expected, "{input}");
        }
    }

    #[test]
    fn a_round_is_measured_from_the_kill_to_the_first_success_sent_after_it() {
        let kill = Instant::now();
        let at = |ms: u64| kill + Duration::from_millis(ms);
        let before = kill - Duration::from_millis(100);
        let outcomes = [
            // Sent before the kill: ignored, whatever happened to it.
            WriteOutcome { sent: before, done: at(10), ok: false },
            WriteOutcome { sent: before, done: at(5), ok: true },
            // During the failover: two errors, then writes held until the new leader.
            WriteOutcome { sent: at(50), done: at(60), ok: false },
            WriteOutcome { sent: at(100), done: at(110), ok: false },
            WriteOutcome { sent: at(150), done: at(1_200), ok: true },
            WriteOutcome { sent: at(200), done: at(1_100), ok: true },
            // After the first success: an error here is not part of this failover.
            WriteOutcome { sent: at(1_150), done: at(1_160), ok: false },
        ];
        let round = measure(kill, &outcomes).expect("a success after the kill");
        assert_eq!(round.failover, Duration::from_millis(1_100));
        assert_eq!(round.errors, 2);
        assert_eq!(measure(kill, &outcomes[..4]), None, "no success after the kill yet");
    }

    #[test]
    fn the_summary_reports_the_median_and_the_errors() {
        let rounds = [1_300u64, 1_000, 1_100].map(|ms| FailoverRound { failover: Duration::from_millis(ms), errors: 1 });
        let line = summarize("etcd", &rounds);
        assert!(line.contains("median 1.10 s (min 1.00 s, max 1.30 s)"), "{line}");
        assert!(line.contains("total 3, max 1"), "{line}");
        assert_eq!(summarize("etcd", &[]), "etcd: no round completed");
    }
}
