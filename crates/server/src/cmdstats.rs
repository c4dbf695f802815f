//! INFO commandstats and errorstats: per command (and per subcommand, as
//! `client|list`) calls, time, rejections and failures, and per error code
//! the number of error replies. Cheap enough for every command: one clock
//! read around the handler and a few relaxed atomic adds on counters
//! indexed by the command's table position.

use crate::command::{CommandSpec, COMMANDS};
use durakv_protocol::Frame;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Redis keeps at most this many distinct error codes; replies with later
/// new codes count only in `total_error_replies`.
const MAX_ERROR_CODES: usize = 128;

#[derive(Default)]
struct Counters {
    calls: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    fn reset(&self) {
        for c in [&self.calls, &self.usec, &self.rejected, &self.failed] {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn line(&self, out: &mut String, name: &str) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (calls, usec) = (get(&self.calls), get(&self.usec));
        let (rejected, failed) = (get(&self.rejected), get(&self.failed));
        if calls + rejected + failed == 0 {
            return;
        }
        let per_call = if calls > 0 {
            usec as f64 / calls as f64
        } else {
            0.0
        };
        let _ = write!(
            out,
            "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n"
        );
    }
}

pub struct CommandStats {
    /// Indexed by `CommandSpec::id`.
    by_id: Box<[Counters]>,
    /// `container|sub` → counters; subcommands are rare enough for a lock.
    subs: Mutex<HashMap<String, Counters>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats {
            by_id: (0..COMMANDS.len()).map(|_| Counters::default()).collect(),
            subs: Mutex::new(HashMap::new()),
            errors: Mutex::new(BTreeMap::new()),
        }
    }
}

impl CommandStats {
    /// Runs `counters` on the subcommand's entry when `sub` names one
    /// (`client|list`), else on the command's.
    fn with(&self, spec: &CommandSpec, sub: &str, f: impl FnOnce(&Counters)) {
        if sub.contains('|') {
            f(self.subs.lock().entry(sub.to_string()).or_default());
        } else if let Some(c) = self.by_id.get(spec.id) {
            f(c);
        }
    }

    /// A command that ran; `failed` when it answered with an error.
    pub fn call(&self, spec: &CommandSpec, sub: &str, took: Duration, failed: bool) {
        self.with(spec, sub, |c| {
            c.calls.fetch_add(1, Ordering::Relaxed);
            c.usec.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            if failed {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    /// A blocked command whose wait ended with an error: its call was
    /// counted when it blocked, its failure only now.
    pub fn failed_after_block(&self, spec: &CommandSpec) {
        self.with(spec, "", |c| {
            c.failed.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// A command refused before it ran (arity, auth, a busy script, ...).
    pub fn rejected(&self, spec: &CommandSpec) {
        self.with(spec, "", |c| {
            c.rejected.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// Counts an error reply under its code (the error's first word); the
    /// total is INFO stats' `total_error_replies`, counted as replies go out.
    pub fn error_reply(&self, frame: &Frame) {
        let Frame::Error(text) = frame else {
            return;
        };
        let code = text
            .split(|&b| b == b' ')
            .next()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .unwrap_or_default();
        let mut errors = self.errors.lock();
        if let Some(n) = errors.get_mut(&code) {
            *n += 1;
        } else if errors.len() < MAX_ERROR_CODES {
            errors.insert(code, 1);
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        self.by_id.iter().for_each(Counters::reset);
        self.subs.lock().clear();
        self.errors.lock().clear();
    }

    /// The body of INFO commandstats, sorted by name.
    pub fn commandstats(&self) -> String {
        let mut out = String::new();
        let mut names: Vec<(&str, usize)> = COMMANDS.values().map(|s| (s.name, s.id)).collect();
        names.sort_unstable();
        for (name, id) in names {
            if let Some(c) = self.by_id.get(id) {
                c.line(&mut out, name);
            }
        }
        let subs = self.subs.lock();
        let mut sub_names: Vec<&String> = subs.keys().collect();
        sub_names.sort_unstable();
        for name in sub_names {
            subs[name].line(&mut out, name);
        }
        out
    }

    /// The body of INFO errorstats.
    pub fn errorstats(&self) -> String {
        let mut out = String::new();
        for (code, n) in self.errors.lock().iter() {
            let _ = write!(out, "errorstat_{code}:count={n}\r\n");
        }
        out
    }
}
