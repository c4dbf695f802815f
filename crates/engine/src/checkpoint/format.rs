//! The bytes of a checkpoint (snapshot) file, and nothing else.
//!
//! Every offset and field of the file lives here, so the writer and the
//! reader cannot disagree and `docs/format.md` ("Checkpoint") has exactly
//! one place to be checked against. Encoding is infallible; decoding is
//! bounds-checked, verifies CRC32C checksums before trusting any length, and
//! reports what is wrong as a short reason that the caller turns into a
//! [`super::CheckpointError::Corruption`] carrying the file and offset.
//!
//! Layout: a 64-byte file header, then (version 2) the function-library
//! section, then blocks (each a 56-byte block header and a body:
//! LZ4-compressed or stored entries of one shard), then a 64-byte footer
//! that proves the file is complete and names the LSN replay must start
//! after.

use crate::codec::{self, Reader};
use crate::db::Entry;
use crate::key::Key;
use crate::value::Value;
use bytes::Bytes;
use std::path::{Path, PathBuf};

/// ASCII `DURAKVCP`: first 8 bytes of every checkpoint file.
pub const FILE_MAGIC: [u8; 8] = *b"DURAKVCP";
/// Format version written by this code. Version 3 adds stream values
/// (value tag 5); version 4 the replication-position section after the
/// function libraries; version 5 stream values whose consumers carry
/// their active time (value tag 6, in place of 5); version 6 packed
/// hashes as their in-memory buffer (value tag 7).
pub const FORMAT_VERSION: u32 = 6;
/// The first version whose entries may hold value tag 6.
pub const STREAM_ACTIVE_VERSION: u32 = 5;
/// The first version whose entries may hold value tag 7.
pub const PACKED_HASH_VERSION: u32 = 6;
/// The oldest version a checkpoint can be written in (for a rollback to
/// the build before version 6, which reads versions up to 5).
pub const OLDEST_WRITTEN_VERSION: u32 = 5;
/// The oldest version the reader accepts (no function-library section).
pub const MIN_FORMAT_VERSION: u32 = 1;
/// ASCII `DKFN`: first 4 bytes of the function-library section.
pub const FUNCTIONS_MAGIC: [u8; 4] = *b"DKFN";
pub const FUNCTIONS_HEADER_BYTES: usize = 32;
/// ASCII `DKRP`: first 4 bytes of the replication-position section.
pub const REPL_MAGIC: [u8; 4] = *b"DKRP";
pub const REPL_HEADER_BYTES: usize = 32;
/// Longest replication ID the section holds (Redis's are 40 characters).
pub const MAX_REPLID_BYTES: u32 = 256;
/// ASCII `DKCB`: first 4 bytes of every block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"DKCB";
/// ASCII `DKCPFOOT`: first 8 bytes of the footer.
pub const FOOTER_MAGIC: [u8; 8] = *b"DKCPFOOT";

pub const FILE_HEADER_BYTES: usize = 64;
pub const BLOCK_HEADER_BYTES: usize = 56;
pub const FOOTER_BYTES: usize = 64;

/// Block flag: this is the last block of its shard.
pub const BLOCK_FLAG_LAST: u32 = 1;
/// Block flag: the body is LZ4 block-compressed (otherwise stored as is).
pub const BLOCK_FLAG_LZ4: u32 = 1 << 1;
const BLOCK_FLAGS_KNOWN: u32 = BLOCK_FLAG_LAST | BLOCK_FLAG_LZ4;

/// Largest uncompressed block body the reader accepts: 64 GiB. Blocks are
/// cut at about `block_target_bytes` (default 1 MiB); only one huge value
/// makes a bigger one. The bound stops a damaged-but-checksummed length from
/// asking for an absurd allocation.
pub const MAX_BLOCK_RAW_BYTES: u64 = 64 << 30;
/// Bodies larger than this are stored uncompressed (LZ4's block format is
/// specified for inputs below 2 GiB): 1 GiB.
pub const MAX_LZ4_INPUT_BYTES: usize = 1 << 30;
/// Largest number of shards or databases a header may claim.
pub const MAX_SHARDS: u32 = 1 << 16;
pub const MAX_DATABASES: u32 = 1 << 16;

