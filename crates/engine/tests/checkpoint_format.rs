//! The checkpoint format is a promise: files written by a released version
//! must load forever. `checkpoint_fixtures/v1.dkcp` was written by format
//! version 1, `v2.dkcp` by version 2, which adds function libraries, and
//! `v3.dkcp` by version 3, which adds streams, `v4.dkcp` by version 4,
//! which adds a replica's stream position, `v5.dkcp` by version 5,
//! which adds stream consumers' active times, and `v6.dkcp` by version 6,
//! which stores packed hashes as their buffer (write the current version's with
//! `cargo test -p durakv-engine --test checkpoint_format -- --ignored`;
//! never regenerate an older one), and these tests load them and check every
//! key, type, value, TTL and library. It also pins the documented byte
//! layout of the header, the function section and the footer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use durakv_engine::checkpoint::format::{self, FileHeader, Footer};
use durakv_engine::checkpoint::{self, CheckpointConfig, CheckpointOptions, Checkpointer};
use durakv_engine::io::OsFs;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::mutation::{ExpireMode, FunctionOp, KeyOp, Mutation, ReplOrigin, StreamOp};
use durakv_engine::stream::{NodeLimits, StreamId};
use durakv_engine::stream_op::Claimed;
use durakv_engine::value::Value;
use std::path::PathBuf;
use std::sync::Arc;

const NOW_MS: u64 = 1_700_000_000_000;

fn fixture_path(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/checkpoint_fixtures/v{version}.dkcp"))
}

