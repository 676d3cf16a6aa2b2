use super::*;
use swaplock::etcd::EtcdLock;

/// The lock `--etcd URLS NAME` names.
pub(super) fn lock(opts: &Options) -> EtcdLock {
    let urls = opts.etcd.as_deref().unwrap_or_default();
    let endpoints = urls.split(',').map(str::trim);
    let mut lock = EtcdLock::new(endpoints, opts.rest[0].to_string_lossy());
    if let Some(ttl) = opts.lease {
        lock = lock.lease_ttl(ttl);
    }
    lock
}

impl Acquire for EtcdLock {
    type Guard = swaplock::etcd::EtcdLockGuard;
    fn lock(&self) -> std::io::Result<Self::Guard> {
        EtcdLock::lock(self)
    }
    fn try_lock(&self) -> std::io::Result<Self::Guard> {
        EtcdLock::try_lock(self)
    }
    fn lock_timeout(&self, timeout: Duration) -> std::io::Result<Self::Guard> {
        EtcdLock::lock_timeout(self, timeout)
    }
    /// The hook is called once, when the wait begins.
    fn lock_with(
        &self,
        timeout: Option<Duration>,
        hook: &mut dyn FnMut(Duration) -> std::ops::ControlFlow<()>,
    ) -> std::io::Result<Self::Guard> {
        let began = std::time::Instant::now();
        match self.try_lock() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let _ = hook(Duration::ZERO);
            }
            done => return done,
        }
        match timeout {
            Some(t) => self.lock_timeout(t.saturating_sub(began.elapsed())),
            None => self.lock(),
        }
    }
}

/// `run --etcd`: the lock held by this process, the command
/// supervised as a lease's is.
#[cfg(unix)]
pub(super) fn run(opts: Options) -> i32 {
    super::posix::run_etcd(opts, lock)
}

#[cfg(windows)]
pub(super) fn run(_opts: Options) -> i32 {
    eprintln!("swaplock: run --etcd needs a POSIX system: its supervision stops the command's process group");
    255
}

/// `status --etcd`: the holder's key, lease and create revision.
pub(super) fn status(opts: Options) -> i32 {
    let lock = lock(&opts);
    let holder = match lock.holder() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("swaplock: {e}");
            return 2;
        }
    };
    if opts.json {
        let found = match &holder {
            None => "null".to_owned(),
            Some(h) => format!(
                "{{\"key\":{},\"lease\":{},\"lease_hex\":\"{:x}\",\"create_revision\":{},\"waiting\":{}}}",
                json_string(&h.key),
                h.lease_id,
                h.lease_id,
                h.create_revision,
                h.waiting
            ),
        };
        println!(
            "{{\"name\":{},\"kind\":\"etcd\",\"held\":{},\"holder\":{found}}}",
            json_string(lock.name()),
            holder.is_some()
        );
        return i32::from(holder.is_some());
    }
    match holder {
        None => {
            println!("free");
            0
        }
        Some(h) => {
            println!(
                "held: key {} lease {:x} revision {} waiting {}",
                h.key, h.lease_id, h.create_revision, h.waiting
            );
            1
        }
    }
}
