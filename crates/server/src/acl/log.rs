//! `ACL LOG`: recent denials, newest first, with repeats folded into one
//! entry while they keep coming.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// What was denied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the denied command came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: String,
    pub username: String,
    pub client_info: String,
    pub entry_id: u64,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// Entries a repeat may fold into are looked for among the newest few,
/// and only while the last one is recent.
const FOLD_SCAN: usize = 10;
const FOLD_WINDOW_MS: u64 = 60_000;

#[derive(Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
    next_id: u64,
}

impl AclLog {
    pub fn add(&mut self, mut e: Entry, max_len: usize) {
        let found = self.entries.iter().take(FOLD_SCAN).position(|x| {
            x.reason == e.reason
                && x.context == e.context
                && x.object == e.object
                && x.username == e.username
                && e.updated_ms.saturating_sub(x.updated_ms) < FOLD_WINDOW_MS
        });
        match found.and_then(|i| self.entries.remove(i)) {
            Some(mut x) => {
                x.count += 1;
                x.updated_ms = e.updated_ms;
                x.client_info = e.client_info;
                self.entries.push_front(x);
            }
            None => {
                e.entry_id = self.next_id;
                self.next_id += 1;
                self.entries.push_front(e);
            }
        }
        self.entries.truncate(max_len);
    }

    pub fn newest(&self, n: usize) -> impl Iterator<Item = &Entry> {
        self.entries.iter().take(n)
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }
}

/// INFO stats' `acl_access_denied_*`.
#[derive(Default)]
pub struct DeniedCounters {
    pub auth: AtomicU64,
    pub cmd: AtomicU64,
    pub key: AtomicU64,
    pub channel: AtomicU64,
}

impl DeniedCounters {
    pub fn count(&self, r: Reason) {
        let c = match r {
            Reason::Auth => &self.auth,
            Reason::Command => &self.cmd,
            Reason::Key => &self.key,
            Reason::Channel => &self.channel,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, at: u64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Command,
            context: Context::Toplevel,
            object: object.into(),
            username: "u".into(),
            client_info: String::new(),
            entry_id: 0,
            created_ms: at,
            updated_ms: at,
        }
    }

    #[test]
    fn repeats_fold_into_one_entry_until_they_stop() {
        let mut log = AclLog::default();
        log.add(entry("get", 0), 128);
        log.add(entry("set", 10), 128);
        log.add(entry("get", 20), 128);
        let v: Vec<_> = log
            .newest(10)
            .map(|e| (e.object.clone(), e.count))
            .collect();
        assert_eq!(v, vec![("get".into(), 2), ("set".into(), 1)]);
        log.add(entry("get", 20 + FOLD_WINDOW_MS), 128);
        assert_eq!(log.newest(10).count(), 3);
        log.add(entry("x", 0), 2);
        assert_eq!(log.newest(10).count(), 2);
        assert_eq!(log.newest(1).next().unwrap().entry_id, 3);
    }
}
