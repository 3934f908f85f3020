//! `/addOrUpdate`: create, replace or reactivate a rule.

use std::collections::BTreeSet;

use super::rolling::RollStart;
use super::timing::PhaseTimer;
use super::{AddOrUpdate, Phase, Workflow, compile_new_off_thread, compile_off_thread, faults, loaded_rule};
use crate::compiler::Compiled;
use crate::control::rolling::RollRecord;
use crate::control::rules::classify::{self, ChangeKind, Claims, Classification};
use crate::control::rules::lifecycle::{self, Decision, Operation, Row, Situation};
use crate::control::rules::ownership;
use crate::control::runtime::LoaderKind;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::{Change, EntryStatus};

impl Workflow {
    /// The prior content compiled: the loaded artefact when it is exactly that content,
    /// otherwise a fresh compile (None when the prior no longer compiles).
    /// `hash` is the prior's stored hash (entry or bundled file), so it is not computed again.
    async fn compiled_prior(
        &self,
        key: &crate::base::ids::RuleKey,
        bytes: &[u8],
        hash: &crate::base::ids::ContentHash,
    ) -> Option<std::sync::Arc<Compiled>> {
        if let Some(loaded) = self.runtime.get(key).and_then(|s| s.loaded).filter(|l| l.content_hash == *hash) {
            return Some(loaded.compiled);
        }
        compile_off_thread(key, bytes).await.ok().map(std::sync::Arc::new)
    }

    /// Another live stored entry or bundled file of the key's catalog whose name differs from the
    /// key's only in case (see `RuleName::folded`). Checked under the key's lock; two first
    /// writes of twin names racing on the main could still both pass.
    fn case_twin(&self, key: &crate::base::ids::RuleKey) -> Option<crate::base::ids::RuleName> {
        let folded = key.name.folded();
        let twin = |other: &crate::base::ids::RuleKey| {
            other.catalog == key.catalog && other.name != key.name && other.name.folded() == folded
        };
        let stored = self.store.with_entry_index(|index| {
            index.values().find(|meta| meta.status != EntryStatus::Deleted && twin(&meta.key)).map(|meta| meta.key.name.clone())
        });
        stored.or_else(|| self.bundled.iter().find(|rule| twin(&rule.key)).map(|rule| rule.key.name.clone()))
    }

    pub async fn add_or_update(&self, request: AddOrUpdate) -> Outcome {
        self.write(request, None).await.0
    }

    /// A normal write (`rollout` none), or the start of a roll: the same checks, then the roll
    /// record instead of the entry (`super::rolling`), returned with the answer.
    pub(super) async fn write(&self, request: AddOrUpdate, rollout: Option<RollStart>) -> (Outcome, Option<RollRecord>) {
        let mut started = None;
        let outcome = self.write_checked(request, rollout, &mut started).await;
        (outcome, started)
    }

