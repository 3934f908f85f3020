//! From read values to request bodies. Pure: the flush hands in what storage returned for the
//! minute buckets it exports, and gets back snappy-compressed `WriteRequest`s of at most
//! `batch_size` samples.
//!
//! A sample carries its minute bucket's start (epoch ms), the time the query API shows the
//! same value at (`docs/query.md`), so the receiver and the node agree on when a minute was.
//! Each (series, minute) is exported once, after the minute closed, so a receiver never gets
//! a second, different value at one timestamp. A label set's samples go in one `TimeSeries`,
//! in time order; a label set that two entities map to keeps one value per timestamp (the
//! last read wins).

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

/// The samples of one flush, by label set, then timestamp (epoch ms).
pub type FlushSamples = BTreeMap<Labels, BTreeMap<i64, f64>>;

/// Adds to `out` the point at minute `bucket` of each returned series that is exported
/// (`wanted`), stamped with the bucket's start.
pub fn collect_samples(series: &[Series], wanted: &HashSet<&Entity>, bucket: i64, out: &mut FlushSamples) {
    let Some(start_ms) = minute_bucket_start_ms(bucket) else { return };
    for one in series.iter().filter(|s| wanted.contains(&s.entity)) {
        let Some(point) = one.points.iter().find(|p| p.bucket == bucket) else { continue };
        for (labels, value) in expand(&one.metric, &one.entity, &point.value) {
            out.entry(labels).or_default().insert(start_ms, value);
        }
    }
}

/// Cuts the samples into requests of at most `batch_size` samples. A label set whose samples
/// do not fit is continued in the next request, its later samples there.
pub fn build_batches(samples: FlushSamples, batch_size: usize) -> Vec<WriteRequest> {
    let batch_size = batch_size.max(1);
    let mut requests = Vec::new();
    let mut current = Vec::new();
    let mut in_current = 0;
    for (labels, points) in samples {
        // A label with an empty value is the same as no label, and receivers refuse it.
        let labels: Vec<Label> =
            labels.into_iter().filter(|(_, v)| !v.is_empty()).map(|(name, value)| Label { name, value }).collect();
        let mut series = TimeSeries { labels: labels.clone(), samples: Vec::new(), exemplars: Vec::new() };
        for (timestamp, value) in points {
            series.samples.push(Sample { value, timestamp });
            in_current += 1;
            if in_current >= batch_size {
                current.push(std::mem::replace(&mut series, TimeSeries { labels: labels.clone(), samples: Vec::new(), exemplars: Vec::new() }));
                requests.push(WriteRequest { timeseries: std::mem::take(&mut current), metadata: Vec::new() });
                in_current = 0;
            }
        }
        if !series.samples.is_empty() {
            current.push(series);
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
    Ok(EncodedBatch { body: Bytes::from(body), samples: request.timeseries.iter().map(|s| s.samples.len()).sum() })
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

    const M0: i64 = 202601010000;
    const M0_START: i64 = 1_767_225_600_000;

    #[test]
    fn only_wanted_series_are_taken_at_their_bucket_stamped_with_its_start() {
        let a = service("a");
        let b = service("b");
        let read = vec![series("m", a.clone(), &[(M0, 10), (M0 + 1, 20)]), series("m", b.clone(), &[(M0, 99)])];
        let wanted: HashSet<&Entity> = [&a].into_iter().collect();
        let mut out = FlushSamples::new();
        collect_samples(&read, &wanted, M0, &mut out);
        collect_samples(&read, &wanted, M0 + 1, &mut out);
        assert_eq!(out.len(), 1);
        let (labels, points) = out.iter().next().expect("one");
        assert_eq!(labels["service"], "a");
        assert_eq!(points.iter().map(|(t, v)| (*t, *v)).collect::<Vec<_>>(), vec![(M0_START, 10.0), (M0_START + 60_000, 20.0)]);
    }

    #[test]
    fn a_series_keeps_its_samples_in_time_order_across_requests() {
        let mut samples = FlushSamples::new();
        let labels = Labels::from([("__name__".to_string(), "m".to_string())]);
        samples.insert(labels, BTreeMap::from([(3, 3.0), (1, 1.0), (2, 2.0)]));
        let requests = build_batches(samples.clone(), 10);
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].timeseries.len(), 1, "one TimeSeries per label set");
        let stamps: Vec<i64> = requests[0].timeseries[0].samples.iter().map(|s| s.timestamp).collect();
        assert_eq!(stamps, vec![1, 2, 3]);
        let requests = build_batches(samples, 2);
        let stamps: Vec<Vec<i64>> =
            requests.iter().map(|r| r.timeseries.iter().flat_map(|s| s.samples.iter().map(|p| p.timestamp)).collect()).collect();
        assert_eq!(stamps, vec![vec![1, 2], vec![3]]);
        assert_eq!(encode(&requests[0]).expect("encodes").samples, 2, "a batch counts samples");
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
            samples.insert(labels, BTreeMap::from([(1234, f64::from(i))]));
        }
        let requests = build_batches(samples, 2);
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
        samples.insert(Labels::from([("__name__".to_string(), "m".to_string())]), BTreeMap::from([(1, 7.0)]));
        let request = build_batches(samples, 10).remove(0);
        let batch = encode(&request).expect("encodes");
        assert_eq!(batch.samples, 1);
        let raw = snap::raw::Decoder::new().decompress_vec(&batch.body).expect("snappy block");
        let decoded: WriteRequest = prost::Message::decode(raw.as_slice()).expect("protobuf");
        assert_eq!(decoded, request);
    }
}
