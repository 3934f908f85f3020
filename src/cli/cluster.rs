//! `hotrule cluster status`: the cluster as one node sees it (members, liveness, addresses,
//! generation, digest, last scan, and the main), from that node's admin API through the
//! protocol client (`admin::rule::cluster_status`). Exit 0, or 1 when the request fails.

use std::process::ExitCode;

use clap::Subcommand;

use super::admin::rule;
use super::{ServerArgs, admin_client, exit_code};

#[derive(Subcommand)]
pub(super) enum ClusterCommand {
    /// Members, liveness, addresses, generation, digest and last scan, and the main.
    Status {
        #[arg(long)]
        json: bool,
    },
}

/// Runs one cluster command against the node `server` names.
pub(super) async fn run(server: ServerArgs, command: ClusterCommand) -> ExitCode {
    let ClusterCommand::Status { json } = command;
    match admin_client(&server) {
        Ok(client) => exit_code(rule::cluster_status(&client, json).await),
        Err(code) => code,
    }
}
