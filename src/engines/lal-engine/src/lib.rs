//! The LAL interpreter: runs compiled SkyWalking LAL rule files ([`LalFile`]) on logs and returns,
//! per rule, what would be stored, the sink's decision, the samples emitted for the
//! `log-mal-rules` MAL files, and the rule's error. Pure: no IO, no clock (the caller passes
//! `now_ms`), no global state (sampler counters live in a [`LalState`] the caller owns).
//!
//! Semantics follow SkyWalking's log analyzer as its code runs (see `docs/lal.md` for every
//! construct and each deliberate difference):
//! - intake: a log without a service is ignored; timestamp 0 becomes `now_ms`;
//! - routing: **every** rule of the log's layer runs, each on its own context, and each may
//!   persist its own copy; a log without a layer goes to the `auto` rules first and, if none of
//!   them claims it (all abort), to the `GENERAL` rules; a rule with a typed input runs only on
//!   logs carrying that input type;
//! - a runtime error stops that rule for that log and is returned with the rule's key; other
//!   rules and logs are unaffected; nothing panics.
//!
//! [`analyze`] shares one sampler state among the files; [`analyze_files`] routes the same way
//! over files that each own their state (dispatch, which swaps files one at a time).

mod backtrack;
pub mod bench;
mod error;
mod eval;
mod exec;
mod java_regex;
mod log;
mod parse;
mod sampler;
#[doc(hidden)]
pub mod testing;
mod time;
mod value;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hotrule_mal_engine::Sample;
use hotrule_rule_compiler::ast::{Block, ExprKind, Span};
use hotrule_rule_compiler::{LalFile, LalRule};
use crate::java_regex::JavaRegex;
use serde_json::Value as Json;

pub use error::{EvalError, RuleError};
pub use log::{Body, ContentType, LogData, LogDataError, TraceContext, TypedInput};
pub use parse::yaml_to_json;
pub use sampler::{LalState, WINDOW_MS};

/// The layer whose rules take a log that no `auto` rule claims.
pub const GENERAL_LAYER: &str = "GENERAL";

/// Input types that a layer's receiver registers for its rules (SkyWalking's
/// `LALSourceTypeProvider`): the envoy ALS receiver gives `MESH` rules HTTP access-log entries.
const LAYER_INPUT_TYPES: &[(&str, &str)] = &[(
    "MESH",
    "io.envoyproxy.envoy.data.accesslog.v3.HTTPAccessLogEntry",
)];

/// A LAL file ready to run: the compiled file plus, per rule, its key, effective input type and
/// its literal `regexp` patterns compiled once.
#[derive(Debug, Clone)]
pub struct PreparedLalFile {
    file: LalFile,
    rules: Vec<PreparedRule>,
}

#[derive(Debug, Clone)]
struct PreparedRule {
    key: String,
    input_type: Option<String>,
    regexes: HashMap<Span, Result<Arc<JavaRegex>, String>>,
}

/// What one rule made of one log.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    /// The rule key `layer:name`.
    pub rule: String,
    pub decision: Decision,
    /// The rule's `save` flag at the end (SkyWalking's `shouldSave`).
    pub save: bool,
    /// The rule aborted (SkyWalking's `shouldAbort`).
    pub aborted: bool,
    /// The record as extraction left it when no sink persisted one (empty otherwise: then
    /// [`RuleOutcome::record`] is the last persisted, not a copy of it).
    pub extracted: LogRecord,
    /// One copy per `sink {}` that persisted (normally zero or one).
    pub persisted: Vec<LogRecord>,
    /// Samples emitted by `metrics {}`, for the `log-mal-rules` files.
    pub samples: Vec<Sample>,
    pub warnings: Vec<Warning>,
    pub error: Option<RuleError>,
}

impl RuleOutcome {
    /// The extracted record: as persisted by the last sink reached, otherwise as extraction
    /// left it (what would have been stored).
    pub fn record(&self) -> &LogRecord {
        self.persisted.last().unwrap_or(&self.extracted)
    }
}

