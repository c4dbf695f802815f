//! `bit`: the LuaBitOp API scripts use (32-bit operations on Lua numbers).

use mlua::{Lua, Table, Value, Variadic};

/// LuaBitOp's normalisation: add 2^52 + 2^51 and keep the low 32 bits of
/// the double, which rounds to the nearest integer and wraps modulo 2^32.
fn tobit(x: f64) -> i32 {
    let y = x + 6_755_399_441_055_744.0;
    y.to_bits() as u32 as i32
}

fn num(v: i32) -> f64 {
    v as f64
}

/// Argument `i` (from 0) of `name` as LuaBitOp's `luaL_checknumber` reads
/// it: a number, or a string Lua converts to one; otherwise Lua's message.
fn arg(lua: &Lua, args: &[Value], i: usize, name: &str) -> mlua::Result<f64> {
    let got = match args.get(i) {
        None => "no value",
        Some(v) => match lua.coerce_number(v.clone())? {
            Some(n) => return Ok(n),
            None => super::convert::lua_type_name(v),
        },
    };
    Err(mlua::Error::RuntimeError(format!(
        "bad argument #{} to '{name}' (number expected, got {got})",
        i + 1
    )))
}

fn one(lua: &Lua, name: &'static str, f: fn(i32) -> i32) -> mlua::Result<mlua::Function> {
    super::lib_fn(lua, move |lua, a: Variadic<Value>| {
        Ok(num(f(tobit(arg(lua, &a, 0, name)?))))
    })
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("tobit", one(lua, "tobit", |x| x)?)?;
    t.raw_set("bnot", one(lua, "bnot", |x| !x)?)?;
    t.raw_set("bswap", one(lua, "bswap", i32::swap_bytes)?)?;
    let fold = |lua: &Lua, name: &'static str, f: fn(i32, i32) -> i32| {
        super::lib_fn(lua, move |lua, a: Variadic<Value>| {
            let mut acc = tobit(arg(lua, &a, 0, name)?);
            for i in 1..a.len() {
                acc = f(acc, tobit(arg(lua, &a, i, name)?));
            }
            Ok(num(acc))
        })
    };
    t.raw_set("band", fold(lua, "band", |a, b| a & b)?)?;
    t.raw_set("bor", fold(lua, "bor", |a, b| a | b)?)?;
    t.raw_set("bxor", fold(lua, "bxor", |a, b| a ^ b)?)?;
    let shift = |lua: &Lua, name: &'static str, f: fn(i32, u32) -> i32| {
        super::lib_fn(lua, move |lua, a: Variadic<Value>| {
            let x = tobit(arg(lua, &a, 0, name)?);
            let n = tobit(arg(lua, &a, 1, name)?);
            Ok(num(f(x, n as u32 & 31)))
        })
    };
    t.raw_set(
        "lshift",
        shift(lua, "lshift", |x, n| ((x as u32) << n) as i32)?,
    )?;
    t.raw_set(
        "rshift",
        shift(lua, "rshift", |x, n| ((x as u32) >> n) as i32)?,
    )?;
    t.raw_set("arshift", shift(lua, "arshift", |x, n| x >> n)?)?;
    t.raw_set(
        "rol",
        shift(lua, "rol", |x, n| (x as u32).rotate_left(n) as i32)?,
    )?;
    t.raw_set(
        "ror",
        shift(lua, "ror", |x, n| (x as u32).rotate_right(n) as i32)?,
    )?;
    t.raw_set(
        "tohex",
        super::lib_fn(lua, |lua, a: Variadic<Value>| {
            let x = arg(lua, &a, 0, "tohex")?;
            // The width is optional: absent is 8 (nil is refused, as in
            // LuaBitOp).
            let mut n = match a.get(1) {
                None => 8,
                Some(_) => tobit(arg(lua, &a, 1, "tohex")?),
            };
            let upper = n < 0;
            if upper {
                n = n.saturating_neg();
            }
            let n = n.clamp(1, 8) as usize;
            let v = tobit(x) as u32 as u64;
            let s = if upper {
                format!("{v:08X}")
            } else {
                format!("{v:08x}")
            };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn tobit_wraps_and_rounds_like_luabitop() {
        assert_eq!(tobit(1.0), 1);
        assert_eq!(tobit(4294967295.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tobit(3.5), 4);
    }
}
