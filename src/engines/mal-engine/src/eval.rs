//! Evaluating one rule's full expression (after `expPrefix`/`expSuffix`) on the input families of
//! one batch.
//!
//! Outside closures a MAL expression is arithmetic over sample families and numbers plus chains of
//! family functions. The scope call captures the entity → samples map in the rule's running
//! context; emission reads that map, so operations chained after the scope call do not change the
//! emitted values (upstream behaviour; only `decorate` still acts on the entities).

use std::collections::HashMap;

use hotrule_rule_compiler::ScopeType;
use hotrule_rule_compiler::ast::{BinaryOp, Call, Closure, Expr, ExprKind, UnaryOp};

use crate::ast_read::{
    class_constant, closure_arg, iso_duration_ms, kind_name, number_literal, string_list,
    string_literal, time_unit_ms,
};
use crate::call_args::{self, CallArgs, Prepared};
use crate::closure::{Interp, entity_value, labels_of, tags_value};
use crate::counter::{CounterState, RuleKey};
use crate::error::{EvalError, Warning};
use crate::k8s::{self, K8sMetadata};
use crate::ops::{self, Agg, Arith, TagOp, ValueOp};
use crate::regex_cache::RegexCache;
use crate::sample::Family;
use crate::scope;
use crate::value::V;

/// An intermediate value outside closures.
#[derive(Debug, Clone)]
pub(crate) enum Val {
    Family(Family),
    Num(f64),
}

/// What one rule run needs and collects.
pub(crate) struct RuleRun<'r> {
    pub rule_key: &'r RuleKey,
    pub rule_name: &'r str,
    pub inputs: Inputs<'r>,
    /// The constant arguments of the expression's calls, read when the file was prepared (empty
    /// for a bare expression: every call then reads its arguments itself).
    pub call_args: &'r CallArgs,
    pub now_ms: i64,
    pub counters: &'r mut CounterState,
    pub regexes: &'r mut RegexCache,
    pub warnings: &'r mut Vec<Warning>,
    pub k8s_warned: &'r mut bool,
    pub k8s: Option<&'r dyn K8sMetadata>,
    /// Next counter call site (`increase`, `rate`, `irate`) in evaluation order.
    pub site: u32,
    /// Set by the scope call.
    pub entities: Option<scope::Groups>,
    /// What `histogram()` without a unit scales `le` by (see [`crate::PreparedFile`]).
    pub histogram_unit_ms: f64,
}

/// The input families of a run, by sample name.
#[derive(Clone, Copy)]
pub(crate) enum Inputs<'r> {
    /// A caller's map (`run_expression`).
    Map(&'r HashMap<String, Family>),
    /// A rule's few inputs in a file evaluation, borrowed from the batch's families.
    List(&'r [(&'r str, &'r Family)]),
}

impl<'r> Inputs<'r> {
    fn get(self, name: &str) -> Option<&'r Family> {
        match self {
            Inputs::Map(map) => map.get(name),
            Inputs::List(list) => list
                .iter()
                .find(|(input, _)| *input == name)
                .map(|(_, family)| *family),
        }
    }
}

fn line(expr: &Expr) -> usize {
    expr.span.line
}

