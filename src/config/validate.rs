//! Validation of a [`RawConfig`] into a [`NodeConfig`]: every field is checked and every
//! problem reported, before anything starts.

use std::fmt;
use std::net::SocketAddr;

use super::model::{NodeConfig, RawConfig};

/// One problem, with the key it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

pub fn validate(raw: RawConfig) -> Result<NodeConfig, Vec<ConfigIssue>> {
    let mut issues = Vec::new();
    let mut issue = |key: &str, message: String| issues.push(ConfigIssue { key: key.into(), message });

    let admin_listen = match raw.admin.listen.trim().parse::<SocketAddr>() {
        Ok(addr) => Some(addr),
        Err(_) => {
            issue("admin.listen", format!("{:?} is not an address of the form ip:port", raw.admin.listen));
            None
        }
    };
    let token = raw.admin.token.clone().filter(|t| !t.is_empty());
    if let Some(addr) = admin_listen
        && !addr.ip().is_loopback()
        && token.is_none()
        && !raw.admin.insecure
    {
        issue(
            "admin.token",
            format!(
                "required when admin.listen ({addr}) is not a loopback address; set admin.token (--admin-token or \
                 HOTRULE_ADMIN_TOKEN), or admin.insecure: true (--insecure-admin) if a gateway protects the port"
            ),
        );
    }
    if raw.node.id.as_deref().is_some_and(|id| id.trim().is_empty()) {
        issue("node.id", "must not be empty when set (leave it out to use the admin address)".into());
    }
    if raw.node.data_dir.as_os_str().is_empty() {
        issue("node.data_dir", "must not be empty".into());
    }
    for (key, value) in [
        ("rules.scan_interval", raw.rules.scan_interval),
        ("rules.self_heal_threshold", raw.rules.self_heal_threshold),
        ("rules.lock_timeout", raw.rules.lock_timeout),
        ("rules.tombstone_retention", raw.rules.tombstone_retention),
    ] {
        if value.0.is_zero() {
            issue(key, "must be greater than zero".into());
        }
    }
    if let Err(e) = tracing_subscriber::EnvFilter::try_new(&raw.log.level) {
        issue("log.level", format!("{:?} is not a log filter: {e}", raw.log.level));
    }
    match admin_listen {
        Some(admin_listen) if issues.is_empty() => Ok(NodeConfig {
            node_id: raw.node.id.clone(),
            data_dir: raw.node.data_dir.clone(),
            admin_listen,
            admin_token: token,
            insecure_admin: raw.admin.insecure,
            rules_dir: raw.rules.dir.clone(),
            scan_interval: raw.rules.scan_interval.0,
            self_heal_threshold: raw.rules.self_heal_threshold.0,
            lock_timeout: raw.rules.lock_timeout.0,
            tombstone_retention: raw.rules.tombstone_retention.0,
            log_level: raw.log.level.clone(),
            watch: raw.config.watch,
            raw,
        }),
        _ => Err(issues),
    }
}
