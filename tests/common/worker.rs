//! How a test executable is started again as a worker process: the same
//! binary, told to run only its ignored `worker` test, its output not
//! captured. Shared by the Unix helpers (`common`) and the Windows ones
//! (`workers`).

/// The test-harness arguments that run only the ignored `worker` test.
pub(crate) const WORKER_ARGS: [&str; 6] = [
    "--ignored",
    "--exact",
    "worker",
    "--test-threads=1",
    "-q",
    "--nocapture",
];
