//! `hotrule bench ingest`: remote-write ingest end to end, with a real Prometheus on the same
//! machine as the anchor, side by side in one run.
//!
//! - The stream: node_exporter-shaped remote-write 1.0 requests, as a Prometheus scraping many
//!   hosts every second sends them. Each host is the recorded scrape of
//!   `src/engines/mal-engine/tests/data/node-exporter` (507 series: counters, gauges, histograms as
//!   `_bucket{le}`), with `job="vm-monitoring"` and `instance="host-N:9100"`; one request carries
//!   one host's scrape (507 samples, about Prometheus' `max_samples_per_send`). Round `r` is
//!   stamped `t0 + r` seconds, counters advance by the recorded difference between the two scrapes
//!   per round, gauges stay. Label sets are encoded once; a request only adds its values and
//!   timestamps, then snappy (block format).
//! - The load: `C` connections, each owning the hosts `h ≡ c (mod C)` and sending their rounds in
//!   order, so a series' samples always arrive in time order (a receiver may refuse
//!   out-of-order samples). A warm-up round (every host's round 0, which creates the series) is
//!   sent before the clock starts. Then each connection sends its next request as soon as the
//!   last is answered, for `S` seconds.
//! - The clock: hotrule answers 204 once a batch is queued for evaluation, not once it is
//!   evaluated and stored, so its clock runs from the start of the load until the node's dispatch
//!   is idle: the bench polls the node's `/metrics` on the admin port until
//!   `hotrule_dispatch_pending_batches{queue="metrics"}` (batches queued or being evaluated) reads
//!   0, for at most five minutes (then the run fails). Prometheus has appended a sample when it
//!   answers, so its clock stops at the last answer.
//! - Reported: accepted samples/s (samples of 2xx-answered requests over that wall time), the
//!   load and drain times, errors by kind, request latency p50 and p99.
//! - Checked, and a mismatch fails the run ([`ingest_check`](super::ingest_check) says how the
//!   expected values follow from the stream and the rounds each host had answered 2xx): every
//!   host's stored `meter_vm_memory_total` and `meter_vm_memory_buff_cache` minute values on the
//!   node (`/query/metrics`), and in Prometheus every host's series count and the last value of a
//!   counter and a gauge (`/api/v1/query`). With `--target`, `--target-admin` names the node's
//!   admin address for the wait and the read-back.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::ingest_stream::Stream;
use super::ingest_stream::ROUND_MS;

/// The most rounds a connection sends in one run (a bound on the loop, never reached in practice).
const MAX_ROUNDS: usize = 1_000_000;

#[derive(Debug, Clone, clap::Args)]
pub struct IngestArgs {
    /// hotrule's remote-write URL (`http://HOST:PORT/api/v1/write` on a node's data listener).
    /// Without it, the bench starts a node of its own (this binary's `serve`, RocksDB in --dir).
    #[arg(long, requires = "target_admin")]
    target: Option<String>,
    /// The admin address (`HOST:PORT`) of the `--target` node: its `/metrics` tells when it has
    /// stored what it accepted, its `/query/metrics` what it stored (token: HOTRULE_ADMIN_TOKEN).
    #[arg(long, requires = "target")]
    target_admin: Option<String>,
    /// First run the same stream against a real Prometheus (Debian's `prometheus`, started
    /// with `--web.enable-remote-write-receiver`) on this machine, for the side-by-side figure.
    #[arg(long)]
    against_prometheus: bool,
    /// Skip hotrule (with --against-prometheus: measure the anchor alone).
    #[arg(long)]
    no_hotrule: bool,
    /// Simulated node_exporter hosts (507 series each).
    #[arg(long, default_value_t = 200)]
    hosts: usize,
    /// Concurrent connections.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Seconds of load per target (after the warm-up round).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Where Prometheus' TSDB and the started node's data go.
    #[arg(long, default_value = "./bench-data/ingest")]
    dir: PathBuf,
    /// The bundled rules of a node the bench starts.
    #[arg(long, default_value = "./config/rules")]
    rules_dir: PathBuf,
}

/// One series of one host: its `TimeSeries.labels` fields, already encoded, and its values.

