//! Verifying and loading a checkpoint file into a keyspace.
//!
//! Loading is the first half of a restart, so it is parallel: one file
//! cursor hands out blocks in file order (checking that shards and their
//! blocks come in order, each shard complete), and `threads` workers verify
//! each block's checksum, decompress it, decode its entries and insert them
//! into the block's shard under that shard's lock. Nothing read from disk is
//! trusted before its checksum verifies, and every failure names the file
//! and the byte offset. A failed load leaves the keyspace partly filled; the
//! caller discards it.

use super::format::{
    self, BlockHeader, FileHeader, Footer, FunctionsHeader, ReplSection, BLOCK_HEADER_BYTES,
    FILE_HEADER_BYTES, FOOTER_BYTES, FUNCTIONS_HEADER_BYTES, REPL_HEADER_BYTES,
};
use super::CheckpointError;
use crate::db::{Access, Entry};
use crate::io::{FileSystem, FsFile};
use crate::keyspace::Keyspace;
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Header and footer of a checkpoint file: what retention and recovery
/// need without reading the blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub path: PathBuf,
    pub header: FileHeader,
    pub footer: Footer,
    pub file_bytes: u64,
}

/// What loading a checkpoint produced.
#[derive(Debug, Clone)]
pub struct LoadedCheckpoint {
    pub path: PathBuf,
    pub seq: u64,
    pub created_ms: u64,
    pub shard_count: usize,
    pub db_count: usize,
    /// Per shard: the LSN its contents correspond to.
    pub shard_lsns: Vec<u64>,
    /// Replay starts after this LSN (the minimum of `shard_lsns`).
    pub replay_lsn: u64,
    /// The maximum of `shard_lsns`; the log must reach at least this far.
    pub max_shard_lsn: u64,
    /// The function libraries' LSN (version 2 files), and how many there are.
    pub functions_lsn: Option<u64>,
    pub libraries: usize,
    /// The replication-position section (version 4 files). Loading also
    /// hands it to the keyspace (`Keyspace::set_repl_origin`).
    pub repl: Option<ReplSection>,
    pub keys: u64,
    pub file_bytes: u64,
    /// Uncompressed entry bytes.
    pub raw_bytes: u64,
    pub duration: Duration,
}

fn open(fs: &dyn FileSystem, path: &Path) -> Result<(Box<dyn FsFile>, u64), CheckpointError> {
    let file = fs
        .open_file(path)
        .map_err(|e| CheckpointError::io(path, e))?;
    let len = file.len().map_err(|e| CheckpointError::io(path, e))?;
    Ok((file, len))
}

/// Reads and verifies the header and footer of `path`.
pub fn read_summary(fs: &dyn FileSystem, path: &Path) -> Result<Summary, CheckpointError> {
    let (file, len) = open(fs, path)?;
    summary_of(file.as_ref(), path, len)
}

fn summary_of(file: &dyn FsFile, path: &Path, len: u64) -> Result<Summary, CheckpointError> {
    let min = (FILE_HEADER_BYTES + FOOTER_BYTES) as u64;
    if len < min {
        return Err(CheckpointError::corrupt(
            path,
            len,
            format!("file is {len} bytes, shorter than a header and a footer"),
        ));
    }
    let mut h = [0u8; FILE_HEADER_BYTES];
    file.read_exact_at(&mut h, 0)
        .map_err(|e| CheckpointError::io(path, e))?;
    if let Some(version) = FileHeader::newer_version(&h) {
        return Err(CheckpointError::NewerVersion {
            file: path.to_path_buf(),
            version,
        });
    }
    let header = FileHeader::decode(&h).map_err(|r| CheckpointError::corrupt(path, 0, r))?;
    let footer_at = len - FOOTER_BYTES as u64;
    let mut f = [0u8; FOOTER_BYTES];
    file.read_exact_at(&mut f, footer_at)
        .map_err(|e| CheckpointError::io(path, e))?;
    let footer = Footer::decode(&f).map_err(|r| CheckpointError::corrupt(path, footer_at, r))?;
    if footer.footer_offset != footer_at {
        return Err(CheckpointError::corrupt(
            path,
            footer_at,
            "footer offset does not match the file length",
        ));
    }
    if footer.seq != header.seq {
        return Err(CheckpointError::corrupt(
            path,
            footer_at,
            "footer and header sequence numbers differ",
        ));
    }
    if let Some((seq, _)) = format::parse_file_name(path) {
        if seq != header.seq {
            return Err(CheckpointError::corrupt(
                path,
                0,
                "sequence number in the header differs from the file name",
            ));
        }
    }
    Ok(Summary {
        path: path.to_path_buf(),
        header,
        footer,
        file_bytes: len,
    })
}

