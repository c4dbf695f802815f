//! The randomized model test shared by `model_crash.rs` (the real binary,
//! killed with SIGKILL) and `model_powerloss.rs` (an in-process server on an
//! in-memory fault-injecting disk): the operation generator, the oracle, and
//! the crash checker. Included by those files with
//! `#[path = "common/model.rs"] mod model;` so other test binaries do not
//! compile it.
//!
//! # What is checked
//!
//! The server runs with [`DBS`] databases: 0 and 1 at `full`, 2 at `none`
//! ([`NONE_DB`]), 3 at `delayed` ([`DELAYED_DB`]). The semantics under test:
//!
//! - A `none` database is never logged; every write to a logged (`full` or
//!   `delayed`) database is logged, whatever the connection's level.
//!   `CLIENT DURABILITY full|delayed|none|default` only decides when that
//!   connection's replies go out (`none` in a logged database acts like
//!   `delayed`). A command writing several databases takes the strictest
//!   level among them. A value moving from an unlogged database into a logged
//!   one (MOVE, COPY ... DB, SWAPDB) is logged whole.
//! - After any crash (kill -9, or power loss) the server starts by itself,
//!   every write acknowledged at `full` is present, and the logged
//!   databases' state equals the state after some prefix of the commit order.
//!
//! # How
//!
//! One driver issues operations strictly one after the other (send, wait for
//! the reply, then the next) over [`CONNS`] connections picked at random,
//! each with its own random `CLIENT DURABILITY` and `SELECT`ed database,
//! changed now and then. Since every operation completes before the next is
//! sent, commit order is issue order.
//!
//! The oracle is the live server itself: after every operation an observer
//! connection (`CLIENT DURABILITY none`, so its reads are never held) reads
//! every key of every logged database back ([`observe`]) into a canonical
//! [`Snapshot`]. `history[i]` is the state after operation `i`; the test never
//! re-implements Redis.
//!
//! Streams are compared by what does not follow the clock: the entries,
//! last-generated-id, max-deleted-entry-id and entries-added, and per group
//! its last-delivered-id, entries-read, lag, consumers with their pending
//! counts, and PEL (id, consumer, delivery count); never idle, delivery or
//! seen times. After every operation a stream is read with one
//! `XINFO STREAM key FULL COUNT 0`; a recovered state is read once more with
//! XRANGE, XINFO STREAM / GROUPS / CONSUMERS and XPENDING, and both reads
//! must agree. Explicit XADD IDs lie far above the clock, so `*` after one
//! takes the next sequence number; XCLAIM/XAUTOCLAIM use a min-idle-time of
//! 0 or an hour, which only entries an `IDLE 7200000` claim aged pass.
//!
//! An operation counts as *acknowledged at full* when its reply arrived, it
//! changed a logged database (seen by comparing snapshots), and its level was
//! `full`: the connection's `CLIENT DURABILITY full`, or no connection level
//! and a `full` database among those it changed. After a crash and restart
//! the recovered snapshot must equal `history[p]` for some `p` at or after the
//! last such operation (and at or after the state the last recovery
//! established, see [`CrashKind`]); keys that expire before the comparison
//! time plus [`EXPIRY_MARGIN_MS`] are dropped from both sides.
//!
//! The crash happens between operations (never with a request in flight), at
//! a random moment: right after a reply, a few milliseconds later (so
//! `delayed` records may or may not have been flushed), or while a BGSAVE
//! checkpoint runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Number of databases the server is started with.
pub const DBS: usize = 4;
/// The database configured `durability-db-2 none`.
pub const NONE_DB: usize = 2;
/// The database configured `durability-db-3 delayed`.
pub const DELAYED_DB: usize = 3;
/// Keys per database: `k0` .. `k11`.
pub const KEYS: usize = 12;
/// Driver connections.
pub const CONNS: usize = 4;
/// Keys expiring before (comparison time + this) are ignored on both sides.
pub const EXPIRY_MARGIN_MS: u64 = 150;
/// How long a reply may take before the test gives up (a reply held forever
/// is a failure too).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

/// The server configuration of the model tests, as (directive, value); used
/// as `--directive value` flags and with `Config::set`. `databases` first.
pub const DIRECTIVES: &[(&str, &str)] = &[
    ("databases", "4"),
    ("durability-db-2", "none"),
    ("durability-db-3", "delayed"),
    ("delayed-flush-ms", "25"),
    ("wal-segment-size-mb", "1"),
    ("checkpoint-wal-size-mb", "1"),
    ("checkpoint-keep", "1"),
    ("hz", "50"),
    // Small stream nodes: a few entries span several, so XDEL, trims
    // (`~` ones trim whole nodes) and checkpoints meet node boundaries.
    ("stream-node-max-entries", "4"),
];

/// [`DIRECTIVES`] as command-line flags.
pub fn server_flags() -> Vec<String> {
    DIRECTIVES
        .iter()
        .flat_map(|(k, v)| [format!("--{k}"), v.to_string()])
        .collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Delayed,
    Full,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Delayed => "delayed",
            Level::Full => "full",
        }
    }
}

/// The configured level of database `db`.
pub fn db_level(db: usize) -> Level {
    match db {
        NONE_DB => Level::None,
        DELAYED_DB => Level::Delayed,
        _ => Level::Full,
    }
}

/// The databases whose writes are logged (compared after a crash).
pub fn logged_dbs() -> Vec<usize> {
    (0..DBS).filter(|&d| db_level(d) != Level::None).collect()
}

// ---------------------------------------------------------------------------
// A minimal RESP2 client: full control over pipelining and timeouts.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(String),
    Nil,
    Array(Vec<Reply>),
    NilArray,
}

impl Reply {
    pub fn text(&self) -> Option<&str> {
        match self {
            Reply::Status(s) | Reply::Bulk(s) => Some(s),
            _ => None,
        }
    }

    pub fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn items(&self) -> &[Reply] {
        match self {
            Reply::Array(v) => v,
            _ => &[],
        }
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Status(s) => write!(f, "{s}"),
            Reply::Error(e) => write!(f, "(error) {e}"),
            Reply::Int(i) => write!(f, "(integer) {i}"),
            Reply::Bulk(s) => write!(f, "{s:?}"),
            Reply::Nil => write!(f, "(nil)"),
            Reply::NilArray => write!(f, "(nil array)"),
            Reply::Array(v) => {
                write!(f, "[")?;
                for (i, r) in v.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{r}")?;
                }
                write!(f, "]")
            }
        }
    }
}

pub struct Resp {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

pub type Cmd = Vec<String>;

pub fn cmd(args: &[&str]) -> Cmd {
    args.iter().map(|s| s.to_string()).collect()
}

pub fn show(c: &[String]) -> String {
    c.join(" ")
}

fn encode(out: &mut Vec<u8>, c: &[String]) {
    out.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
    for a in c {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

impl Resp {
    pub fn connect(port: u16) -> io::Result<Resp> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(REPLY_TIMEOUT))?;
        s.set_nodelay(true)?;
        Ok(Resp {
            w: s.try_clone()?,
            r: BufReader::new(s),
        })
    }

    /// Sends all of `cmds` in one write (a pipeline).
    pub fn send(&mut self, cmds: &[Cmd]) -> io::Result<()> {
        let mut buf = Vec::new();
        for c in cmds {
            encode(&mut buf, c);
        }
        self.w.write_all(&buf)
    }

    pub fn read(&mut self) -> io::Result<Reply> {
        let mut line = String::new();
        if self.r.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        let line = line.trim_end_matches(['\r', '\n']);
        let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad reply {line:?}"));
        let (kind, rest) = line.split_at(line.len().min(1));
        Ok(match kind {
            "+" => Reply::Status(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(rest.parse().map_err(|_| bad())?),
            "$" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    Reply::Nil
                } else {
                    let mut buf = vec![0u8; n as usize + 2];
                    self.r.read_exact(&mut buf)?;
                    buf.truncate(n as usize);
                    Reply::Bulk(String::from_utf8_lossy(&buf).into_owned())
                }
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    Reply::NilArray
                } else {
                    let mut v = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        v.push(self.read()?);
                    }
                    Reply::Array(v)
                }
            }
            _ => return Err(bad()),
        })
    }

    /// Sends a pipeline and reads one reply per command.
    pub fn pipeline(&mut self, cmds: &[Cmd]) -> io::Result<Vec<Reply>> {
        self.send(cmds)?;
        cmds.iter().map(|_| self.read()).collect()
    }

    pub fn call(&mut self, c: &[&str]) -> io::Result<Reply> {
        self.send(&[cmd(c)])?;
        self.read()
    }
}

