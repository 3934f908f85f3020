//! Loading: config URIs, `--set` values and explicit flags → one validated [`NodeConfig`].
//!
//! Sources merge in order: every `--config` URI, then every `--set`, then the flags given
//! explicitly on the command line (flags override files). Deprecated flat keys move to their
//! new names first. Every problem is collected, so `config validate` lists them all:
//! unknown keys (with a "did you mean"), type errors per section, and field validation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use hotrule_confmap::{Env, RenameKeys, Resolved, Resolver, Value, from_value, set_to_yaml_uri};
use serde::de::DeserializeOwned;

use super::model::{NodeConfig, RawAdmin, RawAgents, RawCluster, RawConfig, RawConfigSection, RawLimits, RawLog, RawNode, RawRules};
use super::validate::{ConfigIssue, validate};

/// Where a node's configuration comes from.
#[derive(Debug, Clone, Default)]
pub struct ConfigSources {
    /// `--config` URIs, in order.
    pub uris: Vec<String>,
    /// `--set key.path=value`, in order.
    pub sets: Vec<String>,
    /// Flags given explicitly, as (key path, value); applied last.
    pub overrides: Vec<(String, String)>,
}

/// A loaded configuration with what `config print` and `GET /config` show.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: NodeConfig,
    /// Effective tree after merge, expansion and conversion (not redacted).
    pub effective: Value,
    pub origins: BTreeMap<String, String>,
    pub warnings: Vec<String>,
    pub watched_files: Vec<PathBuf>,
}

/// Keys renamed since the first release, moved by a converter with a warning.
pub const DEPRECATED_KEYS: [(&str, &str); 6] = [
    ("data_dir", "node.data_dir"),
    ("node_id", "node.id"),
    ("admin_listen", "admin.listen"),
    ("admin_token", "admin.token"),
    ("rules_dir", "rules.dir"),
    ("scan_interval", "rules.scan_interval"),
];

/// Keys whose values are secrets: redacted everywhere they are shown.
pub fn is_secret(path: &str) -> bool {
    let leaf = path.rsplit('.').next().unwrap_or(path);
    // Export headers carry credentials (Authorization, X-Scope-OrgID ...), whatever their name.
    leaf.contains("token")
        || leaf.contains("secret")
        || leaf.contains("password")
        || path == "ingest.grpc.authentication"
        || path.starts_with("export.remote_write.headers.")
        || path.starts_with("export.otlp_logs.headers.")
}

#[derive(Debug, thiserror::Error)]
#[error("{}", render(.0))]
pub struct ConfigErrors(pub Vec<ConfigIssue>);

fn render(issues: &[ConfigIssue]) -> String {
    let lines: Vec<String> = issues.iter().map(|i| format!("  - {i}")).collect();
    format!("{} configuration error(s):\n{}", issues.len(), lines.join("\n"))
}

pub fn load(sources: &ConfigSources, env: Arc<dyn Env>) -> Result<Loaded, ConfigErrors> {
    let issue = |key: &str, message: String| ConfigErrors(vec![ConfigIssue { key: key.to_string(), message }]);
    let mut uris = sources.uris.clone();
    for set in &sources.sets {
        uris.push(set_to_yaml_uri(set).map_err(|e| issue("--set", format!("{set:?}: {e}")))?);
    }
    for (key, value) in &sources.overrides {
        let set = format!("{key}={value}");
        uris.push(set_to_yaml_uri(&set).map_err(|e| issue(key, format!("flag value {value:?}: {e}")))?);
    }
    let resolved = if uris.is_empty() {
        Resolved { value: Value::empty_map(), origins: BTreeMap::new(), warnings: Vec::new(), watched_files: Vec::new() }
    } else {
        let resolver = Resolver::builder()
            .uris(uris)
            .standard_providers(env)
            .converter(RenameKeys::new(DEPRECATED_KEYS))
            .build()
            .map_err(|e| issue("--config", e.to_string()))?;
        resolver.resolve().map_err(|e| issue("--config", e.to_string()))?
    };
    for warning in &resolved.warnings {
        tracing::warn!(%warning, "configuration");
    }

    let mut issues = unknown_keys(&resolved.value);
    let raw = decode_sections(&resolved.value, &mut issues);
    if !issues.is_empty() {
        return Err(ConfigErrors(issues));
    }
    let config = validate(raw).map_err(ConfigErrors)?;
    Ok(Loaded {
        config,
        effective: resolved.value,
        origins: resolved.origins,
        warnings: resolved.warnings,
        watched_files: resolved.watched_files,
    })
}

