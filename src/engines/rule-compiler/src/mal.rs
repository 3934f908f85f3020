//! MAL rule files (`otel-rules`, `log-mal-rules`, `telegraf-rules`, `meter-analyzer-config`):
//! the YAML model, and compiling each `metricsRules` entry into a validated expression and shape.
//!
//! Keys follow upstream's `Rule` bean (reference §3.1); an unknown key is an error, as it is when
//! SnakeYAML loads into that bean. Blank `expPrefix`/`expSuffix`/`filter` values (the bundled
//! `apisix.yaml` has `expSuffix:` with nothing after it) mean "not set".

use std::collections::BTreeMap;

use crate::ast::{self, ExprKind};
use crate::mal_graft::{Chain, full_expression};
use crate::model::{
    self, Empty, LayerDefinition, check_keys, item_map, optional_list, optional_scalar, pos_of,
    required_scalar,
};
use crate::position::SourceText;
use crate::shape::MetricShape;
use crate::yaml::Scalar;
use crate::{CompileError, mal_shape, mal_validate};

const FILE_KEYS: &[&str] = &[
    "metricPrefix",
    "expPrefix",
    "expSuffix",
    "filter",
    "metricsRules",
    "layerDefinitions",
];
const RULE_KEYS: &[&str] = &["name", "exp"];

/// A compiled MAL file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MalFile {
    /// `None` when absent or blank (as are the next two).
    pub metric_prefix: Option<String>,
    /// The source text of `expPrefix`; its parsed form is already applied in each rule's `expr`.
    pub exp_prefix: Option<String>,
    /// The source text of `expSuffix`; likewise applied in each rule's `expr`.
    pub exp_suffix: Option<String>,
    /// The parsed top-level `filter` closure, if any.
    pub filter: Option<ast::Expr>,
    /// In file order.
    pub rules: Vec<MalRule>,
    pub layer_definitions: Vec<LayerDefinition>,
}

/// One `metricsRules` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct MalRule {
    pub name: String,
    /// `metricPrefix + "_" + name`, or `name` alone when the file has no `metricPrefix`. (Upstream's
    /// classifier instead treats a prefix-less file as declaring no metric names at all.)
    pub metric_name: String,
    /// The full expression: `expPrefix` injected after each sample family, then `(exp).expSuffix`.
    pub expr: ast::Expr,
    pub shape: MetricShape,
    /// 1-based line of the rule's entry in the file.
    pub line: usize,
}

impl MalFile {
    /// Every metric the file declares with its shape; a name declared by several rules appears once
    /// (compilation guarantees those rules agree on the shape).
    pub fn metrics(&self) -> BTreeMap<String, MetricShape> {
        self.rules
            .iter()
            .map(|rule| (rule.metric_name.clone(), rule.shape))
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
enum MalFileError {
    #[error(
        "filter must be a closure with one parameter, such as {{ tags -> tags.job_name == 'x' }}"
    )]
    FilterNotClosure,
    #[error(
        "metric '{metric}' declared twice with different shapes: {first} (line {line}) vs {second}"
    )]
    ShapeConflict {
        metric: String,
        first: MetricShape,
        line: usize,
        second: MetricShape,
    },
}

pub(crate) fn compile(source: &SourceText<'_>, empty: Empty) -> Result<MalFile, CompileError> {
    let Some(root) = model::root_map(source, "metricsRules", empty)? else {
        return Ok(MalFile::default());
    };
    check_keys(&root, FILE_KEYS, "a MAL rule file")?;
    let metric_prefix = non_blank(optional_scalar(&root, "metricPrefix")?);
    let exp_prefix = non_blank(optional_scalar(&root, "expPrefix")?);
    let exp_suffix = non_blank(optional_scalar(&root, "expSuffix")?);
    let prefix_chain = exp_prefix
        .map(|s| chain(source, s, "expPrefix"))
        .transpose()?;
    let suffix_chain = exp_suffix
        .map(|s| chain(source, s, "expSuffix"))
        .transpose()?;
    let filter = match non_blank(optional_scalar(&root, "filter")?) {
        None => None,
        Some(scalar) => {
            let expr = model::parse_expression(source, scalar)?;
            match &expr.kind {
                // Upstream calls the filter with the sample's tag map: exactly one parameter.
                ExprKind::Closure(closure) if closure.params.len() <= 1 => {
                    mal_validate::check_closure(closure, &expr)?;
                    Some(expr)
                }
                _ => return Err(pos_of(expr.span).error(MalFileError::FilterNotClosure)),
            }
        }
    };
    let mut rules: Vec<MalRule> = Vec::new();
    let mut declared: BTreeMap<String, (MetricShape, usize)> = BTreeMap::new();
    for item in optional_list(&root, "metricsRules")? {
        let entry = item_map(item, "metricsRules")?;
        check_keys(entry, RULE_KEYS, "a metricsRules entry")?;
        let name = required_scalar(entry, "name", "a metricsRules entry")?;
        let exp = required_scalar(entry, "exp", "a metricsRules entry")?;
        let metric_name = match metric_prefix {
            Some(prefix) => format!("{}_{}", prefix.value, name.value),
            None => name.value.clone(),
        };
        let parsed = model::parse_expression(source, exp)?;
        let expr = full_expression(parsed, prefix_chain.as_ref(), suffix_chain.as_ref());
        mal_validate::validate(&expr)?;
        let shape = mal_shape::extract(&expr, &metric_name, exp.mark.pos())?;
        let line = entry.pos().line;
        match declared.get(&metric_name) {
            Some(&(first, first_line)) if first != shape => {
                return Err(name.mark.pos().error(MalFileError::ShapeConflict {
                    metric: metric_name,
                    first,
                    line: first_line,
                    second: shape,
                }));
            }
            Some(_) => {}
            None => {
                declared.insert(metric_name.clone(), (shape, line));
            }
        }
        rules.push(MalRule {
            name: name.value.clone(),
            metric_name,
            expr,
            shape,
            line,
        });
    }
    Ok(MalFile {
        metric_prefix: metric_prefix.map(|s| s.value.clone()),
        exp_prefix: exp_prefix.map(|s| s.value.clone()),
        exp_suffix: exp_suffix.map(|s| s.value.clone()),
        filter,
        rules,
        layer_definitions: model::layer_definitions(&root)?,
    })
}

fn non_blank(scalar: Option<&Scalar>) -> Option<&Scalar> {
    scalar.filter(|s| !s.value.trim().is_empty())
}

fn chain(
    source: &SourceText<'_>,
    scalar: &Scalar,
    key: &'static str,
) -> Result<Chain, CompileError> {
    Chain::new(model::parse_expression(source, scalar)?, key)
}