/// The function libraries of the version 2 fixture.
fn libraries() -> Vec<(Bytes, Bytes)> {
    vec![
        (
            b("lib1"),
            b("#!lua name=lib1\nredis.register_function('f1', function() return 1 end)"),
        ),
        (
            b("lib2"),
            Bytes::from_static(b"#!lua name=lib2\n\x00binary"),
        ),
    ]
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// The version 3 fixture's streams: entries with and without a shared
/// field layout, a tombstone, a group with a PEL and an idle consumer, and
/// an empty stream with a group.
fn streams() -> Vec<Mutation> {
    let s = |op| Mutation::key(0, b("stream"), KeyOp::Stream(Box::new(op)));
    let id = StreamId::new;
    let limits = NodeLimits {
        entries: 2,
        bytes: 4096,
    };
    let mut v: Vec<Mutation> = (1..=5)
        .map(|i| {
            s(StreamOp::Add {
                id: id(NOW_MS + i, i),
                fields: vec![(b("f"), b(&i.to_string())), (b("g"), b("x"))],
                limits,
            })
        })
        .collect();
    v.push(s(StreamOp::Add {
        id: id(NOW_MS + 6, 0),
        fields: vec![(b("other"), Bytes::from_static(b"\x00\xff"))],
        limits,
    }));
    v.push(s(StreamOp::Delete(vec![id(NOW_MS + 3, 3)])));
    v.push(s(StreamOp::Trim {
        cutoff: id(NOW_MS + 2, 0),
    }));
    v.push(s(StreamOp::GroupCreate {
        group: b("g1"),
        last_id: StreamId::MIN,
        entries_read: -1,
    }));
    v.push(s(StreamOp::Deliver {
        group: b("g1"),
        consumer: b("alice"),
        time: NOW_MS,
        new: vec![id(NOW_MS + 2, 2), id(NOW_MS + 4, 4)],
        noack: false,
        last: Some((id(NOW_MS + 4, 4), 4)),
        history: vec![],
    }));
    v.push(s(StreamOp::Claim {
        group: b("g1"),
        consumer: b("bob"),
        time: NOW_MS + 7,
        claimed: vec![Claimed {
            id: id(NOW_MS + 4, 4),
            delivery_time: NOW_MS + 7,
            delivery_count: 2,
        }],
        dropped: vec![],
        last_id: None,
    }));
    v.push(s(StreamOp::ConsumerCreate {
        group: b("g1"),
        consumer: b("carol"),
        time: NOW_MS + 8,
    }));
    v.push(s(StreamOp::SetId {
        last_id: id(NOW_MS + 100, 0),
        entries_added: Some(9),
        max_deleted_id: Some(id(NOW_MS + 3, 3)),
    }));
    v.push(Mutation::key(
        2,
        b("empty"),
        KeyOp::Stream(Box::new(StreamOp::Create)),
    ));
    v.push(Mutation::key(
        2,
        b("empty"),
        KeyOp::Stream(Box::new(StreamOp::GroupCreate {
            group: b("g"),
            last_id: StreamId::MIN,
            entries_read: 0,
        })),
    ));
    v
}

/// The contents of the fixture of format `version`, as mutations.
fn contents(version: u32) -> Vec<Mutation> {
    let mut v = base_contents();
    if version >= 3 {
        v.extend(streams());
    }
    if version >= 6 {
        v.extend(hashes());
    }
    v
}

/// The version 6 fixture's hashes: a YCSB-shaped record (packed, in two
/// blocks in memory, so stored as value type 7) and one past the packed
/// bounds (a table, stored by its fields as before).
fn hashes() -> Vec<Mutation> {
    let record = (0..10)
        .map(|i| (b(&format!("field{i}")), b(&format!("{i}").repeat(100))))
        .collect();
    let wide = (0..200).map(|i| (b(&format!("f{i}")), b("v"))).collect();
    vec![
        Mutation::key(0, b("record"), KeyOp::HSet(record)),
        Mutation::key(0, b("wide"), KeyOp::HSet(wide)),
    ]
}

fn base_contents() -> Vec<Mutation> {
    let big = "x".repeat(5000);
    vec![
        Mutation::key(
            0,
            b("str"),
            KeyOp::SetString {
                value: b("hello"),
                expire: ExpireMode::Clear,
            },
        ),
        Mutation::key(
            0,
            b("ttl"),
            KeyOp::SetString {
                value: b("soon"),
                expire: ExpireMode::At(NOW_MS + 3_600_000),
            },
        ),
        Mutation::key(
            0,
            b("big"),
            KeyOp::SetString {
                value: b(&big),
                expire: ExpireMode::Clear,
            },
        ),
        Mutation::key(
            1,
            b("hash"),
            KeyOp::HSet(vec![(b("f1"), b("v1")), (b("f2"), b(""))]),
        ),
        Mutation::key(
            1,
            b("list"),
            KeyOp::Push {
                left: false,
                items: vec![b("a"), b("b"), b("a")],
            },
        ),
        Mutation::key(2, b("set"), KeyOp::SAdd(vec![b("x"), b("y"), b("1")])),
        Mutation::key(
            2,
            b("zset"),
            KeyOp::ZAdd(vec![
                (1.5, b("m1")),
                (-2.0, b("m2")),
                (f64::INFINITY, b("m3")),
            ]),
        ),
        Mutation::key(2, b("zset"), KeyOp::Expire { at_ms: NOW_MS + 10 }),
        Mutation::key(
            1,
            Bytes::from_static(b"\x00bin\xff"),
            KeyOp::SetString {
                value: Bytes::from_static(b"\x00\x01"),
                expire: ExpireMode::Clear,
            },
        ),
    ]
}

fn build(version: u32) -> Keyspace {
    let ks = Keyspace::new(3, 4);
    for m in contents(version) {
        let key = m.target_key().cloned().unwrap_or_default();
        let mut txn = ks.lock_keys_at([&key[..]], NOW_MS);
        txn.apply(m).unwrap();
    }
    ks
}

/// `build(version)`'s entries as a file of `version` holds them: before
/// version 5 a consumer's active time is not stored, and loads as its
/// seen time.
fn expected(version: u32) -> Vec<(usize, Vec<u8>, Value, u64)> {
    let mut v = entries(&build(version));
    if version < 5 {
        for e in &mut v {
            if let Value::Stream(s) = &mut e.2 {
                for g in std::sync::Arc::make_mut(s).groups.values_mut() {
                    for c in g.consumers.values_mut() {
                        c.active_time = Some(c.seen_time);
                    }
                }
            }
        }
    }
    v
}

fn entries(ks: &Keyspace) -> Vec<(usize, Vec<u8>, Value, u64)> {
    let mut v = Vec::new();
    for i in 0..ks.num_shards() {
        let s = ks.shard(i).lock();
        for (db, d) in s.dbs.iter().enumerate() {
            for (k, e) in d.iter() {
                v.push((db, k.to_vec(), e.value.clone(), d.expire_of(k, e)));
            }
        }
    }
    v.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    v
}

#[test]
#[ignore = "writes the current version's fixture; run only when creating a new format version"]
fn write_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::open(Arc::new(OsFs), CheckpointConfig::new(dir.path())).unwrap();
    let ks = build(format::FORMAT_VERSION);
    {
        let mut f = ks.functions().lock();
        for (name, code) in libraries() {
            f.apply(&FunctionOp::Load { name, code });
        }
    }
    ks.set_repl_origin(&position(), 0);
    let st = ck.checkpoint(&ks, None).unwrap();
    let to = fixture_path(format::FORMAT_VERSION);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(&st.path, to).unwrap();
}