/// Every key of `value` that the schema (the serialized defaults) does not know.
fn unknown_keys(value: &Value) -> Vec<ConfigIssue> {
    let schema = serde_json::to_value(RawConfig::default()).unwrap_or(serde_json::Value::Null);
    let mut issues = Vec::new();
    walk_unknown(&value.to_json(), &schema, "", &mut issues);
    issues
}

fn walk_unknown(value: &serde_json::Value, schema: &serde_json::Value, prefix: &str, out: &mut Vec<ConfigIssue>) {
    let (serde_json::Value::Object(map), serde_json::Value::Object(known)) = (value, schema) else { return };
    for (key, child) in map {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        match known.get(key) {
            Some(child_schema) => walk_unknown(child, child_schema, &path, out),
            None => {
                let suggestion = known
                    .keys()
                    .map(|k| (edit_distance(k, key), k))
                    .filter(|(d, k)| *d <= 3.max(k.len() / 3))
                    .min()
                    .map(|(_, k)| if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") });
                let message = match suggestion {
                    Some(s) => format!("unknown key; did you mean `{s}`?"),
                    None => {
                        let names: Vec<&str> = known.keys().map(String::as_str).collect();
                        format!("unknown key; known keys here: {}", names.join(", "))
                    }
                };
                out.push(ConfigIssue { key: path, message });
            }
        }
    }
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb)).min(row[j] + 1).min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}

/// Decodes each top-level section on its own, so type errors in several sections all show.
fn decode_sections(value: &Value, issues: &mut Vec<ConfigIssue>) -> RawConfig {
    fn section<T: DeserializeOwned + Default>(value: &Value, name: &str, issues: &mut Vec<ConfigIssue>) -> T {
        // Null means unset here as at every depth below (`tls:`, `watch: null`, `${env:UNSET}`):
        // the decoder leaves null entries out, so each field keeps its default.
        match value.get_path(name) {
            None => T::default(),
            Some(v) if v.is_null() => T::default(),
            Some(v) => from_value::<T>(v).unwrap_or_else(|e| {
                let key = if e.path.is_empty() { name.to_string() } else { format!("{name}.{}", e.path) };
                issues.push(ConfigIssue { key, message: e.message });
                T::default()
            }),
        }
    }
    RawConfig {
        node: section::<RawNode>(value, "node", issues),
        admin: section::<RawAdmin>(value, "admin", issues),
        rules: section::<RawRules>(value, "rules", issues),
        log: section::<RawLog>(value, "log", issues),
        config: section::<RawConfigSection>(value, "config", issues),
        cluster: section::<RawCluster>(value, "cluster", issues),
        agents: section::<RawAgents>(value, "agents", issues),
        limits: section::<RawLimits>(value, "limits", issues),
        ingest: section::<crate::data::ingest::RawIngest>(value, "ingest", issues),
        export: section::<crate::data::export::RawExport>(value, "export", issues),
        dispatch: section::<crate::data::evaluation::RawDispatch>(value, "dispatch", issues),
        storage: section::<crate::data::metrics::cells::config::RawStorage>(value, "storage", issues),
        rolling: section::<crate::control::rolling::roller::RawRolling>(value, "rolling", issues),
        alarms: section::<crate::control::alarms::config::RawAlarms>(value, "alarms", issues),
        ui: section::<crate::config::model::RawUi>(value, "ui", issues),
        query: section::<crate::api::query::RawQuery>(value, "query", issues),
    }
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("listen", "listen"), 0);
        assert_eq!(edit_distance("listen", "lsten"), 1);
        assert_eq!(edit_distance("scan_interval", "scan_intervall"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
