//! The argument shape LMPOP, ZMPOP, BLMPOP and BZMPOP share:
//! `numkeys key [key ...] <end> [COUNT count]`, where `<end>` is LEFT|RIGHT
//! for lists and MIN|MAX for sorted sets.

use super::syntax;
use crate::errors;
use crate::util::is;
use bytes::Bytes;
use durakv_engine::value::parse_i64;
use durakv_protocol::Frame;

/// The two ends a pop may take from; the first is `MPop::first_end`.
pub(crate) type Ends = [&'static str; 2];
pub(crate) const LIST_ENDS: Ends = ["left", "right"];
pub(crate) const ZSET_ENDS: Ends = ["min", "max"];

pub(crate) struct MPop<'a> {
    pub keys: &'a [Bytes],
    /// LEFT or MIN (the first of the ends) rather than RIGHT or MAX.
    pub first_end: bool,
    pub count: u64,
}

/// Parses the arguments from `numkeys` (at `numkeys_at`) on, with Redis's
/// errors in Redis's order.
pub(crate) fn parse(args: &[Bytes], numkeys_at: usize, ends: Ends) -> Result<MPop<'_>, Frame> {
    let n = numkeys(args, numkeys_at)
        .ok_or_else(|| errors::err("ERR numkeys should be greater than 0"))?;
    let end_at = numkeys_at + 1 + n;
    let end = args.get(end_at).ok_or_else(syntax)?;
    let first_end = if is(end, ends[0]) {
        true
    } else if is(end, ends[1]) {
        false
    } else {
        return Err(syntax());
    };
    let mut count = None;
    let mut j = end_at + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "count") && j + 1 < args.len() {
            match parse_i64(&args[j + 1]) {
                Some(c) if c > 0 => count = Some(c as u64),
                _ => return Err(errors::err("ERR count should be greater than 0")),
            }
            j += 2;
        } else {
            return Err(syntax());
        }
    }
    Ok(MPop {
        keys: &args[numkeys_at + 1..end_at],
        first_end,
        count: count.unwrap_or(1),
    })
}

/// A positive `numkeys` that leaves room for the keys it counts.
fn numkeys(args: &[Bytes], numkeys_at: usize) -> Option<usize> {
    let n = parse_i64(args.get(numkeys_at)?)?;
    if n <= 0 {
        return None;
    }
    // Larger than the arguments: the end-of-keys word is missing, which
    // `parse` answers as a syntax error (Redis does the same).
    Some(usize::try_from(n).unwrap_or(usize::MAX).min(args.len()))
}

/// Key positions for the command table, before the arguments are checked:
/// whatever keys `numkeys` names that are present.
fn keys_after(args: &[Bytes], numkeys_at: usize) -> Vec<usize> {
    let Some(n) = numkeys(args, numkeys_at) else {
        return Vec::new();
    };
    let first = numkeys_at + 1;
    // More keys than arguments: a syntax error, naming no keys (as Redis's
    // key finder says, so ACL checks and GETKEYS agree).
    if first + n > args.len() {
        return Vec::new();
    }
    (first..first + n).collect()
}

/// LMPOP and ZMPOP: `numkeys` is argument 1.
pub(crate) fn keys_after_numkeys_at_1(args: &[Bytes]) -> Vec<usize> {
    keys_after(args, 1)
}

/// BLMPOP and BZMPOP: the timeout comes first, `numkeys` is argument 2.
pub(crate) fn keys_after_numkeys_at_2(args: &[Bytes]) -> Vec<usize> {
    keys_after(args, 2)
}
