//! The command table: every command's name, arity, flags, key positions and
//! handler, in the shape `COMMAND INFO` reports.
//!
//! Commands come in two kinds. *Data* commands run inside a [`Txn`] over the
//! shards of the keys they declare, so they are atomic and their writes are
//! committed as one log record. *Connection* commands touch only the
//! connection or server state (PING, CLIENT, CONFIG, ...).

use crate::client::ClientState;
use crate::state::Shared;
use bytes::Bytes;
use durakv_engine::txn::Txn;
use durakv_protocol::Frame;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::LazyLock;

/// Everything a handler may use besides its arguments.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub client: &'a mut ClientState,
}

impl Ctx<'_> {
    pub fn db(&self) -> usize {
        self.client.db
    }
}

/// What every handler returns: `Err` carries an error reply, so handlers
/// can use `?`; both arms are sent to the client alike.
pub type Reply = Result<Frame, Frame>;

/// The frame a reply sends, whichever arm it is.
pub fn into_frame(r: Reply) -> Frame {
    r.unwrap_or_else(|e| e)
}

pub type DataFn = fn(&mut Ctx<'_>, &mut Txn<'_>, &[Bytes]) -> Reply;
pub type ConnFn = fn(&mut Ctx<'_>, &[Bytes]) -> Reply;
/// A connection command whose reply must wait for an LSN (EXEC, WAITAOF).
pub type OutcomeFn = fn(&mut Ctx<'_>, &[Bytes]) -> crate::dispatch::Outcome;

#[derive(Clone, Copy)]
pub enum Handler {
    Data(DataFn),
    Conn(ConnFn),
    Outcome(OutcomeFn),
}

/// Where a command's keys are among its arguments (argument 0 is the name).
#[derive(Clone, Copy)]
pub enum Keys {
    None,
    /// Redis's (first, last, step); `last` may be negative (from the end).
    Range {
        first: i32,
        last: i32,
        step: i32,
    },
    /// Arguments that need parsing (e.g. `numkeys`); returns argument indexes.
    Custom(fn(&[Bytes]) -> Vec<usize>),
    /// Touches the whole keyspace (FLUSHALL, KEYS, SWAPDB): locks every shard.
    All,
}

pub mod flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const NOAUTH: u32 = 1 << 4;
    pub const FAST: u32 = 1 << 5;
    pub const LOADING: u32 = 1 << 6;
    pub const STALE: u32 = 1 << 7;
    pub const NOSCRIPT: u32 = 1 << 8;
    /// May not be queued inside MULTI (WATCH, MULTI itself).
    pub const NO_MULTI: u32 = 1 << 9;
    /// Executes immediately even inside MULTI (EXEC, DISCARD, QUIT, RESET).
    pub const MULTI_CONTROL: u32 = 1 << 10;
    /// May block the client (BLPOP...); only when the client sent it
    /// itself, not in MULTI or a script.
    pub const BLOCKING: u32 = 1 << 11;
    /// Not shown to MONITOR after it ran: scripts show themselves before.
    pub const SKIP_MONITOR: u32 = 1 << 12;

    // Flags only COMMAND reports (nothing in dispatch looks at them); they
    // come from `cmd::command_flags`, not from the command tables.
    pub const PUBSUB: u32 = 1 << 13;
    pub const SKIP_SLOWLOG: u32 = 1 << 14;
    pub const ASKING: u32 = 1 << 15;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 16;
    pub const NO_ASYNC_LOADING: u32 = 1 << 17;
    pub const ALLOW_BUSY: u32 = 1 << 18;
    /// Reported for a command whose keys need its arguments parsed (a
    /// [`super::Keys::Custom`]); never set in a table.
    pub const MOVABLEKEYS: u32 = 1 << 19;

    /// Names of the flags COMMAND reports, in the order Redis lists them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NOAUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

#[derive(Clone, Copy)]
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments (with the name), -N at least N.
    pub arity: i32,
    pub flags: u32,
    pub keys: Keys,
    pub handler: Handler,
    /// `COMMAND DOCS` group (string, hash, generic, connection, server, ...).
    pub group: &'static str,
    pub summary: &'static str,
    /// Position in the command table, assigned when the table is built
    /// (per-command statistics are indexed by it).
    pub id: usize,
    /// For a command whose arguments name keys it will read only once it
    /// runs (SORT's BY/GET patterns): true when this call needs every shard.
    pub lock_all_when: Option<fn(&[Bytes]) -> bool>,
    /// The keys COMMAND INFO / GETKEYS report when they differ from the
    /// ones dispatch locks (a script locks every shard, yet names its keys
    /// through `numkeys` as Redis reports them).
    pub reported_keys: Option<Keys>,
}

impl CommandSpec {
    pub fn is_write(&self) -> bool {
        self.flags & flags::WRITE != 0
    }

    /// FLUSHALL, FLUSHDB, SWAPDB: writes to every key of a database,
    /// whatever their arguments.
    pub fn writes_every_key(&self) -> bool {
        self.is_write() && matches!(self.keys, Keys::All) && self.reported_keys.is_none()
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Builder: lock every shard for the calls `f` picks.
    pub const fn locking_all_when(mut self, f: fn(&[Bytes]) -> bool) -> CommandSpec {
        self.lock_all_when = Some(f);
        self
    }

    /// Builder: report `keys` to COMMAND INFO / GETKEYS instead of the
    /// locking ones.
    pub const fn reporting_keys(mut self, keys: Keys) -> CommandSpec {
        self.reported_keys = Some(keys);
        self
    }

    /// The key positions clients are told about.
    pub fn shown_keys(&self) -> Keys {
        self.reported_keys.unwrap_or(self.keys)
    }

    /// Whether this call must lock every shard rather than its keys'.
    pub fn locks_all(&self, args: &[Bytes]) -> bool {
        matches!(self.keys, Keys::All) || self.lock_all_when.is_some_and(|f| f(args))
    }

    /// Indexes of key arguments, for locking and WATCH.
    pub fn key_indexes(&self, args: &[Bytes]) -> KeyIndexes {
        key_indexes_of(self.keys, args)
    }

    /// (first, last, step) as COMMAND INFO reports them.
    pub fn key_triple(&self) -> (i64, i64, i64) {
        match self.keys {
            Keys::Range { first, last, step } => (first as i64, last as i64, step as i64),
            Keys::Custom(_) => (1, 1, 1),
            Keys::None | Keys::All => (0, 0, 0),
        }
    }
}

/// Positions of a request's keys: on the stack for the few keys of nearly
/// every command.
pub type KeyIndexes = SmallVec<[usize; 4]>;

/// Indexes of the arguments `keys` names in `args`.
pub fn key_indexes_of(keys: Keys, args: &[Bytes]) -> KeyIndexes {
    match keys {
        Keys::None | Keys::All => KeyIndexes::new(),
        Keys::Custom(f) => f(args).into(),
        Keys::Range { first, last, step } => {
            let n = args.len() as i32;
            let last = if last < 0 { n + last } else { last };
            let mut out = KeyIndexes::new();
            let mut i = first;
            while i <= last && i < n && step > 0 {
                out.push(i as usize);
                i += step;
            }
            out
        }
    }
}

/// Builds a spec with the common defaults; command modules use it in their tables.
pub const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: Keys,
    handler: Handler,
    group: &'static str,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        handler,
        group,
        summary,
        id: 0,
        lock_all_when: None,
        reported_keys: None,
    }
}

