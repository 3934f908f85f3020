//! The MAL function catalogue: every function a sample family can be called with, its arguments,
//! and its role in shape extraction; plus small readers for literal arguments.
//!
//! The catalogue follows `SampleFamily` in SkyWalking HEAD and every function the bundled rules
//! use. Validation against it is in `mal_validate.rs`, shape extraction in `mal_shape.rs`.

use crate::ast::{Expr, ExprKind};
use crate::shape::ScopeType;

/// Classes whose constants and static methods MAL expressions refer to (`Layer.GENERAL`...). A bare
/// name that is not one of these is a sample family.
pub const CLASS_NAMES: &[&str] = &[
    "Layer",
    "DetectPoint",
    "K8sRetagType",
    "TimeUnit",
    "ProcessRegistry",
    "DownsamplingType",
];

/// `downsampling(X)`: the `DownsamplingType` constants (the docs' MEAN and COUNT do not exist there).
pub(crate) const DOWNSAMPLING: &[&str] = &["AVG", "SUM", "LATEST", "SUM_PER_MIN", "MAX", "MIN"];

pub(crate) const DETECT_POINTS: &[&str] = &["CLIENT", "SERVER", "PROXY"];
pub(crate) const RETAG_TYPES: &[&str] = &["Pod2Service"];
pub(crate) const TIME_UNITS: &[&str] = &[
    "NANOSECONDS",
    "MICROSECONDS",
    "MILLISECONDS",
    "SECONDS",
    "MINUTES",
    "HOURS",
    "DAYS",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgKind {
    /// A non-empty list of label names: `['a', 'b']` (parentheses around it are tolerated, as
    /// Groovy does); SkyWalking's grammar has no empty string list.
    Labels,
    Str,
    /// A string that is a Java regular expression (`tagMatch` values).
    Regex,
    /// An ISO-8601 duration string such as `'PT1M'`.
    Duration,
    Closure,
    Number,
    /// A sample family or a number (the operand of `div`, `safeDiv`...).
    Value,
    RetagType,
    TimeUnit,
    Downsampling,
    /// A list of integer percentiles in 0..=100.
    Percentiles,
    /// Scope functions take label lists, delimiter/label-name strings, `Layer.X`, `DetectPoint.X`
    /// and (for `instance`) a properties closure, in several overloads.
    ScopeArg,
}

/// What a function does; drives shape extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Plain,
    Aggregation,
    Histogram,
    Percentile,
    Downsampling,
    Scope(ScopeType),
}

pub(crate) struct Function {
    pub name: &'static str,
    pub role: Role,
    pub min: usize,
    pub max: usize,
    /// Kind of argument i; the last entry repeats for further arguments.
    pub kinds: &'static [ArgKind],
    pub named: &'static [&'static str],
    /// Arguments come in (tag, value) pairs.
    pub pairs: bool,
}

const fn function(
    name: &'static str,
    role: Role,
    min: usize,
    max: usize,
    kinds: &'static [ArgKind],
) -> Function {
    Function {
        name,
        role,
        min,
        max,
        kinds,
        named: &[],
        pairs: false,
    }
}

const fn tag_filter(name: &'static str, kinds: &'static [ArgKind]) -> Function {
    Function {
        name,
        role: Role::Plain,
        min: 2,
        max: usize::MAX,
        kinds,
        named: &[],
        pairs: true,
    }
}

/// `sum(['a', 'b'])` or `sum(by: [...])`: the label list is required, as `SampleFamily` has no
/// aggregation without one (`sum([])` aggregates everything into one sample).
const fn aggregation(name: &'static str) -> Function {
    Function {
        name,
        role: Role::Aggregation,
        min: 1,
        max: 1,
        kinds: &[ArgKind::Labels],
        // SkyWalking's MAL grammar has no named arguments (`by: [...]`, `by=[...]`).
        named: &[],
        pairs: false,
    }
}

const fn scope(name: &'static str, scope: ScopeType, min: usize, max: usize) -> Function {
    function(name, Role::Scope(scope), min, max, &[ArgKind::ScopeArg])
}

use ArgKind as K;

