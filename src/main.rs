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

fn main() -> ExitCode {
    hotrule::cli::run(hotrule::cli::Cli::parse())
}