// ---------------------------------------------------------------------------
// The oracle: canonical snapshots of the live state.

/// A value, normalized: hash fields and set members sorted; sorted sets in
/// ZRANGE order (score, then member) with the server's score text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Str(String),
    Hash(BTreeMap<String, String>),
    List(Vec<String>),
    Set(BTreeSet<String>),
    Zset(Vec<(String, String)>),
    Stream(StreamVal),
}

/// A stream's state that does not depend on the clock: the entries, the
/// counters XINFO STREAM shows, and the groups. Numbers and IDs are kept as
/// the server's reply text. Node layout (radix-tree-*) is left out: it
/// follows the configuration, not the content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamVal {
    /// XRANGE - +: (id, flat field/value list).
    pub entries: Vec<(String, Vec<String>)>,
    pub last_id: String,
    pub max_deleted_id: String,
    pub entries_added: String,
    pub groups: BTreeMap<String, GroupVal>,
}

/// A consumer group without idle and seen times (they follow the clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupVal {
    pub last_delivered_id: String,
    pub entries_read: String,
    pub lag: String,
    /// Consumer name -> its pending count.
    pub consumers: BTreeMap<String, i64>,
    /// XPENDING - +: (id, consumer, delivery count).
    pub pel: Vec<(String, String, i64)>,
}

impl std::fmt::Display for StreamVal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[")?;
        for (i, (id, fv)) in self.entries.iter().enumerate() {
            if i > 0 {
                write!(f, " ")?;
            }
            write!(f, "{id}{fv:?}")?;
        }
        write!(
            f,
            "] last-id {} max-deleted {} added {}",
            self.last_id, self.max_deleted_id, self.entries_added
        )?;
        for (name, g) in &self.groups {
            write!(
                f,
                "; group {name}: last-delivered {} entries-read {} lag {} consumers {:?} pel [",
                g.last_delivered_id, g.entries_read, g.lag, g.consumers
            )?;
            for (i, (id, c, n)) in g.pel.iter().enumerate() {
                if i > 0 {
                    write!(f, " ")?;
                }
                write!(f, "{id} {c} x{n}")?;
            }
            write!(f, "]")?;
        }
        Ok(())
    }
}

impl Val {
    /// The name TYPE gives it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Str(_) => "string",
            Val::Hash(_) => "hash",
            Val::List(_) => "list",
            Val::Set(_) => "set",
            Val::Zset(_) => "zset",
            Val::Stream(_) => "stream",
        }
    }
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::Str(s) => write!(f, "string {s:?}"),
            Val::Hash(h) => write!(f, "hash {h:?}"),
            Val::List(l) => write!(f, "list {l:?}"),
            Val::Set(s) => write!(f, "set {s:?}"),
            Val::Zset(z) => write!(f, "zset {z:?}"),
            Val::Stream(x) => write!(f, "stream {x}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub val: Val,
    /// Absolute expire time in Unix ms (PEXPIRETIME), or -1.
    pub expire_ms: i64,
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.expire_ms < 0 {
            write!(f, "{}", self.val)
        } else {
            write!(f, "{} (expires at {})", self.val, self.expire_ms)
        }
    }
}

/// The logged databases' keys at one moment.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub dbs: BTreeMap<usize, BTreeMap<String, Item>>,
    /// Server time (TIME) when the read finished, ms.
    pub time_ms: u64,
}

pub type View<'a> = BTreeMap<usize, BTreeMap<&'a str, &'a Item>>;

impl Snapshot {
    /// The comparable part: logged databases, without keys that expire
    /// before `cutoff_ms`.
    pub fn view(&self, cutoff_ms: u64) -> View<'_> {
        self.dbs
            .iter()
            .map(|(&db, keys)| {
                let kept = keys
                    .iter()
                    .filter(|(_, it)| it.expire_ms < 0 || it.expire_ms as u64 >= cutoff_ms)
                    .map(|(k, it)| (k.as_str(), it))
                    .collect();
                (db, kept)
            })
            .collect()
    }
}

pub fn key_name(i: usize) -> String {
    format!("k{i}")
}

fn time_ms(r: &Reply) -> Option<u64> {
    let it = r.items();
    let secs: u64 = it.first()?.text()?.parse().ok()?;
    let us: u64 = it.get(1)?.text()?.parse().ok()?;
    Some(secs * 1000 + us / 1000)
}

fn strings(r: &Reply) -> Vec<String> {
    r.items()
        .iter()
        .filter_map(|x| x.text().map(String::from))
        .collect()
}

/// How [`observe`] reads a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamRead {
    /// One `XINFO STREAM key FULL COUNT 0`: the snapshot after every
    /// operation, where a debug build's per-command cost adds up.
    Full,
    /// XRANGE, XINFO STREAM, XINFO GROUPS, and per group XPENDING and XINFO
    /// CONSUMERS: a recovered state is read both ways and must agree.
    Commands,
}

/// The commands that read a key of type `t`, or `None` for a type the model
/// does not know. Each reads the whole value in one reply, except a stream
/// read with [`StreamRead::Commands`] ([`STREAM_READS`] replies): its
/// entries, XINFO STREAM, XINFO GROUPS, and the PEL and consumers of every
/// group name the generator uses, whether the group exists or not (its
/// NOGROUP error is ignored then), so that no third round trip is needed.
fn value_reads(t: &str, k: &str, how: StreamRead) -> Option<Vec<Cmd>> {
    Some(match t {
        "string" => vec![cmd(&["GET", k])],
        "hash" => vec![cmd(&["HGETALL", k])],
        "list" => vec![cmd(&["LRANGE", k, "0", "-1"])],
        "set" => vec![cmd(&["SMEMBERS", k])],
        "zset" => vec![cmd(&["ZRANGE", k, "0", "-1", "WITHSCORES"])],
        "stream" if how == StreamRead::Full => {
            vec![cmd(&["XINFO", "STREAM", k, "FULL", "COUNT", "0"])]
        }
        "stream" => {
            let mut out = vec![
                cmd(&["XRANGE", k, "-", "+"]),
                cmd(&["XINFO", "STREAM", k]),
                cmd(&["XINFO", "GROUPS", k]),
            ];
            for g in GROUPS {
                out.push(cmd(&["XPENDING", k, g, "-", "+", "1000000"]));
                out.push(cmd(&["XINFO", "CONSUMERS", k, g]));
            }
            out
        }
        _ => return None,
    })
}

/// The consumer group names the generator uses.
const GROUPS: [&str; 2] = ["g0", "g1"];

/// Replies per stream key in [`value_reads`].
const STREAM_READS: usize = 3 + 2 * GROUPS.len();

/// The pairs of a RESP2 map reply (a flat array of names and values).
fn map_fields(r: &Reply) -> BTreeMap<&str, &Reply> {
    r.items()
        .chunks(2)
        .filter_map(|p| Some((p.first()?.text()?, p.get(1)?)))
        .collect()
}

/// Stream entries as XRANGE replies them: (id, flat field/value list).
fn entries_of(r: &Reply) -> Option<Vec<(String, Vec<String>)>> {
    r.items()
        .iter()
        .map(|e| {
            let id = e.items().first()?.text()?.to_string();
            Some((id, strings(e.items().get(1)?)))
        })
        .collect()
}

/// PEL rows as XPENDING and XINFO STREAM FULL reply them (id, consumer,
/// idle or delivery time, count): (id, consumer, count).
fn pel_of(r: &Reply) -> Option<Vec<(String, String, i64)>> {
    r.items()
        .iter()
        .map(|p| {
            let it = p.items();
            Some((
                it.first()?.text()?.to_string(),
                it.get(1)?.text()?.to_string(),
                it.get(3)?.int()?,
            ))
        })
        .collect()
}

/// Consumers (maps with a name) -> their pending count, the `count` field.
fn consumers_of(r: &Reply, count: &str) -> Option<BTreeMap<String, i64>> {
    r.items()
        .iter()
        .map(|c| {
            let c = map_fields(c);
            Some((c.get("name")?.text()?.to_string(), c.get(count)?.int()?))
        })
        .collect()
}

