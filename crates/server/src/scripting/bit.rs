//! `bit`: the LuaBitOp API scripts use (32-bit operations on Lua numbers).

use mlua::{Lua, Table, Variadic};

/// LuaBitOp's normalisation: add 2^52 + 2^51 and keep the low 32 bits of
/// the double, which rounds to the nearest integer and wraps modulo 2^32.
fn tobit(x: f64) -> i32 {
    let y = x + 6_755_399_441_055_744.0;
    y.to_bits() as u32 as i32
}

fn num(v: i32) -> f64 {
    v as f64
}

pub fn module(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("tobit", super::lib_fn(lua, |_, x: f64| Ok(num(tobit(x))))?)?;
    t.raw_set("bnot", super::lib_fn(lua, |_, x: f64| Ok(num(!tobit(x))))?)?;
    t.raw_set(
        "bswap",
        super::lib_fn(lua, |_, x: f64| Ok(num(tobit(x).swap_bytes())))?,
    )?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        super::lib_fn(lua, move |_, (first, rest): (f64, Variadic<f64>)| {
            Ok(num(rest
                .iter()
                .fold(tobit(first), |acc, &x| f(acc, tobit(x)))))
        })
    };
    t.raw_set("band", fold(lua, |a, b| a & b)?)?;
    t.raw_set("bor", fold(lua, |a, b| a | b)?)?;
    t.raw_set("bxor", fold(lua, |a, b| a ^ b)?)?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        super::lib_fn(lua, move |_, (x, n): (f64, f64)| {
            Ok(num(f(tobit(x), tobit(n) as u32 & 31)))
        })
    };
    t.raw_set("lshift", shift(lua, |x, n| ((x as u32) << n) as i32)?)?;
    t.raw_set("rshift", shift(lua, |x, n| ((x as u32) >> n) as i32)?)?;
    t.raw_set("arshift", shift(lua, |x, n| x >> n)?)?;
    t.raw_set("rol", shift(lua, |x, n| (x as u32).rotate_left(n) as i32)?)?;
    t.raw_set("ror", shift(lua, |x, n| (x as u32).rotate_right(n) as i32)?)?;
    t.raw_set(
        "tohex",
        super::lib_fn(lua, |_, (x, n): (f64, Option<f64>)| {
            let mut n = n.map(tobit).unwrap_or(8);
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
