//! The real OpenTelemetry Python log exporter against `POST /v1/logs` (skipped, saying why,
//! when no Python with the SDK and the OTLP/HTTP exporter is found: `HOTRULE_OTLP_PYTHON`, the
//! venv `HOTRULE_OTLP_VENV` or `~/.cache/hotrule-otlp-venv`, then `python3`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::data::seam::{LogProtocol, LogSink};
use super::http::serve;
use crate::data::ingest::{BodyLimits, Ingest, RecordingLogSink, RecordingSink};
use crate::base::self_metrics::SelfMetrics;
use hotrule_lal_engine::Body;

const MODULES: &str = "import opentelemetry.sdk._logs, opentelemetry.exporter.otlp.proto.http._log_exporter";

fn python() -> Option<PathBuf> {
    let venv = std::env::var_os("HOTRULE_OTLP_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/hotrule-otlp-venv")));
    let candidates = [std::env::var_os("HOTRULE_OTLP_PYTHON").map(PathBuf::from), venv.map(|v| v.join("bin/python")), Some("python3".into())];
    candidates.into_iter().flatten().find(|python| {
        std::process::Command::new(python)
            .args(["-c", MODULES])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[tokio::test]
async fn the_python_otlp_log_exporter_is_taken_and_mapped() {
    let Some(python) = python() else {
        crate::base::skips::skip(
            "the_python_otlp_log_exporter_is_taken_and_mapped",
            "no Python with opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http (python3 -m venv ~/.cache/hotrule-otlp-venv && \
             ~/.cache/hotrule-otlp-venv/bin/pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http)",
        );
        return;
    };
    let sink = Arc::new(RecordingLogSink::new());
    let limits = BodyLimits { max_body_bytes: 1 << 20, max_decompressed_bytes: 1 << 22 };
    let ingest = Ingest::with_logs(Arc::new(RecordingSink::new()), Some(sink.clone() as Arc<dyn LogSink>), Arc::new(SelfMetrics::new()), limits);
    let addr = serve(ingest).await;

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster-tests/fixtures/otlp_logs_send.py");
    let mut command = tokio::process::Command::new(&python);
    command.arg(&script).args([format!("http://{addr}/v1/logs"), "py-logs".to_owned()]).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), command.output()).await.expect("the exporter finishes within 60 s").expect("runs");
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the exporter reports success: {output}");

    assert_eq!(sink.wait_for_submissions(1, Duration::from_secs(5)).await, 1, "{output}");
    let batches = sink.batches();
    assert_eq!(batches.len(), 1, "one ResourceLogs, one batch");
    assert_eq!(batches[0].protocol, LogProtocol::Otlp);
    let logs = &batches[0].logs;
    assert_eq!(logs.len(), 2);
    let first = &logs[0];
    assert_eq!((first.service.as_str(), first.service_instance.as_str(), first.layer.as_str()), ("py-logs", "py-1", "GENERAL"));
    assert_eq!(first.timestamp_ms, 1_700_000_000_123);
    assert_eq!(first.body, Body::Text("GET /pay 200".into()));
    let mut tags = first.tags.clone();
    tags.sort();
    let expected: Vec<(String, String)> = [
        ("http.status_code", "200"),
        ("level", "INFO"),
        ("list", "values {\n  string_value: \"a\"\n}\nvalues {\n  string_value: \"b\"\n}\n"),
        ("ok", "true"),
        ("ratio", "0.5"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    assert_eq!(tags, expected);
    assert_eq!(first.source_attributes.get("telemetry.sdk.language").map(String::as_str), Some("python"));
    assert_eq!(first.source_attributes.get("service.name").map(String::as_str), Some("py-logs"));
    assert_eq!((logs[1].timestamp_ms, &logs[1].body), (1_700_000_001_000, &Body::Text(String::new())), "a kvlist body is empty text");
}