/// The file cursor shared by the load workers.
struct Cursor {
    offset: u64,
    /// The (shard, chunk) the next block must be.
    shard: u32,
    chunk: u32,
    /// LSN of the shard being read (all its blocks must agree).
    shard_lsn: u64,
    blocks: u64,
    shard_lsns: Vec<u64>,
    done: bool,
}

/// One block handed to a worker (its body is in the worker's buffer).
struct Job {
    offset: u64,
    header: BlockHeader,
    /// Read in place from the mapping (its pages were cached), not into
    /// the worker's body buffer.
    in_place: bool,
}

/// Loads `path` into `ks`, which must be empty and have exactly the file's
/// shard count and at least its database count. Sets every shard's
/// `applied_lsn` to the LSN recorded for it; entries get `lsn = 0` (all of
/// it is durable). `threads` workers (at least 1) decode in parallel.
pub fn load_into(
    fs: &dyn FileSystem,
    path: &Path,
    ks: &Keyspace,
    threads: usize,
) -> Result<LoadedCheckpoint, CheckpointError> {
    let started = Instant::now();
    let (file, len) = open(fs, path)?;
    let summary = summary_of(file.as_ref(), path, len)?;
    let h = &summary.header;
    assert_eq!(
        ks.num_shards(),
        h.shard_count as usize,
        "keyspace shaped for another checkpoint"
    );
    assert!(
        ks.num_dbs() >= h.db_count as usize,
        "keyspace has too few databases"
    );
    let footer_at = summary.footer.footer_offset;
    let mut blocks_at = FILE_HEADER_BYTES as u64;
    let mut functions_lsn = None;
    let mut libraries = 0;
    if h.version >= 2 {
        let (lsn, n, end) = load_functions(file.as_ref(), path, ks, footer_at)?;
        functions_lsn = Some(lsn);
        libraries = n;
        blocks_at = end;
    }
    let mut repl = None;
    if h.version >= 4 {
        let (r, end) = load_repl(file.as_ref(), path, ks, blocks_at, footer_at)?;
        repl = Some(r);
        blocks_at = end;
    }

    // Read a block in place when its pages are cached: no copy into
    // `body`. A file partly cached (some pages reclaimed since it was
    // written) still has most of its blocks read so.
    let mapped = file.map().filter(|m| m.len() as u64 == len);
    let cursor = Mutex::new(Cursor {
        offset: blocks_at,
        shard: 0,
        chunk: 0,
        shard_lsn: 0,
        blocks: 0,
        shard_lsns: Vec::with_capacity(h.shard_count as usize),
        done: false,
    });
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<CheckpointError>> = Mutex::new(None);
    let keys = AtomicU64::new(0);
    let raw_bytes = AtomicU64::new(0);
    let fail = |e: CheckpointError| {
        failed.store(true, Ordering::SeqCst);
        let mut slot = first_error.lock();
        if slot.is_none() {
            *slot = Some(e);
        }
    };

    // Each worker reads bodies into a buffer of its own, kept across
    // blocks: a fresh one per block would be fresh pages to fault in.
    let next_job = |body: &mut Vec<u8>| -> Result<Option<Job>, CheckpointError> {
        let mut c = cursor.lock();
        if c.done || failed.load(Ordering::SeqCst) {
            return Ok(None);
        }
        if c.offset == footer_at {
            if c.shard != h.shard_count {
                return Err(CheckpointError::corrupt(
                    path,
                    c.offset,
                    format!("file ends after {} of {} shards", c.shard, h.shard_count),
                ));
            }
            if c.blocks != summary.footer.block_count {
                return Err(CheckpointError::corrupt(
                    path,
                    c.offset,
                    "block count differs from the footer's",
                ));
            }
            c.done = true;
            return Ok(None);
        }
        let at = c.offset;
        if at + BLOCK_HEADER_BYTES as u64 > footer_at {
            return Err(CheckpointError::corrupt(
                path,
                at,
                "block header overlaps the footer",
            ));
        }
        let mut hb = [0u8; BLOCK_HEADER_BYTES];
        file.read_exact_at(&mut hb, at)
            .map_err(|e| CheckpointError::io(path, e))?;
        let header = BlockHeader::decode(&hb).map_err(|r| CheckpointError::corrupt(path, at, r))?;
        if header.shard != c.shard || header.chunk != c.chunk {
            return Err(CheckpointError::corrupt(
                path,
                at,
                format!(
                    "expected block {} of shard {}, found block {} of shard {}",
                    c.chunk, c.shard, header.chunk, header.shard
                ),
            ));
        }
        if header.chunk > 0 && header.shard_lsn != c.shard_lsn {
            return Err(CheckpointError::corrupt(
                path,
                at,
                "blocks of one shard disagree on its LSN",
            ));
        }
        let body_at = at + BLOCK_HEADER_BYTES as u64;
        if header.stored_len > footer_at - body_at {
            return Err(CheckpointError::corrupt(
                path,
                at,
                "block body runs past the footer",
            ));
        }
        let stored = usize::try_from(header.stored_len)
            .map_err(|_| CheckpointError::corrupt(path, at, "block too large for this machine"))?;
        let in_place = mapped
            .as_ref()
            .is_some_and(|m| usize::try_from(body_at).is_ok_and(|at| m.resident(at, stored)));
        if !in_place {
            if body.len() < stored {
                body.resize(stored, 0);
            }
            file.read_exact_at(&mut body[..stored], body_at)
                .map_err(|e| CheckpointError::io(path, e))?;
        }
        c.offset = body_at + header.stored_len;
        c.blocks += 1;
        c.shard_lsn = header.shard_lsn;
        if header.is_last() {
            c.shard_lsns.push(header.shard_lsn);
            c.shard += 1;
            c.chunk = 0;
        } else {
            c.chunk = c.chunk.checked_add(1).ok_or_else(|| {
                CheckpointError::corrupt(path, at, "too many blocks in one shard")
            })?;
        }
        if c.shard > h.shard_count {
            return Err(CheckpointError::corrupt(
                path,
                at,
                "more shards than the header declares",
            ));
        }
        Ok(Some(Job {
            offset: at,
            header,
            in_place,
        }))
    };

    let expected = Expected {
        version: h.version,
        db_count: h.db_count,
        keys_per_shard: (summary.footer.key_count / u64::from(h.shard_count.max(1)))
            .min(len / format::MIN_ENTRY_BYTES as u64),
    };
    let worker = || {
        let mut scratch: Vec<u8> = Vec::new();
        let mut body: Vec<u8> = Vec::new();
        loop {
            let job = match next_job(&mut body) {
                Ok(Some(j)) => j,
                Ok(None) => return,
                Err(e) => return fail(e),
            };
            let stored = job.header.stored_len as usize;
            let bytes = match &mapped {
                // `next_job` checked that the body is resident.
                Some(m) if job.in_place => {
                    let at = job.offset as usize + BLOCK_HEADER_BYTES;
                    &m[at..at + stored]
                }
                _ => &body[..stored],
            };
            match load_block(path, ks, &expected, job, bytes, &mut scratch) {
                Ok((n, raw)) => {
                    keys.fetch_add(n, Ordering::Relaxed);
                    raw_bytes.fetch_add(raw, Ordering::Relaxed);
                }
                Err(e) => return fail(e),
            }
        }
    };
    // The calling thread is one of the workers (at start-up it is the main
    // thread, whose allocator arena grows most cheaply).
    std::thread::scope(|s| {
        for _ in 1..threads.max(1) {
            s.spawn(worker);
        }
        worker();
    });
    if let Some(e) = first_error.into_inner() {
        return Err(e);
    }
    let c = cursor.into_inner();
    if !c.done {
        return Err(CheckpointError::corrupt(
            path,
            c.offset,
            "load stopped before the footer",
        ));
    }
    let keys = keys.into_inner();
    if keys != summary.footer.key_count {
        return Err(CheckpointError::corrupt(
            path,
            footer_at,
            format!(
                "footer promises {} keys, blocks hold {keys}",
                summary.footer.key_count
            ),
        ));
    }
    let repl_lsn = repl.as_ref().and_then(ReplSection::replay_bound);
    let lsns = || {
        c.shard_lsns
            .iter()
            .copied()
            .chain(functions_lsn)
            .chain(repl_lsn)
    };
    let replay_lsn = lsns().min().unwrap_or(0);
    let max_shard_lsn = lsns().max().unwrap_or(0);
    if replay_lsn != summary.footer.replay_lsn || max_shard_lsn != summary.footer.max_shard_lsn {
        return Err(CheckpointError::corrupt(
            path,
            footer_at,
            "footer LSNs differ from the blocks'",
        ));
    }
    Ok(LoadedCheckpoint {
        path: path.to_path_buf(),
        seq: h.seq,
        created_ms: h.created_ms,
        shard_count: h.shard_count as usize,
        db_count: h.db_count as usize,
        shard_lsns: c.shard_lsns,
        replay_lsn,
        max_shard_lsn,
        functions_lsn,
        libraries,
        repl,
        keys,
        file_bytes: len,
        raw_bytes: raw_bytes.into_inner(),
        duration: started.elapsed(),
    })
}

