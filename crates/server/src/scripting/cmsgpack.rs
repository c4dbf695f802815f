//! `cmsgpack`: MessagePack for scripts, with lua-cmsgpack 0.4's API and
//! choices (what Redis ships): `pack(...)` concatenates its arguments'
//! encodings; `unpack`, `unpack_one` and `unpack_limit` decode a stream.
//! Integral numbers become the smallest integer type, others a float when
//! one holds them exactly, else a double; a table with keys exactly
//! 1..n is an array, any other table a map; tables nest at most 16 deep
//! (deeper ones become nil, so cyclic tables encode). The markers and
//! integer encodings come from `rmp`; only the Lua binding is here.

use super::convert::{exact, exact_get};
use mlua::{Lua, MultiValue, Table, Value, Variadic};
use rmp::Marker;

/// Tables nested deeper than this are encoded as nil.
const MAX_NESTING: usize = 16;
/// Lua's C stack holds this many values (LUAI_MAXCSTACK).
const MAX_RESULTS: usize = 8000;

fn fail<T>(msg: impl Into<String>) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        super::lib_fn(lua, |lua, args: Variadic<Value>| {
            if args.is_empty() {
                return fail("bad argument #0 to 'pack' (MessagePack pack needs input.)");
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.raw_set(
        "unpack",
        super::lib_fn(lua, |lua, s: mlua::String| unpack(lua, &s.as_bytes(), 0, 0))?,
    )?;
    t.raw_set(
        "unpack_one",
        super::lib_fn(lua, |lua, (s, offset): (mlua::String, Option<i64>)| {
            unpack(lua, &s.as_bytes(), 1, offset.unwrap_or(0))
        })?,
    )?;
    t.raw_set(
        "unpack_limit",
        super::lib_fn(
            lua,
            |lua, (s, limit, offset): (mlua::String, i64, Option<i64>)| {
                unpack(lua, &s.as_bytes(), limit, offset.unwrap_or(0))
            },
        )?,
    )?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

fn io(e: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::RuntimeError(e.to_string())
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    use rmp::encode as w;
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            w::write_str_len(out, b.len() as u32).map_err(io)?;
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => w::write_bool(out, *b).map_err(io)?,
        Value::Integer(i) => {
            w::write_sint(out, *i).map_err(io)?;
        }
        Value::Number(n) => encode_number(*n, out)?,
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, out)?,
        _ => w::write_nil(out).map_err(io)?,
    }
    Ok(())
}

fn encode_number(n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    use rmp::encode as w;
    // An integer exactly when C's (int64_t) cast keeps it.
    if n.is_finite()
        && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n)
        && (n as i64) as f64 == n
    {
        w::write_sint(out, n as i64).map_err(io)?;
    } else if (n as f32) as f64 == n {
        w::write_f32(out, n as f32).map_err(io)?;
    } else {
        w::write_f64(out, n).map_err(io)?;
    }
    Ok(())
}

/// lua-cmsgpack's test: every key a positive number that fits an int,
/// and as many keys as the largest.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0i64, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n > f64::from(i32::MAX) || n.fract() != 0.0 {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    use rmp::encode as w;
    if is_array(t)? {
        let len = t.raw_len();
        w::write_array_len(out, len as u32).map_err(io)?;
        for i in 1..=len {
            encode(&exact_get(t, i)?, level + 1, out)?;
        }
    } else {
        // Two passes, as lua-cmsgpack does: holding every pair at once
        // would take a Lua stack slot per value.
        let n = t.clone().pairs::<Value, Value>().count();
        w::write_map_len(out, n as u32).map_err(io)?;
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            encode(&k, level + 1, out)?;
            encode(&exact(t, k, v)?, level + 1, out)?;
        }
    }
    Ok(())
}

/// lua-cmsgpack's `mp_unpack_full`: with neither a limit nor an offset,
/// every value; otherwise up to `limit` values from `offset`, preceded by
/// the offset to continue from (-1 once the input is used up).
fn unpack(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return fail(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            s.len()
        ));
    }
    if offset as u64 > s.len() as u64 {
        return fail(format!(
            "Start offset {offset} greater than input length {}.",
            s.len()
        ));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor {
        buf: s,
        pos: offset as usize,
        depth: 0,
    };
    let mut values = Vec::new();
    while c.pos < s.len() && (values.len() as i64) < limit {
        if values.len() >= MAX_RESULTS {
            return fail("too many return values at once; use unpack_one or unpack_limit instead.");
        }
        values.push(decode(lua, &mut c)?);
    }
    if !decode_all {
        let next = if c.pos == s.len() { -1 } else { c.pos as i64 };
        values.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(values))
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Arrays and maps open around the value being decoded.
    depth: usize,
}

