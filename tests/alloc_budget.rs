//! Locking and unlocking allocate nothing once the lock object is built:
//! kernel locks, and uncontended soft locks of the `Soft` and `Marker`
//! kinds (a lease starts a heartbeat thread).

#![cfg(any(target_os = "linux", target_os = "android"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use swaplock::soft::SoftLock;
use swaplock::FileLock;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn lock_and_unlock_do_not_allocate() {
    let dir = tempfile::tempdir().unwrap();
    for lock in [
        FileLock::new(dir.path().join("a.lock")),
        FileLock::flock(dir.path().join("b.lock")),
    ] {
        // Warm up: the first call creates the file.
        drop(lock.lock().unwrap());
        assert_eq!(
            allocations_in(|| drop(lock.lock().unwrap())),
            0,
            "lock + drop"
        );
        assert_eq!(
            allocations_in(|| lock.try_lock().unwrap().release().unwrap()),
            0,
            "try_lock + unlock"
        );
        let timeout = std::time::Duration::from_secs(1);
        assert_eq!(
            allocations_in(|| drop(lock.lock_timeout(timeout).unwrap())),
            0,
            "lock_timeout"
        );
        // The counter does count: building a lock object allocates.
        assert!(allocations_in(|| drop(FileLock::new(dir.path().join("c.lock")))) > 0);
    }
}

#[test]
fn uncontended_soft_locks_do_not_allocate() {
    let dir = tempfile::tempdir().unwrap();
    for lock in [
        SoftLock::soft(dir.path().join("s.lock")),
        SoftLock::marker(dir.path().join("m.lock")),
    ] {
        // Warm up: the boot id is read once per process.
        drop(lock.lock().unwrap());
        assert_eq!(
            allocations_in(|| drop(lock.lock().unwrap())),
            0,
            "lock + drop"
        );
        assert_eq!(
            allocations_in(|| lock.try_lock().unwrap().release().unwrap()),
            0,
            "try_lock + release"
        );
        assert!(!lock.path().exists());
    }
}
