//! Whole-dataset transfer for a full sync, in Redis 7.0's RDB file format
//! (version 10): what a Redis 7 replica loads, and what a Redis 7 primary
//! sends. The subset durakv writes and reads is documented in
//! `docs/replication.md`.

use crate::rdb_value;
use crate::rdb_value::primitives::{put_length, put_string, Reader, CRC64};
use bytes::Bytes;
use durakv_engine::value::{EncodingLimits, Value};

pub const MAGIC: &[u8] = b"REDIS";
pub const VERSION: u16 = 10;

/// RDB opcodes (Redis's `RDB_OPCODE_*`).
mod op {
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

pub use durakv_engine::snapshot::SnapKey;

/// A consistent copy of the keyspace (see `durakv_engine::snapshot`).
#[derive(Default)]
pub struct Snapshot {
    /// Per database (index = db), its keys.
    pub dbs: Vec<Vec<SnapKey>>,
    /// Function library code, in name order.
    pub functions: Vec<Bytes>,
}

/// What the aux fields say about the sender.
pub struct Origin<'a> {
    pub replid: &'a str,
    pub offset: u64,
    pub used_mem: u64,
    /// The database the stream has selected at `offset` (`repl-stream-db`):
    /// a replica's stream goes on without a SELECT where its primary's was.
    pub stream_db: u32,
}

/// The CRC the file ends with, computed as its pieces are produced.
static CRC: crc::Crc<u64> = CRC64;

/// Produces an RDB file piece by piece, so a full sync can send keys while
/// the snapshot is still being copied. Every type has an RDB encoding; a
/// key that had none would be left out with a warning rather than end the
/// sync.
pub struct Encoder {
    digest: crc::Digest<'static, u64>,
    limits: EncodingLimits,
    db: Option<usize>,
    skipped: usize,
}

impl Encoder {
    /// The encoder and the file's first piece: header, aux fields, and the
    /// function libraries.
    pub fn start(
        origin: &Origin<'_>,
        functions: &[Bytes],
        limits: &EncodingLimits,
    ) -> (Encoder, Vec<u8>) {
        let mut out = Vec::with_capacity(1 << 12);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(format!("{VERSION:04}").as_bytes());
        let ctime = crate::util::now_ms() / 1000;
        let aux: [(&str, String); 8] = [
            (
                "redis-ver",
                crate::cmd::connection::REDIS_COMPAT_VERSION.to_string(),
            ),
            ("redis-bits", "64".into()),
            ("ctime", ctime.to_string()),
            ("used-mem", origin.used_mem.to_string()),
            ("repl-stream-db", origin.stream_db.to_string()),
            ("repl-id", origin.replid.to_string()),
            ("repl-offset", origin.offset.to_string()),
            ("aof-base", "0".into()),
        ];
        for (k, v) in aux {
            out.push(op::AUX);
            put_string(&mut out, k.as_bytes());
            put_string(&mut out, v.as_bytes());
        }
        for code in functions {
            out.push(op::FUNCTION2);
            put_string(&mut out, code);
        }
        let mut e = Encoder {
            digest: CRC.digest(),
            limits: *limits,
            db: None,
            skipped: 0,
        };
        e.digest.update(&out);
        (e, out)
    }

    /// The next piece: `keys` of database `db`. `sizes`, when the caller
    /// knows them, are the database's key and volatile-key counts for
    /// RESIZEDB (a hint for the loader).
    pub fn keys(&mut self, db: usize, keys: &[SnapKey], sizes: Option<(usize, usize)>) -> Vec<u8> {
        let mut out = Vec::with_capacity(keys.len() * 64);
        if keys.is_empty() {
            return out;
        }
        if self.db != Some(db) {
            self.db = Some(db);
            out.push(op::SELECTDB);
            put_length(&mut out, db as u64);
            if let Some((n, volatile)) = sizes {
                out.push(op::RESIZEDB);
                put_length(&mut out, n as u64);
                put_length(&mut out, volatile as u64);
            }
        }
        for k in keys {
            let Some((t, body)) = rdb_value::rdb_object(&k.value, &self.limits) else {
                self.skipped += 1;
                continue;
            };
            if k.expire_at_ms != 0 {
                out.push(op::EXPIRETIME_MS);
                out.extend_from_slice(&k.expire_at_ms.to_le_bytes());
            }
            out.push(t);
            put_string(&mut out, &k.key);
            out.extend_from_slice(&body);
        }
        self.digest.update(&out);
        out
    }

