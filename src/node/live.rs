//! A reloaded configuration's live settings, applied to the running node's parts.

use std::sync::Arc;

use crate::api::admin::AdminState;
use crate::config::NodeConfig;
use crate::config::reload::{LiveError, LiveSettings};
use crate::control::scan::{ScanSettings, Scanner};

use super::LogControl;

/// Applies the live settings of a reloaded configuration to a running node.
pub(super) struct NodeLive {
    pub(super) scanner: Arc<Scanner>,
    pub(super) state: Arc<AdminState>,
    pub(super) log_control: Option<LogControl>,
}

impl LiveSettings for NodeLive {
    fn apply(&self, config: &NodeConfig) -> Result<(), LiveError> {
        if let Some(control) = &self.log_control {
            control(&config.log_level)?;
        }
        self.scanner.update_settings(ScanSettings {
            interval: config.scan_interval,
            self_heal_after: config.self_heal_threshold,
            tombstone_retention: config.tombstone_retention,
        });
        self.state.set_admin_token(config.admin_token.clone());
        self.state.agents.set_agent_token(config.agents.service.agent_token.clone());
        Ok(())
    }
}