/// A scalar reply as plain text: `1-0`, `5`, `(nil)`.
fn plain(r: &Reply) -> String {
    match r {
        Reply::Status(s) | Reply::Bulk(s) => s.clone(),
        Reply::Int(i) => i.to_string(),
        other => other.to_string(),
    }
}

/// A stream from its [`STREAM_READS`] replies; `None` if a read failed or a
/// group exists that the generator does not make.
fn stream_of(replies: &[&Reply]) -> Option<StreamVal> {
    let [range, info, groups, per_group @ ..] = replies else {
        return None;
    };
    if [range, info, groups]
        .iter()
        .any(|r| !matches!(r, Reply::Array(_)))
    {
        return None;
    }
    let mut out = StreamVal::new(entries_of(range)?, &map_fields(info))?;
    for g in groups.items() {
        let g = map_fields(g);
        let name = g.get("name")?.text()?.to_string();
        let at = GROUPS.iter().position(|x| *x == name)?;
        let [pending, consumers] = [per_group.get(2 * at)?, per_group.get(2 * at + 1)?];
        if !matches!(pending, Reply::Array(_)) || !matches!(consumers, Reply::Array(_)) {
            return None;
        }
        let group = GroupVal::new(&g, consumers_of(consumers, "pending")?, pel_of(pending)?)?;
        out.groups.insert(name, group);
    }
    Some(out)
}

/// A stream from its `XINFO STREAM FULL COUNT 0` reply (PEL delivery times
/// and consumer seen times left out); `None` if it is not one.
fn stream_of_full(full: &Reply) -> Option<StreamVal> {
    let info = map_fields(full);
    let mut out = StreamVal::new(entries_of(info.get("entries")?)?, &info)?;
    for g in info.get("groups")?.items() {
        let g = map_fields(g);
        let group = GroupVal::new(
            &g,
            consumers_of(g.get("consumers")?, "pel-count")?,
            pel_of(g.get("pending")?)?,
        )?;
        out.groups.insert(g.get("name")?.text()?.to_string(), group);
    }
    Some(out)
}

impl StreamVal {
    /// `entries` and the counters of XINFO STREAM's (FULL or not) `info`.
    fn new(entries: Vec<(String, Vec<String>)>, info: &BTreeMap<&str, &Reply>) -> Option<Self> {
        Some(StreamVal {
            entries,
            last_id: plain(info.get("last-generated-id")?),
            max_deleted_id: plain(info.get("max-deleted-entry-id")?),
            entries_added: plain(info.get("entries-added")?),
            groups: BTreeMap::new(),
        })
    }
}

impl GroupVal {
    /// A group from its XINFO GROUPS (or FULL) fields `g`.
    fn new(
        g: &BTreeMap<&str, &Reply>,
        consumers: BTreeMap<String, i64>,
        pel: Vec<(String, String, i64)>,
    ) -> Option<Self> {
        Some(GroupVal {
            last_delivered_id: plain(g.get("last-delivered-id")?),
            entries_read: plain(g.get("entries-read")?),
            lag: plain(g.get("lag")?),
            consumers,
            pel,
        })
    }
}

/// What a round of [`observe`] asks about one key.
#[derive(Clone, Debug)]
enum Probe {
    /// TYPE: the key is new, or its type changed.
    Type,
    /// The reads of this type, then PEXPIRETIME.
    Read(String),
}

/// The value of a key of type `t` from its [`value_reads`] replies; `None`
/// if the key reads as absent (an empty container that expired meanwhile),
/// `Err(None)` if a reply is WRONGTYPE (the type is not `t` any more).
fn value_of(t: &str, vs: &[&Reply], how: StreamRead) -> Result<Option<Val>, Option<String>> {
    if vs
        .iter()
        .any(|r| matches!(r, Reply::Error(e) if e.starts_with("WRONGTYPE")))
    {
        return Err(None);
    }
    let Some(v) = vs.first().copied() else {
        return Ok(None);
    };
    let val = match t {
        "string" => match v {
            Reply::Bulk(s) => Val::Str(s.clone()),
            _ => return Ok(None),
        },
        "hash" => Val::Hash(
            strings(v)
                .chunks(2)
                .map(|p| (p[0].clone(), p.get(1).cloned().unwrap_or_default()))
                .collect(),
        ),
        "list" => Val::List(strings(v)),
        "set" => Val::Set(strings(v).into_iter().collect()),
        "zset" => Val::Zset(
            strings(v)
                .chunks(2)
                .map(|p| (p[0].clone(), p.get(1).cloned().unwrap_or_default()))
                .collect(),
        ),
        _ => {
            let s = match how {
                StreamRead::Full => stream_of_full(v),
                StreamRead::Commands => stream_of(vs),
            };
            match s {
                Some(s) => Val::Stream(s),
                None => {
                    let replies: Vec<String> = vs.iter().map(|r| r.to_string()).collect();
                    return Err(Some(replies.join("; ")));
                }
            }
        }
    };
    // A stream may exist with no entries; the other containers not.
    let empty = match &val {
        Val::Hash(h) => h.is_empty(),
        Val::List(l) => l.is_empty(),
        Val::Set(s) => s.is_empty(),
        Val::Zset(z) => z.is_empty(),
        _ => false,
    };
    Ok((!empty).then_some(val))
}

/// Reads every key of every logged database, streams the `how` way. `obs`
/// must be a connection that nothing else uses (it is re-SELECTed freely).
///
/// A key `prev` (the previous snapshot) holds is read at once as the type
/// it had there, since most operations change the type of no key; the
/// others get a TYPE first. A WRONGTYPE reply sends the key back to TYPE in
/// the next round. No writer runs meanwhile; a key that expires between the
/// rounds reads as absent. Every round ends with TIME; the last one is the
/// snapshot's time.
pub fn observe(obs: &mut Resp, how: StreamRead, prev: Option<&Snapshot>) -> io::Result<Snapshot> {
    let mut snap = Snapshot::default();
    let mut todo: Vec<(usize, String, Probe)> = Vec::new();
    for db in logged_dbs() {
        snap.dbs.insert(db, BTreeMap::new());
        for k in 0..KEYS {
            let k = key_name(k);
            let was = prev.and_then(|p| p.dbs.get(&db)?.get(&k));
            let probe = match was {
                Some(it) => Probe::Read(it.val.type_name().to_string()),
                None => Probe::Type,
            };
            todo.push((db, k, probe));
        }
    }
    let mut time = None;
    for _round in 0..4 {
        if todo.is_empty() && time.is_some() {
            break;
        }
        let mut cmds = Vec::new();
        let mut cur = usize::MAX;
        for (db, k, probe) in &todo {
            if *db != cur {
                cmds.push(cmd(&["SELECT", &db.to_string()]));
                cur = *db;
            }
            match probe {
                Probe::Type => cmds.push(cmd(&["TYPE", k])),
                Probe::Read(t) => {
                    let Some(reads) = value_reads(t, k, how) else {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("unexpected TYPE {t} for {k} in db {db}"),
                        ));
                    };
                    cmds.extend(reads);
                    cmds.push(cmd(&["PEXPIRETIME", k]));
                }
            }
        }
        cmds.push(cmd(&["TIME"]));
        let replies = obs.pipeline(&cmds)?;
        time = replies.last().and_then(time_ms);
        let mut next = Vec::new();
        let mut it = replies.iter();
        let mut cur = usize::MAX;
        for (db, k, probe) in todo.drain(..) {
            if db != cur {
                it.next();
                cur = db;
            }
            let t = match probe {
                Probe::Type => {
                    let t = it.next().and_then(Reply::text).unwrap_or("none");
                    if t != "none" {
                        next.push((db, k, Probe::Read(t.to_string())));
                    }
                    continue;
                }
                Probe::Read(t) => t,
            };
            let n = match (t.as_str(), how) {
                ("stream", StreamRead::Full) => 1,
                ("stream", StreamRead::Commands) => STREAM_READS,
                _ => 1,
            };
            let vs: Vec<&Reply> = it.by_ref().take(n).collect();
            let Some(e) = it.next() else {
                break;
            };
            match value_of(&t, &vs, how) {
                Err(None) => next.push((db, k, Probe::Type)),
                // PEXPIRETIME, read after them, saw the key: the reads did
                // too (nothing writes meanwhile, and an expired key stays
                // expired).
                Err(Some(replies)) if e.int().is_some_and(|x| x != -2) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("unreadable {t} {k} in db {db}: {replies}"),
                    ));
                }
                Err(Some(_)) | Ok(None) => {}
                Ok(Some(val)) => {
                    let expire_ms = match e.int() {
                        Some(-2) | None => continue,
                        Some(x) => x,
                    };
                    if let Some(m) = snap.dbs.get_mut(&db) {
                        m.insert(k, Item { val, expire_ms });
                    }
                }
            }
        }
        todo = next;
    }
    if !todo.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("keys still changing type while nothing writes: {todo:?}"),
        ));
    }
    snap.time_ms =
        time.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no TIME reply"))?;
    Ok(snap)
}