    /// The last piece: the end marker and the checksum.
    pub fn finish(mut self) -> Vec<u8> {
        if self.skipped > 0 {
            tracing::warn!(
                "full sync: {} keys of a type without an RDB encoding were not sent",
                self.skipped
            );
        }
        let mut out = vec![op::EOF];
        self.digest.update(&out);
        out.extend_from_slice(&self.digest.finalize().to_le_bytes());
        out
    }
}

/// The whole RDB file of `snap`.
pub fn write(snap: &Snapshot, origin: &Origin<'_>, limits: &EncodingLimits) -> Vec<u8> {
    let (mut e, mut out) = Encoder::start(origin, &snap.functions, limits);
    for (db, keys) in snap.dbs.iter().enumerate() {
        let volatile = keys.iter().filter(|k| k.expire_at_ms != 0).count();
        out.extend(e.keys(db, keys, Some((keys.len(), volatile))));
    }
    out.extend(e.finish());
    out
}

/// What a loaded RDB file held besides its keys.
#[derive(Default, Debug)]
pub struct Loaded {
    pub keys: u64,
    pub functions: Vec<Bytes>,
    /// `repl-stream-db`: the database the stream after the file has
    /// selected (0 when the file does not say).
    pub stream_db: u32,
}

/// Reads an RDB file (versions up to 10), calling `key(db, key, value,
/// expire_at_ms)` for each key. Refuses a damaged file or one holding what
/// durakv cannot load (modules).
pub fn read(
    data: &[u8],
    mut key: impl FnMut(u32, Bytes, Value, u64) -> Result<(), String>,
) -> Result<Loaded, String> {
    let mut l = Loader::default();
    l.feed(data, &mut key)?;
    l.finish(&mut key)
}

