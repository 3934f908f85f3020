//! The inputs and expected values the data-plane tests share: the VM job's labels, the
//! structural change of vm.yaml, the reshaped file that claims a freed name, and the OTLP
//! fixture's rule and expected values.

/// The job name vm.yaml's filter reads (`tags.job_name == 'vm-monitoring'`).
pub const VM_JOB: &str = "vm-monitoring";
/// The service (vm.yaml's scope key `node_identifier_host_name`) of the samples a hotrule scrape
/// job reads.
pub const VIA_SCRAPE: &str = "via-scrape";
/// The service of the samples Prometheus scrapes and remote-writes to hotrule.
pub const VIA_PROMETHEUS: &str = "via-prometheus";

/// The target label that makes node_exporter samples what vm.yaml expects: the scope key
/// `node_identifier_host_name`, which SkyWalking's OpenTelemetry collector configuration adds.
/// (`job_name` comes from the `job` label, as the collector's `service.name` does.)
pub fn vm_labels(host: &str) -> Vec<(String, String)> {
    vec![("node_identifier_host_name".to_string(), host.to_string())]
}

const MEMORY_TOTAL: &str = "  - name: memory_total\n    exp: node_memory_MemTotal_bytes\n";

/// vm.yaml with `memory_total` multiplied by 3 and one metric added
/// (`meter_vm_memory_total_e2e_marker`, the plain total): a STRUCTURAL change (the metric set
/// changed), whose new values are told apart from the old rule's by the factor.
pub fn vm_yaml_tripled(vm_yaml: &str) -> String {
    assert!(vm_yaml.contains(MEMORY_TOTAL), "vm.yaml no longer has the memory_total rule this test changes");
    vm_yaml.replace(
        MEMORY_TOTAL,
        "  - name: memory_total\n    exp: node_memory_MemTotal_bytes * 3\n  - name: memory_total_e2e_marker\n    exp: node_memory_MemTotal_bytes\n",
    )
}

/// A file that claims `meter_vm_memory_total` with another scope (service instance): refused
/// while vm.yaml holds the name (even inactive), accepted once vm.yaml is deleted.
pub const VM_RESHAPED: &str = "\
filter: \"{ tags -> tags.job_name == 'vm-monitoring' }\"
expSuffix: instance(['node_identifier_host_name'], ['node_identifier_host_name'], Layer.OS_LINUX)
metricPrefix: meter_vm
metricsRules:
  - name: memory_total
    exp: node_memory_MemTotal_bytes
";

/// The resource `service.name` the OTLP fixture sends (`job_name` and `service_name` by
/// SkyWalking's mapping; the rule's filter and scope read them).
pub const OTLP_SERVICE: &str = "e2e-otlp";

/// `cluster-tests/fixtures/otel-rules/e2e-otlp.yaml`.
pub fn otlp_rule() -> String {
    let path = super::fixture("otel-rules/e2e-otlp.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What `otlp_send.py` sends, as the MAL samples SkyWalking's OpenTelemetry receiver makes of
/// it (reference §2.1: `.` → `_` in names and keys, `service.name` → `job_name`, histogram
/// buckets under the base name with `le` = Java's `Double.toString`, last bucket `Infinity`).
pub fn otlp_as_exposition() -> String {
    let resource = format!(
        "service_name=\"{OTLP_SERVICE}\",job_name=\"{OTLP_SERVICE}\",host_name=\"e2e-otlp-host\",node_identifier_host_name=\"e2e-otlp-host\""
    );
    let mut out = format!("e2e_temperature{{room=\"a\",{resource}}} 42\ne2e_requests{{route=\"/a\",{resource}}} 12\n");
    out.push_str(&format!("e2e_latency_count{{{resource}}} 10\ne2e_latency_sum{{{resource}}} 0.735\n"));
    for (le, count) in [("0.005", 5), ("0.05", 3), ("0.5", 2), ("Infinity", 0)] {
        out.push_str(&format!("e2e_latency{{le=\"{le}\",{resource}}} {count}\n"));
    }
    out
}

/// The values the fixture rule computes from the fixture's export.
pub const OTLP_TEMPERATURE: f64 = 42.0;
pub const OTLP_REQUESTS: f64 = 12.0;
/// (bucket upper bound in ms, count); the `Infinity` bucket is `i64::MAX`.
pub const OTLP_LATENCY_BUCKETS: [(i64, i64); 4] = [(5, 5), (50, 3), (500, 2), (i64::MAX, 0)];
/// (rank, value): p50 of 10 samples is the 5 ms bucket, p90 the 500 ms one.
pub const OTLP_PERCENTILES: [(u32, f64); 2] = [(50, 5.0), (90, 500.0)];
