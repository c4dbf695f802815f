//! Loading an RDB file's keys into the store: a replica's full sync
//! (`repl::replica`), and at start-up the import of a Redis `dump.rdb`
//! found in `dir`, so that moving a dataset from Redis is: stop Redis,
//! start durakv on its redis.conf and data directory.

use crate::repl::replica::MasterClient;
use crate::state::Shared;
use bytes::Bytes;
use durakv_engine::mutation::{KeyOp, Mutation};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Written before an import starts and removed once all of it is durable:
/// found at start-up, it says the last import was cut short, so the keys
/// it left are dropped and the file imported again.
const IMPORTING: &str = "rdb-import.in-progress";

/// Bytes of the file read at a time: the loader holds one item's bytes,
/// not the file's.
const CHUNK: usize = 1 << 20;

/// Empties every database (after `why` left part of a dataset); returns
/// the LSN of the record that did (0 if none was logged).
pub fn empty_dataset(shared: &Shared, why: &str) -> u64 {
    let mut txn = shared.store.keyspace.lock_all();
    let level = shared.effective_durability(None, 0);
    let emptied = txn
        .apply(Mutation::FlushAll)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            txn.commit(shared.store.wal.as_ref(), level)
                .map_err(|e| e.to_string())
        });
    match emptied {
        Ok(out) => out.lsn,
        Err(e) => {
            tracing::warn!("cannot empty the dataset after {why}: {e}");
            0
        }
    }
}

