//! `hotrule config print` and `hotrule config validate`: a configuration inspected without
//! running a node. Both load the sources exactly as `serve` does (`crate::config::load`); print
//! writes the effective configuration, defaults included and secrets redacted (optionally with
//! each value's origin), validate only says whether it loads. Exit 1 with every error listed
//! when it does not.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;

use super::SourceArgs;
use crate::config::{self, ConfigSources};

#[derive(Subcommand)]
pub(super) enum ConfigCommand {
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

/// Prints or validates the configuration the sources give.
pub(super) fn run(command: ConfigCommand) -> ExitCode {
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
