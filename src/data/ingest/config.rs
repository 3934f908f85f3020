//! The `ingest` section of the node configuration: body limits of the receivers and the scrape
//! jobs (SkyWalking's prometheus-fetcher shape: a job name, static targets with optional
//! labels, an interval, a timeout and a metrics path). Read as [`RawIngest`], validated into
//! [`IngestConfig`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;
use hotrule_mal_engine::LabelMap;

fn default_max_body_bytes() -> usize {
    16 * 1024 * 1024
}
fn default_max_decompressed_bytes() -> usize {
    64 * 1024 * 1024
}
fn default_scrape_interval() -> DurationSetting {
    DurationSetting(Duration::from_secs(15))
}
fn default_scrape_timeout() -> DurationSetting {
    DurationSetting(Duration::from_secs(10))
}
fn default_metrics_path() -> String {
    "/metrics".into()
}

/// The longest scrape interval a job may set.
const MAX_SCRAPE_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// The `ingest` section as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIngest {
    /// A request body as sent (compressed or not) may hold at most this many bytes (413 above).
    #[serde(default = "default_max_body_bytes")]
    pub max_body_bytes: usize,
    /// A body after gzip or snappy decompression may hold at most this many bytes (413 above);
    /// also the largest scrape answer read.
    #[serde(default = "default_max_decompressed_bytes")]
    pub max_decompressed_bytes: usize,
    /// Scrape jobs.
    #[serde(default)]
    pub scrape_jobs: Vec<RawScrapeJob>,
    /// The dedicated port SkyWalking's agents send to over gRPC (their default collector port),
    /// or `off`; gRPC is also served on the data listener.
    #[serde(default = "super::skywalking::config::default_grpc_listen")]
    pub grpc_listen: String,
    /// The gRPC receivers' token and limits.
    #[serde(default)]
    pub grpc: super::skywalking::config::RawGrpc,
}

impl Default for RawIngest {
    fn default() -> Self {
        RawIngest {
            max_body_bytes: default_max_body_bytes(),
            max_decompressed_bytes: default_max_decompressed_bytes(),
            scrape_jobs: Vec::new(),
            grpc_listen: super::skywalking::config::default_grpc_listen(),
            grpc: super::skywalking::config::RawGrpc::default(),
        }
    }
}

/// One scrape job as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScrapeJob {
    /// The `job` label (MAL sees it as `job_name` and `service_name`).
    pub job_name: String,
    #[serde(default = "default_scrape_interval")]
    pub interval: DurationSetting,
    #[serde(default = "default_scrape_timeout")]
    pub timeout: DurationSetting,
    #[serde(default = "default_metrics_path")]
    pub metrics_path: String,
    pub static_config: RawStaticConfig,
}

/// Static targets and the labels added to their samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStaticConfig {
    /// `host:port` (or `http://host:port`); the `instance` label.
    pub targets: Vec<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Body limits of the receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    pub max_body_bytes: usize,
    pub max_decompressed_bytes: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits { max_body_bytes: default_max_body_bytes(), max_decompressed_bytes: default_max_decompressed_bytes() }
    }
}

/// A validated scrape job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScrapeJob {
    pub name: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub metrics_path: String,
    /// `host:port` of each target, as the `instance` label.
    pub targets: Vec<String>,
    pub labels: LabelMap,
}

/// The validated `ingest` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestConfig {
    pub limits: BodyLimits,
    pub scrape_jobs: Vec<ScrapeJob>,
    pub grpc: super::skywalking::config::GrpcSettings,
}