/// Key range helpers for the common shapes.
pub const NO_KEYS: Keys = Keys::None;
pub const FIRST_KEY: Keys = Keys::Range {
    first: 1,
    last: 1,
    step: 1,
};
/// Source and destination (LMOVE, SMOVE, RENAME, COPY, LCS).
pub const TWO_KEYS: Keys = Keys::Range {
    first: 1,
    last: 2,
    step: 1,
};
pub const ALL_ARGS_KEYS: Keys = Keys::Range {
    first: 1,
    last: -1,
    step: 1,
};

/// Every command by its lower-case name. Looked up once per request, so
/// keyed by bytes (no UTF-8 check) and hashed with ahash rather than
/// SipHash, whose resistance to chosen keys buys nothing for a fixed table.
pub static COMMANDS: LazyLock<HashMap<&'static [u8], CommandSpec, ahash::RandomState>> =
    LazyLock::new(|| {
        let mut m = HashMap::with_hasher(ahash::RandomState::new());
        for (id, mut spec) in crate::cmd::all_commands().into_iter().enumerate() {
            spec.id = id;
            let prev = m.insert(spec.name.as_bytes(), spec);
            assert!(prev.is_none(), "command {} registered twice", spec.name);
        }
        m
    });

/// Looks a command up by the name a client sends, case-insensitively,
/// without allocating for names of ordinary length: after `rename-command`,
/// by its new name, and not at all by its old one.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let Some(r) = RENAMES.get() else {
        return lookup_original(name);
    };
    match lookup_original(name) {
        Some(spec) if !r.away.contains(&spec.name) => Some(spec),
        _ => r.renamed_to(name),
    }
}