/// Deepest nesting `unpack` decodes, as deep as `cjson.decode` goes. Each
/// level is native stack of the connection's thread (several KB in a debug
/// build): a few thousand bytes of `0x91` overflowed it and aborted the
/// server, where Redis stops when its Lua stack runs out.
const MAX_DEPTH: usize = 128;

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        if self.buf.len() - self.pos < n {
            return fail("Missing bytes in input.");
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A big-endian unsigned integer of `n` bytes.
    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }
}

/// A number as lua-cmsgpack pushes it (a double; unsigned 64-bit values
/// pass through a signed cast first, as there).
fn num(n: f64) -> Value {
    Value::Number(n)
}

fn decode(lua: &Lua, c: &mut Cursor<'_>) -> mlua::Result<Value> {
    let first = c.take(1)?[0];
    Ok(match Marker::from_u8(first) {
        Marker::FixPos(n) => num(f64::from(n)),
        Marker::FixNeg(n) => num(f64::from(n)),
        Marker::U8 => num(c.uint(1)? as f64),
        Marker::U16 => num(c.uint(2)? as f64),
        Marker::U32 => num(c.uint(4)? as f64),
        Marker::U64 => num(c.uint(8)? as i64 as f64),
        Marker::I8 => num(f64::from(c.uint(1)? as u8 as i8)),
        Marker::I16 => num(f64::from(c.uint(2)? as u16 as i16)),
        Marker::I32 => num(f64::from(c.uint(4)? as u32 as i32)),
        Marker::I64 => num(c.uint(8)? as i64 as f64),
        Marker::Null => Value::Nil,
        Marker::True => Value::Boolean(true),
        Marker::False => Value::Boolean(false),
        Marker::F32 => num(f64::from(f32::from_bits(c.uint(4)? as u32))),
        Marker::F64 => num(f64::from_bits(c.uint(8)?)),
        Marker::FixStr(n) => string(lua, c, usize::from(n))?,
        Marker::Str8 => {
            let n = c.uint(1)? as usize;
            string(lua, c, n)?
        }
        Marker::Str16 => {
            let n = c.uint(2)? as usize;
            string(lua, c, n)?
        }
        Marker::Str32 => {
            let n = c.uint(4)? as usize;
            string(lua, c, n)?
        }
        Marker::FixArray(n) => array(lua, c, usize::from(n))?,
        Marker::Array16 => {
            let n = c.uint(2)? as usize;
            array(lua, c, n)?
        }
        Marker::Array32 => {
            let n = c.uint(4)? as usize;
            array(lua, c, n)?
        }
        Marker::FixMap(n) => map(lua, c, usize::from(n))?,
        Marker::Map16 => {
            let n = c.uint(2)? as usize;
            map(lua, c, n)?
        }
        Marker::Map32 => {
            let n = c.uint(4)? as usize;
            map(lua, c, n)?
        }
        // bin, ext and the reserved byte: lua-cmsgpack reads none of them.
        _ => return fail("Bad data format in input."),
    })
}

fn string(lua: &Lua, c: &mut Cursor<'_>, n: usize) -> mlua::Result<Value> {
    Ok(Value::String(lua.create_string(c.take(n)?)?))
}

/// Opens one more level of nesting for `f`, refused past `MAX_DEPTH` with
/// Redis's words for its Lua stack running out in function `within`.
fn nested<T>(
    c: &mut Cursor<'_>,
    within: &str,
    f: impl FnOnce(&mut Cursor<'_>) -> mlua::Result<T>,
) -> mlua::Result<T> {
    if c.depth >= MAX_DEPTH {
        return fail(format!("stack overflow (in function {within})"));
    }
    c.depth += 1;
    let r = f(c);
    c.depth -= 1;
    r
}

fn array(lua: &Lua, c: &mut Cursor<'_>, n: usize) -> mlua::Result<Value> {
    nested(c, "mp_decode_to_lua_array", |c| {
        // Every element takes a byte: a larger count is cut short anyway.
        let t = lua.create_table_with_capacity(n.min(c.buf.len() - c.pos), 0)?;
        for i in 1..=n {
            t.raw_set(i, decode(lua, c)?)?;
        }
        Ok(Value::Table(t))
    })
}

fn map(lua: &Lua, c: &mut Cursor<'_>, n: usize) -> mlua::Result<Value> {
    nested(c, "mp_decode_to_lua_hash", |c| {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = decode(lua, c)?;
            let v = decode(lua, c)?;
            if matches!(k, Value::Nil) {
                return fail("table index is nil");
            }
            t.raw_set(k, v)?;
        }
        Ok(Value::Table(t))
    })
}