/// Verifies the function-library section at the start of a version 2 file
/// and loads it into `ks`. Returns (its LSN, libraries, where blocks start).
fn load_functions(
    file: &dyn FsFile,
    path: &Path,
    ks: &Keyspace,
    footer_at: u64,
) -> Result<(u64, usize, u64), CheckpointError> {
    let at = FILE_HEADER_BYTES as u64;
    let body_at = at + FUNCTIONS_HEADER_BYTES as u64;
    if body_at > footer_at {
        return Err(CheckpointError::corrupt(
            path,
            at,
            "function section overlaps the footer",
        ));
    }
    let mut hb = [0u8; FUNCTIONS_HEADER_BYTES];
    file.read_exact_at(&mut hb, at)
        .map_err(|e| CheckpointError::io(path, e))?;
    let h = FunctionsHeader::decode(&hb).map_err(|r| CheckpointError::corrupt(path, at, r))?;
    if h.body_len > footer_at - body_at {
        return Err(CheckpointError::corrupt(
            path,
            at,
            "function section runs past the footer",
        ));
    }
    let len = usize::try_from(h.body_len).map_err(|_| {
        CheckpointError::corrupt(path, at, "function section too large for this machine")
    })?;
    let mut body = vec![0u8; len];
    file.read_exact_at(&mut body, body_at)
        .map_err(|e| CheckpointError::io(path, e))?;
    if crc32c::crc32c(&body) != h.body_crc {
        return Err(CheckpointError::corrupt(
            path,
            body_at,
            "function section checksum mismatch",
        ));
    }
    let libs = format::decode_functions(&body, h.library_count)
        .map_err(|r| CheckpointError::corrupt(path, body_at, r))?;
    let n = libs.len();
    let mut f = ks.functions().lock();
    for (name, code) in libs {
        f.insert_loaded(name, code);
    }
    f.applied_lsn = h.functions_lsn;
    Ok((h.functions_lsn, n, body_at + h.body_len))
}