/// The sink's verdict for one rule on one log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A sink persisted the log.
    Kept,
    /// A sink ran but `dropper {}` (or a decision other than a sampler's) left save false.
    Dropped,
    /// A sink ran and the last decision was a sampler refusing the log.
    SampledOut,
    /// `abort {}` ran, or a parser failed with `abortOnFailure` (before any sink persisted).
    Aborted,
    /// An `auto` rule claimed the log but set no layer: dropped at the sink.
    NoLayer,
    /// The script finished without reaching a sink: nothing stored.
    NoSink,
    /// A runtime error stopped the rule (see [`RuleOutcome::error`]).
    Failed,
}

/// A stored log (SkyWalking's `Log` record, before ids are encoded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogRecord {
    pub service: String,
    pub instance: String,
    pub endpoint: String,
    pub layer: String,
    pub timestamp_ms: i64,
    pub trace_id: String,
    pub segment_id: String,
    /// Stored only when there is a segment id.
    pub span_id: Option<i32>,
    pub content_type: ContentType,
    pub content: String,
    /// The log's own tags, then those the extractor added (keys may repeat).
    pub tags: Vec<(String, String)>,
    /// The rule's `outputType` (`None` is a plain log).
    pub output_type: Option<String>,
    /// Fields of the output type set in the extractor (`SlowSQL`'s `id`, `statement`,
    /// `latency`; `SampledTrace`'s `latency`, `uri`, ...).
    pub fields: BTreeMap<String, Json>,
}

impl LogRecord {
    /// The first tag with this key (original tags first, then extracted ones).
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Conditions that do not fail a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// `metrics {}` without a `timestamp`: SkyWalking emits it at 1970, where storage drops
    /// it; hotrule emits nothing and says so.
    MetricWithoutTimestamp { rule: String, metric: String },
}

/// What happened to one log.
#[derive(Debug, Clone, PartialEq)]
pub enum LogAnalysis {
    /// No service: SkyWalking ignores such logs.
    Ignored,
    /// The outcome of every rule that ran, in file order (auto rules first when they ran).
    Ran(Vec<RuleOutcome>),
}

impl LogAnalysis {
    pub fn outcomes(&self) -> &[RuleOutcome] {
        match self {
            LogAnalysis::Ignored => &[],
            LogAnalysis::Ran(outcomes) => outcomes,
        }
    }
}

impl PreparedLalFile {
    pub fn new(file: LalFile) -> PreparedLalFile {
        let rules = file.rules.iter().map(prepare_rule).collect();
        PreparedLalFile { file, rules }
    }

    pub fn file(&self) -> &LalFile {
        &self.file
    }

    /// Runs rule `index` on `log` as it stands (no intake, no routing): for tests and
    /// `rule test`. `auto_mode` makes a claiming rule without a layer drop the log at its sink.
    pub fn run_rule(
        &self,
        index: usize,
        log: &LogData,
        now_ms: i64,
        auto_mode: bool,
        state: &mut LalState,
    ) -> Option<RuleOutcome> {
        let rule = self.file.rules.get(index)?;
        let prepared = self.rules.get(index)?;
        Some(run_one(rule, prepared, log, now_ms, auto_mode, state))
    }

    /// Whether rule `index` runs on a log with this typed input (or none).
    fn accepts(&self, index: usize, log: &LogData) -> bool {
        let wanted = self.rules.get(index).and_then(|r| r.input_type.as_deref());
        match (wanted, &log.typed) {
            (None, _) => true,
            (Some(wanted), Some(typed)) => typed.type_name == wanted,
            (Some(_), None) => false,
        }
    }
}

/// Runs a log through every rule of `files` that applies to it (intake and routing as the
/// module documentation describes), with one sampler state for all of them.
pub fn analyze(
    files: &[&PreparedLalFile],
    log: &LogData,
    now_ms: i64,
    state: &mut LalState,
) -> LogAnalysis {
    let mut sources = OneState { files, state };
    match route(&mut sources, log, now_ms, true) {
        None => LogAnalysis::Ignored,
        Some(outcomes) => LogAnalysis::Ran(outcomes.into_iter().map(|(_, o)| o).collect()),
    }
}

/// One file with its own sampler state, for [`analyze_files`].
pub struct FileRun<'a> {
    pub file: &'a PreparedLalFile,
    pub state: &'a mut LalState,
}

