//! Runtime layers (`layerDefinitions:` in MAL and LAL files, SkyWalking PR #13883), as pure
//! functions: the registry derived from the files that hold claims, the check of a file's
//! declarations against the built-in layers and that registry, and the check of the layers a
//! file uses.
//!
//! There is no separate layer store. The registry is a function of the files the claims index
//! holds (stored entries and bundled files without one): every file that is not INACTIVE
//! claims the layers it declares. A layer therefore exists exactly while at least one such file
//! declares it (reference counting), and it replicates, survives restarts and disappears on
//! delete with the entries themselves.
//!
//! The declaration rules follow upstream's `RuntimeLayerConflictChecker`, checked in this
//! order: an override of a bundled file declares nothing (`layer_override_forbidden`); within
//! the file, a name twice with different (ordinal, normal) is a name conflict and an ordinal
//! under two names an ordinal collision; then per layer: the name matches `[A-Z][A-Z0-9_]*`
//! (`layer_name_invalid`), the ordinal is in `100000..=2147483647`
//! (`layer_ordinal_out_of_range`), the name is no built-in layer and, if registered, has the
//! same (ordinal, normal) (`layer_name_conflict`), and the ordinal is not registered under
//! another name (`layer_ordinal_collision`). A file may change or drop the layers it declared
//! before when it is their only claimant; its own prior claims never conflict with it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::compiler::LayerDefinition;
use crate::compiler::layers::{self as builtin, LayerRef, MAX_ORDINAL, RUNTIME_MIN_ORDINAL};
use crate::base::ids::RuleKey;
use crate::control::outcome::ApplyStatus;

/// A layer as registered: its definition and every file that currently claims it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredLayer {
    pub name: String,
    pub ordinal: i64,
    pub normal: bool,
    pub declared_by: BTreeSet<RuleKey>,
    /// Some claimant is a bundled file (a boot-time declaration upstream).
    pub bundled: bool,
}

/// What one file contributes to the registry.
#[derive(Debug, Clone, Copy)]
pub struct FileLayers<'a> {
    pub key: &'a RuleKey,
    pub layers: &'a [LayerDefinition],
    /// The file has a bundled twin on disk.
    pub bundled: bool,
}

/// The registered runtime layers, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    layers: BTreeMap<String, RegisteredLayer>,
    /// Declarations left out because they contradict an earlier one or a built-in layer. The
    /// workflow never lets such a file in; only storage written by other means can hold one.
    pub shadowed: Vec<(RuleKey, LayerDefinition)>,
}

impl Registry {
    /// The registry of `files` (callers pass only files that claim, i.e. not INACTIVE). Files
    /// are taken in the given order, so the first declaration of a name or ordinal wins.
    pub fn of<'a>(files: impl IntoIterator<Item = FileLayers<'a>>) -> Registry {
        let mut registry = Registry::default();
        for file in files {
            for definition in file.layers {
                registry.claim(file, definition);
            }
        }
        registry
    }

    fn claim(&mut self, file: FileLayers<'_>, definition: &LayerDefinition) {
        if let Some(existing) = self.layers.get_mut(&definition.name) {
            if (existing.ordinal, existing.normal) == (definition.ordinal, definition.normal) {
                existing.declared_by.insert(file.key.clone());
                existing.bundled |= file.bundled;
            } else {
                self.shadowed.push((file.key.clone(), definition.clone()));
            }
            return;
        }
        let taken = self.by_ordinal(definition.ordinal).is_some()
            || builtin::built_in(&definition.name).is_some()
            || builtin::built_in_by_ordinal(definition.ordinal).is_some();
        if taken {
            self.shadowed.push((file.key.clone(), definition.clone()));
            return;
        }
        self.layers.insert(
            definition.name.clone(),
            RegisteredLayer {
                name: definition.name.clone(),
                ordinal: definition.ordinal,
                normal: definition.normal,
                declared_by: BTreeSet::from([file.key.clone()]),
                bundled: file.bundled,
            },
        );
    }

    pub fn get(&self, name: &str) -> Option<&RegisteredLayer> {
        self.layers.get(name)
    }

    pub fn by_ordinal(&self, ordinal: i64) -> Option<&RegisteredLayer> {
        self.layers.values().find(|l| l.ordinal == ordinal)
    }

    /// Every registered layer, in ordinal order.
    pub fn layers(&self) -> Vec<&RegisteredLayer> {
        let mut all: Vec<_> = self.layers.values().collect();
        all.sort_by_key(|l| l.ordinal);
        all
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Names registered in `after` but not in `self`, and the other way round.
    pub fn changes(&self, after: &Registry) -> LayerChanges {
        let names = |r: &Registry| r.layers.keys().cloned().collect::<BTreeSet<_>>();
        let (before_names, after_names) = (names(self), names(after));
        LayerChanges {
            registered: after_names.difference(&before_names).cloned().collect(),
            unregistered: before_names.difference(&after_names).cloned().collect(),
        }
    }
}

