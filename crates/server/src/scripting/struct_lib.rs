//! `struct`: binary packing for scripts, with Roberto Ierusalimschy's
//! `struct` library API as Redis ships it (`pack`, `unpack`, `size`), on
//! a 64-bit little-endian machine as Redis is built: `l`/`L`/`T` are 8
//! bytes, `i`/`I` 4 unless sized (`i1`..`i32`), `!` aligns to at most 8.
//!
//! Formats: `>` big endian, `<` little endian, `![n]` alignment, `x` a zero
//! byte, `b/B h/H l/L T i/In I/In` signed/unsigned integers, `cn` n chars
//! (`c0`: the whole string when packing, the previous number's worth when
//! unpacking), `s` a zero-terminated string, `f` float, `d` double, ` `
//! ignored.

use mlua::{Lua, MultiValue, Table, Value, Variadic};

/// Largest integer size (`i32`).
const MAX_INT_SIZE: usize = 32;
/// `!` without a number: the alignment of a double.
const MAX_ALIGN: usize = 8;
const INT_SIZE: usize = 4;
const LONG_SIZE: usize = 8;

fn fail<T>(msg: impl Into<String>) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

/// luaL_argerror's message, naming the function as Lua 5.1 does for the
/// usual call, `struct.pack(...)` (under pcall Redis says '?').
fn arg_error<T>(n: usize, func: &str, msg: &str) -> mlua::Result<T> {
    fail(format!("bad argument #{n} to '{func}' ({msg})"))
}

#[derive(Clone, Copy)]
struct Header {
    big_endian: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            big_endian: false,
            align: 1,
        }
    }
}

/// The format being read, one option at a time.
struct Format<'a> {
    fmt: &'a [u8],
    pos: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.fmt.get(self.pos)?;
        self.pos += 1;
        Some(c)
    }

    /// The number after an option, or `default`.
    fn number(&mut self, default: usize) -> mlua::Result<usize> {
        if !self.fmt.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: usize = 0;
        while let Some(&d) = self.fmt.get(self.pos).filter(|d| d.is_ascii_digit()) {
            a = a
                .checked_mul(10)
                .and_then(|a| a.checked_add(usize::from(d - b'0')))
                .filter(|&a| a <= i32::MAX as usize)
                .map_or_else(|| fail("integral size overflow"), Ok)?;
            self.pos += 1;
        }
        Ok(a)
    }

    /// The size of option `opt` (0 for the control options).
    fn size(&mut self, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => LONG_SIZE,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let n = self.number(INT_SIZE)?;
                if n > MAX_INT_SIZE {
                    return fail(format!(
                        "integral size {n} is larger than limit of {MAX_INT_SIZE}"
                    ));
                }
                n
            }
            _ => 0,
        })
    }

    fn control(&mut self, opt: u8, h: &mut Header, func: &str) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => h.big_endian = true,
            b'<' => h.big_endian = false,
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if !a.is_power_of_two() {
                    return fail(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
            }
            other => {
                return arg_error(
                    1,
                    func,
                    &format!("invalid format option '{}'", char::from(other)),
                )
            }
        }
        Ok(())
    }
}

/// Padding before an item of `size` at offset `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

fn is_integer_option(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", super::lib_fn(lua, pack)?)?;
    t.raw_set("unpack", super::lib_fn(lua, unpack)?)?;
    t.raw_set("size", super::lib_fn(lua, size)?)?;
    Ok(t)
}

fn number_arg(args: &[Value], i: usize) -> mlua::Result<f64> {
    match args.get(i - 1) {
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::String(s)) => {
            match s.to_str().ok().and_then(|s| s.trim().parse::<f64>().ok()) {
                Some(n) => Ok(n),
                None => arg_error(i, "pack", "number expected, got string"),
            }
        }
        Some(v) => arg_error(
            i,
            "pack",
            &format!("number expected, got {}", v.type_name()),
        ),
        // pack leaves a nil right after its arguments.
        None if i == args.len() + 1 => arg_error(i, "pack", "number expected, got nil"),
        None => arg_error(i, "pack", "number expected, got no value"),
    }
}

fn string_arg(args: &[Value], i: usize, func: &str) -> mlua::Result<Vec<u8>> {
    match args.get(i - 1) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(n.to_string().into_bytes()),
        Some(Value::Number(n)) => Ok(super::convert::format_g(*n, 14).into_bytes()),
        Some(v) => arg_error(i, func, &format!("string expected, got {}", v.type_name())),
        None => arg_error(i, func, "string expected, got no value"),
    }
}

fn put_integer(out: &mut Vec<u8>, n: f64, big_endian: bool, size: usize) {
    // C's (unsigned long)(long)n for negatives, (unsigned long)n otherwise.
    let mut value = if n < 0.0 {
        super::convert::c_i64(n) as u64
    } else {
        super::convert::c_u64(n)
    };
    let mut bytes = vec![0u8; size];
    for b in bytes.iter_mut() {
        *b = value as u8;
        value = value.checked_shr(8).unwrap_or(0);
    }
    if big_endian {
        bytes.reverse();
    }
    out.extend_from_slice(&bytes);
}

