//! The on-disk layout of WAL segments, byte by byte (see `docs/format.md`).
//!
//! This module is the single place that knows where each field lives: the
//! segment header, the batch header (one per write+fsync), the record header
//! (one per commit), the batch trailer, and the file names. Everything is
//! explicit little-endian, and decoding never trusts a length before a
//! checksum has vouched for it. Writer, reader and recovery use only the
//! functions here, so a format change is a change to this file and to the
//! document.

use std::fmt;

/// First 8 bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"DURAKVWL";
/// Bumped on any incompatible change of anything in this file. New segments
/// are written in this version; every version from `OLDEST_FORMAT_VERSION`
/// on is read.
pub const FORMAT_VERSION: u32 = 4;
/// Version 1 segments (written before pipelined group commit) still load.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
/// Size of the segment header; the first batch starts right after it.
pub const SEGMENT_HEADER_BYTES: usize = 64;

/// Last 4 bytes of every batch header ("DKWB" in file order). Each byte has
/// at least two bits set, so no single bit flip turns one into zero.
pub const BATCH_MAGIC: [u8; 4] = *b"DKWB";
pub const BATCH_HEADER_BYTES: usize = 48;
/// Batch header flag: bytes 40..44 hold the batch's sync base, the segment
/// offset of the oldest batch of this segment not yet known durable when
/// this one was written (its own offset if there was none). Version 2 only.
pub const BATCH_FLAG_SYNC_BASE: u32 = 1;
/// Batch header flag: the batch is followed by zeros up to the next
/// multiple of `PAGE_BYTES` in the file, where the next batch starts.
/// Version 4 on.
pub const BATCH_FLAG_PAGE_END: u32 = 2;
/// The page `BATCH_FLAG_PAGE_END` pads to: the unit a file system writes
/// back, so the next batch's fdatasync does not write this one's last page
/// again.
pub const PAGE_BYTES: u64 = 4096;
/// Version from which a batch header carries `depends_on` and stores its
/// durable hint as a distance below `first_lsn` (bytes 32..40).
pub const DEPENDS_FORMAT_VERSION: u32 = 3;
/// Batch header flag bits a version understands: none in version 1. A
/// reader that ignored a bit it does not know could misread a batch whose
/// meaning the bit changes, so unknown bits make the batch unreadable.
pub fn batch_flags_known(version: u32) -> u32 {
    match version {
        0 | 1 => 0,
        2 | 3 => BATCH_FLAG_SYNC_BASE,
        _ => BATCH_FLAG_SYNC_BASE | BATCH_FLAG_PAGE_END,
    }
}
/// Constant end marker after a batch's records. Every byte has at least two
/// bits set: a torn write leaves zero bytes here, a bit flip cannot.
pub const BATCH_TRAILER: [u8; 8] = [0xE5, 0x5E, 0xA7, 0x7A, 0xC3, 0x3C, 0x96, 0x69];
pub const BATCH_TRAILER_BYTES: usize = 8;
/// Batches start at multiples of this (padding with zeros), so a 48-byte
/// batch header never straddles a 512-byte sector.
pub const BATCH_ALIGN_BYTES: usize = 64;

pub const RECORD_HEADER_BYTES: usize = 24;

/// The smallest unit a disk writes atomically; torn-write detection reasons
/// in sectors of this size.
pub const SECTOR_BYTES: u64 = 512;

/// Rounds `n` up to the batch alignment.
pub fn align_up(n: u64) -> u64 {
    n.div_ceil(BATCH_ALIGN_BYTES as u64) * BATCH_ALIGN_BYTES as u64
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

fn salted_crc(salt: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&salt.to_le_bytes()), bytes)
}

/// Segment header: identifies the file and carries the salt that batch
/// header checksums are seeded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Format version (`OLDEST_FORMAT_VERSION..=FORMAT_VERSION`); new
    /// segments are written with `FORMAT_VERSION`.
    pub version: u32,
    pub stream_id: u32,
    pub stream_count: u32,
    pub salt: u32,
    /// Incremented by a recovery that had to discard records past the first
    /// missing LSN; see `docs/durability.md`.
    pub epoch: u64,
    /// The first LSN of `epoch`: records of older epochs with an LSN at or
    /// above it are superseded.
    pub epoch_start_lsn: u64,
    /// Every record in the segment has an LSN >= this.
    pub first_lsn: u64,
    pub created_ms: u64,
}