/// Validates `raw`, reporting every problem through `issue` with its key.
pub fn validate(raw: &RawIngest, issue: &mut impl FnMut(&str, String)) -> IngestConfig {
    if raw.max_body_bytes == 0 {
        issue("ingest.max_body_bytes", "must be greater than zero".into());
    }
    if raw.max_decompressed_bytes < raw.max_body_bytes {
        issue("ingest.max_decompressed_bytes", format!("must be at least ingest.max_body_bytes ({})", raw.max_body_bytes));
    }
    let mut names = std::collections::BTreeSet::new();
    let mut jobs = Vec::new();
    for (index, job) in raw.scrape_jobs.iter().enumerate() {
        let key = |field: &str| format!("ingest.scrape_jobs[{index}].{field}");
        if job.job_name.trim().is_empty() {
            issue(&key("job_name"), "must not be empty".into());
        } else if !names.insert(job.job_name.clone()) {
            issue(&key("job_name"), format!("{:?} is used by another job", job.job_name));
        }
        if job.interval.0.is_zero() || job.interval.0 > MAX_SCRAPE_INTERVAL {
            issue(&key("interval"), "must be greater than zero and at most 24h".into());
        }
        if job.timeout.0.is_zero() || job.timeout.0 > job.interval.0 {
            issue(&key("timeout"), format!("must be greater than zero and at most the interval ({})", job.interval));
        }
        if !job.metrics_path.starts_with('/') || job.metrics_path.parse::<hyper::Uri>().is_err() {
            issue(&key("metrics_path"), format!("{:?} is not an absolute path", job.metrics_path));
        }
        if job.static_config.targets.is_empty() {
            issue(&key("static_config.targets"), "must name at least one target".into());
        }
        let mut targets = Vec::new();
        for (t, target) in job.static_config.targets.iter().enumerate() {
            match parse_target(target) {
                Ok(authority) => targets.push(authority),
                Err(message) => issue(&key(&format!("static_config.targets[{t}]")), message),
            }
        }
        for name in job.static_config.labels.keys() {
            if !valid_label_name(name) || name.starts_with("__") || name == "job" || name == "instance" {
                issue(
                    &key("static_config.labels"),
                    format!("{name:?} is not a label name a job may set ([a-zA-Z_][a-zA-Z0-9_]*, not job, instance or __*)"),
                );
            }
        }
        jobs.push(ScrapeJob {
            name: job.job_name.clone(),
            interval: job.interval.0,
            timeout: job.timeout.0,
            metrics_path: job.metrics_path.clone(),
            targets,
            labels: job.static_config.labels.clone().into_iter().collect(),
        });
    }
    IngestConfig {
        limits: BodyLimits { max_body_bytes: raw.max_body_bytes, max_decompressed_bytes: raw.max_decompressed_bytes },
        scrape_jobs: jobs,
        grpc: super::skywalking::config::validate(&raw.grpc_listen, &raw.grpc, issue),
    }
}

/// `host:port` or `http://host:port[/]` → `host:port`.
fn parse_target(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    let authority = match trimmed.split_once("://") {
        Some(("http", rest)) => rest.trim_end_matches('/'),
        Some((scheme, _)) => return Err(format!("{text:?}: only http targets are scraped, not {scheme}")),
        None => trimmed,
    };
    match authority.parse::<hyper::http::uri::Authority>() {
        Ok(parsed) if parsed.port_u16().is_some() && !authority.contains(['/', '@']) => Ok(authority.to_owned()),
        _ => Err(format!("{text:?} is not a target of the form host:port")),
    }
}

