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
use hotrule_rule_compiler::ast::{Arg, Block, Call, Else, Expr, ExprKind, IfStmt, Span, StmtKind};
use regex::Regex;
use serde_json::Value as Json;

use crate::error::EvalError;
use crate::eval::{Env, cast};
use crate::log::{Body, ContentType, LogData};
use crate::parse::{self, Parsed};
use crate::sampler::LalState;
use crate::value::Val;
use crate::{Decision, LogRecord, Warning};

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
    regexp: Option<Result<Arc<Regex>, String>>,
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
    regexes: &'a HashMap<Span, Result<Arc<Regex>, String>>,
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

/// The result of one run, assembled by the caller.
pub(crate) struct Finished {
    pub decision: Decision,
    pub save: bool,
    pub aborted: bool,
    pub record: LogRecord,
    pub persisted: Vec<LogRecord>,
    pub samples: Vec<Sample>,
    pub warnings: Vec<Warning>,
    pub error: Option<EvalError>,
}

impl<'a> Run<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        log: &'a LogData,
        rule_key: &'a str,
        output_type: Option<&'a str>,
        regexes: &'a HashMap<Span, Result<Arc<Regex>, String>>,
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
    pub fn run(mut self, script: &Block) -> Finished {
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
        let record = match self.persisted.last() {
            Some(record) => record.clone(),
            None => self.record(),
        };
        Finished {
            decision,
            save: self.save,
            aborted: self.abort,
            record,
            persisted: self.persisted,
            samples: self.samples,
            warnings: self.warnings,
            error,
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
                    let call = Call {
                        receiver: None,
                        safe: false,
                        namespace: None,
                        method: hotrule_rule_compiler::ast::Ident {
                            name: name.clone(),
                            span: *span,
                        },
                        args: Vec::new(),
                        style: hotrule_rule_compiler::ast::CallStyle::Command,
                    };
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

    fn extractor_statement(&mut self, call: &Call, name: &str) -> Result<(), EvalError> {
        match name {
            "service" | "instance" | "endpoint" | "layer" | "traceId" | "segmentId" => {
                let Some(text) = self.value(call, "extractor")?.to_str() else {
                    return Ok(());
                };
                if text.is_empty() {
                    return Ok(());
                }
                let slot = match name {
                    "service" => &mut self.out.service,
                    "instance" => &mut self.out.instance,
                    "endpoint" => &mut self.out.endpoint,
                    "layer" => &mut self.out.layer,
                    "traceId" => &mut self.out.trace_id,
                    _ => &mut self.out.segment_id,
                };
                *slot = Some(text);
                Ok(())
            }
            "spanId" => {
                let value = self.value(call, "spanId")?;
                if value.is_null() || value == Val::Str(String::new()) {
                    return Ok(());
                }
                let span = value.to_int()?;
                self.out.span_id = i32::try_from(span).ok();
                Ok(())
            }
            "timestamp" => {
                let value = self.value(call, "timestamp")?;
                let format = match call.args.get(1) {
                    Some(arg) => Some(self.env.eval(&arg.value)?.display()),
                    None => None,
                };
                if let Some(ts) = timestamp_of(&value, format.as_deref())? {
                    self.out.timestamp_ms = Some(ts);
                }
                Ok(())
            }
            "tag" => {
                for (key, value) in self.pairs(&call.args)? {
                    if let Some(value) = value.to_str()
                        && !key.is_empty()
                        && !value.is_empty()
                    {
                        self.out.tags.push((key, value));
                    }
                }
                Ok(())
            }
            "metrics" => {
                self.metric = MetricBuilder::default();
                self.sub_block(call, Ctx::Metrics)?;
                let metric = std::mem::take(&mut self.metric);
                self.emit(metric)
            }
            // `slowSql { }` / `sampledTrace { }` (older scripts) set output fields like the
            // extractor's own field statements do.
            "slowSql" | "sampledTrace" => self.sub_block(call, Ctx::Extractor),
            field => {
                let value = self.value(call, "extractor")?;
                self.out.fields.insert(field.to_owned(), value.to_json());
                Ok(())
            }
        }
    }

    fn metrics_statement(&mut self, call: &Call, name: &str) -> Result<(), EvalError> {
        match name {
            "name" => self.metric.name = self.value(call, "name")?.to_str(),
            "value" => self.metric.value = Some(self.value(call, "value")?.to_double()?),
            "timestamp" => {
                self.metric.timestamp_ms = timestamp_of(&self.value(call, "timestamp")?, None)?;
            }
            "labels" => {
                for (key, value) in self.pairs(&call.args)? {
                    if let Some(value) = value.to_str()
                        && !key.trim().is_empty()
                    {
                        self.metric.labels.insert(key, value);
                    }
                }
            }
            _ => {
                return Err(EvalError::Unsupported {
                    what: "statement in metrics",
                });
            }
        }
        Ok(())
    }

    /// Named arguments (`k: v, ...`) or one map argument, as key / value pairs.
    fn pairs(&mut self, args: &[Arg]) -> Result<Vec<(String, Val)>, EvalError> {
        let mut out = Vec::with_capacity(args.len());
        for arg in args {
            match &arg.name {
                Some(name) => out.push((name.name.clone(), self.env.eval(&arg.value)?)),
                None => {
                    if let Val::Json(Json::Object(map)) = self.env.eval(&arg.value)? {
                        out.extend(map.iter().map(|(k, v)| (k.clone(), Val::from_json(v))));
                    }
                }
            }
        }
        Ok(out)
    }

    fn emit(&mut self, metric: MetricBuilder) -> Result<(), EvalError> {
        let name = metric
            .name
            .filter(|n| !n.is_empty())
            .ok_or(EvalError::Missing {
                statement: "metrics",
                part: "name",
            })?;
        let value = metric.value.ok_or(EvalError::Missing {
            statement: "metrics",
            part: "value",
        })?;
        match metric.timestamp_ms.filter(|ts| *ts > 0) {
            Some(timestamp_ms) => self.samples.push(Sample::new(
                name,
                std::sync::Arc::new(metric.labels),
                value,
                timestamp_ms,
            )),
            // SkyWalking sends it with timestamp 0 (1970), which storage drops at TTL.
            None => self.warnings.push(Warning::MetricWithoutTimestamp {
                rule: self.rule_key.to_owned(),
                metric: name,
            }),
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

    /// The record as it would be stored now: extracted fields over the log's own.
    fn record(&self) -> LogRecord {
        let log = self.env.log;
        let out = &self.out;
        let pick = |value: &Option<String>, fallback: &str| {
            value.clone().unwrap_or_else(|| fallback.to_owned())
        };
        let segment_id = pick(&out.segment_id, &log.trace_context.trace_segment_id);
        let span_id =
            (!segment_id.is_empty()).then(|| out.span_id.unwrap_or(log.trace_context.span_id));
        let (content_type, content) = if out.json_from_text {
            (ContentType::Json, log.body.content().to_owned())
        } else {
            (log.body.content_type(), log.body.content().to_owned())
        };
        let mut tags = log.tags.clone();
        tags.extend(out.tags.iter().cloned());
        LogRecord {
            service: pick(&out.service, &log.service),
            instance: pick(&out.instance, &log.service_instance),
            endpoint: pick(&out.endpoint, &log.endpoint),
            layer: pick(&out.layer, &log.layer),
            timestamp_ms: out
                .timestamp_ms
                .filter(|ts| *ts > 0)
                .unwrap_or(log.timestamp_ms),
            trace_id: pick(&out.trace_id, &log.trace_context.trace_id),
            segment_id,
            span_id,
            content_type,
            content,
            tags,
            output_type: self.output_type.map(str::to_owned),
            fields: out.fields.clone(),
        }
    }
}

impl From<&Body> for ContentType {
    fn from(body: &Body) -> ContentType {
        body.content_type()
    }
}

/// `timestamp v[, "pattern"]`: a number or numeric string is epoch ms (a non-numeric string
/// fails the rule); with a pattern, a string that does not match gives 0 (the log's own
/// timestamp is used at the sink). Null or empty sets nothing.
fn timestamp_of(value: &Val, format: Option<&str>) -> Result<Option<i64>, EvalError> {
    let text = match value {
        Val::Null => return Ok(None),
        Val::Int(i) => return Ok(Some(*i)),
        Val::Float(f) => return Ok(Some(*f as i64)),
        other => other.display(),
    };
    if text.is_empty() {
        return Ok(None);
    }
    match format {
        None => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| EvalError::NotANumber { text }),
        Some(format) => Ok(Some(crate::time::parse(&text, format).unwrap_or(0))),
    }
}

fn closure_of(call: &Call) -> Option<&Block> {
    match call.args.last().map(|arg| &arg.value.kind) {
        Some(ExprKind::Closure(closure)) => Some(&closure.body),
        _ => None,
    }
}
