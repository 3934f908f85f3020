//! The remote-write wire decoder: the same series as prost on generated and mutated requests,
//! unknown fields skipped at every level, every malformed input refused (never a panic) with
//! where it happened.

use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use crate::data::ingest::remote_write::prompb::{Exemplar, Label, MetricMetadata, Sample, TimeSeries, WriteRequest};
use crate::data::ingest::remote_write::{RemoteWriteError, decode, decode_reading};
use crate::data::ingest::remote_write_wire::{WireError, WireProblem, walk};

/// One series as both decoders see it: labels, and samples with the value's bits (NaN-safe).
type Seen = (Vec<(String, String)>, Vec<(u64, i64)>);

fn by_wire(raw: &[u8]) -> Result<Vec<Seen>, WireError> {
    let mut out = Vec::new();
    walk(raw, |index, series| {
        assert_eq!(index, out.len(), "series are handed out in order");
        out.push((
            series.labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            series.samples.iter().map(|(v, t)| (v.to_bits(), *t)).collect(),
        ));
    })?;
    Ok(out)
}

fn by_prost(raw: &[u8]) -> Result<Vec<Seen>, prost::DecodeError> {
    let request = WriteRequest::decode(raw)?;
    Ok(request
        .timeseries
        .into_iter()
        .map(|s| {
            (
                s.labels.into_iter().map(|l| (l.name, l.value)).collect(),
                s.samples.into_iter().map(|x| (x.value.to_bits(), x.timestamp)).collect(),
            )
        })
        .collect())
}

/// Both decoders accept `raw` with the same series, or both refuse it.
fn assert_agree(raw: &[u8]) -> bool {
    match (by_wire(raw), by_prost(raw)) {
        (Ok(wire), Ok(prost)) => {
            assert_eq!(wire, prost, "same series for {raw:02x?}");
            true
        }
        (Err(_), Err(_)) => false,
        (wire, prost) => panic!("the decoders disagree on {raw:02x?}: wire {wire:?}, prost {prost:?}"),
    }
}

fn random_text(rng: &mut StdRng) -> String {
    const PIECES: [&str; 10] = ["", "a", "__name__", "le", "job", "0.5", "é", "日本", "+Inf", "node_cpu_seconds_total"];
    (0..rng.random_range(0..3)).map(|_| PIECES[rng.random_range(0..PIECES.len())]).collect()
}

fn random_labels(rng: &mut StdRng) -> Vec<Label> {
    (0..rng.random_range(0..6)).map(|_| Label { name: random_text(rng), value: random_text(rng) }).collect()
}

fn random_request(rng: &mut StdRng) -> WriteRequest {
    let values = [0.0, -1.5, 1e300, f64::NAN, f64::INFINITY, f64::from_bits(0x7ff0_0000_0000_0002)];
    let timeseries = (0..rng.random_range(0..5))
        .map(|_| TimeSeries {
            labels: random_labels(rng),
            samples: (0..rng.random_range(0..4))
                .map(|_| Sample { value: values[rng.random_range(0..values.len())], timestamp: rng.random_range(i64::MIN..=i64::MAX) >> rng.random_range(0..64) })
                .collect(),
            exemplars: (0..rng.random_range(0..2)).map(|_| Exemplar { labels: random_labels(rng), value: 2.5, timestamp: -3 }).collect(),
        })
        .collect();
    let metadata = (0..rng.random_range(0..2))
        .map(|_| MetricMetadata { r#type: rng.random_range(-2..9), metric_family_name: random_text(rng), help: random_text(rng), unit: random_text(rng) })
        .collect();
    WriteRequest { timeseries, metadata }
}

fn mutate(rng: &mut StdRng, seed: &[u8]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    match rng.random_range(0..4) {
        0 if !bytes.is_empty() => {
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..bytes.len());
                bytes[at] = rng.random();
            }
        }
        1 => bytes.truncate(rng.random_range(0..=bytes.len())),
        2 => {
            let at = rng.random_range(0..=bytes.len());
            let mut noise = vec![0u8; rng.random_range(1..12)];
            rng.fill_bytes(&mut noise);
            bytes.splice(at..at, noise);
        }
        _ => {
            let at = rng.random_range(0..=bytes.len());
            bytes.insert(at, [0x80, 0xff, 0x08, 0x0b, 0x0c, 0x12, 0x1a, 0x22][rng.random_range(0..8)]);
        }
    }
    bytes
}

