//! Directed schedules of the read-write lock: a race too narrow for the
//! random searches, steered step by step ("run p0 until its temporary is
//! written, stop it, run p1 until it sweeps") and written down as the
//! bytes a kept schedule holds, so that `cargo test` replays it through
//! [`FromBytes`](super::FromBytes) like any other.
//!
//! A [`Script`] runs one scenario of the catalogue with seed 1, exactly
//! as [`super::mutants::replay`] does, and records each decision as the
//! byte that replays it (see [`super::schedule`]'s table).

use super::runtime::Sim;
use super::scenario::scenarios;
use super::schedule::{Action, MAX_STEPS};
use crate::runtime::Violation;

/// How many of the trace's last lines a [`Lost`] shows.
const LOST_LINES: usize = 40;

/// A schedule being steered, and the bytes that replay it.
pub struct Script {
    sim: Sim,
    bytes: Vec<u8>,
    runnable: Vec<usize>,
}

/// Why a script could not go on.
#[derive(Debug)]
pub struct Lost(pub String);

impl Script {
    /// A script over scenario `which` of [`scenarios`].
    pub fn new(which: usize) -> Self {
        let all = scenarios();
        Script {
            sim: Sim::new(&all[which], 1, true),
            bytes: vec![u8::try_from(which).expect("fewer than 256 scenarios")],
            runnable: Vec::new(),
        }
    }

    fn position(&mut self, p: usize) -> Result<u8, Lost> {
        self.sim.runnable_into(&mut self.runnable);
        self.runnable
            .iter()
            .position(|&r| r == p)
            .and_then(|at| u8::try_from(at).ok())
            .filter(|&at| at < 32)
            .ok_or_else(|| self.lost(format!("p{p} cannot step")))
    }

    /// Runs process `p`'s next operation, answered by the server (`0`) or
    /// its host's cache (`1`).
    pub fn step_with(&mut self, p: usize, variant: u8) -> Result<(), Lost> {
        let at = self.position(p)?;
        let variant = variant.min(self.sim.alternatives(p) - 1);
        self.bytes.push(at | (variant << 5));
        self.sim.step(p, variant);
        Ok(())
    }

    /// Runs process `p`'s next operation, answered by the server.
    pub fn step(&mut self, p: usize) -> Result<(), Lost> {
        self.step_with(p, 0)
    }

    /// Steps process `p` (answers from `variant`) until a line it traced
    /// in a step contains `what`, at most `max` steps.
    pub fn until_with(
        &mut self,
        p: usize,
        variant: u8,
        what: &str,
        max: usize,
    ) -> Result<(), Lost> {
        let tag = format!(" p{p} ");
        for _ in 0..max {
            let before = self.sim.trace().len();
            self.step_with(p, variant)?;
            let trace = self.sim.trace();
            if trace[before..]
                .lines()
                .any(|l| l.contains(&tag) && l.contains(what))
            {
                return Ok(());
            }
            if self.sim.failed() {
                return Err(self.lost(format!("a violation before p{p} reached {what}")));
            }
        }
        Err(self.lost(format!("p{p} never reached {what:?} in {max} steps")))
    }

    /// [`Script::until_with`], answered by the server.
    pub fn until(&mut self, p: usize, what: &str, max: usize) -> Result<(), Lost> {
        self.until_with(p, 0, what, max)
    }

    /// Applies a fault now (`Kill` or `Pause` of a process among the first
    /// four runnable, `Suspend`, `Crash`).
    pub fn fault(&mut self, action: Action) -> Result<(), Lost> {
        self.sim.runnable_into(&mut self.runnable);
        let byte = match action {
            Action::Kill(p) | Action::Pause(p) => {
                let at = self.position(p)?;
                if at >= 4 {
                    return Err(self.lost(format!("p{p} is past the fourth runnable")));
                }
                match action {
                    Action::Kill(_) => 0xf0 + at,
                    _ => 0xf4 + at,
                }
            }
            Action::Suspend(h) => 0xf8 + u8::try_from(h).unwrap_or(3).min(3),
            Action::Crash(n) => 0xfc + u8::try_from(n).unwrap_or(3).min(3),
            Action::Step(..) => return Err(self.lost("a step is no fault".to_string())),
        };
        self.bytes.push(byte);
        super::schedule::apply(&mut self.sim, action);
        Ok(())
    }

    /// Runs the rest as a replay does once its bytes are spent (the first
    /// runnable process, answered by the server, within the replay's
    /// bound), then the progress check; whether a violation was found.
    pub fn finish(&mut self) -> bool {
        let mut steps = self.bytes.len() as u64 - 1;
        while steps < MAX_STEPS && !self.sim.failed() {
            self.sim.runnable_into(&mut self.runnable);
            let Some(&first) = self.runnable.first() else {
                break;
            };
            self.sim.step(first, 0);
            steps += 1;
        }
        self.sim.check_progress();
        self.sim.failed()
    }

    /// Why the script could not go on, with the trace's last lines.
    fn lost(&self, why: String) -> Lost {
        let trace = self.sim.trace();
        let tail: Vec<&str> = trace.lines().rev().take(LOST_LINES).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Lost(format!("{why}; the trace ended:\n{}", tail.join("\n")))
    }

    /// The last line process `p` traced.
    pub fn last_of(&self, p: usize) -> String {
        let tag = format!(" p{p} ");
        let trace = self.sim.trace();
        trace
            .lines()
            .rev()
            .find(|l| l.contains(&tag))
            .unwrap_or("")
            .to_string()
    }

    /// The violation found so far, if any.
    pub fn violation(&self) -> Option<Violation> {
        self.sim.violation()
    }

    /// The simulation.
    pub fn sim(&mut self) -> &mut Sim {
        &mut self.sim
    }

    /// The kept schedule: the scenario's index, then a byte per decision.
    pub fn schedule(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}
