//! A closed-loop write load shared by `bench cluster` and `bench etcd`: `clients` writers, each
//! sending its next write as soon as the last one is answered, for a fixed time. Both sides are
//! measured by the same code, so their writes/s compare.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What a closed-loop run achieved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    pub clients: usize,
    pub ok: usize,
    pub failed: usize,
    pub elapsed: Duration,
}

impl Throughput {
    pub fn per_second(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    /// One line for the report.
    pub fn line(&self, name: &str) -> String {
        format!(
            "{name}: {:.0} acknowledged writes/s ({} clients, {} ok, {} failed, {:.1} s)",
            self.per_second(),
            self.clients,
            self.ok,
            self.failed,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Runs `clients` writers for `duration`. `write(client, step)` sends one write and says whether
/// it was acknowledged. Bounded in time, and in count (at most 1,000,000 writes per client).
pub async fn closed_loop<F, Fut>(clients: usize, duration: Duration, write: F) -> Throughput
where
    F: Fn(usize, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = bool> + Send,
{
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let (write, ok, failed) = (write.clone(), ok.clone(), failed.clone());
            tokio::spawn(async move {
                for step in 0..1_000_000usize {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let counter = if write(client, step).await { &ok } else { &failed };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
    Throughput {
        clients,
        ok: ok.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_client_writes_until_the_deadline_and_outcomes_are_counted() {
        let run = closed_loop(4, Duration::from_millis(200), |client, step| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            // Client 0 fails every write; the others succeed.
            client != 0 || step == usize::MAX
        })
        .await;
        assert_eq!(run.clients, 4);
        assert!(run.ok > 0 && run.failed > 0, "{run:?}");
        assert!(run.ok >= 2 * run.failed, "three clients succeed for each one that fails: {run:?}");
        assert!(run.elapsed >= Duration::from_millis(200), "{run:?}");
        assert!(run.per_second() > 0.0);
        assert!(run.line("x").starts_with("x: "), "{}", run.line("x"));
    }
}
