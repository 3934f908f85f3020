//! Rule history (issue 26): the pure parts. Every committed revision of a replicated entry (rule
//! files, agent desired state, alarm settings, dashboard templates) is kept as a history record
//! beside the entry, written by the workflow in the entry's own batch and replicated like the
//! entries (`cluster::replication::history`). This room decides, without IO:
//! - who made a write ([`Caller`], carried from the admin port that took it to the main);
//! - which records retention compacts ([`retention`]);
//! - the unified diff between two revisions ([`diff`]).
//!
//! The caller travels as a task-local: the admin API scopes it around a request (and the main
//! around a forwarded one), and the workflow reads it when it builds the record. Passing it
//! through every workflow operation's signature would touch every caller of the workflow for a
//! value only the record needs.

pub mod diff;
pub mod retention;

use serde::{Deserialize, Serialize};

use crate::base::ids::{NodeId, Revision};

/// Who asked for a write, as the node that took the request saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// The node whose admin port took the request (the main itself, or the node that forwarded it).
    pub taken_by: Option<NodeId>,
    /// The client's address (`ip:port`) as that node saw it.
    pub client: Option<String>,
    /// A fingerprint of the admin token the request presented (the first 8 hex digits of its
    /// SHA-256): which token, when it was replaced by a reload, without storing the secret. None
    /// when the node requires no token.
    pub token: Option<String>,
    /// Set when the write is a restore: the revision it restores.
    pub restore_of: Option<Revision>,
}

tokio::task_local! {
    static CALLER: Caller;
}

/// The caller of the write being run on this task, if the request scoped one.
pub fn current_caller() -> Option<Caller> {
    CALLER.try_with(Caller::clone).ok()
}

/// Runs `work` with `caller` as the caller of every write it makes.
pub async fn with_caller<F: std::future::Future>(caller: Caller, work: F) -> F::Output {
    CALLER.scope(caller, work).await
}

/// Where a requested revision stands among the revisions a key's history keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    Kept,
    /// Older than the oldest kept revision: retention removed it (or it predates history).
    Compacted { oldest: Revision },
    /// Within the kept range, but the key never had it.
    Unknown { oldest: Revision },
    /// The key has no history at all.
    NoHistory,
}

/// Locates `wanted` among `kept` (a key's kept revisions, any order).
pub fn locate(kept: &[Revision], wanted: &Revision) -> Located {
    let Some(oldest) = kept.iter().min().cloned() else { return Located::NoHistory };
    if kept.contains(wanted) {
        Located::Kept
    } else if *wanted < oldest {
        Located::Compacted { oldest }
    } else {
        Located::Unknown { oldest }
    }
}

/// The fingerprint of a token as history records it.
pub fn token_fingerprint(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes())[..4].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_caller_is_seen_inside_its_scope_only() {
        assert_eq!(current_caller(), None);
        let caller = Caller { client: Some("127.0.0.1:5".into()), ..Caller::default() };
        let seen = with_caller(caller.clone(), async { current_caller() }).await;
        assert_eq!(seen, Some(caller));
        assert_eq!(current_caller(), None);
    }

    #[test]
    fn a_revision_is_kept_compacted_unknown_or_the_key_has_no_history() {
        let rev = |millis| Revision { millis, counter: 0, node: NodeId("m".into()) };
        let kept = [rev(30), rev(10), rev(20)];
        assert_eq!(locate(&kept, &rev(20)), Located::Kept);
        assert_eq!(locate(&kept, &rev(5)), Located::Compacted { oldest: rev(10) });
        assert_eq!(locate(&kept, &rev(15)), Located::Unknown { oldest: rev(10) });
        assert_eq!(locate(&kept, &rev(99)), Located::Unknown { oldest: rev(10) });
        assert_eq!(locate(&[], &rev(1)), Located::NoHistory);
    }

    #[test]
    fn a_fingerprint_is_short_stable_and_not_the_token() {
        assert_eq!(token_fingerprint("s3cret").len(), 8);
        assert_eq!(token_fingerprint("s3cret"), token_fingerprint("s3cret"));
        assert_ne!(token_fingerprint("s3cret"), token_fingerprint("other"));
    }
}