/// File name suffixes.
pub const SNAPSHOT_SUFFIX: &str = ".dkcp";
pub const TEMP_SUFFIX: &str = ".dkcp.tmp";
pub const CORRUPT_SUFFIX: &str = ".dkcp.corrupt";
const NAME_PREFIX: &str = "checkpoint-";
/// Digits of the zero-padded sequence number in a file name.
const SEQ_DIGITS: usize = 20;

fn put_u32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut [u8], at: usize, v: u64) {
    out[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The 64-byte header at offset 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// Format version; version 2 adds the function-library section.
    pub version: u32,
    /// Checkpoint sequence number; equals the number in the file name.
    pub seq: u64,
    /// Wall clock when the checkpoint started (ms since the Unix epoch).
    pub created_ms: u64,
    pub shard_count: u32,
    pub db_count: u32,
    /// The WAL's last LSN when the checkpoint started (informational).
    pub wal_last_lsn: u64,
}

impl FileHeader {
    pub fn encode(&self) -> [u8; FILE_HEADER_BYTES] {
        let mut b = [0u8; FILE_HEADER_BYTES];
        b[0..8].copy_from_slice(&FILE_MAGIC);
        put_u32(&mut b, 8, self.version);
        put_u32(&mut b, 12, self.shard_count);
        put_u32(&mut b, 16, self.db_count);
        put_u32(&mut b, 20, 0);
        put_u64(&mut b, 24, self.seq);
        put_u64(&mut b, 32, self.created_ms);
        put_u64(&mut b, 40, self.wal_last_lsn);
        // 48..60 reserved (zero).
        let crc = crc32c::crc32c(&b[0..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    /// The version of a header that verifies but is newer than this build
    /// reads: a file a newer durakv wrote, not a damaged one.
    pub fn newer_version(b: &[u8]) -> Option<u32> {
        let version = get_u32(b.get(..FILE_HEADER_BYTES)?, 8);
        (b[0..8] == FILE_MAGIC
            && crc32c::crc32c(&b[0..60]) == get_u32(b, 60)
            && version > FORMAT_VERSION)
            .then_some(version)
    }

    pub fn decode(b: &[u8]) -> Result<FileHeader, &'static str> {
        if b.len() < FILE_HEADER_BYTES {
            return Err("file shorter than its header");
        }
        if b[0..8] != FILE_MAGIC {
            return Err("bad file magic (not a durakv checkpoint)");
        }
        if crc32c::crc32c(&b[0..60]) != get_u32(b, 60) {
            return Err("file header checksum mismatch");
        }
        let version = get_u32(b, 8);
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err("unsupported checkpoint format version");
        }
        if get_u32(b, 20) != 0 || b[48..60].iter().any(|&x| x != 0) {
            return Err("reserved header bytes are not zero");
        }
        let h = FileHeader {
            version,
            shard_count: get_u32(b, 12),
            db_count: get_u32(b, 16),
            seq: get_u64(b, 24),
            created_ms: get_u64(b, 32),
            wal_last_lsn: get_u64(b, 40),
        };
        if h.shard_count == 0 || h.shard_count > MAX_SHARDS || !h.shard_count.is_power_of_two() {
            return Err("shard count is zero, too large or not a power of two");
        }
        if h.db_count == 0 || h.db_count > MAX_DATABASES {
            return Err("database count out of range");
        }
        Ok(h)
    }
}

/// The 56-byte header in front of every block body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    pub shard: u32,
    /// Index of this block among its shard's blocks, from 0.
    pub chunk: u32,
    pub flags: u32,
    /// The shard's LSN: its contents are exactly the logged records with
    /// LSN <= this that touch it (plus unlogged writes).
    pub shard_lsn: u64,
    /// Bytes of the body once decompressed.
    pub raw_len: u64,
    /// Bytes of the body as stored after this header.
    pub stored_len: u64,
    pub entry_count: u32,
    /// CRC32C of the stored body bytes.
    pub body_crc: u32,
}

impl BlockHeader {
    pub fn is_last(&self) -> bool {
        self.flags & BLOCK_FLAG_LAST != 0
    }

    pub fn is_lz4(&self) -> bool {
        self.flags & BLOCK_FLAG_LZ4 != 0
    }

    pub fn encode(&self) -> [u8; BLOCK_HEADER_BYTES] {
        let mut b = [0u8; BLOCK_HEADER_BYTES];
        b[0..4].copy_from_slice(&BLOCK_MAGIC);
        put_u32(&mut b, 4, self.shard);
        put_u32(&mut b, 8, self.chunk);
        put_u32(&mut b, 12, self.flags);
        put_u64(&mut b, 16, self.shard_lsn);
        put_u64(&mut b, 24, self.raw_len);
        put_u64(&mut b, 32, self.stored_len);
        put_u32(&mut b, 40, self.entry_count);
        put_u32(&mut b, 44, self.body_crc);
        // 48..52 reserved (zero).
        let crc = crc32c::crc32c(&b[0..52]);
        put_u32(&mut b, 52, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<BlockHeader, &'static str> {
        if b.len() < BLOCK_HEADER_BYTES {
            return Err("block header cut short");
        }
        if b[0..4] != BLOCK_MAGIC {
            return Err("bad block magic");
        }
        if crc32c::crc32c(&b[0..52]) != get_u32(b, 52) {
            return Err("block header checksum mismatch");
        }
        let h = BlockHeader {
            shard: get_u32(b, 4),
            chunk: get_u32(b, 8),
            flags: get_u32(b, 12),
            shard_lsn: get_u64(b, 16),
            raw_len: get_u64(b, 24),
            stored_len: get_u64(b, 32),
            entry_count: get_u32(b, 40),
            body_crc: get_u32(b, 44),
        };
        if h.flags & !BLOCK_FLAGS_KNOWN != 0 || get_u32(b, 48) != 0 {
            return Err("unknown block flags or non-zero reserved bytes");
        }
        if h.raw_len > MAX_BLOCK_RAW_BYTES {
            return Err("block raw length exceeds MAX_BLOCK_RAW_BYTES");
        }
        if !h.is_lz4() && h.stored_len != h.raw_len {
            return Err("stored block length differs from its raw length");
        }
        Ok(h)
    }
}

/// The 64-byte footer at the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footer {
    /// Replay the log from the record after this LSN: the minimum over the
    /// shards' LSNs.
    pub replay_lsn: u64,
    /// The maximum over the shards' LSNs; the log was durable up to it
    /// before the file was published.
    pub max_shard_lsn: u64,
    pub block_count: u64,
    pub key_count: u64,
    /// Must equal the header's.
    pub seq: u64,
    /// Offset of this footer, i.e. the end of the last block.
    pub footer_offset: u64,
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut b = [0u8; FOOTER_BYTES];
        b[0..8].copy_from_slice(&FOOTER_MAGIC);
        put_u64(&mut b, 8, self.replay_lsn);
        put_u64(&mut b, 16, self.max_shard_lsn);
        put_u64(&mut b, 24, self.block_count);
        put_u64(&mut b, 32, self.key_count);
        put_u64(&mut b, 40, self.seq);
        put_u64(&mut b, 48, self.footer_offset);
        // 56..60 reserved (zero).
        let crc = crc32c::crc32c(&b[0..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<Footer, &'static str> {
        if b.len() < FOOTER_BYTES {
            return Err("footer cut short");
        }
        if b[0..8] != FOOTER_MAGIC {
            return Err("bad footer magic (file incomplete or damaged)");
        }
        if crc32c::crc32c(&b[0..60]) != get_u32(b, 60) {
            return Err("footer checksum mismatch");
        }
        if get_u32(b, 56) != 0 {
            return Err("reserved footer bytes are not zero");
        }
        let f = Footer {
            replay_lsn: get_u64(b, 8),
            max_shard_lsn: get_u64(b, 16),
            block_count: get_u64(b, 24),
            key_count: get_u64(b, 32),
            seq: get_u64(b, 40),
            footer_offset: get_u64(b, 48),
        };
        if f.replay_lsn > f.max_shard_lsn {
            return Err("footer replay LSN exceeds its maximum shard LSN");
        }
        Ok(f)
    }
}

/// The 32-byte header of the function-library section (version 2), right
/// after the file header. Its body follows: `library_count` times (u32
/// name length, name, u32 code length, code), names strictly ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionsHeader {
    pub library_count: u32,
    /// The libraries are exactly the logged records with LSN <= this that
    /// change them; replay applies such records only above it.
    pub functions_lsn: u64,
    pub body_len: u64,
    /// CRC32C of the body.
    pub body_crc: u32,
}

impl FunctionsHeader {
    pub fn encode(&self) -> [u8; FUNCTIONS_HEADER_BYTES] {
        let mut b = [0u8; FUNCTIONS_HEADER_BYTES];
        b[0..4].copy_from_slice(&FUNCTIONS_MAGIC);
        put_u32(&mut b, 4, self.library_count);
        put_u64(&mut b, 8, self.functions_lsn);
        put_u64(&mut b, 16, self.body_len);
        put_u32(&mut b, 24, self.body_crc);
        let crc = crc32c::crc32c(&b[0..28]);
        put_u32(&mut b, 28, crc);
        b
    }

    pub fn decode(b: &[u8]) -> Result<FunctionsHeader, &'static str> {
        if b.len() < FUNCTIONS_HEADER_BYTES {
            return Err("function section header cut short");
        }
        if b[0..4] != FUNCTIONS_MAGIC {
            return Err("bad function section magic");
        }
        if crc32c::crc32c(&b[0..28]) != get_u32(b, 28) {
            return Err("function section header checksum mismatch");
        }
        Ok(FunctionsHeader {
            library_count: get_u32(b, 4),
            functions_lsn: get_u64(b, 8),
            body_len: get_u64(b, 16),
            body_crc: get_u32(b, 24),
        })
    }
}

