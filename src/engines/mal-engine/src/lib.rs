//! The MAL evaluation engine: runs a compiled SkyWalking MAL rule file ([`MalFile`]) on a batch of
//! samples and returns the metric values it produces. Pure: no IO, no clock (the caller passes
//! `now_ms` for `time()` and pruning), no global state (counter history lives in an
//! [`EngineState`] the caller owns, one per rule file).
//!
//! Semantics follow SkyWalking's meter analyzer as its code runs (see `docs/mal.md` for every
//! construct and each deliberate difference):
//! - per rule: select the families the expression reads (none present → skipped silently), apply
//!   the file `filter` per sample, evaluate, and emit from the entity map captured by the scope
//!   call; an EMPTY result emits nothing;
//! - the stored type comes from the compiler's shape: single (first sample per entity), labeled
//!   (a table keyed by the labels left after the scope), histogram / histogram percentile;
//! - an evaluation error skips that rule's output for the batch and is returned with the rule's
//!   name; other rules still run; nothing panics;
//! - lookups the engine cannot do itself come in through the state: a [`K8sMetadata`] source for
//!   `retagByK8sMeta` (without one, tags stay unchanged and a [`Warning`] says so once).

mod ast_read;
mod call_args;
mod closure;
mod closure_builtins;
mod counter;
mod emit;
mod error;
mod eval;
pub mod exposition;
mod k8s;
mod ops;
mod output;
#[cfg(test)]
mod prepared_tests;
mod regex_cache;
mod sample;
mod scope;
pub mod synth;
mod value;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use hotrule_rule_compiler::{MalFile, MalRule};

pub use counter::{CounterConfig, CounterState, RuleKey};
pub use error::{EvalError, RuleError, Warning};
pub use k8s::K8sMetadata;
pub use output::{
    DataType, DetectPoint, Downsampling, Entity, MetricValue, ScopeType, Value, civil_from_days,
    days_from_civil, minute_bucket, to_long,
};
pub use regex_cache::RegexCache;
pub use sample::{Family, LabelMap, Labels, Sample, labels};

use crate::closure::{Interp, tags_value};
use crate::call_args::CallArgs;
use crate::eval::{Inputs, RuleRun, Val};

/// A rule file ready to evaluate: the compiled file plus what each rule reads and the constant
/// arguments of its calls (see the `call_args` module).
///
/// An evaluation sorts the batch's samples into one family per name some rule reads (a slot per
/// name, numbered when the file is prepared), then hands each rule the families it reads,
/// borrowed: a one-sample batch (the log MAL case) builds one family and no map.
#[derive(Debug, Clone)]
pub struct PreparedFile {
    /// Shared, never copied: the prepared call arguments are keyed by the addresses of its calls.
    file: Arc<MalFile>,
    rules: Vec<PreparedRule>,
    /// Every sample name some rule reads, with its slot: only these are taken from a batch.
    slots: HashMap<String, usize>,
    /// The unit `histogram()` without one reads `le` in, as milliseconds: SkyWalking's
    /// `defaultHistogramBucketUnit` of the receiver that built the family. Seconds (1000) for
    /// Prometheus and OpenTelemetry data, as `PrometheusMetricConverter` builds them;
    /// milliseconds (1) for the agents' meters, as `MeterProcessor` builds them.
    histogram_unit_ms: f64,
}

#[derive(Debug, Clone)]
struct PreparedRule {
    key: RuleKey,
    inputs: Vec<String>,
    percentiles: Vec<u32>,
    /// Order of labels in labeled keys (the last aggregation's list).
    label_order: Vec<String>,
    /// The slot of each of `inputs`.
    input_slots: Vec<usize>,
    /// The constant arguments of the expression's calls.
    call_args: CallArgs,
}

/// Everything an evaluation carries from one batch to the next, owned by the caller.
#[derive(Debug, Clone, Default)]
pub struct EngineState {
    pub counters: CounterState,
    regexes: RegexCache,
    k8s_warned: bool,
    k8s: Option<Arc<dyn K8sMetadata>>,
}

impl EngineState {
    pub fn new(config: CounterConfig) -> EngineState {
        EngineState {
            counters: CounterState::new(config),
            ..EngineState::default()
        }
    }

    /// Gives `retagByK8sMeta` a Kubernetes metadata source (without one it leaves tags unchanged
    /// and warns once).
    pub fn with_k8s_metadata(mut self, metadata: Arc<dyn K8sMetadata>) -> EngineState {
        self.k8s = Some(metadata);
        self
    }
}

