//! Storage shape of a MAL metric, extracted from its full expression (reference §2.4).
//!
//! The expression is walked outside closures in evaluation order (receiver, then arguments, then
//! the call itself; left operand before right), the way `DSL.extractMetadata` observes the calls:
//! - **scope** from the scope call (`service`, `instance`, ...);
//! - **downsampling** from the last `downsampling(X)`, `AVG` by default;
//! - **data type**: `HistogramPercentile` if `histogram()` is called and some
//!   `histogram_percentile([...])` has a non-empty list; `Histogram` if `histogram()` is called;
//!   `Labeled` if the labels of the *last* aggregation (`sum/avg/max/min/count`) minus the scope
//!   labels are non-empty; `Single` otherwise. `le` gets no special treatment: every metric that
//!   aggregates by `le` in the bundled rules is a histogram, which wins before labels are looked at.
//!
//! **Scope labels** are all label-list arguments of the scope call(s) plus their string arguments.
//! Strings cover `process(..., 'layer')` and `processRelation('side', ..., 'component')`, whose
//! strings name labels; delimiters such as `'::'` are strings too, but subtracting a name no
//! aggregation uses changes nothing.
//!
//! **Exactly one scope.** An expression needs a scope call. Several are allowed only when written
//! back to back in one chain, `service(...).instance(...)`: the bundled `k8s-instance`,
//! `redis-instance`, `banyandb-instance` and others do this in `expSuffix`, and upstream each call
//! overwrites the scope type, so the last one decides while the labels of all of them count. Two
//! scope calls anywhere else (one in `exp` and one in `expSuffix`, or one per operand) are an
//! error: upstream the later call silently overrides the earlier scope, which the bundled
//! miniprogram files warn about in a comment.

use std::collections::BTreeSet;

use crate::CompileError;
use crate::ast::{Call, Expr, ExprKind, GStringPart};
use crate::mal_catalog::{Role, class_constant, lookup, string_list, string_literal, unparen};
use crate::model::pos_of;
use crate::position::Pos;
use crate::shape::{DataType, Downsampling, MetricShape, ScopeType};

#[derive(Debug, thiserror::Error)]
enum ShapeError {
    #[error(
        "metric '{metric}' has no scope function (service, instance, endpoint, process, serviceRelation, serviceInstanceRelation or processRelation) in its expression or expSuffix"
    )]
    NoScope { metric: String },
    #[error(
        "metric '{metric}' has more than one scope: '{first}' at line {line}, column {column} and '{second}' here; keep one, or chain them directly as in service(...).instance(...)"
    )]
    TwoScopes {
        metric: String,
        first: String,
        line: usize,
        column: usize,
        second: String,
    },
}

/// One scope call as seen by the walk.
struct ScopeCall {
    scope: ScopeType,
    name: String,
    pos: Pos,
    labels: Vec<String>,
    /// Its receiver is directly another scope call: it continues that call's chain.
    continues_chain: bool,
}

#[derive(Default)]
struct Observed {
    scopes: Vec<ScopeCall>,
    aggregation_labels: Option<Vec<String>>,
    downsampling: Option<Downsampling>,
    histogram: bool,
    percentiles: bool,
}

/// The shape of `metric` from its full expression; `exp_pos` is where to report a missing scope.
pub(crate) fn extract(
    expr: &Expr,
    metric: &str,
    exp_pos: Pos,
) -> Result<MetricShape, CompileError> {
    let mut observed = Observed::default();
    walk(expr, &mut observed);
    let mut chains = observed.scopes.iter().filter(|call| !call.continues_chain);
    let Some(first) = chains.next() else {
        return Err(exp_pos.error(ShapeError::NoScope {
            metric: metric.to_owned(),
        }));
    };
    if let Some(second) = chains.next() {
        return Err(second.pos.error(ShapeError::TwoScopes {
            metric: metric.to_owned(),
            first: first.name.clone(),
            line: first.pos.line,
            column: first.pos.column,
            second: second.name.clone(),
        }));
    }
    let scope = observed
        .scopes
        .last()
        .map_or(first.scope, |call| call.scope);
    let scope_labels: BTreeSet<&str> = observed
        .scopes
        .iter()
        .flat_map(|call| call.labels.iter().map(String::as_str))
        .collect();
    let data_type = if observed.histogram && observed.percentiles {
        DataType::HistogramPercentile
    } else if observed.histogram {
        DataType::Histogram
    } else if observed
        .aggregation_labels
        .unwrap_or_default()
        .iter()
        .any(|label| !scope_labels.contains(label.as_str()))
    {
        DataType::Labeled
    } else {
        DataType::Single
    };
    Ok(MetricShape {
        scope,
        downsampling: observed.downsampling.unwrap_or(Downsampling::Avg),
        data_type,
    })
}

