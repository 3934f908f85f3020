//! The structure of a LAL script: which statements may appear in which block.
//!
//! A script is `filter { ... }`. The statements allowed in each block, from `lal.md` and the
//! bundled rules:
//!
//! | block | statements |
//! |---|---|
//! | top level | `filter { }` |
//! | `filter` | `json { }`, `yaml { }`, `text { }`, `extractor { }`, `sink { }`, `abort { }` |
//! | `json`, `yaml` | `abortOnFailure v` |
//! | `text` | `regexp "..."` (checked as a Java regex), `abortOnFailure v` |
//! | `extractor` | `service`, `instance`, `endpoint`, `layer`, `timestamp v[, "format"]`, `traceId`, `segmentId`, `spanId`, `tag k: v`, `metrics { }`, `slowSql { }`, `sampledTrace { }`, `abort { }`, and the output type's fields |
//! | `metrics` | `name`, `labels k: v, ...`, `value`, `timestamp` |
//! | `slowSql` | `id`, `statement`, `latency` |
//! | `sampledTrace` | `latency`, `uri`, `reason`, `processId`, `destProcessId`, `detectPoint`, `componentId` |
//! | `sink` | `sampler { }`, `dropper { }`, `enforcer { }` |
//! | `sampler` | `rateLimit(id) { }`, `possibility(percent) { }` |
//! | `rateLimit` | `rpm n` |
//!
//! Every block except the top level also admits `if`/`else`, `def` (or typed) locals and
//! assignments. At HEAD an extractor sets the output type's fields directly (`latency x` for
//! `outputType: SampledTrace`); the fields of the `SlowSQL` and `SampledTrace` types are known, and
//! for any other non-default output type (an SPI name or class this crate cannot inspect) any
//! field name is accepted in `extractor`.
//!
//! Expressions are checked for syntax only, plus their `as` casts: upstream compiles LAL to Java
//! and supports casts to the types in `lal_values.rs`.

use crate::CompileError;
use crate::ast::{Block, Call, Else, Expr, ExprKind, IfStmt, Span, StmtKind};
use crate::lal_values::{check_expr, check_regexp, check_rpm};
use crate::model::pos_of;

const SLOW_SQL_FIELDS: &[&str] = &["id", "statement", "latency"];
const SAMPLED_TRACE_FIELDS: &[&str] = &[
    "latency",
    "uri",
    "reason",
    "processId",
    "destProcessId",
    "detectPoint",
    "componentId",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    Top,
    Filter,
    ParserOptions,
    Text,
    Extractor,
    Metrics,
    SlowSql,
    SampledTrace,
    Sink,
    Sampler,
    RateLimit,
    /// `abort {}`, `dropper {}`, `enforcer {}`, `possibility(n) {}`: no statements.
    Empty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `name { ... }`, optionally `name(args) { ... }` with exactly `positional` arguments.
    Block {
        child: Context,
        positional: usize,
        closure_optional: bool,
    },
    /// `name value[, value...]` or `name(value)`.
    Value,
}

const fn block(child: Context) -> Form {
    Form::Block {
        child,
        positional: 0,
        closure_optional: false,
    }
}

const fn optional_block(child: Context) -> Form {
    Form::Block {
        child,
        positional: 0,
        closure_optional: true,
    }
}

const fn block_with_arg(child: Context) -> Form {
    Form::Block {
        child,
        positional: 1,
        closure_optional: false,
    }
}

/// Statements of each context (output-type fields are added for `Extractor`).
const TOP_STATEMENTS: &[(&str, Form)] = &[("filter", block(Context::Filter))];

const FILTER_STATEMENTS: &[(&str, Form)] = &[
    ("json", optional_block(Context::ParserOptions)),
    ("yaml", optional_block(Context::ParserOptions)),
    ("text", block(Context::Text)),
    ("extractor", block(Context::Extractor)),
    ("sink", block(Context::Sink)),
    ("abort", optional_block(Context::Empty)),
];

const PARSER_OPTIONS_STATEMENTS: &[(&str, Form)] = &[("abortOnFailure", Form::Value)];

const TEXT_STATEMENTS: &[(&str, Form)] =
    &[("regexp", Form::Value), ("abortOnFailure", Form::Value)];

const EXTRACTOR_STATEMENTS: &[(&str, Form)] = &[
    ("service", Form::Value),
    ("instance", Form::Value),
    ("endpoint", Form::Value),
    ("layer", Form::Value),
    ("timestamp", Form::Value),
    ("traceId", Form::Value),
    ("segmentId", Form::Value),
    ("spanId", Form::Value),
    ("tag", Form::Value),
    ("metrics", block(Context::Metrics)),
    ("slowSql", block(Context::SlowSql)),
    ("sampledTrace", block(Context::SampledTrace)),
    ("abort", optional_block(Context::Empty)),
];

