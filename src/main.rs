//! The `hotrule` binary: `serve` runs a node; `rule ...` talks to a node's admin API;
//! `bench ...` runs the benchmarks recorded in docs/benchmarks.md. The commands live in
//! `hotrule::cli`; this file parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc, counting allocations per thread for `hotrule bench mal` (a few instructions per call).
#[global_allocator]
static ALLOCATOR: hotrule::bench::alloc::CountingAlloc = hotrule::bench::alloc::CountingAlloc;

fn main() -> ExitCode {
    hotrule::cli::run(hotrule::cli::Cli::parse())
}
