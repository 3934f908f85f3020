//! `hotrule bench ...`: the benchmarks recorded in docs/benchmarks.md.

pub mod alarms;
pub mod alloc;
mod chaos;
pub mod cluster;
pub mod dispatch;
pub mod etcd;
pub mod graphql;
pub mod handoff;
pub mod ingest;
mod ingest_check;
mod ingest_node;
mod ingest_stream;
pub mod lal_node;
pub mod logs;
pub mod logs_query;
pub mod mal;
pub mod meter_grpc;
pub mod promql;
pub mod query;
mod prometheus;
pub mod store;
pub mod throughput;
mod writes;

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Filter-only addOrUpdate round trips over loopback HTTP against an in-process node on
    /// RocksDB with synced writes, beside this disk's own synced-write rate, measured in the
    /// same run.
    Writes {
        /// Where the node's data and the disk probe go (a directory on the disk to measure).
        #[arg(long, default_value = "./bench-data")]
        dir: std::path::PathBuf,
        /// Sequential round trips by one client.
        #[arg(long, default_value_t = 1000)]
        sequential: usize,
        /// Concurrent clients, each writing its own file.
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// Round trips per concurrent client.
        #[arg(long, default_value_t = 200)]
        per_client: usize,
    },
    /// Healthy-commit visibility and failover time on a cluster of real node processes.
    Cluster {
        #[arg(long, default_value = "./bench-data/cluster")]
        dir: std::path::PathBuf,
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        #[arg(long, default_value_t = 200)]
        writes: usize,
        /// Nodes listen on 127.0.<net>.2 .. 127.0.<net>.(nodes+1).
        #[arg(long, default_value_t = 90)]
        net: u8,
        /// Rounds of kill -9 of the main (median reported).
        #[arg(long, default_value_t = 15)]
        failover_rounds: usize,
        /// A config setting passed to every node (`--set KEY=VALUE`, repeatable), for example
        /// `cluster.suspect_phi_threshold=2` or `cluster.gossip_interval=300ms`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// After hotrule's rounds, the same failover rounds on a three-member etcd cluster
        /// (Debian's `etcd-server`, on 127.0.94.1-3), for the side-by-side figure.
        #[arg(long)]
        against_etcd: bool,
        /// Seconds of a closed-loop write load on the main (0: skipped), before the failover
        /// rounds; with `--against-etcd`, the same load on the etcd leader. Set
        /// `--set cluster.commit_replicas=1` to compare with etcd's majority commit.
        #[arg(long, default_value_t = 0)]
        throughput_secs: u64,
        /// Concurrent writers of the closed-loop load.
        #[arg(long, default_value_t = 16)]
        throughput_clients: usize,
    },
    /// Randomized writes, kill -9, restarts and partitions on real processes; then check that
    /// no acknowledged write was lost. Partitions need root and iptables.
    Chaos {
        #[arg(long, default_value = "./bench-data/chaos")]
        dir: std::path::PathBuf,
        #[arg(long, default_value_t = 100)]
        rounds: usize,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[arg(long, default_value_t = 93)]
        net: u8,
        /// Stop starting rounds after this many seconds.
        #[arg(long, default_value_t = 1200)]
        time_limit: u64,
        /// A setting passed to every node, e.g. `--set cluster.commit_replicas=1` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Concurrent writers, spread over the nodes, on overlapping keys (several also push the
        /// alarm settings and agent configs now and then).
        #[arg(long, default_value_t = 1)]
        writers: usize,
        /// Also check every node's history of the written keys (needs history retention above the
        /// writes per key: pass `--set rules.history_max_revisions=10000`).
        #[arg(long)]
        history: bool,
    },
    /// The failover anchor: kill -9 of the leader of a three-member etcd cluster (Debian's
    /// `etcd-server`), measured as `bench cluster` measures hotrule's main.
    Etcd {
        #[arg(long, default_value = "./bench-data/etcd")]
        dir: std::path::PathBuf,
        #[arg(long, default_value_t = 15)]
        rounds: usize,
        /// Members listen on 127.0.<net>.1 .. 127.0.<net>.3.
        #[arg(long, default_value_t = 94)]
        net: u8,
    },
    /// `GET /runtime/rule/list` latency with N rules stored.
    List {
        #[arg(long, default_value = "./bench-data")]
        dir: std::path::PathBuf,
        #[arg(long, default_value_t = 1000)]
        rules: usize,
        #[arg(long, default_value_t = 2000)]
        requests: usize,
    },
    /// Compile every rule file under a directory, repeatedly, and report the time per full pass.
    Compile {
        #[arg(long, default_value = "./config/rules")]
        dir: std::path::PathBuf,
        #[arg(long, default_value_t = 20)]
        rounds: u32,
    },
    /// MAL evaluation on one core, parsing excluded: otel-rules/vm.yaml on node_exporter input
    /// for many hosts, and every MAL file on its synthesized input; allocations per sample and
    /// state memory per 10k series. Needs no RocksDB.
    Mal {
        /// The rules directory (vm.yaml is <dir>/otel-rules/vm.yaml).
        #[arg(long, default_value = "./config/rules")]
        dir: std::path::PathBuf,
        /// node_exporter hosts, one batch of one scrape each per round.
        #[arg(long, default_value_t = 200)]
        hosts: usize,
        /// Timed rounds (60 s apart) after two warm-up rounds.
        #[arg(long, default_value_t = 20)]
        rounds: usize,
        /// Rounds per corpus file.
        #[arg(long, default_value_t = 20)]
        corpus_rounds: usize,
    },
    /// Pause-to-drained of otel-rules/vm.yaml while node_exporter batches keep the dispatch
    /// queue full: p50/p99 of suspend → last open evaluation finished. Needs no RocksDB.
    Dispatch {
        /// The rules directory (vm.yaml is <dir>/otel-rules/vm.yaml).
        #[arg(long, default_value = "./config/rules")]
        dir: std::path::PathBuf,
        /// node_exporter hosts whose scrapes (one batch each) the loader cycles through.
        #[arg(long, default_value_t = 100)]
        hosts: usize,
        /// Evaluation threads (0: one per available core).
        #[arg(long, default_value_t = 0)]
        workers: usize,
        /// Dispatch queue bound, in batches.
        #[arg(long, default_value_t = 256)]
        queue: usize,
        /// Pauses measured.
        #[arg(long, default_value_t = 500)]
        pauses: usize,
    },
    /// A fleet of simulated LoongCollector agents heartbeating a node's data listener.
    Agents(AgentsArgs),
    /// One day of one metric at minute steps read back through the query APIs (Prometheus
    /// query_range and /query/metrics) of an in-process node on the in-memory metric store.
    Query {
        /// Services stored (one is read back).
        #[arg(long, default_value_t = 100)]
        entities: usize,
        /// Sequential requests per API.
        #[arg(long, default_value_t = 1000)]
        requests: usize,
    },
    /// SkyWalking's query protocol (issue 24): one booster-ui dashboard batch (six
    /// `execExpression` of the Linux dashboard × one day at MINUTE step) over `POST /graphql`, on
    /// one in-process node and on a 3-node in-process cluster whose nodes each hold a third of
    /// the day; p50/p90/p99/max/mean, every answer checked.
    Graphql(graphql::GraphqlArgs),
    /// PromQL (issue 25): Grafana's Node Exporter Full, 20 panels x 24 h at a 1-minute step as
    /// range queries, against an in-process node and a real Prometheus holding the same series
    /// (the node's remote-write export), alternating; panel and dashboard p50/p99 side by side.
    Promql(promql::PromqlArgs),
    /// Remote-write ingest (decode, evaluate, store): node_exporter-shaped requests over C
    /// connections for S seconds; accepted samples/s until the node's dispatch is idle (all
    /// stored), errors, latency p50/p99; then the stored values are checked against the stream.
    /// With `--against-prometheus`, the same stream against a real Prometheus first, side by
    /// side, its series checked the same way.
    Ingest(ingest::IngestArgs),
    /// SkyWalking's native meter protocol (issue 27): samples/s and CPU per million samples
    /// into an in-process node over one gRPC channel (`MeterReportService/collect`, one stream
    /// per report), side by side with the same samples over remote-write to the same kind of
    /// node, in reports of 500 meters and of a large size; every stored value checked.
    MeterGrpc(meter_grpc::MeterGrpcArgs),
    /// The L2 hop (issue 22): the `ingest` stream into one node, then into a cluster behind a
    /// round-robin balancer, in one run; the nodes' CPU per accepted sample, and the delay until
    /// a sample's value is in its entity's owner's store.
    Handoff(handoff::HandoffArgs),
    /// Alarm checks (issue 23): N alarm rules (SkyWalking's shipped shapes) × E services over an
    /// in-memory source of minute values; wall and CPU time per check. Needs no RocksDB.
    Alarms(alarms::AlarmsArgs),
    /// The embedded metric store on RocksDB: synced writes of one day of minutes (values/s, one
    /// and several writers), then "one day of one metric at minute steps" reads (p50/p99).
    Store {
        #[arg(long, default_value = "./bench-data")]
        dir: std::path::PathBuf,
        /// Metrics per evaluation (each write call carries every metric of every entity).
        #[arg(long, default_value_t = 10)]
        metrics: usize,
        #[arg(long, default_value_t = 20)]
        entities: usize,
        /// Minutes written (1440: one day).
        #[arg(long, default_value_t = 1440)]
        minutes: usize,
        /// Concurrent writers of the second write phase.
        #[arg(long, default_value_t = 4)]
        writers: usize,
        /// Reads per query phase.
        #[arg(long, default_value_t = 400)]
        queries: usize,
    },
    /// The embedded log store: synced writes (logs/s) and one-hour queries (p50/p99).
    Logs {
        #[arg(long, default_value = "./bench-data")]
        dir: std::path::PathBuf,
        /// Logs written, spread over the last hour.
        #[arg(long, default_value_t = 360_000)]
        logs: usize,
        /// Logs per synced write call.
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// Concurrent writers of the second half.
        #[arg(long, default_value_t = 4)]
        writers: usize,
        /// Reads per query phase (a tenth of them for the full-scan phase).
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// On the in-memory twin of the key space instead of RocksDB (any build).
        #[arg(long)]
        in_memory: bool,
    },
    /// "A rare keyword or tag over one hour of 10 million logs in under 100 ms": the block
    /// store against the first format's scan, loaded with the same logs; p50/p99 per query kind
    /// side by side, load time and CPU per log; every answer checked.
    LogsQuery(logs_query::LogsQueryArgs),
    /// Log lines/s through a whole node's LAL data plane: nginx access and error lines submitted
    /// to an in-process node's dispatcher, lal/nginx.yaml, the log store, log-MAL metrics into
    /// the metric store; the stored results checked against what was sent.
    LalNode {
        /// The rules directory (lal/nginx.yaml and log-mal-rules/nginx.yaml).
        #[arg(long, default_value = "./config/rules")]
        rules: std::path::PathBuf,
        /// RocksDB in this directory (needs the `rocksdb` feature); default: the in-memory twin.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// Seconds of load (the drain to idle after it is timed too).
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Threads submitting batches.
        #[arg(long, default_value_t = 2)]
        producers: usize,
        /// Logs per batch.
        #[arg(long, default_value_t = 100)]
        batch: usize,
        #[arg(long, default_value_t = 4)]
        services: usize,
        /// LAL evaluation threads (`dispatch.log_workers`).
        #[arg(long, default_value_t = 2)]
        log_workers: usize,
        /// Log queue bound in batches (`dispatch.log_queue_batches`).
        #[arg(long, default_value_t = 1024)]
        log_queue: usize,
        /// Lines the interpreter alone runs on the same logs for the same-run ratio, half before the
        /// node starts and half after it stops.
        #[arg(long, default_value_t = 2_000_000)]
        interpreter_lines: u64,
    },
}