#[test]
fn wire_decoder_agrees_with_prost_on_generated_and_mutated_requests() {
    let mut rng = StdRng::seed_from_u64(0x7717_e5);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..3000 {
        let encoded = random_request(&mut rng).encode_to_vec();
        assert!(assert_agree(&encoded), "a valid request decodes");
        for _ in 0..4 {
            match assert_agree(&mutate(&mut rng, &encoded)) {
                true => accepted += 1,
                false => refused += 1,
            }
        }
    }
    assert!(accepted > 500 && refused > 500, "both outcomes are exercised: {accepted} accepted, {refused} refused");
}

// A hand encoder for what prost would not write.
fn varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
    out
}
fn key(field: u64, wire_type: u64) -> Vec<u8> {
    varint(field << 3 | wire_type)
}
fn delimited(field: u64, body: &[u8]) -> Vec<u8> {
    [key(field, 2), varint(body.len() as u64), body.to_vec()].concat()
}
fn label(name: &[u8], value: &[u8]) -> Vec<u8> {
    [delimited(1, name), delimited(2, value)].concat()
}
fn sample(value: f64, timestamp: u64) -> Vec<u8> {
    [key(1, 1), value.to_le_bytes().to_vec(), key(2, 0), varint(timestamp)].concat()
}
/// Unknown fields of every wire type (field numbers 9–13), a group holding a nested group.
fn unknown() -> Vec<u8> {
    [
        key(9, 0),
        varint(300),
        key(10, 1),
        vec![1; 8],
        key(11, 5),
        vec![2; 4],
        delimited(12, b"skipped"),
        key(13, 3),
        key(14, 3),
        key(1, 0),
        varint(7),
        key(14, 4),
        delimited(2, b"x"),
        key(13, 4),
    ]
    .concat()
}

#[test]
fn unknown_fields_are_skipped_at_every_level() {
    let series = [
        delimited(1, &[label(b"__name__", b"up"), unknown()].concat()),
        unknown(),
        delimited(2, &[unknown(), sample(1.5, 1000)].concat()),
        // Native histograms (field 4) are not in hotrule's message: skipped like any unknown.
        delimited(4, &[key(1, 0), varint(5), delimited(2, b"buckets")].concat()),
        delimited(3, &[delimited(1, &[label(b"trace_id", b"abc"), unknown()].concat()), unknown(), key(2, 1), 2.0f64.to_le_bytes().to_vec()].concat()),
    ]
    .concat();
    let metadata = [key(1, 0), varint(1), delimited(2, b"up"), unknown(), delimited(4, b"help"), delimited(5, b"s")].concat();
    let raw = [unknown(), delimited(1, &series), delimited(2, b"reserved"), delimited(3, &metadata), unknown()].concat();
    assert!(assert_agree(&raw));
    let seen = by_wire(&raw).expect("decodes");
    assert_eq!(seen, vec![(vec![("__name__".to_owned(), "up".to_owned())], vec![(1.5f64.to_bits(), 1000)])]);
}

#[test]
fn absent_fields_are_zero_and_repeated_scalars_take_the_last() {
    let series = [
        delimited(1, &[delimited(1, b"__name__"), delimited(2, b"first"), delimited(2, b"last")].concat()),
        delimited(1, &delimited(1, b"empty")),
        delimited(2, &[]),
        delimited(2, &[sample(1.0, 5), sample(2.0, 6)].concat()),
    ]
    .concat();
    let raw = delimited(1, &series);
    assert!(assert_agree(&raw));
    let (labels, samples) = by_wire(&raw).expect("decodes").remove(0);
    assert_eq!(labels, vec![("__name__".into(), "last".into()), ("empty".into(), String::new())]);
    assert_eq!(samples, vec![(0, 0), (2.0f64.to_bits(), 6)]);
}

