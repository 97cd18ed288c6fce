//! A global allocator that counts the bytes held and the most held at once, for the memory
//! tests (`alloc`, `cache_memory`, `cache_api`): each installs it in its own binary.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicUsize, Ordering},
};

/// The system allocator, counting the bytes held now and the most held since the last reset.
pub(crate) struct Counting;

pub(crate) static HELD: AtomicUsize = AtomicUsize::new(0);
/// The most bytes held at once; a test resets it by storing [`HELD`]'s value.
#[allow(dead_code)] // read by `alloc` only
pub(crate) static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let held = HELD.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(held, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; only counters are added.
#[allow(unsafe_code)] // a counting allocator forwards to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Both blocks exist for a moment when realloc moves: count the new one first.
            grew(new_size);
            HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}
