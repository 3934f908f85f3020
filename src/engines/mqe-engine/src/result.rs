//! The result model, as SkyWalking's `ExpressionResult` / `MQEValues` / `MQEValue` (server-core
//! `query/mqe`). An empty value is `value: None` (upstream: `isEmptyValue`).

/// `ExpressionResultType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultType {
    Unknown,
    SingleValue,
    TimeSeriesValues,
    SortedList,
    RecordList,
}

impl ResultType {
    /// The GraphQL enum name (`SINGLE_VALUE`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ResultType::Unknown => "UNKNOWN",
            ResultType::SingleValue => "SINGLE_VALUE",
            ResultType::TimeSeriesValues => "TIME_SERIES_VALUES",
            ResultType::SortedList => "SORTED_LIST",
            ResultType::RecordList => "RECORD_LIST",
        }
    }
}

/// A label (`KeyValue`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyValue {
    pub key: String,
    pub value: String,
}

impl KeyValue {
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Self {
        KeyValue { key: key.into(), value: value.into() }
    }
}

/// The owner of a `top_n` entry (`Owner`, since SkyWalking 10.2); filled by the metric source.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owner {
    pub scope: Option<String>,
    pub service_id: Option<String>,
    pub service_name: Option<String>,
    pub normal: Option<bool>,
    pub service_instance_id: Option<String>,
    pub service_instance_name: Option<String>,
    pub endpoint_id: Option<String>,
    pub endpoint_name: Option<String>,
}

/// One point (`MQEValue`): `id` is the point's epoch-ms timestamp for series, the entity or record
/// name for lists, `None` for aggregates; `value` is `None` when empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MQEValue {
    pub id: Option<String>,
    pub value: Option<f64>,
    pub trace_id: Option<String>,
    pub owner: Option<Owner>,
}

impl MQEValue {
    pub fn new(id: Option<String>, value: Option<f64>) -> Self {
        MQEValue { id, value, trace_id: None, owner: None }
    }
    pub fn is_empty(&self) -> bool {
        self.value.is_none()
    }
    /// The GraphQL `value` string: `java.text.DecimalFormat` with grouping off (at most three
    /// decimals, half-even), `None` when empty.
    pub fn value_string(&self) -> Option<String> {
        self.value.map(format_value)
    }
}

/// One series or list (`MQEValues`): the metric labels (sorted by key for labeled metrics) and its
/// values.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MQEValues {
    pub labels: Vec<KeyValue>,
    pub values: Vec<MQEValue>,
}

/// The result of an expression (`ExpressionResult`). Errors are carried in `error` (with
/// `result_type` usually `Unknown`), as SkyWalking returns them; nothing panics.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpressionResult {
    pub result_type: ResultType,
    pub results: Vec<MQEValues>,
    pub error: Option<String>,
    pub labeled_result: bool,
    /// Upstream's `isBoolResult` flag as the visitor leaves it (see [`crate::Expr::is_bool_result`]
    /// for the structural check the alarm verifier relies on).
    pub bool_result: bool,
}

impl Default for ExpressionResult {
    fn default() -> Self {
        ExpressionResult {
            result_type: ResultType::Unknown,
            results: Vec::new(),
            error: None,
            labeled_result: false,
            bool_result: false,
        }
    }
}

impl ExpressionResult {
    /// `getErrorResult`: type UNKNOWN with the message.
    pub fn error(message: impl Into<String>) -> Self {
        ExpressionResult { error: Some(message.into()), ..Default::default() }
    }
    /// A one-value SINGLE_VALUE result (a scalar).
    pub fn single(value: Option<f64>) -> Self {
        ExpressionResult {
            result_type: ResultType::SingleValue,
            results: vec![MQEValues { labels: Vec::new(), values: vec![MQEValue::new(None, value)] }],
            ..Default::default()
        }
    }
    /// True when `error` holds a non-blank message (`StringUtil.isNotBlank`).
    pub fn has_error(&self) -> bool {
        self.error.as_deref().is_some_and(|e| !e.trim().is_empty())
    }
    /// The first value of the first series, if any (handy for SINGLE_VALUE results).
    pub fn first_value(&self) -> Option<f64> {
        self.results.first().and_then(|r| r.values.first()).and_then(|v| v.value)
    }
}

/// Formats a double as `new DecimalFormat()` with grouping off does in SkyWalking's
/// `MetricsExpressionQuery`: at most three fraction digits, HALF_EVEN on the exact binary value,
/// trailing zeros dropped, `-0` kept for negative values rounding to zero.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "\u{221e}".to_string() } else { "-\u{221e}".to_string() };
    }
    // Whole numbers (most stored values are longs) are their integer digits: the same text as
    // the general path below, without its exact-decimal formatting.
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        return if v == 0.0 && v.is_sign_negative() { "-0".to_string() } else { (v as i64).to_string() };
    }
    // Rust's fixed-precision formatting rounds the exact value half-to-even, as DecimalFormat does.
    let mut s = format!("{:.3}", v);
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" && !v.is_sign_negative() {
        s = "0".to_string();
    }
    s
}
