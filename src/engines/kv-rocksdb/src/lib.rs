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
//!
//! Besides the default column family (management records), the database has the column family
//! [`METRICS_CF`] for metric series and [`LOGS_CF`] for kept logs and [`ALARMS_CF`] for alarm records: their own key spaces, range scans and delete-range (retention),
//! never mixed with the default one. A database created before it existed opens unchanged: the
//! missing column family is created on open.

use std::path::Path;

use rocksdb::{ColumnFamily, ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions};

/// RocksDB's classification of an error, carried up to the store's `KvError`.
pub use rocksdb::ErrorKind;

/// One change inside an atomic batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    Put { key: Vec<u8>, value: Vec<u8> },
    Delete { key: Vec<u8> },
    /// Deletes every key in `[start, end)`.
    DeleteRange { start: Vec<u8>, end: Vec<u8> },
}

/// What a range visitor wants after one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Next,
    Stop,
    /// Go on at the first key at or after this one.
    Seek(Vec<u8>),
}

/// The column family of metric series.
pub const METRICS_CF: &str = "metrics";

/// The column family of kept logs.
pub const LOGS_CF: &str = "logs";

/// The column family of alarm records (`alarm_record` and its recoveries).
pub const ALARMS_CF: &str = "alarms";

/// Every column family besides `default`, created on open when missing.
const COLUMN_FAMILIES: [&str; 3] = [METRICS_CF, LOGS_CF, ALARMS_CF];

#[derive(Debug, thiserror::Error)]
pub enum RocksKvError {
    #[error("rocksdb at {path}: {source}")]
    Open { path: String, source: rocksdb::Error },
    #[error("rocksdb read: {0}")]
    Read(rocksdb::Error),
    #[error("rocksdb write: {0}")]
    Write(rocksdb::Error),
    #[error("rocksdb has no column family {0}")]
    NoColumnFamily(String),
}

