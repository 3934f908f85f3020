//! What a LAL script may read from `parsed` when it has no parser and declares no `inputType`.
//!
//! `parsed` is what a `json {}`, `yaml {}` or `text { regexp ... }` block produced, or, for a rule
//! with an `inputType` (or a layer whose receiver registers one, as SkyWalking's envoy receiver
//! does for `MESH` through its `LALSourceTypeProvider`), the typed input itself. With none of
//! these, SkyWalking compiles `parsed.x` against the log's metadata, so only the metadata's fields
//! exist there; anything else (`parsed?.response?.responseCode`) needs a typed input and is a
//! compile error upstream (`LALClassGeneratorExtractorTest.compileEnvoyAlsAbortRuleFailsWithoutInputType`).

use crate::CompileError;
use crate::ast::{Block, ExprKind};
use crate::ast_walk::walk_block;
use crate::model::pos_of;

/// The log metadata fields `parsed.x` falls back to when the script has no parser.
const METADATA_FIELDS: &[&str] = &[
    "service",
    "serviceInstance",
    "endpoint",
    "layer",
    "timestamp",
    "traceId",
    "segmentId",
    "traceSegmentId",
    "spanId",
    "tags",
];

/// Layers whose bundled receivers register a typed input with SkyWalking's `LALSourceTypeProvider`.
const LAYERS_WITH_TYPED_INPUT: &[&str] = &["MESH"];

const PARSERS: &[&str] = &["json", "yaml", "text"];

#[derive(Debug, thiserror::Error)]
#[error(
    "'parsed.{field}' needs a typed input: the rule has no json/yaml/text parser and declares no inputType, so parsed only has the log's metadata ({})",
    METADATA_FIELDS.join(", ")
)]
struct NeedsTypedInput {
    field: String,
}

/// Checks the `parsed.x` reads of a rule's script.
pub(crate) fn check(
    script: &Block,
    layer: Option<&str>,
    input_type: Option<&str>,
) -> Result<(), CompileError> {
    if input_type.is_some() || layer.is_some_and(|layer| LAYERS_WITH_TYPED_INPUT.contains(&layer)) {
        return Ok(());
    }
    let mut has_parser = false;
    walk_block(script, &mut |expr| {
        if let ExprKind::Call(call) = &expr.kind {
            has_parser |= call.receiver.is_none() && PARSERS.contains(&call.method.name.as_str());
        }
        Ok(())
    })?;
    if has_parser {
        return Ok(());
    }
    walk_block(script, &mut |expr| {
        let (receiver, name) = match &expr.kind {
            ExprKind::Property { receiver, name, .. } => (receiver, name),
            ExprKind::Call(call) => match &call.receiver {
                Some(receiver) => (receiver, &call.method),
                None => return Ok(()),
            },
            _ => return Ok(()),
        };
        match &receiver.kind {
            ExprKind::Name(root)
                if root == "parsed" && !METADATA_FIELDS.contains(&name.name.as_str()) =>
            {
                Err(pos_of(name.span).error(NeedsTypedInput {
                    field: name.name.clone(),
                }))
            }
            _ => Ok(()),
        }
    })
}
