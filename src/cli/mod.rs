//! The `hotrule` command line: the command tree (clap types) and what each command does, as a
//! thin call into the node (`serve`), a node's admin API through the protocol client
//! (`crate::api::client`, the calls and their printing in `admin`), or the benchmarks
//! (`crate::bench`). `main.rs` parses and calls [`run`].
//!
//! One file per command group: `serve` runs a node; `rule` (with `rule roll` and `rule test`),
//! `cluster` and `agent` (agents, agent configs and agent groups) talk to a node; `config`
//! inspects a configuration offline; `metrics`, `logs`, `alarms` and `alarm` keep their clap
//! types beside their calls (`admin::metrics`, `admin::logs`, `admin::alarms`, `admin::alarm`).
//! This file holds the tree, the flags several groups share (`--server`, `--config`/`--set`)
//! and the exit codes they all use: 0 done, 1 a failed or refused request, 2 a usage error. The
//! node imports nothing from here.

pub mod admin;

mod agent;
mod cluster;
mod config;
mod rule;
mod serve;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::api::client::AdminClient;

#[derive(Parser)]
#[command(name = "hotrule", version, about = "Runtime hot-update of SkyWalking MAL/LAL rules on a peer-to-peer cluster")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    Serve(Box<serve::ServeArgs>),
    /// Manage rules through a node's admin API.
    Rule {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: rule::RuleCommand,
    },
    /// The cluster as a node sees it.
    Cluster {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: cluster::ClusterCommand,
    },
    /// Log and metric agents (LoongCollector) known to the cluster.
    Agent {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: agent::AgentCommand,
    },
    /// Pipeline and instance configs served to agents.
    AgentConfig {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: agent::AgentConfigCommand,
    },
    /// Agent groups (tag and IP-range selectors).
    AgentGroup {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: agent::AgentGroupCommand,
    },
    /// Stored metric values (`/query/metrics`): list the metrics, query one.
    Metrics {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: admin::metrics::MetricsCommand,
    },
    /// Kept logs (`/query/logs`): query them, or follow them.
    Logs {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: admin::logs::LogsCommand,
    },
    /// Stored alarm records (`/query/alarms`): list them, or follow new fires and recoveries.
    Alarms {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: admin::alarms::AlarmsCommand,
    },
    /// Alarm rules: `alarm settings` gets, pushes, diffs or deletes the `alarm-settings.yml` in
    /// force; `alarm test` replays rules over the stored values (a dry run; nothing is sent).
    Alarm {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: admin::alarm::AlarmCommand,
    },
    /// Inspect a configuration without running a node.
    Config {
        #[command(subcommand)]
        command: config::ConfigCommand,
    },
    /// Run a benchmark (see docs/benchmarks.md).
    Bench {
        #[command(subcommand)]
        command: crate::bench::BenchCommand,
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
struct ServerArgs {
    /// The node to talk to.
    #[arg(long, global = true, env = "HOTRULE_SERVER", default_value = "http://127.0.0.1:17128")]
    server: String,
}

/// Runs the parsed command on a multi-threaded tokio runtime; its exit code is the process's.
pub fn run(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hotrule: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Rule { server, command } => rule::run(server, command).await,
            Command::Config { command } => config::run(command),
            Command::Cluster { server, command } => cluster::run(server, command).await,
            Command::Bench { command } => crate::bench::run(command).await,
            Command::Metrics { server, command } => match admin_client(&server) {
                Ok(client) => exit_code(admin::metrics::run(&client, command).await),
                Err(code) => code,
            },
            Command::Logs { server, command } => match admin_client(&server) {
                Ok(client) => exit_code(admin::logs::run(&client, command).await),
                Err(code) => code,
            },
            Command::Alarms { server, command } => match admin_client(&server) {
                Ok(client) => exit_code(admin::alarms::run(&client, command).await),
                Err(code) => code,
            },
            Command::Alarm { server, command } => match admin_client(&server) {
                Ok(client) => exit_code(admin::alarm::run(&client, command).await),
                Err(code) => code,
            },
            Command::Agent { server, command } => agent::run(server, agent::AgentCli::Agent(command)).await,
            Command::AgentConfig { server, command } => agent::run(server, agent::AgentCli::Config(command)).await,
            Command::AgentGroup { server, command } => agent::run(server, agent::AgentCli::Group(command)).await,
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