impl EngineState {
    /// Carries this state over to `new`, the next version of the same file. Counter series stay
    /// for every rule `new` still has (same metric and ordinal) whose metric is not in
    /// `structural`, and only for the sample names that rule still reads; everything else starts
    /// fresh. After a FILTER_ONLY change pass an empty `structural`: the expressions are
    /// unchanged, so their windows continue; series the new filter no longer lets through stop
    /// being updated and are pruned after their window.
    pub fn carry_over(&mut self, new: &PreparedFile, structural: &BTreeSet<String>) {
        let reads: HashMap<&RuleKey, &[String]> = new
            .rules
            .iter()
            .map(|rule| (&rule.key, rule.inputs.as_slice()))
            .collect();
        self.counters.retain(|rule, name| {
            !structural.contains(&rule.metric)
                && reads
                    .get(rule)
                    .is_some_and(|inputs| inputs.iter().any(|input| input == name))
        });
    }
}

/// The result of evaluating a file on one batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    pub values: Vec<MetricValue>,
    pub errors: Vec<RuleError>,
    /// Conditions that do not fail a rule: no Kubernetes metadata source (once per state), a file
    /// filter that threw (per rule and batch; the rule ran unfiltered).
    pub warnings: Vec<Warning>,
}

impl PreparedFile {
    pub fn new(file: MalFile) -> PreparedFile {
        // Shared before the call arguments are read, so they are read from its final place.
        let file = Arc::new(file);
        let mut ordinals: HashMap<&str, u32> = HashMap::new();
        let mut slots: HashMap<String, usize> = HashMap::new();
        let rules = file
            .rules
            .iter()
            .map(|rule| {
                let ordinal = ordinals.entry(rule.metric_name.as_str()).or_insert(0);
                let key = RuleKey {
                    metric: rule.metric_name.clone(),
                    ordinal: *ordinal,
                };
                *ordinal += 1;
                let mut inputs = Vec::new();
                ast_read::input_names(&rule.expr, &mut inputs);
                let mut percentiles = Vec::new();
                ast_read::percentiles(&rule.expr, &mut percentiles);
                let mut label_order = Vec::new();
                ast_read::aggregation_labels(&rule.expr, &mut label_order);
                let input_slots = inputs
                    .iter()
                    .map(|name| {
                        let next = slots.len();
                        *slots.entry(name.clone()).or_insert(next)
                    })
                    .collect();
                PreparedRule {
                    key,
                    inputs,
                    percentiles,
                    label_order,
                    input_slots,
                    call_args: CallArgs::of(&rule.expr),
                }
            })
            .collect::<Vec<PreparedRule>>();
        PreparedFile {
            file,
            rules,
            slots,
            histogram_unit_ms: 1000.0,
        }
    }

    /// The same file reading `histogram()`'s `le` in `unit_ms` by default (see the field).
    pub fn with_default_histogram_unit_ms(mut self, unit_ms: f64) -> PreparedFile {
        self.histogram_unit_ms = unit_ms;
        self
    }

    pub fn file(&self) -> &MalFile {
        &self.file
    }

    /// The sample names rule `index` reads.
    pub fn inputs_of(&self, index: usize) -> &[String] {
        self.rules
            .get(index)
            .map_or(&[], |rule| rule.inputs.as_slice())
    }

    /// Evaluates every rule on `batch` (one receiver batch). `now_ms` is the wall clock: `time()`
    /// reads it, and it caps the batch's newest timestamp, against which idle counter series are
    /// pruned.
    pub fn evaluate(&self, batch: &[Sample], now_ms: i64, state: &mut EngineState) -> Evaluation {
        // The samples of each name read, by slot; a family per slot that has any.
        let mut by_slot: Vec<Vec<Sample>> = Vec::new();
        by_slot.resize_with(self.slots.len(), Vec::new);
        for sample in batch {
            if let Some(&slot) = self.slots.get(&sample.name) {
                by_slot[slot].push(sample.clone());
            }
        }
        let families: Vec<Option<Family>> = by_slot
            .into_iter()
            .map(|samples| {
                // An empty `Family` still allocates: no family for a name the batch lacks.
                (!samples.is_empty())
                    .then(|| Family::build(samples))
                    .filter(|family| !family.is_empty())
            })
            .collect();
        // The file filter depends on the sample only: run it once per family, not once per rule.
        let filtered: Option<Vec<Option<Result<Family, EvalError>>>> =
            self.file.filter.as_ref().map(|filter| {
                let mut verdicts = Verdicts::new();
                families
                    .iter()
                    .map(|family| {
                        family.as_ref().map(|family| {
                            filter_family(filter, family, &mut state.regexes, &mut verdicts)
                        })
                    })
                    .collect()
            });
        let mut evaluation = Evaluation::default();
        let mut inputs: Vec<(&str, &Family)> = Vec::new();
        for (rule, prepared) in self.file.rules.iter().zip(&self.rules) {
            if !select_inputs(
                rule,
                prepared,
                &families,
                filtered.as_deref(),
                &mut inputs,
                &mut evaluation.warnings,
            ) {
                continue;
            }
            let before = evaluation.values.len();
            if let Err(error) = self.evaluate_rule(
                rule,
                prepared,
                &inputs,
                now_ms,
                state,
                &mut evaluation.values,
                &mut evaluation.warnings,
            ) {
                // A failing rule stores nothing for the batch.
                evaluation.values.truncate(before);
                evaluation.errors.push(RuleError {
                    rule: rule.name.clone(),
                    metric: rule.metric_name.clone(),
                    error,
                });
            }
        }
        // Idle series are judged on the data's clock, capped by the wall clock: replayed or
        // dry-run batches with old timestamps keep their history, a sample from the future
        // cannot expire everything.
        let data_now = batch.iter().map(|s| s.timestamp_ms).max().unwrap_or(now_ms);
        state.counters.prune(data_now.min(now_ms));
        evaluation
    }