const METRICS_STATEMENTS: &[(&str, Form)] = &[
    ("name", Form::Value),
    ("labels", Form::Value),
    ("value", Form::Value),
    ("timestamp", Form::Value),
];

const SLOW_SQL_STATEMENTS: &[(&str, Form)] = &[
    ("id", Form::Value),
    ("statement", Form::Value),
    ("latency", Form::Value),
];

const SAMPLED_TRACE_STATEMENTS: &[(&str, Form)] = &[
    ("latency", Form::Value),
    ("uri", Form::Value),
    ("reason", Form::Value),
    ("processId", Form::Value),
    ("destProcessId", Form::Value),
    ("detectPoint", Form::Value),
    ("componentId", Form::Value),
];

const SINK_STATEMENTS: &[(&str, Form)] = &[
    ("sampler", block(Context::Sampler)),
    ("dropper", optional_block(Context::Empty)),
    ("enforcer", optional_block(Context::Empty)),
];

const SAMPLER_STATEMENTS: &[(&str, Form)] = &[
    ("rateLimit", block_with_arg(Context::RateLimit)),
    ("possibility", block_with_arg(Context::Empty)),
];

const RATE_LIMIT_STATEMENTS: &[(&str, Form)] = &[("rpm", Form::Value)];

const EMPTY_STATEMENTS: &[(&str, Form)] = &[];

fn statements(context: Context) -> &'static [(&'static str, Form)] {
    match context {
        Context::Top => TOP_STATEMENTS,
        Context::Filter => FILTER_STATEMENTS,
        Context::ParserOptions => PARSER_OPTIONS_STATEMENTS,
        Context::Text => TEXT_STATEMENTS,
        Context::Extractor => EXTRACTOR_STATEMENTS,
        Context::Metrics => METRICS_STATEMENTS,
        Context::SlowSql => SLOW_SQL_STATEMENTS,
        Context::SampledTrace => SAMPLED_TRACE_STATEMENTS,
        Context::Sink => SINK_STATEMENTS,
        Context::Sampler => SAMPLER_STATEMENTS,
        Context::RateLimit => RATE_LIMIT_STATEMENTS,
        Context::Empty => EMPTY_STATEMENTS,
    }
}

fn context_name(context: Context) -> &'static str {
    match context {
        Context::Top => "the top level of a LAL dsl",
        Context::Filter => "filter",
        Context::ParserOptions => "a json/yaml parser",
        Context::Text => "text",
        Context::Extractor => "extractor",
        Context::Metrics => "metrics",
        Context::SlowSql => "slowSql",
        Context::SampledTrace => "sampledTrace",
        Context::Sink => "sink",
        Context::Sampler => "sampler",
        Context::RateLimit => "rateLimit",
        Context::Empty => "this block",
    }
}

/// Extra statements an extractor accepts for the rule's output type.
enum OutputFields {
    Known(&'static [&'static str]),
    Any,
}

