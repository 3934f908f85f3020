//! `MeterReportService`'s messages to MAL samples, as SkyWalking's `MeterProcessor` maps them.
//! Pure: [`MeterBatch`] reads the `MeterData` of one batch (a `collect` stream, or one
//! `MeterDataCollection` of `collectBatch`) and [`MeterBatch::finish`] gives the [`Batch`] for
//! the `meter-analyzer-config` catalog.
//!
//! - A message counts only when its `metric` is set; one without (a header) is skipped before its
//!   identity is read, as upstream skips it.
//! - `service` and `serviceInstance`: the last non-empty value of the batch; the timestamp: the
//!   last one above zero. Both apply to every sample of the batch (an agent sets them on the
//!   first message only, or on all of them).
//! - A single value is one sample with the message's labels. A histogram is one sample per
//!   bucket, valued by the bucket's count, with the label `le` spelled as Java spells the bucket's
//!   lower bound (`0.0`, `5.0`, `1.0E7`), or `-9223372036854775808` for the bucket flagged
//!   `isNegativeInfinity`.
//! - Every sample gets the labels `service` and `instance`.
//!
//! Where upstream loses data without a word, hotrule refuses with a reason instead:
//! - a repeated label name, or a histogram label named `le`: upstream drops the message
//!   ([`MeterError::DuplicateLabel`], [`MeterError::LeLabel`]);
//! - a label named `service` or `instance`, which collides with the added ones: upstream loses
//!   the whole batch; hotrule refuses that message only ([`MeterError::ReservedLabel`]);
//! - a batch without service, instance or timestamp: upstream drops it silently
//!   ([`Incomplete`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::wire::{Label, MeterData, MeterHistogram, MeterSingleValue, meter_data};
use crate::data::ingest::java::double_to_string;
use crate::data::seam::{Batch, Catalog, Protocol, Sample};

/// The `le` of a bucket flagged `isNegativeInfinity`: Java's `String.valueOf(Long.MIN_VALUE)`.
pub const NEGATIVE_INFINITY_LE: &str = "-9223372036854775808";

/// Why one `MeterData` was refused (the rest of its batch is still taken).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    #[error("meter {meter:?}: the label {label:?} is repeated")]
    DuplicateLabel { meter: String, label: String },
    #[error("meter {meter:?}: a histogram may not have a label named \"le\" (its buckets are labeled le)")]
    LeLabel { meter: String },
    #[error("meter {meter:?}: the label {label:?} is reserved (every sample is labeled with the stream's service and instance)")]
    ReservedLabel { meter: String, label: String },
    #[error("a meter without a name")]
    NoName,
}

/// Why a whole batch was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incomplete {
    #[error("no message of the batch named a service")]
    NoService,
    #[error("no message of the batch named a service instance")]
    NoInstance,
    #[error("no message of the batch had a timestamp above zero")]
    NoTimestamp,
}