/// The replication-position section (version 4), after the function
/// libraries: a 32-byte header, then the replication ID. On a replica it
/// is the position in its primary's stream that the last logged record
/// carrying one reached (`Mutation::ReplOrigin`), with that record's LSN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplSection {
    /// The LSN of the record the position came from (0: none seen).
    pub lsn: u64,
    /// Empty: no position (never a replica, a full sync began, or
    /// REPLICAOF NO ONE).
    pub replid: Bytes,
    pub offset: u64,
    pub db: u32,
}

impl ReplSection {
    /// Header and replication ID.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; REPL_HEADER_BYTES];
        b[0..4].copy_from_slice(&REPL_MAGIC);
        put_u32(&mut b, 4, self.replid.len() as u32);
        put_u64(&mut b, 8, self.lsn);
        put_u64(&mut b, 16, self.offset);
        put_u32(&mut b, 24, self.db);
        b.extend_from_slice(&self.replid);
        let mut crc = crc32c::crc32c(&b[0..28]);
        crc = crc32c::crc32c_append(crc, &b[REPL_HEADER_BYTES..]);
        put_u32(&mut b, 28, crc);
        b
    }

    /// The replication ID's length, from a header whose magic is right
    /// (the checksum covers the ID too, so it is checked by `decode`).
    pub fn replid_len(h: &[u8]) -> Result<u32, &'static str> {
        if h.len() < REPL_HEADER_BYTES {
            return Err("replication section header cut short");
        }
        if h[0..4] != REPL_MAGIC {
            return Err("bad replication section magic");
        }
        let n = get_u32(h, 4);
        if n > MAX_REPLID_BYTES {
            return Err("replication ID longer than MAX_REPLID_BYTES");
        }
        Ok(n)
    }

    /// `b`: the header followed by exactly the replication ID.
    pub fn decode(b: &[u8]) -> Result<ReplSection, &'static str> {
        let n = Self::replid_len(b)? as usize;
        if b.len() != REPL_HEADER_BYTES + n {
            return Err("replication section cut short");
        }
        let mut crc = crc32c::crc32c(&b[0..28]);
        crc = crc32c::crc32c_append(crc, &b[REPL_HEADER_BYTES..]);
        if crc != get_u32(b, 28) {
            return Err("replication section checksum mismatch");
        }
        Ok(ReplSection {
            lsn: get_u64(b, 8),
            replid: Bytes::copy_from_slice(&b[REPL_HEADER_BYTES..]),
            offset: get_u64(b, 16),
            db: get_u32(b, 24),
        })
    }

    /// The LSN replay must start at or before: the position's, so every
    /// later record that may carry a newer one stays in the log.
    pub fn replay_bound(&self) -> Option<u64> {
        (!self.replid.is_empty()).then_some(self.lsn)
    }
}