/// What happened to one log in [`analyze_files`]: each outcome with the index of its file.
#[derive(Debug, Clone, PartialEq)]
pub enum FileAnalysis {
    /// No service: SkyWalking ignores such logs.
    Ignored,
    /// `(file index, outcome)` of every rule that ran, in file order (auto rules first).
    Ran(Vec<(usize, RuleOutcome)>),
}

/// [`analyze`] with a sampler state per file (a caller that swaps one file keeps the others'
/// counters). Routing spans the files exactly as in `analyze`. With `general_fallback` false, a
/// log without a layer that no `auto` rule claims does not go to the `GENERAL` rules (the
/// caller knows of an `auto` rule that could have claimed it but is not running now).
pub fn analyze_files(
    files: &mut [FileRun<'_>],
    log: &LogData,
    now_ms: i64,
    general_fallback: bool,
) -> FileAnalysis {
    match route(files, log, now_ms, general_fallback) {
        None => FileAnalysis::Ignored,
        Some(outcomes) => FileAnalysis::Ran(outcomes),
    }
}

impl PreparedLalFile {
    /// Whether some rule of this file could run on `log`: a rule of its layer or, for a log
    /// without a layer, an `auto` or a `GENERAL` rule; accepting its typed input either way.
    pub fn may_run(&self, log: &LogData) -> bool {
        if log.service.is_empty() {
            return false;
        }
        if log.layer.is_empty() {
            self.runs_in(None, log) || self.runs_in(Some(GENERAL_LAYER), log)
        } else {
            self.runs_in(Some(&log.layer), log)
        }
    }

    /// Whether an `auto` rule of this file could claim `log` (a log without a layer).
    pub fn may_claim(&self, log: &LogData) -> bool {
        !log.service.is_empty() && log.layer.is_empty() && self.runs_in(None, log)
    }

    fn runs_in(&self, layer: Option<&str>, log: &LogData) -> bool {
        self.file
            .rules
            .iter()
            .enumerate()
            .any(|(index, rule)| rule_layer(rule) == layer && self.accepts(index, log))
    }
}

/// The files a log is routed over, each with the sampler state its rules use.
trait Sources {
    fn count(&self) -> usize;
    fn get(&mut self, index: usize) -> Option<(&PreparedLalFile, &mut LalState)>;
}

/// Every file sharing one state ([`analyze`]).
struct OneState<'a, 'f> {
    files: &'a [&'f PreparedLalFile],
    state: &'a mut LalState,
}

impl Sources for OneState<'_, '_> {
    fn count(&self) -> usize {
        self.files.len()
    }
    fn get(&mut self, index: usize) -> Option<(&PreparedLalFile, &mut LalState)> {
        let file: &PreparedLalFile = self.files.get(index)?;
        Some((file, &mut *self.state))
    }
}

impl Sources for [FileRun<'_>] {
    fn count(&self) -> usize {
        self.len()
    }
    fn get(&mut self, index: usize) -> Option<(&PreparedLalFile, &mut LalState)> {
        let run = self.get_mut(index)?;
        Some((run.file, &mut *run.state))
    }
}

/// Intake and routing; None when the log is ignored.
fn route<S: Sources + ?Sized>(
    files: &mut S,
    log: &LogData,
    now_ms: i64,
    general_fallback: bool,
) -> Option<Vec<(usize, RuleOutcome)>> {
    if log.service.is_empty() {
        return None;
    }
    let stamped;
    let log = if log.timestamp_ms == 0 {
        stamped = LogData {
            timestamp_ms: now_ms,
            ..log.clone()
        };
        &stamped
    } else {
        log
    };
    let mut outcomes = Vec::new();
    if log.layer.is_empty() {
        run_layer(files, log, None, now_ms, true, &mut outcomes);
        let claimed = outcomes.iter().any(|(_, outcome)| !outcome.aborted);
        if !claimed && general_fallback {
            let general = LogData {
                layer: GENERAL_LAYER.to_owned(),
                ..log.clone()
            };
            run_layer(
                files,
                &general,
                Some(GENERAL_LAYER),
                now_ms,
                false,
                &mut outcomes,
            );
        }
    } else {
        run_layer(files, log, Some(&log.layer), now_ms, false, &mut outcomes);
    }
    Some(outcomes)
}

