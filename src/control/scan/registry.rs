//! Create-if-absent reconciliation of the schema registry with loaded content.
//!
//! Boot and the scan never reshape a measure. A metric whose stored shape differs from the
//! file's is disabled, with an ERROR log and a `lastApplyError`, until the operator reconciles
//! it through `/addOrUpdate` (with `allowStorageChange=true`).

use std::collections::BTreeSet;

use crate::compiler::Compiled;
use crate::base::ids::{Revision, RuleKey};
use crate::store::{Measure, Store};

#[derive(Debug, Default)]
pub struct Reconciled {
    pub to_create: Vec<Measure>,
    pub disabled: BTreeSet<String>,
    pub error: Option<String>,
}

pub fn reconcile(store: &Store, key: &RuleKey, compiled: &Compiled, revision: &Revision) -> Reconciled {
    let mut out = Reconciled::default();
    let Compiled::Mal(file) = compiled else { return out };
    let mut mismatches = Vec::new();
    for (metric, shape) in file.metrics() {
        match store.measure(&metric) {
            None => out.to_create.push(Measure { metric, shape, owner: key.clone(), revision: revision.clone() }),
            Some(stored) if stored.shape != shape => {
                tracing::error!(
                    rule = %key, metric = %metric, stored = %stored.shape, file = %shape,
                    "stored measure has a different shape; metric disabled until reconciled via /addOrUpdate"
                );
                mismatches.push(format!("{metric}: stored shape {} differs from file shape {shape}", stored.shape));
                out.disabled.insert(metric);
            }
            Some(_) => {}
        }
    }
    if !mismatches.is_empty() {
        out.error = Some(format!(
            "disabled until reconciled via /addOrUpdate?allowStorageChange=true: {}",
            mismatches.join("; ")
        ));
    }
    out
}
