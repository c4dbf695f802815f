//! Writing one checkpoint file while the server keeps serving.
//!
//! The keyspace is copied one shard at a time, each as it was at its own
//! point: the point is fixed under the shard's lock, together with the LSN
//! that describes exactly what it contains, and the entries of that point
//! are then serialized into memory (cut into blocks of about
//! `block_target_bytes`) a few hundred at a time under the lock, while
//! writes that reach a key not yet taken save its value first
//! (`crate::snapshot`). Compression, checksumming and writing happen after
//! the lock is released. Holding the lock for a whole shard's pass stopped
//! every writer that reached the shard (and, through them, the server's
//! worker threads) for 20-40 ms per 19 MB shard. The extra memory is one
//! shard's serialized size (with the default 64 shards, about 1/64 of the
//! data) and the values writers change during its pass.
//!
//! Why the LSN read under the lock at the point is the right one: every
//! logged commit
//! takes its LSN while it still holds the locks of the shards it changed
//! (`Txn::commit`). So while we hold a shard's lock, every LSN handed out so
//! far that touches the shard belongs to a commit whose changes are already
//! applied, and no change with a later LSN is. The shard's contents are
//! therefore exactly the records with LSN <= `Wal::last_lsn()` that touch
//! it, plus unlogged (`durability none`) writes. Reading the WAL's counter,
//! rather than the highest LSN the shard itself saw, keeps an idle shard
//! from holding the replay position (and so log truncation) back forever.

use super::format::{
    self, BlockHeader, FileHeader, Footer, BLOCK_FLAG_LAST, BLOCK_FLAG_LZ4, BLOCK_HEADER_BYTES,
    MAX_LZ4_INPUT_BYTES,
};
use super::CheckpointError;
use crate::cow::Lease;
use crate::db::Entry;
use crate::io::FsFile;
use crate::key::Key;
use crate::keyspace::Keyspace;
use crate::shard::Shard;
use crate::snapshot;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One block's worth of serialized entries. `buf` starts with
/// `BLOCK_HEADER_BYTES` reserved for the block header, so a block stored
/// uncompressed goes to disk in one write without another copy.
pub(crate) struct Chunk {
    pub buf: Vec<u8>,
    pub entries: u32,
}

impl Chunk {
    pub(crate) fn new(mut buf: Vec<u8>) -> Chunk {
        buf.clear();
        buf.resize(BLOCK_HEADER_BYTES, 0);
        Chunk { buf, entries: 0 }
    }

    /// The serialized entries.
    pub fn body(&self) -> &[u8] {
        &self.buf[BLOCK_HEADER_BYTES..]
    }

    fn body_len(&self) -> usize {
        self.buf.len() - BLOCK_HEADER_BYTES
    }
}

/// A shard's serialized contents, taken under its lock.
pub(crate) struct ShardImage {
    pub lsn: u64,
    pub chunks: Vec<Chunk>,
    pub keys: u64,
    pub raw_bytes: u64,
}

/// Serializes every entry of every database of shard `index` as it was at
/// one point (expired-but-present keys included: a command that started
/// before they expired may still be replayed against them), with the LSN
/// `lsn_at_point` reads under the shard's lock at that point. The lock is
/// held for a few hundred keys at a time (see `crate::snapshot`), not for
/// the shard. Always returns at least one chunk, so every shard has a
/// block recording its LSN. Chunk buffers come from `pool` (and go back to
/// it once written), so their memory is touched once per checkpoint, not
/// once per shard. Also returns the longest hold of the lock.
pub(crate) fn serialize_shard(
    ks: &Keyspace,
    index: usize,
    lsn_at_point: impl FnOnce(&Shard) -> u64,
    block_target_bytes: usize,
    version: u32,
    pool: &mut Vec<Vec<u8>>,
) -> (ShardImage, Duration) {
    // Large collections are taken by reference (a clone shares them), and
    // serialized as soon as the walk lets the lock go: a sorted set of a
    // million members took 80-270 ms to serialize, and every writer of the
    // shard, with the worker thread it ran on, waited that long. Each is
    // leased meanwhile, so a write to it waits for it rather than copying
    // it (`crate::cow`); what is serialized is the value at the point.
    let out = RefCell::new(ImageBuilder {
        block_target_bytes,
        version,
        // Slack so the entry that crosses the target rarely reallocates.
        capacity: BLOCK_HEADER_BYTES + block_target_bytes + block_target_bytes / 8,
        pool,
        chunks: Vec::new(),
        cur: None,
        keys: 0,
        raw_bytes: 0,
        taken: Vec::new(),
    });
    let (lsn, longest) = snapshot::walk_shard(
        ks,
        index,
        lsn_at_point,
        &mut |db, key, entry, expire_at_ms| match entry.value.shared() {
            Some((len, at)) if len >= SERIALIZE_UNLOCKED_MIN_ELEMENTS => {
                let lease = Lease::new(at, (db, key.clone(), entry.clone(), expire_at_ms));
                out.borrow_mut().taken.push(lease);
            }
            _ => out.borrow_mut().add(db, key, entry, expire_at_ms),
        },
        &mut || out.borrow_mut().add_taken(),
    );
    (out.into_inner().finish(lsn), longest)
}

