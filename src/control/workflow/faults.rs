//! Named failpoints of the on-demand workflow, for fault-injection tests and chaos runs.
//!
//! They exist only in builds with the `failpoints` feature and are set with the `FAILPOINTS`
//! environment variable (`name=return`, `name=return(abort)`, ...) or the debug admin route of
//! such a build. `return(abort)` aborts the process on the spot, as a crash at that step.
//!
//! The workflow runs on the async workers, so it reaches its failpoints through [`held`]: a
//! configured failpoint is evaluated on a blocking thread, and `sleep(ms)` / `pause` hold the
//! operation only. Evaluated in place, the sleep would block a runtime worker with whatever
//! task sits in that worker's LIFO slot (the slot is not stolen by the other workers), and the
//! data path parked there would only run after the hold: what made the end-to-end test miss
//! the samples a held apply should meet suspended.

pub const BEFORE_PERSIST: &str = "workflow::before_persist";
pub const PERSIST: &str = "workflow::persist";
pub const AFTER_PERSIST: &str = "workflow::after_persist";
pub const TEARDOWN: &str = "workflow::teardown";

/// Every failpoint name the workflow and store declare.
pub const ALL: [&str; 5] = [BEFORE_PERSIST, PERSIST, AFTER_PERSIST, TEARDOWN, "store::read"];

/// [`injected`] for async callers: a configured failpoint is evaluated on a blocking thread, so
/// its `sleep`/`pause` never blocks a runtime worker; an unconfigured one costs a look-up of the
/// configured names (failpoints builds only; otherwise this is `injected`, i.e. nothing).
pub async fn held(name: &'static str) -> Option<String> {
    #[cfg(feature = "failpoints")]
    if fail::list().iter().any(|(point, _)| point == name) {
        return match tokio::task::spawn_blocking(move || injected(name)).await {
            Ok(argument) => argument,
            Err(e) => {
                tracing::error!(failpoint = name, error = %e, "failpoint evaluation failed");
                None
            }
        };
    }
    injected(name)
}

/// `Some(argument)` when the failpoint `name` is set to `return(argument)`.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub fn injected(name: &str) -> Option<String> {
    fail::fail_point!(name, |argument: Option<String>| {
        let argument = argument.unwrap_or_default();
        if argument == "abort" {
            tracing::error!(failpoint = name, "failpoint: aborting the process");
            std::process::abort();
        }
        Some(argument)
    });
    None
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// A failpoint name of this test only (the failpoint registry is process-wide).
    const HOLD: &str = "workflow::faults_test_hold";

    /// On a runtime with ONE thread, a task keeps running while a `sleep(..)` failpoint holds an
    /// operation: evaluated in place, the hold would block that thread and the task would only
    /// run after it.
    #[test]
    fn a_held_failpoint_blocks_no_runtime_thread() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        runtime.block_on(async {
            fail::cfg(HOLD, "sleep(300)").expect("failpoint");
            let holding = Arc::new(AtomicBool::new(false));
            let ran_during_hold = Arc::new(AtomicUsize::new(0));
            let ticker = {
                let (holding, ran) = (holding.clone(), ran_during_hold.clone());
                tokio::spawn(async move {
                    // Bounded: 2,000 ticks of 1 ms, or until the hold is over and seen.
                    for _ in 0..2000 {
                        if holding.load(Ordering::SeqCst) {
                            ran.fetch_add(1, Ordering::SeqCst);
                        } else if ran.load(Ordering::SeqCst) > 0 {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                })
            };
            holding.store(true, Ordering::SeqCst);
            let started = Instant::now();
            let argument = super::held(HOLD).await;
            let elapsed = started.elapsed();
            holding.store(false, Ordering::SeqCst);
            fail::remove(HOLD);
            assert_eq!(argument, None, "sleep returns nothing");
            assert!(elapsed >= Duration::from_millis(300), "the operation was held ({elapsed:?})");
            assert!(ran_during_hold.load(Ordering::SeqCst) > 0, "another task ran on the runtime's only thread during the hold");
            ticker.abort();
        });
    }
}