/// Looks a command up by its own name, whatever `rename-command` did:
/// for the server's internal uses of a command.
pub fn lookup_original(name: &[u8]) -> Option<&'static CommandSpec> {
    if let Ok(Some(spec)) = LAST_FOUND.try_with(|last| last.get().and_then(|l| l.matches(name))) {
        return Some(spec);
    }
    let found = lookup_in_table(name)?;
    if name.len() <= LAST_NAME_BYTES {
        let mut bytes = [0u8; LAST_NAME_BYTES];
        bytes[..name.len()].copy_from_slice(name);
        let last = LastFound {
            len: name.len() as u8,
            bytes,
            spec: found,
        };
        let _ = LAST_FOUND.try_with(|l| l.set(Some(last)));
    }
    Some(found)
}

fn lookup_in_table(name: &[u8]) -> Option<&'static CommandSpec> {
    const MAX_NAME_BYTES: usize = 32;
    if name.len() > MAX_NAME_BYTES {
        return None;
    }
    let mut buf = [0u8; MAX_NAME_BYTES];
    let lower = &mut buf[..name.len()];
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    COMMANDS.get(&*lower)
}

/// Longest name [`LAST_FOUND`] keeps.
const LAST_NAME_BYTES: usize = 22;

/// A name as a client sent it, and the command it named.
#[derive(Clone, Copy)]
struct LastFound {
    len: u8,
    bytes: [u8; LAST_NAME_BYTES],
    spec: &'static CommandSpec,
}

impl LastFound {
    fn matches(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        (self.bytes.get(..usize::from(self.len)) == Some(name)).then_some(self.spec)
    }
}

thread_local! {
    /// The last name this thread found in the table, as sent: a pipeline
    /// repeats one command, and clients of one application send the same
    /// few, each time spelled the same way. Comparing the bytes costs less
    /// than half of lowering and hashing them.
    static LAST_FOUND: std::cell::Cell<Option<LastFound>> = const { std::cell::Cell::new(None) };
}

/// What `rename-command` lines did, fixed at start as in Redis.
struct Renames {
    /// New lower-case name to the command.
    to: HashMap<Vec<u8>, &'static CommandSpec>,
    /// Commands no longer reachable by their own name.
    away: Vec<&'static str>,
}

impl Renames {
    fn renamed_to(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        self.to.get(&name.to_ascii_lowercase()).copied()
    }
}

static RENAMES: std::sync::OnceLock<Renames> = std::sync::OnceLock::new();

/// Redis's checks of one `rename-command OLD NEW` after the pairs `done`:
/// OLD must be a command not renamed already, NEW neither a command nor
/// another rename's new name.
pub fn check_rename(done: &[(String, String)], old: &str, new: &str) -> Result<(), String> {
    let renamed_away = done.iter().any(|(o, _)| o.eq_ignore_ascii_case(old));
    if lookup_original(old.as_bytes()).is_none() || renamed_away {
        return Err("No such command in rename-command".into());
    }
    let taken = lookup_original(new.as_bytes()).is_some()
        || done
            .iter()
            .any(|(_, n)| !n.is_empty() && n.eq_ignore_ascii_case(new));
    if taken {
        return Err("Target command name already exists".into());
    }
    Ok(())
}

/// Applies `rename-command OLD NEW` pairs (NEW empty: the command is gone),
/// once, at start, with Redis's checks. Later calls are refused.
pub fn install_renames(pairs: &[(String, String)]) -> Result<(), String> {
    if pairs.is_empty() {
        return Ok(());
    }
    let mut r = Renames {
        to: HashMap::new(),
        away: Vec::new(),
    };
    for (i, (old, new)) in pairs.iter().enumerate() {
        check_rename(&pairs[..i], old, new).map_err(|e| format!("{e}: {old} {new}"))?;
        let Some(spec) = lookup_original(old.as_bytes()) else {
            continue;
        };
        r.away.push(spec.name);
        if !new.is_empty() {
            r.to.insert(new.to_ascii_lowercase().into_bytes(), spec);
        }
    }
    RENAMES
        .set(r)
        .map_err(|_| "rename-command was already applied".to_string())
}