impl RuleRun<'_> {
    fn interp(&mut self) -> Interp<'_> {
        Interp {
            regexes: self.regexes,
        }
    }

    pub(crate) fn eval(&mut self, expr: &Expr) -> Result<Val, EvalError> {
        let at = line(expr);
        match &expr.kind {
            ExprKind::Name(name) => Ok(Val::Family(
                self.inputs.get(name).cloned().unwrap_or_default(),
            )),
            ExprKind::Number(_) => Ok(Val::Num(number_literal(expr).unwrap_or(0.0))),
            ExprKind::Paren(inner) => self.eval(inner),
            ExprKind::Unary { op, operand } => {
                let value = self.eval(operand)?;
                Ok(match (op, value) {
                    (UnaryOp::Neg, Val::Family(f)) => Val::Family(f.map_values(|v| -v)),
                    (UnaryOp::Neg, Val::Num(n)) => Val::Num(-n),
                    (UnaryOp::Plus, v) => v,
                    (UnaryOp::Not, _) => {
                        return Err(EvalError::Unsupported {
                            what: "'!' outside a closure".to_owned(),
                            line: at,
                        });
                    }
                })
            }
            ExprKind::Binary { op, left, right } => {
                let op = match op {
                    BinaryOp::Add => Arith::Add,
                    BinaryOp::Sub => Arith::Sub,
                    BinaryOp::Mul => Arith::Mul,
                    BinaryOp::Div => Arith::Div,
                    other => {
                        return Err(EvalError::Unsupported {
                            what: format!("operator '{}' outside a closure", other.symbol()),
                            line: at,
                        });
                    }
                };
                let l = self.eval(left)?;
                let r = self.eval(right)?;
                Ok(combine(l, op, r))
            }
            ExprKind::Call(call) => self.call(call, at),
            other => Err(EvalError::Unsupported {
                what: format!("{} outside a closure", kind_name(other)),
                line: at,
            }),
        }
    }

    fn call(&mut self, call: &Call, at: usize) -> Result<Val, EvalError> {
        let method = call.method.name.as_str();
        if call.namespace.is_some() {
            return Err(EvalError::Unsupported {
                what: format!("the extension function '{method}'"),
                line: at,
            });
        }
        let Some(receiver) = &call.receiver else {
            return match method {
                // Wall-clock epoch seconds, like upstream's `time()`; the clock is an input.
                "time" => Ok(Val::Num(self.now_ms.div_euclid(1000) as f64)),
                _ => Err(EvalError::Unsupported {
                    what: format!("the function '{method}'"),
                    line: at,
                }),
            };
        };
        let family = match self.eval(receiver)? {
            Val::Family(family) => family,
            Val::Num(n) => {
                return Err(EvalError::TypeMismatch {
                    detail: format!("'{method}' called on the number {n}"),
                    line: at,
                });
            }
        };
        let args = &call.args;
        let bad = |detail: &str| EvalError::BadArgument {
            function: method.to_owned(),
            detail: detail.to_owned(),
            line: at,
        };
        let result = match method {
            "tagEqual" | "tagNotEqual" | "tagMatch" | "tagNotMatch" => {
                let op = match method {
                    "tagEqual" => TagOp::Equal,
                    "tagNotEqual" => TagOp::NotEqual,
                    "tagMatch" => TagOp::Match,
                    _ => TagOp::NotMatch,
                };
                let read;
                let pairs = match self.call_args.get(call) {
                    Some(Prepared::Tags(pairs)) => pairs,
                    _ => {
                        read = call_args::tag_pairs(args)
                            .ok_or_else(|| bad("(tag, value) string pairs"))?;
                        &read
                    }
                };
                ops::tag_filter(&family, op, pairs, self.regexes, at)?
            }
            "valueEqual" | "valueNotEqual" | "valueGreater" | "valueGreaterEqual" | "valueLess"
            | "valueLessEqual" => {
                let op = match method {
                    "valueEqual" => ValueOp::Equal,
                    "valueNotEqual" => ValueOp::NotEqual,
                    "valueGreater" => ValueOp::Greater,
                    "valueGreaterEqual" => ValueOp::GreaterEqual,
                    "valueLess" => ValueOp::Less,
                    _ => ValueOp::LessEqual,
                };
                let n = args
                    .first()
                    .and_then(|a| number_literal(&a.value))
                    .ok_or_else(|| bad("a number"))?;
                ops::value_filter(&family, op, n)
            }
            "sum" | "min" | "max" | "avg" | "count" => {
                let read;
                let by = match self.call_args.get(call) {
                    Some(Prepared::By(by)) => by.as_deref(),
                    _ => {
                        read = call_args::by_list(args)
                            .ok_or_else(|| bad("a list of label names"))?;
                        read.as_deref()
                    }
                };
                match method {
                    "count" => ops::count(&family, by),
                    _ => {
                        let agg = match method {
                            "sum" => Agg::Sum,
                            "min" => Agg::Min,
                            "max" => Agg::Max,
                            _ => Agg::Avg,
                        };
                        ops::aggregate(&family, agg, by)
                    }
                }
            }
            "increase" | "rate" => {
                let window = args
                    .first()
                    .and_then(|a| string_literal(&a.value))
                    .and_then(iso_duration_ms)
                    .ok_or_else(|| bad("an ISO-8601 duration such as 'PT1M'"))?;
                let site = self.next_site();
                self.windowed(&family, site, Some(window), method == "rate")
            }
            "irate" => {
                let site = self.next_site();
                self.windowed(&family, site, None, true)
            }
            "plus" | "minus" | "multiply" | "div" | "safeDiv" => {
                let op = match method {
                    "plus" => Arith::Add,
                    "minus" => Arith::Sub,
                    "multiply" => Arith::Mul,
                    "div" => Arith::Div,
                    _ => Arith::SafeDiv,
                };
                let operand = match args.first() {
                    Some(arg) => self.eval(&arg.value)?,
                    None => return Err(bad("one operand")),
                };
                match combine(Val::Family(family), op, operand) {
                    Val::Family(f) => f,
                    Val::Num(_) => Family::empty(),
                }
            }
            "negative" => family.map_values(|v| -v),
            "tag" => {
                let closure = closure_arg(args.first()).ok_or_else(|| bad("a closure"))?;
                self.tag(&family, closure, at)?
            }
            "filter" => {
                let closure = closure_arg(args.first()).ok_or_else(|| bad("a closure"))?;
                let mut kept = Vec::new();
                for sample in family.samples() {
                    if self
                        .interp()
                        .call(closure, vec![tags_value(&sample.labels)])?
                        .truthy()
                    {
                        kept.push(sample.clone());
                    }
                }
                Family::build(kept)
            }
            "forEach" => {
                let elements = args
                    .first()
                    .and_then(|a| string_list(&a.value))
                    .ok_or_else(|| bad("a list of strings"))?;
                let closure = closure_arg(args.get(1)).ok_or_else(|| bad("a closure"))?;
                let mut out = Vec::with_capacity(family.samples().len());
                for sample in family.samples() {
                    let tags = tags_value(&sample.labels);
                    for element in &elements {
                        self.interp()
                            .call(closure, vec![V::Str(element.clone()), tags.clone()])?;
                    }
                    let V::Map(map) = &tags else {
                        continue;
                    };
                    let mut updated = sample.clone();
                    updated.labels = labels_of(map, at)?;
                    out.push(updated);
                }
                Family::build(out)
            }
            "retagByK8sMeta" => {
                let strings: Vec<&str> = args
                    .iter()
                    .filter_map(|a| string_literal(&a.value))
                    .collect();
                let retag = args.iter().find_map(|a| class_constant(&a.value));
                if let (
                    Some(metadata),
                    [new_label, pod, namespace],
                    Some(("K8sRetagType", "Pod2Service")),
                ) = (self.k8s, strings.as_slice(), retag)
                {
                    k8s::pod_to_service(&family, metadata, new_label, pod, namespace)
                } else if self.k8s.is_some() {
                    return Err(bad(
                        "(new label, K8sRetagType.Pod2Service, pod label, namespace label)",
                    ));
                } else {
                    if !*self.k8s_warned {
                        *self.k8s_warned = true;
                        self.warnings.push(Warning::NoK8sMetadata {
                            rule: self.rule_name.to_owned(),
                        });
                    }
                    family
                }
            }
            "histogram" => {
                let le = args
                    .iter()
                    .find_map(|a| string_literal(&a.value))
                    .unwrap_or("le");
                let unit = args.iter().find_map(|a| class_constant(&a.value));
                let scale = match unit {
                    None => self.histogram_unit_ms,
                    Some((_, unit)) => time_unit_ms(unit)
                        .ok_or_else(|| bad("a TimeUnit of at least a millisecond"))?,
                };
                ops::histogram(&family, le, scale, at)?
            }
            "histogram_percentile" | "downsampling" => family,
            "decorate" => {
                let closure = closure_arg(args.first()).ok_or_else(|| bad("a closure"))?;
                if !family.is_empty() {
                    self.decorate(closure)?;
                }
                family
            }
            "service"
            | "instance"
            | "endpoint"
            | "process"
            | "serviceRelation"
            | "serviceInstanceRelation"
            | "processRelation" => {
                if family.is_empty() {
                    return Ok(Val::Family(family));
                }
                let read;
                let spec = match self.call_args.get(call) {
                    Some(Prepared::Scope(spec)) => spec,
                    _ => {
                        let scope = call_args::scope_type(method).unwrap_or(ScopeType::Service);
                        read = call_args::scope_spec(scope, method, call, at)?;
                        &read
                    }
                };
                let mut groups = scope::group(spec, &family);
                let closure = args.iter().rev().find_map(|a| closure_arg(Some(a)));
                if let (true, Some(closure)) = (spec.has_properties, closure) {
                    for (entity, members) in &mut groups.entities {
                        // Upstream reads the properties from the group's first sample, scope
                        // labels included.
                        let result = self
                            .interp()
                            .call(closure, vec![tags_value(&members.samples()[0].labels)])?;
                        if let V::Map(map) = result {
                            entity.instance_properties =
                                Some(labels_of(&map, at)?.as_ref().clone());
                        }
                    }
                }
                self.entities = Some(groups);
                family
            }
            other => {
                return Err(EvalError::Unsupported {
                    what: format!("the function '{other}'"),
                    line: at,
                });
            }
        };
        Ok(Val::Family(result))
    }

    fn next_site(&mut self) -> u32 {
        let site = self.site;
        self.site += 1;
        site
    }

    /// `increase`/`rate` (with a window) and `irate` (without).
    fn windowed(
        &mut self,
        family: &Family,
        site: u32,
        window_ms: Option<i64>,
        rate: bool,
    ) -> Family {
        let mut out = Vec::with_capacity(family.samples().len());
        for sample in family.samples() {
            let point = (sample.timestamp_ms, sample.value);
            let (ref_ts, ref_value) = match window_ms {
                Some(window) => self.counters.window(
                    self.rule_key,
                    site,
                    &sample.name,
                    &sample.labels,
                    point,
                    window,
                ),
                None => {
                    self.counters
                        .previous(self.rule_key, site, &sample.name, &sample.labels, point)
                }
            };
            let value = if rate {
                let seconds = (sample.timestamp_ms - ref_ts) / 1000;
                if seconds < 1 {
                    0.0
                } else {
                    (sample.value - ref_value) / seconds as f64
                }
            } else {
                sample.value - ref_value
            };
            out.push(sample.with_value(value));
        }
        Family::build(out)
    }

    fn tag(&mut self, family: &Family, closure: &Closure, at: usize) -> Result<Family, EvalError> {
        let mut out = Vec::with_capacity(family.samples().len());
        for sample in family.samples() {
            let tags = tags_value(&sample.labels);
            let result = self.interp().call(closure, vec![tags.clone()])?;
            let map = match (result, tags) {
                (V::Map(returned), _) => returned,
                (_, V::Map(argument)) => argument,
                _ => continue,
            };
            let mut updated = sample.clone();
            updated.labels = labels_of(&map, at)?;
            out.push(updated);
        }
        Ok(Family::build(out))
    }

    fn decorate(&mut self, closure: &Closure) -> Result<(), EvalError> {
        let Some(mut groups) = self.entities.take() else {
            return Ok(());
        };
        let mut outcome = Ok(());
        for (entity, _) in &mut groups.entities {
            if entity.scope != ScopeType::Service {
                continue;
            }
            let (me, shared) = entity_value(entity.clone());
            if let Err(error) = self.interp().call(closure, vec![me]) {
                outcome = Err(error);
                break;
            }
            *entity = shared.borrow().clone();
        }
        self.entities = Some(groups);
        outcome
    }
}

/// Arithmetic between two values, with SkyWalking's EMPTY rules.
fn combine(left: Val, op: Arith, right: Val) -> Val {
    match (left, right) {
        (Val::Num(a), Val::Num(b)) => Val::Num(op.apply(a, b)),
        (Val::Family(f), Val::Num(n)) => Val::Family(ops::with_number(&f, op, n)),
        (Val::Num(n), Val::Family(f)) => Val::Family(ops::number_with(n, op, &f)),
        (Val::Family(a), Val::Family(b)) => Val::Family(ops::between(&a, op, &b)),
    }
}
