//! Node configuration, OpenTelemetry-Collector style: providers and merge (`hotrule-confmap`),
//! a typed, validated [`NodeConfig`], and live reload.
//!
//! `load` turns `--config` URIs, `--set` values and explicit flags into one validated config.
//! `reload` re-resolves on a watched file change or SIGHUP, applies the settings that can change
//! live, and records the others as pending a restart. An invalid new config is rejected and
//! the node keeps running on the previous one.

pub mod load;
pub mod model;
pub mod reload;
pub mod validate;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

pub use load::{ConfigErrors, ConfigSources, Loaded, is_secret, load};
pub use model::{DurationSetting, NodeConfig, RawConfig};

/// What `GET /config` shows: the loaded config, when, and what waits for a restart.
pub struct ConfigState {
    current: RwLock<Arc<Loaded>>,
    pending_restart: RwLock<BTreeSet<String>>,
    loaded_at_ms: AtomicU64,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
    last_error: RwLock<String>,
}

impl ConfigState {
    pub fn new(loaded: Loaded) -> ConfigState {
        ConfigState {
            current: RwLock::new(Arc::new(loaded)),
            pending_restart: RwLock::new(BTreeSet::new()),
            loaded_at_ms: AtomicU64::new(crate::base::clock::now_ms()),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            last_error: RwLock::new(String::new()),
        }
    }

    pub fn current(&self) -> Arc<Loaded> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn accept(&self, loaded: Loaded, restart_keys: &[&'static str]) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(loaded);
        self.pending_restart.write().unwrap_or_else(|p| p.into_inner()).extend(restart_keys.iter().map(|k| k.to_string()));
        self.loaded_at_ms.store(crate::base::clock::now_ms(), Ordering::SeqCst);
        self.reloads.fetch_add(1, Ordering::SeqCst);
        self.last_error.write().unwrap_or_else(|p| p.into_inner()).clear();
    }

    fn reject(&self, error: String) {
        self.reload_failures.fetch_add(1, Ordering::SeqCst);
        *self.last_error.write().unwrap_or_else(|p| p.into_inner()) = error;
    }

    pub fn reload_failures(&self) -> u64 {
        self.reload_failures.load(Ordering::SeqCst)
    }

    /// The `GET /config` body: the effective config with secrets redacted.
    pub fn view(&self) -> Value {
        let loaded = self.current();
        let effective = hotrule_confmap::redact(&loaded.effective, is_secret);
        let origins = hotrule_confmap::redact_origins(&loaded.origins, is_secret);
        let config = serde_json::to_value(&loaded.config.raw).unwrap_or(Value::Null);
        json!({
            "config": redact_json(config, ""),
            "effective": effective.to_json(),
            "origins": origins,
            "loadedAt": self.loaded_at_ms.load(Ordering::SeqCst),
            "reloads": self.reloads.load(Ordering::SeqCst),
            "reloadFailures": self.reload_failures.load(Ordering::SeqCst),
            "lastReloadError": self.last_error.read().unwrap_or_else(|p| p.into_inner()).clone(),
            "pendingRestart": self.pending_restart.read().unwrap_or_else(|p| p.into_inner()).iter().collect::<Vec<_>>(),
            "warnings": loaded.warnings,
        })
    }
}

impl crate::api::admin::ConfigView for ConfigState {
    fn view(&self) -> Value {
        ConfigState::view(self)
    }
}

/// Replaces secret leaves of a JSON tree with `[REDACTED]` (null stays null).
fn redact_json(value: Value, prefix: &str) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    let v = if is_secret(&path) && !v.is_null() { Value::String("[REDACTED]".into()) } else { redact_json(v, &path) };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod collector_parity_tests;
