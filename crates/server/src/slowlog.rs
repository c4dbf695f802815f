//! SLOWLOG: the commands that ran for at least `slowlog-log-slower-than`
//! microseconds, newest first, at most `slowlog-max-len` of them.
//!
//! An entry is what Redis 7 keeps: an id that never repeats (RESET keeps
//! counting), the Unix time, the run time in microseconds, the arguments
//! as the client sent them (at most 32, each cut at 128 bytes, passwords
//! redacted as MONITOR redacts them), and the client's address and name.
//! EXEC is not logged (the commands it ran are, one by one), a blocked
//! command is logged once its wait ends, and a command a script called is
//! logged with the address `?:0` and no name, as Redis's script client.
//!
//! The threshold is read from an atomic on every command; the lock is
//! taken only for a command that is logged.

use bytes::Bytes;
use durakv_protocol::Frame;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

/// Arguments shown per entry; past this many, the last place says how
/// many more there were.
const MAX_ARGS: usize = 32;
/// Bytes shown per argument; past this, the rest is counted.
const MAX_ARG_BYTES: usize = 128;

/// Who ran a logged command.
pub enum Who<'a> {
    Client {
        addr: &'a crate::client::Peer,
        name: Option<&'a Bytes>,
    },
    /// A command a script or function called.
    Script,
}

struct Entry {
    id: u64,
    unix_secs: u64,
    micros: u64,
    args: Vec<Bytes>,
    addr: Bytes,
    name: Bytes,
}

#[derive(Default)]
struct Log {
    next_id: u64,
    entries: VecDeque<Entry>,
}

pub struct SlowLog {
    /// Microseconds; negative turns logging off.
    slower_than: AtomicI64,
    max_len: AtomicUsize,
    log: Mutex<Log>,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            slower_than: AtomicI64::new(10_000),
            max_len: AtomicUsize::new(128),
            log: Mutex::new(Log::default()),
        }
    }
}

impl SlowLog {
    /// Takes `slowlog-log-slower-than` and `slowlog-max-len` from the
    /// configuration (at start-up and after CONFIG SET).
    pub fn configure(&self, slower_than: i64, max_len: usize) {
        self.slower_than.store(slower_than, Ordering::Relaxed);
        self.max_len.store(max_len, Ordering::Relaxed);
    }

    /// Logs a command that took `took`, if that is slow enough.
    pub fn note(&self, args: &[Bytes], took: Duration, who: Who<'_>) {
        let threshold = self.slower_than.load(Ordering::Relaxed);
        let micros = took.as_micros().min(u128::from(u64::MAX)) as u64;
        if threshold < 0 || micros < threshold as u64 {
            return;
        }
        let (addr, name) = match who {
            Who::Client { addr, name } => (
                Bytes::from(addr.to_string()),
                name.map(|n| Bytes::copy_from_slice(n)).unwrap_or_default(),
            ),
            Who::Script => (Bytes::from_static(b"?:0"), Bytes::new()),
        };
        let args = shown_args(args);
        let unix_secs = crate::util::now_ms() / 1000;
        let max_len = self.max_len.load(Ordering::Relaxed);
        let mut log = self.log.lock();
        let id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(Entry {
            id,
            unix_secs,
            micros,
            args,
            addr,
            name,
        });
        log.entries.truncate(max_len);
    }

    pub fn len(&self) -> usize {
        self.log.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        self.log.lock().entries.clear();
    }

    /// SLOWLOG GET: the newest `count` entries (all of them for None).
    pub fn get(&self, count: Option<usize>) -> Frame {
        let log = self.log.lock();
        let n = count.unwrap_or(usize::MAX).min(log.entries.len());
        Frame::Array(log.entries.iter().take(n).map(Entry::frame).collect())
    }
}

impl Entry {
    fn frame(&self) -> Frame {
        Frame::Array(vec![
            Frame::Integer(self.id as i64),
            Frame::Integer(self.unix_secs as i64),
            Frame::Integer(self.micros as i64),
            Frame::Array(self.args.iter().cloned().map(Frame::Bulk).collect()),
            Frame::Bulk(self.addr.clone()),
            Frame::Bulk(self.name.clone()),
        ])
    }
}