/// How `got` differs from `want` (both views): (db, key, description).
pub fn diff(got: &View<'_>, want: &View<'_>) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for db in logged_dbs() {
        let empty = BTreeMap::new();
        let g = got.get(&db).unwrap_or(&empty);
        let w = want.get(&db).unwrap_or(&empty);
        let keys: BTreeSet<&str> = g.keys().chain(w.keys()).copied().collect();
        for k in keys {
            let line = match (g.get(k), w.get(k)) {
                (Some(a), Some(b)) if a == b => continue,
                (Some(a), Some(b)) => format!("db{db} {k}: recovered {a}, expected {b}"),
                (Some(a), None) => format!("db{db} {k}: recovered {a}, expected absent"),
                (None, Some(b)) => format!("db{db} {k}: recovered absent, expected {b}"),
                (None, None) => continue,
            };
            out.push((db, k.to_string(), line));
        }
    }
    out
}

/// The logged databases whose content differs between two snapshots,
/// ignoring keys that had expired by the time `after` was read.
fn changed_dbs(before: &Snapshot, after: &Snapshot) -> Vec<usize> {
    let cutoff = after.time_ms + 1;
    let (b, a) = (before.view(cutoff), after.view(cutoff));
    logged_dbs()
        .into_iter()
        .filter(|db| b.get(db) != a.get(db))
        .collect()
}

// ---------------------------------------------------------------------------
// Operations.

/// A connection's `CLIENT DURABILITY`; `None` is `default`.
pub type ConnLevel = Option<Level>;

fn conn_level_name(l: ConnLevel) -> &'static str {
    l.map(Level::name).unwrap_or("default")
}

/// What one operation is: one command, or a MULTI/EXEC block.
#[derive(Clone, Debug)]
pub enum OpKind {
    Single(Cmd),
    /// MULTI, the commands, EXEC. The connection may have WATCHed before.
    Multi(Vec<Cmd>),
}

#[derive(Clone, Debug)]
pub struct OpRecord {
    pub seq: u64,
    pub cycle: usize,
    pub conn: usize,
    pub level: ConnLevel,
    /// The connection's database when the operation started.
    pub db: usize,
    /// CLIENT DURABILITY / SELECT sent on the connection just before.
    pub prelude: Vec<Cmd>,
    pub kind: OpKind,
    pub reply: String,
    /// Logged databases whose content changed.
    pub wrote: Vec<usize>,
    pub acked_full: bool,
}

impl std::fmt::Display for OpRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "#{} c{} conn{} [{} db{}] ",
            self.seq,
            self.cycle,
            self.conn,
            conn_level_name(self.level),
            self.db
        )?;
        for p in &self.prelude {
            write!(f, "{}; ", show(p))?;
        }
        match &self.kind {
            OpKind::Single(c) => write!(f, "{}", show(c))?,
            OpKind::Multi(cs) => {
                write!(f, "MULTI; ")?;
                for c in cs {
                    write!(f, "{}; ", show(c))?;
                }
                write!(f, "EXEC")?;
            }
        }
        let mut reply = self.reply.clone();
        if reply.len() > 120 {
            let mut cut = 117;
            while !reply.is_char_boundary(cut) {
                cut -= 1;
            }
            reply.truncate(cut);
            reply.push_str("...");
        }
        write!(f, " -> {reply}")?;
        if !self.wrote.is_empty() {
            write!(f, "  wrote db{:?}", self.wrote)?;
        }
        if self.acked_full {
            write!(f, "  ACKED-FULL")?;
        }
        Ok(())
    }
}

fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.gen_range(0..xs.len())]
}

/// The family key `i` prefers: index % 5 (string, hash, list, set, zset),
/// except `k5`, the one stream key ([`STREAM_FAMILY`]). One is enough:
/// streams stay when empty, and each costs more to read after every
/// operation than any other value.
fn family(i: usize) -> usize {
    if i == 5 {
        STREAM_FAMILY
    } else {
        i % 5
    }
}

const STREAM_FAMILY: usize = 5;

/// Commands mostly pick keys of their family ([`family`]), so most writes
/// succeed instead of answering WRONGTYPE.
fn key_of(rng: &mut StdRng, family_of_cmd: usize) -> String {
    if rng.gen_bool(0.85) {
        let ks: Vec<usize> = (0..KEYS).filter(|&i| family(i) == family_of_cmd).collect();
        key_name(*pick(rng, &ks))
    } else {
        key_name(rng.gen_range(0..KEYS))
    }
}

fn any_key(rng: &mut StdRng) -> String {
    key_name(rng.gen_range(0..KEYS))
}

fn value(rng: &mut StdRng) -> String {
    format!(
        "{}{}",
        *pick(rng, &['a', 'b', 'c', 'x']),
        rng.gen_range(0..10)
    )
}

/// A 20-byte value: past what a string keeps inline, so one overwriting
/// another goes through the in-place path.
fn long_value(rng: &mut StdRng) -> String {
    format!("{:0>20}", value(rng))
}

fn field(rng: &mut StdRng) -> String {
    format!("f{}", rng.gen_range(0..4))
}

fn member(rng: &mut StdRng) -> String {
    format!("m{}", rng.gen_range(0..6))
}

fn db_arg(rng: &mut StdRng) -> String {
    rng.gen_range(0..DBS).to_string()
}

/// A TTL argument pair: mostly short (expires during the test), else long.
fn ttl(rng: &mut StdRng) -> [String; 2] {
    match rng.gen_range(0..4) {
        0 => ["PX".into(), rng.gen_range(5..50).to_string()],
        1 => ["PX".into(), rng.gen_range(50..400).to_string()],
        2 => ["PX".into(), rng.gen_range(60_000..600_000).to_string()],
        _ => ["EX".into(), rng.gen_range(100..1000).to_string()],
    }
}

/// A command from displayable parts: `v!["SET", key, 3]`.
macro_rules! v {
    ($($x:expr),* $(,)?) => { vec![$($x.to_string()),*] as Cmd };
}

/// The milliseconds part of the first explicit XADD ID (the year 2255).
const EXPLICIT_MS_BASE: u64 = 9_000_000_000_000;

/// Stream IDs for generated commands.
#[derive(Debug)]
pub struct StreamIds {
    /// The IDs in the last snapshot (entries, PELs, last IDs), so that XDEL,
    /// XACK, XCLAIM, XSETID and MINID mostly name IDs that matter, whether
    /// `*` (the clock) or an explicit ID made them.
    pub known: Vec<String>,
    /// The milliseconds part of explicit XADD IDs: far above the clock, so
    /// an explicit ID is accepted after `*` ones, and a `*` after it takes
    /// the next sequence number (the clock is behind the stream).
    pub next_ms: u64,
}

impl Default for StreamIds {
    fn default() -> Self {
        StreamIds {
            known: Vec::new(),
            next_ms: EXPLICIT_MS_BASE,
        }
    }
}

impl StreamIds {
    /// Collects the IDs of every stream in `snap`.
    pub fn refresh(&mut self, snap: &Snapshot) {
        let mut ids = BTreeSet::new();
        for item in snap.dbs.values().flat_map(|keys| keys.values()) {
            let Val::Stream(s) = &item.val else { continue };
            ids.extend(s.entries.iter().map(|(id, _)| id.clone()));
            ids.insert(s.last_id.clone());
            for g in s.groups.values() {
                ids.extend(g.pel.iter().map(|(id, _, _)| id.clone()));
            }
        }
        ids.remove("0-0");
        self.known = ids.into_iter().collect();
    }

