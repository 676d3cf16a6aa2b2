//! Two "hosts" over one network filesystem, on loopback: a private SFTP
//! server (sshd) or SMB server (smbd) exports a directory, and each host
//! is a process in its own mount, UTS and PID namespaces (its own host
//! name, its own client mount and cache: sshfs, or smbnetfs for SMB) that
//! runs a command over that mount. The mounts die with their namespaces;
//! the servers are killed and reaped by PID when dropped.
//!
//! Also the session worker the tests drive on each host: one line in, one
//! line out (`netfs: ...`), each a system call on a file of the export.

use super::worker::WORKER_ARGS;
use super::{free_port, open_rw};
use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// How long a server or a mount gets to come up.
const START: Duration = Duration::from_secs(20);

/// The file each server's export holds from the start: a host runs its
/// command once it sees it through its mount.
const READY: &str = ".netfs-ready";

/// Polls `done` until it holds, failing with `what` after `limit`.
pub use super::poll_until as poll;

/// `program` on `PATH` or at its path, or a panic naming the setup script.
fn require(program: &str) -> PathBuf {
    let found = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| p.exists())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.exists())
        })
    };
    found.unwrap_or_else(|| panic!("{program} is missing: run scripts/setup"))
}

/// Waits until `server` accepts on `port`, failing if it exits first.
fn wait_listening(server: &mut Child, port: u16, log: &Path) {
    poll(START, "the server listening", || {
        if let Some(status) = server.try_wait().unwrap() {
            panic!(
                "the server exited ({status}): {}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// A file the test's servers write their output to.
fn log_file(path: &Path) -> Stdio {
    File::create(path).unwrap().into()
}

/// Single-quotes `text` for `sh`.
fn quote(text: &Path) -> String {
    format!("'{}'", text.to_str().unwrap().replace('\'', r"'\''"))
}

/// The client caches of an sshfs mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caches {
    /// `dir_cache=no,attr_timeout=0,entry_timeout=0,negative_timeout=0`:
    /// every lookup and stat asks the server.
    Off,
    /// sshfs's defaults (another mount's change shows after seconds).
    Default,
}

/// One host: how to run a command in its own namespaces over its own
/// client mount of the export.
pub struct Host {
    name: String,
    /// The shell lines that mount the export (run inside the namespaces).
    mount: String,
    /// Where the export's files appear through the mount.
    root: PathBuf,
    /// The mount's own files (its mount point, smbnetfs's home).
    _dir: tempfile::TempDir,
}

impl Host {
    /// The host's name (its `hostname` inside its namespace).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the export's files appear on this host: a path valid only in
    /// the processes [`Host::command`] starts.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `program ARGS...` (the caller adds the arguments) run on this host:
    /// in new mount, UTS and PID namespaces, with the host name set and
    /// the export mounted, once the export's ready file shows through the
    /// mount. The mount, and every process of the host, end when `program`
    /// does (it is the namespace's init).
    pub fn command(&self, program: &Path) -> Command {
        let script = format!(
            "set -e\nhostname {name}\n{mount}\ni=0\nuntil [ -e {ready} ]; do\n  \
             i=$((i+1)); if [ $i -gt 400 ]; then echo 'the mount never showed the export' >&2; \
             exit 97; fi; sleep 0.05\ndone\nexec \"$@\"",
            name = self.name,
            mount = self.mount,
            ready = quote(&self.root.join(READY)),
        );
        let mut cmd = Command::new(require("unshare"));
        cmd.args([
            "--mount",
            "--uts",
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .arg(program);
        cmd
    }

    /// A [`Session`] on this host: `worker` (a test executable) run as the
    /// session worker, which `serve` answers.
    pub fn session(&self, worker: &Path, spec_var: &str) -> Session {
        let mut cmd = self.command(worker);
        cmd.args(WORKER_ARGS)
            .env(spec_var, format!("session\u{1f}{}", self.root.display()));
        Session::start(cmd)
    }
}

/// A private sshd on 127.0.0.1 exporting a directory over SFTP.
pub struct Sftp {
    sshd: Child,
    port: u16,
    export: PathBuf,
    config: PathBuf,
    dir: tempfile::TempDir,
}

impl Sftp {
    /// Starts the server and waits until it accepts connections.
    pub fn start() -> Sftp {
        let sshd = require("/usr/sbin/sshd");
        let keygen = require("ssh-keygen");
        require("sshfs");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for key in ["host_key", "client_key"] {
            let status = Command::new(&keygen)
                .args([
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    "swaplock-netfs",
                    "-f",
                ])
                .arg(d.join(key))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "ssh-keygen: {status}");
        }
        fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        let export = d.join("export");
        fs::create_dir(&export).unwrap();
        File::create(export.join(READY)).unwrap();
        let port = free_port();
        let conf = d.join("sshd_config");
        fs::write(
            &conf,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile {}\n\
                 AuthorizedKeysFile {}\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nSubsystem sftp internal-sftp\n",
                d.join("host_key").display(),
                d.join("sshd.pid").display(),
                d.join("authorized_keys").display(),
            ),
        )
        .unwrap();
        let config = d.join("ssh_config");
        fs::write(
            &config,
            format!(
                "Host lab\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {}\n  \
                 IdentitiesOnly yes\n  BatchMode yes\n  StrictHostKeyChecking no\n  \
                 UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
                d.join("client_key").display(),
            ),
        )
        .unwrap();
        // sshd refuses to start without its privilege separation directory.
        fs::create_dir_all("/run/sshd").unwrap();
        let log = d.join("sshd.log");
        let mut sshd = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log_file(&log))
            .stderr(log_file(&d.join("sshd.stderr")))
            .spawn()
            .unwrap();
        wait_listening(&mut sshd, port, &d.join("sshd.stderr"));
        Sftp {
            sshd,
            port,
            export,
            config,
            dir,
        }
    }

    /// The exported directory, on this machine's disk.
    pub fn export(&self) -> &Path {
        &self.export
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A host named `name` that mounts the export with sshfs.
    pub fn host(&self, name: &str, caches: Caches) -> Host {
        let dir = tempfile::tempdir_in(self.dir.path()).unwrap();
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        let options = match caches {
            Caches::Off => " -o dir_cache=no,attr_timeout=0,entry_timeout=0,negative_timeout=0",
            Caches::Default => "",
        };
        Host {
            name: name.into(),
            mount: format!(
                "{} -F {} lab:{} {}{options}",
                require("sshfs").display(),
                quote(&self.config),
                quote(&self.export),
                quote(&mnt),
            ),
            root: mnt,
            _dir: dir,
        }
    }
}

impl Drop for Sftp {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}

/// The SMB user and password the tests' smbd knows.
const SMB_USER: &str = "root";
const SMB_PASS: &str = "swaplock-netfs";
/// The share's name.
const SHARE: &str = "lab";

/// A private smbd on 127.0.0.1:445 exporting a directory as a share. Only
/// one can listen on port 445 at a time: every `Smb` of every test process
/// holds an exclusive `flock` on one file in the temporary directory while
/// it lives.
pub struct Smb {
    smbd: Child,
    export: PathBuf,
    dir: tempfile::TempDir,
    /// The lock that serialises the users of port 445 (dropped last).
    _port: File,
}

impl Smb {
    /// Waits for port 445, starts the server and waits until it accepts.
    pub fn start() -> Smb {
        let smbd = require("/usr/sbin/smbd");
        let smbpasswd = require("smbpasswd");
        require("smbnetfs");
        let port = open_rw(&std::env::temp_dir().join("swaplock-netfs-smb-port.lock"));
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        let r = unsafe { libc::flock(port.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(r, 0, "flock: {}", std::io::Error::last_os_error());
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["pid", "lock", "state", "cache", "private", "log", "export"] {
            fs::create_dir(d.join(sub)).unwrap();
        }
        let export = d.join("export");
        // The share is written by the SMB user (root) only; the mode lets
        // smbnetfs show it as it is.
        fs::set_permissions(&export, fs::Permissions::from_mode(0o777)).unwrap();
        File::create(export.join(READY)).unwrap();
        let conf = d.join("smb.conf");
        let at = |sub: &str| d.join(sub).display().to_string();
        fs::write(
            &conf,
            format!(
                "[global]\n  server role = standalone server\n  interfaces = 127.0.0.1\n  \
                 bind interfaces only = yes\n  smb ports = 445\n  disable netbios = yes\n  \
                 pid directory = {}\n  lock directory = {}\n  state directory = {}\n  \
                 cache directory = {}\n  private dir = {}\n  ncalrpc dir = {}/ncalrpc\n  \
                 passdb backend = tdbsam:{}/passdb.tdb\n  log file = {}/smbd.log\n  \
                 load printers = no\n  printing = bsd\n  printcap name = /dev/null\n  \
                 disable spoolss = yes\n[{SHARE}]\n  path = {}\n  read only = no\n  \
                 valid users = {SMB_USER}\n",
                at("pid"),
                at("lock"),
                at("state"),
                at("cache"),
                at("private"),
                at("lock"),
                at("private"),
                at("log"),
                export.display(),
            ),
        )
        .unwrap();
        let mut add = Command::new(smbpasswd)
            .args(["-c"])
            .arg(&conf)
            .args(["-a", "-s", SMB_USER])
            .stdin(Stdio::piped())
            .stdout(log_file(&d.join("log/smbpasswd.out")))
            .stderr(log_file(&d.join("log/smbpasswd.err")))
            .spawn()
            .unwrap();
        add.stdin
            .take()
            .unwrap()
            .write_all(format!("{SMB_PASS}\n{SMB_PASS}\n").as_bytes())
            .unwrap();
        let status = add.wait().unwrap();
        assert!(
            status.success(),
            "smbpasswd -a: {status}: {}",
            fs::read_to_string(d.join("log/smbpasswd.err")).unwrap_or_default()
        );
        let stderr = d.join("log/smbd.stderr");
        // In a process group of its own: smbd signals its whole group when
        // it ends, which must not reach the test.
        let mut smbd = Command::new(smbd)
            .args(["--foreground", "--no-process-group", "-s"])
            .arg(&conf)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log_file(&d.join("log/smbd.stdout")))
            .stderr(log_file(&stderr))
            .spawn()
            .unwrap();
        wait_listening(&mut smbd, 445, &stderr);
        Smb {
            smbd,
            export,
            dir,
            _port: port,
        }
    }

    /// The exported directory, on this machine's disk.
    pub fn export(&self) -> &Path {
        &self.export
    }

    /// A host named `name` that mounts the server with smbnetfs (its own
    /// `HOME` holding `.smb/smbnetfs.conf` with the credentials).
    pub fn host(&self, name: &str) -> Host {
        let dir = tempfile::tempdir_in(self.dir.path()).unwrap();
        let mnt = dir.path().join("mnt");
        let smb = dir.path().join("home/.smb");
        fs::create_dir(&mnt).unwrap();
        fs::create_dir_all(&smb).unwrap();
        let conf = smb.join("smbnetfs.conf");
        fs::write(&conf, format!("auth \"{SMB_USER}\" \"{SMB_PASS}\"\n")).unwrap();
        // smbnetfs ignores credentials in a file others can read.
        fs::set_permissions(&conf, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(smb.join("smb.conf"), "").unwrap();
        Host {
            name: name.into(),
            mount: format!(
                "HOME={} {} {}",
                quote(&dir.path().join("home")),
                require("smbnetfs").display(),
                quote(&mnt),
            ),
            root: mnt.join("127.0.0.1").join(SHARE),
            _dir: dir,
        }
    }
}

impl Drop for Smb {
    fn drop(&mut self) {
        // SIGTERM: smbd ends its connection processes too.
        // SAFETY: signalling our own child by its PID; no memory is passed.
        unsafe { libc::kill(self.smbd.id() as libc::pid_t, libc::SIGTERM) };
        let smbd = &mut self.smbd;
        if !super::poll_within(Duration::from_secs(10), || {
            !matches!(smbd.try_wait(), Ok(None))
        }) {
            let _ = smbd.kill();
            let _ = smbd.wait();
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on this
/// machine, whatever its namespaces.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(r, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A session worker on a host, driven a line at a time.
pub struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    /// Starts `cmd` (a test executable run as its `worker`, which calls
    /// [`serve`]) and waits for its greeting.
    pub fn start(mut cmd: Command) -> Session {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut session = Session {
            child,
            stdin,
            stdout,
        };
        assert_eq!(session.ask("hello"), "hello");
        session
    }

    /// Sends one request line and returns the answer line.
    pub fn send(&mut self, request: &str) {
        self.stdin
            .write_all(format!("{request}\n").as_bytes())
            .unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next answer line (libtest's own lines skipped).
    pub fn answer(&mut self) -> String {
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).unwrap();
            if n == 0 {
                panic!("the session worker ended: {:?}", self.child.wait());
            }
            if let Some(answer) = line.trim_end().strip_prefix("netfs: ") {
                return answer.to_owned();
            }
        }
    }

    /// One request and its answer.
    pub fn ask(&mut self, request: &str) -> String {
        self.send(request);
        self.answer()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Asked to quit, the worker ends its test run normally (its init
        // ending takes the mount down with the namespace).
        let _ = self.stdin.write_all(b"quit\n");
        let _ = self.stdin.flush();
        let child = &mut self.child;
        if !super::poll_within(Duration::from_secs(10), || {
            !matches!(child.try_wait(), Ok(None))
        }) {
            let _ = child.kill();
        }
        let _ = self.child.wait();
    }
}

/// `Ok(())` or the errno of the last failed call, as a session answers.
/// The names of directory `dir` (less `.` and `..`), sorted, as
/// `[a,b]`, read through a descriptor `openat(dir, ".")` opens.
fn list_at(dir: &File) -> String {
    // SAFETY: a valid descriptor and NUL-terminated path; the new
    // descriptor is owned by the stream, which closedir closes.
    let stream = unsafe {
        let fd = libc::openat(
            dir.as_raw_fd(),
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return outcome(fd);
        }
        libc::fdopendir(fd)
    };
    assert!(!stream.is_null());
    let mut names = Vec::new();
    loop {
        // SAFETY: `stream` is an open directory stream.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: readdir returned a valid entry with a NUL-terminated name.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        let name = name.to_string_lossy().into_owned();
        if name != "." && name != ".." {
            names.push(name);
        }
    }
    // SAFETY: closes the stream opened above, once.
    unsafe { libc::closedir(stream) };
    names.sort();
    format!("[{}]", names.join(","))
}

fn outcome(r: libc::c_int) -> String {
    if r >= 0 {
        "ok".into()
    } else {
        format!(
            "err {}",
            std::io::Error::last_os_error().raw_os_error().unwrap()
        )
    }
}

/// `ok` or `err ERRNO`, as a session answers.
fn io_outcome(r: std::io::Result<()>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(e) => format!("err {}", e.raw_os_error().unwrap_or(0)),
    }
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

/// The session worker: answers each request on stdin with one line on
/// stdout, acting on files under `root` (the export through this host's
/// mount). Requests:
/// - `hello`: `hello`.
/// - `create NAME AT`: at CLOCK_MONOTONIC `AT` (ns), `open(O_CREAT|O_EXCL)`
///   then writes the host name; `ok` or `err ERRNO`.
/// - `exchange A B`: `renameat2(A, B, RENAME_EXCHANGE)`.
/// - `flock NAME`, `fcntl NAME`: a non-blocking exclusive lock kept until
///   `unlock`.
/// - `stat NAME`: `INO MTIME_SEC MTIME_NSEC SIZE`.
/// - `touch NAME SEC NSEC`: sets the mtime.
/// - `write NAME TEXT`: creates or truncates and writes.
/// - `open NAME`: opens it read-only and keeps it open until `close`.
/// - `unlink NAME`, `rename A B`: `unlink(2)`, `rename(2)`.
/// - `noreplace A B`: `renameat2(A, B, RENAME_NOREPLACE)`.
/// - `quit`.
pub fn serve(root: &Path) {
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim();
    let mut held: Vec<File> = Vec::new();
    let mut opened: Vec<File> = Vec::new();
    let mut dirs: Vec<File> = Vec::new();
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split(' ').collect();
        let answer = match words[..] {
            ["hello"] => "hello".into(),
            ["quit"] => break,
            ["create", name, at] => {
                let path = c_path(&root.join(name));
                let at: u64 = at.parse().unwrap();
                while monotonic_ns() < at {
                    std::hint::spin_loop();
                }
                // SAFETY: a valid NUL-terminated path; the descriptor is closed below.
                let fd = unsafe {
                    libc::open(
                        path.as_ptr(),
                        libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o644,
                    )
                };
                let answer = outcome(fd);
                if fd >= 0 {
                    // SAFETY: `fd` was just opened here and is closed once.
                    unsafe {
                        libc::write(fd, host.as_ptr().cast(), host.len());
                        libc::close(fd);
                    }
                }
                answer
            }
            ["exchange" | "noreplace", a, b] => {
                let flag = match words[0] {
                    "exchange" => libc::RENAME_EXCHANGE,
                    _ => libc::RENAME_NOREPLACE,
                };
                let (a, b) = (c_path(&root.join(a)), c_path(&root.join(b)));
                // SAFETY: valid NUL-terminated paths; no memory is kept.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_renameat2,
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        flag,
                    )
                };
                outcome(r as libc::c_int)
            }
            ["flock", name] => {
                let file = open_rw(&root.join(name));
                // SAFETY: flock on a descriptor `file` owns.
                let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
                held.push(file);
                outcome(r)
            }
            ["fcntl", name] => {
                let file = open_rw(&root.join(name));
                // SAFETY: an all-zero flock is a valid value to fill in.
                let mut lock: libc::flock = unsafe { std::mem::zeroed() };
                lock.l_type = libc::F_WRLCK as libc::c_short;
                lock.l_whence = libc::SEEK_SET as libc::c_short;
                // SAFETY: F_SETLK on a descriptor `file` owns, with a valid flock.
                let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) };
                held.push(file);
                outcome(r)
            }
            ["unlock"] => {
                held.clear();
                "ok".into()
            }
            ["stat", name] => match fs::metadata(root.join(name)) {
                Ok(m) => format!("{} {} {} {}", m.ino(), m.mtime(), m.mtime_nsec(), m.size()),
                Err(e) => format!("err {}", e.raw_os_error().unwrap_or(0)),
            },
            ["touch", name, sec, nsec] => {
                let path = c_path(&root.join(name));
                let t = libc::timespec {
                    tv_sec: sec.parse().unwrap(),
                    tv_nsec: nsec.parse().unwrap(),
                };
                let times = [t, t];
                // SAFETY: a valid path and two valid timespecs.
                let r =
                    unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0) };
                outcome(r)
            }
            ["write", name, text] => io_outcome(fs::write(root.join(name), text)),
            ["open", name] => io_outcome(File::open(root.join(name)).map(|f| opened.push(f))),
            ["close"] => {
                opened.clear();
                "ok".into()
            }
            ["unlink", name] => io_outcome(fs::remove_file(root.join(name))),
            // A directory opened once, kept, and listed through `openat`
            // of "." relative to it, as the strict lock's scans list
            // `claims/` (rustix's `Dir::read_from`).
            ["opendir", name] => io_outcome(File::open(root.join(name)).map(|f| dirs.push(f))),
            ["listat"] => match dirs.last() {
                Some(dir) => list_at(dir),
                None => "err no directory opened".into(),
            },
            ["rename", a, b] => io_outcome(fs::rename(root.join(a), root.join(b))),
            _ => panic!("unknown request {line:?}"),
        };
        writeln!(out, "netfs: {answer}").unwrap();
        out.flush().unwrap();
    }
}

pub fn errno_name(answer: &str) -> String {
    match answer
        .strip_prefix("err ")
        .map(|n| n.parse::<i32>().unwrap())
    {
        None => answer.to_owned(),
        Some(libc::EPERM) => "EPERM".into(),
        Some(libc::EEXIST) => "EEXIST".into(),
        Some(libc::EINVAL) => "EINVAL".into(),
        Some(libc::EACCES) => "EACCES".into(),
        Some(libc::EIO) => "EIO".into(),
        Some(libc::ENOSYS) => "ENOSYS".into(),
        Some(libc::EBUSY) => "EBUSY".into(),
        Some(libc::EAGAIN) => "EAGAIN".into(),
        Some(libc::ENOENT) => "ENOENT".into(),
        Some(libc::ENOTEMPTY) => "ENOTEMPTY".into(),
        Some(libc::ESTALE) => "ESTALE".into(),
        Some(libc::ETXTBSY) => "ETXTBSY".into(),
        Some(n) => format!("errno {n}"),
    }
}

/// What one filesystem showed between two client mounts.
#[derive(Debug, Default)]
pub struct Facts {
    /// `O_EXCL` create races run.
    pub races: usize,
    /// Races both creates won.
    pub doubles: usize,
    /// Races one create won, by the loser's answer.
    pub losers: HashMap<String, usize>,
    /// Races nobody won (should not happen).
    pub neither: usize,
    pub exchange: String,
    pub flock_both: bool,
    pub fcntl_both: bool,
    /// Files (of 4) whose inode number differs between the two mounts.
    pub ino_differs: usize,
    /// The nanoseconds of an mtime set to `.123456789` s, read back.
    pub mtime_nsec: i64,
    /// Whether the other mount's stat shows that new mtime at once.
    pub other_sees_mtime: bool,
}

impl Facts {
    /// The mtime granularity the read-back nanoseconds show.
    pub fn granularity(&self) -> &'static str {
        let n = self.mtime_nsec;
        match n {
            0 => "1 s",
            _ if n % 1_000_000 == 0 => "1 ms",
            _ if n % 1_000 == 0 => "1 us",
            _ if n % 100 == 0 => "100 ns",
            _ => "1 ns",
        }
    }

    pub fn print(&self, fs: &str) {
        let fact = |what: &str, value: String| eprintln!("netfs fact | {fs} | {what} | {value}");
        fact(
            "O_EXCL race: both created",
            format!("{} of {}", self.doubles, self.races),
        );
        let mut losers: Vec<_> = self.losers.iter().collect();
        losers.sort();
        fact(
            "O_EXCL race: loser's error",
            losers
                .iter()
                .map(|(e, n)| format!("{e} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        fact("renameat2(RENAME_EXCHANGE)", self.exchange.clone());
        fact("flock: both mounts hold it", self.flock_both.to_string());
        fact("fcntl: both mounts hold it", self.fcntl_both.to_string());
        fact(
            "st_ino differs between mounts",
            format!("{} of 4 files", self.ino_differs),
        );
        fact("mtime granularity", self.granularity().into());
        fact(
            "the other mount's stat shows a new mtime at once",
            self.other_sees_mtime.to_string(),
        );
    }
}

/// Measures the facts between host sessions `a` and `b` over `export`
/// (a path to the export's directory on the server), with `races` `O_EXCL`
/// create races.
pub fn measure(export: &Path, a: &mut Session, b: &mut Session, races: usize) -> Facts {
    let mut facts = Facts {
        races,
        ..Facts::default()
    };
    std::fs::create_dir(export.join("race")).unwrap();
    for round in 0..races {
        // Both start the create at one instant of the machine's monotonic
        // clock, a moment after both have the request.
        let at = monotonic_ns() + 3_000_000;
        let request = format!("create race/{round} {at}");
        a.send(&request);
        b.send(&request);
        let (x, y) = (a.answer(), b.answer());
        match (x == "ok", y == "ok") {
            (true, true) => facts.doubles += 1,
            (true, false) => *facts.losers.entry(errno_name(&y)).or_default() += 1,
            (false, true) => *facts.losers.entry(errno_name(&x)).or_default() += 1,
            (false, false) => facts.neither += 1,
        }
    }
    std::fs::write(export.join("x1"), "1").unwrap();
    std::fs::write(export.join("x2"), "2").unwrap();
    facts.exchange = errno_name(&a.ask("exchange x1 x2"));

    for (how, both) in [
        ("flock", &mut facts.flock_both),
        ("fcntl", &mut facts.fcntl_both),
    ] {
        let name = format!("{how}.lock");
        std::fs::write(export.join(&name), "").unwrap();
        assert_eq!(a.ask(&format!("{how} {name}")), "ok", "{how} on one mount");
        *both = b.ask(&format!("{how} {name}")) == "ok";
        a.ask("unlock");
        b.ask("unlock");
    }

    // The two mounts look the files up in opposite orders.
    let names: Vec<String> = (0..4).map(|i| format!("ino{i}")).collect();
    for name in &names {
        std::fs::write(export.join(name), name).unwrap();
    }
    let ino = |s: &mut Session, name: &str| -> u64 {
        let answer = s.ask(&format!("stat {name}"));
        answer.split(' ').next().unwrap().parse().unwrap()
    };
    let on_a: Vec<u64> = names.iter().map(|n| ino(a, n)).collect();
    let on_b: Vec<u64> = names.iter().rev().map(|n| ino(b, n)).collect();
    facts.ino_differs = on_a
        .iter()
        .zip(on_b.iter().rev())
        .filter(|(x, y)| x != y)
        .count();

    // The other mount looks the file up first, so that a cache of its
    // own would hold the old mtime.
    b.ask("stat ino0");
    assert_eq!(a.ask("touch ino0 1700000000 123456789"), "ok");
    let answer = a.ask("stat ino0");
    let fields: Vec<&str> = answer.split(' ').collect();
    assert_eq!(fields[1], "1700000000", "the mtime set");
    facts.mtime_nsec = fields[2].parse().unwrap();
    facts.other_sees_mtime = b.ask("stat ino0").split(' ').nth(1) == Some("1700000000");
    facts
}
