//! Validation of a [`RawConfig`] into a [`NodeConfig`]: every field is checked and every
//! problem reported, before anything starts.

use std::fmt;
use std::net::SocketAddr;

use super::model::{AgentsConfig, ClusterConfig, NodeConfig, RawConfig};

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
    let token = admin_token(&raw, &mut issue);
    if let Some(addr) = admin_listen
        && !addr.ip().is_loopback()
        && token.is_none()
        && !raw.admin.insecure
    {
        issue(
            "admin.token",
            format!(
                "required when admin.listen ({addr}) is not a loopback address; set admin.token_file \
                 (--admin-token-file) or admin.token (HOTRULE_ADMIN_TOKEN or --admin-token), or admin.insecure: true \
                 (--insecure-admin) if a gateway protects the port"
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
        ("rules.history_max_age", raw.rules.history_max_age),
    ] {
        if value.0.is_zero() {
            issue(key, "must be greater than zero".into());
        }
    }
    if !(1..=MAX_HISTORY_REVISIONS).contains(&raw.rules.history_max_revisions) {
        issue(
            "rules.history_max_revisions",
            format!("must be between 1 and {MAX_HISTORY_REVISIONS} (got {})", raw.rules.history_max_revisions),
        );
    }
    let limits = limits_config(&raw, &mut issue);
    let ingest = crate::data::ingest::config::validate(&raw.ingest, &mut issue);
    let dispatch = raw.dispatch.validate(&mut issue);
    let retention = raw.storage.validate(&mut issue);
    let rolling = raw.rolling.validate(&mut issue);
    let alarms = raw.alarms.validate(&mut issue);
    let query = raw.query.validate(&mut issue);
    if let Some(dir) = &raw.ui.dir
        && !dir.join("index.html").is_file()
    {
        issue("ui.dir", format!("{} has no index.html (a built UI: booster-ui's dist/)", dir.display()));
    }
    let cluster = admin_listen.and_then(|admin| cluster_config(&raw, admin, &mut issue));
    let agents = admin_listen.and_then(|admin| agents_config(&raw, admin, &mut issue));
    let export = crate::data::export::config::validate(&raw.export, &mut issue);
    let otlp_logs_export = crate::data::export::otlp_logs::config::validate(raw.export.otlp_logs.as_ref(), &mut issue);
    if let Err(e) = tracing_subscriber::EnvFilter::try_new(&raw.log.level) {
        issue("log.level", format!("{:?} is not a log filter: {e}", raw.log.level));
    }
    match (admin_listen, agents) {
        (Some(admin_listen), Some(agents)) if issues.is_empty() => Ok(NodeConfig {
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
            history: crate::control::history::retention::Retention {
                max_revisions: raw.rules.history_max_revisions,
                max_age: raw.rules.history_max_age.0,
            },
            log_level: raw.log.level.clone(),
            watch: raw.config.watch,
            cluster,
            agents,
            limits,
            ingest,
            export,
            otlp_logs_export,
            dispatch,
            retention,
            rolling,
            alarms,
            ui_templates_dir: raw.ui.templates_dir.clone(),
            ui_dir: raw.ui.dir.clone(),
            query,
            raw,
        }),
        _ => Err(issues),
    }
}

/// The admin token: `admin.token`, or the trimmed content of `admin.token_file`; not both.
fn admin_token(raw: &RawConfig, issue: &mut impl FnMut(&str, String)) -> Option<String> {
    let inline = raw.admin.token.clone().filter(|t| !t.is_empty());
    let Some(path) = &raw.admin.token_file else { return inline };
    if inline.is_some() {
        issue("admin.token_file", "set admin.token or admin.token_file, not both".into());
        return inline;
    }
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Some(text.trim().to_string()),
        Ok(_) => {
            issue("admin.token_file", format!("{} is empty", path.display()));
            None
        }
        Err(e) => {
            issue("admin.token_file", format!("{}: {e}", path.display()));
            None
        }
    }
}

/// History keeps at most this many revisions per entry (each holds the whole content).
const MAX_HISTORY_REVISIONS: usize = 10_000;

/// Connection caps above this are refused: each connection is a file descriptor.
const MAX_CONNECTIONS_SETTING: usize = 65_536;

