//! The only crate in hotrule that links RocksDB.
//!
//! It offers a byte-level key-value engine and nothing else: no hotrule types, no key layout,
//! no encoding. The typed store facade (`hotrule::store`) sits on top of it through the
//! `KvEngine` trait, which also has an in-memory twin, so everything above storage builds and
//! tests without compiling RocksDB's C++.
//!
//! Writes go in one atomic `WriteBatch` (one WAL record). With `sync = true` the WAL is fsynced
//! before `write` returns; RocksDB group-commits concurrent synced writers, so callers that
//! write from several threads share fsyncs.

use std::path::Path;

use rocksdb::{DB, IteratorMode, Options, WriteBatch, WriteOptions};

/// RocksDB's classification of an error, carried up to the store's `KvError`.
pub use rocksdb::ErrorKind;

/// One change inside an atomic batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    Put { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
}

#[derive(Debug, thiserror::Error)]
pub enum RocksKvError {
    #[error("rocksdb at {path}: {source}")]
    Open { path: String, source: rocksdb::Error },
    #[error("rocksdb read: {0}")]
    Read(rocksdb::Error),
    #[error("rocksdb write: {0}")]
    Write(rocksdb::Error),
}

impl RocksKvError {
    /// RocksDB's classification of the failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RocksKvError::Open { source, .. } | RocksKvError::Read(source) | RocksKvError::Write(source) => source.kind(),
        }
    }
}

/// A RocksDB database opened on one directory.
pub struct RocksKv {
    db: DB,
}

impl RocksKv {
    /// Opens (creating if needed) the database in `path`.
    pub fn open(path: &Path) -> Result<Self, RocksKvError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        // Management data is small; keep memory modest and the WAL the source of durability.
        options.set_keep_log_file_num(4);
        options.set_max_total_wal_size(64 << 20);
        let db = DB::open(&options, path).map_err(|source| RocksKvError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self { db })
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, RocksKvError> {
        self.db.get(key).map_err(RocksKvError::Read)
    }

    /// Applies `ops` atomically. With `sync`, returns only after the WAL is on disk.
    pub fn write(&self, ops: &[BatchOp], sync: bool) -> Result<(), RocksKvError> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                BatchOp::Put { key, value } => batch.put(key, value),
                BatchOp::Delete { key } => batch.delete(key),
            }
        }
        let mut write_options = WriteOptions::default();
        write_options.set_sync(sync);
        self.db.write_opt(batch, &write_options).map_err(RocksKvError::Write)
    }

    /// Every key/value pair whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, RocksKvError> {
        let mut out = Vec::new();
        let iter = self
            .db
            .iterator(IteratorMode::From(prefix, rocksdb::Direction::Forward));
        for item in iter {
            let (key, value) = item.map_err(RocksKvError::Read)?;
            if !key.starts_with(prefix) {
                break;
            }
            out.push((key.into_vec(), value.into_vec()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_put_get_scan_delete_survive_reopen() {
        let dir = std::env::temp_dir().join(format!("hotrule-kv-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let kv = RocksKv::open(&dir).expect("open");
            kv.write(
                &[
                    BatchOp::Put { key: b"a/1".to_vec(), value: b"one".to_vec() },
                    BatchOp::Put { key: b"a/2".to_vec(), value: b"two".to_vec() },
                    BatchOp::Put { key: b"b/1".to_vec(), value: b"other".to_vec() },
                ],
                true,
            )
            .expect("write");
            kv.write(&[BatchOp::Delete { key: b"a/1".to_vec() }], true).expect("delete");
        }
        let kv = RocksKv::open(&dir).expect("reopen");
        assert_eq!(kv.get(b"a/1").expect("get"), None);
        assert_eq!(kv.get(b"a/2").expect("get"), Some(b"two".to_vec()));
        let scanned = kv.scan_prefix(b"a/").expect("scan");
        assert_eq!(scanned, vec![(b"a/2".to_vec(), b"two".to_vec())]);
        drop(kv);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
