//! The random commands of `differential_dbs.rs`: databases, expiry with
//! its flags and absolute times, WATCH, blocking commands, and a few data
//! commands of every type over a handful of shared keys, many of them
//! writes that change nothing (which must not touch a WATCH).

use rand::rngs::StdRng;
use rand::Rng;

pub const KEYS: &[&str] = &["k:a", "k:b", "k:c"];
/// The databases the sequences use; 16 and the others are out of range.
pub const DBS: &[&str] = &["0", "1", "2", "15"];
const BAD_DBS: &[&str] = &["16", "-1", "x"];
const VALUES: &[&str] = &["1", "7", "abc", "", "-3", "2.5", "123456"];
const MEMBERS: &[&str] = &["a", "b", "c", "1", "2"];
/// Relative expiries under GT/LT come from a wide range: two equal ones
/// would compare by the milliseconds between them, which differ.
const FLAGS: &[&str] = &["NX", "XX", "GT", "LT"];

pub struct Gen {
    pub rng: StdRng,
    /// Unix seconds at the start of the sequence, for absolute expiries
    /// both servers are given as the same number.
    pub now: u64,
    /// Whether each key mostly keeps to two types (k:a strings and lists,
    /// k:b hashes and sets, k:c sorted sets and streams), so that fewer
    /// commands end in WRONGTYPE.
    pub typed: bool,
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

impl Gen {
    pub fn chance(&mut self, n: u32) -> bool {
        self.rng.gen_range(0..n) == 0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.gen_range(0..from.len())]
    }
    fn key(&mut self) -> String {
        self.pick(KEYS).to_string()
    }
    fn keys(&mut self, max: usize) -> Vec<String> {
        (0..self.rng.gen_range(1..=max))
            .map(|_| self.key())
            .collect()
    }
    fn val(&mut self) -> String {
        self.pick(VALUES).to_string()
    }
    fn member(&mut self) -> String {
        self.pick(MEMBERS).to_string()
    }
    pub fn db(&mut self) -> String {
        if self.chance(10) {
            self.pick(BAD_DBS).to_string()
        } else {
            self.pick(DBS).to_string()
        }
    }
    /// A relative expiry: now and then one to end it right away or an
    /// invalid one; `ms` in milliseconds.
    fn ttl(&mut self, ms: bool) -> String {
        match self.rng.gen_range(0..12) {
            0 => "0".into(),
            1 => "-5".into(),
            2 => "x".into(),
            3 if ms => "1".into(),
            _ => {
                let s = self.rng.gen_range(1_000u64..1_000_000);
                (if ms { s * 1000 } else { s }).to_string()
            }
        }
    }
    /// An absolute expiry: past, or a future time both servers share.
    fn at(&mut self, ms: bool) -> String {
        let s = match self.rng.gen_range(0..6) {
            0 => 1,
            1 => self.now - 10,
            _ => self.now + self.rng.gen_range(1_000u64..1_000_000),
        };
        (if ms { s * 1000 } else { s }).to_string()
    }
    fn timeout(&mut self) -> String {
        self.pick(&["0", "0", "0", "0.5", "-1", "x"]).to_string()
    }