fn valid_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_')) && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(targets: &[&str]) -> RawScrapeJob {
        RawScrapeJob {
            job_name: "vm-monitoring".into(),
            interval: default_scrape_interval(),
            timeout: default_scrape_timeout(),
            metrics_path: default_metrics_path(),
            static_config: RawStaticConfig { targets: targets.iter().map(|t| t.to_string()).collect(), labels: BTreeMap::new() },
        }
    }

    fn issues(raw: &RawIngest) -> (IngestConfig, Vec<(String, String)>) {
        let mut found = Vec::new();
        let config = validate(raw, &mut |key: &str, message: String| found.push((key.to_owned(), message)));
        (config, found)
    }

    #[test]
    fn defaults_are_valid_and_documented_values() {
        let (config, found) = issues(&RawIngest::default());
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(config.limits.max_body_bytes, 16 << 20);
        assert_eq!(config.limits.max_decompressed_bytes, 64 << 20);
        assert!(config.scrape_jobs.is_empty());
    }

    /// Loads a node configuration file holding `text`.
    fn load(text: &str) -> Result<crate::config::Loaded, crate::config::ConfigErrors> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("node.yaml");
        std::fs::write(&path, text).expect("write");
        let sources = crate::config::ConfigSources { uris: vec![format!("file:{}", path.display())], ..Default::default() };
        crate::config::load(&sources, std::sync::Arc::new(hotrule_confmap::MapEnv::new(Vec::<(String, String)>::new())))
    }

    #[test]
    fn a_job_reads_from_the_node_configuration_with_its_defaults() {
        let text = "ingest:\n  max_body_bytes: 1048576\n  scrape_jobs:\n    - job_name: vm\n      interval: 30s\n      static_config:\n        targets: ['127.0.0.1:9100', 'http://node:9100/']\n        labels: {env: prod}\n";
        let config = load(text).expect("valid").config.ingest;
        assert_eq!(config.limits.max_body_bytes, 1 << 20);
        let job = &config.scrape_jobs[0];
        assert_eq!(job.targets, vec!["127.0.0.1:9100".to_string(), "node:9100".to_string()]);
        assert_eq!((job.interval, job.timeout, job.metrics_path.as_str()), (Duration::from_secs(30), Duration::from_secs(10), "/metrics"));
        assert_eq!(job.labels.get("env").map(String::as_str), Some("prod"));
    }

    #[test]
    fn the_example_node_configuration_holds_the_defaults() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/node.yaml");
        let text = std::fs::read_to_string(path).expect("config/node.yaml");
        assert_eq!(load(&text).expect("valid").config.ingest, validate(&RawIngest::default(), &mut |_: &str, _: String| {}));
    }

    #[test]
    fn an_unknown_key_in_a_job_is_reported() {
        let text = "ingest:\n  scrape_jobs:\n    - job_name: vm\n      scrape_interval: 30s\n      static_config: {targets: ['a:1']}\n";
        let Err(crate::config::ConfigErrors(issues)) = load(text) else { panic!("expected an error") };
        assert!(issues.iter().any(|i| i.key.starts_with("ingest") && i.message.contains("scrape_interval")), "{issues:?}");
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let mut bad = job(&["https://x:1", "no-port", ""]);
        bad.timeout = DurationSetting(Duration::from_secs(30));
        let mut slow = job(&["a:1"]);
        slow.job_name = "slow".into();
        slow.interval = DurationSetting(Duration::from_secs(48 * 3600));
        bad.metrics_path = "metrics".into();
        bad.static_config.labels.insert("job".into(), "x".into());
        let raw = RawIngest { max_body_bytes: 0, max_decompressed_bytes: 0, scrape_jobs: vec![bad.clone(), bad, slow], ..RawIngest::default() };
        let (_, found) = issues(&raw);
        let keys: Vec<&str> = found.iter().map(|(k, _)| k.as_str()).collect();
        for expected in [
            "ingest.max_body_bytes",
            "ingest.scrape_jobs[0].timeout",
            "ingest.scrape_jobs[0].metrics_path",
            "ingest.scrape_jobs[0].static_config.targets[0]",
            "ingest.scrape_jobs[0].static_config.targets[1]",
            "ingest.scrape_jobs[0].static_config.targets[2]",
            "ingest.scrape_jobs[0].static_config.labels",
            "ingest.scrape_jobs[1].job_name",
            "ingest.scrape_jobs[2].interval",
        ] {
            assert!(keys.contains(&expected), "{expected} missing from {found:?}");
        }
    }
}
