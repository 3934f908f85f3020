//! The byte-level key-value seam under the store, with its in-memory twin.
//!
//! `KvEngine` is what the typed store facade needs from an embedded database: point reads,
//! prefix scans and atomic, optionally synced, write batches. `RocksEngine` (feature `rocksdb`)
//! is the production engine; `MemKv` is the twin used by in-process tests. It can be told to
//! fail reads or writes, so storage outages are testable without a real disk fault.
//!
//! Every engine also hands out its series key space ([`KvEngine::series`], see `series`): the
//! same database, a separate key space, so the metric store opens from the engine the rule store
//! opens from.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::series::{MemSeriesKv, SeriesKv};

/// One change inside an atomic batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOp {
    Put { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
}

pub use super::kv_error::{KvError, KvErrorKind, KvPairs};
#[cfg(feature = "rocksdb")]
use super::kv_error::rocks_kind;

/// An embedded key-value database.
pub trait KvEngine: Send + Sync + 'static {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;
    /// Every pair whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8]) -> Result<KvPairs, KvError>;
    /// Applies `ops` atomically; with `sync`, returns only once they are durable.
    fn write(&self, ops: &[KvOp], sync: bool) -> Result<(), KvError>;
    /// The metric series key space of the same database.
    fn series(&self) -> Arc<dyn SeriesKv>;
    /// The kept-log key space of the same database (same operations as the series space, its
    /// own column family `logs`).
    fn logs(&self) -> Arc<dyn SeriesKv>;
    /// The alarm-record key space of the same database (its own column family `alarms`).
    fn alarms(&self) -> Arc<dyn SeriesKv>;
}

/// The in-memory twin of the embedded database, with switchable read and write failures.
#[derive(Default)]
pub struct MemKv {
    data: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
    fail_reads: AtomicBool,
    fail_writes: AtomicBool,
    series: Arc<MemSeriesKv>,
    logs: Arc<MemSeriesKv>,
    alarms: Arc<MemSeriesKv>,
}

impl MemKv {
    pub fn new() -> MemKv {
        MemKv::default()
    }

    /// Makes every later read fail (true) or succeed (false).
    pub fn set_fail_reads(&self, fail: bool) {
        self.fail_reads.store(fail, Ordering::SeqCst);
    }

    /// Makes every later write fail (true) or succeed (false).
    pub fn set_fail_writes(&self, fail: bool) {
        self.fail_writes.store(fail, Ordering::SeqCst);
    }

    /// The twin's series key space (shared by every [`KvEngine::series`] of this `MemKv`), to
    /// switch its failures on in tests.
    pub fn series_twin(&self) -> Arc<MemSeriesKv> {
        self.series.clone()
    }

    fn data(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        // A poisoned map is still a consistent map: every write below is a single insert/remove.
        self.data.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_read(&self) -> Result<(), KvError> {
        if self.fail_reads.load(Ordering::SeqCst) {
            return Err(KvError::injected_read("injected read failure (MemKv)"));
        }
        Ok(())
    }
}

impl KvEngine for MemKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.check_read()?;
        Ok(self.data().get(key).cloned())
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<KvPairs, KvError> {
        self.check_read()?;
        Ok(self
            .data()
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn write(&self, ops: &[KvOp], _sync: bool) -> Result<(), KvError> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(KvError::Write { kind: KvErrorKind::Injected, detail: "injected write failure (MemKv)".into() });
        }
        let mut data = self.data();
        for op in ops {
            match op {
                KvOp::Put { key, value } => {
                    data.insert(key.clone(), value.clone());
                }
                KvOp::Delete { key } => {
                    data.remove(key);
                }
            }
        }
        Ok(())
    }

    fn series(&self) -> Arc<dyn SeriesKv> {
        self.series.clone()
    }

    fn logs(&self) -> Arc<dyn SeriesKv> {
        self.logs.clone()
    }

    fn alarms(&self) -> Arc<dyn SeriesKv> {
        self.alarms.clone()
    }
}

/// RocksDB, through the one crate that links it.
#[cfg(feature = "rocksdb")]
pub struct RocksEngine {
    db: Arc<hotrule_kv_rocksdb::RocksKv>,
}

#[cfg(feature = "rocksdb")]
impl RocksEngine {
    pub fn open(path: &std::path::Path) -> Result<RocksEngine, KvError> {
        let db = hotrule_kv_rocksdb::RocksKv::open(path)
            .map_err(|e| KvError::Open { kind: rocks_kind(&e), detail: e.to_string() })?;
        Ok(RocksEngine { db: Arc::new(db) })
    }
}

#[cfg(feature = "rocksdb")]
impl KvEngine for RocksEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.db.get(key).map_err(|e| KvError::Read { kind: rocks_kind(&e), detail: e.to_string() })
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<KvPairs, KvError> {
        self.db.scan_prefix(prefix).map_err(|e| KvError::Read { kind: rocks_kind(&e), detail: e.to_string() })
    }

    fn write(&self, ops: &[KvOp], sync: bool) -> Result<(), KvError> {
        use hotrule_kv_rocksdb::BatchOp;
        let ops: Vec<BatchOp> = ops
            .iter()
            .map(|op| match op {
                KvOp::Put { key, value } => BatchOp::Put { key: key.clone(), value: value.clone() },
                KvOp::Delete { key } => BatchOp::Delete { key: key.clone() },
            })
            .collect();
        self.db.write(&ops, sync).map_err(|e| KvError::Write { kind: rocks_kind(&e), detail: e.to_string() })
    }

    fn series(&self) -> Arc<dyn SeriesKv> {
        Arc::new(super::series::RocksSeries { db: self.db.clone(), cf: hotrule_kv_rocksdb::METRICS_CF })
    }

    fn logs(&self) -> Arc<dyn SeriesKv> {
        Arc::new(super::series::RocksSeries { db: self.db.clone(), cf: hotrule_kv_rocksdb::LOGS_CF })
    }

    fn alarms(&self) -> Arc<dyn SeriesKv> {
        Arc::new(super::series::RocksSeries { db: self.db.clone(), cf: hotrule_kv_rocksdb::ALARMS_CF })
    }
}