/// What one run against one receiver measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub accepted_samples: u64,
    pub requests_ok: u64,
    /// Failed requests by kind (`HTTP 400`, `transport`), with the first answer of each kind.
    pub errors: BTreeMap<String, (u64, String)>,
    /// From the start of the load to the last answer.
    pub elapsed: Duration,
    /// From the last answer until the receiver had evaluated and stored everything it accepted
    /// (hotrule: its dispatch idle); none where a 2xx already means stored (Prometheus).
    pub drain: Option<Duration>,
    pub latencies: Vec<Duration>,
    /// Per host, the rounds answered 2xx (the warm-up's round 0 included), in the order sent.
    pub accepted_rounds: BTreeMap<usize, Vec<usize>>,
}

impl Outcome {
    /// The wall time the rate is computed over: the load and the drain after it.
    pub fn wall(&self) -> Duration {
        self.elapsed + self.drain.unwrap_or_default()
    }

    pub fn samples_per_second(&self) -> f64 {
        self.accepted_samples as f64 / self.wall().as_secs_f64().max(f64::EPSILON)
    }

    /// The last round of every host a round of which was answered 2xx.
    pub fn last_rounds(&self) -> BTreeMap<usize, usize> {
        self.accepted_rounds.iter().filter_map(|(host, rounds)| Some((*host, *rounds.iter().max()?))).collect()
    }

    fn percentile(&self, rank: usize) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted.get((sorted.len() * rank / 100).min(sorted.len().saturating_sub(1))).copied().unwrap_or_default()
    }

    fn merge(&mut self, other: Outcome) {
        self.accepted_samples += other.accepted_samples;
        self.requests_ok += other.requests_ok;
        for (kind, (count, first)) in other.errors {
            let entry = self.errors.entry(kind).or_insert((0, first));
            entry.0 += count;
        }
        self.latencies.extend(other.latencies);
        for (host, rounds) in other.accepted_rounds {
            self.accepted_rounds.entry(host).or_default().extend(rounds);
        }
    }

    /// One report line.
    pub fn line(&self, name: &str, connections: usize, series: usize) -> String {
        let failed: u64 = self.errors.values().map(|(count, _)| count).sum();
        let kinds: Vec<String> = self.errors.iter().map(|(kind, (count, _))| format!("{count} {kind}")).collect();
        format!(
            "{name}: {:.0} accepted samples/s ({} requests answered 2xx, {} failed{}; latency p50 {:.2} ms, p99 {:.2} ms; {connections} connections, {:.1} s{}, {series} series)",
            self.samples_per_second(),
            self.requests_ok,
            failed,
            if kinds.is_empty() { String::new() } else { format!(": {}", kinds.join(", ")) },
            self.percentile(50).as_secs_f64() * 1000.0,
            self.percentile(99).as_secs_f64() * 1000.0,
            self.wall().as_secs_f64(),
            match self.drain {
                Some(drain) => format!(" = {:.2} s load + {:.3} s until dispatch idle", self.elapsed.as_secs_f64(), drain.as_secs_f64()),
                None => String::new(),
            },
        )
    }
}

pub(super) type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub(super) fn client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).pool_max_idle_per_host(1).build(connector)
}

/// Sends one body; `Ok` on 2xx, else the error's kind and the answer.
pub(super) async fn send(client: &HttpClient, url: &str, body: Vec<u8>) -> Result<(), (String, String)> {
    let request = Request::post(url)
        .header("content-encoding", "snappy")
        .header("content-type", "application/x-protobuf")
        .header("x-prometheus-remote-write-version", "0.1.0")
        .header("user-agent", "hotrule-bench-ingest")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| ("request".to_string(), e.to_string()))?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| ("transport".to_string(), e.to_string()))?;
        let status = response.status();
        let text = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        if status.is_success() {
            Ok(())
        } else {
            Err((format!("HTTP {}", status.as_u16()), String::from_utf8_lossy(&text).chars().take(300).collect()))
        }
    };
    match tokio::time::timeout(Duration::from_secs(30), exchange).await {
        Ok(result) => result,
        Err(_) => Err(("timeout".to_string(), "no answer within 30 s".to_string())),
    }
}

