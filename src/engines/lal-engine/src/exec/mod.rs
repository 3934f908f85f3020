//! Running one rule's script on one log: the statements of `filter`, the parsers, `extractor`
//! (with `metrics`, `slowSql`, `sampledTrace` and output-type fields), `sink` (with `sampler`,
//! `dropper`, `enforcer`), `abort`, `if`/`else` and `def` locals.
//!
//! Control flow is SkyWalking's (pitfall 14): statements run in order; after `abort {}` every
//! later statement is a no-op; `save` starts true and the last executed sampler / dropper /
//! enforcer decision wins; the log is persisted where `sink {}` stands, once per sink reached.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hotrule_mal_engine::Sample;
use hotrule_rule_compiler::ast::{Block, Call, Else, Expr, ExprKind, IfStmt, Span, StmtKind};
use crate::java_regex::JavaRegex;
use serde_json::Value as Json;

use crate::error::{EvalError, RuleError};
use crate::eval::{Env, cast};
use crate::log::LogData;
use crate::parse::{self, Parsed};
use crate::sampler::LalState;
use crate::value::Val;
use crate::{Decision, LogRecord, RuleOutcome, Warning};

mod extract;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Filter,
    Extractor,
    Metrics,
    Sink,
    Sampler,
    RateLimit,
    Parser,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastDecision {
    None,
    Kept,
    Dropped,
    SampledOut,
}

/// What the extractor has set so far; unset fields fall back to the log at the sink.
#[derive(Debug, Default)]
struct Extracted {
    service: Option<String>,
    instance: Option<String>,
    endpoint: Option<String>,
    layer: Option<String>,
    timestamp_ms: Option<i64>,
    trace_id: Option<String>,
    segment_id: Option<String>,
    span_id: Option<i32>,
    tags: Vec<(String, String)>,
    fields: BTreeMap<String, Json>,
    /// `json {}` parsed the text body: the record is stored as JSON.
    json_from_text: bool,
}

/// Options gathered from a parser's block.
#[derive(Default)]
struct ParserOptions {
    abort_on_failure: Option<bool>,
    regexp: Option<Result<Arc<JavaRegex>, String>>,
}

/// The fields of one `metrics {}` block.
#[derive(Default)]
struct MetricBuilder {
    name: Option<String>,
    timestamp_ms: Option<i64>,
    labels: BTreeMap<String, String>,
    value: Option<f64>,
}

pub(crate) struct Run<'a> {
    env: Env<'a>,
    rule_key: &'a str,
    output_type: Option<&'a str>,
    regexes: &'a HashMap<Span, Result<Arc<JavaRegex>, String>>,
    state: &'a mut LalState,
    now_ms: i64,
    auto_mode: bool,
    save: bool,
    abort: bool,
    last: LastDecision,
    sinks_reached: usize,
    no_layer: bool,
    out: Extracted,
    options: ParserOptions,
    metric: MetricBuilder,
    rpm: Option<i64>,
    pub persisted: Vec<LogRecord>,
    pub samples: Vec<Sample>,
    pub warnings: Vec<Warning>,
}

