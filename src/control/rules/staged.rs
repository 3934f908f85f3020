//! What becomes of a staged entry (prepare/commit, docs/consistency.md): the pure decisions of
//! both sides.
//!
//! - [`fate`]: the node that prepared a write answers what became of it, from its own store
//!   and its file lock: committed (it holds the revision or a later one), pending (the write is
//!   still running: its lock is held) or not committed (neither: the persist failed, or the node
//!   restarted before it).
//! - [`resolve`]: a peer holding a staged record that no commit or abort reached decides what
//!   to do with it. The sender's answer decides whenever it is reachable. When it is not, and it
//!   is no longer the main (it died or was cut off and another node took over), the record is
//!   applied: it may stand for an acknowledged write, which must survive the loss of the main,
//!   while a write answered `persist_failed` left no staged record behind (the main answers it
//!   only once every peer it prepared confirmed the abort).

use serde::{Deserialize, Serialize};

/// What became of a prepared write, as the node that prepared it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fate {
    Committed,
    Pending,
    NotCommitted,
}

/// The preparing node's answer: `holds` its store holds the key at the staged revision or a
/// later one; `writing` the key's file lock is taken (a write of it is running).
pub fn fate(holds: bool, writing: bool) -> Fate {
    match (holds, writing) {
        (true, _) => Fate::Committed,
        (false, true) => Fate::Pending,
        (false, false) => Fate::NotCommitted,
    }
}

/// What the peer learned from the sender, when it asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderAnswer {
    Answered(Fate),
    /// No answer (down, cut off, or not a member any more).
    Unreachable,
}

/// Everything the resolution of one staged record looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedFacts {
    /// This node already stores the key at the staged revision or later (the commit came another
    /// way, or a later write replaced it).
    pub held: bool,
    /// The record is older than the main's wait for confirmations: its commit or abort should
    /// have arrived by now.
    pub overdue: bool,
    /// The sender's answer; `None` until it was asked.
    pub sender: Option<SenderAnswer>,
    /// The sender is still the main in this node's view.
    pub sender_is_main: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Write the staged entry through the replicated-write path (last-write-wins applies).
    Apply,
    /// Remove the staged record.
    Discard,
    /// Ask the sender what became of the write.
    AskSender,
    /// Leave it for the next round.
    Wait,
}

pub fn resolve(facts: StagedFacts) -> Resolution {
    match facts {
        StagedFacts { held: true, .. } => Resolution::Discard,
        StagedFacts { overdue: false, .. } => Resolution::Wait,
        StagedFacts { sender: None, .. } => Resolution::AskSender,
        StagedFacts { sender: Some(SenderAnswer::Answered(Fate::Committed)), .. } => Resolution::Apply,
        StagedFacts { sender: Some(SenderAnswer::Answered(Fate::NotCommitted)), .. } => Resolution::Discard,
        StagedFacts { sender: Some(SenderAnswer::Answered(Fate::Pending)), .. } => Resolution::Wait,
        StagedFacts { sender: Some(SenderAnswer::Unreachable), sender_is_main: true, .. } => Resolution::Wait,
        StagedFacts { sender: Some(SenderAnswer::Unreachable), sender_is_main: false, .. } => Resolution::Apply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sender_answers_from_its_store_and_its_lock() {
        let cases = [
            (true, true, Fate::Committed),
            (true, false, Fate::Committed),
            (false, true, Fate::Pending),
            (false, false, Fate::NotCommitted),
        ];
        for (holds, writing, expected) in cases {
            assert_eq!(fate(holds, writing), expected, "holds {holds}, writing {writing}");
        }
    }

    #[test]
    fn a_staged_record_is_resolved_by_the_sender_or_applied_once_the_sender_is_gone() {
        use Resolution::*;
        use SenderAnswer::*;
        let committed = Some(Answered(Fate::Committed));
        let pending = Some(Answered(Fate::Pending));
        let not_committed = Some(Answered(Fate::NotCommitted));
        let gone = Some(Unreachable);
        // (held, overdue, sender's answer, sender still main) → resolution
        let cases = [
            // Held already: the record is spent, whatever else holds.
            (true, false, None, true, Discard),
            (true, true, gone, false, Discard),
            (true, true, not_committed, true, Discard),
            // Not overdue: its commit or abort is probably on its way.
            (false, false, None, true, Wait),
            (false, false, gone, false, Wait),
            (false, false, committed, true, Wait),
            // Overdue: ask, then follow the answer.
            (false, true, None, true, AskSender),
            (false, true, None, false, AskSender),
            (false, true, committed, true, Apply),
            (false, true, committed, false, Apply),
            (false, true, not_committed, true, Discard),
            (false, true, not_committed, false, Discard),
            (false, true, pending, true, Wait),
            (false, true, pending, false, Wait),
            // No answer: wait for a main that may come back; apply once another took over.
            (false, true, gone, true, Wait),
            (false, true, gone, false, Apply),
        ];
        for (held, overdue, sender, sender_is_main, expected) in cases {
            let facts = StagedFacts { held, overdue, sender, sender_is_main };
            assert_eq!(resolve(facts), expected, "{facts:?}");
        }
    }
}
