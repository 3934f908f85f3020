//! `/inactivate` and `/delete` (default mode and `revertToBundled`).

use std::collections::BTreeSet;

use super::all_names;
use super::{Phase, Workflow, compile_off_thread, faults, loaded_rule};
use crate::base::ids::RuleKey;
use crate::control::rules::classify::Claims;
use crate::control::rules::lifecycle::{self, Decision, Operation, Situation};
use crate::control::rules::ownership::{self, FileClaims};
use crate::control::runtime::{LoaderKind, Origin};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::{Change, EntryStatus};

impl Workflow {
    pub async fn inactivate(&self, key: &RuleKey) -> Outcome {
        let (_guard, prior) = match self.begin(key).await {
            Ok(started) => started,
            Err(outcome) => return outcome,
        };
        let bundled = self.bundled.get(key);
        let situation = Situation { row: prior.row(), bundled: bundled.is_some() };
        let static_tombstone = match lifecycle::decide(situation, Operation::Inactivate) {
            Decision::Inactivate { static_tombstone } => static_tombstone,
            Decision::Nothing(status) => return Outcome::new(status, nothing_message(status, key)),
            other => return Outcome::new(ApplyStatus::InactivateFailed, format!("unexpected decision {other:?}")),
        };
        // The INACTIVE row keeps the content: the row's for a runtime rule, the bundled file's
        // for a static tombstone.
        let content = match (&prior.entry, bundled) {
            (Some(entry), _) => entry.content.clone(),
            (None, Some(b)) => b.content.to_vec(),
            (None, None) => Vec::new(),
        };
        let compiled = compile_off_thread(key, &content).await.ok();
        if let Err(outcome) = self.suspend_cluster(key).await {
            return outcome;
        }
        if let Err(outcome) = self.drain_local(key, ApplyStatus::InactivateFailed).await {
            self.resume_cluster(key).await;
            return outcome;
        }
        let entry = self.new_entry(key, content, EntryStatus::Inactive, &prior);
        let change = Change { entries: vec![entry.clone()], ..Change::default() };
        if let Err(e) = self.persist(change).await {
            self.resume_cluster(key).await;
            return Outcome::new(ApplyStatus::InactivateFailed, format!("{key} not inactivated, nothing changed: {e}"));
        }
        match &compiled {
            Some(compiled) => self.set_claims(key, compiled, true),
            None => self.runtime.claims.remove(key),
        }
        if let Some(argument) = faults::held(faults::TEARDOWN).await {
            self.runtime.set_error(key, format!("teardown deferred ({argument}); the scan retries"));
            self.resume_cluster(key).await;
            self.peers.notify_committed(&entry, prior.last_revision.as_ref()).await;
            return Outcome::new(
                ApplyStatus::TeardownDeferred,
                format!("{key} is INACTIVE in storage; the local teardown failed and the next scan retries"),
            )
            .at(&entry.revision);
        }
        self.runtime.unload(key);
        self.runtime.resume(key, Origin::SelfOrigin);
        let note = self.announce(&entry, &prior).await;
        let alarms = super::alarm_reset_note(&self.runtime.reset_alarm_windows(key, compiled.as_ref().map(all_names).unwrap_or_default()));
        if static_tombstone {
            Outcome::new(ApplyStatus::StaticTombstoned, format!("bundled rule {key} tombstoned; its measures are kept{alarms}{note}"))
                .at(&entry.revision)
        } else {
            Outcome::new(ApplyStatus::Inactivated, format!("{key} inactivated; its measures are kept{alarms}{note}")).at(&entry.revision)
        }
    }

    pub async fn delete(&self, key: &RuleKey, revert_to_bundled: bool) -> Outcome {
        let (_guard, prior) = match self.begin(key).await {
            Ok(started) => started,
            Err(outcome) => return outcome,
        };
        let bundled = self.bundled.get(key);
        let situation = Situation { row: prior.row(), bundled: bundled.is_some() };
        match lifecycle::decide(situation, Operation::Delete { revert_to_bundled }) {
            Decision::Nothing(status) | Decision::Refuse(status) => Outcome::new(status, nothing_message(status, key)),
            Decision::DeleteRow => {
                let tombstone = self.new_entry(key, Vec::new(), EntryStatus::Deleted, &prior);
                let change = Change { entries: vec![tombstone.clone()], ..Change::default() };
                if let Err(e) = self.persist(change).await {
                    return Outcome::new(ApplyStatus::DeleteFailed, format!("{key} not deleted: {e}"));
                }
                self.runtime.claims.remove(key);
                self.runtime.unload(key);
                let confirmed = self.peers.notify_committed(&tombstone, prior.last_revision.as_ref()).await;
                let note = super::replicas_note(self.peers.replicas_required(), confirmed);
                Outcome::new(ApplyStatus::Deleted, format!("{key} deleted; its backend measures are left in place{note}"))
                    .at(&tombstone.revision)
            }
            Decision::RevertToBundled => self.revert_to_bundled(key, &prior).await,
            other => Outcome::new(ApplyStatus::DeleteFailed, format!("unexpected decision {other:?}")),
        }
    }

