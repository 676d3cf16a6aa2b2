use super::etcd_flags::{resolve, Password};
use super::*;
#[cfg(unix)]
use std::io::{BufRead, IsTerminal, Write};
use swaplock::etcd::{EtcdLock, EtcdTls};

/// The lock `--etcd [URLS] NAME` names, with etcdctl's connection
/// settings from the flags and the environment; the password read from
/// where they say. An error is a usage error's message.
pub(super) fn lock(opts: &Options) -> Result<EtcdLock, String> {
    let urls = opts.etcd.as_deref().unwrap_or_default();
    let settings = resolve(urls, &opts.etcd_flags, |var| std::env::var_os(var))?;
    let mut lock = EtcdLock::new(settings.endpoints, opts.rest[0].to_string_lossy());
    if let Some(ttl) = opts.lease {
        lock = lock.lease_ttl(ttl);
    }
    let tls_given = settings.cacert.is_some()
        || settings.cert.is_some()
        || settings.key.is_some()
        || settings.server_name.is_some()
        || settings.insecure;
    if tls_given {
        let mut tls = EtcdTls::new();
        if let Some(ca) = settings.cacert {
            tls = tls.ca(ca);
        }
        match (settings.cert, settings.key) {
            (Some(cert), Some(key)) => tls = tls.client_cert(cert, key),
            (None, None) => {}
            (Some(_), None) => return Err("--cert needs its key (--key)".into()),
            (None, Some(_)) => return Err("--key needs its certificate (--cert)".into()),
        }
        if let Some(name) = settings.server_name {
            tls = tls.server_name(name);
        }
        if settings.insecure {
            eprintln!(
                "swaplock: --insecure-skip-tls-verify: the members' certificates are not \
                 verified; whoever answers at the endpoints can grant this lock to anyone"
            );
            tls = tls.insecure_skip_verify();
        }
        lock = lock.tls(tls);
    }
    if let Some((name, password)) = settings.user {
        let password = match password {
            Password::InArguments(password) => {
                hide(&name, &password);
                password
            }
            Password::InEnvironment(password) => password,
            Password::File(path) => password_file(&path)?,
            Password::Prompt => prompt(&name)?,
        };
        lock = lock.user(name, password);
    }
    Ok(lock)
}

/// Hides the password of `--user NAME:PASSWORD` from this process's
/// command line, as `ps` and `/proc` show it to every user of the host.
fn hide(name: &str, password: &str) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    for argument in [
        format!("{name}:{password}"),
        format!("--user={name}:{password}"),
    ] {
        // SAFETY: the command has one thread while it reads its options.
        let _ = unsafe {
            swaplock::supervise::hide_in_command_line(argument.as_bytes(), password.len())
        };
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (name, password);
}

/// The first line of the file `path`: the password of `--password-file`.
fn password_file(path: &std::ffi::OsStr) -> Result<String, String> {
    let shown = std::path::Path::new(path).display();
    let text =
        std::fs::read(path).map_err(|e| format!("cannot read the password file {shown}: {e}"))?;
    let line = text.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Err(format!(
            "the password file {shown} is empty: its first line is the password"
        ));
    }
    String::from_utf8(line.to_vec())
        .map_err(|_| format!("the password in {shown} is not UTF-8 text"))
}

/// The password of `name`: no prompt where the command has no terminal
/// control.
#[cfg(not(unix))]
fn prompt(name: &str) -> Result<String, String> {
    Err(format!(
        "--user {name} without a password: give it in a file (--password-file), in \
         ETCDCTL_PASSWORD, or as --user NAME:PASSWORD"
    ))
}

/// The password of `name`, asked on the terminal of standard input with
/// echo off, as etcdctl asks it.
#[cfg(unix)]
fn prompt(name: &str) -> Result<String, String> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(format!(
            "--user {name} without a password: standard input is no terminal to ask it on; \
             give it in a file (--password-file), in ETCDCTL_PASSWORD, or as --user NAME:PASSWORD"
        ));
    }
    // Echo off first, which also discards what was typed before (TCSAFLUSH),
    // and only then the prompt: a password typed at the prompt is never
    // thrown away by a flush that comes after it.
    let quiet = swaplock::supervise::quiet_terminal(swaplock::supervise::stdin())
        .map_err(|e| format!("cannot turn the terminal's echo off for the password: {e}"))?;
    eprint!("Password: ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let _ = swaplock::supervise::restore_terminal(swaplock::supervise::stdin(), &quiet);
    eprintln!();
    let typed = line.strip_suffix('\n').unwrap_or(&line);
    // ^C and ^Z arrive as characters while the terminal signals nothing.
    match read {
        Ok(0) => Err("the password prompt ended without a password (end of input)".into()),
        Ok(_) if typed.contains(['\u{3}', '\u{1a}', '\u{4}']) => {
            Err("the password prompt was interrupted".into())
        }
        Ok(_) => Ok(typed.to_owned()),
        Err(e) => Err(format!("cannot read the password: {e}")),
    }
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
    match lock(&opts) {
        Ok(lock) => super::posix::run_etcd(opts, lock),
        Err(why) => usage(Some(Sub::Run), &why),
    }
}

#[cfg(windows)]
pub(super) fn run(_opts: Options) -> i32 {
    eprintln!("swaplock: run --etcd needs a POSIX system: its supervision stops the command's process group");
    255
}

/// `status --etcd`: the holder's key, lease and create revision.
pub(super) fn status(opts: Options) -> i32 {
    let lock = match lock(&opts) {
        Ok(lock) => lock,
        Err(why) => return usage(Some(Sub::Status), &why),
    };
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
