//! Runtime dashboard templates for the GraphQL room ([`TemplateStore`]): reads are this node's
//! stored `ui-template` entries (what replication converges), writes go through the single
//! write path on the main, forwarded there from any other node like every write.

use std::sync::{Arc, Mutex};

use crate::api::graphql::templates::{Template, TemplateSet, TemplateStore};
use crate::base::ids::Catalog;
use crate::cluster::bus::messages::ForwardOp;
use crate::cluster::replication::Cluster;
use crate::cluster::replication::forward::Forwarded;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::control::ui_templates::{StoredTemplate, TemplateOp};
use crate::control::workflow::Workflow;
use crate::store::{EntryStatus, Store};

/// The admin API's [`TemplateStore`]: the workflow, store and cluster handles it needs (not the
/// admin state, which holds the GraphQL resolvers that hold this).
pub struct StoredTemplates {
    workflow: Arc<Workflow>,
    store: Arc<Store>,
    cluster: Option<Arc<Cluster>>,
    bundled: Arc<TemplateSet>,
    /// The stored templates, read again once the store has changed (its change counter).
    cache: Mutex<Option<(u64, Arc<Vec<Template>>)>>,
}

impl StoredTemplates {
    pub fn new(workflow: Arc<Workflow>, store: Arc<Store>, cluster: Option<Arc<Cluster>>, bundled: Arc<TemplateSet>) -> StoredTemplates {
        StoredTemplates { workflow, store, cluster, bundled, cache: Mutex::new(None) }
    }
}

impl TemplateStore for StoredTemplates {
    fn list(&self) -> Result<Arc<Vec<Template>>, String> {
        // The counter is read before the entries: a commit in between moves it, so what is
        // cached under it is read again next time.
        let version = self.store.version();
        if let Some((at, cached)) = self.cache.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && *at == version
        {
            return Ok(cached.clone());
        }
        let entries = self.store.read_catalog_now(Catalog::UiTemplate).map_err(|e| format!("reading the stored dashboards: {e}"))?;
        let templates: Vec<Template> = entries
            .iter()
            .filter(|e| e.status == EntryStatus::Active)
            .filter_map(|e| match StoredTemplate::decode(&e.content) {
                Ok(stored) => Some(Template { id: stored.id, configuration: stored.configuration, disabled: stored.disabled }),
                Err(error) => {
                    tracing::warn!(key = %e.key, %error, "stored dashboard skipped");
                    None
                }
            })
            .collect();
        let templates = Arc::new(templates);
        *self.cache.lock().unwrap_or_else(|p| p.into_inner()) = Some((version, templates.clone()));
        Ok(templates)
    }

    fn write<'a>(&'a self, op: TemplateOp) -> crate::BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            if let Some(cluster) = self.cluster.as_ref().filter(|c| !c.is_main()) {
                match cluster.forward_write(ForwardOp::UiTemplate { key: op.key(), op: op.to_json() }).await {
                    Forwarded::RunHere => {}
                    Forwarded::Answer(_, body) => return relayed(&body),
                    Forwarded::Failed(outcome, main) => return Err(format!("{} (main {main})", outcome.message)),
                }
            }
            result_of(&run(&self.workflow, &self.bundled, &op).await)
        })
    }
}

/// Runs a template mutation here, on the main, against `bundled` (this node's dashboards).
pub(super) async fn run(workflow: &Workflow, bundled: &TemplateSet, op: &TemplateOp) -> Outcome {
    workflow.ui_template_op(op, &|id| bundled.templates.get(id).map(|t| t.configuration.clone())).await
}

/// A mutation succeeded when something was stored, or nothing needed to be.
fn succeeded(status: &str) -> bool {
    status == ApplyStatus::Stored.as_str() || status == ApplyStatus::NoChange.as_str()
}

/// The answer's message: the outcome's, and the revision written (which names the main that
/// wrote it), as the admin API's envelope shows them.
fn answer(status: &str, message: &str, revision: Option<&str>) -> Result<String, String> {
    let message = match revision {
        Some(revision) => format!("{message} (revision {revision})"),
        None => message.to_string(),
    };
    if succeeded(status) { Ok(message) } else { Err(message) }
}

fn result_of(outcome: &Outcome) -> Result<String, String> {
    answer(outcome.status.as_str(), &outcome.message, outcome.revision.as_ref().map(ToString::to_string).as_deref())
}

/// The main's answer to a forwarded mutation (the admin API's envelope).
fn relayed(body: &[u8]) -> Result<String, String> {
    let body: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("the main's answer is not JSON: {e}"))?;
    answer(body["applyStatus"].as_str().unwrap_or_default(), body["message"].as_str().unwrap_or_default(), body["revision"].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_map_to_status() {
        assert_eq!(result_of(&Outcome::new(ApplyStatus::Stored, "template a added")), Ok("template a added".to_string()));
        assert_eq!(result_of(&Outcome::new(ApplyStatus::NoChange, "same")), Ok("same".to_string()));
        assert_eq!(result_of(&Outcome::new(ApplyStatus::NotFound, "Can't find the template x")), Err("Can't find the template x".to_string()));
        let body = super::super::outcome_body(&Outcome::new(ApplyStatus::InvalidParameter, "bad"), "ui-template", "x");
        assert_eq!(relayed(body.to_string().as_bytes()), Err("bad".to_string()));
        let body = super::super::outcome_body(&Outcome::new(ApplyStatus::Stored, "ok"), "ui-template", "x");
        assert_eq!(relayed(body.to_string().as_bytes()), Ok("ok".to_string()));
        let revision = crate::base::ids::Revision { millis: 5, counter: 1, node: crate::base::ids::NodeId("n1".into()) };
        let stored = Outcome::new(ApplyStatus::Stored, "template a added").at(&revision);
        assert_eq!(result_of(&stored), Ok("template a added (revision 5.1@n1)".to_string()));
        let body = super::super::outcome_body(&stored, "ui-template", "a");
        assert_eq!(relayed(body.to_string().as_bytes()), result_of(&stored), "relayed as answered on the main");
        assert!(relayed(b"<html>").is_err());
    }
}