fn walk(expr: &Expr, observed: &mut Observed) {
    match &expr.kind {
        ExprKind::Call(call) => {
            if let Some(receiver) = &call.receiver {
                walk(receiver, observed);
            }
            for arg in &call.args {
                walk(&arg.value, observed);
            }
            if call.receiver.is_some() && call.namespace.is_none() {
                observe_call(call, observed);
            }
        }
        ExprKind::Paren(inner) | ExprKind::Unary { operand: inner, .. } => walk(inner, observed),
        ExprKind::Binary { left, right, .. } => {
            walk(left, observed);
            walk(right, observed);
        }
        ExprKind::Property { receiver, .. }
        | ExprKind::Cast {
            value: receiver, ..
        } => walk(receiver, observed),
        ExprKind::Index { receiver, index } => {
            walk(receiver, observed);
            walk(index, observed);
        }
        ExprKind::Ternary {
            condition,
            then,
            otherwise,
        } => {
            walk(condition, observed);
            walk(then, observed);
            walk(otherwise, observed);
        }
        ExprKind::Elvis { value, fallback }
        | ExprKind::Assign {
            target: value,
            value: fallback,
            ..
        } => {
            walk(value, observed);
            walk(fallback, observed);
        }
        ExprKind::List(items) => items.iter().for_each(|item| walk(item, observed)),
        ExprKind::Map(entries) => entries
            .iter()
            .for_each(|entry| walk(&entry.value, observed)),
        ExprKind::GString(parts) => parts.iter().for_each(|part| {
            if let GStringPart::Expr(inner) = part {
                walk(inner, observed);
            }
        }),
        ExprKind::Closure(_)
        | ExprKind::Name(_)
        | ExprKind::Number(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Null => {}
    }
}

fn observe_call(call: &Call, observed: &mut Observed) {
    let Some(function) = lookup(&call.method.name) else {
        return;
    };
    match function.role {
        Role::Plain => {}
        Role::Aggregation => {
            let labels = call
                .args
                .first()
                .and_then(|arg| string_list(&arg.value))
                .unwrap_or_default();
            observed.aggregation_labels = Some(labels.into_iter().map(str::to_owned).collect());
        }
        Role::Histogram => observed.histogram = true,
        Role::Percentile => {
            let non_empty = call.args.first().is_some_and(|arg| matches!(&unparen(&arg.value).kind, ExprKind::List(items) if !items.is_empty()));
            observed.percentiles |= non_empty;
        }
        Role::Downsampling => {
            if let Some(downsampling) = call
                .args
                .first()
                .and_then(|arg| downsampling_of(&arg.value))
            {
                observed.downsampling = Some(downsampling);
            }
        }
        Role::Scope(scope) => {
            let mut labels = Vec::new();
            for arg in &call.args {
                if let Some(list) = string_list(&arg.value) {
                    labels.extend(list.into_iter().map(str::to_owned));
                } else if let Some(label) = string_literal(&arg.value) {
                    labels.push(label.to_owned());
                }
            }
            let continues_chain = matches!(
                call.receiver.as_deref().map(|receiver| &receiver.kind),
                Some(ExprKind::Call(inner)) if inner.namespace.is_none()
                    && lookup(&inner.method.name).is_some_and(|f| matches!(f.role, Role::Scope(_)))
            );
            observed.scopes.push(ScopeCall {
                scope,
                name: call.method.name.clone(),
                pos: pos_of(call.method.span),
                labels,
                continues_chain,
            });
        }
    }
}

fn downsampling_of(expr: &Expr) -> Option<Downsampling> {
    let name = match (&unparen(expr).kind, class_constant(expr)) {
        (ExprKind::Name(name), _) => name.as_str(),
        (_, Some(("DownsamplingType", name))) => name,
        _ => return None,
    };
    Some(match name {
        "AVG" => Downsampling::Avg,
        "SUM" => Downsampling::Sum,
        "LATEST" => Downsampling::Latest,
        "SUM_PER_MIN" => Downsampling::SumPerMin,
        "MAX" => Downsampling::Max,
        "MIN" => Downsampling::Min,
        _ => return None,
    })
}