#[derive(Debug, clap::Args)]
pub struct AgentsArgs {
    /// Simulated agents.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// Seconds between an agent's heartbeats.
    #[arg(long, default_value_t = 10)]
    interval: u64,
    /// The agent data listener: host:port or http://host:port, or https://host:port when the
    /// node serves agents over TLS.
    #[arg(long, default_value = "127.0.0.1:12800")]
    server: String,
    /// PEM file of the CA certificates to trust for an https:// server (default: the public
    /// web roots).
    #[arg(long)]
    ca_file: Option<std::path::PathBuf>,
    /// Seconds to run (default: three intervals).
    #[arg(long)]
    duration: Option<u64>,
    /// Tags every agent reports, name=value; repeatable.
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// The agent token header value, if the node requires one.
    #[arg(long, env = "HOTRULE_AGENT_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub async fn run(command: BenchCommand) -> ExitCode {
    match command {
        BenchCommand::Compile { dir, rounds } => compile(&dir, rounds),
        BenchCommand::Writes { dir, sequential, clients, per_client } => {
            report(writes::run(&dir, sequential, clients, per_client).await)
        }
        BenchCommand::List { dir, rules, requests } => report(writes::list(&dir, rules, requests).await),
        BenchCommand::Cluster {
            dir,
            nodes,
            writes,
            net,
            failover_rounds,
            set,
            against_etcd,
            throughput_secs,
            throughput_clients,
        } => {
            let throughput =
                (throughput_secs > 0).then(|| (throughput_clients.max(1), std::time::Duration::from_secs(throughput_secs)));
            let bench = cluster::ClusterBench { failover_rounds, sets: set, throughput };
            let hotrule = cluster::run(&dir, nodes, writes, net, &bench).await;
            match (hotrule, against_etcd) {
                (Ok(()), true) => report(bench_etcd(&dir.join("etcd"), failover_rounds, 94, throughput).await),
                (result, _) => report(result),
            }
        }
        BenchCommand::Chaos { dir, rounds, seed, net, time_limit, sets, writers, history } => {
            let bench = chaos::ChaosBench { rounds, seed, net, time_limit: std::time::Duration::from_secs(time_limit), writers, history };
            report(chaos::run(&dir, &bench, &sets).await)
        }
        BenchCommand::Agents(args) => report(bench_agents(args).await),
        BenchCommand::Query { entities, requests } => report(query::run(entities, requests).await),
        BenchCommand::Graphql(args) => report(graphql::run(&args).await),
        BenchCommand::Promql(args) => report(promql::run(&args).await),
        BenchCommand::Ingest(args) => report(ingest::run(args).await),
        BenchCommand::MeterGrpc(args) => report(meter_grpc::run(&args).await),
        BenchCommand::Handoff(args) => report(handoff::run(args).await),
        // CPU-bound on one thread, as `mal`: off the async scheduler's hands.
        BenchCommand::Alarms(args) => report(tokio::task::block_in_place(|| alarms::run(&args))),
        BenchCommand::Store { dir, metrics, entities, minutes, writers, queries } => {
            let bench = store::StoreBench { metrics, entities, minutes, writers, queries };
            // Blocking storage work with its own threads: off the async scheduler's hands.
            report(tokio::task::block_in_place(|| store::run(&dir, &bench)))
        }
        BenchCommand::Logs { dir, logs, batch, writers, queries, in_memory } => {
            let bench = logs::LogsBench { logs, batch, writers, queries, in_memory };
            report(tokio::task::block_in_place(|| logs::run(&dir, &bench)))
        }
        BenchCommand::LogsQuery(args) => report(tokio::task::block_in_place(|| logs_query::run(&args))),
        BenchCommand::LalNode { rules, dir, seconds, producers, batch, services, log_workers, log_queue, interpreter_lines } => {
            let dispatch = crate::data::evaluation::DispatchSettings {
                log_workers: log_workers.max(1),
                log_queue_batches: log_queue.max(1),
                ..crate::data::evaluation::DispatchSettings::default()
            };
            let bench = lal_node::LalNodeBench {
                rules_dir: rules,
                dir,
                seconds: std::time::Duration::from_secs(seconds),
                producers,
                batch,
                services,
                dispatch,
                interpreter_lines,
            };
            report(lal_node::run(&bench).await)
        }
        BenchCommand::Etcd { dir, rounds, net } => report(bench_etcd(&dir, rounds, net, None).await),
        BenchCommand::Dispatch { dir, hosts, workers, queue, pauses } => {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let settings = crate::data::evaluation::DispatchSettings {
                queue_batches: queue.max(1),
                workers: if workers == 0 { cores } else { workers },
                ..crate::data::evaluation::DispatchSettings::default()
            };
            report(dispatch::run(&dir, settings, hosts, pauses).await)
        }
        BenchCommand::Mal { dir, hosts, rounds, corpus_rounds } => {
            // CPU-bound and single-threaded by design: it runs on this thread, off the async
            // scheduler's hands.
            report(tokio::task::block_in_place(|| mal::run(&dir, hosts, rounds, corpus_rounds)))
        }
    }
}

