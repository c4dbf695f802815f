//! The cursor walk HSCAN, SSCAN and ZSCAN share (SCAN walks the keyspace
//! itself, in keys.rs).

use super::syntax;
use crate::glob::glob_match;
use crate::util::{arg_i64, is};
use bytes::Bytes;
use durakv_engine::value::{EncodingLimits, Value};
use durakv_protocol::Frame;

/// Options of HSCAN/SSCAN/ZSCAN.
pub(crate) struct ScanOpts {
    pattern: Option<Bytes>,
    pub count: usize,
    pub novalues: bool,
}

impl ScanOpts {
    pub fn matches(&self, name: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| glob_match(p, name, false))
    }
}

/// The cursor of SSCAN, HSCAN and ZSCAN, read as SCAN's is.
pub(crate) fn scan_cursor(arg: &[u8]) -> Result<u64, Frame> {
    super::keys::parse_cursor(arg).ok_or_else(|| Frame::error("ERR invalid cursor"))
}

/// Parses the options after the cursor; `hash` allows NOVALUES.
pub(crate) fn scan_options(opts: &[Bytes], hash: bool) -> Result<ScanOpts, Frame> {
    const DEFAULT_COUNT: usize = 10;
    let mut o = ScanOpts {
        pattern: None,
        count: DEFAULT_COUNT,
        novalues: false,
    };
    let mut i = 0;
    while i < opts.len() {
        let has_value = i + 1 < opts.len();
        if is(&opts[i], "count") && has_value {
            let n = arg_i64(&opts[i + 1])?;
            if n < 1 {
                return Err(syntax());
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else if is(&opts[i], "match") && has_value {
            // `*` filters nothing; skip the matcher altogether.
            o.pattern = (opts[i + 1][..] != b"*"[..]).then(|| opts[i + 1].clone());
            i += 2;
        } else if is(&opts[i], "novalues") {
            if !hash {
                return Err(Frame::error(
                    "ERR NOVALUES option can only be used in HSCAN",
                ));
            }
            o.novalues = true;
            i += 1;
        } else {
            return Err(syntax());
        }
    }
    Ok(o)
}

/// True for a value Redis would hold in a compact encoding (listpack,
/// intset). Redis answers a scan of those in one call, and so do we.
pub(crate) fn scans_whole(v: &Value, limits: &EncodingLimits) -> bool {
    matches!(v, Value::Hash(_) | Value::Set(_) | Value::ZSet(_))
        && matches!(v.encoding_name(limits), "listpack" | "intset")
}

/// Visits positions `0..len` of an index-ordered collection for one scan
/// call and returns the next cursor (0: done).
///
/// A cursor is "positions below it remain"; 0 starts at the end. Walking
/// downwards keeps SCAN's guarantee on an IndexMap/IndexSet, as in
/// `Db::scan`: removal moves the last element, already visited, into the
/// hole, so nothing present for the whole scan is missed.
pub(crate) fn scan_walk(
    len: usize,
    cursor: u64,
    count: usize,
    whole: bool,
    mut visit: impl FnMut(usize),
) -> u64 {
    if whole {
        (0..len).for_each(visit);
        return 0;
    }
    let mut pos = match cursor {
        0 => len,
        c => usize::try_from(c).unwrap_or(usize::MAX).min(len),
    };
    let mut seen = 0;
    while pos > 0 && seen < count {
        pos -= 1;
        visit(pos);
        seen += 1;
    }
    pos as u64
}

pub(crate) fn scan_reply(cursor: u64, items: Vec<Frame>) -> Frame {
    let mut b = itoa::Buffer::new();
    Frame::Array(vec![
        Frame::Bulk(Bytes::copy_from_slice(b.format(cursor).as_bytes())),
        Frame::Array(items),
    ])
}
