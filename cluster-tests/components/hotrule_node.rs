//! `hotrule serve` as a real process for the data-plane tests: a configuration file with scrape
//! jobs and a remote-write export, a rules directory of the test's choosing, the admin port for
//! rules, queries and `/metrics`, and the data listener for ingest.
//!
//! The names of the data plane's configuration keys, routes and answer fields that these tests
//! rely on are gathered here, each marked `ALIGN:`, so they are changed in one place if the
//! merged receivers, query and exporter chose other names.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hotrule::api::client::{AdminClient, with_query};

use super::{Proc, ScrapeJob, start_on_free_port};

/// ALIGN: the scrape-job and export sections of the node configuration, as the ingest and
/// export helpers' branches read them on 2026-11-25 (`ingest.scrape_jobs[]` with `job_name`,
/// `interval`, `timeout`, `static_config.targets/labels`; `export.remote_write` with `url`,
/// `batch_size`, `flush_interval`, `close_after`). Scrapes and export flushes every second; a
/// minute is exported 1 s after it ends.
pub fn node_config(scrape: &[ScrapeJob], export_url: Option<&str>) -> String {
    let mut out = String::new();
    if !scrape.is_empty() {
        out.push_str("ingest:\n  scrape_jobs:\n");
        for job in scrape {
            out.push_str(&format!("    - job_name: {}\n      interval: 1s\n      timeout: 1s\n", quoted(&job.job_name)));
            out.push_str("      static_config:\n        targets: [");
            out.push_str(&job.targets.iter().map(|t| quoted(t)).collect::<Vec<_>>().join(", "));
            out.push_str("]\n");
            if !job.labels.is_empty() {
                out.push_str("        labels:\n");
                for (name, value) in &job.labels {
                    out.push_str(&format!("          {name}: {}\n", quoted(value)));
                }
            }
        }
    }
    if let Some(url) = export_url {
        out.push_str(&format!("export:\n  remote_write:\n    url: {}\n    batch_size: 1000\n    flush_interval: 1s\n    close_after: 1s\n", quoted(url)));
    }
    out
}

fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// ALIGN: the family `/metrics` counts suspended drops in (from `src/telemetry.rs`:
/// `samples_dropped`, labels `rule` and `reason`).
pub const DROPPED_FAMILY: &str = "hotrule_samples_dropped_total";

/// A `hotrule serve` process.
pub struct HotruleNode {
    pub proc: Proc,
    pub client: AdminClient,
    pub data_dir: PathBuf,
}

impl HotruleNode {
    /// Starts a node in `dir` with `rules_dir` as its bundled rules and `config` (YAML; empty:
    /// none), waits for `/readyz` and for the data listener's address in its log.
    pub async fn start(dir: &Path, rules_dir: &Path, config: &str, env: &[(&str, &str)]) -> HotruleNode {
        std::fs::create_dir_all(dir).expect("node dir");
        std::fs::create_dir_all(rules_dir).expect("rules dir");
        let data_dir = dir.join("data");
        let config_file = dir.join("node.yaml");
        std::fs::write(&config_file, config).expect("write node.yaml");
        let mut fixed = vec![
            "serve".to_string(),
            "--data-dir".to_string(),
            data_dir.display().to_string(),
            "--data-listen".to_string(),
            "127.0.0.1:0".to_string(),
            "--grpc-listen".to_string(),
            "127.0.0.1:0".to_string(),
            "--rules-dir".to_string(),
            rules_dir.display().to_string(),
        ];
        if !config.trim().is_empty() {
            fixed.push("--config".to_string());
            fixed.push(format!("file:{}", config_file.display()));
        }
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let proc = start_on_free_port(
            "hotrule",
            env!("CARGO_BIN_EXE_hotrule"),
            &dir.join("hotrule.log"),
            |port| {
                let mut args = fixed.clone();
                args.push("--admin-listen".to_string());
                args.push(format!("127.0.0.1:{port}"));
                args
            },
            &env,
            |client| async move { client.get("/readyz").await.is_ok_and(|r| r.status.is_success()) },
        )
        .await;
        let client = AdminClient::new(&proc.addr.to_string(), None).expect("client").with_timeout(Duration::from_secs(60));
        let node = HotruleNode { proc, client, data_dir };
        crate::harness::wait_until(Duration::from_secs(10), "the data listener's address in the node's log", || {
            let found = node.data_addr().is_some();
            async move { found }
        })
        .await;
        node
    }

    pub fn admin_url(&self) -> String {
        self.proc.url()
    }

    /// The data listener (ingest, agents), from the line the node prints at start.
    pub fn data_addr(&self) -> Option<SocketAddr> {
        let log = self.proc.log_text();
        let line = log.lines().find(|l| l.starts_with("hotrule agent config server on "))?;
        line.rsplit(' ').next()?.trim_start_matches("http://").parse().ok()
    }