impl RocksKvError {
    /// RocksDB's classification of the failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RocksKvError::Open { source, .. } | RocksKvError::Read(source) | RocksKvError::Write(source) => source.kind(),
            RocksKvError::NoColumnFamily(_) => ErrorKind::InvalidArgument,
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
        options.create_missing_column_families(true);
        let families = COLUMN_FAMILIES.iter().map(|name| ColumnFamilyDescriptor::new(*name, series_options()));
        let db = DB::open_cf_descriptors(&options, path, families).map_err(|source| RocksKvError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Self { db })
    }

    fn cf(&self, name: &str) -> Result<&ColumnFamily, RocksKvError> {
        self.db.cf_handle(name).ok_or_else(|| RocksKvError::NoColumnFamily(name.to_string()))
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
                BatchOp::DeleteRange { start, end } => batch.delete_range(start, end),
            }
        }
        self.commit(batch, sync)
    }

    fn commit(&self, batch: WriteBatch, sync: bool) -> Result<(), RocksKvError> {
        let mut write_options = WriteOptions::default();
        write_options.set_sync(sync);
        self.db.write_opt(batch, &write_options).map_err(RocksKvError::Write)
    }

    /// Applies `ops` to column family `cf` atomically (one WAL record). With `sync`, returns only
    /// after the WAL is on disk.
    pub fn write_cf(&self, cf: &str, ops: &[BatchOp], sync: bool) -> Result<(), RocksKvError> {
        let handle = self.cf(cf)?;
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                BatchOp::Put { key, value } => batch.put_cf(handle, key, value),
                BatchOp::Delete { key } => batch.delete_cf(handle, key),
                BatchOp::DeleteRange { start, end } => batch.delete_range_cf(handle, start, end),
            }
        }
        self.commit(batch, sync)
    }

    /// The values of `keys` in column family `cf`, in the order asked.
    pub fn multi_get_cf(&self, cf: &str, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, RocksKvError> {
        let handle = self.cf(cf)?;
        self.db
            .multi_get_cf(keys.iter().map(|key| (handle, key.as_slice())))
            .into_iter()
            .map(|value| value.map_err(RocksKvError::Read))
            .collect()
    }

    /// Calls `visit` with each pair of column family `cf` with a key in `[start, end)`, in key
    /// order, without copying them; `visit` says whether to go on, stop, or seek ahead (a seek
    /// that would not move forward goes to the next key instead).
    pub fn visit_range_cf(
        &self,
        cf: &str,
        start: &[u8],
        end: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> Step,
    ) -> Result<(), RocksKvError> {
        let handle = self.cf(cf)?;
        let mut read_options = rocksdb::ReadOptions::default();
        read_options.set_iterate_upper_bound(end.to_vec());
        let mut iter = self.db.raw_iterator_cf_opt(handle, read_options);
        iter.seek(start);
        while iter.valid() {
            let (Some(key), Some(value)) = (iter.key(), iter.value()) else { break };
            if key >= end {
                break;
            }
            match visit(key, value) {
                Step::Next => iter.next(),
                Step::Stop => break,
                Step::Seek(target) if target.as_slice() > key => iter.seek(&target),
                Step::Seek(_) => iter.next(),
            }
        }
        iter.status().map_err(RocksKvError::Read)
    }

    /// The pairs of column family `cf` with keys in `[start, end)`, in key order, at most `limit`.
    pub fn scan_range_cf(
        &self,
        cf: &str,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, RocksKvError> {
        let handle = self.cf(cf)?;
        let mut read_options = rocksdb::ReadOptions::default();
        // The upper bound lets RocksDB skip tombstones and files past the range.
        read_options.set_iterate_upper_bound(end.to_vec());
        let mut out = Vec::new();
        for item in self.db.iterator_cf_opt(handle, read_options, IteratorMode::From(start, Direction::Forward)) {
            if out.len() >= limit {
                break;
            }
            let (key, value) = item.map_err(RocksKvError::Read)?;
            if key.as_ref() >= end {
                break;
            }
            out.push((key.into_vec(), value.into_vec()));
        }
        Ok(out)
    }

    /// Every key/value pair whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, RocksKvError> {
        let mut out = Vec::new();
        let iter = self
            .db
            .iterator(IteratorMode::From(prefix, Direction::Forward));
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

/// Options of the metric series column family: point lookups (the merge reads of a write) get
/// a bloom filter; series values compress well.
fn series_options() -> Options {
    let mut options = Options::default();
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    options.set_block_based_table_factory(&table);
    options.set_compression_type(rocksdb::DBCompressionType::Lz4);
    options
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

    fn fresh_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("hotrule-kv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn put(key: &[u8], value: &[u8]) -> BatchOp {
        BatchOp::Put { key: key.to_vec(), value: value.to_vec() }
    }

    #[test]
    fn metrics_cf_is_its_own_key_space_with_ranges_and_delete_range() {
        let dir = fresh_dir("cf");
        {
            let kv = RocksKv::open(&dir).expect("open");
            kv.write(&[put(b"m/a/1", b"default")], true).expect("default write");
            let ops: Vec<BatchOp> = (0u8..10).map(|i| put(&[b'm', b'/', b'a', b'/', i], &[i])).collect();
            kv.write_cf(METRICS_CF, &ops, true).expect("cf write");
            kv.write_cf(METRICS_CF, &[put(b"m/b/\x00", b"b")], true).expect("cf write");

            // [start, end) exactly: 3 included, 7 excluded.
            let got = kv.scan_range_cf(METRICS_CF, b"m/a/\x03", b"m/a/\x07", usize::MAX).expect("scan");
            assert_eq!(got.iter().map(|(_, v)| v[0]).collect::<Vec<_>>(), vec![3, 4, 5, 6]);
            let mut visited = Vec::new();
            kv.visit_range_cf(METRICS_CF, b"m/a/\x01", b"m/a/\x09", &mut |_, v| {
                visited.push(v[0]);
                match v[0] {
                    1 => Step::Seek(b"m/a/\x04".to_vec()),
                    4 => Step::Seek(b"m/a/\x00".to_vec()), // backwards: the next key instead
                    6 => Step::Stop,
                    _ => Step::Next,
                }
            })
            .expect("visit");
            assert_eq!(visited, vec![1, 4, 5, 6], "seeks ahead and stops when the visitor says so");
            let limited = kv.scan_range_cf(METRICS_CF, b"m/a/", b"m/a0", 2).expect("scan");
            assert_eq!(limited.len(), 2);
            // The default column family does not see series keys, and the other way round.
            assert_eq!(kv.scan_prefix(b"m/a/").expect("scan"), vec![(b"m/a/1".to_vec(), b"default".to_vec())]);
            assert_eq!(kv.multi_get_cf(METRICS_CF, &[b"m/a/1".to_vec()]).expect("get"), vec![None]);

            kv.write_cf(METRICS_CF, &[BatchOp::DeleteRange { start: b"m/a/\x02".to_vec(), end: b"m/a/\x08".to_vec() }], true)
                .expect("delete range");
        }
        let kv = RocksKv::open(&dir).expect("reopen");
        let left = kv.scan_range_cf(METRICS_CF, b"m/", b"m0", usize::MAX).expect("scan");
        let keys: Vec<Vec<u8>> = left.into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            vec![b"m/a/\x00".to_vec(), b"m/a/\x01".to_vec(), b"m/a/\x08".to_vec(), b"m/a/\x09".to_vec(), b"m/b/\x00".to_vec()]
        );
        assert_eq!(
            kv.multi_get_cf(METRICS_CF, &[b"m/a/\x01".to_vec(), b"m/a/\x05".to_vec()]).expect("get"),
            vec![Some(vec![1]), None]
        );
        assert_eq!(kv.get(b"m/a/1").expect("get"), Some(b"default".to_vec()));
        drop(kv);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_database_without_the_metrics_cf_still_opens_with_its_entries() {
        let dir = fresh_dir("legacy");
        {
            // What an older build created: the default column family only.
            let mut options = Options::default();
            options.create_if_missing(true);
            let db = DB::open(&options, &dir).expect("legacy open");
            db.put(b"rule/otel-rules/vm", b"entry").expect("legacy put");
        }
        let kv = RocksKv::open(&dir).expect("open creates the missing column family");
        assert_eq!(kv.get(b"rule/otel-rules/vm").expect("get"), Some(b"entry".to_vec()));
        kv.write_cf(METRICS_CF, &[put(b"k", b"v")], true).expect("cf write");
        assert_eq!(kv.scan_range_cf(METRICS_CF, b"", b"\xff", usize::MAX).expect("scan").len(), 1);
        assert!(matches!(kv.write_cf("nope", &[], true), Err(RocksKvError::NoColumnFamily(_))));
        drop(kv);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
