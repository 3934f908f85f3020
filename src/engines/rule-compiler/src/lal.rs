//! LAL rule files (`lal/`): the YAML model and compiling each rule's `dsl` into a validated script.
//!
//! A file is `rules: [{name, layer, dsl, outputType?, inputType?}]` plus optional
//! `layerDefinitions` (reference §3.2). A rule's storage identity is its key `layer:name` (`auto`
//! when the layer is absent or blank) and its `outputType`; two rules of one file may not share a
//! key. Unknown keys are errors, as with MAL.

use std::collections::BTreeMap;

use crate::ast;
use crate::model::{
    self, Empty, LayerDefinition, check_keys, item_map, optional_list, optional_scalar,
    required_scalar,
};
use crate::position::SourceText;
use crate::shape::LalKey;
use crate::{CompileError, lal_input, lal_validate};

const FILE_KEYS: &[&str] = &["rules", "layerDefinitions"];
const RULE_KEYS: &[&str] = &["name", "layer", "dsl", "outputType", "inputType"];

/// The layer used in a rule key when the rule names none (the script sets it at runtime).
pub const AUTO_LAYER: &str = "auto";

/// A compiled LAL file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LalFile {
    /// In file order.
    pub rules: Vec<LalRule>,
    pub layer_definitions: Vec<LayerDefinition>,
}

/// One LAL rule.
#[derive(Debug, Clone, PartialEq)]
pub struct LalRule {
    pub name: String,
    /// `None` when absent or blank.
    pub layer: Option<String>,
    /// 1-based line and column of the `layer` value, when there is one.
    pub layer_pos: Option<(usize, usize)>,
    pub output_type: Option<String>,
    pub input_type: Option<String>,
    /// The parsed and validated DSL: its statements (a single `filter { ... }`).
    pub dsl: ast::Block,
    /// 1-based line of the rule's entry in the file.
    pub line: usize,
}

impl LalRule {
    /// `"<layer>:<name>"`, with layer `auto` when absent or empty.
    pub fn key(&self) -> LalKey {
        rule_key(self.layer.as_deref(), &self.name)
    }
}

impl LalFile {
    /// Every rule key with the rule's `outputType`.
    pub fn keys(&self) -> BTreeMap<LalKey, Option<String>> {
        self.rules
            .iter()
            .map(|rule| (rule.key(), rule.output_type.clone()))
            .collect()
    }
}

fn rule_key(layer: Option<&str>, name: &str) -> LalKey {
    LalKey(format!("{}:{}", layer.unwrap_or(AUTO_LAYER), name))
}

#[derive(Debug, thiserror::Error)]
#[error("rule key '{key}' is declared twice (first at line {line})")]
struct DuplicateKey {
    key: String,
    line: usize,
}

pub(crate) fn compile(source: &SourceText<'_>, empty: Empty) -> Result<LalFile, CompileError> {
    let Some(root) = model::root_map(source, "rules", empty)? else {
        return Ok(LalFile::default());
    };
    check_keys(&root, FILE_KEYS, "a LAL rule file")?;
    let mut rules = Vec::new();
    let mut seen: BTreeMap<LalKey, usize> = BTreeMap::new();
    for item in optional_list(&root, "rules")? {
        let entry = item_map(item, "rules")?;
        check_keys(entry, RULE_KEYS, "a LAL rule")?;
        let name = required_scalar(entry, "name", "a LAL rule")?;
        let dsl = required_scalar(entry, "dsl", "a LAL rule")?;
        let text = |key: &str| -> Result<Option<String>, CompileError> {
            Ok(optional_scalar(entry, key)?
                .map(|s| s.value.trim().to_owned())
                .filter(|value| !value.is_empty()))
        };
        let layer = text("layer")?;
        let layer_pos = match optional_scalar(entry, "layer")? {
            Some(scalar) if layer.is_some() => {
                Some((scalar.mark.pos().line, scalar.mark.pos().column))
            }
            _ => None,
        };
        let output_type = text("outputType")?;
        let input_type = text("inputType")?;
        let line = entry.pos().line;
        let key = rule_key(layer.as_deref(), &name.value);
        if let Some(&first_line) = seen.get(&key) {
            return Err(name.mark.pos().error(DuplicateKey {
                key: key.0,
                line: first_line,
            }));
        }
        seen.insert(key, line);
        let script = model::parse_script(source, dsl)?;
        lal_validate::validate(&script, output_type.as_deref())?;
        lal_input::check(&script, layer.as_deref(), input_type.as_deref())?;
        rules.push(LalRule {
            name: name.value.clone(),
            layer,
            layer_pos,
            output_type,
            input_type,
            dsl: script,
            line,
        });
    }
    Ok(LalFile {
        rules,
        layer_definitions: model::layer_definitions(&root)?,
    })
}
