//! Writes of runtime dashboard templates (SkyWalking's `addTemplate` / `changeTemplate` /
//! `disableTemplate`): decided here on the main ([`TemplateOp::decide`] over the live stored
//! template and the bundled one), then written as one entry per template id on the single
//! write path ([`Workflow::write_object`]), which replicates it like any entry. Nothing is put
//! in force: every node's GraphQL answers read the stored entries.

use super::Workflow;
use crate::control::agents::manage::Edit;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::control::ui_templates::{StoredTemplate, TemplateOp, TemplateRefused};
use crate::store::EntryStatus;

/// The outcome of a refused template mutation.
pub fn refused_outcome(refused: &TemplateRefused) -> Outcome {
    let status = match refused {
        TemplateRefused::EmptyId | TemplateRefused::IdTooLong(_) | TemplateRefused::NotAnObject(_) | TemplateRefused::Exists(_) => {
            ApplyStatus::InvalidParameter
        }
        TemplateRefused::TooLarge(_) => ApplyStatus::PayloadTooLarge,
        TemplateRefused::NotFound(_) => ApplyStatus::NotFound,
        TemplateRefused::Unreadable(_) => ApplyStatus::ApplyFailed,
    };
    Outcome::new(status, refused.to_string())
}

impl Workflow {
    /// Runs one template mutation (on the main). `bundled` is the bundled configuration of an
    /// id, if the node ships one.
    pub async fn ui_template_op(&self, op: &TemplateOp, bundled: &(dyn Fn(&str) -> Option<String> + Send + Sync)) -> Outcome {
        if let Err(e) = op.validate() {
            return refused_outcome(&e);
        }
        let key = op.key();
        let bundled = bundled(op.id());
        let write = self.write_object(&key, |prior, _| {
            let prior = match prior.filter(|e| e.status == EntryStatus::Active) {
                Some(entry) => Some(StoredTemplate::decode(&entry.content).map_err(|e| refused_outcome(&e))?),
                None => None,
            };
            match op.decide(prior.as_ref(), bundled.as_deref()) {
                Ok(Some(next)) => {
                    let what = match op {
                        TemplateOp::Add { .. } => "added",
                        TemplateOp::Change { .. } => "changed",
                        TemplateOp::Disable { .. } => "disabled",
                    };
                    Ok(Edit::Put { content: next.encode(), version: None, message: format!("template {} {what}", op.id()) })
                }
                Ok(None) => Ok(Edit::NoChange { version: None, message: format!("template {} unchanged", op.id()) }),
                Err(e) => Err(refused_outcome(&e)),
            }
        });
        write.await.0
    }
}