    /// Mostly an ID some stream has, else a small or an explicit-range one.
    fn existing(&self, rng: &mut StdRng) -> String {
        if !self.known.is_empty() && rng.gen_bool(0.85) {
            return pick(rng, &self.known).clone();
        }
        match rng.gen_range(0..3) {
            0 => "0-1".into(),
            1 => format!("{}-0", self.next_ms),
            _ => format!("{}-{}", rng.gen_range(1..5), rng.gen_range(0..3)),
        }
    }

    /// An explicit XADD ID: mostly above every ID so far, sometimes `ms-*`,
    /// sometimes one that is not above the top (rejected).
    fn for_xadd(&mut self, rng: &mut StdRng) -> String {
        match rng.gen_range(0..10) {
            0..=5 => {
                self.next_ms += 1;
                format!("{}-{}", self.next_ms, rng.gen_range(0..3))
            }
            6 | 7 => {
                if rng.gen_bool(0.5) {
                    self.next_ms += 1;
                }
                format!("{}-*", self.next_ms)
            }
            8 => format!("{}-{}", self.next_ms, rng.gen_range(0..4)),
            _ => self.existing(rng),
        }
    }
}

/// Mostly `g0`: groups need several commands on the same key (create,
/// add, read, claim, ack) before they hold anything worth checking.
fn group(rng: &mut StdRng) -> &'static str {
    GROUPS[usize::from(rng.gen_bool(0.2))]
}

fn consumer(rng: &mut StdRng) -> String {
    format!("c{}", rng.gen_range(0..3))
}

/// A min-idle-time for XCLAIM/XAUTOCLAIM that gives the same result
/// whenever it runs: 0 (every pending entry), or an hour, which only the
/// entries an `IDLE 7200000` claim made two hours old pass.
fn min_idle(rng: &mut StdRng) -> &'static str {
    if rng.gen_bool(0.8) {
        "0"
    } else {
        "3600000"
    }
}

fn stream_key(rng: &mut StdRng) -> String {
    key_of(rng, STREAM_FAMILY)
}

/// A group's whole round in one MULTI: make sure the group exists (a
/// BUSYGROUP error does not stop the block), add, read. Stream keys change
/// hands often (RENAME, MOVE, SWAPDB, DEL), so single commands alone rarely
/// build a PEL that a crash then finds.
fn consumer_round(rng: &mut StdRng) -> Vec<Cmd> {
    let k = stream_key(rng);
    let g = group(rng);
    let mut out = vec![v!["XGROUP", "CREATE", k, g, "0", "MKSTREAM"]];
    for _ in 0..rng.gen_range(1..4) {
        out.push(v!["XADD", k, "*", field(rng), value(rng)]);
    }
    out.push(v![
        "XREADGROUP",
        "GROUP",
        g,
        consumer(rng),
        "COUNT",
        rng.gen_range(1..4),
        "STREAMS",
        k,
        ">"
    ]);
    out
}

/// One random stream command on a stream-family key.
fn gen_stream(rng: &mut StdRng, ids: &mut StreamIds) -> Cmd {
    let k = stream_key(rng);
    match rng.gen_range(0..30) {
        0..=3 => {
            let mut x = v!["XADD", k, "*", field(rng), value(rng)];
            if rng.gen_bool(0.3) {
                x.extend([field(rng), value(rng)]);
            }
            x
        }
        4 | 5 => v!["XADD", k, ids.for_xadd(rng), field(rng), value(rng)],
        6 => v!["XADD", k, "NOMKSTREAM", "*", field(rng), value(rng)],
        7 => v![
            "XADD",
            k,
            "MAXLEN",
            "=",
            rng.gen_range(0..6),
            "*",
            field(rng),
            value(rng)
        ],
        8 => v![
            "XADD",
            k,
            "MINID",
            "=",
            ids.existing(rng),
            ids.for_xadd(rng),
            field(rng),
            value(rng)
        ],
        9 => {
            // Approximate: whole nodes only (the model runs with 4-entry
            // nodes), and LIMIT.
            let mut x = v!["XADD", k, "MAXLEN", "~", rng.gen_range(0..8)];
            if rng.gen_bool(0.5) {
                x.extend(["LIMIT".into(), rng.gen_range(0..10).to_string()]);
            }
            x.extend(["*".into(), field(rng), value(rng)]);
            x
        }
        10 => {
            let mut x = v!["XDEL", k, ids.existing(rng)];
            if rng.gen_bool(0.4) {
                x.push(ids.existing(rng));
            }
            x
        }
        11 => match rng.gen_range(0..4) {
            0 => v!["XTRIM", k, "MAXLEN", rng.gen_range(0..6)],
            1 => v!["XTRIM", k, "MAXLEN", "=", rng.gen_range(0..6)],
            2 => v!["XTRIM", k, "MINID", "=", ids.existing(rng)],
            _ => v!["XTRIM", k, "MAXLEN", "~", rng.gen_range(0..8)],
        },
        12 => {
            let id = if rng.gen_bool(0.5) {
                ids.existing(rng)
            } else {
                format!("{}-{}", ids.next_ms, rng.gen_range(5..9))
            };
            let mut x = v!["XSETID", k, id];
            if rng.gen_bool(0.4) {
                let deleted = if rng.gen_bool(0.5) {
                    "0-0".to_string()
                } else {
                    ids.existing(rng)
                };
                x.extend([
                    "ENTRIESADDED".into(),
                    rng.gen_range(0..40).to_string(),
                    "MAXDELETEDID".into(),
                    deleted,
                ]);
            }
            x
        }
        13..=16 => {
            let id = match rng.gen_range(0..4) {
                0 => "$".to_string(),
                1 | 2 => "0".to_string(),
                _ => ids.existing(rng),
            };
            let mut x = v!["XGROUP", "CREATE", k, group(rng), id];
            if rng.gen_bool(0.8) {
                x.push("MKSTREAM".into());
            }
            if rng.gen_bool(0.15) {
                x.extend(["ENTRIESREAD".into(), rng.gen_range(0..5).to_string()]);
            }
            x
        }
        17 => {
            let id = match rng.gen_range(0..3) {
                0 => "$".to_string(),
                1 => "0".to_string(),
                _ => ids.existing(rng),
            };
            let mut x = v!["XGROUP", "SETID", k, group(rng), id];
            if rng.gen_bool(0.2) {
                x.extend(["ENTRIESREAD".into(), rng.gen_range(0..5).to_string()]);
            }
            x
        }
        18 => match rng.gen_range(0..4) {
            0 => v!["XGROUP", "DESTROY", k, group(rng)],
            1 => v!["XGROUP", "DELCONSUMER", k, group(rng), consumer(rng)],
            _ => v!["XGROUP", "CREATECONSUMER", k, group(rng), consumer(rng)],
        },
        19..=23 => {
            let mut x = v!["XREADGROUP", "GROUP", group(rng), consumer(rng)];
            if rng.gen_bool(0.6) {
                x.extend(["COUNT".into(), rng.gen_range(1..4).to_string()]);
            }
            if rng.gen_bool(0.1) {
                x.push("NOACK".into());
            }
            let from = |rng: &mut StdRng, ids: &StreamIds| match rng.gen_range(0..6) {
                0..=3 => ">".to_string(),
                4 => "0".to_string(),
                _ => ids.existing(rng),
            };
            if rng.gen_bool(0.15) {
                let k2 = stream_key(rng);
                let (a, b) = (from(rng, ids), from(rng, ids));
                x.extend(["STREAMS".into(), k, k2, a, b]);
            } else {
                let a = from(rng, ids);
                x.extend(["STREAMS".into(), k, a]);
            }
            x
        }
        24 | 25 => {
            let mut x = v!["XACK", k, group(rng), ids.existing(rng)];
            if rng.gen_bool(0.4) {
                x.push(ids.existing(rng));
            }
            x
        }
        26 | 27 => {
            let mut x = v![
                "XCLAIM",
                k,
                group(rng),
                consumer(rng),
                min_idle(rng),
                ids.existing(rng)
            ];
            if rng.gen_bool(0.4) {
                x.push(ids.existing(rng));
            }
            for opt in ["JUSTID", "FORCE"] {
                if rng.gen_bool(0.3) {
                    x.push(opt.into());
                }
            }
            match rng.gen_range(0..5) {
                0 => x.extend(["IDLE".into(), "7200000".into()]),
                1 => x.extend(["RETRYCOUNT".into(), rng.gen_range(0..5).to_string()]),
                2 => x.extend(["LASTID".into(), ids.existing(rng)]),
                _ => {}
            }
            x
        }
        _ => {
            let start = if rng.gen_bool(0.6) {
                "0-0".to_string()
            } else {
                ids.existing(rng)
            };
            let mut x = v![
                "XAUTOCLAIM",
                k,
                group(rng),
                consumer(rng),
                min_idle(rng),
                start
            ];
            if rng.gen_bool(0.5) {
                x.extend(["COUNT".into(), rng.gen_range(1..4).to_string()]);
            }
            if rng.gen_bool(0.4) {
                x.push("JUSTID".into());
            }
            x
        }
    }
}

