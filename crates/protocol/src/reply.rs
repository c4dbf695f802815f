//! Client-side reply parser: turns a server's RESP2/RESP3 bytes back into
//! [`Frame`]s. The benchmark's load generator and raw-socket tests use it.

use crate::frame::Frame;
use bytes::{Buf, Bytes, BytesMut};

/// Nesting deeper than this is refused rather than risking the stack.
pub const MAX_REPLY_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("malformed reply: {0}")]
    Malformed(&'static str),
}

/// Takes one complete reply off the front of `buf`, or returns `Ok(None)`
/// if more bytes are needed (nothing is consumed in that case).
pub fn parse_reply(buf: &mut BytesMut) -> Result<Option<Frame>, ReplyError> {
    let mut pos = 0;
    match parse_at(buf, &mut pos, 0)? {
        Some(frame) => {
            buf.advance(pos);
            Ok(Some(frame))
        }
        None => Ok(None),
    }
}

fn read_line<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = &buf[*pos..];
    let i = rest.windows(2).position(|w| w == b"\r\n")?;
    *pos += i + 2;
    Some(&rest[..i])
}

fn int(line: &[u8]) -> Result<i64, ReplyError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(ReplyError::Malformed("bad integer"))
}

fn parse_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Option<Frame>, ReplyError> {
    if depth > MAX_REPLY_DEPTH {
        return Err(ReplyError::Malformed("nesting too deep"));
    }
    if *pos >= buf.len() {
        return Ok(None);
    }
    let tag = buf[*pos];
    *pos += 1;
    let Some(line) = read_line(buf, pos) else {
        return Ok(None);
    };
    let copy = |b: &[u8]| Bytes::copy_from_slice(b);
    Ok(Some(match tag {
        b'+' => Frame::Simple(copy(line)),
        b'-' => Frame::Error(copy(line)),
        b':' => Frame::Integer(int(line)?),
        b'_' => Frame::Null,
        b'#' => Frame::Boolean(line == b"t"),
        b'(' => Frame::BigNumber(copy(line)),
        b',' => {
            let s = std::str::from_utf8(line).map_err(|_| ReplyError::Malformed("double"))?;
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                _ => s.parse().map_err(|_| ReplyError::Malformed("double"))?,
            };
            Frame::Double(d)
        }
        b'$' | b'=' | b'!' => {
            let n = int(line)?;
            if n < 0 {
                return Ok(Some(Frame::Null));
            }
            let n = n as usize;
            if buf.len() < *pos + n + 2 {
                return Ok(None);
            }
            let body = copy(&buf[*pos..*pos + n]);
            *pos += n + 2;
            match tag {
                b'=' => Frame::Verbatim(body.slice(4.min(body.len())..)),
                b'!' => Frame::Error(body),
                _ => Frame::Bulk(body),
            }
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = int(line)?;
            if n < 0 {
                return Ok(Some(Frame::NullArray));
            }
            let count = if tag == b'%' { n * 2 } else { n } as usize;
            let mut items = Vec::with_capacity(count.min(4096));
            for _ in 0..count {
                match parse_at(buf, pos, depth + 1)? {
                    Some(f) => items.push(f),
                    None => return Ok(None),
                }
            }
            match tag {
                b'~' => Frame::Set(items),
                b'>' => Frame::Push(items),
                b'%' => {
                    let mut pairs = Vec::with_capacity(items.len() / 2);
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Frame::Map(pairs)
                }
                _ => Frame::Array(items),
            }
        }
        _ => return Err(ReplyError::Malformed("unknown type byte")),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Protocol;

    #[test]
    fn round_trips_resp3() {
        let f = Frame::Array(vec![
            Frame::Map(vec![(Frame::bulk_from_str("k"), Frame::Double(2.5))]),
            Frame::Null,
            Frame::Integer(-3),
            Frame::Simple(Bytes::from_static(b"OK")),
            Frame::Error(Bytes::from_static(b"ERR x")),
            Frame::BigNumber(Bytes::from_static(b"-12345678901234567890")),
        ]);
        let bytes = f.to_bytes(Protocol::Resp3);
        for cut in 0..bytes.len() {
            let mut part = BytesMut::from(&bytes[..cut]);
            assert_eq!(parse_reply(&mut part).unwrap(), None);
        }
        let mut all = BytesMut::from(&bytes[..]);
        assert_eq!(parse_reply(&mut all).unwrap(), Some(f));
        assert!(all.is_empty());
    }
}
