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

/// One key of a snapshot.
pub struct SnapKey {
    pub key: Bytes,
    pub value: Value,
    pub expire_at_ms: u64,
}

/// A consistent copy of the keyspace, taken under every shard lock.
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
}

/// The RDB file of `snap`. Every type has an RDB encoding; a key that had
/// none would be left out with a warning rather than end the sync.
pub fn write(snap: &Snapshot, origin: &Origin<'_>, limits: &EncodingLimits) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 << 16);
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
        ("repl-stream-db", "0".into()),
        ("repl-id", origin.replid.to_string()),
        ("repl-offset", origin.offset.to_string()),
        ("aof-base", "0".into()),
    ];
    for (k, v) in aux {
        out.push(op::AUX);
        put_string(&mut out, k.as_bytes());
        put_string(&mut out, v.as_bytes());
    }
    for code in &snap.functions {
        out.push(op::FUNCTION2);
        put_string(&mut out, code);
    }
    let mut skipped = 0usize;
    for (db, keys) in snap.dbs.iter().enumerate() {
        if keys.is_empty() {
            continue;
        }
        out.push(op::SELECTDB);
        put_length(&mut out, db as u64);
        out.push(op::RESIZEDB);
        put_length(&mut out, keys.len() as u64);
        let volatile = keys.iter().filter(|k| k.expire_at_ms != 0).count();
        put_length(&mut out, volatile as u64);
        for k in keys {
            let Some((t, body)) = rdb_value::rdb_object(&k.value, limits) else {
                skipped += 1;
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
    }
    if skipped > 0 {
        tracing::warn!("full sync: {skipped} keys of a type without an RDB encoding were not sent");
    }
    out.push(op::EOF);
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// What a loaded RDB file held besides its keys.
#[derive(Default, Debug)]
pub struct Loaded {
    pub keys: u64,
    pub functions: Vec<Bytes>,
}

/// Reads an RDB file (versions up to 10), calling `key(db, key, value,
/// expire_at_ms)` for each key. Refuses a damaged file or one holding what
/// durakv cannot load (modules).
pub fn read(
    data: &[u8],
    mut key: impl FnMut(u32, Bytes, Value, u64) -> Result<(), String>,
) -> Result<Loaded, String> {
    if data.len() < 9 || &data[..5] != MAGIC {
        return Err("not an RDB file".into());
    }
    let version: u16 = std::str::from_utf8(&data[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or("bad RDB version")?;
    if version > VERSION {
        return Err(format!("RDB version {version} is newer than {VERSION}"));
    }
    if version >= 5 && data.len() >= 17 {
        let (body, crc) = data.split_at(data.len() - 8);
        let want = u64::from_le_bytes(crc.try_into().map_err(|_| "short RDB")?);
        if want != 0 && CRC64.checksum(body) != want {
            return Err("RDB checksum mismatch".into());
        }
    }
    let mut r = Reader::new(&data[9..]);
    let bad = |what: &str| format!("damaged RDB: {what}");
    let mut loaded = Loaded::default();
    let mut db = 0u32;
    let mut expire = 0u64;
    loop {
        let t = r.byte().ok_or_else(|| bad("truncated"))?;
        match t {
            op::EOF => return Ok(loaded),
            op::AUX => {
                r.string().ok_or_else(|| bad("aux"))?;
                r.string().ok_or_else(|| bad("aux"))?;
            }
            op::SELECTDB => {
                db = r.length().ok_or_else(|| bad("selectdb"))? as u32;
            }
            op::RESIZEDB => {
                r.length().ok_or_else(|| bad("resizedb"))?;
                r.length().ok_or_else(|| bad("resizedb"))?;
            }
            op::EXPIRETIME_MS => {
                let b = r.array::<8>().ok_or_else(|| bad("expire"))?;
                expire = u64::from_le_bytes(b);
            }
            op::EXPIRETIME => {
                let b = r.array::<4>().ok_or_else(|| bad("expire"))?;
                expire = u64::from(u32::from_le_bytes(b)) * 1000;
            }
            op::IDLE => {
                r.length().ok_or_else(|| bad("idle"))?;
            }
            op::FREQ => {
                r.byte().ok_or_else(|| bad("freq"))?;
            }
            op::FUNCTION2 => {
                let code = r.string().ok_or_else(|| bad("function"))?;
                loaded.functions.push(code);
            }
            op::FUNCTION_PRE_GA | op::MODULE_AUX => {
                return Err(
                    "RDB holds module data or pre-release functions, which durakv cannot load"
                        .into(),
                );
            }
            _ => {
                let k = r.string().ok_or_else(|| bad("key"))?;
                let v = rdb_value::read_rdb_object(t, &mut r).ok_or_else(|| {
                    format!(
                        "cannot load key {:?}: RDB type {t} is damaged or not supported",
                        String::from_utf8_lossy(&k)
                    )
                })?;
                key(db, k, v, std::mem::take(&mut expire))?;
                loaded.keys += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use durakv_engine::value::ListValue;

    #[test]
    fn snapshot_round_trips() {
        let list: ListValue = vec![Bytes::from("a"), Bytes::from("b")].into();
        let snap = Snapshot {
            dbs: vec![
                vec![SnapKey {
                    key: Bytes::from("s"),
                    value: Value::Str(Bytes::from("v").into()),
                    expire_at_ms: 4_000_000_000_000,
                }],
                vec![],
                vec![SnapKey {
                    key: Bytes::from("l"),
                    value: Value::List(Box::new(list)),
                    expire_at_ms: 0,
                }],
            ],
            functions: vec![Bytes::from("#!lua name=x\n")],
        };
        let origin = Origin {
            replid: "0123",
            offset: 7,
            used_mem: 1,
        };
        let rdb = write(&snap, &origin, &EncodingLimits::default());
        let mut got = Vec::new();
        let loaded = read(&rdb, |db, k, v, e| {
            got.push((db, k, v, e));
            Ok(())
        })
        .unwrap();
        assert_eq!(loaded.keys, 2);
        assert_eq!(loaded.functions.len(), 1);
        assert_eq!(got[0].0, 0);
        assert_eq!(got[0].3, 4_000_000_000_000);
        assert_eq!(got[1].0, 2);
        let mut bad = rdb.clone();
        bad[12] ^= 1;
        assert!(read(&bad, |_, _, _, _| Ok(())).is_err());
    }
}