/// The function-library section's body for `libs` (name order).
pub fn encode_functions<'a>(libs: impl Iterator<Item = (&'a Bytes, &'a Bytes)>) -> (u32, Vec<u8>) {
    let mut out = Vec::new();
    let mut n = 0u32;
    for (name, code) in libs {
        for part in [name, code] {
            out.extend_from_slice(&(part.len() as u32).to_le_bytes());
            out.extend_from_slice(part);
        }
        n += 1;
    }
    (n, out)
}

/// Decodes a function-library section body of `count` libraries.
pub fn decode_functions(body: &[u8], count: u32) -> Result<Vec<(Bytes, Bytes)>, &'static str> {
    let buf = Bytes::copy_from_slice(body);
    let mut r = Reader::shared(&buf);
    let mut out: Vec<(Bytes, Bytes)> = Vec::new();
    for _ in 0..count {
        let name = r.bytes().map_err(|e| e.reason)?;
        let code = r.bytes().map_err(|e| e.reason)?;
        if out.last().is_some_and(|(prev, _)| *prev >= name) {
            return Err("function library names out of order or repeated");
        }
        out.push((name, code));
    }
    if !r.is_empty() {
        return Err("trailing bytes after the last function library");
    }
    Ok(out)
}

/// What a file in the checkpoint directory is, judged by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A published checkpoint.
    Snapshot,
    /// Being written, or left by a crash: deleted at start-up.
    Temp,
    /// Set aside by recovery because it failed verification.
    Corrupt,
}

