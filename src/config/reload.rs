//! Live reload: re-resolve the configuration, apply what can change live, record the rest as
//! pending a restart, and reject an invalid config without touching the running node.

use std::sync::Arc;

use hotrule_confmap::{Env, WatchEvent, WatchOptions, Watcher};
use tokio_util::sync::CancellationToken;

use super::model::{AgentsConfig, NodeConfig};
use crate::agent::AgentServiceSettings;
use super::{ConfigSources, ConfigState, load};

/// What changed between two configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    pub live: Vec<&'static str>,
    pub restart: Vec<&'static str>,
}

/// Pure: which changed keys apply live, and which need a restart.
pub fn diff(old: &NodeConfig, new: &NodeConfig) -> Delta {
    let mut delta = Delta::default();
    let mut check = |changed: bool, key: &'static str, live: bool| {
        if changed {
            if live { delta.live.push(key) } else { delta.restart.push(key) }
        }
    };
    check(old.log_level != new.log_level, "log.level", true);
    check(old.scan_interval != new.scan_interval, "rules.scan_interval", true);
    check(old.self_heal_threshold != new.self_heal_threshold, "rules.self_heal_threshold", true);
    check(old.tombstone_retention != new.tombstone_retention, "rules.tombstone_retention", true);
    check(old.admin_token != new.admin_token, "admin.token", true);
    check(old.node_id != new.node_id, "node.id", false);
    check(old.data_dir != new.data_dir, "node.data_dir", false);
    check(old.admin_listen != new.admin_listen, "admin.listen", false);
    check(old.insecure_admin != new.insecure_admin, "admin.insecure", false);
    check(old.rules_dir != new.rules_dir, "rules.dir", false);
    check(old.lock_timeout != new.lock_timeout, "rules.lock_timeout", false);
    check(old.watch != new.watch, "config.watch", false);
    check(old.cluster != new.cluster, "cluster", false);
    check(old.agents.service.agent_token != new.agents.service.agent_token, "agents.token", true);
    check(old.agents.data_listen != new.agents.data_listen, "agents.data_listen", false);
    check(old.agents.tls != new.agents.tls, "agents.tls", false);
    check(old.limits != new.limits, "limits", false);
    let without_token = |a: &AgentsConfig| AgentServiceSettings { agent_token: None, ..a.service.clone() };
    check(without_token(&old.agents) != without_token(&new.agents), "agents", false);
    delta
}

/// The node-side effect of a reload: applies the live settings of a new config.
pub trait LiveSettings: Send + Sync + 'static {
    fn apply(&self, config: &NodeConfig) -> Result<(), String>;
}

pub struct Reloader {
    sources: ConfigSources,
    env: Arc<dyn Env>,
    state: Arc<ConfigState>,
    live: Arc<dyn LiveSettings>,
}

impl Reloader {
    pub fn new(sources: ConfigSources, env: Arc<dyn Env>, state: Arc<ConfigState>, live: Arc<dyn LiveSettings>) -> Reloader {
        Reloader { sources, env, state, live }
    }

    /// One reload. On success the live settings are applied; on failure nothing changes.
    pub fn reload(&self, reason: &str) -> Result<Delta, String> {
        let loaded = match load(&self.sources, self.env.clone()) {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::error!(%reason, error = %e, "configuration reload rejected; still running on the previous configuration");
                self.state.reject(e.to_string());
                return Err(e.to_string());
            }
        };
        let delta = diff(&self.state.current().config, &loaded.config);
        if let Err(e) = self.live.apply(&loaded.config) {
            tracing::error!(%reason, error = %e, "applying the reloaded configuration failed; still running on the previous configuration");
            self.state.reject(e.clone());
            return Err(e);
        }
        for key in &delta.restart {
            tracing::warn!(key, "configuration change needs a restart to take effect");
        }
        tracing::info!(%reason, live = ?delta.live, pending_restart = ?delta.restart, "configuration reloaded");
        self.state.accept(loaded, &delta.restart);
        Ok(delta)
    }

    /// The worker: reloads on SIGHUP, and on a change of a watched file when `config.watch`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let (changes_tx, mut changes_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let loaded = self.state.current();
        let _watcher = if loaded.config.watch && !loaded.watched_files.is_empty() {
            let tx = changes_tx.clone();
            match Watcher::start(&loaded.watched_files, WatchOptions::default(), move |event| {
                let reason = match event {
                    WatchEvent::Changed { paths } => format!("file changed: {paths:?}"),
                    WatchEvent::Failed(e) => format!("watch failed: {e}"),
                };
                let _ = tx.send(reason);
            }) {
                Ok(watcher) => Some(watcher),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch configuration files; reload with SIGHUP");
                    None
                }
            }
        } else {
            None
        };
        #[cfg(unix)]
        let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            #[cfg(unix)]
            let sighup = async {
                match hangup.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            #[cfg(not(unix))]
            let sighup = std::future::pending::<Option<()>>();
            let reason = tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = sighup => "SIGHUP".to_string(),
                Some(reason) = changes_rx.recv() => reason,
            };
            if reason.starts_with("watch failed") {
                tracing::warn!(%reason, "configuration watch");
                continue;
            }
            let _ = self.reload(&reason);
        }
    }
}