/// Verifies the replication-position section of a version 4 file (at
/// `at`, after the libraries) and gives the keyspace its position.
/// Returns it and where blocks start.
fn load_repl(
    file: &dyn FsFile,
    path: &Path,
    ks: &Keyspace,
    at: u64,
    footer_at: u64,
) -> Result<(ReplSection, u64), CheckpointError> {
    if at + REPL_HEADER_BYTES as u64 > footer_at {
        return Err(CheckpointError::corrupt(
            path,
            at,
            "replication section overlaps the footer",
        ));
    }
    let mut b = vec![0u8; REPL_HEADER_BYTES];
    file.read_exact_at(&mut b, at)
        .map_err(|e| CheckpointError::io(path, e))?;
    let n = ReplSection::replid_len(&b).map_err(|r| CheckpointError::corrupt(path, at, r))?;
    let end = at + (REPL_HEADER_BYTES as u64) + u64::from(n);
    if end > footer_at {
        return Err(CheckpointError::corrupt(
            path,
            at,
            "replication section runs past the footer",
        ));
    }
    b.resize(REPL_HEADER_BYTES + n as usize, 0);
    file.read_exact_at(&mut b[REPL_HEADER_BYTES..], at + REPL_HEADER_BYTES as u64)
        .map_err(|e| CheckpointError::io(path, e))?;
    let r = ReplSection::decode(&b).map_err(|reason| CheckpointError::corrupt(path, at, reason))?;
    ks.set_repl_origin(
        &crate::mutation::ReplOrigin {
            replid: r.replid.clone(),
            offset: r.offset,
            db: r.db,
        },
        r.lsn,
    );
    Ok((r, end))
}

