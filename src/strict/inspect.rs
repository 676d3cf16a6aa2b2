//! What a strict lock's files say, and an operator's remedies
//! (PROTOCOL 18.7): the claims and their holders' standing, what sits at
//! the lock path, the break of a dead holder's claims, and the forced
//! break of any.

use super::attempt::{AtLock, Standing as AtStanding};
use super::scan::list;
use super::*;
use swaplock_core::decide::HeldBecause;
use swaplock_core::soft::{Clock, Dir as _, Standing};
use swaplock_core::strict::claim::parse_claim;
use swaplock_core::strict::names::{claims_entry, Entry};
use swaplock_core::strict::occupant::claim_standing;
use swaplock_core::strict::{CLAIMS_DIR, COORDINATION_SUFFIX};

/// One claim, as an inspection reads it (filelock's `StrictSoftFileClaim`),
/// with how its holder stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimInfo {
    /// Its file name in the claims' directory.
    pub name: String,
    /// Intent or held.
    pub state: ClaimState,
    /// Its token (32 hex digits).
    pub token: String,
    /// The PID of the process that published it.
    pub pid: u32,
    /// That process's host.
    pub host: String,
    /// That process's start token, when its platform gave one.
    pub start: Option<String>,
    /// How long ago it was published, by its mtime and this host's clock
    /// (`None` for a time in the future).
    pub age: Option<Duration>,
    /// How its holder stands, judged from this host (PROTOCOL 4.5): alive,
    /// [`Stale`](Standing::Stale) (provably gone), or held for a reason
    /// that cannot be judged here (another host, a failed probe).
    pub standing: Standing,
}

/// What sits at the lock path ([`StrictLock::occupant`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockPath {
    /// Nothing: the first attempt makes the sentinel.
    Missing,
    /// The strict sentinel.
    Sentinel,
    /// Something else, which keeps every strict contender out.
    Occupied {
        /// What it is, in filelock's words (its `lock_path_occupant`).
        description: String,
        /// Whether an attempt fails on it (at once, or once it stays so
        /// for its grace period) rather than waits for it to go.
        fails: bool,
    },
}

/// What [`StrictLock::break_dead`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakReport {
    /// The claims removed: every one of their holders is provably gone.
    pub removed: Vec<ClaimInfo>,
    /// The claims left: their holder lives, or cannot be judged here.
    pub kept: Vec<ClaimInfo>,
}

impl StrictLock {
    /// The claims in the claims' directory, read as an inspection reads
    /// them (filelock's `claims`: no clock, no existence proof), with how
    /// each one's holder stands. Empty when the directory does not exist;
    /// nothing is created. A name or record no strict lock accepts is an
    /// error that names it.
    ///
    /// ```
    /// use swaplock::strict::{ClaimState, StrictLock};
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let lock = StrictLock::new(dir.path().join("deploy.lock"));
    /// let guard = lock.lock()?;
    /// let claims = lock.claims()?;
    /// assert_eq!(claims[0].pid, std::process::id());
    /// assert!(claims.iter().any(|c| c.state == ClaimState::Held));
    /// # guard.release()
    /// # }
    /// ```
    pub fn claims(&self) -> io::Result<Vec<ClaimInfo>> {
        let Some(dir) = self.existing_claims_dir()? else {
            return Ok(Vec::new());
        };
        let me = Me::now();
        let mut os = SoftOs::on(&dir);
        let wall = os.wall();
        let mut infos: Vec<ClaimInfo> = self
            .scan(&dir, false)?
            .0
            .into_iter()
            .map(|found| {
                // The scan parsed this record: it parses again.
                let standing = parse_claim(&found.name.token, &found.record)
                    .map(|claim| claim_standing(&mut os, &me.host, &claim))
                    .unwrap_or(Standing::Held(HeldBecause::CannotTell));
                ClaimInfo {
                    name: found.name.encode().as_str().to_owned(),
                    state: found.name.state,
                    token: String::from_utf8_lossy(&found.name.token.hex()).into_owned(),
                    pid: found.pid.get(),
                    host: found.host.clone(),
                    start: found.start.clone(),
                    age: wall.since(found.mtime),
                    standing,
                }
            })
            .collect();
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(infos)
    }

