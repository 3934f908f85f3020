//! The input data model: a [`Sample`] (one series point) and a [`Family`] (the samples of one
//! metric name in one batch, or an intermediate result of an expression).
//!
//! Labels are a `BTreeMap`, so equality ignores insertion order as SkyWalking's `ImmutableMap`
//! equality does. An empty family is SkyWalking's `SampleFamily.EMPTY`: every way of building a
//! family drops NaN samples, and a family left with none is EMPTY.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Label name to value, as a plain map.
pub type LabelMap = BTreeMap<String, String>;

/// A sample's labels: a shared map, so the many operations that keep a sample's labels copy a
/// pointer, not the map. A missing label reads as `""` in filters, `by` lists and scope keys, and
/// as `null` inside closures. Change one with `Arc::make_mut`.
pub type Labels = Arc<LabelMap>;

/// One point of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Labels,
    pub value: f64,
    /// Epoch milliseconds.
    pub timestamp_ms: i64,
}

impl Sample {
    pub fn new(name: impl Into<String>, labels: Labels, value: f64, timestamp_ms: i64) -> Sample {
        Sample {
            name: name.into(),
            labels,
            value,
            timestamp_ms,
        }
    }

    /// A label's value, `""` when missing (SkyWalking's `getOrDefault(key, "")`).
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }

    pub(crate) fn with_value(&self, value: f64) -> Sample {
        Sample {
            value,
            ..self.clone()
        }
    }
}

/// Builds labels from pairs; handy in tests and callers.
pub fn labels<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Labels {
    Arc::new(
        pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
    )
}

/// A sample family. `samples` never holds a NaN value; empty means EMPTY. Shared (`Arc`): reading
/// a family name in an expression does not copy its samples.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Family {
    samples: Arc<Vec<Sample>>,
}

impl Family {
    /// SkyWalking's `SampleFamily.build`: drops NaN values.
    pub fn build(mut samples: Vec<Sample>) -> Family {
        samples.retain(|sample| !sample.value.is_nan());
        Family {
            samples: Arc::new(samples),
        }
    }

    pub fn empty() -> Family {
        Family::default()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    pub fn into_samples(self) -> Vec<Sample> {
        Arc::try_unwrap(self.samples).unwrap_or_else(|shared| shared.as_ref().clone())
    }

    /// Every sample with a new value from `transform`; NaN results are dropped.
    pub(crate) fn map_values(&self, transform: impl Fn(f64) -> f64) -> Family {
        Family::build(
            self.samples
                .iter()
                .map(|sample| sample.with_value(transform(sample.value)))
                .collect(),
        )
    }
}