/// Why a segment header was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    TooShort(usize),
    BadMagic,
    UnsupportedVersion(u32),
    ChecksumMismatch {
        stored: u32,
        computed: u32,
    },
    /// The checksum verified, so this is no torn write: whatever wrote it
    /// was not this format version.
    ReservedNotZero(u32),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::TooShort(n) => write!(f, "segment header truncated ({n} bytes)"),
            HeaderError::BadMagic => write!(f, "bad segment magic"),
            HeaderError::UnsupportedVersion(v) => {
                write!(f, "unsupported format version {v} (this build reads {OLDEST_FORMAT_VERSION}..={FORMAT_VERSION})")
            }
            HeaderError::ChecksumMismatch { stored, computed } => write!(
                f,
                "segment header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            HeaderError::ReservedNotZero(v) => write!(
                f,
                "segment header reserved bytes 56..60 are {v:#010x}, must be zero"
            ),
        }
    }
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        let mut b = [0u8; SEGMENT_HEADER_BYTES];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.stream_id.to_le_bytes());
        b[16..20].copy_from_slice(&self.stream_count.to_le_bytes());
        b[20..24].copy_from_slice(&self.salt.to_le_bytes());
        b[24..32].copy_from_slice(&self.epoch.to_le_bytes());
        b[32..40].copy_from_slice(&self.epoch_start_lsn.to_le_bytes());
        b[40..48].copy_from_slice(&self.first_lsn.to_le_bytes());
        b[48..56].copy_from_slice(&self.created_ms.to_le_bytes());
        // 56..60 reserved, zero.
        let crc = crc32c::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<SegmentHeader, HeaderError> {
        if b.len() < SEGMENT_HEADER_BYTES {
            return Err(HeaderError::TooShort(b.len()));
        }
        if b[0..8] != SEGMENT_MAGIC {
            return Err(HeaderError::BadMagic);
        }
        let stored = u32_at(b, 60);
        let computed = crc32c::crc32c(&b[0..60]);
        if stored != computed {
            return Err(HeaderError::ChecksumMismatch { stored, computed });
        }
        let version = u32_at(b, 8);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(HeaderError::UnsupportedVersion(version));
        }
        let reserved = u32_at(b, 56);
        if reserved != 0 {
            return Err(HeaderError::ReservedNotZero(reserved));
        }
        Ok(SegmentHeader {
            version,
            stream_id: u32_at(b, 12),
            stream_count: u32_at(b, 16),
            salt: u32_at(b, 20),
            epoch: u64_at(b, 24),
            epoch_start_lsn: u64_at(b, 32),
            first_lsn: u64_at(b, 40),
            created_ms: u64_at(b, 48),
        })
    }
}

/// Batch header: one per write+fsync. The checksum is seeded with the
/// segment's salt, so bytes copied from another segment, or a batch header
/// forged inside a payload, do not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Bytes of records between the header and the trailer.
    pub body_len: u32,
    pub record_count: u32,
    pub first_lsn: u64,
    pub last_lsn: u64,
    /// The WAL's durable LSN when the batch was sealed: every LSN <= this
    /// was already on disk in every stream. Recovery uses it to detect lost
    /// acknowledged records. Always below `first_lsn`.
    pub durable_hint: u64,
    /// Every record of the batch needs every LSN <= this recovered with it
    /// (0: nothing outside its own stream); below `last_lsn`. Version 3
    /// stores it; for older versions `decode` gives `first_lsn - 1` (their
    /// rule is that each record needs every LSN below its own).
    pub depends_on: u64,
    /// Zero in version 1; see [`batch_flags_known`].
    pub flags: u32,
    /// Bytes 40..44: the sync base if `flags` has [`BATCH_FLAG_SYNC_BASE`],
    /// else zero.
    pub sync_base: u32,
}

impl BatchHeader {
    pub fn total_len(&self) -> u64 {
        (BATCH_HEADER_BYTES + BATCH_TRAILER_BYTES) as u64 + self.body_len as u64
    }

