//! Format fixtures: a WAL written by format version 1 (two streams, four
//! records, one of them a MULTI/EXEC), kept as bytes. Every later build must
//! read it back exactly, and the fields sit where `docs/format.md` says.
//! Plus the fields version 1 leaves unused: a header that sets them, even
//! with a checksum that verifies, is corruption, never a torn write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod wal_support;

use durakv_engine::io::{FaultFs, FileSystem};
use durakv_engine::wal::format::{
    BatchHeader, SegmentHeader, BATCH_FLAG_PAGE_END, FORMAT_VERSION, PAGE_BYTES,
    SEGMENT_HEADER_BYTES,
};
use durakv_engine::wal::{RecoveryMode, WalConfig, WalError};
use durakv_engine::Durability;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Non-zero prefix of `/data/wal0/wal-000-000001-00000000000000000001.log`
/// (the file is 4096 bytes, zeros after this).
const STREAM0_V1: &str = "445552414b56574c0100000000000000020000007025e7110100000000000000010000000000000001000000000000000068e5cf8b01000000000000714607a26116e88121000000010000000000000001000000000000000100000000000000000000000000000000000000444b574209000000d5b37b8f01000000000000000168e5cf8b010000534554206b31207631e55ea77ac33c9669000000000000000000000000000000000000000000000000000000000000000000000000000000b929432d18000000010000000000000003000000000000000300000000000000020000000000000000000000444b5742000000005765e0e003000000000000000368e5cf8b010000e55ea77ac33c9669";
/// Same for `/data/wal1/wal-001-000001-00000000000000000001.log`.
const STREAM1_V1: &str = "445552414b56574c010000000100000002000000ce0621360100000000000000010000000000000001000000000000000068e5cf8b01000000000000bf7283e9b2fdbc5234000000010000000000000002000000000000000200000000000000010000000000000000000000444b57421c00000000141b2c02000000000000000268e5cf8b0100004d554c54492f455845433a20534554206120313b2053455420622032e55ea77ac33c966900000000000000000000000000000000000000000b7fe3531e000000010000000000000004000000000000000400000000000000030000000000000000000000444b5742060000006bf5eec204000000000000000468e5cf8b01000044454c206b31e55ea77ac33c9669";

/// The same four records written by format version 2 (2026-11-24, before
/// version 3): `/data/wal0/wal-000-000001-00000000000000000001.log`.
const STREAM0_V2: &str = "445552414b56574c0200000000000000020000007a19fb2d0100000000000000010000000000000001000000000000000068e5cf8b01000000000000238afdec43f1ddd021000000010000000100000001000000000000000100000000000000000000000000000040000000444b574209000000d5b37b8f01000000000000000168e5cf8b010000534554206b31207631e55ea77ac33c9669000000000000000000000000000000000000000000000000000000000000000000000000000000ff587748180000000100000001000000030000000000000003000000000000000200000000000000c0000000444b5742000000005765e0e003000000000000000368e5cf8b010000e55ea77ac33c9669";
/// Same for `/data/wal1/wal-001-000001-00000000000000000001.log`.
const STREAM1_V2: &str = "445552414b56574c020000000100000002000000f7c10c2e0100000000000000010000000000000001000000000000000068e5cf8b01000000000000e22a76f97baf027c34000000010000000100000002000000000000000200000000000000010000000000000040000000444b57421c00000000141b2c02000000000000000268e5cf8b0100004d554c54492f455845433a20534554206120313b2053455420622032e55ea77ac33c96690000000000000000000000000000000000000000a6bb5c491e0000000100000001000000040000000000000004000000000000000300000000000000c0000000444b5742060000006bf5eec204000000000000000468e5cf8b01000044454c206b31e55ea77ac33c9669";