/// `checkpoint-<seq:020>.dkcp`.
pub fn file_name(seq: u64) -> String {
    format!("{NAME_PREFIX}{seq:0SEQ_DIGITS$}{SNAPSHOT_SUFFIX}")
}

pub fn snapshot_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(file_name(seq))
}

pub fn temp_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{NAME_PREFIX}{seq:0SEQ_DIGITS$}{TEMP_SUFFIX}"))
}

pub fn corrupt_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{NAME_PREFIX}{seq:0SEQ_DIGITS$}{CORRUPT_SUFFIX}"))
}

/// The sequence number and kind of a checkpoint-directory file, or `None`
/// for a name this code did not produce (such files are left alone).
pub fn parse_file_name(path: &Path) -> Option<(u64, FileKind)> {
    let name = path.file_name()?.to_str()?;
    let rest = name.strip_prefix(NAME_PREFIX)?;
    if rest.len() < SEQ_DIGITS {
        return None;
    }
    let (digits, suffix) = rest.split_at(SEQ_DIGITS);
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let seq: u64 = digits.parse().ok()?;
    let kind = match suffix {
        SNAPSHOT_SUFFIX => FileKind::Snapshot,
        TEMP_SUFFIX => FileKind::Temp,
        CORRUPT_SUFFIX => FileKind::Corrupt,
        _ => return None,
    };
    Some((seq, kind))
}

/// Smallest encoded entry: length, db, key length, expiry, value tag and
/// an empty string's length.
pub(crate) const MIN_ENTRY_BYTES: usize = 4 + 4 + 4 + 8 + 1 + 4;