    /// The dedicated gRPC port (SkyWalking's agents), from the line the node prints at start.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        let log = self.proc.log_text();
        let line = log.lines().find_map(|l| l.strip_prefix("hotrule SkyWalking agent gRPC on "))?;
        line.split(' ').next()?.parse().ok()
    }

    pub fn data_url(&self) -> String {
        format!("http://{}", self.data_addr().expect("data listener address"))
    }

    /// ALIGN: remote-write on the data listener, `POST /api/v1/write`.
    pub fn remote_write_url(&self) -> String {
        format!("{}/api/v1/write", self.data_url())
    }

    /// ALIGN: OTLP/HTTP metrics on the data listener; the Python exporter appends nothing when
    /// given the full URL.
    pub fn otlp_metrics_url(&self) -> String {
        format!("{}/v1/metrics", self.data_url())
    }

    /// `POST /runtime/rule/addOrUpdate` (and friends) with query pairs and a body.
    pub async fn post(&self, route: &str, pairs: &[(&str, &str)], body: &str) -> (u16, serde_json::Value, String) {
        let reply = self.client.post(&with_query(route, pairs), body.as_bytes().to_vec()).await.expect("admin post");
        (reply.status.as_u16(), reply.json().unwrap_or_default(), reply.text())
    }

    /// `GET /metrics` (hotrule's own metrics), as text.
    pub async fn own_metrics(&self) -> String {
        let reply = self.client.get("/metrics").await.expect("GET /metrics");
        assert!(reply.status.is_success(), "GET /metrics: {} {}", reply.status, reply.text());
        reply.text()
    }

    /// ALIGN: `GET /query/metrics?name=&service=&start=&end=&step=MINUTE` (issue 13). `start` and
    /// `end` are sent as epoch milliseconds. Returns the points of every series in the answer.
    pub async fn query_points(&self, metric: &str, service: &str, start_ms: i64, end_ms: i64) -> Option<Vec<QueryPoint>> {
        let (start, end) = (start_ms.to_string(), end_ms.to_string());
        let path = with_query(
            "/query/metrics",
            &[("name", metric), ("service", service), ("start", &start), ("end", &end), ("step", "MINUTE")],
        );
        let reply = self.client.get(&path).await.ok()?;
        if !reply.status.is_success() {
            return None;
        }
        Some(query_points_of(&reply.json()?))
    }
}

/// One point of a `/query/metrics` answer.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryPoint {
    /// The bucket's start, epoch milliseconds.
    pub start_ms: i64,
    /// A single value; `None` for labeled and histogram values (see `raw`).
    pub value: Option<f64>,
    pub raw: serde_json::Value,
}

/// ALIGN: the JSON shape of `/query/metrics` (the query helper's branch on 2026-11-25:
/// `{"series": [{"entity", "points": [{"bucket", "time", "value"}]}]}`). Read tolerantly: every
/// object in an array named `points` (or `values`) anywhere in the answer is a point; its time
/// is `time` / `startMs` / `start_ms` (ms), or `bucket` (`yyyyMMddHHmm`, UTC); its value is
/// `value`.
pub fn query_points_of(json: &serde_json::Value) -> Vec<QueryPoint> {
    let mut out = Vec::new();
    collect_points(json, &mut out);
    out.sort_by_key(|p| p.start_ms);
    out
}

fn collect_points(json: &serde_json::Value, out: &mut Vec<QueryPoint>) {
    match json {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                if matches!(key.as_str(), "points" | "values")
                    && let Some(items) = value.as_array()
                {
                    out.extend(items.iter().filter_map(point_of));
                } else {
                    collect_points(value, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| collect_points(item, out)),
        _ => {}
    }
}

fn point_of(item: &serde_json::Value) -> Option<QueryPoint> {
    let start_ms = ["time", "startMs", "start_ms"]
        .iter()
        .find_map(|k| item[*k].as_i64())
        .or_else(|| item["bucket"].as_i64().and_then(minute_bucket_start_ms))?;
    let raw = item["value"].clone();
    Some(QueryPoint { start_ms, value: raw.as_f64(), raw })
}

/// `yyyyMMddHHmm` (UTC) as epoch milliseconds.
pub fn minute_bucket_start_ms(bucket: i64) -> Option<i64> {
    let (minute, hour, day, month, year) =
        (bucket % 100, bucket / 100 % 100, bucket / 10_000 % 100, bucket / 1_000_000 % 100, bucket / 100_000_000);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minute_buckets_convert_to_epoch_millis() {
        assert_eq!(minute_bucket_start_ms(197_001_010_000_i64), Some(0));
        assert_eq!(minute_bucket_start_ms(202_611_251_146_i64), Some(1_795_607_160_000));
        assert_eq!(minute_bucket_start_ms(202_613_011_146_i64), None);
    }

    #[test]
    fn points_are_found_wherever_the_answer_nests_them() {
        let answer = serde_json::json!({"metric": "m", "series": [
            {"entity": {"service": "s"}, "points": [{"bucket": 202_611_251_147_i64, "value": 2}, {"startMs": 1_795_607_160_000_i64, "value": 1}]}]});
        let points = query_points_of(&answer);
        assert_eq!(points.iter().map(|p| p.value).collect::<Vec<_>>(), vec![Some(1.0), Some(2.0)]);
        assert_eq!(points[1].start_ms - points[0].start_ms, 60_000);
    }
}