#[test]
fn version_2_fixture_loads_keys_and_function_libraries() {
    let path = fixture_path(2);
    let summary = checkpoint::read_summary(&OsFs, &path).unwrap();
    assert_eq!(summary.header.version, 2);
    let ks = Keyspace::new(3, 4);
    let loaded = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(loaded.keys, 8);
    assert_eq!(loaded.libraries, 2);
    assert_eq!(loaded.functions_lsn, Some(0));
    assert_eq!(entries(&ks), expected(2));
    assert_eq!(ks.function_libraries(), libraries());
}

#[test]
fn version_3_fixture_loads_streams() {
    let path = fixture_path(3);
    let summary = checkpoint::read_summary(&OsFs, &path).unwrap();
    assert_eq!(summary.header.version, 3);
    let ks = Keyspace::new(3, 4);
    let loaded = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(loaded.keys, 10);
    assert_eq!(entries(&ks), expected(3));
    let all = entries(&ks);
    let stream = all.iter().find(|e| e.1 == b"stream").unwrap();
    let Value::Stream(s) = &stream.2 else {
        panic!("not a stream");
    };
    assert_eq!(s.len(), 4);
    assert_eq!(s.entries_added, 9);
    assert_eq!(s.last_id, StreamId::new(NOW_MS + 100, 0));
    let g = &s.groups[&b("g1")];
    assert_eq!(g.pel.len(), 2);
    assert_eq!(g.pel[&StreamId::new(NOW_MS + 4, 4)].consumer, b("bob"));
    assert_eq!(g.consumers.len(), 3);
    assert_eq!(ks.function_libraries(), libraries());
}

/// The version 4 fixture's replication position.
fn position() -> ReplOrigin {
    ReplOrigin {
        replid: b("5e3a1c0f9b7d2e4a6c8b0d1f3e5a7c9b1d3f5e7a"),
        offset: 1_234_567,
        db: 2,
    }
}

#[test]
fn version_4_fixture_loads_the_replication_position() {
    let path = fixture_path(4);
    let summary = checkpoint::read_summary(&OsFs, &path).unwrap();
    assert_eq!(summary.header.version, 4);
    let ks = Keyspace::new(3, 4);
    let loaded = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(loaded.keys, 10);
    assert_eq!(entries(&ks), expected(4));
    assert_eq!(ks.function_libraries(), libraries());
    let r = loaded.repl.expect("a replication section");
    assert_eq!((r.lsn, r.offset, r.db), (0, 1_234_567, 2));
    assert_eq!(ks.repl_origin(), Some(position()));
    // Older versions have none.
    let ks3 = Keyspace::new(3, 4);
    let loaded3 = checkpoint::load_into(&OsFs, &fixture_path(3), &ks3, 2).unwrap();
    assert!(loaded3.repl.is_none());
    assert_eq!(ks3.repl_origin(), None);
}

/// Loads the fixture of `version` (4 on: libraries and a stream
/// position), checks all of it against what wrote it, and returns its
/// entries.
fn load_fixture_with_position(version: u32, keys: u64) -> Vec<(usize, Vec<u8>, Value, u64)> {
    let path = fixture_path(version);
    let summary = checkpoint::read_summary(&OsFs, &path).unwrap();
    assert_eq!(summary.header.version, version);
    let ks = Keyspace::new(3, 4);
    let loaded = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(loaded.keys, keys);
    assert_eq!(entries(&ks), expected(version));
    assert_eq!(ks.function_libraries(), libraries());
    assert_eq!(ks.repl_origin(), Some(position()));
    entries(&ks)
}

#[test]
fn version_5_fixture_loads_consumers_active_times() {
    let all = load_fixture_with_position(5, 10);
    let stream = all.iter().find(|e| e.1 == b"stream").unwrap();
    let Value::Stream(s) = &stream.2 else {
        panic!("not a stream");
    };
    let active = |name: &str| s.groups[&b("g1")].consumers[&b(name)].active_time;
    // Read entries, claimed one, only created.
    assert_eq!(active("alice"), Some(NOW_MS));
    assert_eq!(active("bob"), Some(NOW_MS + 7));
    assert_eq!(active("carol"), None);
    // Older files load each consumer as active when last seen.
    let ks4 = Keyspace::new(3, 4);
    checkpoint::load_into(&OsFs, &fixture_path(4), &ks4, 2).unwrap();
    let all = entries(&ks4);
    let Value::Stream(s4) = &all.iter().find(|e| e.1 == b"stream").unwrap().2 else {
        panic!("not a stream");
    };
    assert_eq!(
        s4.groups[&b("g1")].consumers[&b("carol")].active_time,
        Some(NOW_MS + 8)
    );
}

