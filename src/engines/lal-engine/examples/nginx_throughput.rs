//! Log lines per second on one core through `lal/nginx.yaml` (parse, extract, sink, metrics):
//! `cargo run --release -p hotrule-lal-engine --example nginx_throughput [lines]`.

use std::time::Instant;

use hotrule_lal_engine::bench::drive;
use hotrule_lal_engine::{Body, LogData, PreparedLalFile};
use hotrule_rule_compiler::{Compiled, DslKind, compile_bundled};

const NGINX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../config/rules/lal/nginx.yaml"
);

fn log(kind: &str, body: String, i: usize) -> LogData {
    LogData {
        timestamp_ms: 1_609_459_200_000 + i as i64,
        service: "nginx::frontend".into(),
        service_instance: format!("nginx-{}", i % 4),
        layer: "NGINX".into(),
        body: Body::Text(body),
        tags: vec![("LOG_KIND".into(), kind.into())],
        ..LogData::default()
    }
}

fn main() {
    let lines: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000_000);
    let source = std::fs::read(NGINX).expect("read lal/nginx.yaml");
    let Ok(Compiled::Lal(file)) = compile_bundled(DslKind::Lal, &source) else {
        panic!("lal/nginx.yaml does not compile");
    };
    let file = PreparedLalFile::new(file);
    // Nine access lines to one error line, with varied paths and statuses.
    let mut logs = Vec::new();
    for i in 0..100 {
        if i % 10 == 9 {
            logs.push(log(
                "NGINX_ERROR_LOG",
                format!("2021/01/01 00:00:{:02} [error] 12#12: *{i} connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.0.{i}", i % 60),
                i,
            ));
        } else {
            logs.push(log(
                "NGINX_ACCESS_LOG",
                format!(
                    "10.0.0.{i} - - [01/Jan/2021:00:00:{:02} +0000] \"GET /api/v1/orders/{i}?page=2 HTTP/1.1\" {} 5123 \"-\" \"Mozilla/5.0 (X11; Linux x86_64)\"",
                    i % 60,
                    [200, 200, 201, 304, 404, 500][i % 6]
                ),
                i,
            ));
        }
    }
    // Warm up, then measure. The machine may be shared: the CPU time this process got
    // (from /proc/self/stat) gives the per-core rate; wall time is shown too.
    drive(&file, &logs, lines / 10);
    let cpu_before = cpu_seconds();
    let start = Instant::now();
    let result = drive(&file, &logs, lines);
    let wall = start.elapsed().as_secs_f64().max(f64::MIN_POSITIVE);
    let cpu = cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    assert_eq!(result.errors, 0, "rules failed: {result:?}");
    println!(
        "lal/nginx.yaml: {} lines in {:.3} s wall = {:.0} lines/s ({} kept, {} samples)",
        result.lines,
        wall,
        result.lines as f64 / wall,
        result.kept,
        result.samples
    );
    if let Some(cpu) = cpu.filter(|c| *c > 0.0) {
        println!(
            "  {:.3} s of CPU = {:.0} lines/s/core",
            cpu,
            result.lines as f64 / cpu
        );
    }
}

/// utime + stime of this process in seconds (Linux; clock ticks assumed 100/s).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}
