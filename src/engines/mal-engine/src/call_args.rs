//! The constant arguments of a rule's family functions, read once when the file is prepared
//! instead of on every evaluation.
//!
//! A call's label lists (`sum(['service', 'instance'])`), scope arguments
//! (`instance(['service'], ['instance'], Layer.GENERAL)`) and tag pairs (`tagEqual('k', 'v')`) are
//! literals: reading them from the syntax tree on each run allocated their strings every time,
//! a large share of a one-sample (log MAL) evaluation. [`CallArgs::of`] reads them for every call
//! of an expression outside closures; the evaluator takes a call's prepared arguments by the
//! call's address in the syntax tree. The tree is the prepared file's own and is shared, never
//! copied (`PreparedFile` keeps it behind an `Arc`), so those addresses name the same calls for
//! as long as the table exists.
//!
//! The readers below are the only ones: the evaluator calls the same functions when a call has
//! no prepared entry (a bare expression from `run_expression`, or arguments that do not read, so
//! the error is raised where it always was, on the evaluation that reaches the call).

use hotrule_rule_compiler::ScopeType;
use hotrule_rule_compiler::ast::{Arg, Call, Expr, ExprKind};

use crate::ast_read::{class_constant, string_list, string_literal, unparen};
use crate::error::EvalError;
use crate::output::DetectPoint;
use crate::scope::ScopeSpec;

/// The prepared arguments of one call.
#[derive(Debug, Clone)]
pub(crate) enum Prepared {
    /// `sum/min/max/avg/count(by)`: the label list, `None` without one.
    By(Option<Vec<String>>),
    /// `tagEqual/tagNotEqual/tagMatch/tagNotMatch`: the `(tag, value)` pairs.
    Tags(Vec<(String, String)>),
    /// A scope call's arguments.
    Scope(ScopeSpec),
}

/// The prepared arguments of every call of one expression that has them, by the call's address.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallArgs {
    calls: Vec<(usize, Prepared)>,
}

fn address(call: &Call) -> usize {
    std::ptr::from_ref(call) as usize
}

impl CallArgs {
    /// Reads the constant arguments of every call in `expr` outside closures (the calls the
    /// evaluator runs). Calls whose arguments do not read are left out.
    pub(crate) fn of(expr: &Expr) -> CallArgs {
        let mut out = CallArgs::default();
        out.walk(expr);
        out
    }

    fn walk(&mut self, expr: &Expr) {
        match &expr.kind {
            ExprKind::Call(call) => {
                if call.namespace.is_none()
                    && let Some(prepared) = prepare(call)
                {
                    self.calls.push((address(call), prepared));
                }
                if let Some(receiver) = &call.receiver {
                    self.walk(receiver);
                }
                for arg in &call.args {
                    self.walk(&arg.value);
                }
            }
            ExprKind::Paren(inner) | ExprKind::Unary { operand: inner, .. } => self.walk(inner),
            ExprKind::Binary { left, right, .. } => {
                self.walk(left);
                self.walk(right);
            }
            _ => {}
        }
    }

    /// The prepared arguments of `call`, when it is one of the calls read.
    pub(crate) fn get(&self, call: &Call) -> Option<&Prepared> {
        let address = address(call);
        self.calls
            .iter()
            .find(|(at, _)| *at == address)
            .map(|(_, prepared)| prepared)
    }
}

fn prepare(call: &Call) -> Option<Prepared> {
    let method = call.method.name.as_str();
    match method {
        "sum" | "min" | "max" | "avg" | "count" => by_list(&call.args).map(Prepared::By),
        "tagEqual" | "tagNotEqual" | "tagMatch" | "tagNotMatch" => {
            tag_pairs(&call.args).map(Prepared::Tags)
        }
        _ => scope_type(method)
            .and_then(|scope| scope_spec(scope, method, call, 0).ok())
            .map(Prepared::Scope),
    }
}

/// An aggregation's `by` argument: `Some(None)` without one (or `null`), `None` when it is not a
/// list of strings.
pub(crate) fn by_list(args: &[Arg]) -> Option<Option<Vec<String>>> {
    match args.first() {
        None => Some(None),
        Some(arg) if matches!(unparen(&arg.value).kind, ExprKind::Null) => Some(None),
        Some(arg) => string_list(&arg.value).map(Some),
    }
}

/// A tag filter's `(tag, value)` pairs (a missing last value is `""`); `None` when an argument is
/// not a string.
pub(crate) fn tag_pairs(args: &[Arg]) -> Option<Vec<(String, String)>> {
    let strings: Option<Vec<&str>> = args.iter().map(|a| string_literal(&a.value)).collect();
    Some(
        strings?
            .chunks(2)
            .map(|p| {
                (
                    p[0].to_owned(),
                    p.get(1).copied().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
    )
}

/// The scope a scope function names; `None` for other functions.
pub(crate) fn scope_type(method: &str) -> Option<ScopeType> {
    Some(match method {
        "service" => ScopeType::Service,
        "instance" => ScopeType::ServiceInstance,
        "endpoint" => ScopeType::Endpoint,
        "process" => ScopeType::Process,
        "serviceRelation" => ScopeType::ServiceRelation,
        "serviceInstanceRelation" => ScopeType::ServiceInstanceRelation,
        "processRelation" => ScopeType::ProcessRelation,
        _ => return None,
    })
}

/// A scope call's arguments.
pub(crate) fn scope_spec(
    scope: ScopeType,
    method: &str,
    call: &Call,
    at: usize,
) -> Result<ScopeSpec, EvalError> {
    let mut lists = Vec::new();
    let mut strings = Vec::new();
    let mut layer = None;
    let mut detect_point = None;
    let mut has_properties = false;
    for arg in &call.args {
        let value = &arg.value;
        if let Some(list) = string_list(value) {
            lists.push(list);
        } else if let Some(text) = string_literal(value) {
            strings.push(text.to_owned());
        } else if let Some((class, constant)) = class_constant(value) {
            match class {
                "Layer" => layer = Some(constant.to_owned()),
                "DetectPoint" => {
                    detect_point = Some(match constant {
                        "SERVER" => DetectPoint::Server,
                        "PROXY" => DetectPoint::Proxy,
                        _ => DetectPoint::Client,
                    })
                }
                _ => {}
            }
        } else if let ExprKind::Closure(_) = &unparen(value).kind {
            has_properties = true;
        } else if !matches!(unparen(value).kind, ExprKind::Null) {
            return Err(EvalError::BadArgument {
                function: method.to_owned(),
                detail: "label lists, strings, Layer.X, DetectPoint.X or a closure".to_owned(),
                line: at,
            });
        }
    }
    Ok(ScopeSpec::new(
        scope,
        lists,
        strings,
        layer,
        detect_point,
        has_properties,
    ))
}
