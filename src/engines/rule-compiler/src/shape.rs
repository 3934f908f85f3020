//! Storage identity of what a rule file produces: MAL metric shapes and LAL rule keys.
//!
//! These are the inputs of classification (NO_CHANGE / NEW / FILTER_ONLY / STRUCTURAL) and of
//! the schema registry. Two metrics with equal `MetricShape` can share a backend measure.

use serde::{Deserialize, Serialize};

/// The scope a MAL expression assigns its samples to (the `service(...)`, `instance(...)` ... call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScopeType {
    Service,
    ServiceInstance,
    Endpoint,
    Process,
    ServiceRelation,
    ServiceInstanceRelation,
    ProcessRelation,
}

impl ScopeType {
    /// The reference's spelling: SERVICE, SERVICE_INSTANCE, ENDPOINT, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeType::Service => "SERVICE",
            ScopeType::ServiceInstance => "SERVICE_INSTANCE",
            ScopeType::Endpoint => "ENDPOINT",
            ScopeType::Process => "PROCESS",
            ScopeType::ServiceRelation => "SERVICE_RELATION",
            ScopeType::ServiceInstanceRelation => "SERVICE_INSTANCE_RELATION",
            ScopeType::ProcessRelation => "PROCESS_RELATION",
        }
    }
}

/// The downsampling function; `Avg` when the expression names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Downsampling {
    Avg,
    Sum,
    Latest,
    SumPerMin,
    Max,
    Min,
}

impl Downsampling {
    /// camelCase as used in the function name: avg, sum, latest, sumPerMin, max, min.
    pub fn camel(self) -> &'static str {
        match self {
            Downsampling::Avg => "avg",
            Downsampling::Sum => "sum",
            Downsampling::Latest => "latest",
            Downsampling::SumPerMin => "sumPerMin",
            Downsampling::Max => "max",
            Downsampling::Min => "min",
        }
    }
}

/// The value type stored for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DataType {
    /// A single value per entity (function suffix "").
    Single,
    /// Values labeled by aggregation labels beyond the scope labels ("Labeled").
    Labeled,
    /// `histogram()` without percentiles ("Histogram").
    Histogram,
    /// `histogram()` followed by `histogram_percentile([...])` with a non-empty list ("HistogramPercentile").
    HistogramPercentile,
}

impl DataType {
    pub fn suffix(self) -> &'static str {
        match self {
            DataType::Single => "",
            DataType::Labeled => "Labeled",
            DataType::Histogram => "Histogram",
            DataType::HistogramPercentile => "HistogramPercentile",
        }
    }
}

/// The storage shape of one MAL metric: what a backend measure is created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MetricShape {
    pub scope: ScopeType,
    pub downsampling: Downsampling,
    pub data_type: DataType,
}

impl MetricShape {
    /// `camelCase(downsampling) + Capitalize(dataType)`, e.g. `avg`, `avgLabeled`, `sumHistogram`.
    pub fn function_name(&self) -> String {
        format!("{}{}", self.downsampling.camel(), self.data_type.suffix())
    }
}

impl std::fmt::Display for MetricShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.function_name(), self.scope.as_str())
    }
}

/// A LAL rule's storage identity: `layer:name` (layer `auto` when empty) plus its output type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LalKey(pub String);