/// The same four records written by format version 3 (2026-11-25, before
/// version 4): `/data/wal0/wal-000-000001-00000000000000000001.log`.
const STREAM0_V3: &str = "445552414b56574c030000000000000002000000ecd9c4a50100000000000000010000000000000001000000000000000068e5cf8b010000000000009d9ddc1d37ed510521000000010000000100000001000000000000000100000000000000010000000000000040000000444b574209000000d5b37b8f01000000000000000168e5cf8b010000534554206b31207631e55ea77ac33c966900000000000000000000000000000000000000000000000000000000000000000000000000000086290f7c180000000100000001000000030000000000000003000000000000000100000000000000c0000000444b5742000000005765e0e003000000000000000368e5cf8b010000e55ea77ac33c9669";
/// Same for `/data/wal1/wal-001-000001-00000000000000000001.log`.
const STREAM1_V3: &str = "445552414b56574c030000000100000002000000447b08fb0100000000000000010000000000000001000000000000000068e5cf8b0100000000000070dcbab41cf1149a34000000010000000100000002000000000000000200000000000000010000000000000040000000444b57421c00000000141b2c02000000000000000268e5cf8b0100004d554c54492f455845433a20534554206120313b2053455420622032e55ea77ac33c96690000000000000000000000000000000000000000cc88be4e1e0000000100000001000000040000000000000004000000000000000100000000000000c0000000444b5742060000006bf5eec204000000000000000468e5cf8b01000044454c206b31e55ea77ac33c9669";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn install(fs: &FaultFs, path: &str, hex: &str) -> Vec<u8> {
    let path = PathBuf::from(path);
    let dir = path.parent().unwrap();
    fs.create_dir_all(dir).unwrap();
    let mut bytes = unhex(hex);
    bytes.resize(4096, 0);
    let f = fs.create_file(&path).unwrap();
    f.write_all_at(&bytes, 0).unwrap();
    f.sync_all().unwrap();
    fs.sync_dir(dir).unwrap();
    bytes
}

#[test]
fn v1_fixture_layout_matches_the_document() {
    let b = unhex(STREAM0_V1);
    // Segment header.
    assert_eq!(&b[0..8], b"DURAKVWL");
    assert_eq!(u32_at(&b, 8), 1, "format_version");
    assert_eq!(u32_at(&b, 12), 0, "stream_id");
    assert_eq!(u32_at(&b, 16), 2, "stream_count");
    assert_eq!(u64_at(&b, 24), 1, "epoch");
    assert_eq!(u64_at(&b, 32), 1, "epoch_start_lsn");
    assert_eq!(u64_at(&b, 40), 1, "first_lsn");
    assert_eq!(u32_at(&b, 60), crc32c::crc32c(&b[0..60]), "header_crc");
    // First batch at 64.
    let h = 64;
    let salt = u32_at(&b, 20);
    let mut crc = crc32c::crc32c(&salt.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &b[h + 4..h + 48]);
    assert_eq!(u32_at(&b, h), crc, "batch header_crc");
    assert_eq!(u32_at(&b, h + 4), 24 + 9, "body_len");
    assert_eq!(u32_at(&b, h + 8), 1, "record_count");
    assert_eq!(u64_at(&b, h + 16), 1, "first_lsn");
    assert_eq!(u64_at(&b, h + 24), 1, "last_lsn");
    assert_eq!(&b[h + 44..h + 48], b"DKWB");
    // Its record at 112.
    let r = h + 48;
    assert_eq!(u32_at(&b, r), 9, "payload_len");
    assert_eq!(u64_at(&b, r + 8), 1, "lsn");
    assert_eq!(u64_at(&b, r + 16), 1_700_000_000_001, "time_ms");
    assert_eq!(&b[r + 24..r + 33], b"SET k1 v1");
    let mut rc = crc32c::crc32c(&b[r..r + 4]);
    rc = crc32c::crc32c_append(rc, &b[r + 8..r + 33]);
    assert_eq!(u32_at(&b, r + 4), rc, "record_crc");
    // Trailer, then zero padding to the next multiple of 64.
    assert_eq!(
        &b[r + 33..r + 41],
        &[0xE5, 0x5E, 0xA7, 0x7A, 0xC3, 0x3C, 0x96, 0x69]
    );
    assert!(b[r + 41..192].iter().all(|&x| x == 0));
    assert_eq!(
        &b[192 + 44..192 + 48],
        b"DKWB",
        "second batch starts at 192"
    );
}

