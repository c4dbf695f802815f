//! Small helpers shared by command modules: clock, argument parsing.

use crate::errors;
use durakv_protocol::Frame;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Parses an integer argument, or the Redis error reply for it.
pub fn arg_i64(b: &[u8]) -> Result<i64, Frame> {
    durakv_engine::value::parse_i64(b).ok_or_else(|| errors::err(errors::NOT_INTEGER))
}

/// Parses a float argument as Redis's `strtold`-based parser accepts it
/// (`inf`, `-inf`, `+inf` allowed; NaN refused).
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => s.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

pub fn arg_f64(b: &[u8]) -> Result<f64, Frame> {
    parse_f64(b).ok_or_else(|| errors::err(errors::NOT_FLOAT))
}

/// ASCII case-insensitive comparison of an argument with a keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// Formats a float the way Redis replies to INCRBYFLOAT/HINCRBYFLOAT (`%.17Lg`
/// then trimmed): the shortest text that round-trips.
pub fn format_float(v: f64) -> String {
    durakv_protocol::frame::format_double(v)
}

/// Writes `bytes` next to `path`, syncs it, renames it over `path` and
/// syncs the directory, so a crash leaves either the old file or the new
/// one (CONFIG REWRITE, ACL SAVE).
pub fn replace_file(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}
