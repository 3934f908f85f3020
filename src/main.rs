//! The `hotrule` binary: `serve` runs a node; `rule ...` talks to a node's admin API;
//! `bench ...` runs the benchmarks recorded in docs/benchmarks.md.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use hotrule::client::{AdminClient, cli};
use hotrule::node::{NodeSettings, RunningNode};
use hotrule::scan::ScanSettings;

#[derive(Parser)]
#[command(name = "hotrule", version, about = "Runtime hot-update of SkyWalking MAL/LAL rules on a peer-to-peer cluster")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    Serve(ServeArgs),
    /// Manage rules through a node's admin API.
    Rule {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: RuleCommand,
    },
    /// Run a benchmark (see docs/benchmarks.md).
    Bench {
        #[command(subcommand)]
        command: hotrule::bench::BenchCommand,
    },
}

#[derive(Args)]
struct ServeArgs {
    /// Directory of the node's management storage (RocksDB).
    #[arg(long, default_value = "./hotrule-data")]
    data_dir: PathBuf,
    /// Admin API listen address.
    #[arg(long, default_value = "127.0.0.1:17128")]
    admin_listen: SocketAddr,
    /// Bundled rules: <rules-dir>/<catalog>/<name>.yaml.
    #[arg(long, default_value = "./config/rules")]
    rules_dir: PathBuf,
    /// Seconds between periodic scans.
    #[arg(long, default_value_t = 30)]
    scan_interval: u64,
    /// Seconds a PEER suspension may last, with an unmoved entry, before the scan self-heals it.
    #[arg(long, default_value_t = 60)]
    self_heal_threshold: u64,
    /// Bearer token required on every admin route except /healthz.
    #[arg(long, env = "HOTRULE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Allow a non-loopback admin listener without a token.
    #[arg(long)]
    insecure_admin: bool,
    /// This node's id (default: the admin address host:port).
    #[arg(long)]
    node_id: Option<String>,
    /// Log filter, e.g. info or hotrule=debug.
    #[arg(long, env = "HOTRULE_LOG", default_value = "info")]
    log_level: String,
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
    /// Save a tar.gz backup of the stored rules.
    Dump {
        #[arg(long)]
        catalog: Option<String>,
        #[arg(short, long, default_value = "runtime-rule-dump.tar.gz")]
        output: PathBuf,
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
            Command::Serve(args) => serve(args).await,
            Command::Rule { server, command } => rule(server, command).await,
            Command::Bench { command } => hotrule::bench::run(command).await,
        }
    })
}

async fn rule(server: ServerArgs, command: RuleCommand) -> ExitCode {
    let token = std::env::var("HOTRULE_ADMIN_TOKEN").ok();
    let client = match AdminClient::new(&server.server, token) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hotrule: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        RuleCommand::Push { catalog, name, file, allow_storage_change, force } => {
            cli::push(&client, &catalog, &name, &file, allow_storage_change, force).await
        }
        RuleCommand::Get { catalog, name, bundled, json } => cli::get(&client, &catalog, &name, bundled, json).await,
        RuleCommand::List { catalog, json } => cli::list(&client, catalog.as_deref(), json).await,
        RuleCommand::Inactivate { catalog, name } => cli::inactivate(&client, &catalog, &name).await,
        RuleCommand::Delete { catalog, name, revert_to_bundled } => {
            cli::delete(&client, &catalog, &name, revert_to_bundled).await
        }
        RuleCommand::Dump { catalog, output } => cli::dump(&client, catalog.as_deref(), &output).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hotrule: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|e| {
        eprintln!("hotrule: bad log filter {filter:?} ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    tracing_subscriber::fmt().with_env_filter(filter).with_target(false).init();
}

async fn serve(args: ServeArgs) -> ExitCode {
    init_tracing(&args.log_level);
    let _failpoints = hotrule::bench::failpoint_scenario();
    let token = args.admin_token.clone().filter(|t| !t.is_empty());
    if !args.admin_listen.ip().is_loopback() && token.is_none() && !args.insecure_admin {
        eprintln!(
            "hotrule: refusing to serve the admin API on non-loopback {} without a token; \
             set --admin-token (or HOTRULE_ADMIN_TOKEN), or pass --insecure-admin if a gateway protects it",
            args.admin_listen
        );
        return ExitCode::from(2);
    }
    if args.scan_interval == 0 || args.self_heal_threshold == 0 {
        eprintln!("hotrule: --scan-interval and --self-heal-threshold must be at least 1 second");
        return ExitCode::from(2);
    }
    let kv = match open_storage(&args.data_dir) {
        Ok(kv) => kv,
        Err(message) => {
            eprintln!("hotrule: {message}");
            return ExitCode::FAILURE;
        }
    };
    let rules_dir = if args.rules_dir.is_dir() {
        Some(args.rules_dir.clone())
    } else {
        tracing::warn!(dir = %args.rules_dir.display(), "rules dir not found; starting without bundled rules");
        None
    };
    let listener = match tokio::net::TcpListener::bind(args.admin_listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("hotrule: cannot listen on {}: {e}", args.admin_listen);
            return ExitCode::FAILURE;
        }
    };
    let settings = NodeSettings {
        node_id: args.node_id,
        rules_dir,
        scan: ScanSettings {
            interval: Duration::from_secs(args.scan_interval),
            self_heal_after: Duration::from_secs(args.self_heal_threshold),
            ..ScanSettings::default()
        },
        admin_token: token,
        lock_timeout: hotrule::workflow::DEFAULT_LOCK_TIMEOUT,
    };
    let node = match RunningNode::start(settings, kv, listener).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("hotrule: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("hotrule admin API on http://{}", node.admin_addr);
    wait_for_signal().await;
    tracing::info!("shutting down");
    node.shutdown().await;
    ExitCode::SUCCESS
}

#[cfg(feature = "rocksdb")]
fn open_storage(dir: &std::path::Path) -> Result<Arc<dyn hotrule::store::kv::KvEngine>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating data dir {}: {e}", dir.display()))?;
    let engine = hotrule::store::kv::RocksEngine::open(&dir.join("db")).map_err(|e| e.to_string())?;
    Ok(Arc::new(engine))
}

#[cfg(not(feature = "rocksdb"))]
fn open_storage(_dir: &std::path::Path) -> Result<Arc<dyn hotrule::store::kv::KvEngine>, String> {
    Err("this build has no RocksDB support (built without the `rocksdb` feature); rebuild with default features".into())
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
