//! The `hotrule` binary: `serve` runs a node; `rule ...` talks to a node's admin API;
//! `bench ...` runs the benchmarks recorded in docs/benchmarks.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};

use hotrule::cli::client::{AdminClient, cli};
use hotrule::config::{self, ConfigSources};
use hotrule::node::{ConfigRuntime, Listeners, LogControl, NodeError, NodeSettings, RunningNode};

/// mimalloc, counting allocations per thread for `hotrule bench mal` (a few instructions per call).
#[global_allocator]
static ALLOCATOR: hotrule::bench::alloc::CountingAlloc = hotrule::bench::alloc::CountingAlloc;

#[derive(Parser)]
#[command(name = "hotrule", version, about = "Runtime hot-update of SkyWalking MAL/LAL rules on a peer-to-peer cluster")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    Serve(Box<ServeArgs>),
    /// Manage rules through a node's admin API.
    Rule {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: RuleCommand,
    },
    /// The cluster as a node sees it.
    Cluster {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Log and metric agents (LoongCollector) known to the cluster.
    Agent {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: AgentCommand,
    },
    /// Pipeline and instance configs served to agents.
    AgentConfig {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: AgentConfigCommand,
    },
    /// Agent groups (tag and IP-range selectors).
    AgentGroup {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: AgentGroupCommand,
    },
    /// Stored metric values (`/query/metrics`): list the metrics, query one.
    Metrics {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: hotrule::cli::client::metrics::MetricsCommand,
    },
    /// Kept logs (`/query/logs`): query them, or follow them.
    Logs {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: hotrule::cli::client::logs::LogsCommand,
    },
    /// Inspect a configuration without running a node.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Run a benchmark (see docs/benchmarks.md).
    Bench {
        #[command(subcommand)]
        command: hotrule::bench::BenchCommand,
    },
}

#[derive(Args, Clone)]
struct SourceArgs {
    /// A configuration source: file:PATH (or a bare path), env:VAR, yaml:key::path: value,
    /// http://... Repeatable; later sources win.
    #[arg(long = "config", value_name = "URI")]
    config: Vec<String>,
    /// An inline override, key.path=value, applied after every --config.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    sources: SourceArgs,
    /// Directory of the node's management storage (node.data_dir; default ./hotrule-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Admin API listen address (admin.listen; default 127.0.0.1:17128).
    #[arg(long)]
    admin_listen: Option<String>,
    /// Agent config server (data) listen address (agents.data_listen; default: the admin host,
    /// port 12800).
    #[arg(long)]
    data_listen: Option<String>,
    /// Bundled rules: <rules-dir>/<catalog>/<name>.yaml (rules.dir; default ./config/rules).
    #[arg(long)]
    rules_dir: Option<PathBuf>,
    /// Seconds between periodic scans (rules.scan_interval; default 30).
    #[arg(long)]
    scan_interval: Option<u64>,
    /// Seconds a PEER suspension may last, with an unmoved entry, before the scan self-heals it
    /// (rules.self_heal_threshold; default 60).
    #[arg(long)]
    self_heal_threshold: Option<u64>,
    /// Bearer token required on every admin route except /healthz (admin.token). Prefer
    /// --admin-token-file or HOTRULE_ADMIN_TOKEN: a command line is readable in /proc.
    #[arg(long, env = "HOTRULE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// File holding the bearer token (admin.token_file); keeps the token out of the command
    /// line, which any local user can read in /proc.
    #[arg(long, env = "HOTRULE_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,
    /// Allow a non-loopback admin listener without a token (admin.insecure).
    #[arg(long)]
    insecure_admin: bool,
    /// This node's id (node.id; default: the admin address host:port).
    #[arg(long)]
    node_id: Option<String>,
    /// Log filter, e.g. info or hotrule=debug (log.level).
    #[arg(long, env = "HOTRULE_LOG")]
    log_level: Option<String>,
    /// UDP gossip address; makes this node part of a cluster (cluster.gossip_listen).
    #[arg(long)]
    gossip_listen: Option<String>,
    /// Cluster bus address (cluster.bus_listen; default: gossip port + 1).
    #[arg(long)]
    bus_listen: Option<String>,
    /// The host (IP) peers and operators reach this node at (cluster.advertise_host).
    #[arg(long)]
    advertise_host: Option<String>,
    /// A peer's gossip address host:port; repeatable (cluster.seeds).
    #[arg(long = "seed")]
    seeds: Vec<String>,
    /// Nodes only gossip within the same cluster id (cluster.id; default hotrule).
    #[arg(long)]
    cluster_id: Option<String>,
    /// File holding the shared bus secret (cluster.secret_file).
    #[arg(long)]
    cluster_secret_file: Option<PathBuf>,
    /// The shared bus secret (cluster.secret).
    #[arg(long = "cluster-secret", env = "HOTRULE_CLUSTER_SECRET", hide_env_values = true, hide = true)]
    cluster_secret: Option<String>,
    /// Run a multi-node cluster without bus authentication (cluster.insecure_bus).
    #[arg(long)]
    insecure_bus: bool,
    /// Peers that must confirm holding a commit before the main answers (cluster.commit_replicas).
    #[arg(long)]
    commit_replicas: Option<usize>,
}

