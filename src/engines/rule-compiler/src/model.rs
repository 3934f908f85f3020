//! Reading the YAML model of rule files: typed field access with positioned errors, the
//! `layerDefinitions` list both languages share, and parsing a scalar as Groovy with file positions.

use crate::CompileError;
use crate::groovy::{self, ast};
use crate::position::{Pos, ScalarOrigin, SourceText};
use crate::yaml::{MapNode, Node, Scalar};

/// A layer declared by a rule file (`layerDefinitions`, SkyWalking HEAD). A change to any of these
/// fields is STRUCTURAL. The compiler only reads the list; whether the declarations are
/// acceptable (ordinal range, name shape, clashes with built-in or registered layers, a name
/// declared twice) depends on the layers registered at apply time and is judged by the caller,
/// as upstream's `RuntimeLayerConflictChecker` does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LayerDefinition {
    pub name: String,
    /// `0` when omitted, as upstream (which then rejects it as below the runtime range).
    pub ordinal: i64,
    /// Whether the layer is a "normal" (real, not virtual) layer. Defaults to `true` when omitted,
    /// as upstream documents for runtime `layerDefinitions`.
    pub normal: bool,
}

/// What to do with a file that declares nothing (empty, comments only, or a null document).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Empty {
    /// An error: what an operator posts must declare something.
    Reject,
    /// No rules: SkyWalking ships such a file (`log-mal-rules/placeholder.yaml`).
    Accept,
}

#[derive(Debug, thiserror::Error)]
enum ModelError {
    #[error("unknown key '{key}' in {context}; allowed keys: {allowed}")]
    UnknownKey {
        key: String,
        context: &'static str,
        allowed: String,
    },
    #[error("'{key}' must be {expected}, found {found}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{context} is missing '{key}'")]
    Missing {
        key: &'static str,
        context: &'static str,
    },
    #[error("'{key}' must not be empty")]
    Empty { key: &'static str },
    #[error("'{key}' must be an integer, found '{value}'")]
    NotInteger { key: &'static str, value: String },
    #[error("'{key}' must be true or false, found '{value}'")]
    NotBoolean { key: &'static str, value: String },
    #[error("the top level of a rule file must be a mapping, found {0}")]
    RootNotMap(&'static str),
    #[error(
        "the file declares nothing: it is empty, only comments, or a null YAML document (a file that declares no rules says so, e.g. `{0}: []`)"
    )]
    DeclaresNothing(&'static str),
}

/// Parses the document and returns its top-level mapping. An empty file, a comment-only file and a
/// null document (`~`, `null`) are errors at line 1, column 1: accepting them as "no rules" would
/// let a truncated or mistyped upload remove every metric the file used to declare. `list_key` is
/// the key that holds the rules (`metricsRules`, `rules`), named in the message. With `empty`
/// [`Empty::Accept`] (bundled files) such a file is `None`: it declares nothing.
pub(crate) fn root_map(
    source: &SourceText<'_>,
    list_key: &'static str,
    empty: Empty,
) -> Result<Option<MapNode>, CompileError> {
    match crate::yaml::parse(source.text())? {
        None if empty == Empty::Accept => Ok(None),
        None => Err(Pos { line: 1, column: 1 }.error(ModelError::DeclaresNothing(list_key))),
        Some(Node::Map(map)) => Ok(Some(map)),
        Some(other) => Err(other.pos().error(ModelError::RootNotMap(other.kind_name()))),
    }
}

/// Rejects keys outside `allowed`, pointing at the first unknown one.
pub(crate) fn check_keys(
    map: &MapNode,
    allowed: &[&str],
    context: &'static str,
) -> Result<(), CompileError> {
    match map
        .entries
        .iter()
        .find(|(key, _)| !allowed.contains(&key.value.as_str()))
    {
        None => Ok(()),
        Some((key, _)) => Err(key.mark.pos().error(ModelError::UnknownKey {
            key: key.value.clone(),
            context,
            allowed: allowed.join(", "),
        })),
    }
}

/// A scalar field; absent and null both give `None`.
pub(crate) fn optional_scalar<'m>(
    map: &'m MapNode,
    key: &str,
) -> Result<Option<&'m Scalar>, CompileError> {
    match map.get(key) {
        None => Ok(None),
        Some(Node::Scalar(scalar)) if scalar.is_null() => Ok(None),
        Some(Node::Scalar(scalar)) => Ok(Some(scalar)),
        Some(other) => Err(wrong_type(key, "a string", other)),
    }
}

/// A scalar field that must be present and non-blank.
pub(crate) fn required_scalar<'m>(
    map: &'m MapNode,
    key: &'static str,
    context: &'static str,
) -> Result<&'m Scalar, CompileError> {
    match optional_scalar(map, key)? {
        None => Err(map.pos().error(ModelError::Missing { key, context })),
        Some(scalar) if scalar.value.trim().is_empty() => {
            Err(scalar.mark.pos().error(ModelError::Empty { key }))
        }
        Some(scalar) => Ok(scalar),
    }
}