/// Collections with at least this many elements are serialized outside
/// the shard's lock (see [`serialize_shard`]); smaller ones take less time
/// to serialize than to set aside.
const SERIALIZE_UNLOCKED_MIN_ELEMENTS: usize = 1024;

/// A shard's entries being serialized into chunks.
struct ImageBuilder<'a> {
    block_target_bytes: usize,
    /// The file's format version, which decides how values are encoded.
    version: u32,
    capacity: usize,
    /// Buffers to reuse (see [`serialize_shard`]).
    pool: &'a mut Vec<Vec<u8>>,
    chunks: Vec<Chunk>,
    /// Made at the first entry, so an empty shard does not take a block.
    cur: Option<Chunk>,
    keys: u64,
    raw_bytes: u64,
    /// Entries whose large values are to be serialized once the lock is
    /// released.
    taken: Vec<Lease<(usize, Key, Entry, u64)>>,
}

impl ImageBuilder<'_> {
    /// Serializes the entries taken, ending their leases.
    fn add_taken(&mut self) {
        for lease in std::mem::take(&mut self.taken) {
            let (db, key, entry, expire_at_ms) = lease.get();
            self.add(*db, key, entry, *expire_at_ms);
        }
    }

    fn new_chunk(&mut self) -> Chunk {
        let capacity = self.capacity;
        Chunk::new(
            self.pool
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(capacity)),
        )
    }

    fn add(&mut self, db: usize, key: &Key, entry: &Entry, expire_at_ms: u64) {
        let mut c = match self.cur.take() {
            Some(c) => c,
            None => self.new_chunk(),
        };
        format::encode_entry(
            self.version,
            db as u32,
            key,
            entry,
            expire_at_ms,
            &mut c.buf,
        );
        c.entries += 1;
        self.keys += 1;
        if c.body_len() >= self.block_target_bytes || c.entries == u32::MAX {
            self.raw_bytes += c.body_len() as u64;
            self.chunks.push(c);
        } else {
            self.cur = Some(c);
        }
    }

    /// Always at least one chunk, so every shard has a block recording
    /// its LSN.
    fn finish(mut self, lsn: u64) -> ShardImage {
        if let Some(c) = self.cur.take() {
            self.raw_bytes += c.body_len() as u64;
            self.chunks.push(c);
        }
        if self.chunks.is_empty() {
            self.chunks
                .push(Chunk::new(Vec::with_capacity(BLOCK_HEADER_BYTES)));
        }
        ShardImage {
            lsn,
            chunks: self.chunks,
            keys: self.keys,
            raw_bytes: self.raw_bytes,
        }
    }
}

/// Returns a written image's buffers to the pool.
pub(crate) fn recycle(image: ShardImage, pool: &mut Vec<Vec<u8>>) {
    for c in image.chunks {
        pool.push(c.buf);
    }
}

/// A block that LZ4 shrinks by less than 1/this is "incompressible".
const MIN_SAVING_FRACTION_INVERSE: usize = 10;
/// After an incompressible block, store this many blocks without trying
/// (random data, already-compressed values), then try again.
const INCOMPRESSIBLE_SKIP_BLOCKS: u32 = 16;

/// Appends header, blocks and footer to a file, tracking the offset, and
/// fdatasyncs every `sync_every_bytes` so the final fsync does not have to
/// push the whole file at once (which would stall the log's fsyncs on the
/// same disk).
pub(crate) struct FileWriter {
    file: Box<dyn FsFile>,
    path: PathBuf,
    offset: u64,
    unsynced_bytes: u64,
    sync_every_bytes: u64,
    buf: Vec<u8>,
    /// Blocks left to store without trying compression.
    skip_compression: u32,
    pub blocks: u64,
}