/// Appends one entry to a block body: `entry_len u32 | db u32 | key_len u32
/// | key | expire_at_ms u64 | value` (value as `codec::encode_stored_value`
/// from version 6 on, as `codec::encode_value` before; `entry_len` counts
/// the bytes after itself).
pub fn encode_entry(
    version: u32,
    db: u32,
    key: &[u8],
    entry: &Entry,
    expire_at_ms: u64,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&db.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&expire_at_ms.to_le_bytes());
    if version >= PACKED_HASH_VERSION {
        codec::encode_stored_value(&entry.value, out);
    } else {
        codec::encode_value(&entry.value, out);
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// One decoded entry.
pub struct DecodedEntry {
    pub db: u32,
    pub key: Key,
    pub expire_at_ms: u64,
    pub value: Value,
}

/// Decodes the entry at `*pos` of a block body and advances `*pos` past it.
/// `Err` carries the offset within the body and a reason.
///
/// Every string is copied out of the block: a loaded key must cost what the
/// same key written by a client costs, and strings sharing one allocation
/// per entry would keep all of it alive for as long as any of them lives (a
/// packed hash copies its fields anyway, and would leave the key pinning
/// them).
pub fn decode_entry(
    body: &[u8],
    pos: &mut usize,
    version: u32,
) -> Result<DecodedEntry, (usize, &'static str)> {
    let at = *pos;
    if body.len() - at < MIN_ENTRY_BYTES {
        return Err((at, "entry cut short"));
    }
    let len = get_u32(body, at) as usize;
    let start = at + 4;
    if len > body.len() - start || len < MIN_ENTRY_BYTES - 4 {
        return Err((at, "entry length out of range"));
    }
    let mut r = Reader::new(&body[start..start + len]);
    let fail = |e: codec::DecodeError| (start + e.offset, e.reason);
    let db = r.u32().map_err(fail)?;
    let key = Key::new(r.slice().map_err(fail)?);
    let expire_at_ms = r.u64().map_err(fail)?;
    let value = codec::decode_value(&mut r).map_err(fail)?;
    if r.saw_active_streams && version < STREAM_ACTIVE_VERSION {
        return Err((
            at,
            "stream value with active times in a file older than version 5",
        ));
    }
    if r.saw_packed_hashes && version < PACKED_HASH_VERSION {
        return Err((at, "packed hash value in a file older than version 6"));
    }
    if !r.is_empty() {
        return Err((start + r.position(), "entry longer than its value"));
    }
    if value.is_empty_collection() {
        return Err((at, "empty collection stored"));
    }
    *pos = start + len;
    Ok(DecodedEntry {
        db,
        key,
        expire_at_ms,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the value's type byte sits in an entry with a one-byte key:
    /// length, db, key length, key, expiry.
    const VALUE_AT: usize = 4 + 4 + 4 + 1 + 8;

    /// Entry `key` of database 0, no expiry, holding `value`, as `version`
    /// encodes it.
    fn encoded(version: u32, key: &[u8], value: Value) -> Vec<u8> {
        let mut body = Vec::new();
        encode_entry(version, 0, key, &Entry::new(value), 0, &mut body);
        body
    }

    /// A YCSB-shaped record: ten 100-byte fields.
    fn ycsb_record() -> crate::value::HashValue {
        (0..10)
            .map(|i| {
                (
                    Bytes::from(format!("field{i}")),
                    Bytes::from(vec![b'v'; 100]),
                )
            })
            .collect()
    }

    #[test]
    fn headers_round_trip_and_reject_flips() {
        let h = FileHeader {
            version: FORMAT_VERSION,
            seq: 7,
            created_ms: 1_700_000_000_000,
            shard_count: 64,
            db_count: 16,
            wal_last_lsn: 99,
        };
        let b = h.encode();
        assert_eq!(FileHeader::decode(&b), Ok(h));
        for i in 0..FILE_HEADER_BYTES {
            for bit in 0..8 {
                let mut c = b;
                c[i] ^= 1 << bit;
                assert!(
                    FileHeader::decode(&c).is_err(),
                    "flip at {i}.{bit} accepted"
                );
            }
        }
        let bh = BlockHeader {
            shard: 3,
            chunk: 1,
            flags: BLOCK_FLAG_LAST | BLOCK_FLAG_LZ4,
            shard_lsn: 42,
            raw_len: 1000,
            stored_len: 300,
            entry_count: 9,
            body_crc: 0xdead_beef,
        };
        let b = bh.encode();
        assert_eq!(BlockHeader::decode(&b), Ok(bh));
        for i in 0..BLOCK_HEADER_BYTES {
            let mut c = b;
            c[i] ^= 0x10;
            assert!(BlockHeader::decode(&c).is_err(), "flip at {i} accepted");
        }
        let f = Footer {
            replay_lsn: 5,
            max_shard_lsn: 9,
            block_count: 64,
            key_count: 1000,
            seq: 7,
            footer_offset: 4096,
        };
        let b = f.encode();
        assert_eq!(Footer::decode(&b), Ok(f));
        for i in 0..FOOTER_BYTES {
            let mut c = b;
            c[i] ^= 0x01;
            assert!(Footer::decode(&c).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn function_section_round_trips_and_rejects_flips() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let libs = [(b("a"), b("code a")), (b("b"), b(""))];
        let (n, body) = encode_functions(libs.iter().map(|(x, y)| (x, y)));
        assert_eq!(decode_functions(&body, n).unwrap(), libs.to_vec());
        assert!(decode_functions(&body, n + 1).is_err());
        assert!(decode_functions(&body[..body.len() - 1], n).is_err());
        let h = FunctionsHeader {
            library_count: n,
            functions_lsn: 12,
            body_len: body.len() as u64,
            body_crc: crc32c::crc32c(&body),
        };
        let e = h.encode();
        assert_eq!(FunctionsHeader::decode(&e), Ok(h));
        for i in 0..FUNCTIONS_HEADER_BYTES {
            let mut c = e;
            c[i] ^= 0x04;
            assert!(FunctionsHeader::decode(&c).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn replication_section_round_trips_and_rejects_flips() {
        let r = ReplSection {
            lsn: 41,
            replid: Bytes::from_static(b"0123456789abcdef0123456789abcdef01234567"),
            offset: 1_000_000,
            db: 3,
        };
        let e = r.encode();
        assert_eq!(e.len(), REPL_HEADER_BYTES + 40);
        assert_eq!(ReplSection::decode(&e), Ok(r.clone()));
        assert_eq!(r.replay_bound(), Some(41));
        for i in 0..e.len() {
            let mut c = e.clone();
            c[i] ^= 0x02;
            assert!(ReplSection::decode(&c).is_err(), "flip at {i} accepted");
        }
        assert!(ReplSection::decode(&e[..e.len() - 1]).is_err());
        let none = ReplSection {
            lsn: 9,
            replid: Bytes::new(),
            offset: 0,
            db: 0,
        };
        assert_eq!(ReplSection::decode(&none.encode()), Ok(none.clone()));
        assert_eq!(none.replay_bound(), None);
    }

    #[test]
    fn names_round_trip() {
        let dir = Path::new("/d");
        assert_eq!(
            parse_file_name(&snapshot_path(dir, 12)),
            Some((12, FileKind::Snapshot))
        );
        assert_eq!(
            parse_file_name(&temp_path(dir, 3)),
            Some((3, FileKind::Temp))
        );
        assert_eq!(
            parse_file_name(&corrupt_path(dir, u64::MAX)),
            Some((u64::MAX, FileKind::Corrupt))
        );
        assert_eq!(parse_file_name(Path::new("/d/checkpoint-12.dkcp")), None);
        assert_eq!(parse_file_name(Path::new("/d/other")), None);
        assert_eq!(
            snapshot_path(dir, 1).file_name().and_then(|n| n.to_str()),
            Some("checkpoint-00000000000000000001.dkcp")
        );
    }

    /// Value type 6 (a stream with its consumers' active times) belongs to
    /// version 5 files: an older file that holds one is damaged.
    #[test]
    fn stream_values_with_active_times_need_version_5() {
        use crate::stream::Stream;
        use crate::value::Value;
        let mut s = Stream::default();
        s.add(
            crate::stream::StreamId::new(1, 1),
            &[(Bytes::from_static(b"f"), Bytes::from_static(b"v"))],
            crate::stream::NodeLimits::default(),
        );
        let body = encoded(FORMAT_VERSION, b"s", Value::Stream(std::sync::Arc::new(s)));
        let mut pos = 0;
        assert!(decode_entry(&body, &mut pos, STREAM_ACTIVE_VERSION).is_ok());
        assert_eq!(pos, body.len());
        let mut pos = 0;
        let err = decode_entry(&body, &mut pos, STREAM_ACTIVE_VERSION - 1).err();
        assert_eq!(
            err.map(|e| e.1),
            Some("stream value with active times in a file older than version 5")
        );
    }

    /// Value type 7 (a packed hash's buffer) belongs to version 6 files,
    /// which store every packed hash so; a table is stored by its fields.
    #[test]
    fn packed_hashes_are_stored_as_their_buffer_from_version_6() {
        use crate::value::{HashValue, Value};
        let record = ycsb_record();
        assert!(record.is_packed());
        let body = encoded(FORMAT_VERSION, b"h", Value::Hash(record.clone()));
        assert_eq!(body[VALUE_AT], 7);
        assert_eq!(
            &body[VALUE_AT + 5..],
            &record
                .packed_parts()
                .unwrap()
                .flatten()
                .copied()
                .collect::<Vec<u8>>()[..]
        );
        let mut pos = 0;
        let e = decode_entry(&body, &mut pos, PACKED_HASH_VERSION).unwrap();
        assert_eq!(pos, body.len());
        assert!(matches!(&e.value, Value::Hash(h) if *h == record && h.is_packed()));
        let mut pos = 0;
        let err = decode_entry(&body, &mut pos, PACKED_HASH_VERSION - 1).err();
        assert_eq!(
            err.map(|e| e.1),
            Some("packed hash value in a file older than version 6")
        );

        // The example in docs/format.md.
        let small: HashValue = [
            (Bytes::from_static(b"a"), Bytes::from_static(b"1")),
            (Bytes::from_static(b"bc"), Bytes::new()),
        ]
        .into_iter()
        .collect();
        let body = encoded(FORMAT_VERSION, b"h", Value::Hash(small));
        assert_eq!(
            body[VALUE_AT..],
            [7, 8, 0, 0, 0, 1, b'a', 1, b'1', 2, b'b', b'c', 0]
        );

        let table: HashValue = (0..200)
            .map(|i| (Bytes::from(format!("f{i}")), Bytes::from_static(b"v")))
            .collect();
        assert!(!table.is_packed());
        let body = encoded(FORMAT_VERSION, b"t", Value::Hash(table.clone()));
        assert_eq!(body[VALUE_AT], 1);
        let mut pos = 0;
        let e = decode_entry(&body, &mut pos, MIN_FORMAT_VERSION).unwrap();
        assert!(matches!(&e.value, Value::Hash(h) if *h == table));
    }

    /// A file written in version 5, for a rollback to the build before
    /// version 6, stores a packed hash field by field, as that build reads
    /// it, and it loads back packed.
    #[test]
    fn version_5_entries_store_packed_hashes_by_their_fields() {
        let record = ycsb_record();
        assert!(record.is_packed());
        let body = encoded(OLDEST_WRITTEN_VERSION, b"h", Value::Hash(record.clone()));
        assert_eq!(body[VALUE_AT], 1);
        let mut pos = 0;
        let e = decode_entry(&body, &mut pos, OLDEST_WRITTEN_VERSION).unwrap();
        assert_eq!(pos, body.len());
        assert!(matches!(&e.value, Value::Hash(h) if *h == record && h.is_packed()));
    }
}