/// Installs a two-stream fixture and checks that its four records come
/// back exactly, with nothing cut, dropped or superseded.
fn fixture_recovers_exactly(seed: u64, stream0: &str, stream1: &str) {
    let fs = FaultFs::new(seed);
    install(
        &fs,
        "/data/wal0/wal-000-000001-00000000000000000001.log",
        stream0,
    );
    install(
        &fs,
        "/data/wal1/wal-001-000001-00000000000000000001.log",
        stream1,
    );
    let mut cfg = WalConfig::new(vec!["/data/wal0".into(), "/data/wal1".into()]);
    cfg.segment_size_bytes = 4096;
    let (wal, stats, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    let want: Vec<(u64, u64, Vec<u8>)> = vec![
        (1, 1_700_000_000_001, b"SET k1 v1".to_vec()),
        (
            2,
            1_700_000_000_002,
            b"MULTI/EXEC: SET a 1; SET b 2".to_vec(),
        ),
        (3, 1_700_000_000_003, b"".to_vec()),
        (4, 1_700_000_000_004, b"DEL k1".to_vec()),
    ];
    assert_eq!(got, want);
    assert_eq!(stats.last_lsn, 4);
    assert!(stats.truncated_tail.is_empty() && stats.dropped.is_none() && !stats.new_epoch);
    assert_eq!(wal.last_lsn(), 4);
}

#[test]
fn v1_fixture_recovers_exactly() {
    fixture_recovers_exactly(1, STREAM0_V1, STREAM1_V1);
}

#[test]
fn v2_fixture_recovers_exactly() {
    let b = unhex(STREAM0_V2);
    assert_eq!(u32_at(&b, 8), 2, "format_version");
    // First batch header: durable hint as a whole u64 at 32..40.
    let batch = &b[SEGMENT_HEADER_BYTES..];
    assert_eq!(&batch[44..48], b"DKWB");
    assert_eq!(u64_at(batch, 16), 1, "first_lsn");
    assert_eq!(u64_at(batch, 32), 0, "durable_hint");
    fixture_recovers_exactly(2, STREAM0_V2, STREAM1_V2);
}

#[test]
fn v3_fixture_recovers_exactly() {
    let b = unhex(STREAM1_V3);
    assert_eq!(u32_at(&b, 8), 3, "format_version");
    // Second batch of stream 1 (LSN 4): the durable hint as a distance
    // below first_lsn at 32..36, no dependency at 36..40, its own offset as
    // sync base.
    let batch = &b[192..];
    assert_eq!(&batch[44..48], b"DKWB");
    assert_eq!(u64_at(batch, 16), 4, "first_lsn");
    assert_eq!(u32_at(batch, 12), 1, "flags: SYNC_BASE only");
    assert_eq!(u32_at(batch, 32), 1, "hint_distance");
    assert_eq!(u32_at(batch, 36), 0, "depends_distance");
    assert_eq!(u32_at(batch, 40), 192, "sync_base");
    fixture_recovers_exactly(3, STREAM0_V3, STREAM1_V3);
}

/// The batches of a one-stream log's only segment: (offset, header).
fn batches_of(fs: &FaultFs) -> (PathBuf, Vec<(u64, BatchHeader)>) {
    let seg = wal_support::segment_files(fs).remove(0);
    let bytes = fs.read_file(&seg).unwrap();
    let salt = SegmentHeader::decode(&bytes).unwrap().salt;
    let mut out = Vec::new();
    let mut pos = SEGMENT_HEADER_BYTES as u64;
    while let Some(h) = bytes
        .get(pos as usize..)
        .and_then(|b| BatchHeader::decode(salt, FORMAT_VERSION, b))
    {
        out.push((pos, h));
        pos = h.next_batch_at(pos);
    }
    (seg, out)
}

/// Format version 4: a batch of a page or more ends its page, and the next
/// batch starts on the page boundary. The log reads back across the gap, a
/// reopened log appends at the boundary, and a batch torn there is cut as a
/// torn tail like any other.
#[test]
fn long_batches_end_their_page_and_the_log_reads_across_the_gap() {
    let fs = FaultFs::new(41);
    let cfg = wal_support::sim_config(1, 256 * 1024);
    assert_eq!(cfg.page_end_min_bytes, 4096);
    // One `Full` record of `len` bytes, a batch of its own.
    let log = |wal: &durakv_engine::wal::Wal, want: &mut Vec<_>, i: usize, len: usize| {
        let p = vec![b'a' + i as u8; len];
        let lsn = wal
            .append(0, 7, Durability::Full, &mut |b| b.extend_from_slice(&p))
            .unwrap();
        wal.wait_durable(lsn).unwrap();
        want.push((lsn, 7, p));
    };
    let mut want = Vec::new();
    {
        let (wal, _, _) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
        for (i, len) in [5000, 100, 100, 6000].into_iter().enumerate() {
            log(&wal, &mut want, i, len);
        }
        wal.close().unwrap();
    }
    let (_, batches) = batches_of(&fs);
    let ends_page: Vec<bool> = batches
        .iter()
        .map(|(_, h)| h.flags & BATCH_FLAG_PAGE_END != 0)
        .collect();
    assert_eq!(ends_page, [true, false, false, true]);
    assert_eq!(batches[1].0 % PAGE_BYTES, 0, "after a page end");
    assert_ne!(batches[2].0 % PAGE_BYTES, 0, "after a short batch");

    // Reopened: everything comes back, and the next batch goes on the page
    // after the last one's end.
    {
        let (wal, stats, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
        assert_eq!(got, want);
        assert!(stats.truncated_tail.is_empty() && !stats.new_epoch);
        log(&wal, &mut want, 9, 50);
        wal.close().unwrap();
    }
    let (seg, batches) = batches_of(&fs);
    assert_eq!(batches.len(), 5);
    let (last_at, last) = batches[4];
    assert_eq!(last_at, batches[3].1.next_batch_at(batches[3].0));
    assert_eq!(last_at % PAGE_BYTES, 0);
    let (_, _, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got, want);

    // Tear the last batch (its trailer never reached the disk): cut, and
    // the four before it stay.
    let trailer_at = last_at + last.total_len() - 8;
    fs.write_file_raw(&seg, trailer_at, &[0u8; 8]).unwrap();
    let (_, stats, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got, want[..4]);
    assert!(!stats.truncated_tail.is_empty());
}

/// A one-stream log of `n` batches (one `Full` record each), closed cleanly.
/// Returns the segment and the offsets of its batches.
fn written_log(fs: &FaultFs, n: u32) -> (WalConfig, PathBuf, Vec<u64>) {
    let cfg = wal_support::sim_config(1, 64 * 1024);
    let (wal, _, _) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    for i in 0..n {
        let lsn = wal
            .append(0, 1, Durability::Full, &mut |b: &mut Vec<u8>| {
                b.extend((0..40u32).map(|k| (i * 3 + k) as u8 | 1))
            })
            .unwrap();
        wal.wait_durable(lsn).unwrap();
    }
    wal.close().unwrap();
    drop(wal);
    let (seg, batches) = batches_of(fs);
    assert_eq!(batches.len(), n as usize);
    (cfg, seg, batches.into_iter().map(|(pos, _)| pos).collect())
}

/// Rewrites the batch header at `pos` through `change`, with a checksum that
/// verifies.
fn forge_batch(fs: &FaultFs, seg: &Path, pos: u64, change: impl Fn(&mut BatchHeader)) {
    let bytes = fs.read_file(seg).unwrap();
    let salt = SegmentHeader::decode(&bytes).unwrap().salt;
    let mut h = BatchHeader::decode(salt, FORMAT_VERSION, &bytes[pos as usize..]).unwrap();
    change(&mut h);
    let mut b = bytes[pos as usize..pos as usize + 48].to_vec();
    h.encode_into(salt, &mut b);
    fs.write_file_raw(seg, pos, &b).unwrap();
}

fn expect_corruption(fs: &FaultFs, cfg: &WalConfig, at: (&Path, u64), lsn: u64, what: &str) {
    match wal_support::open(Arc::new(fs.clone()), cfg, 0) {
        Err(WalError::Corruption {
            file,
            offset,
            lsn: l,
            reason,
        }) => {
            assert_eq!((file.as_path(), offset), at, "{reason}");
            assert_eq!(l, lsn, "{reason}");
            assert!(reason.contains(what), "{reason}");
        }
        Err(e) => panic!("expected corruption ({what}), got {e}"),
        Ok((_, stats, got)) => panic!(
            "expected corruption ({what}), recovered {} records, torn tails {:?}",
            got.len(),
            stats.truncated_tail
        ),
    }
}

#[test]
fn unknown_batch_flags_are_corruption_even_in_the_last_batch() {
    let fs = FaultFs::new(21);
    let (cfg, seg, batches) = written_log(&fs, 3);
    // Nothing follows the last batch, so damage there that looked torn
    // would be cut off silently; a verified header never looks torn.
    let last = batches[2];
    forge_batch(&fs, &seg, last, |h| h.flags |= 4);
    expect_corruption(&fs, &cfg, (&seg, last), 3, "unknown flag bits");

    let mut tolerant = cfg.clone();
    tolerant.recovery_mode = RecoveryMode::TolerateCorruption;
    let (_w, stats, got) = wal_support::open(Arc::new(fs.clone()), &tolerant, 0).unwrap();
    assert_eq!(got.len(), 2);
    let dropped = stats.dropped.unwrap();
    assert!(dropped.contains("unknown flag bits"), "{dropped}");
    assert!(stats.truncated_tail.is_empty());
}

#[test]
fn nonzero_batch_reserved_bytes_are_corruption() {
    let fs = FaultFs::new(22);
    let (cfg, seg, batches) = written_log(&fs, 3);
    forge_batch(&fs, &seg, batches[1], |h| {
        h.flags = 0;
        h.sync_base = 0x0100_0000;
    });
    expect_corruption(&fs, &cfg, (&seg, batches[1]), 2, "reserved");
}

#[test]
fn nonzero_segment_header_reserved_bytes_are_corruption() {
    let fs = FaultFs::new(23);
    let (cfg, seg, _) = written_log(&fs, 2);
    let mut h = fs.read_file(&seg).unwrap()[..64].to_vec();
    h[59] = 0x80;
    let crc = crc32c::crc32c(&h[0..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    fs.write_file_raw(&seg, 0, &h).unwrap();
    expect_corruption(&fs, &cfg, (&seg, 0), 1, "reserved bytes 56..60");
}

/// A segment in a newer format version than this build's (a newer durakv
/// wrote it) stops recovery with a message saying so, in either recovery
/// mode, and is left as it was.
#[test]
fn a_segment_from_a_newer_build_stops_recovery_and_is_left_alone() {
    let fs = FaultFs::new(24);
    let (cfg, seg, _) = written_log(&fs, 2);
    let mut h = fs.read_file(&seg).unwrap()[..64].to_vec();
    h[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let crc = crc32c::crc32c(&h[0..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    fs.write_file_raw(&seg, 0, &h).unwrap();
    let before = fs.read_file(&seg).unwrap();
    let mut tolerant = cfg.clone();
    tolerant.recovery_mode = RecoveryMode::TolerateCorruption;
    for cfg in [&cfg, &tolerant] {
        match wal_support::open(Arc::new(fs.clone()), cfg, 0) {
            Err(e) => {
                let msg = e.to_string();
                let want = format!(
                    "WAL format version {}, which a newer durakv wrote",
                    FORMAT_VERSION + 1
                );
                assert!(msg.contains(&want), "{msg}");
            }
            Ok(_) => panic!("recovered from a segment of a newer format"),
        }
        assert_eq!(fs.read_file(&seg).unwrap(), before);
    }
}

/// Zeroes the sectors of the batch at `pos` (as if none of its writes
/// reached the disk) and marks the batch at `later` as written while the
/// one at `pos` was still unsynced (`sync_base`).
fn tear_with_later_batch(fs: &FaultFs, seg: &Path, pos: u64, later: u64, sync_base: u32) {
    forge_batch(fs, seg, later, |h| h.sync_base = sync_base);
    fs.write_file_raw(seg, pos, &[0u8; 48]).unwrap();
}

#[test]
fn a_tear_followed_only_by_batches_written_before_it_was_durable_ends_the_log() {
    let fs = FaultFs::new(24);
    let (cfg, seg, batches) = written_log(&fs, 4);
    // Batches 2 and 3 were written while batch 1 was in flight, and batch
    // 1's header never reached the disk: neither of them can have been
    // acknowledged, so the log ends before batch 1.
    forge_batch(&fs, &seg, batches[2], |h| h.sync_base = batches[1] as u32);
    tear_with_later_batch(&fs, &seg, batches[1], batches[3], batches[1] as u32);
    let (wal, stats, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(stats.truncated_tail, vec![(seg.clone(), batches[1])]);
    assert!(stats.new_epoch);
    // Writing goes on in a new epoch, and a second recovery agrees.
    let lsn = wal
        .append(0, 1, Durability::Full, &mut |b: &mut Vec<u8>| b.push(7))
        .unwrap();
    assert_eq!(lsn, 2);
    wal.wait_durable(lsn).unwrap();
    wal.close().unwrap();
    drop(wal);
    let (_w, stats, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2]);
    assert!(stats.dropped.is_none());
}

#[test]
fn a_tear_followed_by_a_batch_written_after_it_was_durable_is_corruption() {
    let fs = FaultFs::new(25);
    let (cfg, seg, batches) = written_log(&fs, 4);
    // Batch 3 was written once batch 1 was durable (its sync base is past
    // it), so damage to batch 1 is damage to acknowledged data.
    forge_batch(&fs, &seg, batches[2], |h| h.sync_base = batches[1] as u32);
    tear_with_later_batch(&fs, &seg, batches[1], batches[3], batches[2] as u32);
    expect_corruption(
        &fs,
        &cfg,
        (&seg, batches[1]),
        2,
        "followed by a valid batch",
    );
}

#[test]
fn a_flipped_batch_followed_by_pipelined_batches_is_corruption() {
    let fs = FaultFs::new(26);
    let (cfg, seg, batches) = written_log(&fs, 3);
    forge_batch(&fs, &seg, batches[2], |h| h.sync_base = batches[1] as u32);
    // A bit flip, not a tear: the batch was complete once.
    let mut b = fs.read_file(&seg).unwrap()[batches[1] as usize..][..48].to_vec();
    b[20] ^= 0x04;
    fs.write_file_raw(&seg, batches[1], &b).unwrap();
    expect_corruption(
        &fs,
        &cfg,
        (&seg, batches[1]),
        2,
        "followed by a valid batch",
    );
}

#[test]
fn a_version_1_segment_is_read_but_not_appended_to() {
    let fs = FaultFs::new(27);
    install(
        &fs,
        "/data/wal0/wal-000-000001-00000000000000000001.log",
        STREAM0_V1,
    );
    install(
        &fs,
        "/data/wal1/wal-001-000001-00000000000000000001.log",
        STREAM1_V1,
    );
    let mut cfg = WalConfig::new(vec!["/data/wal0".into(), "/data/wal1".into()]);
    cfg.segment_size_bytes = 4096;
    let (wal, _, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got.len(), 4);
    let lsn = wal
        .append(0, 1, Durability::Full, &mut |b: &mut Vec<u8>| b.push(9))
        .unwrap();
    wal.wait_durable(lsn).unwrap();
    wal.close().unwrap();
    drop(wal);
    // The version 1 files are untouched; the new record went to a new
    // version 2 segment.
    let old = fs
        .read_file(Path::new(
            "/data/wal0/wal-000-000001-00000000000000000001.log",
        ))
        .unwrap();
    assert_eq!(&old[..], &install_bytes(STREAM0_V1)[..]);
    let newest = wal_support::segment_files(&fs)
        .into_iter()
        .filter(|p| p.starts_with("/data/wal0"))
        .max()
        .unwrap();
    let header = SegmentHeader::decode(&fs.read_file(&newest).unwrap()).unwrap();
    assert_eq!(header.version, durakv_engine::wal::format::FORMAT_VERSION);
    let (_w, _, got) = wal_support::open(Arc::new(fs.clone()), &cfg, 0).unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got[4].2, vec![9]);
}

fn install_bytes(hex: &str) -> Vec<u8> {
    let mut bytes = unhex(hex);
    bytes.resize(4096, 0);
    bytes
}