/// Validates the `limits` section.
fn limits_config(raw: &RawConfig, issue: &mut impl FnMut(&str, String)) -> crate::base::listen::ListenLimits {
    let l = &raw.limits;
    for (key, value) in [
        ("limits.header_read_timeout", l.header_read_timeout),
        ("limits.body_read_timeout", l.body_read_timeout),
        ("limits.idle_timeout", l.idle_timeout),
    ] {
        if value.0.is_zero() {
            issue(key, "must be greater than zero".into());
        }
    }
    if !l.idle_timeout.0.is_zero() && l.idle_timeout.0 < crate::base::listen::MIN_IDLE_TIMEOUT {
        issue(
            "limits.idle_timeout",
            format!(
                "must be at least {:?}: the node's own clients drop idle connections after {:?}",
                crate::base::listen::MIN_IDLE_TIMEOUT,
                crate::base::listen::CLIENT_POOL_IDLE_TIMEOUT
            ),
        );
    }
    if l.idle_timeout.0 > l.header_read_timeout.0 {
        issue(
            "limits.idle_timeout",
            format!(
                "must not exceed limits.header_read_timeout ({}): the wait for the next request head is bounded by it",
                l.header_read_timeout
            ),
        );
    }
    for (key, value) in [
        ("limits.admin_connections", l.admin_connections),
        ("limits.bus_connections", l.bus_connections),
        ("limits.data_connections", l.data_connections),
    ] {
        if value == 0 || value > MAX_CONNECTIONS_SETTING {
            issue(key, format!("{value} is not between 1 and {MAX_CONNECTIONS_SETTING}"));
        }
    }
    crate::base::listen::ListenLimits {
        header_read_timeout: l.header_read_timeout.0,
        body_read_timeout: l.body_read_timeout.0,
        idle_timeout: l.idle_timeout.0,
        admin_connections: l.admin_connections,
        bus_connections: l.bus_connections,
        data_connections: l.data_connections,
    }
}

/// Validates the `agents` section.
fn agents_config(raw: &RawConfig, admin: SocketAddr, issue: &mut impl FnMut(&str, String)) -> Option<AgentsConfig> {
    use crate::api::agents::{AgentServiceSettings, DetailDelivery, LivenessPolicy};
    let a = &raw.agents;
    let data_listen = match &a.data_listen {
        None => Some(SocketAddr::new(admin.ip(), super::model::DEFAULT_DATA_PORT)),
        Some(text) => match text.trim().parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                issue("agents.data_listen", format!("{text:?} is not an address of the form ip:port"));
                None
            }
        },
    };
    let detail_delivery = match a.detail_delivery.trim() {
        "inline" => Some(DetailDelivery::Inline),
        "fetch" => Some(DetailDelivery::Fetch),
        other => {
            issue("agents.detail_delivery", format!("{other:?} is not inline or fetch"));
            None
        }
    };
    // Every check runs before any early return, so that all problems are reported together.
    let tls = agent_tls(&a.tls, issue);
    let interval = a.heartbeat_interval.0;
    if interval.is_zero() {
        issue("agents.heartbeat_interval", "must be greater than zero".into());
    } else if a.offline_after.0 < interval {
        issue("agents.offline_after", format!("must be at least agents.heartbeat_interval ({interval:?})"));
    }
    if a.retention.0 < a.offline_after.0 {
        issue("agents.retention", "must be at least agents.offline_after".into());
    }
    if interval.is_zero() {
        return None;
    }
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    let offline_ms = u64::try_from(a.offline_after.0.as_millis()).unwrap_or(u64::MAX);
    let missed_intervals = u32::try_from(offline_ms.div_ceil(interval_ms).max(1)).unwrap_or(u32::MAX);
    let service = AgentServiceSettings {
        detail_delivery: detail_delivery?,
        agent_token: a.token.clone().filter(|t| !t.is_empty()),
        liveness: LivenessPolicy {
            heartbeat_interval_ms: interval_ms,
            missed_intervals,
            retention_ms: u64::try_from(a.retention.0.as_millis()).unwrap_or(u64::MAX),
        },
        ..AgentServiceSettings::default()
    };
    Some(AgentsConfig { data_listen: data_listen?, tls: tls?, service })
}

/// Validates `agents.tls`: both files or neither, and a pair that loads and fits together.
fn agent_tls(raw: &super::model::RawTls, issue: &mut impl FnMut(&str, String)) -> Option<Option<crate::base::tls::TlsFiles>> {
    match (&raw.cert_file, &raw.key_file) {
        (None, None) => Some(None),
        (Some(cert_file), Some(key_file)) => {
            let files = crate::base::tls::TlsFiles { cert_file: cert_file.clone(), key_file: key_file.clone() };
            match crate::base::tls::load(&files) {
                Ok(_) => Some(Some(files)),
                Err(e) => {
                    issue("agents.tls", e.to_string());
                    None
                }
            }
        }
        (Some(_), None) => {
            issue("agents.tls.key_file", "is required with agents.tls.cert_file".into());
            None
        }
        (None, Some(_)) => {
            issue("agents.tls.cert_file", "is required with agents.tls.key_file".into());
            None
        }
    }
}

