//! Small helpers shared by command modules: clock, cores, argument parsing.

use crate::errors;
use durakv_protocol::Frame;
use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The cores this process may run on (2 when the system cannot tell): what
/// `io-threads 0` and `wal-sync-gather-writers auto` scale with.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How long one pairing of the monotonic clock with the wall clock serves a
/// thread (`wall_ms_at`): a step of the wall clock (NTP, an operator's
/// `date`) shows in commands' time within this.
const CLOCK_PAIRING_NS: u64 = 1_000_000;

thread_local! {
    /// A monotonic reading (`mono_ns`) and the wall clock (Unix ns) read
    /// together.
    static PAIRING: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

/// Nanoseconds on the monotonic clock (the one `Instant` reads), from an
/// arbitrary start. Every request takes its start and its run time from
/// it: as plain numbers, a run time is one subtraction, where two
/// `Instant`s are subtracted as checked, normalised seconds and
/// nanoseconds (about 40 instructions each time).
pub fn mono_ns() -> u64 {
    // The monotonic clock exists on every Linux; were the read to fail,
    // zero is a time that only looks long ago.
    clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0)
}

/// `clock`'s reading in nanoseconds; None if the kernel has no such clock.
fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
        .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The time from `since`, a `mono_ns` reading, to now.
pub fn mono_elapsed(since: u64) -> Duration {
    Duration::from_nanos(mono_ns().saturating_sub(since))
}

/// The wall clock in Unix milliseconds at `at`, a `mono_ns` reading the
/// caller took just now (a command's start). Reading the wall clock costs
/// as much as that reading, and a command's time is taken on every call:
/// the wall clock is read once per `CLOCK_PAIRING_NS` per thread instead, and
/// `at` is placed against it.
pub fn wall_ms_at(at: u64) -> u64 {
    PAIRING
        .try_with(|p| {
            if let Some((mono, wall_ns)) = p.get() {
                let (ns, apart) = placed(mono, wall_ns, at);
                if apart < CLOCK_PAIRING_NS {
                    return ns / 1_000_000;
                }
            }
            let (mono, wall_ns) = (mono_ns(), unix_ns());
            p.set(Some((mono, wall_ns)));
            placed(mono, wall_ns, at).0 / 1_000_000
        })
        .unwrap_or_else(|_| now_ms())
}

/// `at` on the wall clock (Unix ns) by the pairing of `mono` with
/// `wall_ns`, and how far (ns) `at` lies from `mono`, either way round.
fn placed(mono: u64, wall_ns: u64, at: u64) -> (u64, u64) {
    if at >= mono {
        let after = at - mono;
        (wall_ns.saturating_add(after), after)
    } else {
        let before = mono - at;
        (wall_ns.saturating_sub(before), before)
    }
}

fn as_ns(d: Duration) -> u64 {
    d.as_secs() * 1_000_000_000 + u64::from(d.subsec_nanos())
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, as_ns)
}

/// Unix milliseconds from the clock the kernel updates once per tick (1 to
/// 4 ms behind `now_ms`), for what only needs seconds: when a client was
/// last heard from. It costs a fifth of a precise read, which a connection
/// otherwise pays on every request.
pub fn now_ms_coarse() -> u64 {
    clock_ns(libc::CLOCK_REALTIME_COARSE).map_or_else(now_ms, |ns| ns / 1_000_000)
}

/// Milliseconds on the coarse monotonic clock (see `now_ms_coarse`), from
/// an arbitrary start.
pub fn monotonic_ms_coarse() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE).unwrap_or_else(mono_ns) / 1_000_000
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

/// Parses a float argument as Redis's `getDoubleFromObject` does (ZADD,
/// ZINCRBY, WEIGHTS, GEO): `strtod` over the whole argument, so decimal or
/// hexadecimal (`0x1p3`) and `inf`; NaN is refused, and so is a value out
/// of a double's range (`1e309`, `1e-400`), where `strtod` reports ERANGE
/// and Redis refuses it.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let (v, out_of_range) = strtod(b)?;
    (!out_of_range).then_some(v)
}

/// [`parse_f64`] for the arguments Redis reads as a `long double`
/// (INCRBYFLOAT, HINCRBYFLOAT, blocking timeouts) or with a bare `strtod`
/// (score ranges): those take a value past a double's range, which
/// saturates here to ±inf or 0.
pub fn parse_f64_saturating(b: &[u8]) -> Option<f64> {
    strtod(b).map(|(v, _)| v)
}

/// A float read as Redis reads score range bounds, with a bare `strtod`
/// that must reach the end: leading white space is skipped, an empty
/// argument is 0 (nothing converted, nothing left), and a value past a
/// double's range saturates.
pub fn parse_f64_bare(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    let rest = skip_c_space(b);
    if rest.is_empty() {
        return None;
    }
    parse_f64_saturating(rest)
}

