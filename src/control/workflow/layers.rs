//! The layer step of `/addOrUpdate`: before anything is paused or persisted, the posted file's
//! `layerDefinitions` are checked against the built-in layers and the registry derived from the
//! claims index (`layer_*` answers, HTTP 400), and every layer the file uses must exist once it
//! is applied (`compile_failed` with the use's line and column). Nothing is written here: the
//! registry changes when the file's claims do, at the commit. A file that declares layers holds
//! the workflow's layer lock from this check until its apply ends, so concurrent applies of two
//! such files are checked one after the other.

use std::collections::BTreeMap;

use tokio::sync::MutexGuard;

use super::Workflow;
use crate::compiler::Compiled;
use crate::compiler::layers::referenced_layers;
use crate::base::ids::RuleKey;
use crate::control::rules::layers::{self, FileLayers, LayerChanges, Registry};
use crate::control::rules::ownership::FileClaims;
use crate::control::outcome::{ApplyStatus, Outcome};

/// A passed layer check: what the apply will register and unregister, and the layer lock when
/// the file declares layers (held until the apply ends).
pub(super) struct LayerStep<'a> {
    pub changes: LayerChanges,
    _guard: Option<MutexGuard<'a, ()>>,
}

impl Workflow {
    /// Checks `compiled`'s layers for `key`.
    pub(super) async fn check_layers(
        &self,
        key: &RuleKey,
        compiled: &Compiled,
        bundled_twin: bool,
    ) -> Result<LayerStep<'_>, Outcome> {
        let declared = match compiled {
            Compiled::Mal(file) => &file.layer_definitions,
            Compiled::Lal(file) => &file.layer_definitions,
        };
        let guard = if declared.is_empty() {
            None
        } else {
            let locked = tokio::time::timeout(self.lock_timeout, self.layer_lock.lock()).await.map_err(|_| {
                Outcome::new(
                    ApplyStatus::UpdateInProgress,
                    format!("another file's layers are being applied; the layer lock was not free within {:?}", self.lock_timeout),
                )
            })?;
            Some(locked)
        };
        let (before, after) = self.runtime.claims.with_all(|files| registries(files, key, declared, bundled_twin));
        if let Err(e) = layers::check_declarations(key, declared, bundled_twin, &before) {
            return Err(Outcome::new(e.apply_status(), e.to_string()));
        }
        if let Err(e) = layers::check_uses(key, &referenced_layers(compiled), declared, &before) {
            return Err(Outcome::new(ApplyStatus::CompileFailed, e.to_string()));
        }
        Ok(LayerStep { changes: before.changes(&after), _guard: guard })
    }
}

/// The registry now, and as it will be once `key` claims `declared`.
fn registries(
    files: &BTreeMap<RuleKey, FileClaims>,
    key: &RuleKey,
    declared: &[crate::compiler::LayerDefinition],
    bundled_twin: bool,
) -> (Registry, Registry) {
    let before = crate::control::runtime::claims::layer_registry_of(files);
    let others = files
        .iter()
        .filter(|(k, held)| *k != key && !held.inactive)
        .map(|(k, held)| FileLayers { key: k, layers: &held.layers, bundled: held.bundled });
    let after = Registry::of(others.chain(std::iter::once(FileLayers { key, layers: declared, bundled: bundled_twin })));
    (before, after)
}