    /// Encodes in the current format version.
    pub fn encode_into(&self, salt: u32, b: &mut [u8]) {
        self.encode_version(FORMAT_VERSION, salt, b)
    }

    /// Encodes as `version` writes it (older versions: for tests and
    /// fixtures).
    pub fn encode_version(&self, version: u32, salt: u32, b: &mut [u8]) {
        b[4..8].copy_from_slice(&self.body_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.record_count.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.last_lsn.to_le_bytes());
        if version >= DEPENDS_FORMAT_VERSION {
            b[32..36]
                .copy_from_slice(&hint_distance(self.first_lsn, self.durable_hint).to_le_bytes());
            b[36..40]
                .copy_from_slice(&depends_distance(self.last_lsn, self.depends_on).to_le_bytes());
        } else {
            b[32..40].copy_from_slice(&self.durable_hint.to_le_bytes());
        }
        b[40..44].copy_from_slice(&self.sync_base.to_le_bytes());
        b[44..48].copy_from_slice(&BATCH_MAGIC);
        let crc = salted_crc(salt, &b[4..48]);
        b[0..4].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes a header of a segment of format `version`.
    pub fn decode(salt: u32, version: u32, b: &[u8]) -> Option<BatchHeader> {
        if b.len() < BATCH_HEADER_BYTES || b[44..48] != BATCH_MAGIC {
            return None;
        }
        if u32_at(b, 0) != salted_crc(salt, &b[4..48]) {
            return None;
        }
        let first_lsn = u64_at(b, 16);
        let last_lsn = u64_at(b, 24);
        let (durable_hint, depends_on) = if version >= DEPENDS_FORMAT_VERSION {
            let dep = u32_at(b, 36) as u64;
            (
                first_lsn.saturating_sub(u32_at(b, 32) as u64),
                if dep == 0 {
                    0
                } else {
                    last_lsn.saturating_sub(dep)
                },
            )
        } else {
            (u64_at(b, 32), first_lsn.saturating_sub(1))
        };
        Some(BatchHeader {
            body_len: u32_at(b, 4),
            record_count: u32_at(b, 8),
            first_lsn,
            last_lsn,
            durable_hint,
            depends_on,
            flags: u32_at(b, 12),
            sync_base: u32_at(b, 40),
        })
    }

    /// Where the next batch starts, for this batch at `pos`.
    pub fn next_batch_at(&self, pos: u64) -> u64 {
        let end = align_up(pos + self.total_len());
        if self.flags & BATCH_FLAG_PAGE_END != 0 {
            end.next_multiple_of(PAGE_BYTES)
        } else {
            end
        }
    }

    pub fn sync_base(&self) -> Option<u64> {
        (self.flags & BATCH_FLAG_SYNC_BASE != 0).then_some(self.sync_base as u64)
    }

    pub fn check_unused_fields(&self, version: u32) -> Result<(), String> {
        let unknown = self.flags & !batch_flags_known(version);
        if unknown != 0 {
            return Err(format!(
                "batch header has unknown flag bits {unknown:#010x}"
            ));
        }
        if self.flags & BATCH_FLAG_SYNC_BASE == 0 && self.sync_base != 0 {
            return Err(format!(
                "batch header reserved bytes 40..44 are {:#010x}, must be zero",
                self.sync_base
            ));
        }
        Ok(())
    }
}

/// How far below `first_lsn` the durable hint lies. A hint further back
/// than a u32 reaches is stored as that far: an older hint claims less, so
/// it is still true.
fn hint_distance(first_lsn: u64, hint: u64) -> u32 {
    u32::try_from(first_lsn.saturating_sub(hint)).unwrap_or(u32::MAX)
}

/// How far below `last_lsn` the dependency lies (0: none; a record only
/// depends on earlier ones, so it is at least 1). One further back than a
/// u32 reaches is stored as 1, "everything before the last record": a
/// later dependency demands more, so it is still safe.
fn depends_distance(last_lsn: u64, depends_on: u64) -> u32 {
    if depends_on == 0 {
        return 0;
    }
    u32::try_from(last_lsn.saturating_sub(depends_on))
        .unwrap_or(1)
        .max(1)
}

pub fn header_looks_torn(b: &[u8]) -> bool {
    b.len() < BATCH_HEADER_BYTES || b[44..48].contains(&0)
}

/// Whether a trailer looks torn (some byte is zero) rather than flipped.
pub fn trailer_looks_torn(t: &[u8]) -> bool {
    t.len() < BATCH_TRAILER_BYTES || t.contains(&0)
}

/// One record header, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub payload_len: u32,
    pub crc: u32,
    pub lsn: u64,
    pub time_ms: u64,
}

