//! Live reload: re-resolve the configuration, apply what can change live, record the rest as
//! pending a restart, and reject an invalid config without touching the running node.

use std::sync::Arc;

use hotrule_confmap::{Env, WatchEvent, WatchOptions, Watcher};

use super::model::{AgentsConfig, NodeConfig};
use crate::api::agents::AgentServiceSettings;
use super::{ConfigSources, ConfigState, load};
use crate::base::worker::{Worker, WorkerState};

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
    check(old.history != new.history, "rules.history", false);
    check(old.watch != new.watch, "config.watch", false);
    check(old.cluster != new.cluster, "cluster", false);
    check(old.agents.service.agent_token != new.agents.service.agent_token, "agents.token", true);
    check(old.agents.data_listen != new.agents.data_listen, "agents.data_listen", false);
    check(old.agents.tls != new.agents.tls, "agents.tls", false);
    check(old.limits != new.limits, "limits", false);
    check(old.ingest != new.ingest, "ingest", false);
    check(old.export != new.export, "export", false);
    check(old.dispatch != new.dispatch, "dispatch", false);
    check(old.retention != new.retention, "storage.retention", false);
    check(old.rolling != new.rolling, "rolling", false);
    check(old.alarms != new.alarms, "alarms", false);
    check(old.ui_templates_dir != new.ui_templates_dir, "ui.templates_dir", false);
    check(old.ui_dir != new.ui_dir, "ui.dir", false);
    check(old.query != new.query, "query", false);
    let without_token = |a: &AgentsConfig| AgentServiceSettings { agent_token: None, ..a.service.clone() };
    check(without_token(&old.agents) != without_token(&new.agents), "agents", false);
    delta
}

/// Why the live settings of a reloaded configuration could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("log.level {level:?}: {reason}")]
    LogLevel { level: String, reason: String },
}

/// Why a reload was rejected (the node keeps its previous configuration).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Load(#[from] super::ConfigErrors),
    #[error("{0}")]
    Apply(#[from] LiveError),
}

/// The node-side effect of a reload: applies the live settings of a new config.
pub trait LiveSettings: Send + Sync + 'static {
    fn apply(&self, config: &NodeConfig) -> Result<(), LiveError>;
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
    /// It may block (an `http` source): the worker runs it off the async threads.
    pub fn reload(&self, reason: &str) -> Result<Delta, ReloadError> {
        let loaded = match load(&self.sources, self.env.clone()) {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::error!(%reason, error = %e, "configuration reload rejected; still running on the previous configuration");
                self.state.reject(e.to_string());
                return Err(e.into());
            }
        };
        let delta = diff(&self.state.current().config, &loaded.config);
        if let Err(e) = self.live.apply(&loaded.config) {
            tracing::error!(%reason, error = %e, "applying the reloaded configuration failed; still running on the previous configuration");
            self.state.reject(e.to_string());
            return Err(e.into());
        }
        for key in &delta.restart {
            tracing::warn!(key, "configuration change needs a restart to take effect");
        }
        tracing::info!(%reason, live = ?delta.live, pending_restart = ?delta.restart, "configuration reloaded");
        self.state.accept(loaded, &delta.restart);
        Ok(delta)
    }

}

/// The reload worker: reloads on SIGHUP, and on a change of a watched file when `config.watch`.
/// A reload reads every source again, which blocks for an `http` source: it runs on the
/// blocking pool.
pub struct ReloadWorker {
    reloader: Arc<Reloader>,
    changes_rx: tokio::sync::mpsc::UnboundedReceiver<Trigger>,
    _watcher: Option<Watcher>,
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
    pending: Option<Trigger>,
}

/// What woke the reload worker.
enum Trigger {
    /// Reload, for this reason.
    Reload(String),
    /// The file watch reported an error: logged, nothing reloaded.
    WatchFailed(String),
}

impl ReloadWorker {
    /// Starts watching the configuration files (when `config.watch`) and listening for SIGHUP.
    pub fn new(reloader: Arc<Reloader>) -> ReloadWorker {
        let (changes_tx, changes_rx) = tokio::sync::mpsc::unbounded_channel::<Trigger>();
        let loaded = reloader.state.current();
        let watcher = if loaded.config.watch && !loaded.watched_files.is_empty() {
            match Watcher::start(&loaded.watched_files, WatchOptions::default(), move |event| {
                let trigger = match event {
                    WatchEvent::Changed { paths } => Trigger::Reload(format!("file changed: {paths:?}")),
                    WatchEvent::Failed(e) => Trigger::WatchFailed(e.to_string()),
                };
                // Closed only when the worker is gone: nothing left to reload.
                let _ = changes_tx.send(trigger);
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
        ReloadWorker {
            reloader,
            changes_rx,
            _watcher: watcher,
            #[cfg(unix)]
            hangup: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok(),
            pending: None,
        }
    }
}

#[async_trait::async_trait]
impl Worker for ReloadWorker {
    fn name(&self) -> &'static str {
        "config-reload"
    }

    async fn work(&mut self) -> WorkerState {
        let reason = match self.pending.take() {
            None => return WorkerState::Idle,
            Some(Trigger::WatchFailed(error)) => {
                tracing::warn!(%error, "configuration watch failed");
                return WorkerState::Idle;
            }
            Some(Trigger::Reload(reason)) => reason,
        };
        let reloader = self.reloader.clone();
        // The outcome is logged and recorded in the config state by `reload` itself.
        if let Err(e) = tokio::task::spawn_blocking(move || reloader.reload(&reason).map(|_| ())).await {
            tracing::error!(error = %e, "configuration reload task failed");
        }
        WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> WorkerState {
        #[cfg(unix)]
        let sighup = async {
            match self.hangup.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let sighup = std::future::pending::<Option<()>>();
        self.pending = tokio::select! {
            _ = sighup => Some(Trigger::Reload("SIGHUP".to_string())),
            Some(trigger) = self.changes_rx.recv() => Some(trigger),
        };
        WorkerState::Busy
    }
}
