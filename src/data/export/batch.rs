//! From read values to request bodies. Pure: the flush hands in what storage returned and the
//! flush time, and gets back snappy-compressed `WriteRequest`s of at most `batch_size` samples.
//!
//! Every sample of a flush carries the flush time, not the bucket's: a minute value changes
//! while its minute fills, and a receiver refuses a changed value at a timestamp it already has.
//! Within one flush a label set is sent once (the last value wins), so a request never holds
//! two samples of one series at one timestamp.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;

use super::prompb::{Label, Sample, TimeSeries, WriteRequest};
use crate::data::metrics::prom::{Labels, expand};
use crate::data::metrics::{Entity, Series};

/// One request body ready to send.
#[derive(Debug, Clone)]
pub struct EncodedBatch {
    /// The snappy block-compressed protobuf `WriteRequest`.
    pub body: Bytes,
    pub samples: usize,
}

/// The samples of one flush, by label set.
pub type FlushSamples = BTreeMap<Labels, f64>;

/// Adds to `out` the latest point of each returned series that is pending (`wanted`).
pub fn collect_samples(series: &[Series], wanted: &HashSet<&Entity>, out: &mut FlushSamples) {
    for one in series.iter().filter(|s| wanted.contains(&s.entity)) {
        let Some(latest) = one.points.iter().max_by_key(|p| p.bucket) else { continue };
        for (labels, value) in expand(&one.metric, &one.entity, &latest.value) {
            out.insert(labels, value);
        }
    }
}

/// Cuts the samples into requests of at most `batch_size` samples, all stamped `timestamp_ms`.
pub fn build_batches(samples: FlushSamples, timestamp_ms: i64, batch_size: usize) -> Vec<WriteRequest> {
    let mut requests = Vec::new();
    let mut current = Vec::new();
    for (labels, value) in samples {
        current.push(TimeSeries {
            // A label with an empty value is the same as no label, and receivers refuse it.
            labels: labels
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(name, value)| Label { name, value })
                .collect(),
            samples: vec![Sample { value, timestamp: timestamp_ms }],
            exemplars: Vec::new(),
        });
        if current.len() >= batch_size.max(1) {
            requests.push(WriteRequest { timeseries: std::mem::take(&mut current), metadata: Vec::new() });
        }
    }
    if !current.is_empty() {
        requests.push(WriteRequest { timeseries: current, metadata: Vec::new() });
    }
    requests
}

/// The request body: protobuf, then snappy's block format (not the framed one).
pub fn encode(request: &WriteRequest) -> Result<EncodedBatch, snap::Error> {
    let bytes = prost::Message::encode_to_vec(request);
    let body = snap::raw::Encoder::new().compress_vec(&bytes)?;
    Ok(EncodedBatch { body: Bytes::from(body), samples: request.timeseries.len() })
}

/// The start, in epoch milliseconds (UTC), of minute bucket `yyyyMMddHHmm`; `None` for a bucket
/// that names no minute.
pub fn minute_bucket_start_ms(bucket: i64) -> Option<i64> {
    crate::data::metrics::Granularity::Minute.bucket_start_ms(bucket)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::metrics::{Point, Value};
    use hotrule_mal_engine::{ScopeType, minute_bucket};

    fn service(name: &str) -> Entity {
        let mut entity = Entity::new(ScopeType::Service);
        entity.service_name = name.to_string();
        entity
    }

    fn series(metric: &str, entity: Entity, points: &[(i64, i64)]) -> Series {
        Series {
            metric: metric.into(),
            entity,
            points: points.iter().map(|(bucket, v)| Point { bucket: *bucket, start_ms: 0, value: Value::Single(*v) }).collect(),
        }
    }

    #[test]
    fn bucket_starts_invert_minute_bucket() {
        for ms in [0_i64, 59_999, 60_000, 951_782_400_000, 1_767_225_540_000, 4_102_444_800_000] {
            let bucket = minute_bucket(ms);
            assert_eq!(minute_bucket_start_ms(bucket), Some(ms - ms % 60_000), "{bucket}");
        }
        assert_eq!(minute_bucket_start_ms(202601011260), None);
        assert_eq!(minute_bucket_start_ms(202613010000), None);
        assert_eq!(minute_bucket_start_ms(-1), None);
    }

    #[test]
    fn only_pending_series_are_taken_with_their_latest_point() {
        let a = service("a");
        let b = service("b");
        let read = vec![series("m", a.clone(), &[(1, 10), (2, 20)]), series("m", b.clone(), &[(2, 99)])];
        let wanted: HashSet<&Entity> = [&a].into_iter().collect();
        let mut out = FlushSamples::new();
        collect_samples(&read, &wanted, &mut out);
        assert_eq!(out.len(), 1);
        let (labels, value) = out.iter().next().expect("one");
        assert_eq!(labels["service"], "a");
        assert_eq!(*value, 20.0);
    }

    #[test]
    fn batches_respect_the_size_and_carry_sorted_labels_with_the_name() {
        let mut samples = FlushSamples::new();
        for i in 0..5 {
            let mut labels = Labels::new();
            labels.insert("__name__".into(), "m".into());
            labels.insert("service".into(), format!("s{i}"));
            labels.insert("Zone".into(), "z".into());
            labels.insert("empty".into(), String::new());
            samples.insert(labels, f64::from(i));
        }
        let requests = build_batches(samples, 1234, 2);
        assert_eq!(requests.iter().map(|r| r.timeseries.len()).collect::<Vec<_>>(), vec![2, 2, 1]);
        for series in requests.iter().flat_map(|r| &r.timeseries) {
            let names: Vec<&str> = series.labels.iter().map(|l| l.name.as_str()).collect();
            assert_eq!(names, vec!["Zone", "__name__", "service"], "sorted, empty values left out");
            assert_eq!(series.samples[0].timestamp, 1234);
        }
    }

    #[test]
    fn encoding_is_snappy_block_over_protobuf() {
        let mut samples = FlushSamples::new();
        samples.insert(Labels::from([("__name__".to_string(), "m".to_string())]), 7.0);
        let request = build_batches(samples, 1, 10).remove(0);
        let batch = encode(&request).expect("encodes");
        assert_eq!(batch.samples, 1);
        let raw = snap::raw::Decoder::new().decompress_vec(&batch.body).expect("snappy block");
        let decoded: WriteRequest = prost::Message::decode(raw.as_slice()).expect("protobuf");
        assert_eq!(decoded, request);
    }
}