pub(crate) const FUNCTIONS: &[Function] = &[
    tag_filter("tagEqual", &[K::Str]),
    tag_filter("tagNotEqual", &[K::Str]),
    tag_filter("tagMatch", &[K::Str, K::Regex, K::Str, K::Regex]),
    tag_filter("tagNotMatch", &[K::Str, K::Regex, K::Str, K::Regex]),
    function("valueEqual", Role::Plain, 1, 1, &[K::Number]),
    function("valueNotEqual", Role::Plain, 1, 1, &[K::Number]),
    function("valueGreater", Role::Plain, 1, 1, &[K::Number]),
    function("valueGreaterEqual", Role::Plain, 1, 1, &[K::Number]),
    function("valueLess", Role::Plain, 1, 1, &[K::Number]),
    function("valueLessEqual", Role::Plain, 1, 1, &[K::Number]),
    aggregation("sum"),
    aggregation("min"),
    aggregation("max"),
    aggregation("avg"),
    aggregation("count"),
    function("increase", Role::Plain, 1, 1, &[K::Duration]),
    function("rate", Role::Plain, 1, 1, &[K::Duration]),
    function("irate", Role::Plain, 0, 0, &[]),
    function("plus", Role::Plain, 1, 1, &[K::Value]),
    function("minus", Role::Plain, 1, 1, &[K::Value]),
    function("multiply", Role::Plain, 1, 1, &[K::Value]),
    function("div", Role::Plain, 1, 1, &[K::Value]),
    function("safeDiv", Role::Plain, 1, 1, &[K::Value]),
    function("negative", Role::Plain, 0, 0, &[]),
    function("tag", Role::Plain, 1, 1, &[K::Closure]),
    function("filter", Role::Plain, 1, 1, &[K::Closure]),
    function("forEach", Role::Plain, 2, 2, &[K::Labels, K::Closure]),
    function(
        "retagByK8sMeta",
        Role::Plain,
        4,
        4,
        &[K::Str, K::RetagType, K::Str, K::Str],
    ),
    Function {
        name: "histogram",
        role: Role::Histogram,
        min: 0,
        max: 2,
        kinds: &[K::Str, K::TimeUnit],
        named: &[],
        pairs: false,
    },
    function(
        "histogram_percentile",
        Role::Percentile,
        1,
        1,
        &[K::Percentiles],
    ),
    function("downsampling", Role::Downsampling, 1, 1, &[K::Downsampling]),
    function("decorate", Role::Plain, 1, 1, &[K::Closure]),
    scope("service", ScopeType::Service, 2, 3),
    scope("instance", ScopeType::ServiceInstance, 3, 6),
    scope("endpoint", ScopeType::Endpoint, 3, 4),
    scope("process", ScopeType::Process, 4, 4),
    scope("serviceRelation", ScopeType::ServiceRelation, 4, 6),
    scope(
        "serviceInstanceRelation",
        ScopeType::ServiceInstanceRelation,
        6,
        8,
    ),
    scope("processRelation", ScopeType::ProcessRelation, 6, 6),
];

/// Global functions callable without a receiver outside closures.
pub(crate) const GLOBAL_FUNCTIONS: &[&str] = &["time"];

pub(crate) fn lookup(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|function| function.name == name)
}

/// `Class.CONSTANT` as `(class, constant)`.
pub fn class_constant(expr: &Expr) -> Option<(&str, &str)> {
    match &expr.kind {
        ExprKind::Property { receiver, name, .. } => match &receiver.kind {
            ExprKind::Name(class) if CLASS_NAMES.contains(&class.as_str()) => {
                Some((class.as_str(), name.name.as_str()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Strips parentheses: `sum((['a']))` is `sum(['a'])`.
pub fn unparen(mut expr: &Expr) -> &Expr {
    while let ExprKind::Paren(inner) = &expr.kind {
        expr = inner;
    }
    expr
}

/// The strings of a list literal of string literals, or `None` if it is anything else.
pub fn string_list(expr: &Expr) -> Option<Vec<&str>> {
    match &unparen(expr).kind {
        ExprKind::List(items) => items.iter().map(string_literal).collect(),
        _ => None,
    }
}

pub fn string_literal(expr: &Expr) -> Option<&str> {
    match &unparen(expr).kind {
        ExprKind::Str(literal) => Some(literal.value.as_str()),
        _ => None,
    }
}