/// The layer a rule routes on: None for an `auto` rule (layer `auto` or absent).
fn rule_layer(rule: &LalRule) -> Option<&str> {
    rule.layer
        .as_deref()
        .filter(|l| !l.eq_ignore_ascii_case(hotrule_rule_compiler::AUTO_LAYER))
}

fn run_layer<S: Sources + ?Sized>(
    files: &mut S,
    log: &LogData,
    layer: Option<&str>,
    now_ms: i64,
    auto_mode: bool,
    outcomes: &mut Vec<(usize, RuleOutcome)>,
) {
    for index in 0..files.count() {
        let Some((file, state)) = files.get(index) else {
            continue;
        };
        for (rule_index, (rule, prepared)) in file.file.rules.iter().zip(&file.rules).enumerate() {
            if rule_layer(rule) != layer || !file.accepts(rule_index, log) {
                continue;
            }
            outcomes.push((index, run_one(rule, prepared, log, now_ms, auto_mode, state)));
        }
    }
}

fn run_one(
    rule: &LalRule,
    prepared: &PreparedRule,
    log: &LogData,
    now_ms: i64,
    auto_mode: bool,
    state: &mut LalState,
) -> RuleOutcome {
    exec::Run::new(
        log,
        &prepared.key,
        rule.output_type.as_deref(),
        &prepared.regexes,
        state,
        now_ms,
        auto_mode,
    )
    .run(&rule.dsl)
}

fn prepare_rule(rule: &LalRule) -> PreparedRule {
    let mut regexes = HashMap::new();
    collect_regexes(&rule.dsl, &mut regexes);
    let has_parser = uses_parser(&rule.dsl);
    let input_type = rule.input_type.clone().or_else(|| {
        let layer = rule.layer.as_deref()?;
        LAYER_INPUT_TYPES
            .iter()
            .find(|(l, _)| *l == layer)
            .filter(|_| !has_parser)
            .map(|(_, ty)| (*ty).to_owned())
    });
    PreparedRule {
        key: rule.key().0,
        input_type,
        regexes,
    }
}

/// Every statement call of a script, depth first (closures and `if` branches included).
fn for_each_call(block: &Block, visit: &mut dyn FnMut(&hotrule_rule_compiler::ast::Call)) {
    use hotrule_rule_compiler::ast::{Else, StmtKind};
    fn in_if(
        statement: &hotrule_rule_compiler::ast::IfStmt,
        visit: &mut dyn FnMut(&hotrule_rule_compiler::ast::Call),
    ) {
        for_each_call(&statement.then, visit);
        match &statement.otherwise {
            Some(Else::Block(block)) => for_each_call(block, visit),
            Some(Else::If(nested)) => in_if(nested, visit),
            None => {}
        }
    }
    for statement in &block.statements {
        match &statement.kind {
            StmtKind::Expr(expr) => {
                if let ExprKind::Call(call) = &expr.kind {
                    visit(call);
                    for arg in &call.args {
                        if let ExprKind::Closure(closure) = &arg.value.kind {
                            for_each_call(&closure.body, visit);
                        }
                    }
                }
            }
            StmtKind::If(statement) => in_if(statement, visit),
            StmtKind::Local { .. } | StmtKind::Return(_) => {}
        }
    }
}

fn collect_regexes(block: &Block, regexes: &mut HashMap<Span, Result<Arc<JavaRegex>, String>>) {
    for_each_call(block, &mut |call| {
        if call.method.name == "regexp"
            && call.receiver.is_none()
            && let Some(arg) = call.args.first()
            && let ExprKind::Str(literal) = &arg.value.kind
        {
            regexes.insert(arg.value.span, parse::compile_java_regex(&literal.value));
        }
    });
}

fn uses_parser(block: &Block) -> bool {
    let mut found = false;
    for_each_call(block, &mut |call| {
        found |= call.receiver.is_none()
            && matches!(call.method.name.as_str(), "json" | "yaml" | "text");
    });
    found
}

/// Dispatch runs on a worker pool: a prepared file is shared, a state moves between threads.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    const fn movable<T: Send>() {}
    shared::<PreparedLalFile>();
    movable::<LalState>();
    movable::<LogAnalysis>();
};
