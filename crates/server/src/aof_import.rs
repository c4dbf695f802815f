//! Importing a Redis 7 append-only file (`appendonly yes`): the manifest
//! in `appenddirname` names a base file (an RDB, or commands) and the
//! increments after it, which are replayed in order as a replica replays
//! its primary's stream. `rdb_load::import_at_start` decides when.

use crate::repl::replica::MasterClient;
use crate::state::Shared;
use bytes::BytesMut;
use durakv_protocol::{Frame, RequestParser};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Bytes of a file read at a time.
const CHUNK: usize = 1 << 20;

/// One file the manifest names.
#[derive(Debug, PartialEq, Eq)]
struct Part {
    name: String,
    seq: u64,
    kind: PartKind,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum PartKind {
    Base,
    Incr,
    History,
}

/// Reads the manifest: `file <name> seq <n> type <b|i|h>` lines, in
/// Redis's quoting; history files are left out. The base comes first,
/// then the increments in sequence order.
fn read_manifest(text: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("manifest line {}: '{line}'", i + 1);
        let words = crate::redis_conf::split_args(line).ok_or_else(bad)?;
        let (mut name, mut seq, mut kind) = (None, None, None);
        for kv in words.chunks(2) {
            let [k, v] = kv else { return Err(bad()) };
            match k.as_str() {
                "file" => name = Some(v.clone()),
                "seq" => seq = v.parse::<u64>().ok(),
                "type" => {
                    kind = match v.as_str() {
                        "b" => Some(PartKind::Base),
                        "i" => Some(PartKind::Incr),
                        "h" => Some(PartKind::History),
                        _ => None,
                    }
                }
                // Fields a later Redis may add are not ours to judge.
                _ => {}
            }
        }
        let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
            return Err(bad());
        };
        if name.contains('/') {
            return Err(bad());
        }
        if kind != PartKind::History {
            parts.push(Part { name, seq, kind });
        }
    }
    if parts.iter().filter(|p| p.kind == PartKind::Base).count() > 1 {
        return Err("the manifest names more than one base file".into());
    }
    parts.sort_by_key(|p| (p.kind != PartKind::Base, p.seq));
    Ok(parts)
}

/// The manifest's path: `<appendfilename>.manifest` in the directory.
pub fn manifest_path(aof_dir: &Path, appendfilename: &str) -> PathBuf {
    aof_dir.join(format!("{appendfilename}.manifest"))
}