/// The samples of one batch as they are read.
#[derive(Debug, Default)]
pub struct MeterBatch {
    service: String,
    instance: String,
    timestamp_ms: i64,
    /// Name, labels (without service and instance) and value, in arrival order.
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl MeterBatch {
    /// Reads one message: its identity, then its meter. Header-only messages (no meter) change
    /// nothing, as upstream returns before reading their identity.
    pub fn read(&mut self, data: &MeterData) -> Result<(), MeterError> {
        let Some(metric) = &data.metric else { return Ok(()) };
        let read = match metric {
            meter_data::Metric::SingleValue(single) => single_value(single),
            meter_data::Metric::Histogram(histogram) => histogram_buckets(histogram),
        };
        // The identity is read even when the meter is refused (upstream reads it first).
        if !data.service.is_empty() {
            self.service.clone_from(&data.service);
        }
        if !data.service_instance.is_empty() {
            self.instance.clone_from(&data.service_instance);
        }
        if data.timestamp > 0 {
            self.timestamp_ms = data.timestamp;
        }
        self.samples.extend(read?);
        Ok(())
    }

    /// Samples read so far.
    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    /// The batch's samples, each labeled with the service and instance and stamped with the
    /// batch's timestamp; `Ok(None)` when no message carried a meter.
    pub fn finish(self, received_ms: i64) -> Result<Option<Batch>, Incomplete> {
        if self.samples.is_empty() {
            return Ok(None);
        }
        if self.service.is_empty() {
            return Err(Incomplete::NoService);
        }
        if self.instance.is_empty() {
            return Err(Incomplete::NoInstance);
        }
        if self.timestamp_ms <= 0 {
            return Err(Incomplete::NoTimestamp);
        }
        let (service, instance, timestamp_ms) = (self.service, self.instance, self.timestamp_ms);
        let samples = self
            .samples
            .into_iter()
            .map(|(name, mut labels, value)| {
                labels.insert("service".to_owned(), service.clone());
                labels.insert("instance".to_owned(), instance.clone());
                Sample::new(name, Arc::new(labels), value, timestamp_ms)
            })
            .collect();
        Ok(Some(Batch { protocol: Protocol::SkyWalkingMeter, catalog: Catalog::Meter, samples, received_ms }))
    }
}

/// The labels of a meter, refused when one repeats or is reserved.
fn labels_of(meter: &str, labels: &[Label]) -> Result<BTreeMap<String, String>, MeterError> {
    let mut map = BTreeMap::new();
    for label in labels {
        if label.name == "service" || label.name == "instance" {
            return Err(MeterError::ReservedLabel { meter: meter.to_owned(), label: label.name.clone() });
        }
        if map.insert(label.name.clone(), label.value.clone()).is_some() {
            return Err(MeterError::DuplicateLabel { meter: meter.to_owned(), label: label.name.clone() });
        }
    }
    Ok(map)
}

type ReadSamples = Vec<(String, BTreeMap<String, String>, f64)>;

fn single_value(single: &MeterSingleValue) -> Result<ReadSamples, MeterError> {
    if single.name.is_empty() {
        return Err(MeterError::NoName);
    }
    let labels = labels_of(&single.name, &single.labels)?;
    Ok(vec![(single.name.clone(), labels, single.value)])
}

fn histogram_buckets(histogram: &MeterHistogram) -> Result<ReadSamples, MeterError> {
    if histogram.name.is_empty() {
        return Err(MeterError::NoName);
    }
    let labels = labels_of(&histogram.name, &histogram.labels)?;
    if labels.contains_key("le") {
        return Err(MeterError::LeLabel { meter: histogram.name.clone() });
    }
    Ok(histogram
        .values
        .iter()
        .map(|bucket| {
            let le = if bucket.is_negative_infinity { NEGATIVE_INFINITY_LE.to_owned() } else { double_to_string(bucket.bucket) };
            let mut labels = labels.clone();
            labels.insert("le".to_owned(), le);
            (histogram.name.clone(), labels, bucket.count as f64)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::wire::MeterBucketValue;
    use super::*;

    fn single(name: &str, labels: &[(&str, &str)], value: f64) -> meter_data::Metric {
        meter_data::Metric::SingleValue(MeterSingleValue {
            name: name.into(),
            labels: labels.iter().map(|(n, v)| Label { name: (*n).into(), value: (*v).into() }).collect(),
            value,
        })
    }

    fn data(metric: Option<meter_data::Metric>, service: &str, instance: &str, timestamp: i64) -> MeterData {
        MeterData { metric, service: service.into(), service_instance: instance.into(), timestamp }
    }

    fn labels(sample: &Sample) -> Vec<(&str, &str)> {
        sample.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn the_first_message_names_the_batch_and_later_ones_need_not() {
        let mut batch = MeterBatch::default();
        batch.read(&data(Some(single("instance_pvm_gc_g0", &[], 7.0)), "svc", "inst", 1_700_000_000_000)).expect("read");
        batch.read(&data(Some(single("thread_pool", &[("pool", "a")], 3.5)), "", "", 0)).expect("read");
        let batch = batch.finish(42).expect("complete").expect("samples");
        assert_eq!((batch.protocol, batch.catalog, batch.received_ms), (Protocol::SkyWalkingMeter, Catalog::Meter, 42));
        assert_eq!(batch.samples.len(), 2);
        assert_eq!(batch.samples[0].name, "instance_pvm_gc_g0");
        assert_eq!(labels(&batch.samples[0]), vec![("instance", "inst"), ("service", "svc")]);
        assert_eq!(labels(&batch.samples[1]), vec![("instance", "inst"), ("pool", "a"), ("service", "svc")]);
        assert!(batch.samples.iter().all(|s| s.timestamp_ms == 1_700_000_000_000));
        assert_eq!(batch.samples[1].value, 3.5);
    }

    #[test]
    fn the_last_identity_and_the_last_positive_timestamp_win() {
        let mut batch = MeterBatch::default();
        batch.read(&data(Some(single("a", &[], 1.0)), "first", "i1", 1000)).expect("read");
        batch.read(&data(Some(single("b", &[], 2.0)), "second", "", 2000)).expect("read");
        batch.read(&data(Some(single("c", &[], 3.0)), "", "i2", -5)).expect("read");
        let batch = batch.finish(0).expect("complete").expect("samples");
        for sample in &batch.samples {
            assert_eq!((sample.label("service"), sample.label("instance"), sample.timestamp_ms), ("second", "i2", 2000));
        }
    }

    #[test]
    fn a_message_without_a_meter_sets_nothing() {
        let mut batch = MeterBatch::default();
        batch.read(&data(None, "header-service", "header-instance", 5000)).expect("read");
        batch.read(&data(Some(single("a", &[], 1.0)), "", "", 0)).expect("read");
        assert_eq!(batch.samples(), 1);
        assert_eq!(batch.finish(0).unwrap_err(), Incomplete::NoService);
        assert_eq!(MeterBatch::default().finish(0), Ok(None));
    }

    #[test]
    fn an_incomplete_batch_says_what_it_lacks() {
        let finish = |service: &str, instance: &str, ts: i64| {
            let mut batch = MeterBatch::default();
            batch.read(&data(Some(single("a", &[], 1.0)), service, instance, ts)).expect("read");
            batch.finish(0).err()
        };
        assert_eq!(finish("", "i", 1), Some(Incomplete::NoService));
        assert_eq!(finish("s", "", 1), Some(Incomplete::NoInstance));
        assert_eq!(finish("s", "i", 0), Some(Incomplete::NoTimestamp));
        assert_eq!(finish("s", "i", 1), None);
    }

    #[test]
    fn histogram_buckets_are_labeled_by_their_lower_bound_as_java_spells_it() {
        let histogram = meter_data::Metric::Histogram(MeterHistogram {
            name: "test_histogram".into(),
            labels: vec![Label { name: "path".into(), value: "/a".into() }],
            values: vec![
                MeterBucketValue { bucket: 99.0, count: 10, is_negative_infinity: true },
                MeterBucketValue { bucket: 0.0, count: 20, is_negative_infinity: false },
                MeterBucketValue { bucket: 10.0, count: 10, is_negative_infinity: false },
                MeterBucketValue { bucket: 0.005, count: 1, is_negative_infinity: false },
                MeterBucketValue { bucket: 1e7, count: 2, is_negative_infinity: false },
            ],
        });
        let mut batch = MeterBatch::default();
        batch.read(&data(Some(histogram), "s", "i", 60_000)).expect("read");
        let batch = batch.finish(0).expect("complete").expect("samples");
        let got: Vec<(&str, f64)> = batch.samples.iter().map(|s| (s.label("le"), s.value)).collect();
        assert_eq!(got, vec![(NEGATIVE_INFINITY_LE, 10.0), ("0.0", 20.0), ("10.0", 10.0), ("0.005", 1.0), ("1.0E7", 2.0)]);
        assert!(batch.samples.iter().all(|s| s.label("path") == "/a" && s.name == "test_histogram"));
    }

    #[test]
    fn refused_meters_name_their_reason_and_leave_the_rest() {
        let mut batch = MeterBatch::default();
        let dup = batch.read(&data(Some(single("m", &[("a", "1"), ("a", "2")], 1.0)), "s", "i", 1));
        assert_eq!(dup, Err(MeterError::DuplicateLabel { meter: "m".into(), label: "a".into() }));
        let reserved = batch.read(&data(Some(single("m", &[("service", "x")], 1.0)), "", "", 0));
        assert_eq!(reserved, Err(MeterError::ReservedLabel { meter: "m".into(), label: "service".into() }));
        let le = meter_data::Metric::Histogram(MeterHistogram {
            name: "h".into(),
            labels: vec![Label { name: "le".into(), value: "1".into() }],
            values: vec![],
        });
        assert_eq!(batch.read(&data(Some(le), "", "", 0)), Err(MeterError::LeLabel { meter: "h".into() }));
        assert_eq!(batch.read(&data(Some(single("", &[], 1.0)), "", "", 0)), Err(MeterError::NoName));
        batch.read(&data(Some(single("ok", &[], 5.0)), "", "", 0)).expect("read");
        assert_eq!(batch.samples(), 1);
        // The refused message's identity still counted, as upstream reads it first.
        let batch = batch.finish(0).expect("complete").expect("samples");
        assert_eq!((batch.samples[0].name.as_str(), batch.samples[0].label("service")), ("ok", "s"));
    }
}
