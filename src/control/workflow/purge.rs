//! The purge of old tombstones, asked for by the scan: a write of rule entries like any other,
//! so it runs here, in the one writer, under the file's lock.

use super::Workflow;
use crate::base::ids::{Revision, RuleKey};
use crate::control::scan::{PurgeError, PurgeFuture, Purged, TombstonePurger};
use crate::store::{Change, EntryStatus};

impl TombstonePurger for Workflow {
    /// Purges `key` if it is still the tombstone at `revision`. A busy file is not waited for
    /// (the scan asks again next time); a newer write, live or not, is kept.
    fn purge_tombstone<'a>(&'a self, key: &'a RuleKey, revision: &'a Revision) -> PurgeFuture<'a> {
        Box::pin(async move {
            let Some(_guard) = self.locks.try_lock(key) else { return Ok(Purged::Busy) };
            let stored =
                self.store.get_entry(key).await.map_err(|source| PurgeError::Read { key: key.clone(), source })?;
            if !stored.is_some_and(|e| e.status == EntryStatus::Deleted && e.revision == *revision) {
                return Ok(Purged::Moved);
            }
            let change = Change { purge_entries: vec![key.clone()], ..Change::default() };
            self.store.commit(change).await.map_err(|source| PurgeError::Write { key: key.clone(), source })?;
            Ok(Purged::Purged)
        })
    }
}
