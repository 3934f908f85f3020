//! The layer step of `/addOrUpdate`: before anything is paused or persisted, the posted file's
//! `layerDefinitions` are checked against the built-in layers and the registry derived from the
//! claims index (`layer_*` answers, HTTP 400), and every layer the file uses must exist once it
//! is applied (`compile_failed` with the use's line and column). Nothing is written here: the
//! registry changes when the file's claims do, at the commit.

use std::collections::BTreeMap;

use super::Workflow;
use crate::compiler::Compiled;
use crate::compiler::layers::referenced_layers;
use crate::ids::RuleKey;
use crate::rules::layers::{self, FileLayers, LayerChanges, Registry};
use crate::rules::ownership::FileClaims;
use crate::status::{ApplyStatus, Outcome};

impl Workflow {
    /// Checks `compiled`'s layers for `key`; on success, returns what the apply will register
    /// and unregister.
    pub(super) fn check_layers(&self, key: &RuleKey, compiled: &Compiled, bundled_twin: bool) -> Result<LayerChanges, Outcome> {
        let declared = match compiled {
            Compiled::Mal(file) => &file.layer_definitions,
            Compiled::Lal(file) => &file.layer_definitions,
        };
        let (before, after) = self.runtime.claims.with_all(|files| registries(files, key, declared, bundled_twin));
        if let Err(e) = layers::check_declarations(key, declared, bundled_twin, &before) {
            return Err(Outcome::new(e.apply_status(), e.to_string()));
        }
        if let Err(e) = layers::check_uses(key, &referenced_layers(compiled), declared, &before) {
            return Err(Outcome::new(ApplyStatus::CompileFailed, e.to_string()));
        }
        Ok(before.changes(&after))
    }
}

/// The registry now, and as it will be once `key` claims `declared`.
fn registries(
    files: &BTreeMap<RuleKey, FileClaims>,
    key: &RuleKey,
    declared: &[crate::compiler::LayerDefinition],
    bundled_twin: bool,
) -> (Registry, Registry) {
    let before = crate::runtime::claims::layer_registry_of(files);
    let others = files
        .iter()
        .filter(|(k, held)| *k != key && !held.inactive)
        .map(|(k, held)| FileLayers { key: k, layers: &held.layers, bundled: held.bundled });
    let after = Registry::of(others.chain(std::iter::once(FileLayers { key, layers: declared, bundled: bundled_twin })));
    (before, after)
}