/// One random data command (no MULTI, no SELECT). `in_multi` leaves out
/// FLUSHALL, which is generated only on its own.
pub fn gen_command(rng: &mut StdRng, ids: &mut StreamIds, in_multi: bool) -> Cmd {
    let roll = rng.gen_range(0..1000);
    match roll {
        // strings
        0..=149 => {
            let k = key_of(rng, 0);
            match rng.gen_range(0..11) {
                0 => v!["SET", k, value(rng)],
                // On the heap, all one length: overwritten in place.
                1 => v!["SET", k, long_value(rng)],
                2 | 3 => {
                    let [u, n] = ttl(rng);
                    v!["SET", k, value(rng), u, n]
                }
                4 => v![
                    "SET",
                    k,
                    value(rng),
                    *pick(rng, &["KEEPTTL", "NX", "XX", "GET"])
                ],
                5 => v!["INCR", k],
                6 => v!["INCRBY", k, rng.gen_range(-5..20)],
                7 => v!["APPEND", k, value(rng)],
                8 => v!["SETRANGE", k, rng.gen_range(0..6), value(rng)],
                9 => v!["GETDEL", k],
                _ => match rng.gen_range(0..3) {
                    0 => v!["GETEX", k, "PERSIST"],
                    _ => {
                        let [u, n] = ttl(rng);
                        v!["GETEX", k, u, n]
                    }
                },
            }
        }
        // hashes
        150..=269 => {
            let k = key_of(rng, 1);
            match rng.gen_range(0..6) {
                0 | 1 => v!["HSET", k, field(rng), value(rng)],
                2 => v!["HSET", k, field(rng), value(rng), field(rng), value(rng)],
                3 => v!["HDEL", k, field(rng)],
                4 => v!["HDEL", k, field(rng), field(rng)],
                _ => v!["HINCRBY", k, field(rng), rng.gen_range(-3..10)],
            }
        }
        // lists
        270..=399 => {
            let k = key_of(rng, 2);
            match rng.gen_range(0..13) {
                0 | 1 => v!["RPUSH", k, value(rng), value(rng)],
                2 | 3 => v!["LPUSH", k, value(rng)],
                4 => v!["LPOP", k],
                5 => v!["LPOP", k, rng.gen_range(1..3)],
                6 => v!["RPOP", k],
                7 | 8 => v!["LSET", k, rng.gen_range(-3..3), value(rng)],
                9 => v!["LREM", k, rng.gen_range(-2..3), value(rng)],
                10 => v!["LTRIM", k, rng.gen_range(0..3), rng.gen_range(-3..5)],
                11 => v![
                    "LINSERT",
                    k,
                    *pick(rng, &["BEFORE", "AFTER"]),
                    value(rng),
                    value(rng)
                ],
                _ => v![
                    "LMOVE",
                    k,
                    key_of(rng, 2),
                    *pick(rng, &["LEFT", "RIGHT"]),
                    *pick(rng, &["LEFT", "RIGHT"])
                ],
            }
        }
        // sets
        400..=499 => {
            let k = key_of(rng, 3);
            match rng.gen_range(0..8) {
                0 | 1 => v!["SADD", k, member(rng), member(rng)],
                2 => v!["SADD", k, member(rng)],
                3 => v!["SREM", k, member(rng)],
                4 => v!["SPOP", k],
                5 => v!["SPOP", k, rng.gen_range(1..3)],
                6 => v!["SMOVE", k, key_of(rng, 3), member(rng)],
                _ => v!["SINTERSTORE", key_of(rng, 3), k, key_of(rng, 3)],
            }
        }
        // sorted sets
        500..=589 => {
            let k = key_of(rng, 4);
            match rng.gen_range(0..6) {
                0 | 1 => v!["ZADD", k, rng.gen_range(-5..10), member(rng)],
                2 => v![
                    "ZADD",
                    k,
                    rng.gen_range(0..5),
                    member(rng),
                    rng.gen_range(0..5),
                    member(rng)
                ],
                3 => v!["ZINCRBY", k, rng.gen_range(-2..5), member(rng)],
                4 => v!["ZREM", k, member(rng)],
                _ => v!["ZPOPMIN", k, rng.gen_range(1..3)],
            }
        }
        // streams
        590..=789 => gen_stream(rng, ids),
        // generic key commands
        790..=939 => match rng.gen_range(0..14) {
            0 => v!["DEL", any_key(rng)],
            1 => v!["DEL", any_key(rng), any_key(rng)],
            2 => v!["EXPIRE", any_key(rng), rng.gen_range(100..1000)],
            3 => v!["PEXPIRE", any_key(rng), rng.gen_range(5..50)],
            4 => v!["PEXPIRE", any_key(rng), rng.gen_range(50..400)],
            5 => v!["PEXPIRE", any_key(rng), rng.gen_range(60_000..600_000)],
            6 => v!["PERSIST", any_key(rng)],
            7 => v!["RENAME", any_key(rng), any_key(rng)],
            8 => v!["COPY", any_key(rng), any_key(rng)],
            9 | 10 => {
                let mut x = v!["COPY", any_key(rng), any_key(rng), "DB", db_arg(rng)];
                if rng.gen_bool(0.6) {
                    x.push("REPLACE".into());
                }
                x
            }
            _ => v!["MOVE", any_key(rng), db_arg(rng)],
        },
        // reads (a `full` connection's read may be held until durable)
        940..=979 => match rng.gen_range(0..9) {
            0 => v!["GET", key_of(rng, 0)],
            1 => v!["HGETALL", key_of(rng, 1)],
            2 => v!["LRANGE", key_of(rng, 2), 0, -1],
            3 => v!["SMEMBERS", key_of(rng, 3)],
            4 => v!["EXISTS", any_key(rng), any_key(rng)],
            5 => v!["XRANGE", key_of(rng, STREAM_FAMILY), "-", "+", "COUNT", 3],
            6 => v!["XPENDING", key_of(rng, STREAM_FAMILY), group(rng)],
            7 => v!["XINFO", "GROUPS", key_of(rng, STREAM_FAMILY)],
            _ => v!["DBSIZE"],
        },
        // whole databases
        980..=993 => {
            let a = rng.gen_range(0..DBS);
            let b = (a + rng.gen_range(1..DBS)) % DBS;
            v!["SWAPDB", a, b]
        }
        994..=998 => v!["FLUSHDB"],
        _ if in_multi => v!["SWAPDB", NONE_DB, rng.gen_range(0..DBS)],
        _ => v!["FLUSHALL"],
    }
}

// ---------------------------------------------------------------------------
// Driver, history and checker.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashKind {
    /// The process dies (kill -9): the OS keeps everything the server wrote,
    /// synced or not. A later kill may not go back before what the recovery
    /// after this one showed; a later power loss may (down to the last write
    /// acknowledged at full or the last power-loss recovery), since what was
    /// recovered need not have been synced.
    Kill,
    /// The machine loses power: unsynced data is dropped or torn. Whatever
    /// the recovery after a power loss shows is on the (simulated) platter.
    PowerLoss,
}

/// The system under test: a server that can be crashed and restarted on the
/// same data.
pub trait Target {
    /// The port the current server instance listens on.
    fn port(&self) -> u16;
    /// Crashes the server the given way. It must not serve any more.
    fn crash(&mut self, kind: CrashKind);
    /// Starts it again on the same data; `Err` carries why it did not come up
    /// (its output).
    fn restart(&mut self) -> Result<(), String>;
}