/// Every malformed case: refused by both decoders, never a panic, and named by place.
#[test]
fn malformed_requests_are_refused_with_where() {
    let good_label = delimited(1, &label(b"__name__", b"up"));
    let mut nested_groups = Vec::new();
    for _ in 0..101 {
        nested_groups.extend(key(9, 3));
    }
    for _ in 0..101 {
        nested_groups.extend(key(9, 4));
    }
    let cases: Vec<(&str, Vec<u8>, &str, WireProblem)> = vec![
        ("truncated key", vec![0x8a], "", WireProblem::Varint),
        ("varint of 11 bytes", [vec![0x48], vec![0xff; 10], vec![0x01]].concat(), "", WireProblem::Varint),
        ("varint past 64 bits", [vec![0x48], vec![0xff; 9], vec![0x02]].concat(), "", WireProblem::Varint),
        ("key beyond 32 bits", varint(1 << 35 | 2), "", WireProblem::KeyTooLarge(1 << 35 | 2)),
        ("wire type 6", key(1, 6), "", WireProblem::UnknownWireType(6)),
        ("wire type 7 in a series", delimited(1, &key(1, 7)), "timeseries[0]", WireProblem::UnknownWireType(7)),
        ("field 0", key(0, 0), "", WireProblem::FieldZero),
        ("timeseries as a varint", [key(1, 0), varint(1)].concat(), "timeseries[0]", WireProblem::WrongWireType { field: 1, found: 0, expected: 2 }),
        ("series longer than the body", [key(1, 2), varint(50), vec![0; 3]].concat(), "timeseries[0]", WireProblem::PastEnd { declared: 50, left: 3 }),
        (
            "label name not UTF-8",
            delimited(1, &[good_label.clone(), delimited(1, &label(b"\xff", b"v"))].concat()),
            "timeseries[0].labels[1].name",
            WireProblem::NotUtf8,
        ),
        ("label value not UTF-8", delimited(1, &delimited(1, &label(b"k", b"\xc3"))), "timeseries[0].labels[0].value", WireProblem::NotUtf8),
        (
            "label name as fixed32",
            delimited(1, &delimited(1, &[key(1, 5), vec![0; 4]].concat())),
            "timeseries[0].labels[0].name",
            WireProblem::WrongWireType { field: 1, found: 5, expected: 2 },
        ),
        (
            "sample value as a varint",
            delimited(1, &[good_label.clone(), delimited(2, &[key(1, 0), varint(1)].concat())].concat()),
            "timeseries[0].samples[0].value",
            WireProblem::WrongWireType { field: 1, found: 0, expected: 1 },
        ),
        (
            "sample value cut short",
            delimited(1, &delimited(2, &[key(1, 1), vec![0; 5]].concat())),
            "timeseries[0].samples[0].value",
            WireProblem::PastEnd { declared: 8, left: 5 },
        ),
        (
            "timestamp as fixed64",
            delimited(1, &delimited(2, &[key(2, 1), vec![0; 8]].concat())),
            "timeseries[0].samples[0].timestamp",
            WireProblem::WrongWireType { field: 2, found: 1, expected: 0 },
        ),
        ("timestamp truncated", delimited(1, &delimited(2, &[key(2, 0), vec![0x80]].concat())), "timeseries[0].samples[0].timestamp", WireProblem::Varint),
        (
            "exemplar label not UTF-8",
            delimited(1, &delimited(3, &delimited(1, &label(b"trace_id", b"\xfe")))),
            "timeseries[0].exemplars[0].labels[0].value",
            WireProblem::NotUtf8,
        ),
        ("metadata help not UTF-8", delimited(3, &delimited(4, b"\x80")), "metadata[0].help", WireProblem::NotUtf8),
        ("metadata type as bytes", delimited(3, &delimited(1, b"x")), "metadata[0].type", WireProblem::WrongWireType { field: 1, found: 2, expected: 0 }),
        ("an end group alone", key(9, 4), "", WireProblem::UnexpectedEndGroup),
        ("a group closed by another field", [key(9, 3), key(10, 4)].concat(), "", WireProblem::UnexpectedEndGroup),
        ("a group never closed", key(9, 3), "", WireProblem::Varint),
        ("groups nested past the limit", nested_groups, "", WireProblem::TooDeep),
        ("unknown length past the end", [key(9, 2), varint(u64::MAX)].concat(), "", WireProblem::PastEnd { declared: u64::MAX, left: 0 }),
    ];
    for (what, raw, at, problem) in cases {
        let error = by_wire(&raw).expect_err(what);
        assert_eq!(error, WireError { at: at.to_owned(), problem }, "{what}");
        assert!(WriteRequest::decode(raw.as_slice()).is_err(), "prost refuses it too: {what}");
        let body = snap::raw::Encoder::new().compress_vec(&raw).expect("compresses");
        match decode(&body, 1 << 20, 0) {
            Err(RemoteWriteError::Protobuf(message)) => assert!(message.contains(at), "{what}: {message}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

/// A group nested exactly as deep as prost allows is skipped, one level more is refused.
#[test]
fn group_nesting_stops_where_prosts_does() {
    let groups = |depth: usize| [(0..depth).flat_map(|_| key(9, 3)).collect::<Vec<_>>(), (0..depth).flat_map(|_| key(9, 4)).collect()].concat();
    assert!(assert_agree(&groups(100)));
    assert!(!assert_agree(&groups(101)));
    let in_label = |depth: usize| delimited(1, &delimited(1, &groups(depth)));
    assert!(assert_agree(&in_label(98)));
    assert!(!assert_agree(&in_label(99)));
}

/// A bad label in a series no rule reads still refuses the request, as prost's decode did.
#[test]
fn a_bad_series_no_rule_reads_still_refuses_the_request() {
    let read = delimited(1, &[delimited(1, &label(b"__name__", b"node_load1")), delimited(2, &sample(1.0, 1))].concat());
    let unread = delimited(1, &[delimited(1, &label(b"__name__", b"other")), delimited(1, &label(b"k", b"\xff"))].concat());
    let body = snap::raw::Encoder::new().compress_vec(&[read.clone(), unread].concat()).expect("compresses");
    let reads: std::collections::HashSet<String> = ["node_load1".to_owned()].into();
    match decode_reading(&body, 1 << 20, 0, Some(&reads)) {
        Err(RemoteWriteError::Protobuf(message)) => assert_eq!(message, "timeseries[1].labels[1].value: not UTF-8"),
        other => panic!("{other:?}"),
    }
    let fine = snap::raw::Encoder::new().compress_vec(&read).expect("compresses");
    assert_eq!(decode_reading(&fine, 1 << 20, 0, Some(&reads)).expect("decodes").sample_count(), 1);
}

/// The mapping as it was before the wire decoder (prost's series, a Prometheus label map per
/// series, [`split_scrapes`] then [`to_mal`]): the reference the receiver must still equal.
fn reference_mapping(request: &WriteRequest) -> (Vec<Vec<crate::data::seam::Sample>>, Vec<(Option<usize>, String, usize, String)>, usize) {
    use crate::data::ingest::prom::{series_text, split_scrapes, to_mal};
    use hotrule_mal_engine::LabelMap;
    use std::sync::Arc;
    let (mut invalid, mut stale, mut samples) = (Vec::new(), 0, Vec::new());
    for (index, series) in request.timeseries.iter().enumerate() {
        let (mut map, mut name, mut seen, mut problem) = (LabelMap::new(), None, std::collections::HashSet::new(), None);
        for label in &series.labels {
            if label.name.is_empty() {
                problem.get_or_insert("a label has an empty name".to_owned());
                continue;
            }
            if !seen.insert(label.name.clone()) {
                problem.get_or_insert(format!("label {:?} is repeated", label.name));
                continue;
            }
            if label.value.is_empty() {
                continue;
            }
            if label.name == "__name__" {
                name = Some(label.value.clone());
            }
            map.insert(label.name.clone(), label.value.clone());
        }
        let name = match (problem, name) {
            (Some(problem), _) => {
                invalid.push((Some(index), series_text("", &map), series.samples.len(), problem));
                continue;
            }
            (None, None) => {
                invalid.push((Some(index), series_text("", &map), series.samples.len(), "no __name__ label".to_owned()));
                continue;
            }
            (None, Some(name)) => name,
        };
        map.remove("__name__");
        let labels = Arc::new(map);
        for sample in &series.samples {
            match sample.value.to_bits() == crate::data::ingest::remote_write::STALE_NAN_BITS {
                true => stale += 1,
                false => samples.push(crate::data::seam::Sample::new(name.clone(), labels.clone(), sample.value, sample.timestamp)),
            }
        }
    }
    let mut batches = Vec::new();
    for scrape in split_scrapes(samples) {
        let (converted, bad) = to_mal(scrape);
        invalid.extend(bad.into_iter().map(|b| (None, b.series.clone(), 1, b.to_string())));
        if !converted.is_empty() {
            batches.push(converted);
        }
    }
    (batches, invalid, stale)
}

fn prometheus_like_request(rng: &mut StdRng) -> WriteRequest {
    const NAMES: [&str; 7] = ["up", "node_load1", "rpc_seconds_bucket", "jvm.memory.used", "x_bucket", "rpc_seconds_count", ""];
    const JOBS: [&str; 3] = ["vm", "api", ""];
    const INSTANCES: [&str; 4] = ["a:9100", "[::1]:9", "host", ""];
    const LES: [&str; 5] = ["0.1", "1", "+Inf", "often", ""];
    const QUANTILES: [&str; 3] = ["0.5", "1", "bad"];
    let pick = |rng: &mut StdRng, from: &[&str]| from[rng.random_range(0..from.len())].to_owned();
    let timeseries = (0..rng.random_range(0..12))
        .map(|_| {
            let mut labels = vec![Label { name: "__name__".into(), value: pick(rng, &NAMES) }];
            if rng.random_bool(0.9) {
                labels.push(Label { name: "job".into(), value: pick(rng, &JOBS) });
            }
            if rng.random_bool(0.9) {
                labels.push(Label { name: "instance".into(), value: pick(rng, &INSTANCES) });
            }
            if rng.random_bool(0.4) {
                labels.push(Label { name: "le".into(), value: pick(rng, &LES) });
            }
            if rng.random_bool(0.2) {
                labels.push(Label { name: "quantile".into(), value: pick(rng, &QUANTILES) });
            }
            if rng.random_bool(0.3) {
                labels.push(Label { name: ["cpu", "service_name", "job_name", "mode"][rng.random_range(0..4)].into(), value: pick(rng, &JOBS) });
            }
            if rng.random_bool(0.05) {
                labels.push(Label { name: String::new(), value: "x".into() });
            }
            if rng.random_bool(0.05) {
                let again = labels[rng.random_range(0..labels.len())].clone();
                labels.push(again);
            }
            if rng.random_bool(0.1) {
                let other = rng.random_range(0..labels.len());
                labels.swap(0, other);
            }
            let samples = (0..rng.random_range(0..3))
                .map(|_| Sample {
                    value: [1.0, 4.0, 2.5, f64::from_bits(crate::data::ingest::remote_write::STALE_NAN_BITS)][rng.random_range(0..4)],
                    timestamp: [1000, 2000][rng.random_range(0..2)],
                })
                .collect();
            TimeSeries { labels, samples, exemplars: Vec::new() }
        })
        .collect();
    WriteRequest { timeseries, metadata: Vec::new() }
}

/// The receiver maps every request exactly as the prost-based mapping did: same batches (one per
/// scrape, same samples in the same order), same refused series, same stale count, with or
/// without a set of read names.
#[test]
fn mapping_equals_the_prost_era_mapping_on_prometheus_like_requests() {
    let mut rng = StdRng::seed_from_u64(0x3a9_2024);
    for _ in 0..2000 {
        let request = prometheus_like_request(&mut rng);
        let (batches, invalid, stale) = reference_mapping(&request);
        let body = snap::raw::Encoder::new().compress_vec(&request.encode_to_vec()).expect("compresses");
        let mapped = decode(&body, 1 << 20, 7).expect("decodes");
        let got: Vec<Vec<crate::data::seam::Sample>> = mapped.batches.iter().map(|b| b.samples.clone()).collect();
        assert_eq!(got, batches, "{request:?}");
        let got_invalid: Vec<_> = mapped.invalid.iter().map(|i| (i.index, i.series.clone(), i.samples, i.problem.to_string())).collect();
        assert_eq!(got_invalid, invalid, "{request:?}");
        assert_eq!(mapped.stale, stale);
        // With a read set, the read series come out the same and the rest are counted.
        let reads: std::collections::HashSet<String> = ["node_load1", "rpc_seconds"].into_iter().map(String::from).collect();
        let read = decode_reading(&body, 1 << 20, 7, Some(&reads)).expect("decodes");
        let kept: Vec<crate::data::seam::Sample> = batches.iter().flatten().filter(|s| reads.contains(&s.name)).cloned().collect();
        let read_samples: Vec<crate::data::seam::Sample> = read.batches.iter().flat_map(|b| b.samples.clone()).filter(|s| reads.contains(&s.name)).collect();
        // Scrapes are numbered by first appearance among the series taken, so compare as sets.
        let sorted = |mut samples: Vec<crate::data::seam::Sample>| {
            samples.sort_by_key(|s| format!("{s:?}"));
            samples
        };
        assert_eq!(sorted(read_samples), sorted(kept));
        assert_eq!(read.invalid, mapped.invalid, "refused either way");
    }
}
