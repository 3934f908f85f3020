//! What an evaluation produces: [`MetricValue`]s keyed by metric, [`Entity`] and minute bucket,
//! with SkyWalking's conversion of computed doubles to the longs its storage keeps.

use std::collections::BTreeMap;

pub use hotrule_rule_compiler::{DataType, Downsampling, ScopeType};

/// `DetectPoint` of a relation entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DetectPoint {
    Client,
    Server,
    Proxy,
}

/// A meter entity as SkyWalking's `MeterEntity` names it. Fields a scope does not use stay empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entity {
    pub scope: ScopeType,
    /// SERVICE, SERVICE_INSTANCE, ENDPOINT, PROCESS, PROCESS_RELATION: the service. Relations:
    /// the source side for CLIENT, the destination for SERVER (as SkyWalking's traffic sets it).
    pub service_name: String,
    pub instance_name: String,
    pub endpoint_name: String,
    pub process_name: String,
    pub source_service_name: String,
    pub dest_service_name: String,
    pub source_instance_name: String,
    pub dest_instance_name: String,
    pub source_process_id: String,
    pub dest_process_id: String,
    pub detect_point: Option<DetectPoint>,
    pub component_id: i32,
    /// `Layer.X` name (`UNDEFINED` when unknown); for PROCESS, the value of the layer label.
    pub layer: String,
    /// From `instance(..., propertiesClosure)`.
    pub instance_properties: Option<BTreeMap<String, String>>,
    /// `decorate({ me -> me.attr0 = ... })`, SERVICE entities only.
    pub attrs: [Option<String>; 6],
}

impl Entity {
    pub fn new(scope: ScopeType) -> Entity {
        Entity {
            scope,
            service_name: String::new(),
            instance_name: String::new(),
            endpoint_name: String::new(),
            process_name: String::new(),
            source_service_name: String::new(),
            dest_service_name: String::new(),
            source_instance_name: String::new(),
            dest_instance_name: String::new(),
            source_process_id: String::new(),
            dest_process_id: String::new(),
            detect_point: None,
            component_id: 0,
            layer: String::new(),
            instance_properties: None,
            attrs: Default::default(),
        }
    }
}

/// A stored value, already converted to SkyWalking's longs ([`to_long`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Single(i64),
    /// A `DataTable`: key = the sample's labels after the scope labels are removed, written
    /// `k1=v1,k2=v2` (sorted by label name), value per key; a repeated key keeps the last value.
    Labeled(Vec<(String, i64)>),
    /// One bucket set for one label group (all labels but `le`): `(upper bound, count)` in the
    /// order of `le`; `percentiles` is empty for a plain histogram.
    Histogram {
        labels: String,
        buckets: Vec<(i64, i64)>,
        percentiles: Vec<u32>,
    },
}

/// One emitted value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricValue {
    pub metric: String,
    /// The `metricsRules` entry that produced it (several rules may feed one metric).
    pub rule: String,
    pub entity: Entity,
    /// `yyyyMMddHHmm` of the first sample's timestamp, in UTC.
    pub time_bucket: i64,
    /// The first sample's timestamp, epoch milliseconds: what `latest` orders by when values
    /// of one bucket meet (on one node or across nodes).
    pub timestamp_ms: i64,
    pub value: Value,
    pub data_type: DataType,
    pub downsampling: Downsampling,
}

/// SkyWalking's `Analyzer.getValue`: `v <= 0 -> 0`, `0 < v < 1 -> 1`, else `Math.round`
/// (half-up); +Infinity saturates to `i64::MAX`.
pub fn to_long(value: f64) -> i64 {
    if value.is_nan() || value <= 0.0 {
        0
    } else if value < 1.0 {
        1
    } else {
        // `as` saturates, like Java's Math.round on an out-of-range double.
        (value + 0.5).floor() as i64
    }
}

/// The minute bucket `yyyyMMddHHmm` of an epoch-millisecond timestamp, in UTC.
pub fn minute_bucket(timestamp_ms: i64) -> i64 {
    let minutes = timestamp_ms.div_euclid(60_000);
    let days = minutes.div_euclid(1440);
    let minute_of_day = minutes.rem_euclid(1440);
    let (year, month, day) = civil_from_days(days);
    ((year * 100 + month) * 100 + day) * 10_000 + (minute_of_day / 60) * 100 + minute_of_day % 60
}

/// Days since 1970-01-01 of a proleptic Gregorian civil date (Howard Hinnant's days-from-civil).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(year, month, day)` of a day count since 1970-01-01 (Howard Hinnant's
/// days-to-civil, proleptic Gregorian).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_conversion_follows_analyzer_get_value() {
        assert_eq!(to_long(-3.0), 0);
        assert_eq!(to_long(0.0), 0);
        assert_eq!(to_long(0.2), 1);
        assert_eq!(to_long(1.5), 2);
        assert_eq!(to_long(2.4), 2);
        assert_eq!(to_long(f64::INFINITY), i64::MAX);
        assert_eq!(to_long(f64::NAN), 0);
    }

    #[test]
    fn minute_buckets_in_utc() {
        assert_eq!(minute_bucket(0), 197_001_010_000);
        // 2024-02-29T23:59:30Z
        assert_eq!(minute_bucket(1_709_251_170_000), 202_402_292_359);
        assert_eq!(minute_bucket(-60_000), 196_912_312_359);
    }
}
