//! A counting global allocator for `hotrule bench mal`: mimalloc plus per-thread counters of
//! allocations, bytes allocated and live bytes. Only a benchmark build installs it: the `hotrule`
//! binary built with the `bench-alloc` feature (`main.rs`); the production binary allocates with
//! plain mimalloc and these counters stay at zero, which [`counting`] detects so the benchmark
//! says it did not count. The counters are thread-local `Cell`s with constant initializers (no
//! destructor, no allocation, no contention), so the cost is a few instructions per call.
//! Per-thread counts are exact for work done on one thread, which is how the benchmark runs.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;
use std::cell::Cell;

pub struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static ALLOCATED_BYTES: Cell<u64> = const { Cell::new(0) };
    static LIVE_BYTES: Cell<i64> = const { Cell::new(0) };
}

fn note_alloc(size: usize) {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    let _ = ALLOCATED_BYTES.try_with(|c| c.set(c.get() + size as u64));
    let _ = LIVE_BYTES.try_with(|c| c.set(c.get() + size as i64));
}

fn note_free(size: usize) {
    let _ = LIVE_BYTES.try_with(|c| c.set(c.get() - size as i64));
}

// SAFETY: every call is forwarded unchanged to mimalloc; the counters never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on as is.
        let ptr = unsafe { MiMalloc.alloc(layout) };
        if !ptr.is_null() {
            note_alloc(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let ptr = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !ptr.is_null() {
            note_alloc(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { MiMalloc.dealloc(ptr, layout) };
        note_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let new = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            note_free(layout.size());
            note_alloc(new_size);
        }
        new
    }
}

/// This thread's counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AllocSnapshot {
    pub allocations: u64,
    pub allocated_bytes: u64,
    pub live_bytes: i64,
}

impl AllocSnapshot {
    pub fn now() -> AllocSnapshot {
        AllocSnapshot {
            allocations: ALLOCATIONS.try_with(Cell::get).unwrap_or(0),
            allocated_bytes: ALLOCATED_BYTES.try_with(Cell::get).unwrap_or(0),
            live_bytes: LIVE_BYTES.try_with(Cell::get).unwrap_or(0),
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: AllocSnapshot) -> AllocSnapshot {
        AllocSnapshot {
            allocations: self.allocations - earlier.allocations,
            allocated_bytes: self.allocated_bytes - earlier.allocated_bytes,
            live_bytes: self.live_bytes - earlier.live_bytes,
        }
    }
}

/// True when [`CountingAlloc`] is the global allocator of this process (the `hotrule` binary
/// built with the `bench-alloc` feature); false otherwise (the production binary, test
/// binaries), where the counters stay at zero.
pub fn counting() -> bool {
    let before = AllocSnapshot::now();
    let probe = std::hint::black_box(Box::new(0_u64));
    let after = AllocSnapshot::now();
    drop(probe);
    after.allocations > before.allocations
}