struct DriverConn {
    resp: Resp,
    level: ConnLevel,
    db: usize,
    /// WATCHed and must run a MULTI block next.
    watching: bool,
    /// New connection: its first operation sets a random level and database.
    fresh: bool,
}

/// One point of the history: the state after an operation (or after a
/// recovery, or the start).
struct Step {
    snap: Snapshot,
    /// `None` for the start and for recovered states.
    op: Option<OpRecord>,
    label: String,
}

impl Step {
    fn acked_full(&self) -> bool {
        self.op.as_ref().is_some_and(|o| o.acked_full)
    }

    fn describe(&self) -> String {
        match &self.op {
            Some(op) => op.to_string(),
            None => format!("-- {} --", self.label),
        }
    }
}

/// What a run did, for the test's summary line.
#[derive(Debug, Default)]
pub struct RunStats {
    pub ops: u64,
    pub acked_full: u64,
    pub kills: u64,
    pub power_losses: u64,
    /// Operations after the matched prefix at each crash (rolled back).
    pub rolled_back: u64,
    /// Summed over the recovered states: streams, their groups, and their
    /// pending entries (so a run shows it checked stream state at all).
    pub streams: u64,
    pub groups: u64,
    pub pending: u64,
}

impl RunStats {
    fn count_streams(&mut self, snap: &Snapshot) {
        for item in snap.dbs.values().flat_map(|keys| keys.values()) {
            if let Val::Stream(s) = &item.val {
                self.streams += 1;
                self.groups += s.groups.len() as u64;
                self.pending += s.groups.values().map(|g| g.pel.len() as u64).sum::<u64>();
            }
        }
    }
}

pub struct Model<'t, T: Target> {
    target: &'t mut T,
    pub seed: u64,
    rng: StdRng,
    conns: Vec<DriverConn>,
    observer: Resp,
    history: Vec<Step>,
    /// Index into `history` that a recovery after a kill may not go below.
    kill_floor: usize,
    /// Index into `history` that a recovery after a power loss may not go below.
    power_floor: usize,
    seq: u64,
    cycle: usize,
    ids: StreamIds,
    pub stats: RunStats,
}

fn io_err(what: &str, e: io::Error) -> String {
    format!("{what}: {e}")
}

impl<'t, T: Target> Model<'t, T> {
    /// Connects to a freshly started server (empty or not) and takes the
    /// initial snapshot.
    pub fn new(target: &'t mut T, seed: u64) -> Result<Self, String> {
        let observer = Resp::connect(target.port()).map_err(|e| io_err("observer connect", e))?;
        let mut m = Model {
            target,
            seed,
            rng: StdRng::seed_from_u64(seed),
            conns: Vec::new(),
            observer,
            history: Vec::new(),
            kill_floor: 0,
            power_floor: 0,
            seq: 0,
            cycle: 0,
            ids: StreamIds::default(),
            stats: RunStats::default(),
        };
        m.connect_all()?;
        let snap = observe(&mut m.observer, StreamRead::Full, None)
            .map_err(|e| io_err("initial snapshot", e))?;
        m.history.push(Step {
            snap,
            op: None,
            label: "start".into(),
        });
        Ok(m)
    }

    fn connect_all(&mut self) -> Result<(), String> {
        let port = self.target.port();
        self.observer = Resp::connect(port).map_err(|e| io_err("observer connect", e))?;
        let r = self
            .observer
            .call(&["CLIENT", "DURABILITY", "none"])
            .map_err(|e| io_err("observer CLIENT DURABILITY", e))?;
        if r != Reply::Status("OK".into()) {
            return Err(format!("observer CLIENT DURABILITY none: {r}"));
        }
        self.conns.clear();
        for _ in 0..CONNS {
            let resp = Resp::connect(port).map_err(|e| io_err("driver connect", e))?;
            self.conns.push(DriverConn {
                resp,
                level: None,
                db: 0,
                watching: false,
                fresh: true,
            });
        }
        Ok(())
    }

    fn random_level(&mut self) -> ConnLevel {
        *pick(
            &mut self.rng,
            &[
                Some(Level::Full),
                Some(Level::Delayed),
                Some(Level::None),
                None,
            ],
        )
    }

    /// The prelude for connection `ci`: a new connection gets a random level
    /// and database; later they change now and then.
    fn prelude(&mut self, ci: usize) -> Vec<Cmd> {
        let fresh = std::mem::take(&mut self.conns[ci].fresh);
        let mut out = Vec::new();
        if fresh || self.rng.gen_bool(0.08) {
            let l = self.random_level();
            self.conns[ci].level = l;
            out.push(v!["CLIENT", "DURABILITY", conn_level_name(l)]);
        }
        if fresh || self.rng.gen_bool(0.15) {
            let db = self.rng.gen_range(0..DBS);
            self.conns[ci].db = db;
            out.push(v!["SELECT", db]);
        }
        out
    }

    fn gen_op(&mut self, ci: usize) -> OpKind {
        let rng = &mut self.rng;
        if self.conns[ci].watching || rng.gen_bool(0.12) {
            let n = rng.gen_range(2..=5);
            let mut cmds = Vec::new();
            for _ in 0..n {
                if rng.gen_bool(0.2) {
                    cmds.push(v!["SELECT", rng.gen_range(0..DBS)]);
                }
                cmds.push(gen_command(rng, &mut self.ids, true));
            }
            return OpKind::Multi(cmds);
        }
        match rng.gen_range(0..100) {
            0..=2 => {
                let mut x = v!["WATCH", any_key(rng)];
                if rng.gen_bool(0.5) {
                    x.push(any_key(rng));
                }
                OpKind::Single(x)
            }
            3..=4 => OpKind::Single(v!["BGSAVE"]),
            5..=7 => OpKind::Multi(consumer_round(rng)),
            _ => OpKind::Single(gen_command(rng, &mut self.ids, false)),
        }
    }

    /// Runs one random operation to completion and records the state after it.
    fn step(&mut self) -> Result<(), String> {
        let ci = self.rng.gen_range(0..CONNS);
        let prelude = self.prelude(ci);
        if let Some(last) = self.history.last() {
            self.ids.refresh(&last.snap);
        }
        let kind = self.gen_op(ci);
        let level = self.conns[ci].level;
        let db = self.conns[ci].db;
        let conn = &mut self.conns[ci];
        for p in &prelude {
            conn.resp
                .send(std::slice::from_ref(p))
                .and_then(|_| conn.resp.read())
                .map_err(|e| io_err(&format!("conn{ci} {}", show(p)), e))?;
        }
        let reply = match &kind {
            OpKind::Single(x) => {
                if x[0] == "WATCH" {
                    conn.watching = true;
                }
                conn.resp
                    .send(std::slice::from_ref(x))
                    .and_then(|_| conn.resp.read())
                    .map_err(|e| io_err(&format!("conn{ci} {}", show(x)), e))?
            }
            OpKind::Multi(cmds) => {
                let mut all = vec![v!["MULTI"]];
                all.extend(cmds.iter().cloned());
                all.push(v!["EXEC"]);
                let replies = conn
                    .resp
                    .pipeline(&all)
                    .map_err(|e| io_err(&format!("conn{ci} MULTI block"), e))?;
                conn.watching = false;
                let exec = replies.last().cloned().unwrap_or(Reply::Nil);
                if let Reply::Array(results) = &exec {
                    // SELECTs inside a successful EXEC change the database.
                    for (x, r) in cmds.iter().zip(results) {
                        if x[0] == "SELECT" && *r == Reply::Status("OK".into()) {
                            conn.db = x[1].parse().unwrap_or(conn.db);
                        }
                    }
                }
                exec
            }
        };
        let prev = self.history.last().map(|s| &s.snap);
        let snap = observe(&mut self.observer, StreamRead::Full, prev)
            .map_err(|e| io_err("snapshot", e))?;
        let prev = &self.history.last().expect("history starts non-empty").snap;
        let wrote = changed_dbs(prev, &snap);
        let acked_full = !wrote.is_empty()
            && match level {
                Some(l) => l == Level::Full,
                None => wrote.iter().any(|&d| db_level(d) == Level::Full),
            };
        self.seq += 1;
        self.stats.ops += 1;
        if acked_full {
            self.stats.acked_full += 1;
        }
        let op = OpRecord {
            seq: self.seq,
            cycle: self.cycle,
            conn: ci,
            level,
            db,
            prelude,
            kind,
            reply: reply.to_string(),
            wrote,
            acked_full,
        };
        self.history.push(Step {
            snap,
            op: Some(op),
            label: String::new(),
        });
        Ok(())
    }