/// Replays the append-only file the manifest names, raising `last_lsn` to
/// the last record logged. Returns the keys the base held and the commands
/// replayed; the caller waits for durability.
pub fn import(
    shared: &Shared,
    aof_dir: &Path,
    manifest: &Path,
    last_lsn: &mut u64,
) -> Result<(u64, u64), String> {
    let text =
        std::fs::read_to_string(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let parts = read_manifest(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let mut client = crate::rdb_load::import_client(shared);
    let (mut keys, mut commands) = (0, 0);
    let last = parts.len().saturating_sub(1);
    for (i, part) in parts.iter().enumerate() {
        let (k, c) = import_file(&mut client, &aof_dir.join(&part.name), i == last, last_lsn)?;
        keys += k;
        commands += c;
    }
    finish(client, last_lsn);
    Ok((keys, commands))
}

/// Replays Redis 6's append-only file: one file, an RDB preamble or not,
/// then commands.
pub fn import_single(
    shared: &Shared,
    file: &Path,
    last_lsn: &mut u64,
) -> Result<(u64, u64), String> {
    let mut client = crate::rdb_load::import_client(shared);
    let done = import_file(&mut client, file, true, last_lsn)?;
    finish(client, last_lsn);
    Ok(done)
}

/// Drops a transaction the file left open, as Redis does, and notes the
/// client's last logged write.
fn finish(mut client: MasterClient<'_>, last_lsn: &mut u64) {
    if client.state.multi.is_some() {
        tracing::warn!("the append-only file ends inside MULTI: that transaction is left out, as Redis leaves it");
        client.execute(&[bytes::Bytes::from_static(b"DISCARD")]);
    }
    *last_lsn = (*last_lsn).max(client.state.last_write_lsn);
}

/// One file: an RDB (the base, or Redis 6's preamble) when it starts with
/// `REDIS`, then commands. Returns the keys and commands it held.
fn import_file(
    client: &mut MasterClient<'_>,
    path: &Path,
    last: bool,
    last_lsn: &mut u64,
) -> Result<(u64, u64), String> {
    let at = |e: String| format!("{}: {e}", path.display());
    let mut f = std::fs::File::open(path).map_err(|e| at(e.to_string()))?;
    let mut head = [0u8; 5];
    let n = f.read(&mut head).map_err(|e| at(e.to_string()))?;
    let mut f = std::io::Cursor::new(head[..n].to_vec()).chain(f);
    let (keys, rest) = if &head[..n] == b"REDIS" {
        crate::rdb_load::load_rdb_prefix(client, &mut f, last_lsn).map_err(at)?
    } else {
        (0, Vec::new())
    };
    let commands = replay(client, std::io::Cursor::new(rest).chain(f), last).map_err(at)?;
    Ok((keys, commands))
}

/// Runs every command of one file. The last file may end part-way through
/// a command (Redis killed mid-write); that command is dropped with a
/// warning, as `aof-load-truncated yes` does. An error reply means the
/// file is not what Redis wrote, and stops the import.
fn replay(client: &mut MasterClient<'_>, mut f: impl Read, last: bool) -> Result<u64, String> {
    let parser = RequestParser::new(crate::repl::replica::STREAM_LIMITS);
    let mut buf = BytesMut::with_capacity(CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    let mut commands = 0;
    loop {
        let n = f.read(&mut chunk).map_err(|e| e.to_string())?;
        buf.extend_from_slice(&chunk[..n]);
        loop {
            // `#TS:<unix time>` annotations (aof-timestamp-enabled).
            if buf.first() == Some(&b'#') {
                match buf.iter().position(|&b| b == b'\n') {
                    Some(nl) => {
                        let _ = buf.split_to(nl + 1);
                        continue;
                    }
                    None => break,
                }
            }
            if buf.first() != Some(&b'*') && !buf.is_empty() {
                return Err(format!("expected a command at byte {}", buf[0]));
            }
            let args = match parser.parse(&mut buf) {
                Ok(Some(a)) if !a.is_empty() => a,
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(e) => return Err(format!("bad command: {e:?}")),
            };
            if let Frame::Error(e) = client.execute(&args) {
                return Err(format!(
                    "{} failed: {}",
                    String::from_utf8_lossy(&args[0]),
                    String::from_utf8_lossy(&e)
                ));
            }
            commands += 1;
        }
        if n == 0 {
            break;
        }
    }
    if !buf.is_empty() {
        if !last {
            return Err("ends part-way through a command".into());
        }
        tracing::warn!(
            "the append-only file ends part-way through a command ({} bytes): loaded what precedes it, as Redis's aof-load-truncated does",
            buf.len()
        );
    }
    Ok(commands)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_puts_the_base_first_and_skips_history() {
        let parts = read_manifest(
            "file appendonly.aof.3.incr.aof seq 3 type i\n\
             file appendonly.aof.1.base.rdb seq 1 type b\n\
             file appendonly.aof.2.incr.aof seq 2 type i\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n",
        )
        .unwrap();
        let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "appendonly.aof.1.base.rdb",
                "appendonly.aof.2.incr.aof",
                "appendonly.aof.3.incr.aof"
            ]
        );
        assert!(read_manifest("file x seq 1\n").is_err());
        assert!(read_manifest("file ../x seq 1 type i\n").is_err());
        assert!(read_manifest("file a seq 1 type b\nfile b seq 2 type b\n").is_err());
        let quoted = read_manifest("file \"my aof.1.incr.aof\" seq 1 type i\n").unwrap();
        assert_eq!(quoted[0].name, "my aof.1.incr.aof");
    }
}
