//! Conversions between Lua values and replies, as Redis documents them.
//!
//! Replies to Lua (`redis.call`): integer → number, bulk → string, nil →
//! false, array → table, status → `{ok=...}`, error → `{err=...}`; under
//! `redis.setresp(3)` also map → `{map=...}`, set → `{set=...}`, double →
//! `{double=...}`, boolean → boolean and null → nil.
//!
//! Lua to replies (a script's result): number → integer (truncated),
//! string → bulk, true → 1, false/nil → nil, table → array up to its first
//! nil, `{ok=...}` → status, `{err=...}` → error, and the RESP3 tables.

use bytes::Bytes;
use durakv_protocol::frame::format_double;
use durakv_protocol::Frame;
use mlua::{IntoLua, Lua, Table, Value};

/// Nesting beyond this is answered with Redis's stack-limit error, before
/// a self-referencing table can exhaust the thread's stack.
const MAX_DEPTH: usize = 200;
const STACK_LIMIT: &str = "ERR reached lua stack limit";

/// A reply, as the Lua client speaking RESP `resp` sees it.
pub fn frame_to_lua(lua: &Lua, f: &Frame, resp: u8) -> mlua::Result<Value> {
    let resp3 = resp == 3;
    Ok(match f {
        Frame::Simple(s) => single_field(lua, "ok", Value::String(lua.create_string(s)?))?,
        Frame::Error(e) => single_field(lua, "err", Value::String(lua.create_string(e)?))?,
        Frame::Integer(i) => Value::Number(*i as f64),
        Frame::Bulk(b) | Frame::Verbatim(b) => Value::String(lua.create_string(b)?),
        Frame::Null | Frame::NullArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        // As in Redis, scripts never see attributes (only DEBUG PROTOCOL,
        // which they may not call, sends one).
        Frame::Attribute(_) => Value::Nil,
        // A sequence only comes from commands scripts may not call.
        Frame::Array(items) | Frame::Push(items) | Frame::Sequence(items) => {
            array(lua, items, resp)?
        }
        Frame::Set(items) if resp3 => {
            let t = lua.create_table()?;
            for it in items {
                t.raw_set(frame_to_lua(lua, it, resp)?, true)?;
            }
            single_field(lua, "set", Value::Table(t))?
        }
        Frame::Set(items) => array(lua, items, resp)?,
        Frame::Map(pairs) if resp3 => {
            let t = lua.create_table()?;
            for (k, v) in pairs {
                t.raw_set(frame_to_lua(lua, k, resp)?, frame_to_lua(lua, v, resp)?)?;
            }
            single_field(lua, "map", Value::Table(t))?
        }
        Frame::Map(pairs) => {
            let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            let mut i = 1;
            for (k, v) in pairs {
                t.raw_set(i, frame_to_lua(lua, k, resp)?)?;
                t.raw_set(i + 1, frame_to_lua(lua, v, resp)?)?;
                i += 2;
            }
            Value::Table(t)
        }
        Frame::Double(d) if resp3 => single_field(lua, "double", Value::Number(*d))?,
        Frame::Double(d) => Value::String(lua.create_string(format_double(*d))?),
        Frame::DoubleText(t) if resp3 => {
            let d = std::str::from_utf8(t).ok().and_then(|t| t.parse().ok());
            single_field(lua, "double", Value::Number(d.unwrap_or(0.0)))?
        }
        Frame::DoubleText(t) => Value::String(lua.create_string(t)?),
        Frame::BigNumber(t) if resp3 => {
            single_field(lua, "big_number", Value::String(lua.create_string(t)?))?
        }
        Frame::BigNumber(t) => Value::String(lua.create_string(t)?),
        Frame::Boolean(b) if resp3 => Value::Boolean(*b),
        Frame::Boolean(b) => Value::Number(if *b { 1.0 } else { 0.0 }),
    })
}

fn array(lua: &Lua, items: &[Frame], resp: u8) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, it) in items.iter().enumerate() {
        t.raw_set(i + 1, frame_to_lua(lua, it, resp)?)?;
    }
    Ok(Value::Table(t))
}

fn single_field(lua: &Lua, name: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(name, v)?;
    Ok(Value::Table(t))
}

/// A script's result as a reply. `resp` is the script's `redis.setresp`
/// level: at 2, booleans follow the RESP2 rules whatever the client speaks.
pub fn lua_to_frame(v: &Value, resp: u8) -> Frame {
    to_frame(v, resp, 0)
}

const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// C's `(long)n` as Redis's x86-64 build computes it (`cvttsd2si`): the
/// fraction dropped, and NaN or a number no i64 holds gives i64::MIN.
pub fn c_i64(n: f64) -> i64 {
    if !(-TWO_POW_63..TWO_POW_63).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// C's `(unsigned long)n` as gcc compiles it for x86-64: from 2^63 up it
/// converts `n - 2^63` and sets the top bit, so 2^64 and beyond wrap to
/// a few values (1e20 gives 0) rather than saturating as Rust's cast does.
pub fn c_u64(n: f64) -> u64 {
    if n >= TWO_POW_63 {
        (c_i64(n - TWO_POW_63) as u64) ^ (1 << 63)
    } else {
        c_i64(n) as u64
    }
}

/// `v`, read from `t[key]`, with its number exact. mlua hands a Lua 5.1
/// number within `f64::EPSILON` of a whole number over as
/// `Value::Integer`, so `8e-26` and `-0` arrive as `Integer(0)`; reading
/// the slot again as `f64` takes the double off the Lua stack as it is.
/// Any other integer it hands over is the number exactly.
pub fn exact(t: &Table, key: impl IntoLua, v: Value) -> mlua::Result<Value> {
    if !matches!(v, Value::Integer(0)) {
        return Ok(v);
    }
    let n: f64 = t.raw_get(key)?;
    Ok(if n == 0.0 && n.is_sign_positive() {
        Value::Integer(0)
    } else {
        Value::Number(n)
    })
}

/// `t[key]`, its number exact (see [`exact`]).
pub fn exact_get(t: &Table, key: impl IntoLua + Clone) -> mlua::Result<Value> {
    let v = t.raw_get::<Value>(key.clone())?;
    exact(t, key, v)
}

fn to_frame(v: &Value, resp: u8, depth: usize) -> Frame {
    match v {
        Value::String(s) => Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(i) => Frame::Integer(*i),
        // Redis casts: the fraction is dropped, not rounded. A number no
        // i64 holds (and NaN) comes out of its cast on x86-64 as i64::MIN,
        // which is what clients of Redis see.
        Value::Number(n) => Frame::Integer(c_i64(*n)),
        Value::Boolean(b) if resp == 2 => {
            if *b {
                Frame::Integer(1)
            } else {
                Frame::Null
            }
        }
        Value::Boolean(b) => Frame::Boolean(*b),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Frame::error(STACK_LIMIT);
            }
            table_to_frame(t, resp, depth)
        }
        _ => Frame::Null,
    }
}