    /// The history printed around index `lo`.
    fn history_tail(&self, lo: usize) -> String {
        let mut s = String::new();
        let from = lo.saturating_sub(8);
        if from > 0 {
            let _ = writeln!(s, "  ... {from} earlier steps");
        }
        for (i, st) in self.history.iter().enumerate().skip(from) {
            let mark = if i == lo { "=>" } else { "  " };
            let _ = writeln!(s, "{mark} [{i}] {}", st.describe());
        }
        s
    }

    /// One cycle: `ops` operations, a crash of `kind`, a restart, and the
    /// check of the recovered state.
    pub fn cycle(&mut self, ops: usize, kind: CrashKind) -> Result<(), String> {
        for _ in 0..ops {
            self.step()?;
            if self.rng.gen_bool(0.05) {
                std::thread::sleep(Duration::from_millis(self.rng.gen_range(1..30)));
            }
        }
        // The moment of the crash.
        match self.rng.gen_range(0..10) {
            0..=4 => {}
            5..=7 => std::thread::sleep(Duration::from_millis(self.rng.gen_range(1..40))),
            _ => {
                let _ = self.observer.call(&["BGSAVE"]);
                std::thread::sleep(Duration::from_millis(self.rng.gen_range(0..10)));
            }
        }
        self.target.crash(kind);
        match kind {
            CrashKind::Kill => self.stats.kills += 1,
            CrashKind::PowerLoss => self.stats.power_losses += 1,
        }
        let cycle = self.cycle;
        self.cycle += 1;
        let acked = (0..self.history.len())
            .rev()
            .find(|&i| self.history[i].acked_full())
            .unwrap_or(0);
        let floor = match kind {
            CrashKind::Kill => self.kill_floor,
            CrashKind::PowerLoss => self.power_floor,
        };
        let lo = acked.max(floor);
        if let Err(out) = self.target.restart() {
            return Err(format!(
                "cycle {cycle}: the server did not start after {kind:?}\n{out}\n\
                 history (=> the last write acknowledged at full):\n{}",
                self.history_tail(lo)
            ));
        }
        self.connect_all()?;
        // Read without guesses from the history, so that a wrong guess
        // cannot hide anything: every key gets a TYPE.
        let got = observe(&mut self.observer, StreamRead::Full, None)
            .map_err(|e| io_err("recovered snapshot", e))?;
        let again = observe(&mut self.observer, StreamRead::Commands, None)
            .map_err(|e| io_err("recovered snapshot, streams read by command", e))?;
        let late = again.time_ms + EXPIRY_MARGIN_MS;
        let lines = diff(&again.view(late), &got.view(late));
        if !lines.is_empty() {
            let mut s = format!(
                "cycle {cycle}: after {kind:?} the recovered streams read differently with \
                 XRANGE/XPENDING/XINFO (recovered) than with XINFO STREAM FULL (expected):\n"
            );
            for (_, _, l) in &lines {
                let _ = writeln!(s, "  {l}");
            }
            return Err(s);
        }
        let cutoff = got.time_ms + EXPIRY_MARGIN_MS;
        let gv = got.view(cutoff);
        let matched = (lo..self.history.len())
            .rev()
            .find(|&p| self.history[p].snap.view(cutoff) == gv);
        let Some(p) = matched else {
            return Err(self.mismatch_report(cycle, kind, lo, acked, &got, cutoff));
        };
        self.stats.rolled_back += (self.history.len() - 1 - p) as u64;
        self.stats.count_streams(&got);
        self.history.truncate(p + 1);
        self.history.push(Step {
            snap: got,
            op: None,
            label: format!("recovered after {kind:?} of cycle {cycle}: state of [{p}]"),
        });
        let here = self.history.len() - 1;
        // Recovery makes what it recovered durable before it serves
        // (`docs/durability.md`): no later crash, not even a power loss
        // right after a kill, may go back before it.
        self.kill_floor = here;
        self.power_floor = here;
        Ok(())
    }

    /// Up to `n` indexes `i <= upto` (newest last) whose step changed `key`
    /// in `db`.
    fn changes_of(&self, db: usize, key: &str, upto: usize, n: usize) -> Vec<usize> {
        let item = |i: usize| self.history[i].snap.dbs.get(&db).and_then(|m| m.get(key));
        let mut out: Vec<usize> = (1..=upto)
            .rev()
            .filter(|&i| item(i) != item(i - 1))
            .take(n)
            .collect();
        out.reverse();
        out
    }

    fn mismatch_report(
        &self,
        cycle: usize,
        kind: CrashKind,
        lo: usize,
        acked: usize,
        got: &Snapshot,
        cutoff: u64,
    ) -> String {
        let gv = got.view(cutoff);
        let mut s = format!(
            "cycle {cycle}: after {kind:?} the recovered logged databases equal no state \
             in [{lo}, {}] (the last write acknowledged at full is [{acked}]",
            self.history.len() - 1
        );
        if lo != acked {
            let _ = write!(s, ", the last recovery is [{lo}]");
        }
        s.push_str(")\n");
        if let Some(p) = (0..lo)
            .rev()
            .find(|&p| self.history[p].snap.view(cutoff) == gv)
        {
            let _ = writeln!(
                s,
                "it equals the older state [{p}]: writes acknowledged after it were lost"
            );
        }
        let (best, lines) = (lo..self.history.len())
            .map(|p| (p, diff(&gv, &self.history[p].snap.view(cutoff))))
            .min_by_key(|(p, d)| (d.len(), usize::MAX - p))
            .unwrap_or((lo, Vec::new()));
        let _ = writeln!(s, "closest candidate [{best}], differences:");
        for (_, _, l) in &lines {
            let _ = writeln!(s, "  {l}");
        }
        let _ = writeln!(s, "the last steps that changed those keys:");
        let last = self.history.len() - 1;
        for (db, key, _) in &lines {
            let _ = writeln!(s, "  db{db} {key}:");
            for i in self.changes_of(*db, key, last, 3) {
                let _ = writeln!(s, "    [{i}] {}", self.history[i].describe());
            }
        }
        let _ = writeln!(
            s,
            "history (=> lower bound; keys expiring before {cutoff} ignored):\n{}",
            self.history_tail(lo)
        );
        s
    }
}

/// Runs `cycles` cycles of random operations and crashes against `target`;
/// `plan` picks each cycle's crash kind. Returns a report on failure.
pub fn run<T: Target>(
    target: &mut T,
    seed: u64,
    cycles: usize,
    ops_per_cycle: std::ops::Range<usize>,
    mut plan: impl FnMut(&mut StdRng, usize) -> CrashKind,
) -> Result<RunStats, String> {
    let started = Instant::now();
    let mut model = Model::new(target, seed)?;
    // Crash kinds come from their own stream, so the plan does not shift
    // the operations of a seed.
    let mut plan_rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    for cycle in 0..cycles {
        let ops = model.rng.gen_range(ops_per_cycle.clone());
        let kind = plan(&mut plan_rng, cycle);
        model.cycle(ops, kind)?;
    }
    let stats = std::mem::take(&mut model.stats);
    if stats.acked_full == 0 {
        return Err(format!(
            "no write was acknowledged at full in {:?}: the run proves nothing",
            started.elapsed()
        ));
    }
    Ok(stats)
}

/// Seeds to run: `DURAKV_MODEL_SEED=n` runs exactly that one; otherwise
/// `DURAKV_MODEL_SEEDS` (default `default_count`) consecutive seeds from a
/// random base.
pub fn seeds(default_count: u64) -> Vec<u64> {
    if let Some(s) = env_u64("DURAKV_MODEL_SEED") {
        return vec![s];
    }
    let n = env_u64("DURAKV_MODEL_SEEDS").unwrap_or(default_count);
    let base: u64 = rand::random::<u32>() as u64;
    (0..n).map(|i| base + i).collect()
}

/// `DURAKV_MODEL_CYCLES`, or `default`.
pub fn cycles(default: usize) -> usize {
    env_u64("DURAKV_MODEL_CYCLES")
        .map(|n| n as usize)
        .unwrap_or(default)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}
