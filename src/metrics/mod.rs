//! Computed metric values at rest: the model every part of the data plane shares (storage,
//! query, export), and the seams between them.
//!
//! A value is keyed by metric, [`Entity`] and time bucket. Minute buckets are what dispatch
//! writes; hour and day buckets are downsampled from them with the metric's [`Downsampling`]
//! function. Readers get finalized values: an `avg` cell is already divided.

pub mod prom;
pub mod store;

use hotrule_mal_engine::{DataType, Downsampling, ScopeType};

pub use hotrule_mal_engine::{Entity, MetricValue, Value};

/// A time-bucket granularity. Buckets are written as SkyWalking writes them, in UTC:
/// `yyyyMMddHHmm`, `yyyyMMddHH`, `yyyyMMdd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Granularity {
    Minute,
    Hour,
    Day,
}

impl Granularity {
    pub const ALL: [Granularity; 3] = [Granularity::Minute, Granularity::Hour, Granularity::Day];

    /// `MINUTE`, `HOUR`, `DAY` (the `step` of `/query/metrics`).
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Minute => "MINUTE",
            Granularity::Hour => "HOUR",
            Granularity::Day => "DAY",
        }
    }

    pub fn parse(text: &str) -> Option<Granularity> {
        match text.to_ascii_uppercase().as_str() {
            "MINUTE" => Some(Granularity::Minute),
            "HOUR" => Some(Granularity::Hour),
            "DAY" => Some(Granularity::Day),
            _ => None,
        }
    }

    /// The length of one bucket in milliseconds.
    pub fn millis(self) -> i64 {
        match self {
            Granularity::Minute => 60_000,
            Granularity::Hour => 3_600_000,
            Granularity::Day => 86_400_000,
        }
    }

    /// The bucket of `minute_bucket` (`yyyyMMddHHmm`) at this granularity.
    pub fn from_minute_bucket(self, minute_bucket: i64) -> i64 {
        match self {
            Granularity::Minute => minute_bucket,
            Granularity::Hour => minute_bucket / 100,
            Granularity::Day => minute_bucket / 10_000,
        }
    }
}

/// What the registry knows of a stored metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricInfo {
    pub name: String,
    pub scope: ScopeType,
    pub data_type: DataType,
    pub downsampling: Downsampling,
}

/// One finalized value of one bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// The bucket at the read's granularity (`yyyyMMddHHmm`, `yyyyMMddHH` or `yyyyMMdd`).
    pub bucket: i64,
    /// The bucket's start, epoch milliseconds (UTC).
    pub start_ms: i64,
    pub value: Value,
}

/// The points of one metric for one entity, in bucket order. A histogram metric has one series
/// per entity and label group (the group is in each point's `Value::Histogram::labels`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    pub metric: String,
    pub entity: Entity,
    pub points: Vec<Point>,
}

/// Which series a read wants. Empty name filters match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesFilter {
    pub metric: String,
    pub service: Option<String>,
    pub instance: Option<String>,
    pub endpoint: Option<String>,
}

/// Why the metric store failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricStoreError {
    #[error(transparent)]
    Kv(#[from] crate::store::kv::KvError),
    #[error("stored metric value {key} is unreadable: {detail}")]
    Corrupt { key: String, detail: String },
}

/// Where dispatch writes computed values. `write` returns once the values are durable (synced):
/// a restart loses nothing it acknowledged.
pub trait MetricWriter: Send + Sync + 'static {
    fn write(&self, values: &[MetricValue]) -> Result<(), MetricStoreError>;

    /// Makes `info` the stored shape of its metric before values of that shape arrive. When the
    /// writer holds the metric under another shape (a structural apply with
    /// `allowStorageChange`, or a deleted rule's name reused with a new shape), the old series
    /// are dropped and the new one starts; the same shape, or a metric it has never seen, changes
    /// nothing. True when a reshape happened. Writers that keep no shapes ignore it.
    fn ensure_shape(&self, _info: &MetricInfo) -> Result<bool, MetricStoreError> {
        Ok(false)
    }
}

/// What queries read.
pub trait MetricReader: Send + Sync + 'static {
    /// Every metric with stored data, by name.
    fn metrics(&self) -> Result<Vec<MetricInfo>, MetricStoreError>;
    /// The series matching `filter` with their points in `[start_ms, end_ms]` at `granularity`.
    fn read(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<Series>, MetricStoreError>;
}