    async fn write_checked(
        &self,
        request: AddOrUpdate,
        rollout: Option<RollStart>,
        started: &mut Option<RollRecord>,
    ) -> Outcome {
        let key = request.key.clone();
        let mut timer = PhaseTimer::start("add_or_update");
        let (_guard, prior) = match self.begin(&key).await {
            Ok(started) => started,
            Err(outcome) => return outcome,
        };
        timer.mark("lock_prior");
        if let Some(twin) = self.case_twin(&key) {
            return Outcome::new(
                ApplyStatus::InvalidName,
                format!(
                    "{} differs from the existing {}/{twin} only in case; both would be one file when a dump is \
                     extracted on a case-insensitive filesystem",
                    key.name, key.catalog
                ),
            );
        }
        let bundled = self.bundled.get(&key);
        let row = prior.row();
        let active_content: Option<&[u8]> = match (row, &prior.entry) {
            (Row::Active, Some(entry)) => Some(&entry.content),
            (Row::None, _) => bundled.map(|b| b.content.as_slice()),
            _ => None,
        };
        let operation = Operation::AddOrUpdate {
            same_as_active: active_content == Some(request.content.as_slice()),
            force: request.force,
        };
        let reactivation = match lifecycle::decide(Situation { row, bundled: bundled.is_some() }, operation) {
            Decision::NoChange => {
                return Outcome::new(
                    ApplyStatus::NoChange,
                    "content is identical to the active content; post with force=true to re-apply",
                );
            }
            Decision::Apply { reactivation } => reactivation,
            other => {
                return Outcome::new(ApplyStatus::ApplyFailed, format!("unexpected lifecycle decision {other:?}"));
            }
        };

        timer.mark("decide");
        // Compile fully before any pause or persist: every invalid input is an honest 400.
        let compiled = match compile_new_off_thread(&key, &request.content).await {
            Ok(compiled) => compiled,
            Err(e) => return Outcome::new(ApplyStatus::CompileFailed, e.to_string()),
        };
        timer.mark("compile");
        let layer_step = match self.check_layers(&key, &compiled, bundled.is_some()).await {
            Ok(step) => step,
            Err(outcome) => return outcome,
        };
        let prior_content = match &prior.entry {
            Some(entry) => Some((entry.content.as_slice(), &entry.content_hash)),
            None => bundled.map(|b| (b.content.as_slice(), &b.hash)),
        };
        let prior_compiled = match prior_content {
            Some((bytes, hash)) => Some((bytes, self.compiled_prior(&key, bytes, hash).await)),
            None => None,
        };
        let prior_view = match &prior_compiled {
            None => classify::Prior::None,
            Some((bytes, None)) => classify::Prior::Unparseable { bytes },
            Some((bytes, Some(compiled))) => classify::Prior::Compiled { bytes, compiled: compiled.as_ref() },
        };
        let mut classification = classify::classify(prior_view, &request.content, &compiled);
        // A reactivation re-creates everything; a forced re-post of identical content takes
        // the full structural path too, but changes no metric identity.
        promote_to_structural(&mut classification, &compiled, reactivation);

        // Ownership first: a name another file holds is refused as such, whatever shape the
        // new file gives it (a guardrail answer would send the operator the wrong way).
        let claims = Claims::of(&compiled);
        if let Err(conflict) = self
            .runtime
            .claims
            .with_all(|files| ownership::check(&key, &claims, bundled.is_some(), files))
        {
            return Outcome::new(ApplyStatus::OwnershipConflict, conflict.to_string());
        }
        let key_exists = prior.entry.is_some() || bundled.is_some();
        let registered = match self.registered_measures(&key, &compiled, key_exists).await {
            Ok(registered) => registered,
            Err(outcome) => return outcome,
        };
        let impact = classify::storage_impact(prior_view, &compiled, |metric| registered.get(metric).copied());
        if !impact.is_empty() && !request.allow_storage_change {
            return Outcome::new(
                ApplyStatus::StorageChangeRequiresExplicitApproval,
                format!(
                    "this change moves the storage identity of [{}]; re-post with allowStorageChange=true if intended",
                    impact.into_iter().collect::<Vec<_>>().join(", ")
                ),
            );
        }

        timer.mark("classify");
        if let Some(start) = rollout {
            let master = active_content.map(<[u8]>::to_vec);
            return self.start_after_checks(&key, master, request.content, start, &compiled, &impact, &layer_step.changes, started).await;
        }
        let entry = self.new_entry(&key, request.content, EntryStatus::Active, &prior);
        let measures = self.measures_for(&key, &compiled, &entry.revision);
        let mut change = Change { entries: vec![entry.clone()], measures, ..Change::default() };
        let apply_status = match classification.kind {
            ChangeKind::FilterOnly => ApplyStatus::FilterOnlyApplied,
            _ => ApplyStatus::StructuralApplied,
        };
        let note = super::history::Note { action: "addOrUpdate", apply_status, classification: Some(classification.kind.as_str()) };
        self.note_history(&mut change, &entry, note);

        if classification.kind == ChangeKind::FilterOnly {
            let confirmed = match self.commit(change, &entry, &prior).await {
                Ok(confirmed) => confirmed,
                Err(outcome) => return outcome,
            };
            timer.mark("persist_notify");
            self.set_claims(&key, &compiled, false);
            let note = super::replicas_note(self.peers.replicas_required(), confirmed);
            if let Some(argument) = faults::held(faults::AFTER_PERSIST).await {
                self.runtime.set_error(&key, format!("local apply deferred ({argument}); the scan retries"));
                return Outcome::new(
                    ApplyStatus::FilterOnlyPersisted,
                    format!("{key} persisted; the local swap failed and the next scan retries"),
                )
                .at(&entry.revision);
            }
            self.runtime.install(
                &key,
                loaded_rule(compiled, entry.content_hash.clone(), Some(entry.revision.clone()), LoaderKind::Runtime),
                BTreeSet::new(),
            );
            timer.mark("install");
            return Outcome::new(ApplyStatus::FilterOnlyApplied, format!("{}{note}", classification.summary()))
                .at(&entry.revision);
        }

        let apply_id = self.start_apply(&key, &entry.content_hash);
        self.apply_phase(&apply_id, Phase::Fencing);
        if let Err(outcome) = self.suspend_cluster(&key).await {
            return self.end_apply(&apply_id, Phase::Failed, outcome);
        }
        // The data boundary: after the 200 no sample is evaluated by the old content.
        if let Err(outcome) = self.drain_local(&key, ApplyStatus::ApplyFailed).await {
            self.resume_cluster(&key).await;
            return self.end_apply(&apply_id, Phase::Failed, outcome);
        }
        self.apply_phase(&apply_id, Phase::Ddl);
        // The commit notices go out inside `commit` (before the local install and the resume, as
        // the notices of a best-effort commit always did).
        let confirmed = match self.commit(change, &entry, &prior).await {
            Ok(confirmed) => confirmed,
            Err(outcome) => {
                self.resume_cluster(&key).await;
                return self.end_apply(&apply_id, Phase::Failed, outcome);
            }
        };
        // Committed. From here on storage is authoritative.
        self.apply_phase(&apply_id, Phase::RollingOut);
        self.set_claims(&key, &compiled, false);
        if let Some(argument) = faults::held(faults::AFTER_PERSIST).await {
            self.runtime.set_error(&key, format!("commit deferred ({argument}); the scan retries"));
            self.resume_cluster(&key).await;
            let outcome = Outcome::new(
                ApplyStatus::CommitDeferred,
                format!("{key} persisted; the local finishing step failed and the next scan retries"),
            )
            .at(&entry.revision)
            .with_apply_id(&apply_id);
            return self.end_apply(&apply_id, Phase::Degraded, outcome);
        }
        self.runtime.install(
            &key,
            loaded_rule(compiled, entry.content_hash.clone(), Some(entry.revision.clone()), LoaderKind::Runtime),
            BTreeSet::new(),
        );
        self.runtime.resume(&key, crate::control::runtime::Origin::SelfOrigin);
        self.peers.resume_all(&key).await;
        let note = super::replicas_note(self.peers.replicas_required(), confirmed);
        let alarms = super::alarm_reset_note(&self.runtime.reset_alarm_windows(&key, classification.alarm_reset()));
        self.apply_phase(&apply_id, Phase::Applied);
        let layers = layer_step.changes.note();
        Outcome::new(ApplyStatus::StructuralApplied, format!("{}{layers}{alarms}{note}", classification.summary()))
            .at(&entry.revision)
            .with_apply_id(&apply_id)
    }
}