    /// One command, as its words.
    pub fn command(&mut self) -> Vec<String> {
        let k = self.key();
        match self.rng.gen_range(0..60) {
            0..=2 => vec!["SELECT".into(), self.db()],
            3 => vec!["MOVE".into(), k, self.db()],
            4 => vec!["SWAPDB".into(), self.db(), self.db()],
            5 => {
                let mut c = vec!["COPY".into(), k, self.key()];
                if self.chance(2) {
                    c.extend(["DB".into(), self.db()]);
                }
                if self.chance(2) {
                    c.push("REPLACE".into());
                }
                c
            }
            6 if self.chance(3) => {
                let mut c = words(&[self.pick(&["FLUSHDB", "FLUSHDB", "FLUSHALL"])]);
                if self.chance(3) {
                    c.push(self.pick(&["ASYNC", "SYNC", "x"]).into());
                }
                c
            }
            7 => words(&[self.pick(&["RANDOMKEY", "DBSIZE"])]),
            8..=10 => {
                let mut c = vec!["WATCH".into()];
                c.extend(self.keys(2));
                c
            }
            11 => words(&["UNWATCH"]),
            12 | 13 => {
                let ms = self.chance(2);
                let mut c = if self.chance(2) {
                    let name = if ms { "PEXPIRE" } else { "EXPIRE" };
                    vec![name.into(), k, self.ttl(ms)]
                } else {
                    let name = if ms { "PEXPIREAT" } else { "EXPIREAT" };
                    vec![name.into(), k, self.at(ms)]
                };
                if self.chance(2) {
                    c.push(self.pick(FLAGS).into());
                }
                if self.chance(15) {
                    c.push(self.pick(FLAGS).into());
                }
                c
            }
            14 => vec![
                self.pick(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME", "PERSIST"])
                    .into(),
                k,
            ],
            15 | 16 => self.set(k),
            17 => {
                let mut c = vec!["GETEX".into(), k];
                match self.rng.gen_range(0..7) {
                    0 => c.push("PERSIST".into()),
                    1 => c.extend(["EXAT".into(), self.at(false)]),
                    2 => c.extend(["PXAT".into(), self.at(true)]),
                    3 => c.extend(["EX".into(), self.ttl(false)]),
                    4 => c.extend(["PX".into(), self.ttl(true)]),
                    5 => c.extend(words(&["PERSIST", "EX", "10"])),
                    _ => {}
                }
                c
            }
            18 => vec![
                "OBJECT".into(),
                self.pick(&["FREQ", "IDLETIME", "REFCOUNT"]).into(),
                k,
            ],
            19 => self.sort(k),
            20..=23 => self.blocking(k),
            _ => self.data(k),
        }
    }

    /// SET with its options, now and then a combination Redis refuses.
    fn set(&mut self, k: String) -> Vec<String> {
        let mut c = vec!["SET".into(), k, self.val()];
        if self.chance(3) {
            c.push(self.pick(&["NX", "XX"]).into());
        }
        if self.chance(2) {
            c.push("GET".into());
        }
        match self.rng.gen_range(0..7) {
            0 => c.extend(["EX".into(), self.ttl(false)]),
            1 => c.extend(["PX".into(), self.ttl(true)]),
            2 => c.extend(["EXAT".into(), self.at(false)]),
            3 => c.extend(["PXAT".into(), self.at(true)]),
            4 | 5 => c.push("KEEPTTL".into()),
            _ => {}
        }
        if self.chance(12) {
            c.push(self.pick(&["KEEPTTL", "EX", "PXAT", "NX"]).into());
            c.push("100".into());
        }
        c
    }

    fn sort(&mut self, k: String) -> Vec<String> {
        let store = self.chance(3);
        let mut c = vec![if store { "SORT" } else { "SORT_RO" }.into(), k];
        if self.chance(3) {
            c.extend(words(&["BY", "nosort"]));
        }
        if self.chance(3) {
            c.extend(words(&["LIMIT", "1", "2"]));
        }
        if self.chance(2) {
            c.push("ALPHA".into());
        }
        if self.chance(3) {
            c.push("DESC".into());
        }
        if store {
            c.extend(["STORE".into(), self.key()]);
        }
        c
    }

    /// A blocking command; the harness keeps those that would wait rare.
    fn blocking(&mut self, k: String) -> Vec<String> {
        let side = |g: &mut Gen| g.pick(&["LEFT", "RIGHT"]).to_string();
        match self.rng.gen_range(0..9) {
            0 => {
                let mut c = vec![self.pick(&["BLPOP", "BRPOP"]).into()];
                c.extend(self.keys(2));
                c.push(self.timeout());
                c
            }
            1 => vec![
                "BLMOVE".into(),
                k,
                self.key(),
                side(self),
                side(self),
                self.timeout(),
            ],
            2 => vec!["BRPOPLPUSH".into(), k, self.key(), self.timeout()],
            3 => {
                let keys = self.keys(2);
                let mut c = vec!["BLMPOP".into(), self.timeout(), keys.len().to_string()];
                c.extend(keys);
                c.push(side(self));
                if self.chance(2) {
                    c.extend(["COUNT".into(), self.pick(&["1", "2", "0"]).into()]);
                }
                c
            }
            4 => {
                let mut c = vec![self.pick(&["BZPOPMIN", "BZPOPMAX"]).into()];
                c.extend(self.keys(2));
                c.push(self.timeout());
                c
            }
            5 => {
                let keys = self.keys(2);
                let mut c = vec!["BZMPOP".into(), self.timeout(), keys.len().to_string()];
                c.extend(keys);
                c.push(self.pick(&["MIN", "MAX"]).into());
                if self.chance(2) {
                    c.extend(["COUNT".into(), self.pick(&["1", "3"]).into()]);
                }
                c
            }
            6 | 7 => {
                let group = self.chance(2);
                let mut c = if group {
                    words(&["XREADGROUP", "GROUP", "g", self.pick(&["c1", "c2"])])
                } else {
                    words(&["XREAD"])
                };
                if self.chance(2) {
                    c.extend(["COUNT".into(), self.pick(&["1", "2"]).into()]);
                }
                let ms = self.pick(&["0", "0", "100", "-1"]);
                c.extend(words(&["BLOCK", ms]));
                if group && self.chance(4) {
                    c.push("NOACK".into());
                }
                let id = if group {
                    self.pick(&[">", ">", "0"])
                } else {
                    self.pick(&["0", "0", "0", "2-0", "$"])
                };
                c.extend(words(&["STREAMS", &k, id]));
                c
            }
            _ => vec!["BLPOP".into(), k, self.timeout()],
        }
    }

    /// A data command of some type; many change nothing when the member,
    /// field or key is missing or already there.
    fn data(&mut self, k: String) -> Vec<String> {
        let m = self.member();
        let s = |w: &str| w.to_string();
        let range = match k.as_str() {
            _ if !self.typed || self.chance(20) => 0..40,
            "k:a" => 0..14,
            "k:b" => 14..24,
            _ => 24..38,
        };
        match self.rng.gen_range(range) {
            0 => vec![s("GET"), k],
            1 => vec![s("APPEND"), k, self.pick(&["x", ""]).into()],
            2 => vec![s("INCR"), k],
            3 => vec![s("SETRANGE"), k, s("0"), self.pick(&["", "z"]).into()],
            4 => {
                let mut c = vec![s(self.pick(&["DEL", "UNLINK", "EXISTS", "TOUCH"]))];
                c.extend(self.keys(2));
                c
            }
            5 => vec![s("TYPE"), k],
            6 => vec![s(self.pick(&["RENAME", "RENAMENX"])), k, self.key()],
            7 => vec![s("GETDEL"), k],
            8 => vec![s(self.pick(&["LPUSH", "RPUSH", "LPUSHX"])), k, m],
            9 => vec![s(self.pick(&["LPOP", "RPOP"])), k],
            10 => vec![s("LREM"), k, s("0"), m],
            11 => vec![s("LTRIM"), k, s(self.pick(&["0", "1"])), s("-1")],
            12 => vec![s("LRANGE"), k, s("0"), s("-1")],
            13 => vec![s("LMOVE"), k, self.key(), s("LEFT"), s("RIGHT")],
            14 => vec![s(self.pick(&["HSET", "HSETNX"])), k, m, self.val()],
            15 => vec![s("HDEL"), k, m],
            16 => vec![s("HGETALL"), k],
            17 => vec![s("HINCRBY"), k, m, s(self.pick(&["1", "0"]))],
            18 | 19 => vec![s("SADD"), k, m],
            20 => vec![s("SREM"), k, m],
            21 => vec![s("SMEMBERS"), k],
            22 => vec![s("SMOVE"), k, self.key(), m],
            23 => vec![
                s(self.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])),
                k,
                self.key(),
                self.key(),
            ],
            24 => {
                let mut c = vec![s("ZADD"), k];
                if self.chance(3) {
                    c.push(s(self.pick(&["NX", "XX", "GT", "LT", "CH"])));
                }
                c.extend([s(self.pick(&["1", "2", "2.5"])), m]);
                c
            }
            25 => vec![s("ZREM"), k, m],
            26 => vec![s("ZRANGE"), k, s("0"), s("-1"), s("WITHSCORES")],
            27 => vec![s("ZINCRBY"), k, s(self.pick(&["1", "0"])), m],
            28 => vec![
                s(self.pick(&["ZUNIONSTORE", "ZINTERSTORE"])),
                k,
                s("2"),
                self.key(),
                self.key(),
            ],
            29 | 30 => {
                let id = format!("{}-{}", self.rng.gen_range(1..7), self.rng.gen_range(0..2));
                vec![s("XADD"), k, id, s("f"), m]
            }
            31 => vec![s("XDEL"), k, format!("{}-0", self.rng.gen_range(1..7))],
            32 => vec![s("XRANGE"), k, s("-"), s("+")],
            33 => vec![s("XTRIM"), k, s("MAXLEN"), s(self.pick(&["1", "100"]))],
            34 => {
                let mut c = words(&["XGROUP", "CREATE", &k, "g", self.pick(&["0", "$"])]);
                if self.chance(2) {
                    c.push(s("MKSTREAM"));
                }
                c
            }
            35 => vec![
                s("XACK"),
                k,
                s("g"),
                format!("{}-0", self.rng.gen_range(1..7)),
            ],
            36 => vec![s("XPENDING"), k, s("g")],
            37 => vec![s("XLEN"), k],
            38 => vec![s("SETNX"), k, self.val()],
            _ => vec![s("STRLEN"), k],
        }
    }
}
