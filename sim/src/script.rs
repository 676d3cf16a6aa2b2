//! Directed schedules: a race too narrow for the random searches and the
//! fuzzer, steered step by step ("run p1 until its exchange, then p2 until
//! it enters, then kill p3") and written down as the bytes a kept schedule
//! holds, so that `cargo test` replays it through [`FromBytes`] like any
//! other finding.
//!
//! A [`Script`] runs one scenario of the catalogue with seed 1, exactly as
//! [`crate::mutants::replay`] does, and records each decision as the byte
//! [`FromBytes`] reads back: a step of process `p` is `p`'s position among
//! the runnable processes; a kill is `0xff`, which kills
//! `runnable[255 % len]` (a script may kill only that process, at most
//! twice).
//!
//! [`FromBytes`]: crate::schedule::FromBytes

use crate::cast::Policy;
use crate::runtime::{Sim, Violation};
use crate::scenario::scenarios;

/// How many of the trace's last lines a [`Lost`] shows.
const LOST_LINES: usize = 40;

/// The steps a replay of a kept schedule runs at most
/// ([`crate::mutants::replay`]).
const REPLAY_STEPS: usize = 20_000;

/// A schedule being steered, and the bytes that replay it.
pub struct Script {
    sim: Sim,
    bytes: Vec<u8>,
    kills: u32,
    runnable: Vec<usize>,
}

/// Why a script could not go on.
#[derive(Debug)]
pub struct Lost(pub String);

impl Script {
    /// A script over scenario `which` of [`scenarios`] (its index, which
    /// the kept schedule's first byte stores).
    pub fn new(which: usize) -> Self {
        let all = scenarios(Policy::Ours);
        let (_, scenario, _) = &all[which];
        Script {
            sim: Sim::new(scenario, 1, true),
            bytes: vec![u8::try_from(which).expect("fewer than 256 scenarios")],
            kills: 0,
            runnable: Vec::new(),
        }
    }

    /// Runs process `p`'s next syscall.
    pub fn step(&mut self, p: usize) -> Result<(), Lost> {
        self.sim.runnable_into(&mut self.runnable);
        let Some(at) = self.runnable.iter().position(|&r| r == p) else {
            return Err(self.lost(format!("p{p} cannot step")));
        };
        self.bytes.push(at as u8);
        self.sim.step(p);
        Ok(())
    }

    /// Steps process `p` until the last line it traced contains `what`,
    /// at most `max` steps.
    pub fn until(&mut self, p: usize, what: &str, max: usize) -> Result<(), Lost> {
        for _ in 0..max {
            self.step(p)?;
            if self.last_of(p).contains(what) {
                return Ok(());
            }
            if self.sim.failed() {
                return Err(self.lost(format!("a violation before p{p} reached {what}")));
            }
        }
        Err(self.lost(format!("p{p} never reached {what:?} in {max} steps")))
    }

    /// Steps process `p` until a violation is found, at most `max` steps;
    /// whether one was.
    pub fn until_violation(&mut self, p: usize, max: usize) -> Result<bool, Lost> {
        for _ in 0..max {
            if self.sim.failed() || self.sim.done(p) {
                break;
            }
            self.step(p)?;
        }
        Ok(self.sim.failed())
    }

    /// Runs the rest as a replay of the kept schedule does once its bytes
    /// are spent (the first runnable process, step by step, within the
    /// replay's bound), then the progress check; whether a violation was
    /// found.
    pub fn finish(&mut self) -> bool {
        let mut steps = self.bytes.len() - 1;
        while steps < REPLAY_STEPS && !self.sim.failed() {
            self.sim.runnable_into(&mut self.runnable);
            let Some(&first) = self.runnable.first() else {
                break;
            };
            self.sim.step(first);
            steps += 1;
        }
        self.sim.check_progress();
        self.sim.failed()
    }

    /// Steps the processes of `ps` in turns (those that can still step)
    /// until the last line one of them traced contains `what`; which one.
    pub fn turns_until(&mut self, ps: &[usize], what: &str, max: usize) -> Result<usize, Lost> {
        for _ in 0..max {
            let mut stepped = false;
            for &p in ps {
                if self.sim.done(p) {
                    continue;
                }
                self.step(p)?;
                stepped = true;
                if self.last_of(p).contains(what) {
                    return Ok(p);
                }
                if self.sim.failed() {
                    return Err(self.lost(format!("a violation before {what}")));
                }
            }
            if !stepped {
                break;
            }
        }
        Err(self.lost(format!("none of {ps:?} reached {what:?}")))
    }

    /// Kills process `p`, which must be the one a `0xff` byte kills now.
    pub fn kill(&mut self, p: usize) -> Result<(), Lost> {
        self.sim.runnable_into(&mut self.runnable);
        if self.kills == 2 || self.runnable.is_empty() {
            return Err(self.lost(format!("p{p} cannot be killed")));
        }
        let victim = self.runnable[255 % self.runnable.len()];
        if victim != p {
            return Err(self.lost(format!("a kill byte now kills p{victim}, not p{p}")));
        }
        self.kills += 1;
        self.bytes.push(0xff);
        self.sim.crash(p);
        Ok(())
    }

    /// Why the script could not go on, with the trace's last lines.
    fn lost(&self, why: String) -> Lost {
        let trace = self.sim.trace();
        let tail: Vec<&str> = trace.lines().rev().take(LOST_LINES).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Lost(format!("{why}; the trace ended:\n{}", tail.join("\n")))
    }

    /// The last line process `p` traced (its syscall or ghost step; the
    /// oracle's own notes on it are skipped).
    pub fn last_of(&self, p: usize) -> String {
        const NOTES: [&str; 4] = ["): PAUSED", "): OVERSLEPT", "): DISPLACED", ": compromised"];
        let tag = format!(" p{p} ");
        let trace = self.sim.trace();
        trace
            .lines()
            .rev()
            .filter(|l| !NOTES.iter().any(|n| l.contains(n)))
            .find(|l| l.contains(&tag))
            .unwrap_or("")
            .to_string()
    }

    /// The violation found so far, if any.
    pub fn violation(&self) -> Option<Violation> {
        self.sim.violation()
    }

    /// The simulation.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// The kept schedule: the scenario's index, then a byte per decision.
    pub fn schedule(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}

/// The index of the scenario named `name` in the catalogue.
pub(crate) fn scenario(name: &str) -> Result<usize, Lost> {
    scenarios(Policy::Ours)
        .iter()
        .position(|(n, ..)| *n == name)
        .ok_or_else(|| Lost(format!("no scenario {name:?}")))
}
