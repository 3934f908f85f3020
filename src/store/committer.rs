//! Group commit: one thread writes every synced batch of the store.
//!
//! Each [`Change`](super::Change) is encoded by its caller and queued here; the committer thread
//! takes everything queued, writes it as **one** synced engine batch (one WAL append, one fsync)
//! and answers every caller with that batch's result. A change is answered only once the batch
//! holding it is durable, so "synced before `commit` returns" holds for each of them; a batch that
//! fails fails every change in it, and none of them is persisted (an engine batch is atomic).
//!
//! Why not let concurrent callers reach RocksDB and let it group them: its followers wait for the
//! leader by spinning and yielding (`WriteThread::AwaitState`, a few % of every node's CPU under
//! 16 concurrent writers), and each caller had to leave its async worker thread for the write
//! (`block_in_place`, a thread handoff per write). Here a caller only awaits a oneshot; the
//! engine never sees two writers at once.

use std::sync::mpsc;
use std::thread::JoinHandle;

use super::kv::{KvEngine, KvError, KvErrorKind, KvOp};
use std::sync::Arc;

/// At most this many changes go into one batch; the rest wait for the next (bounds a batch's size
/// and the latency of the first change in it).
const MAX_CHANGES_PER_BATCH: usize = 256;

struct Job {
    ops: Vec<KvOp>,
    /// Whether the caller needs the change synced before the answer (see [`Committer::write`]).
    sync: bool,
    done: tokio::sync::oneshot::Sender<Result<(), KvError>>,
}

pub struct Committer {
    jobs_tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Committer {
    /// Starts the committer thread over `kv`.
    pub fn start(kv: Arc<dyn KvEngine>) -> std::io::Result<Committer> {
        let (jobs_tx, jobs_rx) = mpsc::channel();
        let thread = std::thread::Builder::new().name("store-commit".into()).spawn(move || run(kv.as_ref(), &jobs_rx))?;
        Ok(Committer { jobs_tx: Some(jobs_tx), thread: Some(thread) })
    }

    /// Writes `ops` in the next synced batch; returns once that batch is durable (or failed).
    pub async fn write(&self, ops: Vec<KvOp>) -> Result<(), KvError> {
        self.write_with(ops, true).await
    }

    /// Writes `ops` in the next batch; with `sync` false the batch is synced only if another
    /// change in it asks for it (the caller keeps a durable copy elsewhere: a staged entry).
    pub async fn write_with(&self, ops: Vec<KvOp>, sync: bool) -> Result<(), KvError> {
        let (done, answer) = tokio::sync::oneshot::channel();
        let stopped = || KvError::Write { kind: KvErrorKind::ShutdownInProgress, detail: "the store's committer stopped".into() };
        let jobs_tx = self.jobs_tx.as_ref().ok_or_else(stopped)?;
        jobs_tx.send(Job { ops, sync, done }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl Drop for Committer {
    /// Stops the thread once the queue is empty and waits for it, so the engine is released when
    /// the store is (a node reopening its data dir must not find it still held).
    fn drop(&mut self) {
        drop(self.jobs_tx.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the store's committer thread panicked");
        }
    }
}

fn run(kv: &dyn KvEngine, jobs_rx: &mpsc::Receiver<Job>) {
    while let Ok(first) = jobs_rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_CHANGES_PER_BATCH {
            match jobs_rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let sync = jobs.iter().any(|job| job.sync);
        let result = match jobs.as_slice() {
            [only] => kv.write(&only.ops, sync),
            _ => {
                let ops: Vec<KvOp> = jobs.iter().flat_map(|job| job.ops.iter().cloned()).collect();
                kv.write(&ops, sync)
            }
        };
        for job in jobs {
            // A caller that stopped waiting (its request was dropped) needs no answer.
            let _ = job.done.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::kv::MemKv;

    fn put(key: &str) -> KvOp {
        KvOp::Put { key: key.as_bytes().to_vec(), value: b"v".to_vec() }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_changes_are_each_durable_when_answered_and_a_failed_batch_fails_them_all() {
        let kv = Arc::new(MemKv::new());
        let committer = Arc::new(Committer::start(kv.clone()).expect("start"));
        let writes: Vec<_> = (0..32)
            .map(|n| {
                let committer = committer.clone();
                let kv = kv.clone();
                tokio::spawn(async move {
                    committer.write(vec![put(&format!("k{n}"))]).await.expect("written");
                    // Answered only once it is in the engine.
                    kv.get(format!("k{n}").as_bytes()).expect("read").is_some()
                })
            })
            .collect();
        for write in writes {
            assert!(write.await.expect("task"), "a change answered before it was written");
        }
        kv.set_fail_writes(true);
        let failed = committer.write(vec![put("x")]).await.expect_err("the engine refuses");
        assert_eq!(failed.kind(), KvErrorKind::Injected);
        kv.set_fail_writes(false);
        assert!(kv.get(b"x").expect("read").is_none(), "a failed batch persists nothing");
    }

    #[test]
    fn dropping_the_committer_releases_the_engine() {
        let kv: Arc<dyn KvEngine> = Arc::new(MemKv::new());
        let committer = Committer::start(kv.clone()).expect("start");
        assert_eq!(Arc::strong_count(&kv), 2);
        drop(committer);
        assert_eq!(Arc::strong_count(&kv), 1, "the thread gave its handle back");
    }
}
