//! Reply frames and their encodings.
//!
//! Commands build a [`Frame`] without caring which protocol the client
//! speaks; [`Frame::encode`] lowers RESP3-only types (map, set, double,
//! boolean, push, verbatim, null) to their RESP2 shapes the way Redis does.

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version negotiated by `HELLO` (2 unless the client asked for 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// A reply. Variants that exist only in RESP3 degrade to RESP2 on encode.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+OK`-style status reply.
    Simple(Bytes),
    /// `-ERR ...`; the text must include the error code prefix (`ERR`, `WRONGTYPE`, ...).
    Error(Bytes),
    Integer(i64),
    Bulk(Bytes),
    /// Null bulk string: `$-1` in RESP2, `_` in RESP3.
    Null,
    /// Null array: `*-1` in RESP2, `_` in RESP3.
    NullArray,
    Array(Vec<Frame>),
    /// RESP3 map; a flat array of key, value pairs in RESP2.
    Map(Vec<(Frame, Frame)>),
    /// RESP3 set; an array in RESP2.
    Set(Vec<Frame>),
    /// RESP3 double; a bulk string in RESP2.
    Double(f64),
    /// A RESP3 double whose text the command chose (GEO's coordinates, which
    /// Redis prints with more digits than a double holds); a bulk string in
    /// RESP2.
    DoubleText(Bytes),
    /// RESP3 big number (`(` and its digits, as a script's `{big_number=}`
    /// gives them); a bulk string in RESP2.
    BigNumber(Bytes),
    /// RESP3 boolean; the integer 1 or 0 in RESP2.
    Boolean(bool),
    /// RESP3 verbatim string (`=txt:`); a bulk string in RESP2.
    Verbatim(Bytes),
    /// RESP3 push; an array in RESP2.
    Push(Vec<Frame>),
    /// RESP3 attribute (`|`): key, value pairs that annotate the reply
    /// after it, which a client may ignore. Nothing in RESP2. Only
    /// meaningful in a `Sequence` before the reply it annotates.
    Attribute(Vec<(Frame, Frame)>),
    /// Several top-level frames back to back, for a command that answers
    /// more than once (SUBSCRIBE confirms each channel separately). Only
    /// meaningful as a whole reply: nested in an array it would add
    /// elements the array's length does not count.
    Sequence(Vec<Frame>),
}

impl Frame {
    pub const fn ok() -> Frame {
        Frame::Simple(Bytes::from_static(b"OK"))
    }

    pub const fn queued() -> Frame {
        Frame::Simple(Bytes::from_static(b"QUEUED"))
    }

    pub fn simple(s: &'static str) -> Frame {
        Frame::Simple(Bytes::from_static(s.as_bytes()))
    }

    /// An error reply; `msg` starts with its code, e.g. `"ERR syntax error"`.
    pub fn error(msg: impl Into<String>) -> Frame {
        Frame::Error(Bytes::from(msg.into()))
    }

    pub fn bulk(b: impl Into<Bytes>) -> Frame {
        Frame::Bulk(b.into())
    }

    pub fn bulk_from_str(s: &str) -> Frame {
        Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }

    /// A push (or pushes only): out-of-band data such as pub/sub messages
    /// and subscription confirmations, sent even when replies are off.
    pub fn is_push(&self) -> bool {
        match self {
            Frame::Push(_) => true,
            Frame::Sequence(items) => !items.is_empty() && items.iter().all(Frame::is_push),
            _ => false,
        }
    }

