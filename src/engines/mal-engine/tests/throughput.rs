//! A rough single-core throughput figure for `otel-rules/vm.yaml` on node_exporter-shaped batches
//! (one scrape of one host per batch). Ignored by default; run in release:
//! `cargo test --release -p hotrule-mal-engine --test throughput -- --ignored --nocapture`.

mod common;

use std::time::Instant;

use hotrule_mal_engine::{EngineState, Sample, labels};

const VM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../config/rules/otel-rules/vm.yaml"
);

fn scrape(host: &str, ts: i64, tick: f64) -> Vec<Sample> {
    let base = |extra: &[(&str, &str)]| {
        let mut l = labels([
            ("job_name", "vm-monitoring"),
            ("node_identifier_host_name", host),
        ]);
        for (k, v) in extra {
            std::sync::Arc::make_mut(&mut l).insert((*k).to_owned(), (*v).to_owned());
        }
        l
    };
    let mut out = Vec::new();
    for cpu in 0..8 {
        for mode in [
            "idle", "user", "system", "iowait", "irq", "softirq", "steal", "nice",
        ] {
            let cpu = cpu.to_string();
            out.push(Sample::new(
                "node_cpu_seconds_total",
                base(&[("cpu", &cpu), ("mode", mode)]),
                1000.0 + tick,
                ts,
            ));
        }
    }
    for mount in [
        "/", "/boot", "/home", "/var", "/tmp", "/srv", "/opt", "/data", "/run", "/mnt",
    ] {
        out.push(Sample::new(
            "node_filesystem_avail_bytes",
            base(&[("mountpoint", mount)]),
            4e9,
            ts,
        ));
        out.push(Sample::new(
            "node_filesystem_size_bytes",
            base(&[("mountpoint", mount)]),
            1e10,
            ts,
        ));
    }
    for device in ["sda", "sdb", "nvme0n1", "nvme1n1"] {
        out.push(Sample::new(
            "node_disk_read_bytes_total",
            base(&[("device", device)]),
            1e6 + tick,
            ts,
        ));
        out.push(Sample::new(
            "node_disk_written_bytes_total",
            base(&[("device", device)]),
            2e6 + tick,
            ts,
        ));
    }
    for device in ["lo", "eth0", "eth1", "docker0", "veth1"] {
        out.push(Sample::new(
            "node_network_receive_bytes_total",
            base(&[("device", device)]),
            1e7 + tick,
            ts,
        ));
        out.push(Sample::new(
            "node_network_transmit_bytes_total",
            base(&[("device", device)]),
            2e7 + tick,
            ts,
        ));
    }
    for gauge in [
        "node_load1",
        "node_load5",
        "node_load15",
        "node_memory_MemTotal_bytes",
        "node_memory_MemAvailable_bytes",
        "node_memory_Buffers_bytes",
        "node_memory_Cached_bytes",
        "node_memory_SwapFree_bytes",
        "node_memory_SwapTotal_bytes",
        "node_netstat_Tcp_CurrEstab",
        "node_sockstat_TCP_tw",
        "node_sockstat_TCP_alloc",
        "node_sockstat_sockets_used",
        "node_sockstat_UDP_inuse",
        "node_filefd_allocated",
    ] {
        out.push(Sample::new(gauge, base(&[]), 42.0, ts));
    }
    // node_exporter exposes many series vm.yaml does not read.
    for i in 0..300 {
        let i = i.to_string();
        out.push(Sample::new(
            "node_unread_metric",
            base(&[("i", &i)]),
            1.0,
            ts,
        ));
    }
    out
}

#[test]
#[ignore]
fn vm_yaml_throughput() {
    let yaml = std::fs::read_to_string(VM).expect("vm.yaml");
    let file = common::prepare(&yaml);
    let mut state = EngineState::default();
    let batches: Vec<Vec<Sample>> = (0..2000)
        .map(|i| {
            scrape(
                &format!("host-{}", i % 100),
                1_700_000_000_000 + (i / 100) * 60_000,
                i as f64,
            )
        })
        .collect();
    let samples: usize = batches.iter().map(Vec::len).sum();
    let started = Instant::now();
    let mut values = 0;
    for (i, batch) in batches.iter().enumerate() {
        let now = 1_700_000_000_000 + (i as i64 / 100) * 60_000;
        let evaluation = file.evaluate(batch, now, &mut state);
        assert!(evaluation.errors.is_empty(), "{:?}", evaluation.errors);
        values += evaluation.values.len();
    }
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "vm.yaml: {samples} samples in {} batches, {values} values, {elapsed:.3} s, {:.0} samples/s",
        batches.len(),
        samples as f64 / elapsed
    );
    assert!(values > 0);
}

/// The log-MAL case: LAL emits one sample per log and each is evaluated on its own by nginx.yaml.
/// `cargo test --release -p hotrule-mal-engine --test throughput -- --ignored --nocapture nginx`
#[test]
#[ignore]
fn nginx_log_mal_one_sample_throughput() {
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../config/rules/log-mal-rules/nginx.yaml"
    ))
    .expect("nginx.yaml");
    let file = common::prepare(&yaml);
    let mut state = EngineState::default();
    let batches: Vec<Vec<Sample>> = (0..200_000)
        .map(|i| {
            let labels = hotrule_mal_engine::labels([
                ("level", if i % 3 == 0 { "warn" } else { "error" }.to_owned()),
                ("service", format!("nginx-bench-{}", i % 4)),
                ("service_instance_id", format!("nginx-{}", i % 7)),
            ]);
            vec![Sample::new("nginx_error_log_count", labels, 1.0, 1_700_000_000_000)]
        })
        .collect();
    let started = Instant::now();
    let mut values = 0;
    for batch in &batches {
        let evaluation = file.evaluate(batch, 1_700_000_000_000, &mut state);
        values += evaluation.values.len();
    }
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "nginx.yaml one-sample: {:.3} us per evaluation, {values} values",
        elapsed * 1e6 / batches.len() as f64
    );
    assert_eq!(values, 2 * batches.len());
}
