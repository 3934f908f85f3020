//! The `applyStatus` vocabulary of the admin API: every outcome a workflow or request check can
//! report. The mapping from status to HTTP code lives in exactly one place, `http::status_code`.

use std::fmt;

/// Every `applyStatus` string hotrule can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApplyStatus {
    // 200
    NoChange,
    /// An agent object (group, config, command) was written.
    Stored,
    FilterOnlyApplied,
    FilterOnlyPersisted,
    StructuralApplied,
    Inactivated,
    StaticTombstoned,
    AlreadyInactive,
    Deleted,
    RevertedToBundled,
    NotFound,
    /// A roll started (`addOrUpdate?rollout=rolling`), or a roll was rolled back or
    /// force-committed.
    RollStarted,
    RollRolledBack,
    RollForceCommitted,
    // 400
    CompileFailed,
    EmptyBody,
    MissingCatalog,
    InvalidCatalog,
    MissingName,
    InvalidName,
    InvalidMode,
    InvalidSource,
    InvalidParameter,
    NoBundledTwin,
    LayerOrdinalOutOfRange,
    LayerNameInvalid,
    LayerNameConflict,
    LayerOrdinalCollision,
    LayerOverrideForbidden,
    // 401
    Unauthorized,
    // 404 for single-rule reads
    RuleNotFound,
    // 404 for agent objects (groups, configs, onetime commands) and agents
    GroupNotFound,
    ConfigNotFound,
    CommandNotFound,
    AgentNotFound,
    /// A history read or restore of a revision retention compacted (the answer names the
    /// oldest revision kept).
    RevisionCompacted,
    /// A history read or restore of a revision the key never had.
    RevisionNotFound,
    /// A history read of a key without history.
    HistoryNotFound,
    // 409
    StorageChangeRequiresExplicitApproval,
    UpdateInProgress,
    RequiresInactivateFirst,
    RequiresRevertToBundled,
    DeleteRefused,
    OriginConflict,
    SplitBrainDetected,
    OwnershipConflict,
    /// A roll in progress or stopped holds the file (`rolling::write_conflict`).
    RollInProgress,
    /// The roll already finished (rollback or force-commit of a completed roll), or moved
    /// under the caller.
    RollFinished,
    // 413
    PayloadTooLarge,
    // 421 / 502 / 503
    ClusterViewSplit,
    ForwardFailed,
    StorageUnavailable,
    NotReady,
    // 500
    ApplyFailed,
    PersistFailed,
    /// Not persisted on the main, but a peer it prepared may still hold a staged copy (its abort
    /// was not confirmed): the write may yet appear (docs/consistency.md, prepare/commit).
    PersistUncertain,
    CommitDeferred,
    TeardownDeferred,
    InactivateFailed,
    DeleteFailed,
    RevertToBundledFailed,
    ListFailed,
    DumpFailed,
}

impl ApplyStatus {
    pub fn as_str(self) -> &'static str {
        use ApplyStatus::*;
        match self {
            NoChange => "no_change",
            Stored => "stored",
            FilterOnlyApplied => "filter_only_applied",
            FilterOnlyPersisted => "filter_only_persisted",
            StructuralApplied => "structural_applied",
            Inactivated => "inactivated",
            StaticTombstoned => "static_tombstoned",
            AlreadyInactive => "already_inactive",
            Deleted => "deleted",
            RevertedToBundled => "reverted_to_bundled",
            NotFound | RuleNotFound => "not_found",
            RollStarted => "roll_started",
            RollRolledBack => "roll_rolled_back",
            RollForceCommitted => "roll_force_committed",
            RollInProgress => "roll_in_progress",
            RollFinished => "roll_finished",
            GroupNotFound => "group_not_found",
            RevisionCompacted => "revision_compacted",
            RevisionNotFound => "revision_not_found",
            HistoryNotFound => "history_not_found",
            ConfigNotFound => "config_not_found",
            CommandNotFound => "command_not_found",
            AgentNotFound => "agent_not_found",
            CompileFailed => "compile_failed",
            EmptyBody => "empty_body",
            MissingCatalog => "missing_catalog",
            InvalidCatalog => "invalid_catalog",
            MissingName => "missing_name",
            InvalidName => "invalid_name",
            InvalidMode => "invalid_mode",
            InvalidSource => "invalid_source",
            InvalidParameter => "invalid_parameter",
            NoBundledTwin => "no_bundled_twin",
            LayerOrdinalOutOfRange => "layer_ordinal_out_of_range",
            LayerNameInvalid => "layer_name_invalid",
            LayerNameConflict => "layer_name_conflict",
            LayerOrdinalCollision => "layer_ordinal_collision",
            LayerOverrideForbidden => "layer_override_forbidden",
            Unauthorized => "unauthorized",
            StorageChangeRequiresExplicitApproval => "storage_change_requires_explicit_approval",
            UpdateInProgress => "update_in_progress",
            RequiresInactivateFirst => "requires_inactivate_first",
            RequiresRevertToBundled => "requires_revert_to_bundled",
            DeleteRefused => "delete_refused",
            OriginConflict => "origin_conflict",
            SplitBrainDetected => "split_brain_detected",
            OwnershipConflict => "ownership_conflict",
            PayloadTooLarge => "payload_too_large",
            ClusterViewSplit => "cluster_view_split",
            ForwardFailed => "forward_failed",
            StorageUnavailable => "storage_unavailable",
            NotReady => "not_ready",
            ApplyFailed => "apply_failed",
            PersistFailed => "persist_failed",
            PersistUncertain => "persist_uncertain",
            CommitDeferred => "commit_deferred",
            TeardownDeferred => "teardown_deferred",
            InactivateFailed => "inactivate_failed",
            DeleteFailed => "delete_failed",
            RevertToBundledFailed => "revert_to_bundled_failed",
            ListFailed => "list_failed",
            DumpFailed => "dump_failed",
        }
    }
}

impl fmt::Display for ApplyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a workflow operation answers: a status, a human-readable message, and the revision it
/// committed (when it committed one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: ApplyStatus,
    pub message: String,
    pub revision: Option<crate::base::ids::Revision>,
    /// The version of an agent config the write left in place (agent config writes only).
    pub version: Option<i64>,
    /// The handle of a structural apply, for `GET /runtime/rule/status` (structural applies only).
    pub apply_id: Option<String>,
}

impl Outcome {
    pub fn new(status: ApplyStatus, message: impl Into<String>) -> Outcome {
        Outcome { status, message: message.into(), revision: None, version: None, apply_id: None }
    }

    /// The same outcome, recording the revision it committed.
    pub fn at(mut self, revision: &crate::base::ids::Revision) -> Outcome {
        self.revision = Some(revision.clone());
        self
    }

    /// The same outcome, carrying the handle of the structural apply it answers.
    pub fn with_apply_id(mut self, apply_id: &str) -> Outcome {
        self.apply_id = Some(apply_id.to_string());
        self
    }

    /// The same outcome, recording the agent config version it left in place.
    pub fn with_version(mut self, version: Option<i64>) -> Outcome {
        self.version = version;
        self
    }
}
