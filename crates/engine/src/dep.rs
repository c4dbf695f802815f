//! What a reply waits for, in one `u64`: an LSN, and where its durability
//! is read. A plain LSN waits for the WAL's durable LSN (every stream has
//! everything up to it). One tagged with a stream waits only for that
//! stream's acknowledged LSN (`Wal::acked_lsn`): a single-stream write, or
//! a read of a key only ever written through its own stream, needs nothing
//! from the other streams.
//!
//! The tag sits in bits 55..62 (stream + 1), far above any LSN. Bit 62 is
//! the server's, and [`UNLOGGED_FAILED_LSN`] (all ones) is never tagged.

use crate::db::UNLOGGED_FAILED_LSN;

const STREAM_SHIFT: u32 = 55;
const STREAM_FIELD: u64 = 0x7F;
/// The LSN bits of a dependency.
pub const LSN_MASK: u64 = (1 << STREAM_SHIFT) - 1;

/// `lsn`, waiting only for `stream`'s acknowledged LSN.
pub fn on_stream(stream: usize, lsn: u64) -> u64 {
    if lsn == 0 || lsn == UNLOGGED_FAILED_LSN {
        return lsn;
    }
    debug_assert!(lsn <= LSN_MASK && stream < STREAM_FIELD as usize);
    lsn | ((stream as u64 + 1) << STREAM_SHIFT)
}

/// The stream a dependency waits for (None: every stream).
pub fn stream(dep: u64) -> Option<usize> {
    if dep == UNLOGGED_FAILED_LSN {
        return None;
    }
    match (dep >> STREAM_SHIFT) & STREAM_FIELD {
        0 => None,
        t => Some(t as usize - 1),
    }
}

/// A dependency's LSN.
pub fn lsn(dep: u64) -> u64 {
    if dep == UNLOGGED_FAILED_LSN {
        dep
    } else {
        dep & LSN_MASK
    }
}

/// A dependency covering both: the larger LSN, on their stream if they
/// share one, else on every stream.
pub fn combine(a: u64, b: u64) -> u64 {
    if a == 0 || b == UNLOGGED_FAILED_LSN {
        return b;
    }
    if b == 0 || a == UNLOGGED_FAILED_LSN {
        return a;
    }
    let l = lsn(a).max(lsn(b));
    match (stream(a), stream(b)) {
        (Some(x), Some(y)) if x == y => on_stream(x, l),
        _ => l,
    }
}

/// Whether `dep` is met, given the durable LSN and each stream's
/// acknowledged LSN.
pub fn is_met(dep: u64, durable: u64, acked: impl Fn(usize) -> u64) -> bool {
    match stream(dep) {
        Some(s) => lsn(dep) <= acked(s).max(durable),
        None => dep <= durable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_combine_conservatively() {
        let a = on_stream(3, 100);
        assert_eq!((stream(a), lsn(a)), (Some(3), 100));
        assert_eq!((stream(100), lsn(100)), (None, 100));
        assert_eq!(on_stream(63, 7) >> 62, 0, "bit 62 stays free");
        assert_eq!(combine(a, on_stream(3, 120)), on_stream(3, 120));
        assert_eq!(combine(a, on_stream(2, 90)), 100);
        assert_eq!(combine(a, 150), 150);
        assert_eq!(combine(0, a), a);
        assert_eq!(combine(a, UNLOGGED_FAILED_LSN), UNLOGGED_FAILED_LSN);
        assert_eq!(on_stream(1, UNLOGGED_FAILED_LSN), UNLOGGED_FAILED_LSN);
        assert!(is_met(a, 50, |s| if s == 3 { 100 } else { 0 }));
        assert!(!is_met(a, 50, |s| if s == 3 { 99 } else { 1000 }));
        assert!(is_met(a, 100, |_| 0));
        assert!(!is_met(UNLOGGED_FAILED_LSN, u64::MAX - 1, |_| u64::MAX));
    }
}
