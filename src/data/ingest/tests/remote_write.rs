//! Remote-write decoding: what Prometheus sends, stale markers, invalid series, bad bodies.

use prost::Message;

use super::{by_label, find};
use crate::data::seam::Protocol;
use crate::data::ingest::remote_write::prompb::{Label, Sample as PromSample, TimeSeries, WriteRequest};
use crate::data::ingest::remote_write::{RemoteWriteError, STALE_NAN_BITS, SeriesProblem, decode};

const LIMIT: usize = 1 << 20;

/// A series as Prometheus writes it: `__name__` among the labels, labels sorted by name.
pub(in crate::data::ingest) fn series(name: &str, labels: &[(&str, &str)], samples: &[(f64, i64)]) -> TimeSeries {
    let mut all: Vec<Label> = labels.iter().map(|(k, v)| Label { name: k.to_string(), value: v.to_string() }).collect();
    all.push(Label { name: "__name__".into(), value: name.into() });
    all.sort_by(|a, b| a.name.cmp(&b.name));
    TimeSeries {
        labels: all,
        samples: samples.iter().map(|(value, timestamp)| PromSample { value: *value, timestamp: *timestamp }).collect(),
        exemplars: Vec::new(),
    }
}

/// A request encoded as Prometheus' remote-write client encodes it: protobuf, snappy block.
pub(in crate::data::ingest) fn encode(timeseries: Vec<TimeSeries>) -> Vec<u8> {
    let raw = WriteRequest { timeseries, metadata: Vec::new() }.encode_to_vec();
    snap::raw::Encoder::new().compress_vec(&raw).expect("snappy compresses")
}

#[test]
fn a_prometheus_request_becomes_one_batch_per_scrape() {
    let vm = [("job", "vm-monitoring"), ("instance", "node-a:9100")];
    let body = encode(vec![
        series("node_load1", &vm, &[(0.25, 1000), (0.5, 16000)]),
        series("node_cpu_seconds_total", &[vm[0], vm[1], ("cpu", "0"), ("mode", "idle")], &[(100.0, 1000), (115.0, 16000)]),
        series("node_load1", &[("job", "vm-monitoring"), ("instance", "node-b:9100")], &[(2.0, 1000)]),
    ]);
    let mapped = decode(&body, LIMIT, 99).expect("decodes");
    assert!(mapped.invalid.is_empty());
    assert_eq!(mapped.batches.len(), 3, "node-a at 1000, node-a at 16000, node-b at 1000");
    let first = &mapped.batches[0];
    assert_eq!((first.protocol, first.received_ms), (Protocol::RemoteWrite, 99));
    let load = find(&first.samples, "node_load1", &[]);
    assert_eq!((load.value, load.timestamp_ms), (0.25, 1000));
    assert_eq!(load.label("node_identifier_host_name"), "node-a");
    assert_eq!(load.label("job_name"), "vm-monitoring");
    assert!(!load.labels.contains_key("__name__") && !load.labels.contains_key("job") && !load.labels.contains_key("instance"));
    assert_eq!(find(&first.samples, "node_cpu_seconds_total", &[("mode", "idle")]).value, 100.0);
    assert_eq!(mapped.batches[1].samples.len(), 2);
    assert_eq!(mapped.batches[2].samples[0].label("service_instance_id"), "node-b:9100");
}

#[test]
fn histogram_buckets_are_de_cumulated_per_scrape() {
    let j = [("job", "api"), ("instance", "a:1")];
    let bucket = |le: &'static str, v1: f64, v2: f64| series("rpc_seconds_bucket", &[j[0], j[1], ("le", le)], &[(v1, 1000), (v2, 2000)]);
    let body = encode(vec![bucket("0.1", 1.0, 2.0), bucket("1.0", 4.0, 6.0), bucket("+Inf", 5.0, 9.0)]);
    let mapped = decode(&body, LIMIT, 0).expect("decodes");
    assert_eq!(mapped.batches.len(), 2);
    assert_eq!(
        by_label(&mapped.batches[0].samples, "rpc_seconds", "le"),
        vec![("0.1".into(), 1.0), ("1.0".into(), 3.0), ("Infinity".into(), 1.0)]
    );
    assert_eq!(
        by_label(&mapped.batches[1].samples, "rpc_seconds", "le"),
        vec![("0.1".into(), 2.0), ("1.0".into(), 4.0), ("Infinity".into(), 3.0)]
    );
}