impl ServeArgs {
    /// The flags given explicitly, as config key overrides (flags override files).
    fn sources(&self) -> ConfigSources {
        let mut overrides: Vec<(String, String)> = Vec::new();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                overrides.push((key.to_string(), value));
            }
        };
        put("node.data_dir", self.data_dir.as_ref().map(|p| p.display().to_string()));
        put("admin.listen", self.admin_listen.clone());
        put("agents.data_listen", self.data_listen.clone());
        put("rules.dir", self.rules_dir.as_ref().map(|p| p.display().to_string()));
        put("rules.scan_interval", self.scan_interval.map(|s| format!("{s}s")));
        put("rules.self_heal_threshold", self.self_heal_threshold.map(|s| format!("{s}s")));
        put("admin.token", self.admin_token.clone().filter(|t| !t.is_empty()));
        put("admin.token_file", self.admin_token_file.as_ref().map(|p| p.display().to_string()));
        put("admin.insecure", self.insecure_admin.then(|| "true".to_string()));
        put("node.id", self.node_id.clone());
        put("log.level", self.log_level.clone());
        put("cluster.gossip_listen", self.gossip_listen.clone());
        put("cluster.bus_listen", self.bus_listen.clone());
        put("cluster.advertise_host", self.advertise_host.clone());
        if !self.seeds.is_empty() {
            put("cluster.seeds", Some(format!("[{}]", self.seeds.join(", "))));
        }
        put("cluster.id", self.cluster_id.clone());
        put("cluster.secret_file", self.cluster_secret_file.as_ref().map(|p| p.display().to_string()));
        put("cluster.secret", self.cluster_secret.clone().filter(|s| !s.is_empty()));
        put("cluster.insecure_bus", self.insecure_bus.then(|| "true".to_string()));
        put("cluster.commit_replicas", self.commit_replicas.map(|n| n.to_string()));
        ConfigSources { uris: self.sources.config.clone(), sets: self.sources.set.clone(), overrides }
    }
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Members, liveness, addresses, generation, digest and last scan, and the main.
    Status {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum AgentCommand {
    /// Agents of every live node, filtered by group, running status and liveness.
    List {
        #[arg(long)]
        group: Option<String>,
        /// The running status the agent reports (e.g. running).
        #[arg(long)]
        status: Option<String>,
        /// Only offline agents (--offline true) or only online ones (--offline false).
        #[arg(long)]
        offline: Option<bool>,
        #[arg(long)]
        json: bool,
    },
    /// One agent with each config's desired and reported version and status.
    Show { instance_id: String },
}

#[derive(Subcommand)]
enum AgentConfigCommand {
    /// Create a config or replace its content (a new version when the content changes).
    Push {
        /// pipeline or instance.
        #[arg(long, default_value = "pipeline")]
        kind: String,
        #[arg(long)]
        name: String,
        /// yaml or json (default: from the file extension).
        #[arg(long)]
        format: Option<String>,
        file: PathBuf,
    },
    /// Apply a config to a group.
    Apply {
        #[arg(long, default_value = "pipeline")]
        kind: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        group: String,
    },
    /// Remove a config from a group (its agents delete it).
    Remove {
        #[arg(long, default_value = "pipeline")]
        kind: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        group: String,
    },
    /// Which agents applied, are applying or failed a config.
    Status {
        #[arg(long, default_value = "pipeline")]
        kind: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum AgentGroupCommand {
    /// Create or replace a group.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        description: String,
        /// A tag condition name=value (value may use * wildcards); repeatable.
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// An IP range (CIDR or a single address); repeatable.
        #[arg(long = "ip-cidr")]
        ip_cidrs: Vec<String>,
    },
    /// List groups.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Delete a group (not `default`).
    Delete { name: String },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration, secrets redacted.
    Print {
        #[command(flatten)]
        sources: SourceArgs,
        /// Mark the source each value came from.
        #[arg(long)]
        show_origin: bool,
    },
    /// Check a configuration; exits non-zero and lists every error.
    Validate {
        #[command(flatten)]
        sources: SourceArgs,
    },
}

#[derive(Args)]
struct ServerArgs {
    /// The node to talk to.
    #[arg(long, global = true, env = "HOTRULE_SERVER", default_value = "http://127.0.0.1:17128")]
    server: String,
}

#[derive(Subcommand)]
enum RuleCommand {
    /// Create, update or reactivate a rule from a file.
    Push {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        file: PathBuf,
        #[arg(long)]
        allow_storage_change: bool,
        #[arg(long)]
        force: bool,
        /// Roll the change out one node at a time (docs/rolling.md) instead of everywhere at once.
        #[arg(long)]
        rolling: bool,
        /// With --rolling: how long each node may take to prove healthy (5m, 30s, ...).
        #[arg(long, requires = "rolling")]
        step_timeout: Option<String>,
        /// With --rolling: how long each node must run the new content cleanly.
        #[arg(long, requires = "rolling")]
        health_window: Option<String>,
        /// With --rolling: the optional checks, a comma list of evalErrors and values, or none.
        #[arg(long, requires = "rolling")]
        health_checks: Option<String>,
    },
    /// Print one rule (raw YAML, or JSON with --json).
    Get {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        bundled: bool,
        #[arg(long)]
        json: bool,
    },
    /// List rules as a table (or JSON with --json).
    List {
        #[arg(long)]
        catalog: Option<String>,
        #[arg(long)]
        json: bool,
        /// Every live node's view: a row per rule x node, with whether it has converged.
        #[arg(long)]
        cluster: bool,
    },
    /// List the runtime layers (`layerDefinitions`) registered on the node.
    Layers {
        /// Include SkyWalking's built-in layers.
        #[arg(long)]
        built_in: bool,
        #[arg(long)]
        json: bool,
    },
    /// Inactivate a rule (its measures are kept).
    Inactivate {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
    },
    /// Delete an INACTIVE rule.
    Delete {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        revert_to_bundled: bool,
    },
    /// The phase of a structural apply: by --apply-id (from a push's answer), or the latest
    /// apply of --catalog/--name (optionally of exactly --content-hash).
    Status {
        #[arg(long, conflicts_with_all = ["catalog", "name", "content_hash"], required_unless_present_all = ["catalog", "name"])]
        apply_id: Option<String>,
        #[arg(long, requires = "name")]
        catalog: Option<String>,
        #[arg(long, requires = "catalog")]
        name: Option<String>,
        #[arg(long, requires = "catalog")]
        content_hash: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Dry-run a MAL file on sample files (Prometheus text exposition), or a LAL file
    /// (--catalog lal) on sample logs (--logs), without storing it: prints the values each rule
    /// would produce, or per log the extraction, the sink's decision and the emitted samples;
    /// rule errors and bad log lines on stderr (exit 1).
    Test {
        #[arg(long)]
        catalog: String,
        /// The rule file to test.
        file: PathBuf,
        /// A batch of samples; repeatable, in time order (one batch per file).
        #[arg(long = "samples", value_name = "FILE", required_unless_present = "logs", conflicts_with = "logs")]
        samples: Vec<PathBuf>,
        /// Sample logs for a LAL file (--catalog lal): one SkyWalking LogData JSON object per
        /// line (as POST /v3/logs takes them), e.g.
        /// {"service":"nginx-1","serviceInstance":"i1","layer":"NGINX","timestamp":1700000000000,
        /// "tags":{"data":[{"key":"LOG_KIND","value":"NGINX_ACCESS_LOG"}]},
        /// "body":{"text":{"text":"GET / 200"}}}. Also: "endpoint", "traceContext":{"traceId",
        /// "traceSegmentId","spanId"}, a body {"json":{"json":"<text>"}} or {"yaml":{"yaml":"<text>"}};
        /// timestamp 0 or absent is now. Blank lines are skipped; a bad line is reported with its
        /// number and the others still run.
        #[arg(long, value_name = "FILE.jsonl")]
        logs: Option<PathBuf>,
        /// A log-mal-rules file the emitted samples go through (repeatable; named after the
        /// file); none: the node's bundled log-mal-rules files.
        #[arg(long = "mal", value_name = "FILE", requires = "logs")]
        mal: Vec<PathBuf>,
        /// Time between batches: the last batch is stamped now, each earlier one an interval
        /// before (500ms, 30s, 5m ...).
        #[arg(long, default_value = "60s")]
        interval: String,
        /// A label added to every sample, name=value; repeatable (e.g. job_name=vm-monitoring).
        #[arg(long = "label", value_name = "NAME=VALUE")]
        labels: Vec<String>,
        #[arg(long)]
        json: bool,
        /// Also run the file stored under --name on the same samples and show the difference.
        #[arg(long)]
        against_current: bool,
        /// The stored rule to compare with (default: FILE's name without its extension).
        #[arg(long)]
        name: Option<String>,
    },
    /// Rolling changes (one node at a time): see docs/rolling.md.
    Roll {
        #[command(subcommand)]
        command: RollCommand,
    },
    /// Save a tar.gz backup of the stored rules.
    Dump {
        #[arg(long)]
        catalog: Option<String>,
        #[arg(short, long, default_value = "runtime-rule-dump.tar.gz")]
        output: PathBuf,
    },
}

#[derive(Subcommand)]
enum RollCommand {
    /// Every roll this node holds (or one file's), with a progress bar and each node's state.
    Status {
        #[arg(long, requires = "name")]
        catalog: Option<String>,
        #[arg(long, requires = "catalog")]
        name: Option<String>,
        /// Redraw every --interval-secs until no roll is in progress.
        #[arg(long)]
        watch: bool,
        #[arg(long, default_value_t = 2)]
        interval_secs: u64,
        #[arg(long)]
        json: bool,
    },
    /// Return every node to the committed content.
    Rollback {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
    },
    /// Make the rolling content the committed entry everywhere now.
    ForceCommit {
        #[arg(long)]
        catalog: String,
        #[arg(long)]
        name: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hotrule: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve(*args).await,
            Command::Rule { server, command } => rule(server, command).await,
            Command::Config { command } => config_command(command),
            Command::Cluster { server, command: ClusterCommand::Status { json } } => match admin_client(&server) {
                Ok(client) => exit_code(cli::cluster_status(&client, json).await),
                Err(code) => code,
            },
            Command::Bench { command } => hotrule::bench::run(command).await,
            Command::Metrics { server, command } => match admin_client(&server) {
                Ok(client) => exit_code(hotrule::cli::client::metrics::run(&client, command).await),
                Err(code) => code,
            },
            Command::Logs { server, command } => match admin_client(&server) {
                Ok(client) => exit_code(hotrule::cli::client::logs::run(&client, command).await),
                Err(code) => code,
            },
            Command::Agent { server, command } => agent(server, AgentCli::Agent(command)).await,
            Command::AgentConfig { server, command } => agent(server, AgentCli::Config(command)).await,
            Command::AgentGroup { server, command } => agent(server, AgentCli::Group(command)).await,
        }
    })
}

/// A client of the node `server` names, with the token from `HOTRULE_ADMIN_TOKEN` or the file
/// `HOTRULE_ADMIN_TOKEN_FILE` names; a bad address or an unreadable token file is a usage error
/// (exit 2).
fn admin_client(server: &ServerArgs) -> Result<AdminClient, ExitCode> {
    let token = match (std::env::var("HOTRULE_ADMIN_TOKEN").ok(), std::env::var_os("HOTRULE_ADMIN_TOKEN_FILE")) {
        (Some(token), _) => Some(token),
        (None, Some(path)) => match std::fs::read_to_string(&path) {
            Ok(text) => Some(text.trim().to_string()),
            Err(e) => {
                eprintln!("hotrule: HOTRULE_ADMIN_TOKEN_FILE {}: {e}", std::path::Path::new(&path).display());
                return Err(ExitCode::from(2));
            }
        },
        (None, None) => None,
    };
    AdminClient::new(&server.server, token).map_err(|e| {
        eprintln!("hotrule: {e}");
        ExitCode::from(2)
    })
}

/// Success, or the error printed and exit 1.
fn exit_code<E: std::fmt::Display>(result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hotrule: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn rule(server: ServerArgs, command: RuleCommand) -> ExitCode {
    let client = match admin_client(&server) {
        Ok(client) => client,
        Err(code) => return code,
    };
    let result = match command {
        RuleCommand::Push { catalog, name, file, allow_storage_change, force, rolling: false, .. } => {
            cli::push(&client, &catalog, &name, &file, allow_storage_change, force).await
        }
        RuleCommand::Push {
            catalog, name, file, allow_storage_change, force, rolling: true, step_timeout, health_window, health_checks,
        } => {
            let settings = hotrule::cli::client::roll::RollingPush { step_timeout, health_window, health_checks };
            hotrule::cli::client::roll::push_rolling(&client, &catalog, &name, &file, allow_storage_change, force, &settings).await
        }
        RuleCommand::Roll { command: RollCommand::Rollback { catalog, name } } => {
            hotrule::cli::client::roll::end(&client, &catalog, &name, hotrule::cli::client::roll::RollEnd::Rollback).await
        }
        RuleCommand::Roll { command: RollCommand::ForceCommit { catalog, name } } => {
            hotrule::cli::client::roll::end(&client, &catalog, &name, hotrule::cli::client::roll::RollEnd::ForceCommit).await
        }
        RuleCommand::Get { catalog, name, bundled, json } => cli::get(&client, &catalog, &name, bundled, json).await,
        RuleCommand::List { catalog, json, cluster: false } => cli::list(&client, catalog.as_deref(), json).await,
        RuleCommand::List { json, cluster: true, .. } => cli::cluster_list(&client, json).await,
        RuleCommand::Layers { built_in, json } => cli::layers(&client, built_in, json).await,
        RuleCommand::Inactivate { catalog, name } => cli::inactivate(&client, &catalog, &name).await,
        RuleCommand::Delete { catalog, name, revert_to_bundled } => {
            cli::delete(&client, &catalog, &name, revert_to_bundled).await
        }
        RuleCommand::Status { apply_id, catalog, name, content_hash, json } => {
            let query = match (apply_id, catalog, name) {
                (Some(id), _, _) => cli::StatusQuery::ApplyId(id),
                (None, Some(catalog), Some(name)) => cli::StatusQuery::Rule { catalog, name, content_hash },
                _ => {
                    eprintln!("hotrule: rule status needs --apply-id, or --catalog and --name");
                    return ExitCode::from(2);
                }
            };
            cli::status(&client, &query, json).await
        }
        RuleCommand::Dump { catalog, output } => cli::dump(&client, catalog.as_deref(), &output).await,
        RuleCommand::Roll { command: RollCommand::Status { catalog, name, watch, interval_secs, json } } => {
            use hotrule::cli::client::roll::{self, RollQuery};
            let query = match (catalog, name) {
                (Some(catalog), Some(name)) => RollQuery::One { catalog, name },
                _ => RollQuery::All,
            };
            let every = watch.then(|| std::time::Duration::from_secs(interval_secs.max(1)));
            roll::status(&client, &query, every, json).await
        }
        RuleCommand::Test { catalog, file, samples, logs, mal, interval, labels, json, against_current, name } => {
            if let Some(logs) = logs {
                return lal_rule_test(&client, &catalog, file, logs, mal, json, against_current, name).await;
            }
            return rule_test(&client, catalog, file, samples, &interval, &labels, json, against_current, name).await;
        }
    };
    exit_code(result)
}

/// `hotrule rule test`: exit 0 when every rule evaluated, 1 on a rule error or a refused
/// request, 2 on a usage error.
#[allow(clippy::too_many_arguments)]
async fn rule_test(
    client: &AdminClient,
    catalog: String,
    file: PathBuf,
    samples: Vec<PathBuf>,
    interval: &str,
    labels: &[String],
    json: bool,
    against_current: bool,
    name: Option<String>,
) -> ExitCode {
    use hotrule::cli::client::rule_test::{self, TestArgs};
    let usage = |message: String| {
        eprintln!("hotrule: {message}");
        ExitCode::from(2)
    };
    let interval = match config::DurationSetting::parse(interval) {
        Ok(d) => d.0,
        Err(e) => return usage(format!("--interval: {e}")),
    };
    let labels = match labels.iter().map(|l| rule_test::parse_label(l)).collect::<Result<Vec<_>, _>>() {
        Ok(labels) => labels,
        Err(e) => return usage(e),
    };
    let args = TestArgs { catalog, name, file, samples, interval, labels, json, against_current, now_ms: None };
    test_exit(rule_test::test(client, &args).await)
}

/// `hotrule rule test --catalog lal FILE --logs LOGS`: exit as [`rule_test`] does; a bad log
/// line counts as a failure (the other lines still ran).
#[allow(clippy::too_many_arguments)]
async fn lal_rule_test(
    client: &AdminClient,
    catalog: &str,
    file: PathBuf,
    logs: PathBuf,
    mal: Vec<PathBuf>,
    json: bool,
    against_current: bool,
    name: Option<String>,
) -> ExitCode {
    use hotrule::cli::client::rule_test::lal::{self, LalTestArgs};
    if catalog != "lal" {
        eprintln!("hotrule: --logs runs a LAL file: use --catalog lal (got {catalog})");
        return ExitCode::from(2);
    }
    if against_current {
        eprintln!("hotrule: --against-current compares MAL values; it does not apply to --logs");
        return ExitCode::from(2);
    }
    let args = LalTestArgs { name, file, logs, mal, json, now_ms: None };
    test_exit(lal::test(client, &args).await)
}

fn test_exit(result: Result<hotrule::cli::client::rule_test::TestVerdict, hotrule::cli::client::cli::CliError>) -> ExitCode {
    use hotrule::cli::client::rule_test::TestVerdict;
    match result {
        Ok(TestVerdict::Clean) => ExitCode::SUCCESS,
        Ok(TestVerdict::RuleErrors(n)) => {
            eprintln!("hotrule: {n} rule evaluation(s) failed");
            ExitCode::FAILURE
        }
        Ok(TestVerdict::LogProblems { bad_lines, rule_errors }) => {
            eprintln!("hotrule: {bad_lines} bad log line(s), {rule_errors} rule evaluation(s) failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hotrule: {e}");
            ExitCode::FAILURE
        }
    }
}

enum AgentCli {
    Agent(AgentCommand),
    Config(AgentConfigCommand),
    Group(AgentGroupCommand),
}

async fn agent(server: ServerArgs, command: AgentCli) -> ExitCode {
    use hotrule::cli::client::agents;
    let client = match admin_client(&server) {
        Ok(client) => client,
        Err(code) => return code,
    };
    let result = match command {
        AgentCli::Agent(AgentCommand::List { group, status, offline, json }) => {
            agents::list_agents(&client, group.as_deref(), status.as_deref(), offline, json).await
        }
        AgentCli::Agent(AgentCommand::Show { instance_id }) => agents::show_agent(&client, &instance_id).await,
        AgentCli::Config(AgentConfigCommand::Push { kind, name, format, file }) => {
            agents::push_config(&client, &kind, &name, &file, format.as_deref()).await
        }
        AgentCli::Config(AgentConfigCommand::Apply { kind, name, group }) => {
            agents::apply_config(&client, &kind, &name, &group, false).await
        }
        AgentCli::Config(AgentConfigCommand::Remove { kind, name, group }) => {
            agents::apply_config(&client, &kind, &name, &group, true).await
        }
        AgentCli::Config(AgentConfigCommand::Status { kind, name, json }) => {
            agents::config_status(&client, &kind, &name, json).await
        }
        AgentCli::Group(AgentGroupCommand::Create { name, description, tags, ip_cidrs }) => {
            let tags = match tags.iter().map(|t| agents::parse_tag(t)).collect::<Result<Vec<_>, _>>() {
                Ok(tags) => tags,
                Err(e) => {
                    eprintln!("hotrule: {e}");
                    return ExitCode::from(2);
                }
            };
            agents::create_group(&client, &name, &description, &tags, &ip_cidrs).await
        }
        AgentCli::Group(AgentGroupCommand::List { json }) => agents::list_groups(&client, json).await,
        AgentCli::Group(AgentGroupCommand::Delete { name }) => agents::delete_group(&client, &name).await,
    };
    exit_code(result)
}

/// Installs the log subscriber with a reloadable filter; returns the control for live changes.
fn init_tracing(filter: &str) -> LogControl {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, reload};
    let initial = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let (layer, handle) = reload::Layer::new(initial);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_target(false).with_ansi(ansi).with_writer(std::io::stderr);
    let _ = tracing_subscriber::registry().with(layer).with(fmt).try_init();
    Arc::new(move |level: &str| {
        let refused = |reason: String| hotrule::config::reload::LiveError::LogLevel { level: level.to_string(), reason };
        let filter = EnvFilter::try_new(level).map_err(|e| refused(e.to_string()))?;
        handle.reload(filter).map_err(|e| refused(e.to_string()))
    })
}

fn config_command(command: ConfigCommand) -> ExitCode {
    let (sources, show_origin, print) = match command {
        ConfigCommand::Print { sources, show_origin } => (sources, show_origin, true),
        ConfigCommand::Validate { sources } => (sources, false, false),
    };
    let sources = ConfigSources { uris: sources.config, sets: sources.set, overrides: Vec::new() };
    match config::load(&sources, Arc::new(hotrule_confmap::ProcessEnv)) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                eprintln!("warning: {warning}");
            }
            if print {
                let effective = hotrule_confmap::redact(&defaults_under(&loaded), config::is_secret);
                let origins = hotrule_confmap::redact_origins(&loaded.origins, config::is_secret);
                print!("{}", hotrule_confmap::to_yaml_string(&effective, show_origin.then_some(&origins)));
            } else {
                println!("configuration is valid");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hotrule: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The full effective config: every key with its value, defaults included.
fn defaults_under(loaded: &config::Loaded) -> hotrule_confmap::Value {
    let json = serde_json::to_string(&loaded.config.raw).unwrap_or_default();
    hotrule_confmap::parse_yaml(&json).unwrap_or_else(|_| loaded.effective.clone())
}

async fn serve(args: ServeArgs) -> ExitCode {
    let sources = args.sources();
    let env: Arc<dyn hotrule_confmap::Env> = Arc::new(hotrule_confmap::ProcessEnv);
    let loaded = match config::load(&sources, env.clone()) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("hotrule: refusing to start: {e}");
            return ExitCode::from(2);
        }
    };
    let log_control = init_tracing(&loaded.config.log_level);
    let _failpoints = hotrule::bench::failpoint_scenario();
    for warning in &loaded.warnings {
        tracing::warn!(%warning, "configuration");
    }
    let node_config = loaded.config.clone();
    let kv = match hotrule::node::open_storage(&node_config.data_dir) {
        Ok(kv) => kv,
        Err(e) => {
            eprintln!("hotrule: {}", NodeError::from(e));
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(node_config.admin_listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("hotrule: cannot listen on {}: {e}", node_config.admin_listen);
            return ExitCode::FAILURE;
        }
    };
    let data_listener = match tokio::net::TcpListener::bind(node_config.agents.data_listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("hotrule: cannot listen for agents on {}: {e}", node_config.agents.data_listen);
            return ExitCode::FAILURE;
        }
    };
    let runtime = ConfigRuntime {
        sources,
        env,
        state: Arc::new(config::ConfigState::new(loaded)),
        log_control: Some(log_control),
    };
    let settings = NodeSettings::from_config(&node_config, runtime);
    let listeners = Listeners { admin: listener, data: Some(data_listener) };
    let node = match start_node(settings, kv, listeners, &node_config).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("hotrule: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("hotrule admin API on http://{}", node.admin_addr);
    if let Some(data) = node.data_addr {
        let scheme = if node_config.agents.tls.is_some() { "https" } else { "http" };
        println!("hotrule agent config server on {scheme}://{data}");
    }
    wait_for_signal().await;
    tracing::info!("shutting down");
    node.shutdown().await;
    ExitCode::SUCCESS
}

/// Starts the node, alone or (with a `cluster` section) wired to its peers.
async fn start_node(
    settings: NodeSettings,
    kv: Arc<dyn hotrule::store::kv::KvEngine>,
    listeners: Listeners,
    config: &config::NodeConfig,
) -> Result<RunningNode, NodeError> {
    let wiring = match &config.cluster {
        Some(cluster) => Some(hotrule::node::cluster_wiring(cluster, config).await?),
        None => None,
    };
    RunningNode::start_with_listeners(settings, kv, listeners, wiring).await
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = ctrl_c.await;
}