    /// What sits at the lock path, without acting on it: the sentinel, a
    /// soft lock's marker (naming its holder), or a node no lock writes.
    ///
    /// ```
    /// use swaplock::strict::{LockPath, StrictLock};
    /// # fn main() -> std::io::Result<()> {
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("deploy.lock");
    /// assert_eq!(StrictLock::new(&path).occupant()?, LockPath::Missing);
    /// std::fs::create_dir(&path)?;
    /// match StrictLock::new(&path).occupant()? {
    ///     LockPath::Occupied { description, fails } => assert!(fails && description == "a directory"),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn occupant(&self) -> io::Result<LockPath> {
        let dir = match os::open_dir(&self.dir) {
            Ok(dir) => dir,
            Err(e) if e == Errno::NOENT => return Ok(LockPath::Missing),
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        Ok(match self.look(&dir, &Me::now())? {
            AtLock::Missing => LockPath::Missing,
            AtLock::Sentinel(..) => LockPath::Sentinel,
            AtLock::Other {
                description, state, ..
            } => LockPath::Occupied {
                description,
                fails: state != AtStanding::Held,
            },
        })
    }

    /// Removes the claims of every holder this host proves gone (dead, or
    /// its PID now runs another process), its held claim first; claims of
    /// a holder that lives, or that cannot be judged from here (another
    /// host, a failed probe), are kept and reported. Safe while others
    /// contend: a dead holder acts no more, and no contender's win counts
    /// on its claims (PROTOCOL 18.7).
    ///
    /// ```no_run
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let report = StrictLock::new("/mnt/nfs/deploy.lock").break_dead()?;
    /// for claim in &report.kept {
    ///     eprintln!("kept {} of pid {} on {}: {:?}", claim.name, claim.pid, claim.host, claim.standing);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn break_dead(&self) -> io::Result<BreakReport> {
        let claims = self.claims()?;
        let mut report = BreakReport::default();
        let Some(dir) = self.existing_claims_dir()? else {
            return Ok(report);
        };
        let gone = |token: &str| {
            claims
                .iter()
                .filter(|c| c.token == token)
                .all(|c| matches!(c.standing, Standing::Stale { .. }))
        };
        let mut os = SoftOs::on(&dir);
        // Held claims sort first: each token's held claim goes before its
        // intent.
        for claim in claims.iter() {
            if !gone(&claim.token) {
                report.kept.push(claim.clone());
                continue;
            }
            match os.unlink(claim.name.as_bytes()) {
                Ok(()) => report.removed.push(claim.clone()),
                Err(e) if e == Errno::NOENT => {}
                Err(e) => return Err(self.err(Step::Remove, e)),
            }
        }
        Ok(report)
    }

    /// Removes the one claim named `claim_name`, whoever holds it, as
    /// filelock's `force_break`: mutual exclusion with its holder is lost
    /// if it lives. An error of kind `InvalidInput` for a name that is not
    /// one file name in the claims' directory, `NotFound` when no such
    /// claim is listed.
    ///
    /// ```no_run
    /// use swaplock::StrictLock;
    /// # fn main() -> std::io::Result<()> {
    /// let lock = StrictLock::new("/mnt/nfs/deploy.lock");
    /// // The host of this holder is known to be down for good.
    /// for claim in lock.claims()?.iter().filter(|c| c.host == "build-7") {
    ///     lock.force_break(&claim.name)?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn force_break(&self, claim_name: &str) -> io::Result<()> {
        let bad = claim_name.is_empty()
            || claim_name.starts_with('.')
            || claim_name.contains(['/', '\\', '\0']);
        if bad {
            let kind = io::ErrorKind::InvalidInput;
            let source = io::Error::new(kind, "claim_name must be one public claim basename");
            return Err(LockError::io(&self.path, Step::Remove, kind, source));
        }
        let not_found = || self.err(Step::Remove, Errno::NOENT);
        let dir = self.existing_claims_dir()?.ok_or_else(not_found)?;
        let listed = list(&dir).map_err(|e| self.err(Step::Remove, e))?;
        if !listed.iter().any(|n| n == claim_name.as_bytes()) {
            return Err(not_found());
        }
        SoftOs::on(&dir)
            .unlink(claim_name.as_bytes())
            .map_err(|e| self.err(Step::Remove, e))
    }

    /// Removes every claim, whoever holds it (held claims first), and
    /// returns their names: `swaplock break --kind strict --force`. Mutual
    /// exclusion with a live holder is lost. Names that are no claim are
    /// left alone.
    pub fn force_break_all(&self) -> io::Result<Vec<String>> {
        let Some(dir) = self.existing_claims_dir()? else {
            return Ok(Vec::new());
        };
        let mut claims: Vec<ClaimName> = list(&dir)
            .map_err(|e| self.err(Step::Remove, e))?
            .iter()
            .filter_map(|n| match claims_entry(n) {
                Entry::Claim(c) => Some(c),
                _ => None,
            })
            .collect();
        claims.sort_by_key(|c| (c.state, c.token.0));
        let mut os = SoftOs::on(&dir);
        let mut removed = Vec::new();
        for claim in claims {
            let name = claim.encode();
            match os.unlink(name.as_bytes()) {
                Ok(()) => removed.push(name.as_str().to_owned()),
                Err(e) if e == Errno::NOENT => {}
                Err(e) => return Err(self.err(Step::Remove, e)),
            }
        }
        Ok(removed)
    }

    /// The claims' directory, if it exists; nothing is created.
    fn existing_claims_dir(&self) -> io::Result<Option<Dir>> {
        let lock = match os::open_dir(&self.dir) {
            Ok(dir) => dir,
            Err(e) if e == Errno::NOENT => return Ok(None),
            Err(e) => return Err(self.err(Step::Open, e)),
        };
        let mut coordination = self.base.clone();
        let _ = coordination.extend_from_slice(COORDINATION_SUFFIX);
        let open = |parent: &Dir, name: &[u8]| match c(name)
            .and_then(|n| sys::open_dir_nofollow(std::os::fd::AsFd::as_fd(parent), &n))
        {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e == Errno::NOENT => Ok(None),
            Err(e) => Err(self.invalid(None, format!("cannot open claim directory: {e}"))),
        };
        match open(&lock, &coordination)? {
            Some(coordination) => open(&coordination, CLAIMS_DIR),
            None => Ok(None),
        }
    }

    /// Who holds the lock, for a busy lock's report: the holder of the
    /// held claim with the smallest token (or of the smallest intent), how
    /// it stands, and what an operator can do.
    pub(super) fn holder_sentence(&self) -> String {
        let claims = match self.claims() {
            Ok(claims) => claims,
            Err(e) => return format!("its claims cannot be read ({e})"),
        };
        let holder = claims
            .iter()
            .filter(|c| c.state == ClaimState::Held)
            .chain(claims.iter())
            .min_by_key(|c| (c.state, c.token.clone()));
        let Some(c) = holder else {
            return "another contender held it".into();
        };
        let path = self.path.display();
        let who = format!("pid {} on {} (claim {})", c.pid, c.host, c.token);
        let doing = match c.state {
            ClaimState::Held => "it is held by",
            ClaimState::Intent => "it is being taken by",
        };
        match c.standing {
            Standing::Held(HeldBecause::Alive) => format!("{doing} {who}, which is alive"),
            Standing::Stale { recycled } => format!(
                "its holder, {who}, has exited{}, and a strict lock never expires: remove its \
                 claims with `swaplock break --kind strict '{path}'`",
                match recycled {
                    true => " (its PID now runs another process)",
                    false => "",
                }
            ),
            _ => format!(
                "{doing} {who}, which this host cannot probe; once it is known gone, \
                 `swaplock break --kind strict --force '{path}'` removes every claim"
            ),
        }
    }
}