/// Validates the `cluster` section; `None` when this node runs alone.
fn cluster_config(raw: &RawConfig, admin: SocketAddr, issue: &mut impl FnMut(&str, String)) -> Option<ClusterConfig> {
    let c = &raw.cluster;
    if c.gossip_listen.is_none() && c.seeds.is_empty() {
        return None;
    }
    let parse = |key: &str, text: &str, issue: &mut dyn FnMut(&str, String)| match text.trim().parse::<SocketAddr>() {
        Ok(addr) => Some(addr),
        Err(_) => {
            issue(key, format!("{text:?} is not an address of the form ip:port"));
            None
        }
    };
    let gossip_listen = parse("cluster.gossip_listen", c.gossip_listen.as_deref().unwrap_or("0.0.0.0:17130"), issue)?;
    if gossip_listen.port() == 0 {
        issue("cluster.gossip_listen", "needs a fixed port: peers seed it".into());
    }
    let default_bus = SocketAddr::new(gossip_listen.ip(), gossip_listen.port().wrapping_add(1));
    let bus_listen = match &c.bus_listen {
        Some(text) => parse("cluster.bus_listen", text, issue)?,
        None => default_bus,
    };
    for seed in &c.seeds {
        if seed.rsplit_once(':').is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err()) {
            issue("cluster.seeds", format!("{seed:?} is not host:port"));
        }
    }
    let advertise = |listen: SocketAddr| match &c.advertise_host {
        Some(host) => format!("{host}:{}", listen.port()),
        None => listen.to_string(),
    };
    let gossip_advertise = match advertise(gossip_listen).parse::<SocketAddr>() {
        Ok(addr) => addr,
        Err(_) => {
            issue("cluster.advertise_host", "must be an IP address (gossip advertises a socket address)".into());
            return None;
        }
    };
    if gossip_advertise.ip().is_unspecified() {
        issue("cluster.advertise_host", format!("required when gossip listens on {gossip_listen}: peers cannot reach 0.0.0.0"));
    }
    let secret = match (&c.secret, &c.secret_file) {
        (Some(secret), _) if !secret.is_empty() => Some(secret.clone().into_bytes()),
        (_, Some(path)) => match std::fs::read(path) {
            Ok(bytes) => Some(bytes.trim_ascii().to_vec()).filter(|b| !b.is_empty()),
            Err(e) => {
                issue("cluster.secret_file", format!("{}: {e}", path.display()));
                None
            }
        },
        _ => None,
    };
    if secret.is_none() && !c.insecure_bus {
        issue(
            "cluster.secret",
            "a clustered node needs a shared bus secret (cluster.secret_file, --cluster-secret-file or HOTRULE_CLUSTER_SECRET); \
             pass --insecure-bus (cluster.insecure_bus: true) to run without one"
                .into(),
        );
    }
    if c.gossip_interval.0 < std::time::Duration::from_millis(10) {
        issue("cluster.gossip_interval", "must be at least 10ms".into());
    }
    if !(c.phi_threshold.is_finite() && (1.0..=100.0).contains(&c.phi_threshold)) {
        issue("cluster.phi_threshold", format!("{} is not between 1 and 100", c.phi_threshold));
    }
    if !(c.suspect_phi_threshold >= 1.0 && c.suspect_phi_threshold <= c.phi_threshold) {
        issue(
            "cluster.suspect_phi_threshold",
            format!("{} is not between 1 and cluster.phi_threshold ({})", c.suspect_phi_threshold, c.phi_threshold),
        );
    }
    if c.forward_wait.0 > std::time::Duration::from_secs(300) {
        issue("cluster.forward_wait", "must be at most 5m (a client waits this long for an answer)".into());
    }
    Some(ClusterConfig {
        gossip_listen,
        gossip_advertise,
        bus_listen,
        bus_advertise: advertise(bus_listen),
        admin_advertise: advertise(admin),
        seeds: c.seeds.clone(),
        id: c.id.clone(),
        secret,
        commit_replicas: c.commit_replicas,
        gossip_interval: c.gossip_interval.0,
        phi_threshold: c.phi_threshold,
        suspect_phi_threshold: c.suspect_phi_threshold,
        forward_wait: c.forward_wait.0,
    })
}
