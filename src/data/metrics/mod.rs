//! Computed metric values at rest: the model every part of the data plane shares (storage,
//! query, export), and the seams between them.
//!
//! A value is keyed by metric, [`Entity`] and time bucket. Minute buckets are what dispatch
//! writes; hour and day buckets are downsampled from them with the metric's [`Downsampling`]
//! function. Readers get finalized values: an `avg` cell is already divided.

pub mod prom;
pub mod cells;
pub mod handoff;
pub mod partial;

pub use partial::PartialSeries;

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

    /// The bucket holding the instant `ms` (epoch milliseconds, UTC).
    pub fn bucket_of(self, ms: i64) -> i64 {
        self.from_minute_bucket(hotrule_mal_engine::minute_bucket(ms))
    }

    /// The start (epoch milliseconds, UTC) of `bucket` at this granularity; `None` when it names
    /// no real minute, hour or day (`202601011260`, February 30th, a negative bucket).
    pub fn bucket_start_ms(self, bucket: i64) -> Option<i64> {
        let (day_bucket, hour, minute) = match self {
            Granularity::Minute => (bucket / 10_000, bucket / 100 % 100, bucket % 100),
            Granularity::Hour => (bucket / 100, bucket % 100, 0),
            Granularity::Day => (bucket, 0, 0),
        };
        let date = (day_bucket / 10_000, day_bucket / 100 % 100, day_bucket % 100);
        if bucket < 0 || !(0..24).contains(&hour) || !(0..60).contains(&minute) || !(1..=12).contains(&date.1) {
            return None;
        }
        let days = hotrule_mal_engine::days_from_civil(date.0, date.1, date.2);
        // A day past its month's end comes back as another date.
        if hotrule_mal_engine::civil_from_days(days) != date {
            return None;
        }
        days.checked_mul(24)?.checked_add(hour)?.checked_mul(60)?.checked_add(minute)?.checked_mul(60_000)
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

impl SeriesFilter {
    /// Whether `entity`'s service, instance and endpoint names pass (the metric name is the
    /// reader's to check).
    pub fn passes(&self, entity: &Entity) -> bool {
        let same = |wanted: &Option<String>, have: &str| wanted.as_deref().is_none_or(|w| w == have);
        same(&self.service, &entity.service_name) && same(&self.instance, &entity.instance_name) && same(&self.endpoint, &entity.endpoint_name)
    }
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
    /// The series matching `filter` with their points in `[start_ms, end_ms]` at `granularity`:
    /// the stored partial state ([`MetricReader::read_partials`]), finalized.
    fn read(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<Series>, MetricStoreError> {
        let partials = self.read_partials(filter, granularity, start_ms, end_ms)?;
        Ok(partials.iter().map(|series| series.finalize(granularity)).collect())
    }

    /// The same series as stored partial state (cells), unfinalized: what a cluster read merges
    /// exactly ([`partial::merge_partials`]).
    fn read_partials(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<PartialSeries>, MetricStoreError>;

    /// What a cluster read takes from this node: its cells ([`MetricReader::read_partials`]),
    /// and the partial state on its way from it to the entities' owners with the applied marks
    /// it holds as an owner (`cells::handoff`), read as one consistent state. A reader that hands
    /// nothing off has nothing in flight.
    fn read_partial_state(
        &self,
        filter: &SeriesFilter,
        granularity: Granularity,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<(Vec<PartialSeries>, partial::InFlight), MetricStoreError> {
        Ok((self.read_partials(filter, granularity, start_ms, end_ms)?, partial::InFlight::default()))
    }

    /// What changes whenever partial state moves on this node (`cells::handoff`): a cluster read
    /// compares it after gathering every answer and reads again when a node's changed. 0 for a
    /// reader that hands nothing off.
    fn handoff_generation(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::Granularity;

    #[test]
    fn buckets_round_trip_and_invalid_ones_have_no_start() {
        // 2024-02-29 23:59 UTC (a leap day).
        let ms = 1_709_251_140_000;
        assert_eq!(Granularity::Minute.bucket_of(ms), 202402292359);
        assert_eq!(Granularity::Hour.bucket_of(ms), 2024022923);
        assert_eq!(Granularity::Day.bucket_of(ms), 20240229);
        assert_eq!(Granularity::Minute.bucket_start_ms(202402292359), Some(ms));
        assert_eq!(Granularity::Hour.bucket_start_ms(2024022923), Some(ms - 59 * 60_000));
        assert_eq!(Granularity::Day.bucket_start_ms(20240229), Some(ms - (23 * 60 + 59) * 60_000));
        for bad in [202302290000, 202601011260, 202601012400, 202613010000, 202600010000, -1] {
            assert_eq!(Granularity::Minute.bucket_start_ms(bad), None, "{bad}");
        }
        assert_eq!(Granularity::Day.bucket_start_ms(20250431), None, "April has 30 days");
        assert_eq!(Granularity::Minute.bucket_start_ms(i64::MAX), None, "no overflow");
    }
}