    /// Evaluates one rule on its inputs, appending what it emits to `values` (on an error,
    /// possibly part of it: the caller drops that).
    #[allow(clippy::too_many_arguments)]
    fn evaluate_rule(
        &self,
        rule: &MalRule,
        prepared: &PreparedRule,
        inputs: &[(&str, &Family)],
        now_ms: i64,
        state: &mut EngineState,
        values: &mut Vec<MetricValue>,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), EvalError> {
        let mut run = RuleRun {
            rule_key: &prepared.key,
            rule_name: &rule.name,
            inputs: Inputs::List(inputs),
            call_args: &prepared.call_args,
            now_ms,
            counters: &mut state.counters,
            regexes: &mut state.regexes,
            warnings,
            k8s_warned: &mut state.k8s_warned,
            k8s: state.k8s.as_deref(),
            site: 0,
            entities: None,
            histogram_unit_ms: self.histogram_unit_ms,
        };
        let result = run.eval(&rule.expr)?;
        let entities = run.entities.take();
        match (result, entities) {
            (Val::Family(family), Some(entities)) if !family.is_empty() => emit::emit(
                rule,
                &prepared.percentiles,
                &prepared.label_order,
                entities,
                values,
            ),
            _ => Ok(()),
        }
    }
}

/// A rule's input families into `inputs`: the ones it reads that are present, filtered by the
/// file filter. `false` when nothing is left (the rule is skipped silently, as upstream). If the
/// filter failed on one of them, the rule runs on its unfiltered input, as upstream does, with a
/// warning.
fn select_inputs<'f>(
    rule: &MalRule,
    prepared: &'f PreparedRule,
    families: &'f [Option<Family>],
    filtered: Option<&'f [Option<Result<Family, EvalError>>]>,
    inputs: &mut Vec<(&'f str, &'f Family)>,
    warnings: &mut Vec<Warning>,
) -> bool {
    inputs.clear();
    let present = || {
        prepared
            .inputs
            .iter()
            .zip(&prepared.input_slots)
            .filter(|(_, slot)| families[**slot].is_some())
    };
    if present().next().is_none() {
        return false;
    }
    let unfiltered = |inputs: &mut Vec<(&'f str, &'f Family)>| {
        inputs.extend(present().filter_map(|(name, slot)| {
            families[*slot].as_ref().map(|family| (name.as_str(), family))
        }));
    };
    let Some(filtered) = filtered else {
        unfiltered(inputs);
        return true;
    };
    let failure = present().find_map(|(_, slot)| match &filtered[*slot] {
        Some(Err(error)) => Some(error),
        _ => None,
    });
    if let Some(error) = failure {
        warnings.push(Warning::FilterFailed {
            rule: rule.name.clone(),
            reason: error.to_string(),
        });
        unfiltered(inputs);
        return true;
    }
    inputs.extend(
        present().filter_map(|(name, slot)| match &filtered[*slot] {
            Some(Ok(family)) if !family.is_empty() => Some((name.as_str(), family)),
            _ => None,
        }),
    );
    !inputs.is_empty()
}

/// The outcome of [`run_expression`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpressionResult {
    /// The resulting family; EMPTY when the expression evaluated to a bare number.
    pub family: Family,
    /// The entities captured by a scope call, with their samples (scope labels removed).
    pub entities: Option<Vec<(Entity, Vec<Sample>)>>,
    pub warnings: Vec<Warning>,
}

