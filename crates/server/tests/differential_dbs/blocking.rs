//! Whether a blocking command of `differential_dbs.rs` would wait, asked
//! of Redis, and where its timeout is, to shorten it when it is sent
//! anyway.

use crate::common::RespConn;
use crate::compare::{send, w};
use durakv_protocol::Frame;

pub fn is_blocking(name: &str) -> bool {
    matches!(
        name,
        "BLPOP"
            | "BRPOP"
            | "BLMOVE"
            | "BRPOPLPUSH"
            | "BLMPOP"
            | "BZPOPMIN"
            | "BZPOPMAX"
            | "BZMPOP"
            | "XREAD"
            | "XREADGROUP"
    )
}

/// Where a blocking command's timeout is, and the keys it waits on with
/// the stream IDs (if any) it reads after.
pub fn blocking_parts(cmd: &[String]) -> (usize, Vec<(String, Option<String>)>) {
    let n = cmd.len();
    match cmd[0].as_str() {
        "BLMPOP" | "BZMPOP" => {
            let k: usize = cmd[2].parse().unwrap();
            (1, cmd[3..3 + k].iter().map(|k| (k.clone(), None)).collect())
        }
        "BLMOVE" | "BRPOPLPUSH" => (n - 1, vec![(cmd[1].clone(), None)]),
        "XREAD" | "XREADGROUP" => {
            let t = cmd.iter().position(|w| w == "BLOCK").unwrap() + 1;
            (t, vec![(cmd[n - 2].clone(), Some(cmd[n - 1].clone()))])
        }
        _ => (
            n - 1,
            cmd[1..n - 1].iter().map(|k| (k.clone(), None)).collect(),
        ),
    }
}

/// The last-delivered ID of group `g` of stream `k`, from XINFO GROUPS.
fn last_delivered(p: &mut RespConn, k: &str) -> Option<String> {
    let Frame::Array(groups) = send(p, &w(&["XINFO", "GROUPS", k])) else {
        return None;
    };
    groups.into_iter().find_map(|g| {
        let Frame::Array(f) = g else { return None };
        let field = |name: &str| {
            f.chunks(2)
                .find(|c| c[0] == Frame::Bulk(name.to_string().into()))
                .map(|c| c[1].clone())
        };
        (field("name")? == Frame::Bulk("g".into())).then_some(())?;
        match field("last-delivered-id")? {
            Frame::Bulk(id) => Some(String::from_utf8_lossy(&id).into_owned()),
            _ => None,
        }
    })
}

/// Whether blocking command `cmd`, sent outside MULTI in database `db`,
/// might wait, asked of Redis through `p`.
pub fn may_block(p: &mut RespConn, db: &str, cmd: &[String]) -> bool {
    let (t, keys) = blocking_parts(cmd);
    if !matches!(cmd[t].parse::<f64>(), Ok(x) if x >= 0.0) {
        return false;
    }
    assert_eq!(send(p, &w(&["SELECT", db])), Frame::Simple("OK".into()));
    let group = cmd[0] == "XREADGROUP";
    keys.iter().all(|(k, id)| {
        let t = send(p, &w(&["TYPE", k]));
        let stream = t == Frame::Simple("stream".into());
        match id {
            _ if t == Frame::Simple("none".into()) => !group,
            None => false,
            Some(_) if !stream => false,
            Some(id) if group && id != ">" => false,
            Some(id) => {
                let after = if group {
                    match last_delivered(p, k) {
                        Some(last) => last,
                        None => return false,
                    }
                } else if id == "$" {
                    return true;
                } else {
                    id.clone()
                };
                let next = send(
                    p,
                    &w(&["XRANGE", k, &format!("({after}"), "+", "COUNT", "1"]),
                );
                next == Frame::Array(vec![])
            }
        }
    })
}