impl RecordHeader {
    pub fn parse(b: &[u8]) -> RecordHeader {
        RecordHeader {
            payload_len: u32_at(b, 0),
            crc: u32_at(b, 4),
            lsn: u64_at(b, 8),
            time_ms: u64_at(b, 16),
        }
    }
}

/// Fills in the header of the record occupying `rec` (header followed by its
/// payload), computing the checksum over length, LSN, time and payload.
pub fn seal_record(rec: &mut [u8], lsn: u64, time_ms: u64) {
    let payload_len = (rec.len() - RECORD_HEADER_BYTES) as u32;
    rec[0..4].copy_from_slice(&payload_len.to_le_bytes());
    rec[8..16].copy_from_slice(&lsn.to_le_bytes());
    rec[16..24].copy_from_slice(&time_ms.to_le_bytes());
    let crc = record_crc(rec);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Checksum of a record (`rec` = header + payload), skipping the crc field.
pub fn record_crc(rec: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&rec[0..4]), &rec[8..])
}

/// Segment file name: `wal-<stream>-<epoch>-<first_lsn>.log`, zero-padded so
/// names sort in log order within a stream.
/// One record to frame with [`frame_batch`]: (LSN, time_ms, payload).
pub type FramedRecord<'a> = (u64, u64, &'a [u8]);