    /// Appends the encoding of this frame for `proto` to `out`.
    pub fn encode(&self, proto: Protocol, out: &mut BytesMut) {
        match self {
            Frame::Simple(s) => line(out, b'+', s),
            Frame::Error(e) => {
                // A newline inside an error would end the reply early and
                // desynchronise the client; Redis replaces them with spaces.
                if e.iter().any(|&c| c == b'\r' || c == b'\n') {
                    let clean: Vec<u8> = e
                        .iter()
                        .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
                        .collect();
                    line(out, b'-', &clean)
                } else {
                    line(out, b'-', e)
                }
            }
            Frame::Integer(n) => write_integer(out, *n),
            Frame::Bulk(b) => write_bulk(out, b),
            Frame::Null => match proto {
                Protocol::Resp2 => out.put_slice(b"$-1\r\n"),
                Protocol::Resp3 => out.put_slice(b"_\r\n"),
            },
            Frame::NullArray => match proto {
                Protocol::Resp2 => out.put_slice(b"*-1\r\n"),
                Protocol::Resp3 => out.put_slice(b"_\r\n"),
            },
            Frame::Array(items) => {
                header(out, b'*', items.len() as i64);
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Map(pairs) => {
                match proto {
                    Protocol::Resp2 => header(out, b'*', 2 * pairs.len() as i64),
                    Protocol::Resp3 => header(out, b'%', pairs.len() as i64),
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Frame::Set(items) => {
                let tag = if proto == Protocol::Resp3 { b'~' } else { b'*' };
                header(out, tag, items.len() as i64);
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Push(items) => {
                let tag = if proto == Protocol::Resp3 { b'>' } else { b'*' };
                header(out, tag, items.len() as i64);
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Sequence(items) => {
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Attribute(pairs) => {
                if proto == Protocol::Resp3 {
                    header(out, b'|', pairs.len() as i64);
                    for (k, v) in pairs {
                        k.encode(proto, out);
                        v.encode(proto, out);
                    }
                }
            }
            Frame::Double(d) => {
                let text = format_double(*d);
                match proto {
                    Protocol::Resp2 => write_bulk(out, text.as_bytes()),
                    Protocol::Resp3 => line(out, b',', text.as_bytes()),
                }
            }
            Frame::BigNumber(text) => match proto {
                Protocol::Resp2 => write_bulk(out, text),
                Protocol::Resp3 => line(out, b'(', text),
            },
            Frame::DoubleText(text) => match proto {
                Protocol::Resp2 => write_bulk(out, text),
                Protocol::Resp3 => line(out, b',', text),
            },
            Frame::Boolean(b) => match proto {
                Protocol::Resp2 => write_integer(out, i64::from(*b)),
                Protocol::Resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            },
            Frame::Verbatim(text) => match proto {
                Protocol::Resp2 => write_bulk(out, text),
                Protocol::Resp3 => {
                    header(out, b'=', text.len() as i64 + 4);
                    out.put_slice(b"txt:");
                    out.put_slice(text);
                    out.put_slice(b"\r\n");
                }
            },
        }
    }

    /// Convenience for tests: the encoding as a fresh buffer.
    pub fn to_bytes(&self, proto: Protocol) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(proto, &mut out);
        out.freeze()
    }
}

/// Formats a double the way Redis 7.0 replies with scores (`%.17g`): 17
/// significant digits with trailing zeros dropped, so `0.1` reads back as
/// `0.10000000000000001` and `1e17` as `1e+17`; `inf`/`-inf`. Redis 7.2
/// switched to the shortest round-trip form, but 7.0's clients and test
/// suite compare these strings.
pub fn format_double(d: f64) -> String {
    // Whole numbers below 1e17 print as integers under `%.17g`; scores are
    // most often these, so skip the general path (which also keeps -0's
    // and NaN's sign: x86's 0/0 prints `-nan`).
    if d != 0.0 && d == d.trunc() && d.abs() < 1e17 {
        return itoa::Buffer::new().format(d as i64).to_string();
    }
    format_g(d, 17)
}

/// C's `printf("%.<precision>g")`. Rust's `{:.Ne}` rounds exactly as glibc
/// does; its exponent decides between fixed and scientific layout, as
/// `%g`'s does.
pub fn format_g(n: f64, precision: usize) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    let p = precision.max(1);
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{:.*e}", p - 1, n);
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let m = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    let decimals = (p as i32 - 1 - exp).max(0) as usize;
    strip_zeros(&format!("{n:.decimals$}")).to_string()
}

/// Drops trailing zeros after a decimal point, and the point if nothing
/// is left after it.
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn line(out: &mut BytesMut, tag: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.put_u8(tag);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

/// `tag`, `n` and CRLF in one copy: replies are mostly headers (two per
/// field of an HGETALL), and three appends each checked the capacity.
fn header(out: &mut BytesMut, tag: u8, n: i64) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n).as_bytes();
    let mut buf = [0u8; 24];
    buf[0] = tag;
    buf[1..1 + digits.len()].copy_from_slice(digits);
    buf[1 + digits.len()..3 + digits.len()].copy_from_slice(b"\r\n");
    out.extend_from_slice(&buf[..3 + digits.len()]);
}

/// Writes `:n\r\n` directly, without building a [`Frame`].
pub fn write_integer(out: &mut BytesMut, n: i64) {
    header(out, b':', n);
}

/// Writes the header of a push of `n` elements directly: `>n` in RESP3,
/// an array's `*n` in RESP2 (where pushes travel as arrays).
pub fn write_push_header(out: &mut BytesMut, proto: Protocol, n: usize) {
    let tag = if proto == Protocol::Resp3 { b'>' } else { b'*' };
    header(out, tag, n as i64);
}

/// Writes `$len\r\n<bytes>\r\n` directly, without building a [`Frame`].
pub fn write_bulk(out: &mut BytesMut, b: &[u8]) {
    out.reserve(b.len() + 16);
    header(out, b'$', b.len() as i64);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: Frame, p: Protocol) -> Vec<u8> {
        f.to_bytes(p).to_vec()
    }

    #[test]
    fn push_and_sequence() {
        let sub = |n| {
            Frame::Push(vec![
                Frame::bulk_from_str("subscribe"),
                Frame::bulk_from_str("c"),
                Frame::Integer(n),
            ])
        };
        let seq = Frame::Sequence(vec![sub(1), sub(2)]);
        assert!(seq.is_push());
        assert!(!Frame::Sequence(vec![]).is_push());
        assert!(!Frame::Sequence(vec![sub(1), Frame::ok()]).is_push());
        assert_eq!(
            enc(seq.clone(), Protocol::Resp3),
            b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n>3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:2\r\n"
        );
        assert_eq!(
            enc(seq, Protocol::Resp2),
            b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:2\r\n"
        );
    }

    #[test]
    fn resp2_lowers_resp3_types() {
        let m = Frame::Map(vec![(Frame::bulk_from_str("a"), Frame::Integer(1))]);
        assert_eq!(enc(m.clone(), Protocol::Resp2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(m, Protocol::Resp3), b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(Frame::Null, Protocol::Resp2), b"$-1\r\n");
        assert_eq!(enc(Frame::NullArray, Protocol::Resp2), b"*-1\r\n");
        assert_eq!(enc(Frame::Null, Protocol::Resp3), b"_\r\n");
        assert_eq!(enc(Frame::Double(1.5), Protocol::Resp2), b"$3\r\n1.5\r\n");
        assert_eq!(enc(Frame::Double(1.5), Protocol::Resp3), b",1.5\r\n");
        assert_eq!(enc(Frame::Boolean(true), Protocol::Resp2), b":1\r\n");
        assert_eq!(enc(Frame::Boolean(false), Protocol::Resp3), b"#f\r\n");
        assert_eq!(
            enc(Frame::Verbatim(Bytes::from_static(b"hi")), Protocol::Resp3),
            b"=6\r\ntxt:hi\r\n"
        );
    }

    #[test]
    fn doubles_format_like_redis() {
        // Each expected text is C's `printf("%.17g")` of the same double.
        for (d, text) in [
            (3.0, "3"),
            (-0.5, "-0.5"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (-0.0, "-0"),
            (0.1, "0.10000000000000001"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1e20, "1e+20"),
            (-1e-7, "-9.9999999999999995e-08"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (1234567.0, "1234567"),
            (1.5e300, "1.5000000000000001e+300"),
            (2.5, "2.5"),
            (2.71, "2.71"),
            (1.0 / 3.0, "0.33333333333333331"),
            (5e-324, "4.9406564584124654e-324"),
        ] {
            assert_eq!(format_double(d), text, "{d:e}");
        }
    }
}
