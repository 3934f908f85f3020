//! `hotrule bench logs`: the embedded log store, without HTTP or LAL.
//!
//! 1. Writes: `--logs` kept logs spread evenly over the last hour (20 services, nginx-like
//!    content, two tags each), `--batch` logs per synced write call: the first half by one
//!    writer, the second half by `--writers` concurrent writers. Plus a rare service with 20 logs
//!    in the hour.
//! 2. Reads over that hour, each repeated `--queries` times, p50/p99 wall and CPU: the newest
//!    100 logs; the newest 100 of one service (1 in 20); the rare service (all 20: the read
//!    scans the whole hour, the case a service index would serve); a keyword and a tag.
//!
//! On RocksDB (the `rocksdb` feature, `--dir`), or with `--in-memory` on the in-memory twin of
//! the key space (any build; measures the store's own CPU, not the disk).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hotrule_lal_engine::{ContentType, LogRecord};

use super::store::{engine, load_average, percentile, thread_cpu_time};
use crate::data::logs::records::LogStore;
use crate::data::logs::{KeptLog, LogFilter, LogOrder, LogReader, LogWriter};
use crate::store::kv::{KvEngine, MemKv};
use crate::base::self_metrics::SelfMetrics;

/// What `bench logs` runs.
#[derive(Debug, Clone)]
pub struct LogsBench {
    pub logs: usize,
    pub batch: usize,
    pub writers: usize,
    pub queries: usize,
    pub in_memory: bool,
}

const SERVICES: usize = 20;
const HOUR_MS: i64 = 3_600_000;

fn kept(index: usize, timestamp_ms: i64, service: &str) -> KeptLog {
    let status = [200, 200, 200, 304, 404, 500][index % 6];
    KeptLog {
        rule: "NGINX:nginx".into(),
        file: "lal/nginx".into(),
        record: LogRecord {
            service: service.to_string(),
            instance: format!("{service}-{}", index % 3),
            endpoint: String::new(),
            layer: "NGINX".into(),
            timestamp_ms,
            trace_id: String::new(),
            segment_id: String::new(),
            span_id: None,
            content_type: ContentType::Text,
            content: format!(
                "10.0.{}.{} - - [25/Nov/2026:12:00:00 +0000] \"GET /api/v1/items/{index} HTTP/1.1\" {status} {} \"-\" \"curl/8.5.0\"",
                index % 256,
                (index / 256) % 256,
                100 + index % 5000
            ),
            tags: vec![("status".into(), status.to_string()), ("level".into(), if status >= 500 { "ERROR" } else { "INFO" }.into())],
            output_type: None,
            fields: Default::default(),
        },
        received_ms: timestamp_ms,
    }
}

/// Writes `logs` in calls of `batch` with `writers` threads; logs/s.
fn write_phase(store: &Arc<LogStore>, logs: &[KeptLog], batch: usize, writers: usize) -> Result<f64, String> {
    let start = Instant::now();
    let chunks: Vec<&[KeptLog]> = logs.chunks(batch).collect();
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let store = store.clone();
                let chunks = &chunks;
                scope.spawn(move || {
                    for chunk in chunks.iter().skip(w).step_by(writers) {
                        store.write(chunk).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a writer panicked".to_string()))).collect()
    });
    for result in results {
        result?;
    }
    Ok(logs.len() as f64 / start.elapsed().as_secs_f64())
}

fn query_phase(store: &LogStore, what: &str, filter: &LogFilter, queries: usize) -> Result<(), String> {
    let mut wall = Vec::with_capacity(queries);
    let mut cpu = Vec::with_capacity(queries);
    let mut found = 0;
    for _ in 0..queries {
        let (begin, begin_cpu) = (Instant::now(), thread_cpu_time());
        found = store.query(filter).map_err(|e| e.to_string())?.len();
        cpu.push(thread_cpu_time().saturating_sub(begin_cpu));
        wall.push(begin.elapsed());
    }
    wall.sort();
    cpu.sort();
    println!(
        "query one hour, {what}: p50 {:.2?}, p99 {:.2?} wall; p50 {:.2?}, p99 {:.2?} CPU ({found} logs)",
        percentile(&wall, 0.5),
        percentile(&wall, 0.99),
        percentile(&cpu, 0.5),
        percentile(&cpu, 0.99)
    );
    Ok(())
}

pub fn run(dir: &Path, bench: &LogsBench) -> Result<(), String> {
    if bench.logs < 2 || bench.batch == 0 || bench.writers == 0 || bench.queries == 0 {
        return Err("--logs must be at least 2; --batch, --writers and --queries at least 1".into());
    }
    let path = dir.join("logs-db");
    let engine: Arc<dyn KvEngine> = if bench.in_memory {
        Arc::new(MemKv::new())
    } else {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        engine(&path)?
    };
    let store = Arc::new(
        LogStore::open(engine.logs(), crate::data::logs::records::DEFAULT_RETENTION, Arc::new(SelfMetrics::new())).map_err(|e| e.to_string())?,
    );
    let end_ms = crate::base::clock::now_ms() as i64;
    let start_ms = end_ms - HOUR_MS;
    let step = HOUR_MS as f64 / bench.logs as f64;
    let services: Vec<String> = (0..SERVICES).map(|s| format!("service-{s:02}")).collect();
    let mut logs: Vec<KeptLog> =
        (0..bench.logs).map(|i| kept(i, start_ms + (i as f64 * step) as i64, &services[i % SERVICES])).collect();
    for r in 0..20 {
        let at = r * bench.logs / 20;
        logs.insert(at + r, kept(r, start_ms + (at as f64 * step) as i64, "rare"));
    }
    println!(
        "log store on {}: {} logs over one hour, {} services, {} logs per synced write call",
        if bench.in_memory { "the in-memory twin" } else { "RocksDB" },
        logs.len(),
        SERVICES + 1,
        bench.batch
    );
    println!("load average before: {}", load_average());
    let half = logs.len() / 2;
    let one = write_phase(&store, &logs[..half], bench.batch, 1)?;
    println!("write, 1 writer:  {one:.0} logs/s");
    let many = write_phase(&store, &logs[half..], bench.batch, bench.writers)?;
    println!("write, {} writers: {many:.0} logs/s", bench.writers);

    let hour = LogFilter { start_ms, end_ms, limit: 100, order: LogOrder::NewestFirst, ..LogFilter::default() };
    query_phase(&store, "newest 100", &hour, bench.queries)?;
    query_phase(&store, "newest 100 of one service in 20", &LogFilter { service: Some(services[7].clone()), ..hour.clone() }, bench.queries)?;
    query_phase(&store, "a rare service (20 logs in the hour)", &LogFilter { service: Some("rare".into()), ..hour.clone() }, bench.queries.div_ceil(10))?;
    let error_tag = LogFilter { tags: vec![("level".into(), "ERROR".into())], keyword: Some("/items/1".into()), ..hour.clone() };
    query_phase(&store, "newest 100 with a tag and a keyword", &error_tag, bench.queries)?;
    query_phase(&store, "oldest 100", &LogFilter { order: LogOrder::OldestFirst, ..hour }, bench.queries)?;
    println!("load average after: {}", load_average());
    drop(store);
    drop(engine);
    if !bench.in_memory {
        let _ = std::fs::remove_dir_all(&path);
    }
    Ok(())
}