#[test]
fn version_6_fixture_loads_packed_hashes_stored_as_their_buffer() {
    let all = load_fixture_with_position(6, 12);
    let hash = |key: &[u8]| match &all.iter().find(|e| e.1 == key).unwrap().2 {
        Value::Hash(h) => h.clone(),
        _ => panic!("not a hash"),
    };
    let record = hash(b"record");
    assert!(record.is_packed());
    assert!(!hash(b"wide").is_packed());
}

/// A checkpoint written in version 5 (`CheckpointOptions::format_version`,
/// for a rollback to the build before version 6) is what that build wrote:
/// the version 5 fixture's contents give the fixture's blocks byte for
/// byte, and the version 6 contents (packed hashes) load back whole from a
/// file the version 5 reader rules accept.
#[test]
fn version_5_is_still_written_as_the_build_before_wrote_it() {
    let written = |version: u32, contents: u32| {
        let dir = tempfile::tempdir().unwrap();
        let ck = Checkpointer::open(Arc::new(OsFs), CheckpointConfig::new(dir.path())).unwrap();
        let ks = build(contents);
        {
            let mut f = ks.functions().lock();
            for (name, code) in libraries() {
                f.apply(&FunctionOp::Load { name, code });
            }
        }
        ks.set_repl_origin(&position(), 0);
        let opts = CheckpointOptions {
            format_version: version,
            ..CheckpointOptions::default()
        };
        let st = ck.checkpoint_with(&ks, None, opts).unwrap();
        (std::fs::read(&st.path).unwrap(), dir)
    };
    let (file, _dir) = written(5, 5);
    let fixture = std::fs::read(fixture_path(5)).unwrap();
    let footer = |f: &[u8]| f.len() - format::FOOTER_BYTES;
    assert_eq!(&file[8..12], &5u32.to_le_bytes());
    assert_eq!(
        &file[format::FILE_HEADER_BYTES..footer(&file)],
        &fixture[format::FILE_HEADER_BYTES..footer(&fixture)]
    );

    let (file, dir) = written(5, 6);
    let path = dir.path().join("v5-of-v6.dkcp");
    std::fs::write(&path, &file).unwrap();
    assert_eq!(
        checkpoint::read_summary(&OsFs, &path)
            .unwrap()
            .header
            .version,
        5
    );
    let ks = Keyspace::new(3, 4);
    let loaded = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(loaded.keys, 12);
    assert_eq!(entries(&ks), expected(6));
    let all = entries(&ks);
    assert!(matches!(&all.iter().find(|e| e.1 == b"record").unwrap().2,
        Value::Hash(h) if h.is_packed()));

    for version in [4, format::FORMAT_VERSION + 1] {
        let dir = tempfile::tempdir().unwrap();
        let ck = Checkpointer::open(Arc::new(OsFs), CheckpointConfig::new(dir.path())).unwrap();
        let opts = CheckpointOptions {
            format_version: version,
            ..CheckpointOptions::default()
        };
        let err = ck.checkpoint_with(&build(6), None, opts).unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "checkpoint format version {version} is not written"
            )),
            "{err}"
        );
        assert!(ck.files().unwrap().is_empty());
    }
}

#[test]
fn version_1_fixture_loads() {
    let path = fixture_path(1);
    let summary = checkpoint::read_summary(&OsFs, &path).unwrap();
    assert_eq!(summary.header.shard_count, 4);
    assert_eq!(summary.header.db_count, 3);
    assert_eq!(summary.footer.key_count, 8);
    let ks = Keyspace::new(3, 4);
    let loaded = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(loaded.keys, 8);
    assert_eq!(loaded.functions_lsn, None);
    assert_eq!(entries(&ks), entries(&build(1)));
    assert!(ks.function_libraries().is_empty());
}

