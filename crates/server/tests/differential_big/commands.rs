//! The command sequences of `differential_big.rs`: keys, the member pool
//! and the generator, which keeps each type growing or shrinking.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const HASHES: &[&str] = &["h1", "h2"];
/// `s1` holds integers only (but for a rare string, which turns Redis's
/// intset into a hash table for good), `s2` a mix, `s3` strings.
const SETS: &[&str] = &["s1", "s2", "s3"];
const ZSETS: &[&str] = &["z1", "z2", "z3"];
/// A sorted set whose scores are all 0, for lex ranges.
const LEX: &str = "zl";
const LISTS: &[&str] = &["l1", "l2"];
const STREAMS: &[&str] = &["x1", "x2"];
/// How many distinct members there are: enough to pass 512, and in
/// every third sequence 1,024 (durakv's chunks hold 256).
fn pool(seed: u64) -> u32 {
    if seed.is_multiple_of(3) {
        1600
    } else {
        700
    }
}

const HASH: usize = 0;
const SET: usize = 1;
const ZSET: usize = 2;
const LIST: usize = 3;
const STREAM: usize = 4;

pub fn all_keys() -> Vec<&'static str> {
    let mut v: Vec<&str> = Vec::new();
    for ks in [HASHES, SETS, ZSETS, &[LEX], LISTS, STREAMS] {
        v.extend_from_slice(ks);
    }
    v
}

/// Member `i` of the pool: mostly short; every third 60 to 70 bytes,
/// either side of Redis's 64-byte listpack limit; every 29th 1,020 to
/// 1,029 bytes, either side of durakv's 1,024-byte packed limit; a few
/// with a leading zero, which look like integers but are not.
fn member_text(i: u32) -> String {
    if i % 41 == 7 {
        return format!("0{i}");
    }
    let len = if i.is_multiple_of(29) {
        1020 + i / 29 % 10
    } else if i % 3 == 1 {
        60 + i % 11
    } else {
        0
    };
    let mut s = format!("m{i}:");
    while s.len() < len as usize {
        s.push((b'a' + (s.len() % 26) as u8) as char);
    }
    s
}

/// Integer `i` of the pool: small ones (an intset's 16-bit encoding) and
/// now and then one that needs 32 or 64 bits.
fn integer_text(i: u32) -> String {
    const WIDE: &[i64] = &[
        32767,
        32768,
        -32769,
        2147483647,
        2147483648,
        -2147483649,
        4294967296,
        i64::MAX,
        i64::MIN,
    ];
    if i % 37 == 5 {
        WIDE[(i / 37) as usize % WIDE.len()].to_string()
    } else {
        (i64::from(i) - 40).to_string()
    }
}

/// How a reply is checked.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Check {
    /// The same frame from both, once unordered replies are sorted.
    Same,
    /// SPOP: random members; see the header.
    Pop,
    /// SRANDMEMBER, HRANDFIELD, ZRANDMEMBER: random picks, checked against
    /// what the key holds.
    Pick,
    /// HSCAN, SSCAN, ZSCAN from cursor 0: walked to the end on each
    /// server, which must have named every element that matches, and
    /// only those.
    Scan,
}