/// What an apply did to the registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LayerChanges {
    pub registered: BTreeSet<String>,
    pub unregistered: BTreeSet<String>,
}

impl LayerChanges {
    /// A note for the operator's answer; empty when nothing changed.
    pub fn note(&self) -> String {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
        match (self.registered.is_empty(), self.unregistered.is_empty()) {
            (true, true) => String::new(),
            (false, true) => format!("; layers registered [{}]", list(&self.registered)),
            (true, false) => format!("; layers unregistered [{}]", list(&self.unregistered)),
            (false, false) => format!(
                "; layers registered [{}] unregistered [{}]",
                list(&self.registered),
                list(&self.unregistered)
            ),
        }
    }
}

/// The claimants of a registered layer, for messages.
struct Holders<'a>(&'a RegisteredLayer);

impl fmt::Display for Holders<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let files: Vec<String> = self.0.declared_by.iter().map(ToString::to_string).collect();
        let kind = if self.0.bundled { "file(s)" } else { "runtime rule(s)" };
        write!(f, "{kind} {}", files.join(", "))
    }
}

/// Why a file's `layerDefinitions` cannot be accepted. Every message names the layer, the
/// ordinal and whoever holds it, so the next step is clear from the answer alone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayerError {
    #[error(
        "{file} overrides a bundled file and declares layers [{names}]; bundled files own their layer declarations, \
         so an override may change the rules but not declare layers. Declare the layer in a runtime-only file instead"
    )]
    OverrideForbidden { file: RuleKey, names: String },
    #[error(
        "layer name '{name}' in {file} is invalid: it must match [A-Z][A-Z0-9_]* (upper snake case, a leading letter)"
    )]
    NameInvalid { file: RuleKey, name: String },
    #[error(
        "layer '{name}' is declared in {file} with ordinal {ordinal}; runtime layers need an explicit ordinal from \
         {RUNTIME_MIN_ORDINAL} to {MAX_ORDINAL} (0-9999 are built-in layers, 10000-99999 boot-time extensions; \
         a missing ordinal counts as 0)"
    )]
    OrdinalOutOfRange { file: RuleKey, name: String, ordinal: i64 },
    #[error(
        "{file} declares layer '{name}' twice with different definitions (ordinal={first_ordinal}, normal={first_normal} \
         vs ordinal={ordinal}, normal={normal}); declare each layer once"
    )]
    DuplicateName { file: RuleKey, name: String, first_ordinal: i64, first_normal: bool, ordinal: i64, normal: bool },
    #[error(
        "layer '{name}' is the built-in SkyWalking layer {name} (ordinal={builtin_ordinal}, normal={builtin_normal}); \
         {file} may not redeclare it (it declares ordinal={ordinal}, normal={normal}). Use Layer.{name} without \
         declaring it, or rename the runtime layer"
    )]
    BuiltInName { file: RuleKey, name: String, builtin_ordinal: i64, builtin_normal: bool, ordinal: i64, normal: bool },
    #[error(
        "layer '{name}' is already registered by {holders} as (ordinal={held_ordinal}, normal={held_normal}); {file} \
         declares (ordinal={ordinal}, normal={normal}). Align both declarations or rename one"
    )]
    NameRegistered {
        file: RuleKey,
        name: String,
        holders: String,
        held_ordinal: i64,
        held_normal: bool,
        ordinal: i64,
        normal: bool,
    },
    #[error(
        "layer '{name}' is also claimed by {others} at (ordinal={held_ordinal}, normal={held_normal}); {file} cannot \
         change it to (ordinal={ordinal}, normal={normal}) alone. Drop the declaration from this file first, or change \
         every claimant in step"
    )]
    NameShared {
        file: RuleKey,
        name: String,
        others: String,
        held_ordinal: i64,
        held_normal: bool,
        ordinal: i64,
        normal: bool,
    },
    #[error("{file} pins ordinal {ordinal} under two names ('{first}' and '{second}'); each ordinal must be unique")]
    DuplicateOrdinal { file: RuleKey, ordinal: i64, first: String, second: String },
    #[error(
        "layer '{name}' in {file}: ordinal {ordinal} is already used by layer '{holder_layer}' (registered by \
         {holders}). Pick another ordinal (>= {RUNTIME_MIN_ORDINAL})"
    )]
    OrdinalRegistered { file: RuleKey, name: String, ordinal: i64, holder_layer: String, holders: String },
    #[error(
        "layer '{name}' in {file}: ordinal {ordinal} is still held by layer '{holder_layer}' under {others}; {file} \
         cannot reclaim it alone. Drop '{holder_layer}' from every claimant first, or pick another ordinal"
    )]
    OrdinalShared { file: RuleKey, name: String, ordinal: i64, holder_layer: String, others: String },
}

