//! `${scheme:opaque}` expansion inside string values, following the Collector's `confmap/expand.go`.
//!
//! - A reference is found by taking the first `}` and the last `${` before it, so the innermost
//!   reference is expanded first and `${env:${env:WHICH}}` works.
//! - `${NAME}` (no `:`) uses the default scheme (`env`); without a default scheme it stays text.
//!   Bare `$NAME` is never expanded.
//! - An odd number of `$` right before `${` escapes the reference; after expansion every `$$`
//!   becomes `$` ([`unescape_dollars`]). Unlike the Collector (bug #15867), an escaped reference does
//!   not stop the expansion of later ones in the same string.
//! - A value that is wholly one reference takes the retrieved value, of any type, with its text
//!   attached (`${env:PORT}` is the integer 8080 that a string field reads as "8080"). A reference
//!   embedded in longer text is replaced by the retrieved text.
//! - Retrieved values are expanded again (so an env var may hold a reference); each round of
//!   expansion counts towards a depth limit, and exceeding it is an error naming the key.
//! - Expansion works on parsed values, never on the raw text of a retrieved document: a `${...}`
//!   inside a comment of a file or variable pulled in whole does not break loading (the Collector's
//!   issue #10787). The raw text is kept only as the form a string field reads, and is dropped when
//!   it does not expand. Text embedded in a longer string is expanded as text, as in the Collector.
//! - `${env:X}` with X unset and no default is null (empty text when embedded) plus a warning, as
//!   the Collector's env provider does; a top-level `env:X` source is an error instead.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::merge::record_origins;
use crate::provider::{EnvError, ProviderError, Providers, Retrieved};
use crate::uri::{Uri, UriError};
use crate::value::{Map, Value, is_under, join_path};

/// Why a `${...}` reference could not be expanded. Every variant names the configuration key.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    #[error("expanding `{key}`: ${{{reference}}}: {source}")]
    Retrieve {
        key: String,
        reference: String,
        source: ProviderError,
    },
    #[error("expanding `{key}`: invalid reference ${{{reference}}}: {source}")]
    BadReference {
        key: String,
        reference: String,
        source: UriError,
    },
    #[error("expanding `{key}`: the uri `{reference}` contains unsupported characters ('$')")]
    Dollar { key: String, reference: String },
    #[error(
        "expanding `{key}`: ${{{reference}}} retrieved a {kind}, which has no unambiguous string representation to embed in text"
    )]
    NotEmbeddable {
        key: String,
        reference: String,
        kind: &'static str,
    },
    #[error("expanding `{key}`: more than {limit} levels of recursive expansion")]
    TooDeep { key: String, limit: usize },
}

/// The result of one pass over a string.
enum Round {
    Unchanged,
    Text(String),
    Whole(Retrieved),
}

/// Expands references through a provider registry; collects warnings and the files read.
pub(crate) struct Expander<'a> {
    providers: &'a Providers,
    default_scheme: Option<&'a str>,
    max_depth: usize,
    pub warnings: Vec<String>,
    pub watched_files: Vec<PathBuf>,
}