/// Why one item could not be read: its bytes have not all arrived, or
/// (once they all have) what was damaged.
enum Short {
    Item(&'static str),
    Fatal(String),
}

/// Reads an RDB file as its bytes arrive (a full sync), so the replica
/// holds one item's bytes at a time rather than the file. Keys are handed
/// over as they are read; the checksum at the end is checked last, and a
/// mismatch fails the sync (which starts over from an empty dataset).
#[derive(Default)]
pub struct Loader {
    /// Bytes received and not read yet (the start of an item).
    pending: Vec<u8>,
    digest: Option<crc::Digest<'static, u64>>,
    version: Option<u16>,
    db: u32,
    expire: u64,
    loaded: Loaded,
    /// The EOF opcode was read: only the checksum follows.
    ended: bool,
    /// An item that did not fit is read again once this many bytes are
    /// pending (twice as many), so a huge value costs linear time.
    retry_at: usize,
}

impl Loader {
    /// Takes the next bytes of the file and reads every item they complete.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        key: &mut impl FnMut(u32, Bytes, Value, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() < self.retry_at {
            return Ok(());
        }
        self.read_items(key, false)
    }

    /// Whether the file's end and its checksum have arrived: what follows
    /// is not the file's (Redis 6's append-only file, an RDB followed by
    /// commands).
    pub fn complete(&self) -> bool {
        self.ended && (self.version.unwrap_or(0) < 5 || self.pending.len() >= 8)
    }

    /// The file is complete: reads what is left and checks the checksum.
    pub fn finish(
        self,
        key: &mut impl FnMut(u32, Bytes, Value, u64) -> Result<(), String>,
    ) -> Result<Loaded, String> {
        self.finish_with_rest(key).map(|(loaded, _)| loaded)
    }

    /// As `finish`, also returning the bytes received after the checksum.
    pub fn finish_with_rest(
        mut self,
        key: &mut impl FnMut(u32, Bytes, Value, u64) -> Result<(), String>,
    ) -> Result<(Loaded, Vec<u8>), String> {
        self.read_items(key, true)?;
        if !self.ended {
            return Err("damaged RDB: truncated".into());
        }
        if self.version.unwrap_or(0) >= 5 {
            if self.pending.len() < 8 {
                return Err("damaged RDB: truncated checksum".into());
            }
            let want = u64::from_le_bytes(self.pending[..8].try_into().map_err(|_| "short RDB")?);
            let got = self.digest.take().map(|d| d.finalize());
            if want != 0 && got != Some(want) {
                return Err("RDB checksum mismatch".into());
            }
            return Ok((self.loaded, self.pending[8..].to_vec()));
        }
        Ok((self.loaded, self.pending))
    }

    fn read_items(
        &mut self,
        key: &mut impl FnMut(u32, Bytes, Value, u64) -> Result<(), String>,
        last: bool,
    ) -> Result<(), String> {
        let data = std::mem::take(&mut self.pending);
        let mut at = 0;
        while !self.ended {
            let step = if self.version.is_none() {
                self.header(&data[at..])
            } else {
                self.item(&data[at..], key)
            };
            match step {
                Ok(n) => {
                    let digest = self.digest.get_or_insert_with(|| CRC.digest());
                    digest.update(&data[at..at + n]);
                    at += n;
                }
                Err(Short::Item(_)) if !last => break,
                Err(Short::Item(what)) => return Err(format!("damaged RDB: {what}")),
                Err(Short::Fatal(e)) => return Err(e),
            }
        }
        self.pending = data[at..].to_vec();
        self.retry_at = if at == 0 { self.pending.len() * 2 } else { 0 };
        Ok(())
    }

    fn header(&mut self, data: &[u8]) -> Result<usize, Short> {
        if data.len() < 9 {
            return Err(Short::Item("header"));
        }
        if &data[..5] != MAGIC {
            return Err(Short::Fatal("not an RDB file".into()));
        }
        let version: u16 = std::str::from_utf8(&data[5..9])
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Short::Fatal("bad RDB version".into()))?;
        if version > VERSION {
            return Err(Short::Fatal(format!(
                "RDB version {version} is newer than {VERSION}"
            )));
        }
        self.version = Some(version);
        Ok(9)
    }

    /// Reads one item from the start of `data`: how many bytes it took.
    fn item(
        &mut self,
        data: &[u8],
        key: &mut impl FnMut(u32, Bytes, Value, u64) -> Result<(), String>,
    ) -> Result<usize, Short> {
        let mut r = Reader::new(data);
        let t = r.byte().ok_or(Short::Item("truncated"))?;
        match t {
            op::EOF => self.ended = true,
            op::AUX => {
                let k = r.string().ok_or(Short::Item("aux"))?;
                let v = r.string().ok_or(Short::Item("aux"))?;
                if k == "repl-stream-db" {
                    self.loaded.stream_db = std::str::from_utf8(&v)
                        .ok()
                        .and_then(|d| d.parse().ok())
                        .unwrap_or(0);
                }
            }
            op::SELECTDB => {
                self.db = r.length().ok_or(Short::Item("selectdb"))? as u32;
            }
            op::RESIZEDB => {
                r.length().ok_or(Short::Item("resizedb"))?;
                r.length().ok_or(Short::Item("resizedb"))?;
            }
            op::EXPIRETIME_MS => {
                let b = r.array::<8>().ok_or(Short::Item("expire"))?;
                self.expire = u64::from_le_bytes(b);
            }
            op::EXPIRETIME => {
                let b = r.array::<4>().ok_or(Short::Item("expire"))?;
                self.expire = u64::from(u32::from_le_bytes(b)) * 1000;
            }
            op::IDLE => {
                r.length().ok_or(Short::Item("idle"))?;
            }
            op::FREQ => {
                r.byte().ok_or(Short::Item("freq"))?;
            }
            op::FUNCTION2 => {
                let code = r.string().ok_or(Short::Item("function"))?;
                self.loaded.functions.push(code);
            }
            op::FUNCTION_PRE_GA | op::MODULE_AUX => {
                return Err(Short::Fatal(
                    "RDB holds module data or pre-release functions, which durakv cannot load"
                        .into(),
                ));
            }
            _ => {
                let k = r.string().ok_or(Short::Item("key"))?;
                let Some(v) = rdb_value::read_rdb_object(t, &mut r) else {
                    // Incomplete, or of a type durakv cannot read: which one
                    // shows once the whole file is here.
                    return Err(Short::Item(if rdb_value::is_known_type(t) {
                        "a value is damaged"
                    } else {
                        "a value has a type durakv does not support"
                    }));
                };
                key(self.db, k, v, std::mem::take(&mut self.expire)).map_err(Short::Fatal)?;
                self.loaded.keys += 1;
            }
        }
        Ok(r.position())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use durakv_engine::value::ListValue;

    fn sample() -> Snapshot {
        let list: ListValue = [b"a", b"b"].into_iter().collect();
        Snapshot {
            dbs: vec![
                vec![SnapKey {
                    key: Bytes::from("s"),
                    value: Value::Str(Bytes::from("v").into()),
                    expire_at_ms: 4_000_000_000_000,
                }],
                vec![],
                vec![SnapKey {
                    key: Bytes::from("l"),
                    value: Value::List(std::sync::Arc::new(list)),
                    expire_at_ms: 0,
                }],
            ],
            functions: vec![Bytes::from("#!lua name=x\n")],
        }
    }

    const ORIGIN: Origin<'static> = Origin {
        replid: "0123",
        offset: 7,
        used_mem: 1,
        stream_db: 3,
    };

    #[test]
    fn snapshot_round_trips() {
        let rdb = write(&sample(), &ORIGIN, &EncodingLimits::default());
        let mut got = Vec::new();
        let loaded = read(&rdb, |db, k, v, e| {
            got.push((db, k, v, e));
            Ok(())
        })
        .unwrap();
        assert_eq!(loaded.keys, 2);
        assert_eq!(loaded.functions.len(), 1);
        assert_eq!(loaded.stream_db, 3, "repl-stream-db read back");
        assert_eq!(got[0].0, 0);
        assert_eq!(got[0].3, 4_000_000_000_000);
        assert_eq!(got[1].0, 2);
        let mut bad = rdb.clone();
        bad[12] ^= 1;
        assert!(read(&bad, |_, _, _, _| Ok(())).is_err());
    }

    /// A full sync reads the file as it arrives: any split of the bytes
    /// loads the same keys, and a file cut short is refused at its end.
    #[test]
    fn a_file_read_in_pieces_loads_the_same() {
        let rdb = write(&sample(), &ORIGIN, &EncodingLimits::default());
        let mut whole = Vec::new();
        read(&rdb, |db, k, v, e| {
            whole.push((db, k, v, e));
            Ok(())
        })
        .unwrap();
        for size in [1, 2, 3, 7, 16, 64, 4096] {
            let mut got = Vec::new();
            let mut key = |db, k, v, e| {
                got.push((db, k, v, e));
                Ok(())
            };
            let mut l = Loader::default();
            for piece in rdb.chunks(size) {
                l.feed(piece, &mut key).unwrap();
            }
            let loaded = l.finish(&mut key).unwrap();
            assert_eq!(loaded.keys, 2, "pieces of {size}");
            assert_eq!(loaded.functions.len(), 1);
            assert_eq!(got, whole, "pieces of {size}");
        }
        for cut in [5, 20, rdb.len() - 9, rdb.len() - 1] {
            let mut l = Loader::default();
            let mut key = |_, _, _, _| Ok(());
            l.feed(&rdb[..cut], &mut key).unwrap();
            assert!(l.finish(&mut key).is_err(), "cut at {cut}");
        }
    }
}
