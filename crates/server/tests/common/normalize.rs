//! Reply normalization shared by the differential tests: what of a
//! reply must match between durakv and a real Redis when Redis leaves
//! an order or a pick unspecified.

use durakv_protocol::Frame;

/// What must match of a reply to `cmd`.
pub fn normalize(cmd: &[String], f: Frame) -> Frame {
    let name = cmd[0].to_ascii_uppercase();
    match (name.as_str(), f) {
        ("SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" | "HKEYS" | "HVALS", Frame::Array(mut v)) => {
            v.sort_by_key(|f| format!("{f:?}"));
            Frame::Array(v)
        }
        (_, Frame::Set(mut v)) => {
            v.sort_by_key(|f| format!("{f:?}"));
            Frame::Set(v)
        }
        (_, Frame::Map(mut v)) => {
            v.sort_by_key(|p| format!("{p:?}"));
            Frame::Map(v)
        }
        ("HGETALL", Frame::Array(v)) => {
            let mut pairs: Vec<Vec<Frame>> = v.chunks(2).map(|c| c.to_vec()).collect();
            pairs.sort_by_key(|p| format!("{p:?}"));
            Frame::Array(pairs.concat())
        }
        // SORT BY a pattern without `*` does not sort: a set comes back in
        // its own order, which is each server's.
        ("SORT" | "SORT_RO", Frame::Array(mut v))
            if cmd
                .windows(2)
                .any(|w| w[0].eq_ignore_ascii_case("BY") && !w[1].contains('*')) =>
        {
            // With LIMIT, the window is of that order: only its size is
            // the same.
            if cmd.iter().any(|w| w.eq_ignore_ascii_case("LIMIT")) {
                return Frame::Integer(v.len() as i64);
            }
            v.sort_by_key(|f| format!("{f:?}"));
            Frame::Array(v)
        }
        // A whole scan in one call: done or not, and what it found.
        ("SCAN" | "HSCAN" | "SSCAN" | "ZSCAN", Frame::Array(v)) if v.len() == 2 => {
            let done = v[0] == Frame::Bulk("0".into());
            let found = match &v[1] {
                Frame::Array(items) if name == "HSCAN" || name == "ZSCAN" => {
                    let mut pairs: Vec<Vec<Frame>> = items.chunks(2).map(|c| c.to_vec()).collect();
                    pairs.sort_by_key(|p| format!("{p:?}"));
                    Frame::Array(pairs.concat())
                }
                Frame::Array(items) => {
                    let mut items = items.clone();
                    items.sort_by_key(|f| format!("{f:?}"));
                    Frame::Array(items)
                }
                f => f.clone(),
            };
            Frame::Array(vec![Frame::Boolean(done), found])
        }
        ("KEYS", Frame::Array(mut v)) => {
            v.sort_by_key(|f| format!("{f:?}"));
            Frame::Array(v)
        }
        // One random member or field (the arity check dropped the count).
        ("SRANDMEMBER" | "HRANDFIELD" | "ZRANDMEMBER", Frame::Bulk(_)) => {
            Frame::Bulk("some".into())
        }
        // A TTL counts down between the two servers' replies.
        ("TTL" | "PTTL" | "EXPIRETIME", Frame::Integer(n)) if n > 0 => Frame::Integer(1),
        (_, f) => f,
    }
}
