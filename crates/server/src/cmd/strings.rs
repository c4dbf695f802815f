//! String commands.

use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, FIRST_KEY};
use crate::errors;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::mutation::{ExpireMode, KeyOp, Mutation};
use durakv_engine::txn::Txn;
use durakv_engine::value::Value;
use durakv_protocol::Frame;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("get", 2, READONLY | FAST, FIRST_KEY, Handler::Data(get), "string", "Returns the string value of a key."),
        spec("set", -3, WRITE | DENYOOM, FIRST_KEY, Handler::Data(set), "string", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    ]
}

/// The string at `key`: Ok(None) if missing, Err(WRONGTYPE) if not a string.
pub fn read_string(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Bytes>, Frame> {
    match txn.get(db, key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Str(s) => Ok(Some(s.clone())),
            _ => Err(errors::err(errors::WRONGTYPE)),
        },
    }
}

fn get(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Frame {
    match read_string(txn, ctx.db(), &args[1]) {
        Ok(Some(v)) => Frame::Bulk(v),
        Ok(None) => Frame::Null,
        Err(e) => e,
    }
}

/// Converts a relative or absolute expiry argument to absolute unix ms.
/// `unit_ms` is 1000 for seconds, 1 for milliseconds; `absolute` for EXAT/PXAT.
pub fn expire_arg(arg: &[u8], unit_ms: i64, absolute: bool, now_ms: u64, cmd: &str) -> Result<u64, Frame> {
    let n = arg_i64(arg)?;
    if n <= 0 {
        return Err(errors::invalid_expire(cmd));
    }
    let ms = n.checked_mul(unit_ms).ok_or_else(|| errors::invalid_expire(cmd))?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now_ms as i64).ok_or_else(|| errors::invalid_expire(cmd))?
    };
    Ok(at as u64)
}

fn set(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Frame {
    let db = ctx.db();
    let key = &args[1];
    let mut expire = ExpireMode::Clear;
    let (mut nx, mut xx, mut get_old, mut keepttl, mut has_expire) = (false, false, false, false, false);
    let mut i = 3;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        let unit = if is(a, "ex") {
            Some((1000, false))
        } else if is(a, "px") {
            Some((1, false))
        } else if is(a, "exat") {
            Some((1000, true))
        } else if is(a, "pxat") {
            Some((1, true))
        } else {
            None
        };
        if let Some((unit_ms, absolute)) = unit {
            let Some(v) = next else {
                return errors::err(errors::SYNTAX);
            };
            if has_expire || keepttl {
                return errors::err(errors::SYNTAX);
            }
            match expire_arg(v, unit_ms, absolute, txn.now_ms, "set") {
                Ok(at) => expire = ExpireMode::At(at),
                Err(e) => return e,
            }
            has_expire = true;
            i += 2;
            continue;
        }
        if is(a, "nx") && !xx {
            nx = true;
        } else if is(a, "xx") && !nx {
            xx = true;
        } else if is(a, "get") {
            get_old = true;
        } else if is(a, "keepttl") && !has_expire {
            keepttl = true;
            expire = ExpireMode::Keep;
        } else {
            return errors::err(errors::SYNTAX);
        }
        i += 1;
    }
    let old = if get_old {
        match read_string(txn, db, key) {
            Ok(v) => v,
            Err(e) => return e,
        }
    } else {
        None
    };
    let exists = txn.get(db, key).is_some();
    if (nx && exists) || (xx && !exists) {
        return if get_old { old.map(Frame::Bulk).unwrap_or(Frame::Null) } else { Frame::Null };
    }
    let m = Mutation::key(db as u32, key.clone(), KeyOp::SetString { value: args[2].clone(), expire });
    if let Err(e) = txn.apply(m) {
        tracing::error!("set: {e}");
        return Frame::error(format!("ERR {e}"));
    }
    if get_old {
        old.map(Frame::Bulk).unwrap_or(Frame::Null)
    } else {
        Frame::ok()
    }
}
