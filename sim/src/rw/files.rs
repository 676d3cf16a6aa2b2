//! The one seam between the shipped driver and the model: [`SimFiles`],
//! the [`Files`] of one simulated process, and [`SimEnv`], its clock and
//! random tokens. Each file operation suspends to the scheduler first
//! (an operation the adapter performs in two system calls suspends before
//! each: an exclusive create before its write, a rewrite's open before
//! its write, a link before the identities are looked at), then applies
//! to the model, traces, and records what the oracle reads. Inputs (the
//! clock, tokens) answer at once. Nothing here judges but the core's own
//! verdicts, which the adapter asks too ([`link_outcome`],
//! [`overwrite_fits`]).

use super::fs::{dir, Key, ROOT};
use super::world::{Op, What, World, STEP};
use corosensei::Yielder;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use swaplock_core::decide::{FileId, FileTime, Instant};
use swaplock_core::names::Token;
use swaplock_core::rw::driver::Env;
use swaplock_core::rw::files::{link_outcome, overwrite_fits, Area, Files, FsError, Read};
use swaplock_core::soft::{NodeKind, Stat};
use swaplock_core::Errno;

/// The device every file of the model is on.
const DEV: u64 = 0x5157;

fn id(ino: u64) -> FileId {
    FileId { dev: DEV, ino }
}

fn key(area: Area, name: &[u8]) -> Key {
    (dir(area), name.to_vec())
}

fn shown(area: Area, name: &[u8]) -> String {
    let d = match area {
        Area::Generations => "gen",
        Area::Holders => "holders",
    };
    let n = String::from_utf8_lossy(name);
    // Tokens and temporaries are long: their first 8 characters name them.
    let n: String = match n.len() > 20 && !n.starts_with('0') {
        true => n.chars().take(16).collect(),
        false => n.trim_start_matches('0').to_string(),
    };
    format!("{d}/{n}")
}

/// Names, shown as text in traces.
struct Names(Vec<Vec<u8>>);

impl std::fmt::Debug for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown: Vec<String> = self
            .0
            .iter()
            .map(|n| {
                let n = String::from_utf8_lossy(n);
                match n.len() {
                    20 if n.bytes().all(|b| b.is_ascii_digit()) => {
                        n.trim_start_matches('0').to_string()
                    }
                    l if l > 16 => n.chars().take(16).collect(),
                    _ => n.to_string(),
                }
            })
            .collect();
        write!(f, "[{}]", shown.join(" "))
    }
}

/// The files of one simulated process's lock.
pub(crate) struct SimFiles<'y> {
    pub(crate) world: Rc<RefCell<World>>,
    pub(crate) me: usize,
    yielder: &'y Yielder<(), ()>,
    /// Whether the directories were prepared (per lock, as the adapter
    /// keeps it).
    pub(crate) prepared: bool,
}

impl<'y> SimFiles<'y> {
    pub(crate) fn new(
        world: Rc<RefCell<World>>,
        me: usize,
        yielder: &'y Yielder<(), ()>,
        prepared: bool,
    ) -> Self {
        SimFiles {
            world,
            me,
            yielder,
            prepared,
        }
    }

    /// Suspends until scheduled to run `op`; then a step of time passes
    /// and `apply` runs on the world with the answer the scheduler chose.
    fn step<T: std::fmt::Debug>(
        &mut self,
        op: Op,
        what: impl FnOnce() -> String,
        apply: impl FnOnce(&mut World, usize, u8) -> T,
    ) -> T {
        self.world.borrow_mut().procs[self.me].pending = op;
        self.yielder.suspend(());
        let mut w = self.world.borrow_mut();
        w.time += STEP;
        w.fs.now = w.time;
        w.steps += 1;
        let variant = w.variant;
        let out = apply(&mut w, self.me, variant);
        if w.tracing() {
            w.note(self.me, format_args!("{} -> {out:?}", what()));
        }
        w.procs[self.me].pending = Op::Start;
        out
    }

    /// Suspends to the scheduler.
    pub(crate) fn suspend(&self) {
        self.yielder.suspend(());
    }

    /// Sleeps until `d` after the run's start (no time if that passed).
    pub(crate) fn sleep_from_start(&mut self, d: Duration) {
        let at = super::world::START + d.as_nanos() as u64;
        let now = self.world.borrow().time;
        if at > now {
            self.sleep(Duration::from_nanos(at - now));
        }
    }

    /// Sleeps `d`: runnable again once that much time has passed.
    pub(crate) fn sleep(&mut self, d: Duration) {
        {
            let mut w = self.world.borrow_mut();
            let wake = w.time + d.as_nanos() as u64;
            let p = &mut w.procs[self.me];
            p.wake = p.wake.max(wake);
            p.pending = Op::Start;
            w.note(self.me, format_args!("sleeps {d:?}"));
        }
        self.yielder.suspend(());
    }