#[derive(Debug, thiserror::Error)]
enum LalError {
    #[error("unknown statement '{name}' in {context}; expected one of: {expected}")]
    UnknownStatement {
        name: String,
        context: &'static str,
        expected: String,
    },
    #[error("'{name}' must be followed by a block {{ ... }}")]
    MissingBlock { name: String },
    #[error("'{name}' takes {expected} argument(s) before its block, found {found}")]
    BlockArgs {
        name: String,
        expected: usize,
        found: usize,
    },
    #[error("'{name}' needs a value, as in '{name} x'")]
    MissingValue { name: String },
    #[error("'{name}' takes a value, not a block")]
    UnexpectedBlock { name: String },
    #[error("expected a LAL statement in {context}, found an expression")]
    NotAStatement { context: &'static str },
    #[error("a LAL dsl must be a 'filter {{ ... }}' block")]
    NotAFilter,
    #[error("'{0}' is not allowed in a LAL dsl")]
    Return(&'static str),
}

/// Checks a parsed script for a rule with the given `outputType`.
pub(crate) fn validate(script: &Block, output_type: Option<&str>) -> Result<(), CompileError> {
    let output_fields = match output_type {
        None | Some("Log") => OutputFields::Known(&[]),
        Some("SlowSQL") => OutputFields::Known(SLOW_SQL_FIELDS),
        Some("SampledTrace") => OutputFields::Known(SAMPLED_TRACE_FIELDS),
        Some(_) => OutputFields::Any,
    };
    if script.statements.is_empty() {
        return Err(pos_of(script.span).error(LalError::NotAFilter));
    }
    Validator { output_fields }.block(script, Context::Top)?;
    crate::ast_walk::no_string_arithmetic(script)?;
    crate::ast_walk::index_literals_fit_int(script)
}

struct Validator {
    output_fields: OutputFields,
}

impl Validator {
    fn block(&self, block: &Block, context: Context) -> Result<(), CompileError> {
        block
            .statements
            .iter()
            .try_for_each(|statement| self.statement(&statement.kind, statement.span, context))
    }

    fn statement(&self, kind: &StmtKind, span: Span, context: Context) -> Result<(), CompileError> {
        let top = context == Context::Top;
        match kind {
            StmtKind::Expr(Expr {
                kind: ExprKind::Call(call),
                ..
            }) if call.receiver.is_none() && call.namespace.is_none() => {
                self.call_statement(call, context)
            }
            // A bare `extractor` or `rpm`: reported as that statement missing its block or value.
            StmtKind::Expr(Expr {
                kind: ExprKind::Name(name),
                span,
            }) => {
                let call = Call::bare(name, *span);
                self.call_statement(&call, context)
            }
            _ if top => Err(pos_of(span).error(LalError::NotAFilter)),
            StmtKind::If(if_statement) => self.if_statement(if_statement, context),
            StmtKind::Local { init, .. } => init.as_ref().map_or(Ok(()), check_expr),
            StmtKind::Expr(
                expr @ Expr {
                    kind: ExprKind::Assign { .. },
                    ..
                },
            ) => check_expr(expr),
            StmtKind::Expr(expr) => Err(pos_of(expr.span).error(LalError::NotAStatement {
                context: context_name(context),
            })),
            StmtKind::Return(_) => Err(pos_of(span).error(LalError::Return("return"))),
        }
    }

    fn if_statement(&self, statement: &IfStmt, context: Context) -> Result<(), CompileError> {
        check_expr(&statement.condition)?;
        self.block(&statement.then, context)?;
        match &statement.otherwise {
            None => Ok(()),
            Some(Else::Block(block)) => self.block(block, context),
            Some(Else::If(nested)) => self.if_statement(nested, context),
        }
    }

    fn lookup(&self, name: &str, context: Context) -> Option<Form> {
        let known = statements(context)
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, form)| *form);
        if known.is_some() || context != Context::Extractor {
            return known;
        }
        match self.output_fields {
            OutputFields::Known(fields) => fields.contains(&name).then_some(Form::Value),
            OutputFields::Any => Some(Form::Value),
        }
    }

    fn call_statement(&self, call: &Call, context: Context) -> Result<(), CompileError> {
        let name = &call.method.name;
        let at = pos_of(call.method.span);
        let Some(form) = self.lookup(name, context) else {
            let mut expected: Vec<&str> = statements(context)
                .iter()
                .map(|(known, _)| *known)
                .collect();
            if let (Context::Extractor, OutputFields::Known(fields)) =
                (context, &self.output_fields)
            {
                expected.extend(fields.iter());
            }
            let expected = if expected.is_empty() {
                "nothing".to_owned()
            } else {
                expected.join(", ")
            };
            return Err(at.error(LalError::UnknownStatement {
                name: name.clone(),
                context: context_name(context),
                expected,
            }));
        };
        let closure = match call.args.last().map(|arg| &arg.value.kind) {
            Some(ExprKind::Closure(closure)) => Some(closure),
            _ => None,
        };
        match form {
            Form::Block {
                child,
                positional,
                closure_optional,
            } => {
                let found = call.args.len() - usize::from(closure.is_some());
                if found != positional {
                    return Err(at.error(LalError::BlockArgs {
                        name: name.clone(),
                        expected: positional,
                        found,
                    }));
                }
                call.args
                    .iter()
                    .filter(|arg| !matches!(arg.value.kind, ExprKind::Closure(_)))
                    .try_for_each(|arg| check_expr(&arg.value))?;
                match closure {
                    Some(closure) => self.block(&closure.body, child),
                    None if closure_optional => Ok(()),
                    None => Err(at.error(LalError::MissingBlock { name: name.clone() })),
                }
            }
            Form::Value => {
                if closure.is_some() {
                    return Err(at.error(LalError::UnexpectedBlock { name: name.clone() }));
                }
                if call.args.is_empty() {
                    return Err(at.error(LalError::MissingValue { name: name.clone() }));
                }
                call.args
                    .iter()
                    .try_for_each(|arg| check_expr(&arg.value))?;
                if context == Context::Text && name == "regexp" {
                    check_regexp(call)?;
                }
                if context == Context::RateLimit && name == "rpm" {
                    check_rpm(call)?;
                }
                Ok(())
            }
        }
    }
}