#[test]
fn stale_markers_never_reach_a_batch() {
    let stale = f64::from_bits(STALE_NAN_BITS);
    let body = encode(vec![series("up", &[("job", "j")], &[(1.0, 1000), (stale, 2000)]), series("gone", &[("job", "j")], &[(stale, 2000)])]);
    let mapped = decode(&body, LIMIT, 0).expect("decodes");
    assert_eq!(mapped.stale, 2);
    let all: Vec<f64> = mapped.batches.iter().flat_map(|b| b.samples.iter().map(|s| s.value)).collect();
    assert_eq!(all, vec![1.0]);
    // An ordinary NaN is not a stale marker: it passes (MAL drops NaN samples itself).
    let nan = decode(&encode(vec![series("x", &[], &[(f64::NAN, 1)])]), LIMIT, 0).expect("decodes");
    assert_eq!((nan.stale, nan.sample_count()), (0, 1));
}

#[test]
fn invalid_series_are_named_and_the_valid_ones_kept() {
    let nameless = TimeSeries { labels: vec![Label { name: "job".into(), value: "j".into() }], samples: vec![PromSample { value: 1.0, timestamp: 1 }], exemplars: vec![] };
    let mut repeated = series("dup", &[("a", "1")], &[(1.0, 1), (2.0, 2)]);
    repeated.labels.push(Label { name: "a".into(), value: "2".into() });
    let mut empty_name = series("e", &[], &[(1.0, 1)]);
    empty_name.labels.push(Label { name: String::new(), value: "x".into() });
    let mut empty_value = series("kept", &[("job", "j")], &[(3.0, 1)]);
    empty_value.labels.push(Label { name: "blank".into(), value: String::new() });
    let bad_le = series("h_bucket", &[("le", "often")], &[(1.0, 1)]);
    let body = encode(vec![nameless, repeated, empty_name, empty_value, bad_le]);
    let mapped = decode(&body, LIMIT, 0).expect("decodes");
    let problems: Vec<(Option<usize>, &SeriesProblem, usize)> = mapped.invalid.iter().map(|i| (i.index, &i.problem, i.samples)).collect();
    assert_eq!(problems.len(), 4);
    assert_eq!((problems[0].0, problems[0].1, problems[0].2), (Some(0), &SeriesProblem::MissingName, 1));
    assert_eq!((problems[1].0, problems[1].1, problems[1].2), (Some(1), &SeriesProblem::DuplicateLabel("a".into()), 2));
    assert_eq!((problems[2].0, problems[2].1), (Some(2), &SeriesProblem::EmptyLabelName));
    assert!(matches!(problems[3].1, SeriesProblem::BadBucket(_)));
    assert_eq!(mapped.invalid[0].to_string(), "timeseries[0] {job=\"j\"}: no __name__ label");
    assert_eq!(mapped.invalid_samples(), 1 + 2 + 1 + 1);
    let kept = find(&mapped.batches[0].samples, "kept", &[]);
    assert!(!kept.labels.contains_key("blank"), "an empty value is no label");
}