    async fn revert_to_bundled(&self, key: &RuleKey, prior: &super::Prior) -> Outcome {
        let Some(bundled) = self.bundled.get(key) else {
            return Outcome::new(ApplyStatus::NoBundledTwin, format!("{key} has no bundled file"));
        };
        let compiled = match compile_off_thread(key, &bundled.content).await {
            Ok(compiled) => compiled,
            Err(e) => {
                return Outcome::new(
                    ApplyStatus::RevertToBundledFailed,
                    format!("bundled file {} does not compile: {e}", bundled.path.display()),
                );
            }
        };
        let claims = Claims::of(&compiled);
        if let Err(conflict) = self.runtime.claims.with_all(|files| ownership::check(key, &claims, true, files)) {
            return Outcome::new(ApplyStatus::DeleteRefused, format!("bundled {key} cannot take over: {conflict}"));
        }
        let apply_id = self.start_apply(key, &bundled.hash);
        self.apply_phase(&apply_id, Phase::Fencing);
        if let Err(outcome) = self.suspend_cluster(key).await {
            return self.end_apply(&apply_id, Phase::Failed, outcome);
        }
        if let Err(outcome) = self.drain_local(key, ApplyStatus::RevertToBundledFailed).await {
            self.resume_cluster(key).await;
            return self.end_apply(&apply_id, Phase::Failed, outcome);
        }
        let tombstone = self.new_entry(key, Vec::new(), EntryStatus::Deleted, prior);
        let measures = self.measures_for(key, &compiled, &tombstone.revision);
        let mut change = Change { entries: vec![tombstone.clone()], measures, ..Change::default() };
        let note = super::history::Note { action: "revertToBundled", apply_status: ApplyStatus::RevertedToBundled, classification: None };
        self.note_history(&mut change, &tombstone, note);
        self.apply_phase(&apply_id, Phase::Ddl);
        if let Err(e) = self.persist(change).await {
            self.resume_cluster(key).await;
            let outcome =
                Outcome::new(ApplyStatus::RevertToBundledFailed, format!("{key} not reverted, nothing changed: {e}"));
            return self.end_apply(&apply_id, Phase::Failed, outcome);
        }
        self.apply_phase(&apply_id, Phase::RollingOut);
        let mut reset: BTreeSet<String> = all_names(&compiled);
        if let Some(entry) = prior.entry.as_ref()
            && let Ok(old) = compile_off_thread(key, &entry.content).await
        {
            reset.extend(all_names(&old));
        }
        self.runtime.claims.set(key, FileClaims::of(&compiled, false, true));
        self.runtime.install(key, loaded_rule(compiled, bundled.hash.clone(), None, LoaderKind::Bundled), BTreeSet::new());
        self.runtime.resume(key, Origin::SelfOrigin);
        let note = self.announce(&tombstone, prior).await;
        let alarms = super::alarm_reset_note(&self.runtime.reset_alarm_windows(key, reset));
        self.apply_phase(&apply_id, Phase::Applied);
        Outcome::new(ApplyStatus::RevertedToBundled, format!("{key} now runs its bundled file{alarms}{note}"))
            .at(&tombstone.revision)
            .with_apply_id(&apply_id)
    }
}

fn nothing_message(status: ApplyStatus, key: &RuleKey) -> String {
    match status {
        ApplyStatus::NotFound => format!("{key} has no runtime entry"),
        ApplyStatus::AlreadyInactive => format!("{key} is already INACTIVE"),
        ApplyStatus::RequiresInactivateFirst => format!("{key} is ACTIVE; inactivate it before deleting"),
        ApplyStatus::RequiresRevertToBundled => {
            format!("{key} has a bundled file; delete with mode=revertToBundled to hand the name back to it")
        }
        ApplyStatus::NoBundledTwin => format!("{key} has no bundled file to revert to"),
        other => format!("{key}: {other}"),
    }
}