pub struct Gen {
    pub rng: StdRng,
    /// Per type: whether it grows (bulk adds) or shrinks (bulk removals).
    grow: [bool; 5],
    /// The type that gets most commands in this sequence, if any.
    focus: Option<usize>,
    /// Per stream key, the millisecond part of its newest ID.
    ms: [u64; 2],
    pool: u32,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        let focus = (seed % 6 < 5).then_some((seed % 6) as usize);
        Gen {
            rng: StdRng::seed_from_u64(seed),
            grow: [true; 5],
            focus,
            ms: [1, 1],
            pool: pool(seed),
        }
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.gen_range(0..from.len())]
    }
    pub fn chance(&mut self, n: u32) -> bool {
        self.rng.gen_range(0..n) == 0
    }
    fn num(&mut self, r: std::ops::Range<i64>) -> String {
        self.rng.gen_range(r).to_string()
    }
    /// How many elements an adding (or removing) command names: many while
    /// its type grows (shrinks), a few otherwise.
    fn many(&mut self, t: usize, adding: bool) -> usize {
        if adding == self.grow[t] {
            self.rng.gen_range(1..=40)
        } else {
            self.rng.gen_range(1..=3)
        }
    }
    fn text(&mut self) -> String {
        member_text(self.rng.gen_range(0..self.pool))
    }
    fn integer(&mut self) -> String {
        integer_text(self.rng.gen_range(0..self.pool))
    }
    /// A member: an integer one time in `ints_one_in`, else a string.
    fn member(&mut self, ints_one_in: u32) -> String {
        if self.chance(ints_one_in) {
            self.integer()
        } else {
            self.text()
        }
    }
    fn set_member(&mut self, key: &str) -> String {
        match key {
            "s1" if self.chance(400) => self.text(),
            "s1" => self.integer(),
            "s2" => self.member(2),
            _ => self.text(),
        }
    }
    /// A list element: from a smaller pool, so LREM, LPOS and LINSERT's
    /// pivots find repeats.
    fn list_elem(&mut self) -> String {
        // Now and then one past Redis's 8 KB quicklist node, or half of it.
        if self.chance(200) {
            let len = *[4100, 8200, 9000].get(self.rng.gen_range(0..3)).unwrap();
            return format!("{:x<len$}", self.rng.gen_range(0..3));
        }
        let i = self.rng.gen_range(0..120);
        if i % 4 == 0 {
            integer_text(i)
        } else {
            member_text(i)
        }
    }
    /// A hash value: integers for HINCRBY, and every size of string.
    fn hvalue(&mut self) -> String {
        if self.chance(3) {
            self.num(-1000..1000)
        } else {
            self.text()
        }
    }
    fn hfield(&mut self) -> String {
        // Fields `n0`..`n9` hold HINCRBY's counters more often than not.
        if self.chance(5) {
            format!("n{}", self.rng.gen_range(0..10))
        } else {
            self.member(6)
        }
    }
    /// A score that prints the same in Redis 7.0 and 7.2.
    fn score(&mut self) -> String {
        match self.rng.gen_range(0..40) {
            0 => self.pick(&["inf", "-inf", "+inf"]).to_string(),
            1 => self.pick(&["1e15", "-2.5e10", "1099511627776"]).to_string(),
            2..=15 => (self.rng.gen_range(-200i32..200) as f64 / 4.0).to_string(),
            _ => self.num(-60..60),
        }
    }
    fn score_bound(&mut self) -> String {
        match self.rng.gen_range(0..10) {
            0 => "-inf".to_string(),
            1 => "+inf".to_string(),
            2 | 3 => format!("({}", self.score()),
            _ => self.score(),
        }
    }
    fn lex_bound(&mut self) -> String {
        match self.rng.gen_range(0..8) {
            0 => "-".to_string(),
            1 => "+".to_string(),
            2 => format!("[m{}", self.rng.gen_range(0..70)),
            3 | 4 => format!("({}", self.member(6)),
            _ => format!("[{}", self.member(6)),
        }
    }
    /// A list index or range end: mostly near either end, sometimes
    /// anywhere a big list reaches.
    fn index(&mut self) -> String {
        if self.chance(3) {
            self.num(-700..700)
        } else {
            self.num(-12..12)
        }
    }
    fn zkey(&mut self) -> String {
        self.pick(ZSETS).to_string()
    }
    /// A key to read or remove from: the lex set too.
    fn zkey_any(&mut self) -> String {
        if self.chance(5) {
            LEX.to_string()
        } else {
            self.zkey()
        }
    }

    /// The next command and how its reply is checked.
    pub fn command(&mut self) -> (Vec<String>, Check) {
        let focused = self.chance(2);
        let t = match self.focus {
            Some(f) if focused => f,
            _ => self.rng.gen_range(0..5),
        };
        // Each type turns from growing to shrinking and back now and then,
        // shrinking for shorter: bulk removals need less time.
        // A stream grows by one entry a command, so it grows for longer.
        let grow_for = if t == STREAM { 400 } else { 120 };
        if self.chance(if self.grow[t] { grow_for } else { 40 }) {
            self.grow[t] = !self.grow[t];
        }
        let mut check = Check::Same;
        let c = match t {
            HASH => self.hash_command(&mut check),
            SET => self.set_command(&mut check),
            ZSET => self.zset_command(&mut check),
            LIST => self.list_command(),
            _ => self.stream_command(),
        };
        (c, check)
    }

    fn hash_command(&mut self, check: &mut Check) -> Vec<String> {
        let s = String::from;
        let k = s(self.pick(HASHES));
        match self.rng.gen_range(0..17) {
            0..=3 => {
                let mut c = vec![s(self.pick(&["HSET", "HMSET"])), k];
                for _ in 0..self.many(HASH, true) {
                    c.push(self.hfield());
                    c.push(self.hvalue());
                }
                c
            }
            4..=6 => {
                let mut c = vec![s("HDEL"), k];
                for _ in 0..self.many(HASH, false) {
                    c.push(self.hfield());
                }
                c
            }
            7 | 8 => {
                let by = if self.chance(30) {
                    s("9223372036854775807")
                } else {
                    self.num(-100..100)
                };
                vec![s("HINCRBY"), k, self.hfield(), by]
            }
            9 => vec![s("HSETNX"), k, self.hfield(), self.hvalue()],
            10 => vec![
                s(self.pick(&["HGET", "HEXISTS", "HSTRLEN"])),
                k,
                self.hfield(),
            ],
            11 => {
                let mut c = vec![s("HMGET"), k];
                for _ in 0..self.rng.gen_range(1..8) {
                    c.push(self.hfield());
                }
                c
            }
            12 => vec![s("HLEN"), k],
            13 => vec![s(self.pick(&["HGETALL", "HKEYS", "HVALS"])), k],
            14 => {
                *check = Check::Scan;
                self.scan("HSCAN", k)
            }
            _ => {
                *check = Check::Pick;
                let mut c = vec![s("HRANDFIELD"), k];
                if !self.chance(5) {
                    c.push(self.num(-30..30));
                    if self.chance(2) {
                        c.push(s("WITHVALUES"));
                    }
                }
                c
            }
        }
    }

    fn set_command(&mut self, check: &mut Check) -> Vec<String> {
        let s = String::from;
        let k = s(self.pick(SETS));
        match self.rng.gen_range(0..18) {
            0..=3 => {
                let mut c = vec![s("SADD"), k.clone()];
                for _ in 0..self.many(SET, true) {
                    c.push(self.set_member(&k));
                }
                c
            }
            4..=6 => {
                let mut c = vec![s("SREM"), k.clone()];
                for _ in 0..self.many(SET, false) {
                    c.push(self.set_member(&k));
                }
                c
            }
            7 => {
                *check = Check::Pop;
                let mut c = vec![s("SPOP"), k];
                if !self.chance(4) {
                    let n = self.many(SET, false).min(30) as i64;
                    c.push(self.num(0..n + 1));
                }
                c
            }
            8 => {
                let dst = s(self.pick(SETS));
                let m = self.set_member(&k);
                vec![s("SMOVE"), k, dst, m]
            }
            9 | 10 => {
                let mut c = vec![
                    s(self.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])),
                    k,
                ];
                for _ in 0..self.rng.gen_range(1..=3) {
                    c.push(s(self.pick(SETS)));
                }
                c
            }
            11 => {
                let mut c = vec![s(self.pick(&["SINTER", "SUNION", "SDIFF"]))];
                for _ in 0..self.rng.gen_range(1..=3) {
                    c.push(s(self.pick(SETS)));
                }
                c
            }
            12 => {
                let n = self.rng.gen_range(1..=3);
                let mut c = vec![s("SINTERCARD"), n.to_string()];
                for _ in 0..n {
                    c.push(s(self.pick(SETS)));
                }
                if self.chance(2) {
                    c.extend([s("LIMIT"), self.num(0..300)]);
                }
                c
            }
            13 => vec![s("SISMEMBER"), k.clone(), self.set_member(&k)],
            14 => {
                let mut c = vec![s("SMISMEMBER"), k.clone()];
                for _ in 0..self.rng.gen_range(1..8) {
                    c.push(self.set_member(&k));
                }
                c
            }
            15 => vec![s(self.pick(&["SCARD", "SMEMBERS"])), k],
            16 => {
                *check = Check::Scan;
                self.scan("SSCAN", k)
            }
            _ => {
                *check = Check::Pick;
                let mut c = vec![s("SRANDMEMBER"), k];
                if !self.chance(5) {
                    c.push(self.num(-30..30));
                }
                c
            }
        }
    }

    fn zset_command(&mut self, check: &mut Check) -> Vec<String> {
        let s = String::from;
        match self.rng.gen_range(0..29) {
            0..=3 => {
                let lex = self.chance(6);
                let mut c = vec![s("ZADD"), if lex { s(LEX) } else { self.zkey() }];
                for opt in ["NX", "XX", "GT", "LT", "CH"] {
                    if self.chance(7) {
                        c.push(s(opt));
                    }
                }
                let incr = !lex && self.chance(8);
                let n = if incr { 1 } else { self.many(ZSET, true) };
                if incr {
                    c.push(s("INCR"));
                }
                for _ in 0..n {
                    c.push(if lex { s("0") } else { self.score() });
                    c.push(self.member(6));
                }
                c
            }
            4..=6 => {
                let mut c = vec![s("ZREM"), self.zkey_any()];
                for _ in 0..self.many(ZSET, false) {
                    c.push(self.member(6));
                }
                c
            }
            7 => vec![s("ZINCRBY"), self.zkey(), self.score(), self.member(6)],
            8 => vec![
                s("ZREMRANGEBYSCORE"),
                self.zkey_any(),
                self.score_bound(),
                self.score_bound(),
            ],
            9 => {
                let (a, b) = if self.grow[ZSET] {
                    (self.num(-5..5), self.num(-5..5))
                } else {
                    (self.num(0..300), self.num(-300..-1))
                };
                vec![s("ZREMRANGEBYRANK"), self.zkey_any(), a, b]
            }
            10 => vec![
                s("ZREMRANGEBYLEX"),
                s(LEX),
                self.lex_bound(),
                self.lex_bound(),
            ],
            11 => {
                let from_lex = self.chance(3);
                let dst = self.zkey();
                let mut c = vec![s("ZRANGESTORE"), dst];
                self.range_args(&mut c, from_lex);
                c
            }
            12 | 13 => {
                let op = self.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]);
                let n = self.rng.gen_range(1..=3);
                let mut c = vec![s(op), self.zkey(), n.to_string()];
                for _ in 0..n {
                    // Sets count as members with score 1.
                    c.push(if self.chance(5) {
                        s(self.pick(SETS))
                    } else {
                        self.zkey_any()
                    });
                }
                if op != "ZDIFFSTORE" && self.chance(3) {
                    c.push(s("WEIGHTS"));
                    for _ in 0..n {
                        c.push(s(self.pick(&["1", "2", "0", "-1", "0.5", "3"])));
                    }
                }
                if op != "ZDIFFSTORE" && self.chance(3) {
                    c.extend([s("AGGREGATE"), s(self.pick(&["SUM", "MIN", "MAX"]))]);
                }
                c
            }
            14 => {
                let mut c = vec![s(self.pick(&["ZPOPMIN", "ZPOPMAX"])), self.zkey_any()];
                if !self.chance(4) {
                    let n = self.many(ZSET, false) as i64;
                    c.push(self.num(0..n + 1));
                }
                c
            }
            15..=17 => {
                let from_lex = self.chance(4);
                let mut c = vec![s("ZRANGE")];
                self.range_args(&mut c, from_lex);
                if !from_lex || self.chance(2) {
                    // BYLEX takes no WITHSCORES.
                    if !c.iter().any(|w| w == "BYLEX") && self.chance(2) {
                        c.push(s("WITHSCORES"));
                    }
                }
                c
            }
            18 => vec![
                s(self.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT"])),
                s(LEX),
                self.lex_bound(),
                self.lex_bound(),
            ],
            19 => vec![
                s("ZCOUNT"),
                self.zkey_any(),
                self.score_bound(),
                self.score_bound(),
            ],
            20 => vec![
                s(self.pick(&["ZSCORE", "ZRANK", "ZREVRANK"])),
                self.zkey_any(),
                self.member(6),
            ],
            21 => {
                let mut c = vec![s("ZMSCORE"), self.zkey_any()];
                for _ in 0..self.rng.gen_range(1..8) {
                    c.push(self.member(6));
                }
                c
            }
            22 => vec![s("ZCARD"), self.zkey_any()],
            23 => {
                *check = Check::Scan;
                let k = self.zkey_any();
                self.scan("ZSCAN", k)
            }
            24 => {
                let n = self.rng.gen_range(1..=3);
                let mut c = vec![s("ZMPOP"), n.to_string()];
                for _ in 0..n {
                    c.push(self.zkey_any());
                }
                c.push(s(self.pick(&["MIN", "MAX"])));
                if self.chance(2) {
                    let n = self.many(ZSET, false) as i64;
                    c.extend([s("COUNT"), self.num(1..n + 1)]);
                }
                c
            }
            25 => {
                let op = self.pick(&["ZUNION", "ZINTER", "ZDIFF", "ZINTERCARD"]);
                let n = self.rng.gen_range(1..=3);
                let mut c = vec![s(op), n.to_string()];
                for _ in 0..n {
                    c.push(self.zkey_any());
                }
                if op == "ZINTERCARD" {
                    if self.chance(2) {
                        c.extend([s("LIMIT"), self.num(0..200)]);
                    }
                } else if self.chance(2) {
                    c.push(s("WITHSCORES"));
                }
                c
            }
            26 => {
                let mut c = vec![
                    s(self.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"])),
                    self.zkey_any(),
                    self.score_bound(),
                    self.score_bound(),
                ];
                if self.chance(2) {
                    c.push(s("WITHSCORES"));
                }
                if self.chance(2) {
                    c.extend([s("LIMIT"), self.num(-1..100), self.num(-1..100)]);
                }
                c
            }
            27 => vec![
                s(self.pick(&["ZREVRANGE", "ZRANGE"])),
                self.zkey_any(),
                self.index(),
                self.index(),
                s("WITHSCORES"),
            ],
            _ => {
                *check = Check::Pick;
                let mut c = vec![s("ZRANDMEMBER"), self.zkey_any()];
                if !self.chance(5) {
                    c.push(self.num(-30..30));
                    if self.chance(2) {
                        c.push(s("WITHSCORES"));
                    }
                }
                c
            }
        }
    }

    /// A scan of `key` from cursor 0, with a COUNT and a MATCH now and
    /// then (patterns of literal text and `*`, which the checker reads).
    fn scan(&mut self, name: &str, key: String) -> Vec<String> {
        let mut c = vec![name.to_string(), key, "0".to_string()];
        if self.chance(2) {
            c.extend(["COUNT".to_string(), self.num(1..200)]);
        }
        if self.chance(3) {
            let pattern = self.pick(&["m1*", "*:", "1*", "*5*", "*z", "m*:*"]);
            c.extend(["MATCH".to_string(), pattern.to_string()]);
        }
        c
    }

    /// `src start stop [BYSCORE|BYLEX] [REV] [LIMIT o n]` for ZRANGE and
    /// ZRANGESTORE; lex ranges read `zl` only.
    fn range_args(&mut self, c: &mut Vec<String>, lex: bool) {
        let s = String::from;
        let rev = self.chance(3);
        if lex {
            c.push(s(LEX));
            let (a, b) = (self.lex_bound(), self.lex_bound());
            c.extend([a, b, s("BYLEX")]);
        } else {
            c.push(self.zkey_any());
            if self.chance(2) {
                let (a, b) = (self.score_bound(), self.score_bound());
                c.extend([a, b, s("BYSCORE")]);
            } else {
                let (a, b) = (self.index(), self.index());
                c.extend([a, b]);
            }
        }
        if rev {
            c.push(s("REV"));
        }
        if c.iter().any(|w| w == "BYLEX" || w == "BYSCORE") && self.chance(3) {
            c.extend([s("LIMIT"), self.num(0..40), self.num(-1..60)]);
        }
    }

    fn list_command(&mut self) -> Vec<String> {
        let s = String::from;
        let k = s(self.pick(LISTS));
        match self.rng.gen_range(0..21) {
            0..=4 => {
                let mut c = vec![s(self.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"])), k];
                for _ in 0..self.many(LIST, true) {
                    c.push(self.list_elem());
                }
                c
            }
            5 => vec![
                s("LINSERT"),
                k,
                s(self.pick(&["BEFORE", "AFTER"])),
                self.list_elem(),
                self.list_elem(),
            ],
            6 | 7 => {
                let n = if self.grow[LIST] { 3 } else { 0 };
                vec![s("LREM"), k, self.num(-3..4 + n), self.list_elem()]
            }
            8 => vec![s("LSET"), k, self.index(), self.list_elem()],
            9 => {
                let (a, b) = if self.grow[LIST] {
                    (self.num(0..3), self.num(-3..0))
                } else {
                    (self.num(0..200), self.num(-200..0))
                };
                vec![s("LTRIM"), k, a, b]
            }
            10 | 11 => {
                let mut c = vec![s("LPOS"), k, self.list_elem()];
                if self.chance(2) {
                    c.extend([s("RANK"), self.num(-4..5)]);
                }
                if self.chance(2) {
                    c.extend([s("COUNT"), self.num(0..6)]);
                }
                if self.chance(3) {
                    c.extend([s("MAXLEN"), self.num(0..300)]);
                }
                c
            }
            12 => vec![
                s("LMOVE"),
                k,
                s(self.pick(LISTS)),
                s(self.pick(&["LEFT", "RIGHT"])),
                s(self.pick(&["LEFT", "RIGHT"])),
            ],
            13 => vec![s("RPOPLPUSH"), k, s(self.pick(LISTS))],
            14 | 15 => {
                let mut c = vec![s(self.pick(&["LPOP", "RPOP"])), k];
                if !self.chance(4) {
                    let n = self.many(LIST, false) as i64;
                    c.push(self.num(0..n + 1));
                }
                c
            }
            16 | 17 => vec![s("LRANGE"), k, self.index(), self.index()],
            18 => vec![s("LINDEX"), k, self.index()],
            19 => {
                let mut c = vec![s("LMPOP"), s("2"), k, s(self.pick(LISTS))];
                c.push(s(self.pick(&["LEFT", "RIGHT"])));
                if self.chance(2) {
                    let n = self.many(LIST, false) as i64;
                    c.extend([s("COUNT"), self.num(1..n + 1)]);
                }
                c
            }
            _ => vec![s("LLEN"), k],
        }
    }

    fn stream_command(&mut self) -> Vec<String> {
        let s = String::from;
        let i = usize::from(self.chance(4));
        let k = s(STREAMS[i]);
        match self.rng.gen_range(0..14) {
            0..=6 => {
                let mut c = vec![s("XADD"), k];
                if self.chance(20) {
                    c.push(s("NOMKSTREAM"));
                }
                if self.chance(3) {
                    self.trim_args(&mut c, i);
                }
                self.ms[i] += self.rng.gen_range(0..3);
                let ms = self.ms[i];
                c.push(match self.rng.gen_range(0..16) {
                    0 | 1 => format!("{ms}-{}", self.rng.gen_range(0..4)),
                    2 => s("0-1"),
                    _ => format!("{ms}-*"),
                });
                // Same fields over and over (Redis packs those apart),
                // and now and then others.
                let same = self.chance(2);
                for f in 0..self.rng.gen_range(1..=4) {
                    c.push(if same { format!("f{f}") } else { self.text() });
                    c.push(self.hvalue());
                }
                c
            }
            7 => {
                let mut c = vec![s("XDEL"), k];
                for _ in 0..self.many(STREAM, false) {
                    c.push(self.old_id(i));
                }
                c
            }
            8 => {
                let mut c = vec![s("XTRIM"), k];
                self.trim_args(&mut c, i);
                c
            }
            9..=11 => {
                let rev = self.chance(3);
                let (mut a, mut b) = (self.range_end(i), self.range_end(i));
                if rev {
                    std::mem::swap(&mut a, &mut b);
                }
                let mut c = vec![s(if rev { "XREVRANGE" } else { "XRANGE" }), k, a, b];
                if self.chance(2) {
                    c.extend([s("COUNT"), self.num(0..120)]);
                }
                c
            }
            12 => vec![s("XLEN"), k],
            _ => vec![s("XINFO"), s("STREAM"), k],
        }
    }

    /// An ID at or before the newest of stream `i`.
    fn old_id(&mut self, i: usize) -> String {
        let back = self.rng.gen_range(0..=self.ms[i].min(1500));
        format!("{}-{}", self.ms[i] - back, self.rng.gen_range(0..3))
    }
    fn range_end(&mut self, i: usize) -> String {
        match self.rng.gen_range(0..6) {
            0 => "-".to_string(),
            1 => "+".to_string(),
            2 => format!("({}", self.old_id(i)),
            _ => self.old_id(i),
        }
    }
    /// `MAXLEN|MINID [=|~] threshold [LIMIT n]`: short while the stream
    /// shrinks, long while it grows.
    fn trim_args(&mut self, c: &mut Vec<String>, i: usize) {
        let s = String::from;
        let minid = self.chance(3);
        c.push(s(if minid { "MINID" } else { "MAXLEN" }));
        let approx = self.chance(2);
        if approx {
            c.push(s("~"));
        } else if self.chance(2) {
            c.push(s("="));
        }
        let grow = self.grow[STREAM];
        c.push(match (minid, grow) {
            (true, _) => {
                let back = if grow { 400..1500 } else { 0..150 };
                let back = self.rng.gen_range(back).min(self.ms[i]);
                format!("{}-{}", self.ms[i] - back, self.rng.gen_range(0..3))
            }
            (false, true) => self.num(300..900),
            (false, false) => self.num(0..300),
        });
        if approx && self.chance(3) {
            c.extend([s("LIMIT"), self.num(0..300)]);
        }
    }
}