/// Sends the stream to `urls` over `connections` connections for `duration`, after a warm-up
/// round that is not counted. With several URLs (the nodes of a cluster behind a round-robin
/// balancer) each connection sends its requests to them in turn.
pub async fn run_stream(urls: &[String], stream: Arc<Stream>, connections: usize, duration: Duration) -> Outcome {
    let urls: Arc<[String]> = urls.into();
    if urls.is_empty() {
        return Outcome::default();
    }
    let connections = connections.clamp(1, stream.hosts().max(1));
    // Warm-up: every host's round 0 (creates the series), not timed, not counted but for the
    // rounds a receiver holds.
    let warmups: Vec<_> = (0..connections)
        .map(|c| {
            let (stream, urls) = (stream.clone(), urls.clone());
            tokio::spawn(async move {
                let client = client();
                let mut accepted = Vec::new();
                for (k, host) in (c..stream.hosts()).step_by(connections).enumerate() {
                    let url = &urls[(c + k) % urls.len()];
                    if send(&client, url, stream.request(host, 0).0).await.is_ok() {
                        accepted.push(host);
                    }
                }
                accepted
            })
        })
        .collect();
    let mut warm = BTreeMap::new();
    for warmup in warmups {
        for host in warmup.await.unwrap_or_default() {
            warm.insert(host, vec![0]);
        }
    }
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..connections)
        .map(|c| {
            let (stream, urls) = (stream.clone(), urls.clone());
            tokio::spawn(async move {
                let client = client();
                let mut outcome = Outcome::default();
                let mut sent_count = c;
                'rounds: for round in 1..MAX_ROUNDS {
                    for host in (c..stream.hosts()).step_by(connections) {
                        if Instant::now() >= deadline {
                            break 'rounds;
                        }
                        let (body, samples) = stream.request(host, round);
                        let url = &urls[sent_count % urls.len()];
                        sent_count += 1;
                        let sent = Instant::now();
                        let result = send(&client, url, body).await;
                        outcome.latencies.push(sent.elapsed());
                        match result {
                            Ok(()) => {
                                outcome.requests_ok += 1;
                                outcome.accepted_samples += samples as u64;
                                outcome.accepted_rounds.entry(host).or_default().push(round);
                            }
                            Err((kind, answer)) => outcome.errors.entry(kind).or_insert((0, answer)).0 += 1,
                        }
                    }
                }
                outcome
            })
        })
        .collect();
    let mut total = Outcome { accepted_rounds: warm, ..Outcome::default() };
    for task in tasks {
        if let Ok(outcome) = task.await {
            total.merge(outcome);
        }
    }
    total.elapsed = started.elapsed();
    total
}

/// Checks that Prometheus holds, for every host, the stream's whole scrape and the last values
/// it accepted ([`ingest_check`](super::ingest_check)); a summary line, or the mismatches as the
/// error.
async fn check_prometheus(prometheus: &super::prometheus::Prometheus, stream: &Stream, outcome: &Outcome) -> Result<String, String> {
    use super::ingest_check::{PROMETHEUS_LAST, compare, expected_last, expected_series, failure, vector_by_instance};
    let last_rounds = outcome.last_rounds();
    if last_rounds.len() < stream.hosts() {
        return Err(format!("prometheus accepted no round of {} of the {} hosts", stream.hosts() - last_rounds.len(), stream.hosts()));
    }
    // Rounds may run ahead of the clock: query at the newest round, over a range holding them all.
    let newest = last_rounds.values().max().copied().unwrap_or(0);
    let at_ms = stream.timestamp_ms(newest);
    let range = format!("{}s", newest + 2);
    let mut mismatches = Vec::new();
    let series = vector_by_instance(&prometheus.query_at(&format!("count by (instance) (last_over_time({{job=\"vm-monitoring\"}}[{range}]))"), at_ms).await?)?;
    mismatches.extend(compare("series", &expected_series(stream, &last_rounds), &series));
    for name in PROMETHEUS_LAST {
        let held = vector_by_instance(&prometheus.query_at(&format!("last_over_time({name}[{range}])"), at_ms).await?)?;
        mismatches.extend(compare(name, &expected_last(stream, &last_rounds, name)?, &held));
    }
    match failure("prometheus", &mismatches) {
        Some(error) => Err(error),
        None => Ok(format!(
            "prometheus checked: {} series of each of {} hosts, and the last accepted value of {}",
            stream.series_per_host(),
            last_rounds.len(),
            PROMETHEUS_LAST.join(" and ")
        )),
    }
}

fn print_errors(outcome: &Outcome) {
    for (kind, (count, first)) in &outcome.errors {
        println!("  {count} × {kind}, first answer: {first}");
    }
}