fn pack(lua: &Lua, args: Variadic<Value>) -> mlua::Result<mlua::String> {
    let fmt = string_arg(&args, 1, "pack")?;
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut arg = 2;
    let mut out = Vec::new();
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            o if is_integer_option(o) => {
                put_integer(&mut out, number_arg(&args, arg)?, h.big_endian, size);
                arg += 1;
            }
            b'x' => out.push(0),
            b'f' => {
                let v = number_arg(&args, arg)? as f32;
                arg += 1;
                let b = if h.big_endian {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'd' => {
                let v = number_arg(&args, arg)?;
                arg += 1;
                let b = if h.big_endian {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                };
                out.extend_from_slice(&b);
            }
            b'c' | b's' => {
                let s = string_arg(&args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The library names the argument after the string.
                    return arg_error(arg, "pack", "string too short");
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h, "pack")?,
        }
    }
    lua.create_string(&out)
}

fn get_integer(b: &[u8], big_endian: bool, signed: bool) -> f64 {
    let fold = |acc: u64, &x: &u8| acc.checked_shl(8).unwrap_or(0) | u64::from(x);
    let l = if big_endian {
        b.iter().fold(0u64, fold)
    } else {
        b.iter().rev().fold(0u64, fold)
    };
    if !signed {
        return l as f64;
    }
    let bits = b.len() * 8;
    if bits == 0 || bits >= 64 {
        return l as i64 as f64;
    }
    let mask = u64::MAX << (bits - 1);
    let l = if l & mask != 0 { l | mask } else { l };
    l as i64 as f64
}

fn unpack(lua: &Lua, args: Variadic<Value>) -> mlua::Result<MultiValue> {
    let fmt = string_arg(&args, 1, "unpack")?;
    let data = string_arg(&args, 2, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1,
        Some(Value::Integer(n)) => *n,
        Some(Value::Number(n)) => super::convert::c_i64(*n),
        Some(v) => {
            return arg_error(
                3,
                "unpack",
                &format!("number expected, got {}", v.type_name()),
            )
        }
    };
    let mut pos = usize::try_from(start - 1).unwrap_or(usize::MAX);
    let ld = data.len();
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut out: Vec<Value> = Vec::new();
    let short = || arg_error(2, "unpack", "data string too short");
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        pos = pos.saturating_add(to_align(pos, &h, opt, size));
        if size > ld || pos > ld - size {
            return short();
        }
        match opt {
            o if is_integer_option(o) => {
                let v = get_integer(&data[pos..pos + size], h.big_endian, o.is_ascii_lowercase());
                out.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let v = if h.big_endian {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                out.push(Value::Number(f64::from(v)));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let v = if h.big_endian {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                out.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let n = match out.pop() {
                        Some(Value::Number(n)) => n,
                        Some(Value::Integer(n)) => n as f64,
                        _ => return fail("format 'c0' needs a previous size"),
                    };
                    size = if n > 0.0 { n as usize } else { 0 };
                    if size > ld || pos > ld - size {
                        return short();
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&c| c == 0) else {
                    return fail("unfinished string in data");
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + len])?));
                size = len + 1;
            }
            _ => f.control(opt, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Integer(pos as i64 + 1));
    Ok(MultiValue::from_iter(out))
}

fn size(_: &Lua, fmt: mlua::String) -> mlua::Result<i64> {
    let fmt = fmt.as_bytes().to_vec();
    let mut f = Format { fmt: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut pos = 0usize;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos = pos.saturating_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return arg_error(1, "size", "option 's' has no fixed size");
        }
        if opt == b'c' && size == 0 {
            return arg_error(1, "size", "option 'c0' has no fixed size");
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h, "size")?;
        }
        pos = pos.saturating_add(size);
    }
    Ok(pos as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_with_sign_and_endianness() {
        let mut out = Vec::new();
        put_integer(&mut out, -2.0, true, 2);
        assert_eq!(out, [0xff, 0xfe]);
        assert_eq!(get_integer(&out, true, true), -2.0);
        assert_eq!(get_integer(&out, true, false), 65534.0);
        out.clear();
        put_integer(&mut out, 258.0, false, 3);
        assert_eq!(out, [2, 1, 0]);
        assert_eq!(get_integer(&out, false, true), 258.0);
    }

    #[test]
    fn alignment_pads_to_the_smaller_of_size_and_align() {
        let h = Header {
            big_endian: false,
            align: 4,
        };
        assert_eq!(to_align(1, &h, b'd', 8), 3);
        assert_eq!(to_align(4, &h, b'i', 4), 0);
        assert_eq!(to_align(1, &h, b'c', 1), 0);
        assert_eq!(to_align(1, &Header::default(), b'i', 4), 0);
    }
}
