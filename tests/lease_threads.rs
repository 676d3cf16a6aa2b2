//! A lease's heartbeat thread (PROTOCOL 7.15) is kept for the process's
//! next lease rather than started at each acquire and joined at each
//! release. A file of its own: the test reads the process's threads by
//! name, which another test's leases would add to.

#![cfg(target_os = "linux")]

use swaplock::SoftLock;

/// The thread of a released lease's heartbeat serves the process's next
/// lease: no thread is started and joined at each acquire and release.
#[test]
fn a_released_leases_heartbeat_thread_serves_the_next_lease() {
    /// The threads of this process named as lease heartbeats.
    fn heartbeats() -> Vec<String> {
        let mut found = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let task = task.unwrap();
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.starts_with("filelock-lease") {
                found.push(task.file_name().to_string_lossy().into_owned());
            }
        }
        found.sort();
        found
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.lock");
    let guard = SoftLock::lease(&path).lock().unwrap();
    // A new thread names itself once it runs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let first = loop {
        let found = heartbeats();
        if !found.is_empty() {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no heartbeat thread while held"
        );
        std::thread::yield_now();
    };
    assert_eq!(first.len(), 1, "{first:?}");
    guard.release().unwrap();
    for _ in 0..5 {
        let guard = SoftLock::lease(&path).lock().unwrap();
        assert_eq!(heartbeats(), first, "a new thread beats for the next lease");
        guard.release().unwrap();
    }
}