impl FileWriter {
    pub fn new(file: Box<dyn FsFile>, path: &Path, sync_every_bytes: u64) -> FileWriter {
        FileWriter {
            file,
            path: path.to_path_buf(),
            offset: 0,
            unsynced_bytes: 0,
            sync_every_bytes,
            buf: Vec::new(),
            skip_compression: 0,
            blocks: 0,
        }
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), CheckpointError> {
        self.file
            .write_all_at(bytes, self.offset)
            .map_err(|e| CheckpointError::io(&self.path, e))?;
        self.offset += bytes.len() as u64;
        self.unsynced_bytes += bytes.len() as u64;
        if self.sync_every_bytes > 0 && self.unsynced_bytes >= self.sync_every_bytes {
            self.sync()?;
        }
        Ok(())
    }

    pub fn sync(&mut self) -> Result<(), CheckpointError> {
        self.file
            .sync_data()
            .map_err(|e| CheckpointError::io(&self.path, e))?;
        self.unsynced_bytes = 0;
        Ok(())
    }

    pub fn write_header(&mut self, h: &FileHeader) -> Result<(), CheckpointError> {
        debug_assert_eq!(self.offset, 0);
        self.write(&h.encode())
    }

    /// Compresses (when it pays) and writes one block in a single write.
    pub fn write_block(
        &mut self,
        shard: u32,
        chunk_index: u32,
        last: bool,
        shard_lsn: u64,
        chunk: &mut Chunk,
    ) -> Result<(), CheckpointError> {
        let raw_len = chunk.body_len();
        let mut flags = if last { BLOCK_FLAG_LAST } else { 0 };
        let mut compressed = std::mem::take(&mut self.buf);
        let mut use_compressed = false;
        if self.skip_compression > 0 {
            self.skip_compression -= 1;
        } else if raw_len <= MAX_LZ4_INPUT_BYTES && raw_len > 0 {
            let max = lz4_flex::block::get_maximum_output_size(raw_len);
            compressed.clear();
            compressed.resize(BLOCK_HEADER_BYTES + max, 0);
            let n =
                lz4_flex::block::compress_into(chunk.body(), &mut compressed[BLOCK_HEADER_BYTES..])
                    .unwrap_or(usize::MAX);
            if n.saturating_add(raw_len / MIN_SAVING_FRACTION_INVERSE) > raw_len {
                // Not worth the CPU, here or (likely) in the next blocks.
                self.skip_compression = INCOMPRESSIBLE_SKIP_BLOCKS;
            }
            // Keep the compressed form whenever it is smaller.
            if n < raw_len {
                compressed.truncate(BLOCK_HEADER_BYTES + n);
                flags |= BLOCK_FLAG_LZ4;
                use_compressed = true;
            }
        }
        let out: &mut Vec<u8> = if use_compressed {
            &mut compressed
        } else {
            &mut chunk.buf
        };
        let stored_len = out.len() - BLOCK_HEADER_BYTES;
        let header = BlockHeader {
            shard,
            chunk: chunk_index,
            flags,
            shard_lsn,
            raw_len: raw_len as u64,
            stored_len: stored_len as u64,
            entry_count: chunk.entries,
            body_crc: crc32c::crc32c(&out[BLOCK_HEADER_BYTES..]),
        };
        out[..BLOCK_HEADER_BYTES].copy_from_slice(&header.encode());
        let r = if use_compressed {
            self.write(&compressed)
        } else {
            self.write(&chunk.buf)
        };
        self.buf = compressed;
        r?;
        self.blocks += 1;
        Ok(())
    }

    /// The function-library section (right after the header).
    pub fn write_functions(
        &mut self,
        functions_lsn: u64,
        libs: &crate::functions::FunctionLibraries,
    ) -> Result<(), CheckpointError> {
        let (library_count, body) = format::encode_functions(libs.iter());
        let h = format::FunctionsHeader {
            library_count,
            functions_lsn,
            body_len: body.len() as u64,
            body_crc: crc32c::crc32c(&body),
        };
        self.write(&h.encode())?;
        self.write(&body)
    }

    /// The replication-position section (right after the libraries).
    pub fn write_repl(&mut self, r: &format::ReplSection) -> Result<(), CheckpointError> {
        self.write(&r.encode())
    }

    pub fn write_footer(&mut self, f: &Footer) -> Result<(), CheckpointError> {
        debug_assert_eq!(f.footer_offset, self.offset);
        self.write(&f.encode())
    }
}
