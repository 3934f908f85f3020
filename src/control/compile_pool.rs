//! Compiling off the async threads: the workflow and the scan compile rule files (a boot scan
//! compiles every stored and bundled file; an operator may post a 1 MB file), which is CPU work
//! that must not hold an async worker, and with it `/healthz` and every other request. Both go
//! through here, bounded to one compile per CPU at a time; a small file (at most
//! [`INLINE_COMPILE_MAX_BYTES`]) compiles in place, which is cheaper than the hop. The compile
//! itself is the pure `rules::compile`.

use crate::compiler::{CompileError, Compiled};
use crate::base::ids::RuleKey;
use crate::control::rules::compile::{compile_for, compile_new_for};

/// Compiles at most this many files at once off the async threads (at least 1; the number of
/// CPUs): more would only queue in the blocking pool while holding their contents.
fn compile_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        tokio::sync::Semaphore::new(std::thread::available_parallelism().map(usize::from).unwrap_or(1))
    })
}

/// [`compile_for`] on the blocking pool, bounded by [`compile_slots`]: parsing and compiling a
/// large file is CPU work that must not hold an async worker (and with it `/healthz` and every
/// other request). A small file compiles in place ([`INLINE_COMPILE_MAX_BYTES`]). A compiler
/// panic is a compile failure, not a lost task.
pub async fn compile_off_thread(key: &RuleKey, content: &[u8]) -> Result<Compiled, CompileError> {
    on_blocking_pool(key, content, compile_for).await
}

/// [`compile_new_for`] on the blocking pool, like [`compile_off_thread`].
pub async fn compile_new_off_thread(key: &RuleKey, content: &[u8]) -> Result<Compiled, CompileError> {
    on_blocking_pool(key, content, compile_new_for).await
}

type CompileFn = fn(&RuleKey, &[u8]) -> Result<Compiled, CompileError>;

/// Content up to this size compiles in place on the async thread: the compiler takes about 20 µs
/// per KiB (the 98-file corpus, 414 KB, compiles in about 20 ms), so a 2 KiB file takes about
/// 40 µs, while the hop to the blocking pool and back costs about 90 µs of wakeups and context
/// switches on a 2-vCPU machine (measured per write, `hotrule::timing`). Larger files go to the
/// pool, so no compile holds an async worker for long.
pub const INLINE_COMPILE_MAX_BYTES: usize = 2 * 1024;

async fn on_blocking_pool(key: &RuleKey, content: &[u8], compile: CompileFn) -> Result<Compiled, CompileError> {
    let failed = |message: String| CompileError { line: 0, column: 0, message };
    if content.len() <= INLINE_COMPILE_MAX_BYTES {
        return std::panic::catch_unwind(|| compile(key, content))
            .unwrap_or_else(|_| Err(failed("the compiler failed: it panicked".to_string())));
    }
    let _slot = compile_slots().acquire().await.map_err(|e| failed(format!("compile slots closed: {e}")))?;
    let (key, content) = (key.clone(), content.to_vec());
    match tokio::task::spawn_blocking(move || compile(&key, &content)).await {
        Ok(result) => result,
        Err(join_error) => Err(failed(format!("the compiler failed: {join_error}"))),
    }
}