/// The arguments an entry keeps: redacted, and cut to size so that a
/// huge MSET costs the log little.
fn shown_args(args: &[Bytes]) -> Vec<Bytes> {
    let hidden = crate::monitor::redacted(args);
    let kept = if args.len() > MAX_ARGS {
        MAX_ARGS - 1
    } else {
        args.len()
    };
    let mut out: Vec<Bytes> = args[..kept]
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if hidden.contains(&i) {
                Bytes::from_static(b"(redacted)")
            } else if a.len() > MAX_ARG_BYTES {
                let mut s = a[..MAX_ARG_BYTES].to_vec();
                s.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes(),
                );
                Bytes::from(s)
            } else {
                // A copy: the argument is a slice of its request, which a
                // clone would keep whole for as long as the entry lives
                // (1 MB per entry of a 100,000-member SADD until
                // 2026-11-29).
                Bytes::copy_from_slice(a)
            }
        })
        .collect();
    if kept < args.len() {
        out.push(Bytes::from(format!(
            "... ({} more arguments)",
            args.len() - kept
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::tests::args;

    fn client() -> Who<'static> {
        static ADDR: std::sync::LazyLock<crate::client::Peer> = std::sync::LazyLock::new(|| {
            crate::client::Peer::Tcp("127.0.0.1:5000".parse().unwrap())
        });
        Who::Client {
            addr: &ADDR,
            name: None,
        }
    }

    fn logged(log: &SlowLog) -> Vec<Vec<Frame>> {
        match log.get(None) {
            Frame::Array(es) => es
                .into_iter()
                .map(|e| match e {
                    Frame::Array(f) => f,
                    _ => panic!("entry not an array"),
                })
                .collect(),
            _ => panic!("not an array"),
        }
    }

    #[test]
    fn threshold_and_length_bound_what_is_kept() {
        let log = SlowLog::default();
        log.configure(100, 2);
        log.note(&args(&["ping"]), Duration::from_micros(99), client());
        assert!(log.is_empty());
        for cmd in ["a", "b", "c"] {
            log.note(&args(&[cmd]), Duration::from_micros(100), client());
        }
        let es = logged(&log);
        assert_eq!(es.len(), 2);
        // Newest first; ids keep counting past the trimmed one.
        assert_eq!(es[0][0], Frame::Integer(2));
        assert_eq!(es[0][3], Frame::Array(vec![Frame::Bulk("c".into())]));
        assert_eq!(es[1][0], Frame::Integer(1));
        log.reset();
        log.note(&args(&["d"]), Duration::from_micros(500), client());
        assert_eq!(logged(&log)[0][0], Frame::Integer(3));
        assert_eq!(logged(&log)[0][2], Frame::Integer(500));
        log.configure(-1, 2);
        log.note(&args(&["e"]), Duration::from_secs(5), client());
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn long_commands_are_cut_and_passwords_hidden() {
        let mut many = vec!["sadd".to_string(), "set".to_string()];
        many.extend((3..=33).map(|i| i.to_string()));
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let shown = shown_args(&args(&many));
        assert_eq!(shown.len(), 32);
        assert_eq!(shown[30], Bytes::from("31"));
        assert_eq!(shown[31], Bytes::from("... (2 more arguments)"));

        let long = "A".repeat(129);
        let shown = shown_args(&args(&["sadd", "set", &long]));
        assert_eq!(
            shown[2],
            Bytes::from(format!("{}... (1 more bytes)", "A".repeat(128)))
        );

        let shown = shown_args(&args(&["acl", "setuser", "u", "on", ">pw"]));
        assert!(shown[2..].iter().all(|a| a == "(redacted)"));
        assert_eq!(shown.len(), 5);
        let shown = shown_args(&args(&["CONFIG", "SET", "masterauth", "pw"]));
        assert_eq!(shown[3], Bytes::from("(redacted)"));
        let shown = shown_args(&args(&["config", "set", "maxmemory", "1mb"]));
        assert_eq!(shown[3], Bytes::from("1mb"));
    }

    #[test]
    fn script_commands_have_no_client() {
        let log = SlowLog::default();
        log.configure(0, 10);
        log.note(&args(&["set", "k", "v"]), Duration::ZERO, Who::Script);
        let e = &logged(&log)[0];
        assert_eq!(e[4], Frame::Bulk("?:0".into()));
        assert_eq!(e[5], Frame::Bulk(Bytes::new()));
    }
}