    /// A ghost step of this process's life, for the oracle.
    pub(crate) fn ghost(&mut self, what: What) {
        let mut w = self.world.borrow_mut();
        if w.tracing() {
            w.note(self.me, format_args!("{what:?}"));
        }
        w.record(self.me, what);
    }

    /// The lookup of `k` by this process's host. While its view of the
    /// directory holds, its cache answers; where that differs from the
    /// server, answer `1` revalidates instead and answers as the server
    /// does. Once the view expired, the host revalidates.
    fn lookup(w: &mut World, me: usize, k: &Key, variant: u8) -> Option<u64> {
        let h = w.procs[me].host;
        match (w.calm, w.fs.stale_lookup(h, k), w.fs.viewing(h, k.0)) {
            (false, Some(cached), _) if variant == 0 => {
                w.fs.stale_answers[h] += 1;
                w.record(me, What::StaleAnswer);
                w.note(me, format_args!("(answered from its host's cache)"));
                return cached;
            }
            (false, None, true) => {}
            _ => w.fs.revalidate(h, k.0),
        }
        w.fs.reachable(k.0).then(|| w.fs.lookup(k)).flatten()
    }
}

impl Files for SimFiles<'_> {
    fn prepare(&mut self, force: bool) -> Result<(), FsError> {
        if self.prepared && !force {
            return Ok(());
        }
        self.step(
            Op::Other,
            || format!("prepare(force: {force})"),
            |w, _, _| {
                for d in [ROOT, dir(Area::Generations), dir(Area::Holders)] {
                    let _ = w.fs.mkdir(d);
                }
            },
        );
        self.prepared = true;
        Ok(())
    }

    fn read(&mut self, area: Area, name: &[u8], buf: &mut [u8]) -> Result<Read, FsError> {
        let k = key(area, name);
        self.step(
            Op::Read(k.clone()),
            || format!("read {}", shown(area, name)),
            |w, me, v| {
                let Some(ino) = Self::lookup(w, me, &k, v) else {
                    return Ok(Read::Missing);
                };
                let data =
                    w.fs.inodes
                        .get(&ino)
                        .map(|i| i.data.as_slice())
                        .unwrap_or(&[]);
                let n = data.len().min(buf.len());
                buf[..n].copy_from_slice(&data[..n]);
                Ok(Read::Bytes(n))
            },
        )
    }

    fn create(
        &mut self,
        area: Area,
        name: &[u8],
        data: &[u8],
        durable: bool,
    ) -> Result<FileId, FsError> {
        let k = key(area, name);
        let made = self.step(
            Op::Other,
            || format!("create {}", shown(area, name)),
            |w, me, _| {
                let now = w.time;
                let made = w.fs.create(&k, now);
                let h = w.procs[me].host;
                w.fs.own_change(h, &k, made.is_ok());
                if let Ok(ino) = made {
                    w.fs.pin(ino);
                    w.procs[me].open.push(ino);
                }
                made
            },
        );
        let ino = made.map_err(FsError::Os)?;
        let holder = (area == Area::Holders)
            .then(|| Token::parse_hex(name))
            .flatten();
        self.step(
            Op::Other,
            || {
                format!(
                    "write {} B{}",
                    data.len(),
                    if durable { ", fsync" } else { "" }
                )
            },
            |w, me, _| {
                let now = w.time;
                w.fs.write(ino, data, now);
                if durable {
                    w.fs.fsync(ino);
                }
                if let (Some(t), Some(_)) = (holder, w.fs.lookup(&k).filter(|&i| i == ino)) {
                    w.record(me, What::WroteRecord(t.0));
                }
                w.close(me, ino);
            },
        );
        Ok(id(ino))
    }

    fn overwrite(
        &mut self,
        area: Area,
        name: &[u8],
        data: &[u8],
        want: FileId,
    ) -> Result<bool, FsError> {
        let k = key(area, name);
        let opened = self.step(
            Op::Open(k.clone()),
            || format!("open {} to rewrite", shown(area, name)),
            |w, me, v| {
                let ino = Self::lookup(w, me, &k, v)?;
                let node = w.fs.inodes.get(&ino)?;
                let st = Stat {
                    id: id(ino),
                    kind: NodeKind::Regular,
                    nlink: u64::from(node.nlink),
                    mtime: FileTime::default(),
                    ctime: FileTime::default(),
                };
                let fits = overwrite_fits(&st, want);
                w.fs.pin(ino);
                w.procs[me].open.push(ino);
                if !fits {
                    w.close(me, ino);
                }
                fits.then_some(ino)
            },
        );
        let Some(ino) = opened else {
            return Ok(false);
        };
        let holder = (area == Area::Holders)
            .then(|| Token::parse_hex(name))
            .flatten();
        self.step(
            Op::Other,
            || format!("write {} B", data.len()),
            |w, me, _| {
                let now = w.time;
                w.fs.write(ino, data, now);
                if let (Some(t), Some(_)) = (holder, w.fs.lookup(&k).filter(|&i| i == ino)) {
                    w.record(me, What::WroteRecord(t.0));
                }
                w.close(me, ino);
            },
        );
        Ok(true)
    }

    fn link(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        let (kf, kt) = (key(area, from), key(area, to));
        let call = self.step(
            Op::Link(kt.clone()),
            || format!("link {} {}", shown(area, from), shown(area, to)),
            |w, me, v| {
                let call = w.fs.link(&kf, &kt);
                if call.is_ok() && area == Area::Generations {
                    // The grant, if it is one, happens here, when the server
                    // links, whatever its reply says or when it comes.
                    let incarnation = w.fs.made[dir(Area::Generations)];
                    w.record(me, What::Linked(to.to_vec(), incarnation));
                }
                let h = w.procs[me].host;
                w.fs.own_change(h, &kt, call.is_ok());
                match (call, !w.calm && w.retransmits && v > 0) {
                    // The reply was lost and the retransmit found the name taken.
                    (Ok(()), true) => Err(Errno::EXIST),
                    (call, _) => call,
                }
            },
        );
        self.step(
            Op::Other,
            || "lstat both names".to_string(),
            |w, _, _| {
                let (a, b) = (w.fs.lookup(&kf), w.fs.lookup(&kt));
                link_outcome(call, a.map(id), b.map(id))
            },
        )
    }

    fn replace(&mut self, area: Area, from: &[u8], to: &[u8]) -> Result<bool, FsError> {
        let (kf, kt) = (key(area, from), key(area, to));
        self.step(
            Op::Other,
            || format!("rename {} over {}", shown(area, from), shown(area, to)),
            |w, me, _| {
                let done = w.fs.rename(&kf, &kt);
                let h = w.procs[me].host;
                w.fs.own_change(h, &kf, done.is_ok());
                w.fs.own_change(h, &kt, done.is_ok());
                done.map(|()| true).map_err(FsError::Os)
            },
        )
    }

    fn unlink(&mut self, area: Area, name: &[u8]) -> Result<(), FsError> {
        let k = key(area, name);
        self.step(
            Op::Other,
            || format!("unlink {}", shown(area, name)),
            |w, me, _| {
                let done = w.fs.unlink(&k);
                let h = w.procs[me].host;
                w.fs.own_change(h, &k, done.is_ok());
                if done.is_ok() && area == Area::Holders {
                    w.record(me, What::RemovedRecord(name.to_vec()));
                }
                if done.is_ok() && area == Area::Generations {
                    w.record(me, What::RemovedGeneration(name.to_vec()));
                }
                Ok(())
            },
        )
    }

    fn list(&mut self, area: Area, visit: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
        let d = dir(area);
        let names = self.step(
            Op::List(d),
            || format!("list {}", shown(area, b"")),
            |w, me, v| {
                let h = w.procs[me].host;
                match (w.calm, w.fs.stale_listing(h, d), w.fs.viewing(h, d)) {
                    (false, Some(cached), _) if v == 0 => {
                        w.fs.stale_answers[h] += 1;
                        w.record(me, What::StaleAnswer);
                        w.note(me, format_args!("(answered from its host's cache)"));
                        return Names(cached);
                    }
                    (false, None, true) => {}
                    _ => w.fs.revalidate(h, d),
                }
                Names(match w.fs.reachable(d) {
                    true => w.fs.list(d),
                    false => Vec::new(),
                })
            },
        );
        for n in &names.0 {
            visit(n);
        }
        Ok(())
    }

    fn sync(&mut self, area: Area) -> Result<(), FsError> {
        self.step(
            Op::Other,
            || format!("fsync {}", shown(area, b"")),
            |w, _, _| {
                w.fs.barrier();
                Ok(())
            },
        )
    }
}

/// A simulated process's clock (its host's monotonic clock) and random
/// tokens.
pub(crate) struct SimEnv {
    pub(crate) world: Rc<RefCell<World>>,
    pub(crate) me: usize,
}

impl Env for SimEnv {
    fn now(&mut self) -> Instant {
        let w = self.world.borrow();
        Instant(w.mono(w.procs[self.me].host))
    }

    fn token(&mut self) -> Token {
        Token(self.world.borrow_mut().token())
    }
}