/// `hotrule bench ingest`.
pub async fn run(args: IngestArgs) -> Result<(), String> {
    if args.hosts == 0 || args.connections == 0 || args.seconds == 0 {
        return Err("--hosts, --connections and --seconds must be at least 1".into());
    }
    if !args.against_prometheus && args.no_hotrule {
        return Err("--no-hotrule leaves nothing to measure without --against-prometheus".into());
    }
    let t0_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_millis() as i64;
    let t0_ms = t0_ms - t0_ms.rem_euclid(ROUND_MS);
    let stream = Arc::new(Stream::node_exporter(args.hosts, t0_ms)?);
    let duration = Duration::from_secs(args.seconds);
    println!(
        "stream: {} node_exporter hosts, {} series, one host's scrape ({} samples) per request, rounds 1 s apart",
        stream.hosts(),
        stream.series(),
        stream.series() / stream.hosts()
    );
    let mut lines = Vec::new();
    if args.against_prometheus {
        let prometheus = super::prometheus::Prometheus::start_receiver(&args.dir.join("prometheus")).await?;
        let outcome = run_stream(&[prometheus.write_url()], stream.clone(), args.connections, duration).await;
        let line = outcome.line("prometheus 2 (remote-write receiver)", args.connections, stream.series());
        println!("{line}");
        print_errors(&outcome);
        println!("  {}", check_prometheus(&prometheus, &stream, &outcome).await?);
        lines.push((line, outcome.samples_per_second()));
    }
    if !args.no_hotrule {
        let node = match &args.target {
            Some(_) => None,
            None => Some(super::ingest_node::IngestNode::start(&args.dir.join("node"), &args.rules_dir).await?),
        };
        let target_admin;
        let (url, admin) = match (&args.target, &args.target_admin, &node) {
            (Some(target), Some(addr), _) => {
                let token = std::env::var("HOTRULE_ADMIN_TOKEN").ok();
                target_admin = crate::api::client::AdminClient::new(addr, token).map_err(|e| e.to_string())?.with_timeout(Duration::from_secs(10));
                (target.clone(), &target_admin)
            }
            (None, _, Some(node)) => (node.write_url(), node.admin()),
            _ => return Err("--target needs --target-admin".into()),
        };
        let mut outcome = run_stream(&[url], stream.clone(), args.connections, duration).await;
        // A 2xx means queued: the clock runs on until the node has evaluated and stored it all.
        outcome.drain = Some(super::ingest_node::wait_dispatch_idle(admin).await?);
        let line = outcome.line("hotrule (decode, evaluate, store)", args.connections, stream.series());
        println!("{line}");
        print_errors(&outcome);
        println!("  {}", super::ingest_node::received_line(admin).await);
        println!("  {}", super::ingest_node::check_stored(admin, &stream, &outcome.accepted_rounds).await?);
        lines.push((line, outcome.samples_per_second()));
    }
    if let [(_, prometheus), (_, hotrule)] = lines.as_slice() {
        println!("ratio hotrule / prometheus: {:.2}×", hotrule / prometheus.max(f64::EPSILON));
    }
    if lines.iter().any(|(_, rate)| *rate <= 0.0) {
        return Err("a receiver accepted no request (see the errors above)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::ingest_stream::prompb;
    use prost::Message;

    #[test]
    fn requests_are_valid_remote_write_with_sorted_labels_and_advancing_points() {
        let stream = Stream::node_exporter(3, 1_795_600_000_000).expect("stream");
        assert_eq!(stream.hosts(), 3);
        let per_host = stream.series() / 3;
        assert!(per_host > 500, "{per_host}");
        let decode = |host, round| {
            let (body, samples) = stream.request(host, round);
            let raw = snap::raw::Decoder::new().decompress_vec(&body).expect("snappy block");
            let request = prompb::WriteRequest::decode(raw.as_slice()).expect("a WriteRequest");
            assert_eq!(request.timeseries.len(), samples);
            request
        };
        let (first, later) = (decode(1, 0), decode(1, 5));
        for series in &first.timeseries {
            let names: Vec<&str> = series.labels.iter().map(|l| l.name.as_str()).collect();
            assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, unique: {names:?}");
            assert!(names.contains(&"__name__") && names.contains(&"job"));
            let instance = series.labels.iter().find(|l| l.name == "instance").expect("instance");
            assert_eq!(instance.value, "host-1:9100");
            assert_eq!(series.samples.len(), 1);
            assert_eq!(series.samples[0].timestamp, 1_795_600_000_000);
        }
        assert_eq!(later.timeseries[0].samples[0].timestamp, 1_795_600_005_000, "rounds are 1 s apart");
        let counter = |request: &prompb::WriteRequest| {
            request
                .timeseries
                .iter()
                .filter(|s| s.labels.iter().any(|l| l.name == "__name__" && l.value == "node_cpu_seconds_total"))
                .map(|s| s.samples[0].value)
                .sum::<f64>()
        };
        assert!(counter(&later) > counter(&first), "counters advance with the rounds");
        // The hand-built encoding is exactly prost's.
        assert_eq!(prompb::WriteRequest::decode(first.encode_to_vec().as_slice()).expect("re-decode"), first);
        let (body, _) = stream.request(1, 0);
        assert_eq!(snap::raw::Decoder::new().decompress_vec(&body).expect("snappy"), first.encode_to_vec());
    }

    #[test]
    fn latency_percentiles_and_merges_count_every_request() {
        let mut total = Outcome::default();
        let mut a = Outcome { accepted_samples: 10, requests_ok: 2, ..Outcome::default() };
        a.accepted_rounds.insert(3, vec![0, 1]);
        a.latencies = (1..=100).map(Duration::from_millis).collect();
        a.errors.insert("HTTP 400".into(), (1, "bad".into()));
        let mut b = Outcome { accepted_samples: 5, requests_ok: 1, ..Outcome::default() };
        b.errors.insert("HTTP 400".into(), (2, "worse".into()));
        b.accepted_rounds.insert(3, vec![4]);
        b.accepted_rounds.insert(1, vec![2]);
        total.merge(a);
        total.merge(b);
        total.elapsed = Duration::from_secs(4);
        total.drain = Some(Duration::from_secs(1));
        assert_eq!(total.accepted_samples, 15);
        assert_eq!(total.errors["HTTP 400"], (3, "bad".to_string()));
        assert_eq!(total.samples_per_second(), 3.0, "over the load and the drain");
        assert_eq!(total.accepted_rounds[&3], [0, 1, 4]);
        assert_eq!(total.last_rounds(), [(1, 2), (3, 4)].into());
        assert_eq!(total.percentile(50), Duration::from_millis(51));
        assert_eq!(total.percentile(99), Duration::from_millis(100));
        assert!(total.line("x", 2, 7).contains("3 HTTP 400"), "{}", total.line("x", 2, 7));
        assert!(total.line("x", 2, 7).contains("5.0 s = 4.00 s load + 1.000 s until dispatch idle"), "{}", total.line("x", 2, 7));
    }

    #[tokio::test]
    async fn a_run_counts_accepted_samples_and_refusals_against_a_loopback_receiver() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = seen.clone();
        // Accepts every request except each third one, which it refuses like a 400 receiver.
        let app = axum::Router::new().route(
            "/api/v1/write",
            axum::routing::post(move |body: axum::body::Bytes| {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                async move {
                    let ok = snap::raw::Decoder::new()
                        .decompress_vec(&body)
                        .ok()
                        .and_then(|raw| prompb::WriteRequest::decode(raw.as_slice()).ok())
                        .is_some();
                    if ok && n % 3 != 2 { (axum::http::StatusCode::NO_CONTENT, "") } else { (axum::http::StatusCode::BAD_REQUEST, "refused") }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let stream = Arc::new(Stream::node_exporter(4, 1_795_600_000_000).expect("stream"));
        let outcome = run_stream(&[format!("http://{addr}/api/v1/write")], stream.clone(), 2, Duration::from_millis(300)).await;
        server.abort();
        let failed = outcome.errors.get("HTTP 400").map_or(0, |(count, _)| *count);
        assert!(outcome.requests_ok > 0 && failed > 0, "{outcome:?}");
        assert_eq!(outcome.accepted_samples, outcome.requests_ok * (stream.series() / 4) as u64);
        assert_eq!(outcome.latencies.len() as u64, outcome.requests_ok + failed);
        assert!(outcome.elapsed >= Duration::from_millis(300));
        // Every 2xx is a (host, round) the checks expect, the warm-up's round 0 besides.
        let timed: usize = outcome.accepted_rounds.values().map(|rounds| rounds.iter().filter(|r| **r > 0).count()).sum();
        assert_eq!(timed as u64, outcome.requests_ok);
        assert!(outcome.accepted_rounds.values().all(|rounds| rounds.windows(2).all(|w| w[0] < w[1])), "in order per host");
        assert_eq!(outcome.drain, None);
        assert_eq!(outcome.wall(), outcome.elapsed);
    }
}
