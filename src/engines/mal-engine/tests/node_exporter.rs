//! `otel-rules/vm.yaml` on two recorded node_exporter scrapes (`tests/data/node-exporter`, see its
//! README), with expected values computed by hand from the files: CPU, load, memory, filesystem,
//! disk, network and socket metrics.

mod common;

use std::sync::Arc;

use hotrule_mal_engine::{EngineState, MetricValue, Sample, ScopeType, Value, exposition};

const VM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../config/rules/otel-rules/vm.yaml"
);
const T1: i64 = 1_795_598_809_582;
const T2: i64 = 1_795_598_871_551;
const HOST: &str = "recorded-host";

/// The crate's exposition parser, plus the labels SkyWalking's OpenTelemetry collector config for
/// VM monitoring adds.
fn parse_prometheus(text: &str, timestamp_ms: i64) -> Vec<Sample> {
    let mut samples = exposition::parse(text, timestamp_ms, usize::MAX)
        .expect("valid exposition")
        .samples;
    for sample in &mut samples {
        let labels = Arc::make_mut(&mut sample.labels);
        labels.insert("job_name".to_owned(), "vm-monitoring".to_owned());
        labels.insert("node_identifier_host_name".to_owned(), HOST.to_owned());
    }
    samples
}

fn value_of<'v>(values: &'v [MetricValue], metric: &str) -> Option<&'v Value> {
    values.iter().find(|v| v.metric == metric).map(|v| &v.value)
}

#[test]
fn vm_yaml_on_recorded_node_exporter_scrapes() {
    let yaml = std::fs::read_to_string(VM).expect("vm.yaml");
    let file = common::prepare(&yaml);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/node-exporter");
    let first = parse_prometheus(
        &std::fs::read_to_string(format!("{dir}/scrape1.prom")).expect("scrape1"),
        T1,
    );
    let second = parse_prometheus(
        &std::fs::read_to_string(format!("{dir}/scrape2.prom")).expect("scrape2"),
        T2,
    );
    assert_eq!(first.len(), 507, "every series of the scrape");

    let mut state = EngineState::default();
    let warm = file.evaluate(&first, T1, &mut state);
    assert!(warm.errors.is_empty(), "{:?}", warm.errors);
    // The first scrape: counters have no history yet, so rates are 0 (and emitted).
    assert_eq!(
        value_of(&warm.values, "meter_vm_cpu_total_percentage"),
        Some(&Value::Single(0))
    );

    let out = file.evaluate(&second, T2, &mut state);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    for value in &out.values {
        assert_eq!(value.entity.scope, ScopeType::Service);
        assert_eq!(value.entity.service_name, HOST);
        assert_eq!(value.entity.layer, "OS_LINUX");
        assert_eq!(value.time_bucket, 202_611_250_927, "2026-11-25T09:27:51Z");
    }
    let single = |metric: &str| match value_of(&out.values, metric) {
        Some(Value::Single(v)) => *v,
        other => panic!("{metric}: {other:?}"),
    };
    // CPU: non-idle seconds of both CPUs × 100, over the 61 whole seconds between the scrapes
    // (upstream divides by the elapsed whole seconds, not the window): 12387.0 / 61 = 203.07.
    assert_eq!(single("meter_vm_cpu_total_percentage"), 203);
    // Per mode (a labeled metric); entry order follows the samples, so compare sorted.
    let Some(Value::Labeled(per_mode)) = value_of(&out.values, "meter_vm_cpu_average_used") else {
        panic!("cpu_average_used is labeled");
    };
    let mut per_mode = per_mode.clone();
    per_mode.sort();
    let expected: Vec<(String, i64)> = [
        ("idle", 0),
        ("iowait", 0),
        ("irq", 0),
        ("nice", 94),
        ("softirq", 1),
        ("steal", 1),
        ("system", 25),
        ("user", 83),
    ]
    .into_iter()
    .map(|(mode, value)| (format!("mode={mode}"), value))
    .collect();
    assert_eq!(per_mode, expected, "cpu_average_used");
    assert_eq!(single("meter_vm_cpu_load1"), 650);
    assert_eq!(single("meter_vm_cpu_load5"), 829);
    assert_eq!(single("meter_vm_cpu_load15"), 804);
    // Memory.
    assert_eq!(single("meter_vm_memory_total"), 25_276_510_208);
    assert_eq!(single("meter_vm_memory_available"), 22_207_012_864);
    assert_eq!(single("meter_vm_memory_used"), 3_069_497_344);
    assert_eq!(single("meter_vm_memory_buff_cache"), 21_205_168_128);
    assert_eq!(single("meter_vm_memory_swap_free"), 0);
    assert_eq!(single("meter_vm_memory_swap_total"), 0);
    // No swap: 100 − (0 × 100 / 0) is NaN, which SkyWalking drops: nothing is emitted.
    assert_eq!(
        value_of(&out.values, "meter_vm_memory_swap_percentage"),
        None
    );
    // Filesystem: 100 − avail × 100 / size for '/' = 77.02.
    assert_eq!(
        value_of(&out.values, "meter_vm_filesystem_percentage"),
        Some(&Value::Labeled(vec![("mountpoint=/".to_owned(), 77)]))
    );
    // Disk and network byte rates over 61 s.
    assert_eq!(single("meter_vm_disk_read"), 3_740_387);
    assert_eq!(single("meter_vm_disk_written"), 56_745_178);
    assert_eq!(single("meter_vm_network_receive"), 0);
    assert_eq!(single("meter_vm_network_transmit"), 0);
    // Sockets and file descriptors.
    assert_eq!(single("meter_vm_tcp_curr_estab"), 14);
    assert_eq!(single("meter_vm_tcp_tw"), 224);
    assert_eq!(single("meter_vm_tcp_alloc"), 22);
    assert_eq!(single("meter_vm_sockets_used"), 48);
    assert_eq!(single("meter_vm_udp_inuse"), 0);
    assert_eq!(single("meter_vm_filefd_allocated"), 1291);
}