fn table_to_frame(t: &Table, resp: u8, depth: usize) -> Frame {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        return Frame::Error(error_text(&e.as_bytes()));
    }
    if let Value::String(s) = field("ok") {
        return Frame::Simple(Bytes::from(one_line(c_str(&s.as_bytes()))));
    }
    match exact_get(t, "double").unwrap_or(Value::Nil) {
        Value::Number(d) => return Frame::Double(d),
        Value::Integer(d) => return Frame::Double(d as f64),
        _ => {}
    }
    if let Value::String(s) = field("big_number") {
        return Frame::BigNumber(Bytes::from(one_line(&s.as_bytes())));
    }
    if let Value::Table(v) = field("verbatim_string") {
        if let (Ok(Value::String(_)), Ok(Value::String(s))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            return Frame::Verbatim(Bytes::copy_from_slice(&s.as_bytes()));
        }
    }
    if let Value::Table(m) = field("map") {
        let mut out = Vec::new();
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            out.push((to_frame(&k, resp, depth + 1), to_frame(&v, resp, depth + 1)));
        }
        return Frame::Map(out);
    }
    if let Value::Table(s) = field("set") {
        let mut out = Vec::new();
        for (k, _) in s.pairs::<Value, Value>().flatten() {
            out.push(to_frame(&k, resp, depth + 1));
        }
        return Frame::Set(out);
    }
    let mut out = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => {
                let f = to_frame(&v, resp, depth + 1);
                // The limit error ends the reply where it was reached.
                let stop = matches!(&f, Frame::Error(e) if e.as_ref() == STACK_LIMIT.as_bytes());
                out.push(f);
                if stop {
                    break;
                }
            }
        }
    }
    Frame::Array(out)
}

/// An error reply's text from an `err` field, as Redis writes it: up to
/// the first NUL (Redis reads the field as a C string), without the line
/// breaks that end it, others as spaces. Empty stays empty (`-` alone),
/// and spaces are kept, as in Redis.
pub fn error_text(msg: &[u8]) -> Bytes {
    let msg = c_str(msg);
    let end = msg
        .iter()
        .rposition(|&c| c != b'\r' && c != b'\n')
        .map_or(0, |i| i + 1);
    Bytes::from(one_line(&msg[..end]))
}

/// A value's type as Lua names it in argument errors ("got userdata" for
/// cjson.null, not mlua's "lightuserdata").
pub fn lua_type_name(v: &Value) -> &'static str {
    match v {
        Value::LightUserData(_) => "userdata",
        Value::Integer(_) => "number",
        other => other.type_name(),
    }
}

/// What Redis reads of a Lua string it takes as a C string: the bytes
/// before the first NUL.
pub fn c_str(s: &[u8]) -> &[u8] {
    s.iter().position(|&c| c == 0).map_or(s, |i| &s[..i])
}

/// Redis turns CR and LF in status and error text into spaces.
fn one_line(s: &[u8]) -> Vec<u8> {
    s.iter()
        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
        .collect()
}

/// A Lua number as a command argument: Redis formats it with `%.17g`, so
/// integers up to 2^53 keep every digit.
pub fn number_arg(n: f64) -> String {
    format_g(n, 17)
}

pub use durakv_protocol::frame::format_g;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_match_x86_64_c() {
        assert_eq!(c_i64(-3.9), -3);
        assert_eq!(c_i64(f64::NAN), i64::MIN);
        assert_eq!(c_i64(1e20), i64::MIN);
        assert_eq!(c_i64(-1e20), i64::MIN);
        assert_eq!(c_u64(1e20), 0);
        assert_eq!(c_u64(1e300), 0);
        assert_eq!(c_u64(f64::NAN), 1 << 63);
        assert_eq!(c_u64(TWO_POW_63), 1 << 63);
        assert_eq!(c_u64(1.5e19), 15_000_000_000_000_000_000);
    }

    #[test]
    fn numbers_as_arguments_match_printf_17g() {
        assert_eq!(number_arg(9007199254740991.0), "9007199254740991");
        assert_eq!(number_arg(0.1), "0.10000000000000001");
        assert_eq!(number_arg(-3.0), "-3");
        assert_eq!(number_arg(1e20), "1e+20");
        assert_eq!(number_arg(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(number_arg(100.5), "100.5");
        assert_eq!(format_g(0.0003, 14), "0.0003");
        assert_eq!(format_g(-5000.0, 14), "-5000");
        assert_eq!(format_g(1023.2, 14), "1023.2");
        assert_eq!(format_g(1e100, 14), "1e+100");
    }
}
