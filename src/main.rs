//! The `hotrule` binary: `serve` runs a node; `rule ...` talks to a node's admin API;
//! `bench ...` runs the benchmarks recorded in docs/benchmarks.md. The commands live in
//! `hotrule::cli`; this file parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc: glibc's malloc took about a tenth of a node's CPU under concurrent writes and
/// ingest (docs/benchmarks.md, "where the CPU went").
#[cfg(not(feature = "bench-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc under per-thread allocation counters, for `hotrule bench mal`'s allocations per
/// sample: benchmark builds only (`--features bench-alloc`), never the production binary.
#[cfg(feature = "bench-alloc")]
#[global_allocator]
static ALLOCATOR: hotrule::bench::alloc::CountingAlloc = hotrule::bench::alloc::CountingAlloc;

/// `mi_option_purge_delay` in mimalloc's `mimalloc.h` (v3, the version `libmimalloc-sys` builds).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
/// mimalloc's default for it, in milliseconds.
const MI_DEFAULT_PURGE_DELAY: std::ffi::c_long = 1_000;

unsafe extern "C" {
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Freed memory goes back to the OS after 10 s unused instead of mimalloc's 1 s. Under a steady
/// log load the shorter delay returned pages that the next batches faulted in again: about half
/// a node's page faults in `hotrule bench lal-node`, and the kernel's page zeroing was a tenth of
/// the LAL threads' CPU. `MIMALLOC_PURGE_DELAY` in the environment still decides; the option is
/// left alone unless it holds the documented default (a check that the index is the one meant).
fn tune_allocator() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: both functions take and return plain integers and may be called at any time from
    // any thread; mimalloc is linked through the `mimalloc` crate (the global allocator).
    unsafe {
        if mi_option_get(MI_OPTION_PURGE_DELAY) == MI_DEFAULT_PURGE_DELAY {
            mi_option_set(MI_OPTION_PURGE_DELAY, 10_000);
        }
    }
}

fn main() -> ExitCode {
    tune_allocator();
    hotrule::cli::run(hotrule::cli::Cli::parse())
}
