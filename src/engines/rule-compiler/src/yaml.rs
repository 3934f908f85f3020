//! A small YAML node tree in which every node remembers where it was written.
//!
//! Built from yaml-rust2's event parser so that each scalar keeps its start mark and its style
//! (plain, quoted, literal, folded); `yaml_rust2::Yaml` drops both. Rule files are small
//! configuration documents, so the tree is deliberately strict: one document, scalar keys only,
//! no duplicate keys (a repeated key is almost always an editing mistake, and silently letting the
//! last one win would hide it), no aliases (nothing in rule files needs them, and expanding them is
//! how "billion laughs" documents blow up), and a bounded nesting depth.

use std::collections::HashSet;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use crate::CompileError;
use crate::position::{Mark, Pos, ScalarStyle};

/// Deeper than any rule file needs; bounds the recursion of code that walks the tree (and its drop).
const MAX_DEPTH: usize = 64;

#[derive(Debug, thiserror::Error)]
enum YamlError {
    #[error("YAML syntax error: {0}")]
    Syntax(String),
    #[error("YAML aliases (*{0}) are not supported in rule files")]
    Alias(usize),
    #[error("YAML nesting is deeper than {MAX_DEPTH} levels")]
    TooDeep,
    #[error("a rule file must hold a single YAML document")]
    MultipleDocuments,
    #[error("mapping keys must be plain strings")]
    ComplexKey,
    #[error("duplicate key '{0}'")]
    DuplicateKey(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Scalar {
    pub value: String,
    pub style: ScalarStyle,
    pub mark: Mark,
}

impl Scalar {
    /// YAML's null spellings, in plain style only (`'null'` is a string).
    pub(crate) fn is_null(&self) -> bool {
        self.style == ScalarStyle::Plain
            && matches!(self.value.as_str(), "" | "~" | "null" | "Null" | "NULL")
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Node {
    Scalar(Scalar),
    Seq { items: Vec<Node>, mark: Mark },
    Map(MapNode),
}

#[derive(Debug, Clone)]
pub(crate) struct MapNode {
    pub entries: Vec<(Scalar, Node)>,
    pub mark: Mark,
}

impl MapNode {
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.value == key)
            .map(|(_, v)| v)
    }

    /// Where to point at the mapping as a whole: its first key (yaml-rust2 marks block mappings
    /// one column after their first key).
    pub(crate) fn pos(&self) -> Pos {
        self.entries
            .first()
            .map_or(self.mark.pos(), |(key, _)| key.mark.pos())
    }
}

impl Node {
    pub(crate) fn pos(&self) -> Pos {
        match self {
            Node::Scalar(scalar) => scalar.mark.pos(),
            Node::Seq { items, mark } => items.first().map_or(mark.pos(), Node::pos),
            Node::Map(map) => map.pos(),
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Node::Scalar(scalar) if scalar.is_null())
    }

    /// A short noun for error messages ("expected a list, found a mapping").
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            Node::Scalar(scalar) if scalar.is_null() => "null",
            Node::Scalar(_) => "a scalar",
            Node::Seq { .. } => "a list",
            Node::Map(_) => "a mapping",
        }
    }
}

fn mark(marker: Marker) -> Mark {
    Mark {
        line: marker.line(),
        col0: marker.col(),
    }
}

fn style(style: TScalarStyle) -> ScalarStyle {
    match style {
        TScalarStyle::Plain => ScalarStyle::Plain,
        TScalarStyle::SingleQuoted => ScalarStyle::SingleQuoted,
        TScalarStyle::DoubleQuoted => ScalarStyle::DoubleQuoted,
        TScalarStyle::Literal => ScalarStyle::Literal,
        TScalarStyle::Folded => ScalarStyle::Folded,
    }
}

/// A container under construction; a mapping holds its pending key until the value arrives.
enum Open {
    Seq {
        items: Vec<Node>,
        mark: Mark,
    },
    Map {
        entries: Vec<(Scalar, Node)>,
        /// The keys seen so far, so the duplicate check stays linear in the size of the mapping.
        keys: HashSet<String>,
        pending_key: Option<Scalar>,
        mark: Mark,
    },
}

/// Parses one document. `Ok(None)` for an empty stream, a comment-only file or a null document.
pub(crate) fn parse(text: &str) -> Result<Option<Node>, CompileError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Node> = None;
    let mut documents = 0;
    loop {
        let (event, marker) = parser.next_token().map_err(|error| {
            mark(*error.marker())
                .pos()
                .error(YamlError::Syntax(error.info().to_owned()))
        })?;
        let at = mark(marker);
        let node = match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(at.pos().error(YamlError::MultipleDocuments));
                }
                continue;
            }
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => continue,
            Event::Alias(id) => return Err(at.pos().error(YamlError::Alias(id))),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(at.pos().error(YamlError::TooDeep));
                }
                stack.push(match event {
                    Event::SequenceStart(..) => Open::Seq {
                        items: Vec::new(),
                        mark: at,
                    },
                    _ => Open::Map {
                        entries: Vec::new(),
                        keys: HashSet::new(),
                        pending_key: None,
                        mark: at,
                    },
                });
                continue;
            }
            Event::Scalar(value, scalar_style, _, _) => Node::Scalar(Scalar {
                value,
                style: style(scalar_style),
                mark: at,
            }),
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Seq { items, mark }) => Node::Seq { items, mark },
                Some(Open::Map { entries, mark, .. }) => Node::Map(MapNode { entries, mark }),
                None => continue,
            },
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map {
                entries,
                keys,
                pending_key,
                ..
            }) => match pending_key.take() {
                Some(key) => entries.push((key, node)),
                None => {
                    let Node::Scalar(key) = node else {
                        return Err(node.pos().error(YamlError::ComplexKey));
                    };
                    if !keys.insert(key.value.clone()) {
                        return Err(key.mark.pos().error(YamlError::DuplicateKey(key.value)));
                    }
                    *pending_key = Some(key);
                }
            },
        }
    }
    Ok(root.filter(|node| !node.is_null()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> (usize, usize, String) {
        match parse(text) {
            Ok(node) => panic!("expected an error, got {node:?}"),
            Err(e) => (e.line, e.column, e.message),
        }
    }

    #[test]
    fn scalars_keep_style_and_position() {
        let Ok(Some(Node::Map(map))) = parse("a: 'x'\nb: |\n  y\n") else {
            panic!("not a map")
        };
        let Some(Node::Scalar(b)) = map.get("b") else {
            panic!("no b")
        };
        assert_eq!(
            (b.value.as_str(), b.style, b.mark.pos()),
            ("y\n", ScalarStyle::Literal, Pos { line: 3, column: 3 })
        );
        assert_eq!(map.pos(), Pos { line: 1, column: 1 });
    }

    #[test]
    fn empty_and_comment_only_documents_are_none() {
        for text in ["", "# only a comment\n", "---\n", "~\n"] {
            assert!(matches!(parse(text), Ok(None)), "{text:?}");
        }
    }

    #[test]
    fn rejects_what_rule_files_never_need() {
        assert_eq!(error("a: 1\na: 2\n").0, 2);
        assert!(error("a: &x 1\nb: *x\n").2.contains("aliases"));
        assert!(
            error("a: 1\n---\nb: 2\n")
                .2
                .contains("single YAML document")
        );
        assert!(error(&"[".repeat(100)).2.contains("deeper"));
        assert_eq!(error("a: [1, 2\n").0, 2);
    }
}