/// The number C's `strtod(b, NULL)` reads where nothing checks what is
/// left (DEBUG SLEEP): leading white space skipped, then the longest
/// decimal number, `inf` or `nan` at the start; 0 when there is none.
/// Hexadecimal floats read as their leading 0.
pub fn leading_f64(b: &[u8]) -> f64 {
    let b = skip_c_space(b);
    let (sign, rest) = match b.first() {
        Some(b'-') => (-1.0, &b[1..]),
        Some(b'+') => (1.0, &b[1..]),
        _ => (1.0, b),
    };
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"inf") {
        return sign * f64::INFINITY;
    }
    if starts(b"nan") {
        return f64::NAN;
    }
    let digits = |from: usize| {
        rest[from..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let mut end = digits(0);
    let mut any = end > 0;
    if rest.get(end) == Some(&b'.') {
        let frac = digits(end + 1);
        any |= frac > 0;
        end += 1 + frac;
    }
    if !any {
        return 0.0;
    }
    if matches!(rest.get(end), Some(b'e' | b'E')) {
        let signed = usize::from(matches!(rest.get(end + 1), Some(b'+' | b'-')));
        let exp = digits(end + 1 + signed);
        if exp > 0 {
            end += 1 + signed + exp;
        }
    }
    std::str::from_utf8(&rest[..end])
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(0.0, |v| sign * v)
}

/// `b` after the white space C's `isspace` skips (space, \t, \n, \v, \f,
/// \r), as `strtod` and `strtoull` skip it.
pub fn skip_c_space(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t'..=b'\r'))
        .unwrap_or(b.len());
    &b[start..]
}

/// C's `strtod` over all of `b`: the value, and whether it lay outside a
/// double's range (overflowed to ±inf, or underflowed to 0). `None` for
/// text `strtod` would not consume whole, for leading or trailing space,
/// and for NaN.
fn strtod(b: &[u8]) -> Option<(f64, bool)> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let (negative, unsigned) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let hex = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"));
    let (v, out_of_range) =
        if unsigned.eq_ignore_ascii_case("inf") || unsigned.eq_ignore_ascii_case("infinity") {
            (f64::INFINITY, false)
        } else if let Some(hex) = hex {
            parse_hex_float(hex)?
        } else if unsigned
            .bytes()
            .all(|c| c.is_ascii_digit() || b".eE+-".contains(&c))
        {
            // Rust's parser takes exactly strtod's decimal syntax, signs
            // aside (handled above, so a second one is refused).
            if unsigned.starts_with(['+', '-']) {
                return None;
            }
            let v: f64 = unsigned.parse().ok()?;
            let mantissa = unsigned.split(['e', 'E']).next().unwrap_or("");
            let underflow = v == 0.0 && mantissa.bytes().any(|c| matches!(c, b'1'..=b'9'));
            (v, v.is_infinite() || underflow)
        } else {
            return None;
        };
    Some((if negative { -v } else { v }, out_of_range))
}

