//! hotrule's own metrics, served as Prometheus exposition on the admin port (`GET /metrics`).
//!
//! One [`SelfMetrics`] per node holds every family; modules get it through their constructors and
//! only increment. Gauges that mirror state held elsewhere (rules by state, agents connected) are
//! refreshed by the `/metrics` handler just before it renders. Every name is listed in
//! `docs/metrics.md`.

use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A label set: `(name, value)` pairs in a fixed order per family.
pub type LabelSet = Vec<(String, String)>;
pub type CounterFamily = Family<LabelSet, Counter>;
pub type GaugeFamily = Family<LabelSet, Gauge>;
pub type HistogramFamily = Family<LabelSet, Histogram, fn() -> Histogram>;

/// Latency buckets from 50 µs to about 1.6 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// Duration buckets from 1 ms to about 65 s (scans, exports).
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Builds a label set from `(name, value)` pairs.
pub fn labels<const N: usize>(pairs: [(&str, &str); N]) -> LabelSet {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Every family hotrule exports.
pub struct SelfMetrics {
    registry: Mutex<Registry>,
    /// Samples received, by `protocol` (counted once decoded, before dispatch).
    pub samples_received: CounterFamily,
    /// Samples or requests refused at a receiver, by `protocol` and `reason` (decode, too_large,
    /// invalid_sample, queue_full, stale, ...).
    pub samples_rejected: CounterFamily,
    /// Samples dispatch did not evaluate, by `rule` and `reason` (suspended, ...).
    pub samples_dropped: CounterFamily,
    /// Time to evaluate one batch against one file, by `rule`.
    pub evaluation_seconds: HistogramFamily,
    /// Evaluation errors, by `rule`.
    pub evaluation_errors: CounterFamily,
    /// Batches queued in dispatch or being evaluated, by `queue` (metrics, logs), refreshed at
    /// render; 0 for both when dispatch is idle.
    pub dispatch_pending_batches: GaugeFamily,
    /// Metric values written to storage, by `metric`.
    pub values_stored: CounterFamily,
    /// Metric values not stored, by `reason` (unregistered_measure, storage_error, expired, ...).
    pub values_rejected: CounterFamily,
    /// Rule files by `state` (RUNNING, SUSPENDED, NOT_LOADED), refreshed at render.
    pub rules: GaugeFamily,
    /// Rule writes answered, by `status` (the applyStatus).
    pub rule_writes: CounterFamily,
    /// History records removed by retention since the node started (refreshed at render from
    /// the store, which counts them).
    pub history_compacted: GaugeFamily,
    /// Scan durations, and scan results by `result`.
    pub scan_seconds: HistogramFamily,
    pub scan_results: CounterFamily,
    /// Bus calls and bus errors, by `message`.
    pub bus_calls: CounterFamily,
    pub bus_errors: CounterFamily,
    /// Agents connected (online), refreshed at render.
    pub agents_connected: GaugeFamily,
    /// Remote-write export: samples sent, batches dropped by `reason`, queue depth, send time.
    pub export_samples_sent: CounterFamily,
    pub export_batches_dropped: CounterFamily,
    pub export_queue_depth: GaugeFamily,
    pub export_send_seconds: HistogramFamily,
    pub handoff_cells: CounterFamily,
    pub handoff_outbox: GaugeFamily,
    pub handoff_send_seconds: HistogramFamily,
    pub handoff_send_errors: CounterFamily,
    pub handoff_records_taken_back: CounterFamily,
    /// Written values whose minute the exporter did not mark for export, by `reason`
    /// (`pending_full`: no room; `late`: the minute was already exported).
    pub export_series_dropped: CounterFamily,
    /// Scrapes, by `job` and `result` (ok, error, timeout, queue_full).
    pub scrapes: CounterFamily,
    /// Whether this node scrapes a target (1) or another live node owns it (0), by `job` and
    /// `target`, as decided at the target's last due time.
    pub scrape_target_owned: GaugeFamily,
    /// Logs received, by `protocol` (otlp, skywalking, skywalking_grpc), counted once decoded.
    pub logs_received: CounterFamily,
    /// Calls of SkyWalking's native gRPC protocol, by `service`, `method` and `code` (the gRPC
    /// status: ok, invalid_argument, permission_denied, resource_exhausted, unavailable, ...).
    pub grpc_calls: CounterFamily,
    /// Logs or log requests refused at a receiver, by `protocol` and `reason`.
    pub logs_rejected: CounterFamily,
    /// What LAL rules did with logs, by `rule` and `outcome` (kept, sampled, dropped, aborted,
    /// failed, no_sink, no_layer) and logs a rule never ran on, by `rule` and `outcome=suspended`.
    pub logs_by_rule: CounterFamily,
    /// Kept logs written to log storage, and log writes that failed, by `result`.
    pub logs_stored: CounterFamily,
    /// Log blocks written, by `source` (`flush`: pending logs; `migration`: the first format).
    pub log_blocks_written: CounterFamily,
    /// Bytes of kept logs durable in pending groups and not yet in blocks.
    pub log_pending_bytes: GaugeFamily,
    /// OTLP log export: logs sent, batches dropped by `reason`, queue depth.
    pub export_logs_sent: CounterFamily,
    pub export_log_batches_dropped: CounterFamily,
    pub export_log_queue_depth: GaugeFamily,
    /// Alarm notifications delivered (one POST answered 2xx), by `hook` and `kind` (firing,
    /// recovery).
    pub alarm_hook_sent: CounterFamily,
    /// Failed alarm hook attempts, by `hook` and `reason` (timeout, status_4xx, status_5xx,
    /// status_other, unreachable), and deliveries pushed out of a full queue (`queue_full`).
    pub alarm_hook_failures: CounterFamily,
    /// Alarm notifications that will never be delivered, by `hook` and `reason` (gave_up,
    /// refused, queue_full, unknown_hook, encode, shutdown).
    pub alarm_hook_dropped: CounterFamily,
    /// Alarm deliveries waiting (the one being tried included), by `hook`.
    pub alarm_hook_queue: GaugeFamily,
    /// `POST /graphql` answers, by `outcome`: ok, field_error (data with errors), document_error
    /// (a request refused whole: malformed, invalid against the schema).
    pub graphql_requests: CounterFamily,
    /// Time to answer one `POST /graphql`.
    pub graphql_seconds: HistogramFamily,
}

impl Default for SelfMetrics {
    fn default() -> Self {
        SelfMetrics::new()
    }
}

impl SelfMetrics {
    pub fn new() -> SelfMetrics {
        let mut registry = Registry::with_prefix("hotrule");
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let family = CounterFamily::default();
            registry.register(name, help, family.clone());
            family
        };
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let family = GaugeFamily::default();
            registry.register(name, help, family.clone());
            family
        };
        let histogram = |registry: &mut Registry, name: &str, help: &str, make: fn() -> Histogram| {
            let family = HistogramFamily::new_with_constructor(make);
            registry.register(name, help, family.clone());
            family
        };
        let r = &mut registry;
        SelfMetrics {
            samples_received: counter(r, "samples_received", "Samples received, by protocol"),
            samples_rejected: counter(r, "samples_rejected", "Samples refused at a receiver, by protocol and reason"),
            samples_dropped: counter(r, "samples_dropped", "Samples not evaluated, by rule and reason"),
            evaluation_seconds: histogram(r, "evaluation_seconds", "Time to evaluate one batch against one rule file", latency_histogram),
            evaluation_errors: counter(r, "evaluation_errors", "MAL/LAL evaluation errors, by rule"),
            dispatch_pending_batches: gauge(r, "dispatch_pending_batches", "Batches queued in dispatch or being evaluated, by queue (metrics, logs)"),
            values_stored: counter(r, "values_stored", "Metric values written to storage, by metric"),
            values_rejected: counter(r, "values_rejected", "Metric values not stored, by reason"),
            rules: gauge(r, "rules", "Rule files on this node, by state"),
            rule_writes: counter(r, "rule_writes", "Rule writes answered, by applyStatus"),
            history_compacted: gauge(r, "history_compacted", "History records removed by retention since the node started"),
            scan_seconds: histogram(r, "scan_seconds", "Duration of one rule scan", duration_histogram),
            scan_results: counter(r, "scan_results", "Rule scans, by result"),
            bus_calls: counter(r, "bus_calls", "Bus calls made, by message"),
            bus_errors: counter(r, "bus_errors", "Bus calls that failed, by message"),
            agents_connected: gauge(r, "agents_connected", "Agents online"),
            export_samples_sent: counter(r, "export_samples_sent", "Samples sent by the remote-write exporter"),
            export_batches_dropped: counter(r, "export_batches_dropped", "Export batches dropped, by reason"),
            export_queue_depth: gauge(r, "export_queue_depth", "Batches waiting in the export queue"),
            export_send_seconds: histogram(r, "export_send_seconds", "Time to send one export batch", duration_histogram),
            handoff_cells: counter(r, "handoff_cells", "Metric cells handed to their entity's owner (moved) or taken from peers (applied)"),
            handoff_outbox: gauge(r, "handoff_outbox_records", "Handoff records waiting for their owner"),
            handoff_send_seconds: histogram(r, "handoff_send_seconds", "Time to send one batch of handoff records to their owner", duration_histogram),
            handoff_send_errors: counter(r, "handoff_send_errors", "Handoff sends that failed, by result (failed, ambiguous)"),
            handoff_records_taken_back: counter(r, "handoff_records_taken_back", "Handoff records taken back because their owner left"),
            export_series_dropped: counter(r, "export_series_dropped", "Written values whose minute is not exported (again), by reason"),
            scrapes: counter(r, "scrapes", "Scrapes, by job and result"),
            scrape_target_owned: gauge(r, "scrape_target_owned", "Whether this node scrapes a target (1) or another node owns it (0), by job and target"),
            logs_received: counter(r, "logs_received", "Logs received, by protocol"),
            grpc_calls: counter(r, "grpc_calls", "SkyWalking native-protocol gRPC calls, by service, method and code"),
            logs_rejected: counter(r, "logs_rejected", "Logs refused at a receiver, by protocol and reason"),
            logs_by_rule: counter(r, "logs_by_rule", "What LAL rules did with logs, by rule and outcome"),
            logs_stored: counter(r, "logs_stored", "Kept logs written to log storage, by result"),
            log_blocks_written: counter(r, "log_blocks_written", "Log blocks written, by source (flush, migration)"),
            log_pending_bytes: gauge(r, "log_pending_bytes", "Bytes of stored logs not yet flushed into blocks"),
            export_logs_sent: counter(r, "export_logs_sent", "Logs sent by the OTLP log exporter"),
            export_log_batches_dropped: counter(r, "export_log_batches_dropped", "OTLP log export batches dropped, by reason"),
            export_log_queue_depth: gauge(r, "export_log_queue_depth", "Batches waiting in the OTLP log export queue"),
            alarm_hook_sent: counter(r, "alarm_hook_sent", "Alarm notifications delivered, by hook and kind"),
            alarm_hook_failures: counter(r, "alarm_hook_failures", "Failed alarm hook attempts and queue_full drops, by hook and reason"),
            alarm_hook_dropped: counter(r, "alarm_hook_dropped", "Alarm notifications never delivered, by hook and reason"),
            alarm_hook_queue: gauge(r, "alarm_hook_queue", "Alarm deliveries waiting, by hook"),
            graphql_requests: counter(r, "graphql_requests", "POST /graphql answers, by outcome (ok, field_error, document_error)"),
            graphql_seconds: histogram(r, "graphql_seconds", "Time to answer one POST /graphql", latency_histogram),
            registry: Mutex::new(registry),
        }
    }

    /// The exposition text (OpenMetrics, which Prometheus scrapes).
    pub fn render(&self) -> String {
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        // Writing into a String cannot fail.
        if let Err(e) = encode(&mut out, &registry) {
            tracing::error!(error = %e, "rendering metrics");
        }
        out
    }

    /// The current value of a counter (tests and `hotrule` status output).
    pub fn counter_value(family: &CounterFamily, labels: &LabelSet) -> u64 {
        family.get_or_create(labels).get()
    }
}

/// The content type of [`SelfMetrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_with_their_labels() {
        let telemetry = SelfMetrics::new();
        telemetry.samples_received.get_or_create(&labels([("protocol", "otlp")])).inc_by(3);
        telemetry.samples_dropped.get_or_create(&labels([("rule", "otel-rules/vm"), ("reason", "suspended")])).inc();
        let text = telemetry.render();
        assert!(text.contains("hotrule_samples_received_total{protocol=\"otlp\"} 3"), "{text}");
        assert!(text.contains("hotrule_samples_dropped_total{rule=\"otel-rules/vm\",reason=\"suspended\"} 1"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"));
        assert_eq!(SelfMetrics::counter_value(&telemetry.samples_received, &labels([("protocol", "otlp")])), 3);
    }
}
