//! The byte-level seam for metric series, separate from management records.
//!
//! Series live in their own key space (RocksDB's column family `metrics`): never mixed with rule
//! entries, scanned by key range and expired by delete-range. [`SeriesKv`] is what the metric
//! store needs from it: batched point reads (the read half of a merge), bounded range scans, and
//! atomic, optionally synced, write batches that may carry range deletions. [`MemSeriesKv`] is
//! its in-memory twin, with switchable read and write failures like `MemKv`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::kv_error::{KvError, KvErrorKind, KvPairs};

/// One change inside an atomic series batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeriesOp {
    Put { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
    /// Deletes every key in `[start, end)`.
    DeleteRange { start: Vec<u8>, end: Vec<u8> },
}

/// What a range visitor wants after one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visit {
    Next,
    Stop,
    /// Go on at the first key at or after this one (a target not after the current key means
    /// the next key).
    Seek(Vec<u8>),
}

/// The series key space of the embedded database.
pub trait SeriesKv: Send + Sync + 'static {
    /// The values of `keys`, in the order asked.
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError>;
    /// The pairs with keys in `[start, end)`, in key order, at most `limit` of them.
    fn scan_range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<KvPairs, KvError>;
    /// Calls `visit` with each pair with a key in `[start, end)`, in key order, without copying
    /// it; `visit` says whether to go on, stop or seek ahead (reads that skip most of a range).
    fn visit_range(&self, start: &[u8], end: &[u8], visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit) -> Result<(), KvError>;
    /// Applies `ops` atomically, in order; with `sync`, returns only once they are durable.
    fn write(&self, ops: &[SeriesOp], sync: bool) -> Result<(), KvError>;
}

/// The in-memory twin of the series key space.
#[derive(Default)]
pub struct MemSeriesKv {
    data: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    fail_reads: AtomicBool,
    fail_writes: AtomicBool,
}

impl MemSeriesKv {
    pub fn new() -> MemSeriesKv {
        MemSeriesKv::default()
    }

    /// Makes every later read fail (true) or succeed (false).
    pub fn set_fail_reads(&self, fail: bool) {
        self.fail_reads.store(fail, Ordering::SeqCst);
    }

    /// Makes every later write fail (true) or succeed (false).
    pub fn set_fail_writes(&self, fail: bool) {
        self.fail_writes.store(fail, Ordering::SeqCst);
    }

    /// Overwrites one raw value (tests: corrupting a stored cell).
    pub fn put_raw(&self, key: Vec<u8>, value: Vec<u8>) {
        self.data().insert(key, value);
    }