impl<'a> Run<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        log: &'a LogData,
        rule_key: &'a str,
        output_type: Option<&'a str>,
        regexes: &'a HashMap<Span, Result<Arc<JavaRegex>, String>>,
        state: &'a mut LalState,
        now_ms: i64,
        auto_mode: bool,
    ) -> Run<'a> {
        let parsed = match &log.typed {
            Some(typed) => Parsed::Typed(typed.message.clone()),
            None => Parsed::Metadata,
        };
        Run {
            env: Env {
                log,
                parsed,
                vars: HashMap::new(),
            },
            rule_key,
            output_type,
            regexes,
            state,
            now_ms,
            auto_mode,
            save: true,
            abort: false,
            last: LastDecision::None,
            sinks_reached: 0,
            no_layer: false,
            out: Extracted::default(),
            options: ParserOptions::default(),
            metric: MetricBuilder::default(),
            rpm: None,
            persisted: Vec::new(),
            samples: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Runs the whole script (the compiler guarantees a top-level `filter { ... }`).
    pub fn run(mut self, script: &Block) -> RuleOutcome {
        let mut result = Ok(());
        for statement in &script.statements {
            if let StmtKind::Expr(Expr {
                kind: ExprKind::Call(call),
                ..
            }) = &statement.kind
                && call.method.name == "filter"
                && let Some(body) = closure_of(call)
            {
                result = self.block(body, Ctx::Filter);
                if result.is_err() {
                    break;
                }
            }
        }
        let error = result.err();
        let decision = if error.is_some() {
            Decision::Failed
        } else if !self.persisted.is_empty() {
            Decision::Kept
        } else if self.abort {
            Decision::Aborted
        } else if self.no_layer {
            Decision::NoLayer
        } else if self.sinks_reached > 0 {
            match self.last {
                LastDecision::SampledOut => Decision::SampledOut,
                _ => Decision::Dropped,
            }
        } else {
            Decision::NoSink
        };
        // The last persisted record is the outcome's record: not copied.
        let extracted = if self.persisted.is_empty() { self.record() } else { LogRecord::default() };
        RuleOutcome {
            rule: self.rule_key.to_string(),
            decision,
            save: self.save,
            aborted: self.abort,
            extracted,
            persisted: self.persisted,
            samples: self.samples,
            warnings: self.warnings,
            error: error.map(|error| RuleError { rule: self.rule_key.to_string(), error }),
        }
    }

    fn block(&mut self, block: &Block, ctx: Ctx) -> Result<(), EvalError> {
        for statement in &block.statements {
            if self.abort {
                return Ok(());
            }
            match &statement.kind {
                StmtKind::Expr(Expr {
                    kind: ExprKind::Call(call),
                    ..
                }) if call.receiver.is_none() => self.statement(call, ctx)?,
                StmtKind::Expr(Expr {
                    kind: ExprKind::Name(name),
                    span,
                }) => {
                    let call = Call::bare(name, *span);
                    self.statement(&call, ctx)?;
                }
                StmtKind::Expr(expr) => {
                    self.env.eval(expr)?;
                }
                StmtKind::If(if_statement) => self.if_statement(if_statement, ctx)?,
                StmtKind::Local { ty, name, init } => {
                    let value = match init {
                        Some(init) => self.env.eval(init)?,
                        None => Val::Null,
                    };
                    let value = match ty {
                        Some(ty) => cast(value, &ty.name)?,
                        None => value,
                    };
                    self.env.vars.insert(name.name.clone(), value);
                }
                StmtKind::Return(_) => {
                    return Err(EvalError::Unsupported { what: "return" });
                }
            }
        }
        Ok(())
    }

    fn if_statement(&mut self, statement: &IfStmt, ctx: Ctx) -> Result<(), EvalError> {
        if self.env.eval(&statement.condition)?.truth() {
            return self.block(&statement.then, ctx);
        }
        match &statement.otherwise {
            None => Ok(()),
            Some(Else::Block(block)) => self.block(block, ctx),
            Some(Else::If(nested)) => self.if_statement(nested, ctx),
        }
    }

    fn value(&mut self, call: &Call, statement: &'static str) -> Result<Val, EvalError> {
        match call.args.first() {
            Some(arg) => self.env.eval(&arg.value),
            None => Err(EvalError::Missing {
                statement,
                part: "value",
            }),
        }
    }

    fn statement(&mut self, call: &Call, ctx: Ctx) -> Result<(), EvalError> {
        let name = call.method.name.as_str();
        match (ctx, name) {
            (Ctx::Filter | Ctx::Extractor, "abort") => {
                self.abort = true;
                Ok(())
            }
            (Ctx::Filter, "json" | "yaml" | "text") => self.parser(call, name),
            (Ctx::Filter, "extractor") => self.sub_block(call, Ctx::Extractor),
            (Ctx::Filter, "sink") => self.sink(call),
            (Ctx::Parser, "abortOnFailure") => {
                self.options.abort_on_failure = Some(self.value(call, "abortOnFailure")?.to_bool());
                Ok(())
            }
            (Ctx::Parser, "regexp") => {
                let regex = match call
                    .args
                    .first()
                    .map(|arg| (&arg.value.kind, arg.value.span))
                {
                    Some((ExprKind::Str(_), span)) => self
                        .regexes
                        .get(&span)
                        .cloned()
                        .unwrap_or_else(|| Err("pattern not prepared".to_owned())),
                    _ => parse::compile_java_regex(&self.value(call, "regexp")?.display()),
                };
                self.options.regexp = Some(regex);
                Ok(())
            }
            (Ctx::Extractor, _) => self.extractor_statement(call, name),
            (Ctx::Metrics, _) => self.metrics_statement(call, name),
            (Ctx::Sink, "sampler") => self.sub_block(call, Ctx::Sampler),
            (Ctx::Sink, "dropper") => {
                self.save = false;
                self.last = LastDecision::Dropped;
                Ok(())
            }
            (Ctx::Sink, "enforcer") => {
                self.save = true;
                self.last = LastDecision::Kept;
                Ok(())
            }
            (Ctx::Sampler, "rateLimit") => {
                let id = self.value(call, "rateLimit")?.display();
                self.rpm = None;
                self.sub_block(call, Ctx::RateLimit)?;
                let rpm = self.rpm.ok_or(EvalError::Missing {
                    statement: "rateLimit",
                    part: "rpm",
                })?;
                let kept = self.state.rate_limit(self.rule_key, &id, rpm, self.now_ms);
                self.sampled(kept);
                Ok(())
            }
            (Ctx::Sampler, "possibility") => {
                let percent = self.value(call, "possibility")?.to_long()?;
                let kept = self.state.possibility(percent);
                self.sampled(kept);
                Ok(())
            }
            (Ctx::RateLimit, "rpm") => {
                self.rpm = Some(self.value(call, "rpm")?.to_long()?);
                Ok(())
            }
            _ => Err(EvalError::Unsupported {
                what: "statement in this block",
            }),
        }
    }

    fn sampled(&mut self, kept: bool) {
        self.save = kept;
        self.last = if kept {
            LastDecision::Kept
        } else {
            LastDecision::SampledOut
        };
    }

    fn sub_block(&mut self, call: &Call, ctx: Ctx) -> Result<(), EvalError> {
        match closure_of(call) {
            Some(body) => self.block(body, ctx),
            None => Ok(()),
        }
    }

    fn parser(&mut self, call: &Call, kind: &str) -> Result<(), EvalError> {
        self.options = ParserOptions::default();
        self.sub_block(call, Ctx::Parser)?;
        let options = std::mem::take(&mut self.options);
        let log = self.env.log;
        let parsed = match kind {
            "json" => parse::json(log).map(|(map, used_text)| {
                self.out.json_from_text = used_text;
                Parsed::Map(map)
            }),
            "yaml" => parse::yaml(log).map(Parsed::Map),
            _ => match options.regexp {
                // `text {}` without a pattern leaves `parsed` alone.
                None => return Ok(()),
                Some(Err(reason)) => return Err(EvalError::Regex { reason }),
                Some(Ok(regex)) => {
                    parse::text(log, &regex).map(|groups| Parsed::Groups { regex, groups })
                }
            },
        };
        match parsed {
            Some(parsed) => self.env.parsed = parsed,
            None if options.abort_on_failure.unwrap_or(true) => self.abort = true,
            None => self.env.parsed = Parsed::Metadata,
        }
        Ok(())
    }

    fn sink(&mut self, call: &Call) -> Result<(), EvalError> {
        self.sub_block(call, Ctx::Sink)?;
        if self.abort {
            return Ok(());
        }
        self.sinks_reached += 1;
        if !self.save {
            return Ok(());
        }
        let record = self.record();
        // An `auto` rule that claims a log but sets no layer: the log is dropped at the sink.
        if self.auto_mode && record.layer.is_empty() {
            self.no_layer = true;
            return Ok(());
        }
        self.persisted.push(record);
        Ok(())
    }
}

pub(super) fn closure_of(call: &Call) -> Option<&Block> {
    match call.args.last().map(|arg| &arg.value.kind) {
        Some(ExprKind::Closure(closure)) => Some(&closure.body),
        _ => None,
    }
}