/// What the file's header and footer say to expect of each shard.
struct Expected {
    /// The file's format version.
    version: u32,
    db_count: u32,
    /// The footer's key count over the shard count (bounded by what the
    /// file could hold, so a bad count cannot reserve gigabytes).
    keys_per_shard: u64,
}

/// Verifies, decompresses and inserts one block. Returns (keys, raw bytes).
fn load_block(
    path: &Path,
    ks: &Keyspace,
    expected: &Expected,
    job: Job,
    body: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<(u64, u64), CheckpointError> {
    let h = &job.header;
    let body_at = job.offset + BLOCK_HEADER_BYTES as u64;
    if crc32c::crc32c(body) != h.body_crc {
        return Err(CheckpointError::corrupt(
            path,
            body_at,
            format!(
                "block body checksum mismatch (shard {}, block {})",
                h.shard, h.chunk
            ),
        ));
    }
    let raw: &[u8] = if h.is_lz4() {
        let raw_len = usize::try_from(h.raw_len).map_err(|_| {
            CheckpointError::corrupt(path, job.offset, "block too large for this machine")
        })?;
        // Decompression overwrites what it uses, so only a larger block
        // than any before pays for zeroing.
        if scratch.len() < raw_len {
            scratch.resize(raw_len, 0);
        }
        match lz4_flex::block::decompress_into(body, &mut scratch[..raw_len]) {
            Ok(n) if n == raw_len => &scratch[..raw_len],
            Ok(_) => {
                return Err(CheckpointError::corrupt(
                    path,
                    body_at,
                    "decompressed block has the wrong length",
                ))
            }
            Err(e) => {
                return Err(CheckpointError::corrupt(
                    path,
                    body_at,
                    format!("block does not decompress: {e}"),
                ))
            }
        }
    } else {
        body
    };
    let bad = |pos: usize, reason: &str| {
        CheckpointError::corrupt(
            path,
            body_at,
            format!(
                "{reason} at byte {pos} of the decompressed body of shard {} block {}",
                h.shard, h.chunk
            ),
        )
    };
    // Decode outside the shard lock (the expensive part: allocation), so
    // workers holding blocks of the same shard overlap.
    let mut pos = 0usize;
    let mut decoded = Vec::with_capacity(h.entry_count as usize);
    for _ in 0..h.entry_count {
        let entry_at = pos;
        let e = format::decode_entry(raw, &mut pos, expected.version)
            .map_err(|(at, reason)| bad(at, reason))?;
        if e.db >= expected.db_count {
            return Err(bad(
                entry_at,
                "entry names a database beyond the header's count",
            ));
        }
        if ks.shard_index(&e.key) != h.shard as usize {
            return Err(bad(entry_at, "key stored in the wrong shard"));
        }
        decoded.push((entry_at, e));
    }
    if pos != raw.len() {
        return Err(bad(pos, "trailing bytes after the last entry"));
    }
    let raw_len = raw.len() as u64;
    let access = Access::loaded_now();
    let mut shard = ks.shard(h.shard as usize).lock();
    if h.chunk == 0 && !h.is_last() {
        // A shard's first block shows how its keys spread over databases;
        // size each map for its share of the shard's expected keys, so it
        // does not grow (moving every entry) a dozen times.
        let mut per_db: Vec<u64> = vec![0; expected.db_count as usize];
        for (_, e) in &decoded {
            per_db[e.db as usize] += 1;
        }
        let n = decoded.len().max(1) as u64;
        for (db, &k) in shard.dbs.iter_mut().zip(&per_db) {
            if k > 0 && db.is_empty() {
                db.reserve((expected.keys_per_shard * k / n) as usize);
            }
        }
    }
    for (entry_at, e) in decoded {
        let mut entry = Entry::new(e.value);
        entry.set_access(access);
        if !shard.dbs[e.db as usize].insert_loaded(e.key, entry, e.expire_at_ms) {
            return Err(bad(entry_at, "duplicate key"));
        }
    }
    shard.applied_lsn = h.shard_lsn;
    Ok((u64::from(h.entry_count), raw_len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::writer::{Chunk, FileWriter};
    use crate::io::OsFs;
    use crate::value::{HashValue, Value};
    use crate::zset::ZSet;
    use bytes::Bytes;

    /// A version 1 file of one shard in two blocks (the first sizes the
    /// maps), holding `blocks`' keys.
    fn write_file(path: &Path, blocks: [&[(&str, Value)]; 2]) {
        let mut w = FileWriter::new(OsFs.create_file(path).unwrap(), path, 0);
        w.write_header(&FileHeader {
            version: 1,
            seq: 1,
            created_ms: 1,
            shard_count: 1,
            db_count: 1,
            wal_last_lsn: 9,
        })
        .unwrap();
        let mut keys = 0;
        for (i, entries) in blocks.iter().enumerate() {
            let mut chunk = Chunk::new(Vec::new());
            for (k, v) in entries.iter() {
                // A hash as its fields (type 1), as version 1 holds it.
                format::encode_entry(
                    1,
                    0,
                    k.as_bytes(),
                    &Entry::new(v.clone()),
                    0,
                    &mut chunk.buf,
                );
                chunk.entries += 1;
                keys += 1;
            }
            w.write_block(0, i as u32, i == 1, 9, &mut chunk).unwrap();
        }
        let footer_offset = w.offset();
        w.write_footer(&Footer {
            replay_lsn: 9,
            max_shard_lsn: 9,
            block_count: 2,
            key_count: keys,
            seq: 1,
            footer_offset,
        })
        .unwrap();
    }

    fn record(n: usize) -> Value {
        let fields: Vec<(String, Vec<u8>)> = (0..n)
            .map(|i| (format!("field{i}"), vec![b'a' + i as u8; 100]))
            .collect();
        let pairs: Vec<(&[u8], &[u8])> =
            fields.iter().map(|(f, v)| (f.as_bytes(), &v[..])).collect();
        Value::Hash(HashValue::from_slices(&pairs))
    }

    fn zset() -> Value {
        let mut z = ZSet::default();
        for i in 0..100 {
            z.insert(format!("user{i}"), f64::from(i % 7));
        }
        Value::ZSet(std::sync::Arc::new(z))
    }

    #[test]
    fn blocks_load_into_their_shard_and_a_repeated_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format::file_name(1));
        let s = |v: &str| Value::Str(Bytes::copy_from_slice(v.as_bytes()).into());
        write_file(
            &path,
            [
                &[("a", record(10)), ("b", s("1")), ("_indices", zset())],
                &[("c", record(3)), ("d", s("2"))],
            ],
        );
        let ks = Keyspace::new(1, 1);
        let l = load_into(&OsFs, &path, &ks, 2).unwrap();
        assert_eq!(l.keys, 5);
        let mut shard = ks.shard(0).lock();
        let db = &mut shard.dbs[0];
        assert_eq!(db.len(), 5);
        assert_eq!(db.get(b"a", 0).map(|e| e.value.clone()), Some(record(10)));
        assert_eq!(db.get(b"c", 0).map(|e| e.value.clone()), Some(record(3)));
        assert_eq!(
            db.get(b"_indices", 0).map(|e| e.value.clone()),
            Some(zset())
        );
        drop(shard);

        write_file(
            &path,
            [
                &[("a", s("1")), ("b", s("2"))],
                &[("c", s("3")), ("a", s("4"))],
            ],
        );
        let err = load_into(&OsFs, &path, &Keyspace::new(1, 1), 1).unwrap_err();
        assert!(err.to_string().contains("duplicate key"), "{err}");
        assert!(err.is_corruption());
    }
}