    /// Every stored pair, in key order (tests).
    pub fn dump(&self) -> KvPairs {
        self.data().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    fn data(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        // A poisoned map is still a consistent map: a batch is applied while the lock is held
        // and none of its steps panics.
        self.data.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_read(&self) -> Result<(), KvError> {
        if self.fail_reads.load(Ordering::SeqCst) {
            return Err(KvError::injected_read("injected read failure (MemSeriesKv)"));
        }
        Ok(())
    }
}

impl SeriesKv for MemSeriesKv {
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.check_read()?;
        let data = self.data();
        Ok(keys.iter().map(|key| data.get(key).cloned()).collect())
    }

    fn scan_range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<KvPairs, KvError> {
        self.check_read()?;
        if start >= end {
            return Ok(Vec::new());
        }
        Ok(self
            .data()
            .range(start.to_vec()..end.to_vec())
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn visit_range(&self, start: &[u8], end: &[u8], visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit) -> Result<(), KvError> {
        self.check_read()?;
        // The lock is held while visiting, like RocksDB's snapshot of one iterator.
        let data = self.data();
        let mut from = start.to_vec();
        'seek: while from.as_slice() < end {
            for (key, value) in data.range(from.clone()..end.to_vec()) {
                match visit(key, value) {
                    Visit::Next => {}
                    Visit::Stop => return Ok(()),
                    Visit::Seek(target) if target > *key => {
                        from = target;
                        continue 'seek;
                    }
                    Visit::Seek(_) => {}
                }
            }
            break;
        }
        Ok(())
    }

    fn write(&self, ops: &[SeriesOp], _sync: bool) -> Result<(), KvError> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(KvError::Write { kind: KvErrorKind::Injected, detail: "injected write failure (MemSeriesKv)".into() });
        }
        let mut data = self.data();
        for op in ops {
            match op {
                SeriesOp::Put { key, value } => {
                    data.insert(key.clone(), value.clone());
                }
                SeriesOp::Delete { key } => {
                    data.remove(key);
                }
                SeriesOp::DeleteRange { start, end } => {
                    if start < end {
                        let doomed: Vec<Vec<u8>> = data.range(start.clone()..end.clone()).map(|(k, _)| k.clone()).collect();
                        for key in doomed {
                            data.remove(&key);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// One column family of a RocksDB database (`metrics` for series, `logs` for kept logs).
#[cfg(feature = "rocksdb")]
pub struct RocksSeries {
    pub(super) db: std::sync::Arc<hotrule_kv_rocksdb::RocksKv>,
    pub(super) cf: &'static str,
}

#[cfg(feature = "rocksdb")]
impl SeriesKv for RocksSeries {
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        self.db
            .multi_get_cf(self.cf, keys)
            .map_err(|e| KvError::Read { kind: super::kv_error::rocks_kind(&e), detail: e.to_string() })
    }

    fn scan_range(&self, start: &[u8], end: &[u8], limit: usize) -> Result<KvPairs, KvError> {
        if start >= end {
            return Ok(Vec::new());
        }
        self.db
            .scan_range_cf(self.cf, start, end, limit)
            .map_err(|e| KvError::Read { kind: super::kv_error::rocks_kind(&e), detail: e.to_string() })
    }

    fn visit_range(&self, start: &[u8], end: &[u8], visit: &mut dyn FnMut(&[u8], &[u8]) -> Visit) -> Result<(), KvError> {
        use hotrule_kv_rocksdb::Step;
        if start >= end {
            return Ok(());
        }
        let mut step = |key: &[u8], value: &[u8]| match visit(key, value) {
            Visit::Next => Step::Next,
            Visit::Stop => Step::Stop,
            Visit::Seek(target) => Step::Seek(target),
        };
        self.db
            .visit_range_cf(self.cf, start, end, &mut step)
            .map_err(|e| KvError::Read { kind: super::kv_error::rocks_kind(&e), detail: e.to_string() })
    }

    fn write(&self, ops: &[SeriesOp], sync: bool) -> Result<(), KvError> {
        use hotrule_kv_rocksdb::BatchOp;
        let ops: Vec<BatchOp> = ops
            .iter()
            .map(|op| match op {
                SeriesOp::Put { key, value } => BatchOp::Put { key: key.clone(), value: value.clone() },
                SeriesOp::Delete { key } => BatchOp::Delete { key: key.clone() },
                SeriesOp::DeleteRange { start, end } => BatchOp::DeleteRange { start: start.clone(), end: end.clone() },
            })
            .collect();
        self.db
            .write_cf(self.cf, &ops, sync)
            .map_err(|e| KvError::Write { kind: super::kv_error::rocks_kind(&e), detail: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twin_scans_half_open_ranges_and_deletes_ranges() {
        let kv = MemSeriesKv::new();
        let ops: Vec<SeriesOp> = (0u8..6).map(|i| SeriesOp::Put { key: vec![i], value: vec![i] }).collect();
        kv.write(&ops, true).expect("write");
        let keys = |pairs: KvPairs| pairs.into_iter().map(|(k, _)| k[0]).collect::<Vec<_>>();
        assert_eq!(keys(kv.scan_range(&[1], &[4], usize::MAX).expect("scan")), vec![1, 2, 3]);
        assert_eq!(keys(kv.scan_range(&[1], &[4], 2).expect("scan")), vec![1, 2]);
        assert!(kv.scan_range(&[4], &[1], usize::MAX).expect("empty range").is_empty());
        kv.write(&[SeriesOp::DeleteRange { start: vec![2], end: vec![5] }], true).expect("delete range");
        assert_eq!(keys(kv.scan_range(&[0], &[9], usize::MAX).expect("scan")), vec![0, 1, 5]);
        assert_eq!(kv.get_many(&[vec![1], vec![3]]).expect("get"), vec![Some(vec![1]), None]);
        let fresh = MemSeriesKv::new();
        fresh.write(&ops, true).expect("write");
        let mut visited = Vec::new();
        fresh
            .visit_range(&[0], &[9], &mut |k, _| {
                visited.push(k[0]);
                match k[0] {
                    0 => Visit::Seek(vec![3]),
                    3 => Visit::Seek(vec![1]),
                    _ => Visit::Stop,
                }
            })
            .expect("visit");
        assert_eq!(visited, vec![0, 3, 4], "seek ahead, a backwards seek is next, stop");
        kv.set_fail_writes(true);
        assert!(kv.write(&[SeriesOp::Delete { key: vec![0] }], true).is_err());
        kv.set_fail_reads(true);
        assert!(kv.get_many(&[vec![0]]).is_err());
    }
}