/// A whole batch of the current version, as a writer puts it on disk at
/// segment offset `at`: header, records, trailer, zero padding. Records
/// must be in increasing LSN order; `durable_hint` below the first.
pub fn frame_batch(
    salt: u32,
    at: u64,
    records: &[FramedRecord<'_>],
    durable_hint: u64,
    depends_on: u64,
) -> Vec<u8> {
    let mut b = vec![0u8; BATCH_HEADER_BYTES];
    for &(lsn, time_ms, payload) in records {
        let start = b.len();
        b.resize(start + RECORD_HEADER_BYTES, 0);
        b.extend_from_slice(payload);
        seal_record(&mut b[start..], lsn, time_ms);
    }
    let body_len = (b.len() - BATCH_HEADER_BYTES) as u32;
    b.extend_from_slice(&BATCH_TRAILER);
    b.resize(align_up(b.len() as u64) as usize, 0);
    BatchHeader {
        body_len,
        record_count: records.len() as u32,
        first_lsn: records.first().map_or(0, |r| r.0),
        last_lsn: records.last().map_or(0, |r| r.0),
        durable_hint,
        depends_on,
        flags: BATCH_FLAG_SYNC_BASE,
        sync_base: u32::try_from(at).unwrap_or(u32::MAX),
    }
    .encode_into(salt, &mut b[..BATCH_HEADER_BYTES]);
    b
}

pub fn segment_file_name(stream: u32, epoch: u64, first_lsn: u64) -> String {
    format!("wal-{stream:03}-{epoch:06}-{first_lsn:020}.log")
}

/// Inverse of [`segment_file_name`]: `(stream, epoch, first_lsn)`.
pub fn parse_segment_file_name(name: &str) -> Option<(u32, u64, u64)> {
    let rest = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    let mut parts = rest.split('-');
    let stream = parts.next()?.parse().ok()?;
    let epoch = parts.next()?.parse().ok()?;
    let first = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((stream, epoch, first))
}

/// A pre-allocated segment not yet in use (`wal-<stream>.<tag>.spare`).
/// Never contains log data that matters: recovery deletes it. The tag keeps
/// the background preparer and an inline preparation apart.
pub fn spare_file_name(stream: u32, tag: &str) -> String {
    format!("wal-{stream:03}.{tag}.spare")
}

pub fn is_spare_file_name(name: &str) -> bool {
    name.starts_with("wal-") && name.ends_with(".spare")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_end_batch_is_followed_by_the_next_page() {
        let h = BatchHeader {
            body_len: 100,
            record_count: 1,
            first_lsn: 5,
            last_lsn: 5,
            durable_hint: 4,
            depends_on: 0,
            flags: BATCH_FLAG_SYNC_BASE,
            sync_base: 64,
        };
        // 48 + 100 + 8 = 156 bytes: the next batch at the next 64.
        assert_eq!(h.next_batch_at(64), 64 + 192);
        let paged = BatchHeader {
            flags: BATCH_FLAG_SYNC_BASE | BATCH_FLAG_PAGE_END,
            ..h
        };
        assert_eq!(paged.next_batch_at(64), 4096);
        // Ending exactly on a page boundary, it needs no padding.
        assert_eq!(paged.next_batch_at(4096 - 192), 4096);
        assert_eq!(paged.next_batch_at(4096 - 128), 8192);
        // Only version 4 knows the flag: an older segment with it is damaged.
        assert_eq!(paged.check_unused_fields(4), Ok(()));
        assert!(paged.check_unused_fields(3).is_err());
        assert!(paged.check_unused_fields(2).is_err());
    }

    #[test]
    fn segment_header_roundtrip_and_checks() {
        let h = SegmentHeader {
            version: FORMAT_VERSION,
            stream_id: 2,
            stream_count: 4,
            salt: 0xdead_beef,
            epoch: 3,
            epoch_start_lsn: 100,
            first_lsn: 120,
            created_ms: 1_700_000_000_000,
        };
        let b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Ok(h));
        for i in 0..SEGMENT_HEADER_BYTES {
            let mut c = b;
            c[i] ^= 0x10;
            assert!(SegmentHeader::decode(&c).is_err(), "flip at {i} accepted");
        }
        assert_eq!(
            SegmentHeader::decode(&b[..10]),
            Err(HeaderError::TooShort(10))
        );
        // Reserved bytes set and the checksum recomputed over them: refused
        // all the same, and not as a checksum failure.
        let mut c = b;
        c[57] = 1;
        let crc = crc32c::crc32c(&c[0..60]);
        c[60..64].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            SegmentHeader::decode(&c),
            Err(HeaderError::ReservedNotZero(0x100))
        );
    }

    #[test]
    fn batch_header_unused_fields_must_be_zero() {
        let h = BatchHeader {
            body_len: 24,
            record_count: 1,
            first_lsn: 3,
            last_lsn: 3,
            durable_hint: 2,
            depends_on: 0,
            flags: 0,
            sync_base: 0,
        };
        assert_eq!(h.check_unused_fields(1), Ok(()));
        assert_eq!(h.check_unused_fields(2), Ok(()));
        let based = BatchHeader {
            flags: BATCH_FLAG_SYNC_BASE,
            sync_base: 4096,
            ..h
        };
        assert_eq!(based.check_unused_fields(2), Ok(()));
        assert_eq!(based.sync_base(), Some(4096));
        assert_eq!(h.sync_base(), None);
        for (version, flags, sync_base, what) in [
            (1, 1, 0, "flag"),
            (1, 1, 64, "flag"),
            (2, 1 << 31, 0, "flag"),
            (2, 2, 0, "flag"),
            (1, 0, 7, "reserved"),
            (2, 0, 7, "reserved"),
        ] {
            let forged = BatchHeader {
                flags,
                sync_base,
                ..h
            };
            let mut b = [0u8; BATCH_HEADER_BYTES];
            forged.encode_version(version, 9, &mut b);
            // The checksum covers these fields, so only the explicit check
            // can tell. Before version 3 each record needs all before it.
            let d = BatchHeader::decode(9, version, &b).unwrap();
            assert_eq!(
                d,
                BatchHeader {
                    depends_on: 2,
                    ..forged
                }
            );
            let e = d.check_unused_fields(version).unwrap_err();
            assert!(e.contains(what), "{e}");
            assert!(!header_looks_torn(&b));
        }
    }

    #[test]
    fn batch_header_roundtrip_salted() {
        let h = BatchHeader {
            body_len: 77,
            record_count: 2,
            first_lsn: 5,
            last_lsn: 9,
            durable_hint: 4,
            depends_on: 8,
            flags: BATCH_FLAG_SYNC_BASE,
            sync_base: 1 << 20,
        };
        let mut b = [0u8; BATCH_HEADER_BYTES];
        h.encode_into(42, &mut b);
        assert_eq!(BatchHeader::decode(42, FORMAT_VERSION, &b), Some(h));
        assert_eq!(BatchHeader::decode(43, FORMAT_VERSION, &b), None);
        assert!(!header_looks_torn(&b));
        for i in 0..BATCH_HEADER_BYTES {
            for bit in 0..8 {
                let mut c = b;
                c[i] ^= 1 << bit;
                assert_eq!(BatchHeader::decode(42, FORMAT_VERSION, &c), None);
                // A flipped header never looks torn.
                assert!(!header_looks_torn(&c), "flip {i}/{bit} looks torn");
            }
        }
        // Any prefix tear looks torn.
        for cut in 0..BATCH_HEADER_BYTES {
            let mut c = b;
            c[cut..].fill(0);
            assert!(header_looks_torn(&c));
        }
    }

    #[test]
    fn version_3_stores_the_hint_and_dependency_as_distances() {
        let base = BatchHeader {
            body_len: 24,
            record_count: 1,
            first_lsn: 10_000_000_000,
            last_lsn: 10_000_000_000,
            durable_hint: 9_999_999_000,
            depends_on: 9_999_999_500,
            flags: BATCH_FLAG_SYNC_BASE,
            sync_base: 64,
        };
        let mut b = [0u8; BATCH_HEADER_BYTES];
        base.encode_into(1, &mut b);
        assert_eq!(u32_at(&b, 32), 1000, "hint distance");
        assert_eq!(u32_at(&b, 36), 500, "dependency distance");
        assert_eq!(BatchHeader::decode(1, 3, &b), Some(base));
        // Too far back for a u32: the hint claims less, the dependency
        // demands more (everything before the last record).
        let far = BatchHeader {
            durable_hint: 5,
            depends_on: 7,
            ..base
        };
        far.encode_into(1, &mut b);
        let d = BatchHeader::decode(1, 3, &b).unwrap();
        assert_eq!(d.durable_hint, base.first_lsn - u32::MAX as u64);
        assert_eq!(d.depends_on, base.last_lsn - 1);
        let none = BatchHeader {
            depends_on: 0,
            ..base
        };
        none.encode_into(1, &mut b);
        assert_eq!(BatchHeader::decode(1, 3, &b).unwrap().depends_on, 0);
        // A version 2 header reads its hint whole and needs everything
        // before it.
        base.encode_version(2, 1, &mut b);
        let d = BatchHeader::decode(1, 2, &b).unwrap();
        assert_eq!(d.durable_hint, base.durable_hint);
        assert_eq!(d.depends_on, base.first_lsn - 1);
    }

    #[test]
    fn trailer_flip_vs_tear() {
        for i in 0..8 {
            for bit in 0..8 {
                let mut t = BATCH_TRAILER;
                t[i] ^= 1 << bit;
                assert!(!trailer_looks_torn(&t));
            }
            let mut t = BATCH_TRAILER;
            t[i..].fill(0);
            assert!(trailer_looks_torn(&t));
        }
    }

    #[test]
    fn record_seal_and_check() {
        let mut rec = vec![0u8; RECORD_HEADER_BYTES];
        rec.extend_from_slice(b"payload");
        seal_record(&mut rec, 7, 99);
        let h = RecordHeader::parse(&rec);
        assert_eq!(h.payload_len, 7);
        assert_eq!(h.lsn, 7);
        assert_eq!(h.time_ms, 99);
        assert_eq!(h.crc, record_crc(&rec));
        rec[30] ^= 1;
        assert_ne!(h.crc, record_crc(&rec));
    }

    #[test]
    fn names() {
        let n = segment_file_name(1, 2, 345);
        assert_eq!(n, "wal-001-000002-00000000000000000345.log");
        assert_eq!(parse_segment_file_name(&n), Some((1, 2, 345)));
        assert_eq!(parse_segment_file_name("wal-001.bg.spare"), None);
        assert_eq!(parse_segment_file_name("wal-1-2-3-4.log"), None);
        assert!(is_spare_file_name(&spare_file_name(3, "bg")));
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(1), 64);
        assert_eq!(align_up(64), 64);
    }
}