impl LayerError {
    /// The answer's `applyStatus` (all of them HTTP 400).
    pub fn apply_status(&self) -> ApplyStatus {
        match self {
            LayerError::OverrideForbidden { .. } => ApplyStatus::LayerOverrideForbidden,
            LayerError::NameInvalid { .. } => ApplyStatus::LayerNameInvalid,
            LayerError::OrdinalOutOfRange { .. } => ApplyStatus::LayerOrdinalOutOfRange,
            LayerError::DuplicateName { .. }
            | LayerError::BuiltInName { .. }
            | LayerError::NameRegistered { .. }
            | LayerError::NameShared { .. } => ApplyStatus::LayerNameConflict,
            LayerError::DuplicateOrdinal { .. }
            | LayerError::OrdinalRegistered { .. }
            | LayerError::OrdinalShared { .. } => ApplyStatus::LayerOrdinalCollision,
        }
    }
}

/// Whether `name` is a valid layer identifier: `[A-Z][A-Z0-9_]*`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Checks `file`'s declarations against the built-in layers and `registry` (which may include
/// `file`'s own prior claims: those never conflict with it). `bundled_twin` is whether the file
/// overrides a bundled file.
pub fn check_declarations(
    file: &RuleKey,
    declared: &[LayerDefinition],
    bundled_twin: bool,
    registry: &Registry,
) -> Result<(), LayerError> {
    if declared.is_empty() {
        return Ok(());
    }
    if bundled_twin {
        let names: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
        return Err(LayerError::OverrideForbidden { file: file.clone(), names: names.join(", ") });
    }
    check_batch(file, declared)?;
    declared.iter().try_for_each(|definition| check_one(file, definition, registry))
}

/// Within one file: a name once (repeats of the same definition are harmless), an ordinal once.
fn check_batch(file: &RuleKey, declared: &[LayerDefinition]) -> Result<(), LayerError> {
    let mut by_name: BTreeMap<&str, &LayerDefinition> = BTreeMap::new();
    let mut by_ordinal: BTreeMap<i64, &LayerDefinition> = BTreeMap::new();
    for definition in declared {
        if let Some(first) = by_name.get(definition.name.as_str())
            && *first != definition
        {
            return Err(LayerError::DuplicateName {
                file: file.clone(),
                name: definition.name.clone(),
                first_ordinal: first.ordinal,
                first_normal: first.normal,
                ordinal: definition.ordinal,
                normal: definition.normal,
            });
        }
        if let Some(first) = by_ordinal.get(&definition.ordinal)
            && first.name != definition.name
        {
            return Err(LayerError::DuplicateOrdinal {
                file: file.clone(),
                ordinal: definition.ordinal,
                first: first.name.clone(),
                second: definition.name.clone(),
            });
        }
        by_name.insert(&definition.name, definition);
        by_ordinal.insert(definition.ordinal, definition);
    }
    Ok(())
}

