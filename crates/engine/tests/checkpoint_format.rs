//! The checkpoint format is a promise: files written by a released version
//! must load forever. `checkpoint_fixtures/v1.dkcp` was written by format
//! version 1 (regenerate only for a new version, with
//! `cargo test -p durakv-engine --test checkpoint_format -- --ignored`),
//! and this test loads it and checks every key, type, value and TTL. It
//! also pins the documented byte layout of the header and footer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use durakv_engine::checkpoint::format::{self, FileHeader, Footer};
use durakv_engine::checkpoint::{self, CheckpointConfig, Checkpointer};
use durakv_engine::io::OsFs;
use durakv_engine::keyspace::Keyspace;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::value::Value;
use std::path::PathBuf;
use std::sync::Arc;

const NOW_MS: u64 = 1_700_000_000_000;

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/checkpoint_fixtures/v1.dkcp")
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// The fixture's contents, as mutations.
fn contents() -> Vec<Mutation> {
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

fn build() -> Keyspace {
    let ks = Keyspace::new(3, 4);
    for m in contents() {
        let key = m.target_key().cloned().unwrap_or_default();
        let mut txn = ks.lock_keys_at([&key[..]], NOW_MS);
        txn.apply(m).unwrap();
    }
    ks
}

fn entries(ks: &Keyspace) -> Vec<(usize, Vec<u8>, Value, u64)> {
    let mut v = Vec::new();
    for i in 0..ks.num_shards() {
        let s = ks.shard(i).lock();
        for (db, d) in s.dbs.iter().enumerate() {
            for (k, e) in d.iter() {
                v.push((db, k.to_vec(), e.value.clone(), e.expire_at_ms));
            }
        }
    }
    v.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    v
}

#[test]
#[ignore = "writes the version-1 fixture; run only when creating a new format version"]
fn write_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let ck = Checkpointer::open(Arc::new(OsFs), CheckpointConfig::new(dir.path())).unwrap();
    let st = ck.checkpoint(&build(), None).unwrap();
    std::fs::create_dir_all(fixture_path().parent().unwrap()).unwrap();
    std::fs::copy(&st.path, fixture_path()).unwrap();
}

#[test]
fn version_1_fixture_loads() {
    let path = fixture_path();
    let summary = checkpoint::read_summary(&OsFs, &path).unwrap();
    assert_eq!(summary.header.shard_count, 4);
    assert_eq!(summary.header.db_count, 3);
    assert_eq!(summary.footer.key_count, 8);
    let ks = Keyspace::new(3, 4);
    let loaded = checkpoint::load_into(&OsFs, &path, &ks, 2).unwrap();
    assert_eq!(loaded.keys, 8);
    assert_eq!(entries(&ks), entries(&build()));
}

#[test]
fn header_and_footer_bytes_are_as_documented() {
    let h = FileHeader {
        seq: 0x0102,
        created_ms: 0x0a0b,
        shard_count: 64,
        db_count: 16,
        wal_last_lsn: 7,
    };
    let b = h.encode();
    assert_eq!(&b[0..8], b"DURAKVCP");
    assert_eq!(&b[8..12], &1u32.to_le_bytes());
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
    assert_eq!(
        format::FILE_HEADER_BYTES + format::BLOCK_HEADER_BYTES + format::FOOTER_BYTES,
        64 + 56 + 64
    );
}