/// Evaluates one bare expression on named families, like upstream's `Expression.run`: no file
/// filter, no emission. Counter history is kept in `state` under the metric name `"<expression>"`.
pub fn run_expression(
    expr: &hotrule_rule_compiler::ast::Expr,
    inputs: &HashMap<String, Family>,
    now_ms: i64,
    state: &mut EngineState,
) -> Result<ExpressionResult, EvalError> {
    let key = RuleKey {
        metric: "<expression>".to_owned(),
        ordinal: 0,
    };
    let mut warnings = Vec::new();
    let no_call_args = CallArgs::default();
    let mut run = RuleRun {
        rule_key: &key,
        rule_name: "<expression>",
        inputs: Inputs::Map(inputs),
        call_args: &no_call_args,
        now_ms,
        counters: &mut state.counters,
        regexes: &mut state.regexes,
        warnings: &mut warnings,
        k8s_warned: &mut state.k8s_warned,
        k8s: state.k8s.as_deref(),
        site: 0,
        entities: None,
        // Upstream's `Expression.run` tests build their families in seconds.
        histogram_unit_ms: 1000.0,
    };
    let family = match run.eval(expr)? {
        Val::Family(family) => family,
        Val::Num(_) => Family::empty(),
    };
    let entities = run.entities.take().map(scope::Groups::stripped);
    Ok(ExpressionResult {
        family,
        entities,
        warnings,
    })
}

/// The file filter's verdict per label map of one batch, by the map's address: the filter is a
/// function of the tags alone (closures see no clock and no state but a regex cache), and the
/// samples of a batch often share their label map (a receiver gives one map to a target's
/// series with the same labels), so it runs once per map. The batch holds every map for the
/// whole evaluation, so an address is never reused within it.
type Verdicts = HashMap<usize, Result<bool, EvalError>>;

/// The file `filter` on one family: the samples whose tags pass.
fn filter_family(
    filter: &hotrule_rule_compiler::ast::Expr,
    family: &Family,
    regexes: &mut RegexCache,
    verdicts: &mut Verdicts,
) -> Result<Family, EvalError> {
    let hotrule_rule_compiler::ast::ExprKind::Closure(closure) = &filter.kind else {
        return Ok(family.clone());
    };
    if let Some(test) = LabelTest::of(closure) {
        let kept = family
            .samples()
            .iter()
            .filter(|sample| test.passes(&sample.labels))
            .cloned()
            .collect();
        return Ok(Family::build(kept));
    }
    let mut interp = Interp { regexes };
    let mut kept = Vec::new();
    for sample in family.samples() {
        let address = std::sync::Arc::as_ptr(&sample.labels) as usize;
        let verdict = match verdicts.get(&address) {
            Some(verdict) => verdict.clone(),
            None => {
                let verdict = interp
                    .call(closure, vec![tags_value(&sample.labels)])
                    .map(|value| value.truthy());
                verdicts.insert(address, verdict.clone());
                verdict
            }
        };
        if verdict? {
            kept.push(sample.clone());
        }
    }
    Ok(Family::build(kept))
}

/// The file filter most bundled files have, `{ tags -> tags.KEY == 'literal' }` (or `!=`),
/// judged on the labels without building the closure's tag map. The interpreter gives the same
/// answer: a missing tag reads as `null`, which equals no string, and two strings are equal
/// when their texts are.
struct LabelTest<'f> {
    key: &'f str,
    literal: &'f str,
    equal: bool,
}

impl<'f> LabelTest<'f> {
    fn of(closure: &'f hotrule_rule_compiler::ast::Closure) -> Option<LabelTest<'f>> {
        use hotrule_rule_compiler::ast::{BinaryOp, ExprKind, StmtKind};
        let [param] = closure.params.as_slice() else {
            return None;
        };
        let [statement] = closure.body.statements.as_slice() else {
            return None;
        };
        let StmtKind::Expr(expr) = &statement.kind else {
            return None;
        };
        let ExprKind::Binary { op, left, right } = &expr.kind else {
            return None;
        };
        let equal = match op {
            BinaryOp::Eq => true,
            BinaryOp::NotEq => false,
            _ => return None,
        };
        let (ExprKind::Property { receiver, name, .. }, ExprKind::Str(literal)) =
            (&left.kind, &right.kind)
        else {
            return None;
        };
        match &receiver.kind {
            ExprKind::Name(variable) if *variable == param.name.name => Some(LabelTest {
                key: &name.name,
                literal: &literal.value,
                equal,
            }),
            _ => None,
        }
    }

    fn passes(&self, labels: &Labels) -> bool {
        (labels.get(self.key).map(String::as_str) == Some(self.literal)) == self.equal
    }
}

/// The runtime evaluates on a worker pool: a prepared file is shared, a state moves between threads.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    const fn movable<T: Send>() {}
    shared::<PreparedFile>();
    movable::<EngineState>();
    movable::<Evaluation>();
};