/// A list field; absent and null both give an empty list.
pub(crate) fn optional_list<'m>(map: &'m MapNode, key: &str) -> Result<&'m [Node], CompileError> {
    match map.get(key) {
        None => Ok(&[]),
        Some(node) if node.is_null() => Ok(&[]),
        Some(Node::Seq { items, .. }) => Ok(items),
        Some(other) => Err(wrong_type(key, "a list", other)),
    }
}

/// A list item that must be a mapping.
pub(crate) fn item_map<'n>(node: &'n Node, list_key: &str) -> Result<&'n MapNode, CompileError> {
    match node {
        Node::Map(map) => Ok(map),
        other => Err(wrong_type(
            &format!("each item of {list_key}"),
            "a mapping",
            other,
        )),
    }
}

fn wrong_type(key: &str, expected: &'static str, found: &Node) -> CompileError {
    found.pos().error(ModelError::WrongType {
        key: key.to_owned(),
        expected,
        found: found.kind_name(),
    })
}

/// `layerDefinitions: [{name, ordinal, normal}]`, in file order, repeats included.
pub(crate) fn layer_definitions(map: &MapNode) -> Result<Vec<LayerDefinition>, CompileError> {
    let mut definitions: Vec<LayerDefinition> = Vec::new();
    for item in optional_list(map, "layerDefinitions")? {
        let layer = item_map(item, "layerDefinitions")?;
        check_keys(layer, &["name", "ordinal", "normal"], "a layer definition")?;
        let name = required_scalar(layer, "name", "a layer definition")?;
        let ordinal_value = match optional_scalar(layer, "ordinal")? {
            None => 0,
            Some(ordinal) => ordinal.value.trim().parse::<i64>().map_err(|_| {
                ordinal.mark.pos().error(ModelError::NotInteger {
                    key: "ordinal",
                    value: ordinal.value.clone(),
                })
            })?,
        };
        let normal = match optional_scalar(layer, "normal")? {
            None => true,
            Some(scalar) => match scalar.value.as_str() {
                "true" | "True" | "TRUE" => true,
                "false" | "False" | "FALSE" => false,
                other => {
                    return Err(scalar.mark.pos().error(ModelError::NotBoolean {
                        key: "normal",
                        value: other.to_owned(),
                    }));
                }
            },
        };
        definitions.push(LayerDefinition {
            name: name.value.clone(),
            ordinal: ordinal_value,
            normal,
        });
    }
    Ok(definitions)
}

/// Parses a scalar's value as one Groovy expression, with positions relative to the file.
pub(crate) fn parse_expression(
    source: &SourceText<'_>,
    scalar: &Scalar,
) -> Result<ast::Expr, CompileError> {
    let origin = ScalarOrigin::build(source, &scalar.value, scalar.style, scalar.mark);
    groovy::parse_expression(&scalar.value, &mut origin.locator(&scalar.value))
}

/// Parses a scalar's value as a Groovy script (a statement list), with file positions.
pub(crate) fn parse_script(
    source: &SourceText<'_>,
    scalar: &Scalar,
) -> Result<ast::Block, CompileError> {
    let origin = ScalarOrigin::build(source, &scalar.value, scalar.style, scalar.mark);
    groovy::parse_script(&scalar.value, &mut origin.locator(&scalar.value))
}

/// The position of a syntax node, for semantic errors.
pub(crate) fn pos_of(span: ast::Span) -> Pos {
    Pos {
        line: span.line.max(1),
        column: span.column.max(1),
    }
}