#[test]
fn bad_bodies_are_refused_with_the_reason() {
    assert!(matches!(decode(b"definitely not snappy", LIMIT, 0), Err(RemoteWriteError::Snappy(_))));
    let not_protobuf = snap::raw::Encoder::new().compress_vec(&[0xff, 0xff, 0xff, 0xff, 0x0f]).expect("compresses");
    assert!(matches!(decode(&not_protobuf, LIMIT, 0), Err(RemoteWriteError::Protobuf(_))));
    let big = encode(vec![series("x", &[("pad", &"p".repeat(4096))], &[(1.0, 1)])]);
    assert!(matches!(decode(&big, 1024, 0), Err(RemoteWriteError::TooLarge { limit: 1024, .. })));
    // A declared length far beyond the body (a snappy bomb header) is refused before allocating.
    let mut bomb = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
    bomb.extend_from_slice(&[0; 8]);
    assert!(matches!(decode(&bomb, LIMIT, 0), Err(RemoteWriteError::TooLarge { .. }) | Err(RemoteWriteError::Snappy(_))));
}

/// With the names the rules read, the other series never become samples; they are counted, and
/// the series that are read (a histogram under its base name, a dotted name escaped) come out
/// exactly as without the filter. Invalid series and bad buckets are refused either way.
#[test]
fn series_no_rule_reads_are_counted_and_left_out() {
    use crate::data::ingest::remote_write::decode_reading;
    let j = [("job", "vm-monitoring"), ("instance", "node-a:9100")];
    let body = encode(vec![
        series("node_load1", &j, &[(0.25, 1000)]),
        series("node_unread_total", &j, &[(1.0, 1000), (f64::from_bits(STALE_NAN_BITS), 2000)]),
        series("rpc_seconds_bucket", &[j[0], j[1], ("le", "0.1")], &[(1.0, 1000)]),
        series("rpc_seconds_bucket", &[j[0], j[1], ("le", "+Inf")], &[(3.0, 1000)]),
        series("jvm.memory.used", &j, &[(7.0, 1000)]),
        series("other_seconds_bucket", &[j[0], j[1], ("le", "x")], &[(1.0, 1000)]),
        series("", &j, &[(1.0, 1000)]),
    ]);
    let reads: std::collections::HashSet<String> =
        ["node_load1", "rpc_seconds", "jvm_memory_used"].into_iter().map(String::from).collect();
    let all = decode(&body, LIMIT, 5).expect("decodes");
    let read = decode_reading(&body, LIMIT, 5, Some(&reads)).expect("decodes");
    assert_eq!((read.unread, read.stale), (1, 1), "node_unread_total's sample is unread, its stale marker stale");
    let kept: Vec<_> = all.batches[0].samples.iter().filter(|s| s.name != "node_unread_total").cloned().collect();
    assert_eq!(read.batches.len(), 1);
    assert_eq!(read.batches[0].samples, kept, "the read series are converted as without the filter");
    assert_eq!(read.sample_count() + read.unread, all.sample_count());
    assert_eq!(read.invalid, all.invalid, "the bad bucket and the nameless series are refused either way");
    assert_eq!(read.invalid.len(), 2);
}

/// Consecutive series whose labels (besides `__name__`) are equal share one MAL label map, so
/// the file filter is judged once for them; a series with other labels gets its own.
#[test]
fn consecutive_series_with_the_same_labels_share_one_label_map() {
    let j = [("job", "vm-monitoring"), ("instance", "node-a:9100")];
    let body = encode(vec![
        series("node_load1", &j, &[(1.0, 1000)]),
        series("node_load5", &j, &[(2.0, 1000)]),
        series("node_cpu_seconds_total", &[j[0], j[1], ("cpu", "0")], &[(3.0, 1000)]),
    ]);
    let mapped = decode(&body, LIMIT, 0).expect("decodes");
    let samples = &mapped.batches[0].samples;
    assert!(std::sync::Arc::ptr_eq(&samples[0].labels, &samples[1].labels));
    assert!(!std::sync::Arc::ptr_eq(&samples[1].labels, &samples[2].labels));
    assert_eq!(samples[2].label("cpu"), "0");
}