/// The digits after `0x` of a C99 hexadecimal float (`1.8p1`): hex digits
/// with an optional point, then an optional binary exponent.
fn parse_hex_float(s: &str) -> Option<(f64, bool)> {
    let (digits, exp) = match s.split_once(['p', 'P']) {
        Some((d, e)) => {
            let e = e.strip_prefix('+').unwrap_or(e);
            let digits_only = e.strip_prefix('-').unwrap_or(e);
            if digits_only.is_empty() || !digits_only.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            // Past any double's range either way; saturated, not refused.
            let past = if e.starts_with('-') {
                -1 << 20
            } else {
                1 << 20
            };
            (d, e.parse::<i64>().unwrap_or(past))
        }
        None => (s, 0),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut mantissa: u64 = 0;
    let mut scale: i64 = exp;
    for (i, c) in int.chars().chain(frac.chars()).enumerate() {
        let d = c.to_digit(16)? as u64;
        if mantissa >> 60 == 0 {
            mantissa = mantissa << 4 | d;
            if i >= int.len() {
                scale -= 4;
            }
        } else if i < int.len() {
            // Digits past 64 bits of precision only move the point.
            scale += 4;
        }
    }
    if mantissa == 0 {
        return Some((0.0, false));
    }
    // In two halves, so that neither power of two leaves f64's range
    // while the product is still in it.
    let scale = scale.clamp(-2200, 2200) as i32;
    let v = mantissa as f64 * 2f64.powi(scale / 2) * 2f64.powi(scale - scale / 2);
    Some((v, v.is_infinite() || v == 0.0))
}

pub fn arg_f64(b: &[u8]) -> Result<f64, Frame> {
    parse_f64(b).ok_or_else(|| errors::err(errors::NOT_FLOAT))
}

/// Redis's `debugDelay`, behind `key-load-delay` and `rdb-key-save-delay`:
/// sleeps `us` microseconds, or for a negative `us` one microsecond once
/// in `-us` calls (a sleep is a system call, so short delays are made
/// rare rather than short).
pub fn debug_delay(us: i64) {
    let us = if us < 0 {
        u64::from(rand::random::<u64>().is_multiple_of(us.unsigned_abs()))
    } else {
        us as u64
    };
    if us > 0 {
        std::thread::sleep(std::time::Duration::from_micros(us));
    }
}

/// ASCII case-insensitive comparison of an argument with a keyword.
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A command's time placed against the thread's pairing matches a
    /// direct reading of the wall clock: for a reading just taken, for one
    /// taken before the pairing was made, and across a re-pairing; and the
    /// monotonic readings measure what `Instant` does.
    #[test]
    fn wall_time_from_a_monotonic_reading_matches_the_wall_clock() {
        let close = |got: u64, before: u64, after: u64| {
            assert!(
                got + 1 >= before && got <= after + 1,
                "{before} <= {got} <= {after}"
            );
        };
        for pause_us in [0, 300, 2_000, 5_000] {
            let before = now_ms();
            let at = mono_ns();
            let timer = Instant::now();
            std::thread::sleep(Duration::from_micros(pause_us));
            let measured = timer.elapsed();
            let took = mono_elapsed(at);
            let got = wall_ms_at(at);
            let after = now_ms();
            close(got, before, after);
            assert!(took >= Duration::from_micros(pause_us), "{took:?}");
            // Read around the Instant pair, on the same clock.
            assert!(took >= measured, "{took:?} against {measured:?}");
            // Placed again against the same pairing: no drift.
            let again = wall_ms_at(mono_ns());
            close(again, before, now_ms());
        }
        // A reading 3 ms old, older than any pairing this makes now.
        let before = now_ms();
        let old = mono_ns();
        std::thread::sleep(Duration::from_millis(3));
        let _ = wall_ms_at(mono_ns());
        close(wall_ms_at(old), before, before + 1);
    }

    #[test]
    fn floats_parse_as_strtod_with_redis_range_rule() {
        let ok = |t: &str, v: f64| assert_eq!(parse_f64(t.as_bytes()), Some(v), "{t}");
        ok("1.5", 1.5);
        ok("-.5", -0.5);
        ok("5.", 5.0);
        ok("+3e2", 300.0);
        ok("0x10", 16.0);
        ok("0x1p3", 8.0);
        ok("-0X1.8P1", -3.0);
        ok("0x.8", 0.5);
        ok("0x0p99999", 0.0);
        ok("inf", f64::INFINITY);
        ok("-Infinity", f64::NEG_INFINITY);
        ok("0x1.fffffffffffffp1023", f64::MAX);
        ok("4.9e-324", 4.9e-324);
        ok("0x1p-1074", 4.9e-324);
        for bad in [
            "",
            " 5",
            "5 ",
            "nan",
            "1e",
            "0x",
            "0x1p",
            "0xp1",
            "1_0",
            "--1",
            "+-1",
            "1e309",
            "-1e309",
            "1e-400",
            "0x1p1024",
            "0x1p-1080",
            ".",
            "e5",
            "0x1g",
        ] {
            assert_eq!(parse_f64(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn saturating_floats_take_values_past_the_range() {
        assert_eq!(leading_f64(b"0\r\n"), 0.0);
        assert_eq!(leading_f64(b"abc"), 0.0);
        assert_eq!(leading_f64(b" 1.5xyz"), 1.5);
        assert_eq!(leading_f64(b"-2e1s"), -20.0);
        assert_eq!(leading_f64(b"3e"), 3.0);
        assert_eq!(leading_f64(b".5"), 0.5);
        assert_eq!(leading_f64(b"."), 0.0);
        assert_eq!(leading_f64(b"Infinity"), f64::INFINITY);
        assert!(leading_f64(b"nan").is_nan());
        assert_eq!(leading_f64(b"0x10"), 0.0);
        assert_eq!(parse_f64_saturating(b"1e309"), Some(f64::INFINITY));
        assert_eq!(parse_f64_saturating(b"-1e309"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64_saturating(b"1e-400"), Some(0.0));
        assert_eq!(
            parse_f64_saturating(b"0x1p99999999999999999999"),
            Some(f64::INFINITY)
        );
        assert_eq!(parse_f64_saturating(b"nan"), None);
        assert_eq!(parse_f64_bare(b""), Some(0.0));
        assert_eq!(parse_f64_bare(b" \t\x0b1.5"), Some(1.5));
        assert_eq!(parse_f64_bare(b"   "), None);
        assert_eq!(parse_f64_bare(b"1 "), None);
    }
}
