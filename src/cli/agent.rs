//! `hotrule agent ...`, `hotrule agent-config ...` and `hotrule agent-group ...`: the log and
//! metric agents (LoongCollector) the cluster knows, the pipeline and instance configs served to
//! them, and the groups (tag and IP-range selectors) those configs are applied to. Each command
//! is one call into the protocol client (`admin::agents`); exit 0 done, 1 a failed or refused
//! request, 2 a usage error (a malformed `--tag`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::admin::agents;
use super::{ServerArgs, admin_client, exit_code};

#[derive(Subcommand)]
pub(super) enum AgentCommand {
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
pub(super) enum AgentConfigCommand {
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
pub(super) enum AgentGroupCommand {
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

/// Which of the three agent command groups was given.
pub(super) enum AgentCli {
    Agent(AgentCommand),
    Config(AgentConfigCommand),
    Group(AgentGroupCommand),
}

/// Runs one agent, agent-config or agent-group command against the node `server` names.
pub(super) async fn run(server: ServerArgs, command: AgentCli) -> ExitCode {
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
            let tags = match tags.iter().map(|t| crate::api::client::parse_tag(t)).collect::<Result<Vec<_>, _>>() {
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