impl Workflow {
    /// The rolling branch of a write whose every check passed: a roll may not move storage
    /// identity or layer definitions (both shapes would run side by side for the whole roll), so
    /// those are refused; otherwise the roll record is persisted with the measures the rolling
    /// content creates (create-if-absent).
    #[allow(clippy::too_many_arguments)]
    async fn start_after_checks(
        &self,
        key: &crate::base::ids::RuleKey,
        master: Option<Vec<u8>>,
        rolling: Vec<u8>,
        start: RollStart,
        compiled: &Compiled,
        impact: &BTreeSet<String>,
        layers: &crate::control::rules::layers::LayerChanges,
        started: &mut Option<RollRecord>,
    ) -> Outcome {
        if !impact.is_empty() {
            return Outcome::new(
                ApplyStatus::InvalidParameter,
                format!(
                    "a rolling change cannot move storage identity ([{}]): old and new shapes would be written side by \
                     side for the whole roll; apply it as a normal write",
                    impact.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            );
        }
        if !layers.registered.is_empty() || !layers.unregistered.is_empty() {
            return Outcome::new(
                ApplyStatus::InvalidParameter,
                "a rolling change cannot change layer definitions; apply it as a normal write",
            );
        }
        let revision = self.clock.next(crate::base::clock::now_ms(), None);
        let measures: Vec<_> = self
            .measures_for(key, compiled, &revision)
            .into_iter()
            .filter(|m| self.store.measure(&m.metric).is_none())
            .collect();
        let (outcome, record) = self.put_started_roll(key, master, rolling, start, measures).await;
        *started = record;
        outcome
    }
}

fn promote_to_structural(classification: &mut Classification, compiled: &Compiled, reactivation: bool) {
    if reactivation {
        classification.kind = ChangeKind::Structural;
        classification.added = Claims::of(compiled).names();
    } else if classification.kind == ChangeKind::NoChange {
        classification.kind = ChangeKind::Structural;
    }
}

