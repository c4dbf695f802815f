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
use crate::io::FsFile;
use crate::keyspace::Keyspace;
use crate::shard::Shard;
use crate::snapshot;
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
    pool: &mut Vec<Vec<u8>>,
) -> (ShardImage, Duration) {
    // Slack so the entry that crosses the target rarely reallocates.
    let capacity = BLOCK_HEADER_BYTES + block_target_bytes + block_target_bytes / 8;
    let mut chunks = Vec::new();
    // Made at the first entry, so an empty shard does not take a block.
    let mut cur: Option<Chunk> = None;
    let mut keys = 0u64;
    let mut raw_bytes = 0u64;
    let (lsn, longest) = snapshot::walk_shard(
        ks,
        index,
        lsn_at_point,
        &mut |db, key, entry, expire_at_ms| {
            let c = cur.get_or_insert_with(|| {
                Chunk::new(pool.pop().unwrap_or_else(|| Vec::with_capacity(capacity)))
            });
            format::encode_entry(db as u32, key, entry, expire_at_ms, &mut c.buf);
            c.entries += 1;
            keys += 1;
            if c.body_len() >= block_target_bytes || c.entries == u32::MAX {
                raw_bytes += c.body_len() as u64;
                let next = Chunk::new(pool.pop().unwrap_or_else(|| Vec::with_capacity(capacity)));
                chunks.push(std::mem::replace(c, next));
            }
        },
    );
    match cur {
        Some(c) if c.entries > 0 => {
            raw_bytes += c.body_len() as u64;
            chunks.push(c);
        }
        Some(c) => pool.push(c.buf),
        None => {}
    }
    if chunks.is_empty() {
        chunks.push(Chunk::new(Vec::with_capacity(BLOCK_HEADER_BYTES)));
    }
    let image = ShardImage {
        lsn,
        chunks,
        keys,
        raw_bytes,
    };
    (image, longest)
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
