//! The rule compiler: turns the bytes of a MAL or LAL rule file into a typed, validated model.
//!
//! It is pure: no IO, no clocks, no async. Everything above it (classification, the workflow,
//! the scan) calls [`compile`] and works on what it returns. Any syntax or semantic error, in
//! the YAML, inside a MAL expression or inside a LAL DSL body, comes back as one
//! [`CompileError`] carrying a 1-based line and column relative to the start of the file.
//!
//! Pipeline: `position` decodes the bytes; `yaml` builds a node tree that remembers where every
//! node was written; `mal` / `lal` read the rule model from it; each expression or DSL scalar is
//! parsed by `groovy` into [`ast`] with file positions; then `mal_validate` (against the
//! `mal_catalog` of functions), `mal_graft` (expPrefix/expSuffix) and `mal_shape` for MAL, or
//! `lal_validate` for LAL, check the semantics and extract the storage identities.
//!
//! Upstream differences worth knowing (each documented where it is implemented; the full list,
//! and what is checked against SkyWalking's own compiler tests, is `docs/compiler.md`):
//! - a MAL file without `metricPrefix` names its metrics by the rule name alone (the reference's
//!   classifier sees no metric names at all there);
//! - several scope calls are accepted only when chained directly (`service(...).instance(...)`);
//! - Java regexes using syntax the `regex` crate's parser lacks are accepted unjudged.

mod ast_walk;
mod groovy;
mod java_regex;
mod lal;
mod lal_input;
mod lal_validate;
pub mod layers;
mod lal_values;
mod mal;
mod mal_catalog;
mod mal_graft;
mod mal_shape;
mod mal_validate;
mod model;
mod position;
pub mod shape;

mod yaml;

pub use groovy::ast;

/// Readers of MAL syntax shared with the evaluation engine, so the compiler and the engine agree
/// on what is a class constant (`Layer.GENERAL`) and what a sample family.
pub mod mal_syntax {
    pub use crate::mal_catalog::{CLASS_NAMES, class_constant, string_list, string_literal, unparen};
}
pub use lal::{AUTO_LAYER, LalFile, LalRule};
pub use mal::{MalFile, MalRule};
pub use model::LayerDefinition;
pub use shape::{DataType, Downsampling, LalKey, MetricShape, ScopeType};

/// Compiles one rule file. An empty file, a comment-only file or a null YAML document is an error
/// (line 1, column 1): it declares nothing, and accepting it would remove every metric of the file.
/// A file that means to declare no rules says so explicitly (`metricsRules: []`, `rules: []`).
///
/// Errors carry the 1-based line and column in `source` of the first problem found.
pub fn compile(kind: DslKind, source: &[u8]) -> Result<Compiled, CompileError> {
    compile_with(kind, source, model::Empty::Reject)
}

/// Compiles a bundled file: like [`compile`], except that a file that declares nothing (empty,
/// comments only, a null document) compiles to no rules, because SkyWalking ships one
/// (`log-mal-rules/placeholder.yaml`, comments only) and loads it.
pub fn compile_bundled(kind: DslKind, source: &[u8]) -> Result<Compiled, CompileError> {
    compile_with(kind, source, model::Empty::Accept)
}

fn compile_with(
    kind: DslKind,
    source: &[u8],
    empty: model::Empty,
) -> Result<Compiled, CompileError> {
    let source = position::SourceText::decode(source)?;
    match kind {
        DslKind::Mal => mal::compile(&source, empty).map(Compiled::Mal),
        DslKind::Lal => lal::compile(&source, empty).map(Compiled::Lal),
    }
}

/// Parses one MAL expression on its own, as it would appear in an `exp` (no validation, no
/// shape, no prefix/suffix). Positions are relative to `text` (line 1, column 1). For evaluation
/// tests and tools that run a bare expression.
pub fn parse_mal_expression(text: &str) -> Result<ast::Expr, CompileError> {
    let source = position::SourceText::decode(text.as_bytes())?;
    let origin = position::ScalarOrigin::build(
        &source,
        text,
        position::ScalarStyle::Literal,
        position::Mark { line: 1, col0: 0 },
    );
    groovy::parse_expression(text, &mut origin.locator(text))
}

/// Which rule language a file is written in. Catalogs map onto this one-to-one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DslKind {
    Mal,
    Lal,
}

/// A compile failure with its position in the file (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct CompileError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The result of compiling one file.
#[derive(Debug, Clone, PartialEq)]
pub enum Compiled {
    Mal(MalFile),
    Lal(LalFile),
}