async fn bench_etcd(
    dir: &std::path::Path,
    rounds: usize,
    net: u8,
    throughput: Option<(usize, std::time::Duration)>,
) -> Result<(), String> {
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let results = etcd::failover(dir, rounds, net, throughput).await?;
    println!("{}", etcd::summarize("etcd 3-member cluster", &results));
    Ok(())
}

async fn bench_agents(args: AgentsArgs) -> Result<(), String> {
    if args.interval == 0 {
        return Err("--interval must be at least 1 second".into());
    }
    let interval = std::time::Duration::from_secs(args.interval);
    let mut settings = crate::api::agents::AgentBenchSettings::new(args.server, args.agents, interval);
    if let Some(duration) = args.duration {
        settings.duration = std::time::Duration::from_secs(duration);
    }
    settings.tags = args.tags.iter().map(|t| crate::api::client::parse_tag(t)).collect::<Result<_, _>>()?;
    settings.token = args.token.filter(|t| !t.is_empty());
    settings.ca_file = args.ca_file;
    let report = crate::api::agents::run_agents(settings).await;
    print!("{report}");
    if report.heartbeats_ok == 0 {
        return Err("no heartbeat was answered".into());
    }
    Ok(())
}

fn report(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hotrule bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn compile(dir: &std::path::Path, rounds: u32) -> ExitCode {
    let (bundled, warnings) = match crate::control::bundled::Bundled::load(dir) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("hotrule bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let files: Vec<_> = bundled.iter().collect();
    let mut passes = Vec::new();
    for _ in 0..rounds.max(1) {
        let start = std::time::Instant::now();
        let mut failures = 0;
        for rule in &files {
            if crate::control::rules::compile::compile_for(&rule.key, &rule.content).is_err() {
                failures += 1;
            }
        }
        passes.push(start.elapsed());
        if failures > 0 {
            eprintln!("hotrule bench: {failures} files failed to compile");
            return ExitCode::FAILURE;
        }
    }
    passes.sort();
    let median = passes[passes.len() / 2];
    println!(
        "compiled {} files per pass, {} passes: min {:?}, median {:?}, max {:?}",
        files.len(),
        passes.len(),
        passes[0],
        median,
        passes[passes.len() - 1]
    );
    ExitCode::SUCCESS
}