/// The other claimants of `layer` besides `file`, for messages; empty when `file` is the only one.
fn others(layer: &RegisteredLayer, file: &RuleKey) -> String {
    let rest: Vec<String> = layer.declared_by.iter().filter(|k| *k != file).map(ToString::to_string).collect();
    rest.join(", ")
}

fn check_one(file: &RuleKey, definition: &LayerDefinition, registry: &Registry) -> Result<(), LayerError> {
    let LayerDefinition { name, ordinal, normal } = definition;
    let (ordinal, normal) = (*ordinal, *normal);
    if !valid_name(name) {
        return Err(LayerError::NameInvalid { file: file.clone(), name: name.clone() });
    }
    if !(RUNTIME_MIN_ORDINAL..=MAX_ORDINAL).contains(&ordinal) {
        return Err(LayerError::OrdinalOutOfRange { file: file.clone(), name: name.clone(), ordinal });
    }
    if let Some(held) = builtin::built_in(name) {
        return Err(LayerError::BuiltInName {
            file: file.clone(),
            name: name.clone(),
            builtin_ordinal: held.ordinal,
            builtin_normal: held.normal,
            ordinal,
            normal,
        });
    }
    if let Some(held) = registry.get(name) {
        if (held.ordinal, held.normal) == (ordinal, normal) {
            // The same definition: one more claimant (a soft claim on a bundled file's layer).
            return Ok(());
        }
        let mine = held.declared_by.contains(file);
        if !mine || held.bundled {
            return Err(LayerError::NameRegistered {
                file: file.clone(),
                name: name.clone(),
                holders: Holders(held).to_string(),
                held_ordinal: held.ordinal,
                held_normal: held.normal,
                ordinal,
                normal,
            });
        }
        if held.declared_by.len() > 1 {
            return Err(LayerError::NameShared {
                file: file.clone(),
                name: name.clone(),
                others: others(held, file),
                held_ordinal: held.ordinal,
                held_normal: held.normal,
                ordinal,
                normal,
            });
        }
        // The file's own layer, and it is the only claimant: the apply replaces it.
    }
    if let Some(holder) = registry.by_ordinal(ordinal).filter(|l| l.name != *name) {
        let mine = holder.declared_by.contains(file);
        if !mine || holder.bundled {
            return Err(LayerError::OrdinalRegistered {
                file: file.clone(),
                name: name.clone(),
                ordinal,
                holder_layer: holder.name.clone(),
                holders: Holders(holder).to_string(),
            });
        }
        if holder.declared_by.len() > 1 {
            return Err(LayerError::OrdinalShared {
                file: file.clone(),
                name: name.clone(),
                ordinal,
                holder_layer: holder.name.clone(),
                others: others(holder, file),
            });
        }
        // The file frees the ordinal of its own layer in the same apply.
    }
    Ok(())
}

/// A layer a file uses that will not exist once the file is applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "line {line}, column {column}: unknown layer '{name}': it is not a built-in layer, not declared in this file's \
     layerDefinitions and not registered by another active file"
)]
pub struct UnknownLayer {
    pub name: String,
    pub line: usize,
    pub column: usize,
}

/// Checks that every layer `file` uses exists after its apply: a built-in layer, one the file
/// declares, or one another claimant keeps registered (a layer only `file` claimed so far and no
/// longer declares goes away with the apply).
pub fn check_uses(
    file: &RuleKey,
    uses: &[LayerRef],
    declared: &[LayerDefinition],
    registry: &Registry,
) -> Result<(), UnknownLayer> {
    for used in uses {
        let known = builtin::built_in(&used.name).is_some()
            || declared.iter().any(|d| d.name == used.name)
            || registry.get(&used.name).is_some_and(|l| l.declared_by.iter().any(|k| k != file));
        if !known {
            return Err(UnknownLayer { name: used.name.clone(), line: used.line, column: used.column });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