#[test]
fn header_and_footer_bytes_are_as_documented() {
    let h = FileHeader {
        version: 2,
        seq: 0x0102,
        created_ms: 0x0a0b,
        shard_count: 64,
        db_count: 16,
        wal_last_lsn: 7,
    };
    let b = h.encode();
    assert_eq!(&b[0..8], b"DURAKVCP");
    assert_eq!(&b[8..12], &2u32.to_le_bytes());
    assert_eq!(&b[12..16], &64u32.to_le_bytes());
    assert_eq!(&b[16..20], &16u32.to_le_bytes());
    assert_eq!(&b[24..32], &0x0102u64.to_le_bytes());
    assert_eq!(&b[32..40], &0x0a0bu64.to_le_bytes());
    assert_eq!(&b[40..48], &7u64.to_le_bytes());
    assert_eq!(&b[60..64], &crc32c::crc32c(&b[0..60]).to_le_bytes());
    let f = Footer {
        replay_lsn: 3,
        max_shard_lsn: 9,
        block_count: 5,
        key_count: 6,
        seq: 0x0102,
        footer_offset: 4096,
    };
    let b = f.encode();
    assert_eq!(&b[0..8], b"DKCPFOOT");
    assert_eq!(&b[8..16], &3u64.to_le_bytes());
    assert_eq!(&b[16..24], &9u64.to_le_bytes());
    assert_eq!(&b[48..56], &4096u64.to_le_bytes());
    assert_eq!(&b[60..64], &crc32c::crc32c(&b[0..60]).to_le_bytes());
    let fh = format::FunctionsHeader {
        library_count: 3,
        functions_lsn: 0x0b0c,
        body_len: 77,
        body_crc: 0xdead_beef,
    };
    let b = fh.encode();
    assert_eq!(&b[0..4], b"DKFN");
    assert_eq!(&b[4..8], &3u32.to_le_bytes());
    assert_eq!(&b[8..16], &0x0b0cu64.to_le_bytes());
    assert_eq!(&b[16..24], &77u64.to_le_bytes());
    assert_eq!(&b[24..28], &0xdead_beefu32.to_le_bytes());
    assert_eq!(&b[28..32], &crc32c::crc32c(&b[0..28]).to_le_bytes());
    let rs = format::ReplSection {
        lsn: 0x0d0e,
        replid: Bytes::from_static(b"ab"),
        offset: 258,
        db: 3,
    };
    let b = rs.encode();
    assert_eq!(b.len(), 34);
    assert_eq!(&b[0..4], b"DKRP");
    assert_eq!(&b[4..8], &2u32.to_le_bytes());
    assert_eq!(&b[8..16], &0x0d0eu64.to_le_bytes());
    assert_eq!(&b[16..24], &258u64.to_le_bytes());
    assert_eq!(&b[24..28], &3u32.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..28]), b"ab");
    assert_eq!(&b[28..32], &crc.to_le_bytes());
    assert_eq!(&b[32..34], b"ab");
    assert_eq!(
        format::FILE_HEADER_BYTES
            + format::FUNCTIONS_HEADER_BYTES
            + format::BLOCK_HEADER_BYTES
            + format::FOOTER_BYTES,
        64 + 32 + 56 + 64
    );
}

/// A checkpoint whose pages are cached is read in place (mapped), and that
/// path checks everything the `pread` one does: the same keys load, and a
/// damaged byte is refused. With its first page dropped from the cache, its
/// first blocks are read with `pread` and the rest in place.
#[test]
fn a_cached_checkpoint_loads_in_place_with_the_same_checks() {
    use durakv_engine::io::FileSystem;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v4.dkcp");
    let bytes = std::fs::read(fixture_path(4)).unwrap();
    // Just written, so in the page cache.
    std::fs::write(&path, &bytes).unwrap();
    let cached = |path: &std::path::Path| {
        let f = OsFs.open_file(path).unwrap();
        f.map().is_some_and(|m| m.resident(0, m.len()))
    };
    assert!(cached(&path));
    let ks = Keyspace::new(3, 4);
    checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(entries(&ks), expected(4));

    {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(&path).unwrap();
        f.sync_all().unwrap();
        // A hint: on a file system that ignores it, every block is still
        // read in place. Twice, as the first call may find the pages still
        // queued for the LRU lists.
        for _ in 0..2 {
            // SAFETY: an open descriptor; the call only drops clean cached
            // pages.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 4096, libc::POSIX_FADV_DONTNEED) };
        }
    }
    let ks = Keyspace::new(3, 4);
    checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(entries(&ks), expected(4));

    let summary = checkpoint::read_summary(&OsFs, &path).unwrap();
    let mut damaged = bytes.clone();
    // A byte between the header and the footer: in a checksummed section.
    let at = (summary.footer.footer_offset as usize + 64) / 2;
    damaged[at] ^= 0x40;
    std::fs::write(&path, &damaged).unwrap();
    assert!(cached(&path));
    let ks = Keyspace::new(3, 4);
    let e = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
}