/// Waits until the log holds everything up to `lsn` durably.
fn wait_durable(shared: &Shared, lsn: u64) -> Result<(), String> {
    if lsn == 0 {
        return Ok(());
    }
    shared.store.wal.request_sync_upto(lsn);
    let timeout = Duration::from_secs(600);
    match durakv_engine::store::wait_durable(&shared.store.wal, lsn, timeout) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "the log did not make it durable within {timeout:?}"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// One key of an RDB file, as its own logged record.
pub fn restore(
    shared: &Shared,
    db: u32,
    key: Bytes,
    value: durakv_engine::value::Value,
    expire_at_ms: u64,
    last_lsn: &mut u64,
) -> Result<(), String> {
    let ks = &shared.store.keyspace;
    let num_dbs = ks.num_dbs();
    if db as usize >= num_dbs {
        return Err(format!(
            "the RDB has database {db}, but only {num_dbs} are configured"
        ));
    }
    let mut txn = ks.lock_keys([&key[..]]);
    txn.apply(Mutation::key(
        db,
        key,
        KeyOp::Restore {
            value,
            expire_at_ms,
        },
    ))
    .map_err(|e| e.to_string())?;
    let level = shared.effective_durability(None, db as usize);
    let out = txn
        .commit(shared.store.wal.as_ref(), level)
        .map_err(|e| e.to_string())?;
    *last_lsn = (*last_lsn).max(out.lsn);
    let delay = shared.config.read().key_load_delay;
    if delay != 0 {
        crate::util::debug_delay(delay);
    }
    Ok(())
}

/// Imports a Redis data directory into a store that has never held
/// anything, or again after an import was cut short: its append-only file
/// when `appendonly yes` and `appenddirname` exists (`aof_import`), else
/// `dbfilename` (`dump.rdb`). A store with data of its own is left alone:
/// its log and checkpoints are the truth, and the files leftovers. Keys
/// past `databases`, module values or a damaged file stop the start with
/// the reason.
pub fn import_at_start(shared: &Shared) -> Result<(), String> {
    let (dir, name, aof) = {
        let c = shared.config.read();
        let aof = (c.get("appendonly").as_deref() == Some("yes")).then(|| {
            (
                c.get("appenddirname").unwrap_or_default(),
                c.get("appendfilename").unwrap_or_default(),
            )
        });
        (c.dir.clone(), c.get("dbfilename").unwrap_or_default(), aof)
    };
    let marker = dir.join(IMPORTING);
    let interrupted = marker.exists();
    let store = &shared.store;
    let fresh = store.checkpoint_recovery.loaded.is_none() && store.recovery.last_lsn == 0;
    if !(fresh || interrupted) {
        return Ok(());
    }
    // With `appendonly yes` Redis loads its append-only file, not the RDB,
    // which may then be old or missing.
    let manifest = aof.as_ref().map(|(aof_dir, aof_name)| {
        let aof_dir = dir.join(aof_dir);
        let manifest = crate::aof_import::manifest_path(&aof_dir, aof_name);
        (aof_dir, manifest)
    });
    let legacy = aof
        .as_ref()
        .map(|(_, aof_name)| dir.join(aof_name))
        .filter(|f| f.is_file());
    let source = match (manifest, legacy) {
        (Some((aof_dir, manifest)), _) if manifest.is_file() => Source::Aof { aof_dir, manifest },
        // Redis 6 and older: one file in `dir`, an RDB preamble or not.
        (_, Some(file)) => Source::LegacyAof(file),
        (Some((aof_dir, manifest)), None) if aof_dir.is_dir() => {
            return Err(format!(
                "{} has no {}: in Redis, run BGREWRITEAOF (or SAVE, and start durakv with appendonly no)",
                aof_dir.display(),
                manifest.display()
            ));
        }
        _ if !name.is_empty() && dir.join(&name).is_file() => Source::Rdb(dir.join(&name)),
        _ if interrupted => {
            // The files went away since: what the import left is dropped,
            // and the server starts empty, as without them.
            tracing::warn!(
                "an import was cut short and its files are gone: dropping what it loaded"
            );
            wait_durable(shared, empty_dataset(shared, "an interrupted import"))?;
            return remove_marker(&marker);
        }
        _ => return Ok(()),
    };
    let started = Instant::now();
    write_marker(&marker).map_err(|e| format!("{}: {e}", marker.display()))?;
    if interrupted {
        tracing::warn!("an import was cut short: dropping what it loaded and importing again");
        empty_dataset(shared, "an interrupted import");
    }
    let what = match &source {
        Source::Rdb(file) | Source::LegacyAof(file) => file.display().to_string(),
        Source::Aof { manifest, .. } => manifest.display().to_string(),
    };
    tracing::info!("importing {what}");
    let mut last_lsn = 0;
    let imported = match &source {
        Source::Rdb(file) => {
            let mut client = import_client(shared);
            let loaded = std::fs::File::open(file)
                .map_err(|e| e.to_string())
                .and_then(|mut f| load_rdb_prefix(&mut client, &mut f, &mut last_lsn));
            last_lsn = last_lsn.max(client.state.last_write_lsn);
            loaded.map(|(keys, _)| format!("{keys} keys"))
        }
        Source::Aof { aof_dir, manifest } => {
            crate::aof_import::import(shared, aof_dir, manifest, &mut last_lsn)
                .map(|(keys, commands)| format!("{keys} keys and {commands} commands"))
        }
        Source::LegacyAof(file) => crate::aof_import::import_single(shared, file, &mut last_lsn)
            .map(|(keys, commands)| format!("{keys} keys and {commands} commands")),
    }
    .map_err(|e| format!("importing {what}: {e}"))?;
    wait_durable(shared, last_lsn).map_err(|e| format!("importing {what}: {e}"))?;
    remove_marker(&marker)?;
    tracing::info!(
        "imported {imported} from {what} in {:.3}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What a first start imports.
enum Source {
    Rdb(PathBuf),
    Aof { aof_dir: PathBuf, manifest: PathBuf },
    LegacyAof(PathBuf),
}

/// The privileged client an import runs its commands as, in database 0:
/// the one a replica runs its primary's stream as.
pub(crate) fn import_client(shared: &Shared) -> MasterClient<'_> {
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let mut client = MasterClient::new(shared, (loopback, loopback));
    client.state.db = 0;
    client
}

/// Loads every key and function library of an RDB file read from `f`,
/// stopping once its checksum is in: returns the keys loaded and the
/// bytes read past the checksum (Redis 6's append-only file continues
/// there with commands). Keys raise `last_lsn` to the last record logged;
/// the libraries are loaded with FUNCTION LOAD REPLACE, as a full sync
/// loads them, and logged as the client's writes.
pub(crate) fn load_rdb_prefix(
    client: &mut MasterClient<'_>,
    f: &mut impl Read,
    last_lsn: &mut u64,
) -> Result<(u64, Vec<u8>), String> {
    let shared = client.shared();
    let mut loader = crate::repl::rdb::Loader::default();
    let mut key =
        |db, key, value, expire_at_ms| restore(shared, db, key, value, expire_at_ms, last_lsn);
    let mut buf = vec![0u8; CHUNK];
    while !loader.complete() {
        let n = f.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        loader.feed(&buf[..n], &mut key)?;
    }
    let (loaded, rest) = loader.finish_with_rest(&mut key)?;
    for code in &loaded.functions {
        let load = [
            Bytes::from_static(b"FUNCTION"),
            Bytes::from_static(b"LOAD"),
            Bytes::from_static(b"REPLACE"),
            code.clone(),
        ];
        if let durakv_protocol::Frame::Error(e) = client.execute(&load) {
            return Err(format!("function library: {}", String::from_utf8_lossy(&e)));
        }
    }
    Ok((loaded.keys, rest))
}

fn write_marker(path: &Path) -> std::io::Result<()> {
    let f = std::fs::File::create(path)?;
    f.sync_all()?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

fn remove_marker(marker: &Path) -> Result<(), String> {
    std::fs::remove_file(marker)
        .and_then(|()| sync_dir(marker.parent().unwrap_or(Path::new("."))))
        .map_err(|e| format!("{}: {e}", marker.display()))
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
