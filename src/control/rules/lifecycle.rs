//! The rule lifecycle as one pure function: `(situation, operation) → decision`.
//!
//! ```text
//! [absent] --addOrUpdate--> ACTIVE --inactivate--> INACTIVE --delete--> [absent]
//!                             ^                        |
//!                             +------addOrUpdate-------+   (reactivate)
//! ```
//! A bundled file with no entry behaves as ACTIVE content without a row: it can be overridden,
//! tombstoned by inactivate, and is what `revertToBundled` restores.

use crate::control::outcome::ApplyStatus;

/// What exists for one (catalog, name) before the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Situation {
    pub row: Row,
    pub bundled: bool,
}

/// The stored row, if any (tombstones count as no row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    None,
    Active,
    Inactive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `same_as_active`: the posted bytes equal the currently active content (the ACTIVE row,
    /// or the bundled file when there is no row).
    AddOrUpdate { same_as_active: bool, force: bool },
    Inactivate,
    Delete { revert_to_bundled: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to do: `no_change`.
    NoChange,
    /// Compile, classify and apply the posted content. `reactivation`: the row is INACTIVE.
    Apply { reactivation: bool },
    /// Write an INACTIVE row and tear down; `static_tombstone` when there was only a bundled file.
    Inactivate { static_tombstone: bool },
    /// Remove the row (a tombstone is written).
    DeleteRow,
    /// Remove the row and apply the bundled file in its place.
    RevertToBundled,
    /// Answer with this 200 status and change nothing (`already_inactive`, `not_found`).
    Nothing(ApplyStatus),
    /// Refuse with this 4xx status.
    Refuse(ApplyStatus),
}

pub fn decide(situation: Situation, operation: Operation) -> Decision {
    use Decision::*;
    let Situation { row, bundled } = situation;
    match operation {
        Operation::AddOrUpdate { same_as_active, force } => match row {
            Row::Inactive => Apply { reactivation: true },
            Row::Active => {
                if same_as_active && !force { NoChange } else { Apply { reactivation: false } }
            }
            Row::None if bundled && same_as_active && !force => NoChange,
            Row::None => Apply { reactivation: false },
        },
        Operation::Inactivate => match row {
            Row::Active => Inactivate { static_tombstone: false },
            Row::Inactive => Nothing(ApplyStatus::AlreadyInactive),
            Row::None if bundled => Inactivate { static_tombstone: true },
            Row::None => Nothing(ApplyStatus::NotFound),
        },
        Operation::Delete { revert_to_bundled } => match (row, revert_to_bundled, bundled) {
            (Row::None, _, _) => Nothing(ApplyStatus::NotFound),
            (Row::Active, _, _) => Refuse(ApplyStatus::RequiresInactivateFirst),
            (Row::Inactive, true, false) => Refuse(ApplyStatus::NoBundledTwin),
            (Row::Inactive, true, true) => RevertToBundled,
            (Row::Inactive, false, true) => Refuse(ApplyStatus::RequiresRevertToBundled),
            (Row::Inactive, false, false) => DeleteRow,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ApplyStatus as S;
    use Decision as D;

    fn s(row: Row, bundled: bool) -> Situation {
        Situation { row, bundled }
    }

    const ADD_SAME: Operation = Operation::AddOrUpdate { same_as_active: true, force: false };
    const ADD_SAME_FORCE: Operation = Operation::AddOrUpdate { same_as_active: true, force: true };
    const ADD_NEW: Operation = Operation::AddOrUpdate { same_as_active: false, force: false };
    const INACT: Operation = Operation::Inactivate;
    const DEL: Operation = Operation::Delete { revert_to_bundled: false };
    const REVERT: Operation = Operation::Delete { revert_to_bundled: true };

    /// Every state × operation, as a table. Rows: (row, bundled, operation, expected).
    #[test]
    fn every_state_and_operation() {
        let table: Vec<(Row, bool, Operation, Decision)> = vec![
            // absent, nothing on disk
            (Row::None, false, ADD_NEW, D::Apply { reactivation: false }),
            (Row::None, false, ADD_SAME_FORCE, D::Apply { reactivation: false }),
            (Row::None, false, INACT, D::Nothing(S::NotFound)),
            (Row::None, false, DEL, D::Nothing(S::NotFound)),
            (Row::None, false, REVERT, D::Nothing(S::NotFound)),
            // bundled only
            (Row::None, true, ADD_SAME, D::NoChange),
            (Row::None, true, ADD_SAME_FORCE, D::Apply { reactivation: false }),
            (Row::None, true, ADD_NEW, D::Apply { reactivation: false }),
            (Row::None, true, INACT, D::Inactivate { static_tombstone: true }),
            (Row::None, true, DEL, D::Nothing(S::NotFound)),
            (Row::None, true, REVERT, D::Nothing(S::NotFound)),
            // ACTIVE row
            (Row::Active, false, ADD_SAME, D::NoChange),
            (Row::Active, false, ADD_SAME_FORCE, D::Apply { reactivation: false }),
            (Row::Active, false, ADD_NEW, D::Apply { reactivation: false }),
            (Row::Active, true, ADD_SAME, D::NoChange),
            (Row::Active, false, INACT, D::Inactivate { static_tombstone: false }),
            (Row::Active, true, INACT, D::Inactivate { static_tombstone: false }),
            (Row::Active, false, DEL, D::Refuse(S::RequiresInactivateFirst)),
            (Row::Active, true, DEL, D::Refuse(S::RequiresInactivateFirst)),
            (Row::Active, true, REVERT, D::Refuse(S::RequiresInactivateFirst)),
            (Row::Active, false, REVERT, D::Refuse(S::RequiresInactivateFirst)),
            // INACTIVE row: posting the same bytes is a reactivation, not a no-op
            (Row::Inactive, false, ADD_SAME, D::Apply { reactivation: true }),
            (Row::Inactive, true, ADD_NEW, D::Apply { reactivation: true }),
            (Row::Inactive, false, INACT, D::Nothing(S::AlreadyInactive)),
            (Row::Inactive, true, INACT, D::Nothing(S::AlreadyInactive)),
            (Row::Inactive, false, DEL, D::DeleteRow),
            (Row::Inactive, true, DEL, D::Refuse(S::RequiresRevertToBundled)),
            (Row::Inactive, false, REVERT, D::Refuse(S::NoBundledTwin)),
            (Row::Inactive, true, REVERT, D::RevertToBundled),
        ];
        for (row, bundled, op, expected) in table {
            assert_eq!(decide(s(row, bundled), op), expected, "{row:?} bundled={bundled} {op:?}");
        }
    }
}