impl<'a> Expander<'a> {
    pub fn new(
        providers: &'a Providers,
        default_scheme: Option<&'a str>,
        max_depth: usize,
    ) -> Expander<'a> {
        Expander {
            providers,
            default_scheme,
            max_depth,
            warnings: Vec::new(),
            watched_files: Vec::new(),
        }
    }

    /// Expands every string leaf of the merged tree. A leaf changed by expansion gets the origin
    /// `<source> via ${ref}, ...`, and a whole-value expansion into a map gives its leaves that origin.
    pub fn expand_tree(
        &mut self,
        value: Value,
        path: &str,
        origins: &mut BTreeMap<String, String>,
    ) -> Result<Value, ExpandError> {
        match value {
            Value::String(text) => {
                let mut references = Vec::new();
                let expanded = self.expand_string(text, path, 0, &mut references)?;
                if !references.is_empty() {
                    let source = origins.get(path).cloned().unwrap_or_default();
                    origins.retain(|leaf, _| !is_under(leaf, path));
                    record_origins(
                        origins,
                        path,
                        &expanded,
                        &format!("{source} via {}", references.join(", ")),
                    );
                }
                Ok(expanded)
            }
            Value::List(items) => {
                let mut expanded = Vec::with_capacity(items.len());
                for (index, item) in items.into_iter().enumerate() {
                    expanded.push(self.expand_tree(
                        item,
                        &join_path(path, &index.to_string()),
                        origins,
                    )?);
                }
                Ok(Value::List(expanded))
            }
            Value::Map(map) => {
                let mut expanded = Map::new();
                for (key, child) in map {
                    let child = self.expand_tree(child, &join_path(path, &key), origins)?;
                    expanded.insert(key, child);
                }
                Ok(Value::Map(expanded))
            }
            other => Ok(other),
        }
    }

    /// Expands a retrieved value (no origin bookkeeping); `depth` rounds are already used.
    fn expand_value(
        &mut self,
        value: Value,
        path: &str,
        depth: usize,
        references: &mut Vec<String>,
    ) -> Result<Value, ExpandError> {
        match value {
            Value::String(text) => self.expand_string(text, path, depth, references),
            Value::List(items) => {
                let mut expanded = Vec::with_capacity(items.len());
                for (index, item) in items.into_iter().enumerate() {
                    expanded.push(self.expand_value(
                        item,
                        &join_path(path, &index.to_string()),
                        depth,
                        references,
                    )?);
                }
                Ok(Value::List(expanded))
            }
            Value::Map(map) => {
                let mut expanded = Map::new();
                for (key, child) in map {
                    let child =
                        self.expand_value(child, &join_path(path, &key), depth, references)?;
                    expanded.insert(key, child);
                }
                Ok(Value::Map(expanded))
            }
            Value::Inferred { value, text } => {
                let value = self.expand_value(*value, path, depth, references)?;
                Ok(Value::Inferred {
                    value: Box::new(value),
                    text,
                })
            }
            other => Ok(other),
        }
    }

    fn expand_string(
        &mut self,
        text: String,
        path: &str,
        depth: usize,
        references: &mut Vec<String>,
    ) -> Result<Value, ExpandError> {
        let mut current = text;
        let mut depth = depth;
        loop {
            let round = self.round(&current, path, references)?;
            if matches!(round, Round::Unchanged) {
                return Ok(Value::String(current));
            }
            depth += 1;
            if depth > self.max_depth {
                return Err(ExpandError::TooDeep {
                    key: path.to_owned(),
                    limit: self.max_depth,
                });
            }
            match round {
                Round::Unchanged => return Ok(Value::String(current)),
                Round::Text(next) => current = next,
                Round::Whole(retrieved) => match retrieved.into_whole_value() {
                    Value::String(next) => current = next,
                    Value::Inferred { value, text } => {
                        let value = self.expand_value(*value, path, depth, references)?;
                        return Ok(match self.expand_text(text, path, depth) {
                            Some(text) => Value::Inferred {
                                value: Box::new(value),
                                text,
                            },
                            None => value,
                        });
                    }
                    other => return self.expand_value(other, path, depth, references),
                },
            }
        }
    }

    /// Expands the text a string field would read from a whole-value reference whose retrieved
    /// value was parsed (a number, a map from a file...). The parsed value is what the configuration
    /// means and was expanded already; this text is only its second form and may carry parts the
    /// parser dropped, such as comments (`# ${hello.world}` in an included file). So a failure here
    /// is not an error: the text is dropped and a string field then gets no text form, as in the
    /// Collector (its issue #10787). Warnings and origins come from the parsed value only (a real
    /// reference warns there already; one in a comment should not warn); files read are kept
    /// (to watch) only when the text expands.
    fn expand_text(&mut self, text: String, path: &str, depth: usize) -> Option<String> {
        let warnings = self.warnings.len();
        let watched = self.watched_files.len();
        let mut scratch = Vec::new();
        let expanded = match self.expand_string(text, path, depth, &mut scratch) {
            Ok(Value::String(text) | Value::Inferred { text, .. }) => Some(text),
            Ok(_) | Err(_) => None,
        };
        self.warnings.truncate(warnings);
        if expanded.is_none() {
            self.watched_files.truncate(watched);
        }
        expanded
    }

    /// One pass: expands the innermost references, left to right.
    fn round(
        &mut self,
        input: &str,
        path: &str,
        references: &mut Vec<String>,
    ) -> Result<Round, ExpandError> {
        if !input.contains("${") || !input.contains('}') {
            return Ok(Round::Unchanged);
        }
        let mut output = String::with_capacity(input.len());
        let mut position = 0;
        let mut changed = false;
        while let Some(close_offset) = input[position..].find('}') {
            let close = position + close_offset;
            let Some(open_offset) = input[position..close].rfind("${") else {
                output.push_str(&input[position..=close]);
                position = close + 1;
                continue;
            };
            let open = position + open_offset;
            let dollars_before = input[..open]
                .bytes()
                .rev()
                .take_while(|byte| *byte == b'$')
                .count();
            let inner = &input[open + 2..close];
            let reference = match (inner.contains(':'), self.default_scheme) {
                (true, _) => Some(inner.to_owned()),
                (false, Some(scheme)) => Some(format!("{scheme}:{inner}")),
                (false, None) => None,
            };
            let Some(reference) = reference.filter(|_| dollars_before % 2 == 0) else {
                // Escaped, or scheme-less without a default scheme: literal text.
                output.push_str(&input[position..=close]);
                position = close + 1;
                continue;
            };
            let retrieved = self.retrieve(&reference, path, references)?;
            if open == 0 && close == input.len() - 1 {
                return Ok(Round::Whole(retrieved));
            }
            let replacement = match (retrieved.text(), retrieved.value()) {
                (Some(text), _) => text.to_owned(),
                (None, Value::String(text)) => text.clone(),
                (None, value) => {
                    return Err(ExpandError::NotEmbeddable {
                        key: path.to_owned(),
                        reference,
                        kind: value.kind(),
                    });
                }
            };
            output.push_str(&input[position..open]);
            output.push_str(&replacement);
            position = close + 1;
            changed = true;
        }
        if !changed {
            return Ok(Round::Unchanged);
        }
        output.push_str(&input[position..]);
        Ok(Round::Text(output))
    }

    fn retrieve(
        &mut self,
        reference: &str,
        path: &str,
        references: &mut Vec<String>,
    ) -> Result<Retrieved, ExpandError> {
        let uri = Uri::parse_reference(reference).map_err(|source| ExpandError::BadReference {
            key: path.to_owned(),
            reference: reference.to_owned(),
            source,
        })?;
        if uri.opaque().contains('$') {
            return Err(ExpandError::Dollar {
                key: path.to_owned(),
                reference: reference.to_owned(),
            });
        }
        references.push(format!("${{{reference}}}"));
        if let Some(file) = self.providers.watch_path(&uri) {
            self.watched_files.push(file);
        }
        match self.providers.retrieve(&uri) {
            Ok(retrieved) => Ok(retrieved),
            Err(ProviderError::Env(EnvError::Unset { name })) => {
                let warning = format!(
                    "`{path}` references unset environment variable `{name}`; using null (empty text when embedded)"
                );
                tracing::warn!(key = path, name, "{warning}");
                self.warnings.push(warning);
                Ok(Retrieved::from_yaml(""))
            }
            Err(source) => Err(ExpandError::Retrieve {
                key: path.to_owned(),
                reference: reference.to_owned(),
                source,
            }),
        }
    }
}

/// Replaces every `$$` with `$` in all strings and inferred texts (the Collector's `escapeDollarSigns`).
pub(crate) fn unescape_dollars(value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace("$$", "$")),
        Value::Inferred { value, text } => Value::Inferred {
            value: Box::new(unescape_dollars(*value)),
            text: text.replace("$$", "$"),
        },
        Value::List(items) => Value::List(items.into_iter().map(unescape_dollars).collect()),
        Value::Map(map) => Value::Map(
            map.into_iter()
                .map(|(key, child)| (key, unescape_dollars(child)))
                .collect(),
        ),
        other => other,
    }
}
