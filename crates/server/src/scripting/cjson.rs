//! `cjson`: JSON for scripts, with lua-cjson's API and rules (tables with
//! only positive integer keys are arrays, `cjson.null`, numbers as `%.14g`,
//! the depth and sparse-array limits). Decoding is [`super::cjson_decode`].

use super::convert::{exact, exact_get, format_g};
use mlua::{Lua, Table, Value};
use parking_lot::Mutex;
use std::sync::Arc;

const DEFAULT_DEPTH: u32 = 1000;

#[derive(Clone)]
struct Settings {
    encode_max_depth: u32,
    decode_max_depth: u32,
    encode_invalid_numbers: bool,
    decode_invalid_numbers: bool,
    sparse_convert: bool,
    sparse_ratio: u32,
    sparse_safe: u32,
    precision: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            encode_max_depth: DEFAULT_DEPTH,
            decode_max_depth: DEFAULT_DEPTH,
            encode_invalid_numbers: false,
            decode_invalid_numbers: true,
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            precision: 14,
        }
    }
}

type Cfg = Arc<Mutex<Settings>>;

fn fail<T>(msg: impl Into<String>) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Cfg = Arc::default();
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.raw_set(
        "encode",
        super::lib_fn(lua, move |lua, v: mlua::Variadic<Value>| {
            let [v] = v.as_slice() else {
                return fail("bad argument #1 to 'encode' (expected 1 argument)");
            };
            let s = c.lock().clone();
            let mut out = Vec::new();
            encode(v, &s, 1, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "decode",
        super::lib_fn(lua, move |lua, v: mlua::Variadic<Value>| {
            let [v] = v.as_slice() else {
                return fail("bad argument #1 to 'decode' (expected 1 argument)");
            };
            // As luaL_checklstring: a number is read as its text.
            let text = match v {
                Value::String(s) => s.clone(),
                Value::Integer(_) | Value::Number(_) => match lua.coerce_string(v.clone())? {
                    Some(s) => s,
                    None => return fail("bad argument #1 to 'decode' (string expected)"),
                },
                other => {
                    return fail(format!(
                        "bad argument #1 to 'decode' (string expected, got {})",
                        super::convert::lua_type_name(other)
                    ))
                }
            };
            let settings = c.lock().clone();
            super::cjson_decode::decode(
                lua,
                &text.as_bytes(),
                settings.decode_max_depth,
                settings.decode_invalid_numbers,
            )
        })?,
    )?;
    let depth_setter = |lua: &Lua, c: Cfg, pick: fn(&mut Settings) -> &mut u32| {
        super::lib_fn(lua, move |_, n: Option<f64>| {
            let mut s = c.lock();
            if let Some(n) = n {
                if !(1.0..=2147483647.0).contains(&n) {
                    return fail("bad argument #1 (expected integer between 1 and 2147483647)");
                }
                *pick(&mut s) = n as u32;
            }
            Ok(*pick(&mut s))
        })
    };
    t.raw_set(
        "encode_max_depth",
        depth_setter(lua, cfg.clone(), |s| &mut s.encode_max_depth)?,
    )?;
    t.raw_set(
        "decode_max_depth",
        depth_setter(lua, cfg.clone(), |s| &mut s.decode_max_depth)?,
    )?;
    let flag_setter = |lua: &Lua, c: Cfg, pick: fn(&mut Settings) -> &mut bool| {
        super::lib_fn(lua, move |_, v: Value| {
            let mut s = c.lock();
            match v {
                Value::Boolean(b) => *pick(&mut s) = b,
                Value::String(x) if x.as_bytes().as_ref() == b"on" => *pick(&mut s) = true,
                Value::String(x) if x.as_bytes().as_ref() == b"off" => *pick(&mut s) = false,
                _ => {}
            }
            Ok(*pick(&mut s))
        })
    };
    t.raw_set(
        "encode_invalid_numbers",
        flag_setter(lua, cfg.clone(), |s| &mut s.encode_invalid_numbers)?,
    )?;
    t.raw_set(
        "decode_invalid_numbers",
        flag_setter(lua, cfg.clone(), |s| &mut s.decode_invalid_numbers)?,
    )?;
    t.raw_set(
        "encode_keep_buffer",
        super::lib_fn(lua, |_, _: Value| Ok(true))?,
    )?;
    let c = cfg.clone();
    t.raw_set(
        "encode_number_precision",
        super::lib_fn(lua, move |_, n: Option<f64>| {
            let mut s = c.lock();
            if let Some(n) = n {
                if !(1.0..=14.0).contains(&n) {
                    return fail("bad argument #1 (expected integer between 1 and 14)");
                }
                s.precision = n as usize;
            }
            Ok(s.precision)
        })?,
    )?;
    let c = cfg;
    t.raw_set(
        "encode_sparse_array",
        super::lib_fn(
            lua,
            move |_, (conv, ratio, safe): (Option<bool>, Option<u32>, Option<u32>)| {
                let mut s = c.lock();
                if let Some(v) = conv {
                    s.sparse_convert = v;
                }
                if let Some(v) = ratio {
                    s.sparse_ratio = v;
                }
                if let Some(v) = safe {
                    s.sparse_safe = v;
                }
                Ok((s.sparse_convert, s.sparse_ratio, s.sparse_safe))
            },
        )?,
    )?;
    t.raw_set("new", super::lib_fn(lua, |lua, ()| module(lua))?)?;
    t.raw_set("null", Value::NULL)?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn encode(v: &Value, s: &Settings, depth: u32, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        // lua-cjson prints every number with `%.<precision>g`: 2^53+1 is
        // `9.007199254741e+15`.
        Value::Integer(i) => encode_number(*i as f64, s, out)?,
        Value::Number(n) => encode_number(*n, s, out)?,
        Value::String(x) => escape(&x.as_bytes(), out),
        Value::Table(t) => {
            if depth > s.encode_max_depth {
                return fail(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            encode_table(t, s, depth, out)?;
        }
        other => {
            return fail(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

fn number_key(n: f64, s: &Settings, out: &mut Vec<u8>) -> mlua::Result<()> {
    out.push(b'"');
    encode_number(n, s, out)?;
    out.push(b'"');
    Ok(())
}

fn encode_number(n: f64, s: &Settings, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() && !s.encode_invalid_numbers {
        return fail("Cannot serialise number: must not be NaN or Inf");
    }
    out.extend_from_slice(format_g(n, s.precision).as_bytes());
    Ok(())
}

/// The array length if every key is a positive integer (lua-cjson's rule),
/// None for an object.
fn array_len(t: &Table, s: &Settings) -> mlua::Result<Option<usize>> {
    let (mut max, mut items) = (0usize, 0usize);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let idx = match k {
            Value::Integer(i) if i >= 1 => i as usize,
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
            _ => return Ok(None),
        };
        max = max.max(idx);
        items += 1;
    }
    if max > s.sparse_safe as usize && max > items.saturating_mul(s.sparse_ratio as usize) {
        if s.sparse_convert {
            return Ok(None);
        }
        return fail("Cannot serialise table: excessively sparse array");
    }
    Ok(Some(max))
}

fn encode_table(t: &Table, s: &Settings, depth: u32, out: &mut Vec<u8>) -> mlua::Result<()> {
    match array_len(t, s)? {
        Some(len) if len > 0 => {
            out.push(b'[');
            for i in 1..=len {
                if i > 1 {
                    out.push(b',');
                }
                encode(&exact_get(t, i)?, s, depth + 1, out)?;
            }
            out.push(b']');
        }
        _ => {
            out.push(b'{');
            let mut first = true;
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                if !first {
                    out.push(b',');
                }
                first = false;
                match &k {
                    Value::String(x) => escape(&x.as_bytes(), out),
                    Value::Integer(i) => number_key(*i as f64, s, out)?,
                    Value::Number(n) => number_key(*n, s, out)?,
                    other => {
                        return fail(format!(
                            "Cannot serialise {}: table key must be a number or string",
                            other.type_name()
                        ))
                    }
                }
                out.push(b':');
                encode(&exact(t, k, v)?, s, depth + 1, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// lua-cjson escapes control characters, `"`, `\`, `/` and DEL; every
/// other byte passes through as it is, invalid UTF-8 included.
fn escape(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}
