//! FUNCTION DUMP / RESTORE's payload, in Redis 7's layout so that payloads
//! move between Redis and durakv: per library the RDB opcode
//! `FUNCTION2` (245) and the library's code as an RDB string, then the RDB
//! version (u16, little-endian) and a CRC-64/REDIS (Jones polynomial) of
//! everything before it (u64, little-endian).
//!
//! The code is written as a plain RDB string; reading also takes the
//! integer and LZF-compressed string encodings, which Redis uses when it
//! dumps (`rdbcompression yes`).

use crate::rdb_value::primitives::{open, put_plain_string, seal, Reader};
use bytes::Bytes;

/// The RDB version written (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// Newer RDB versions (Redis 7.2, 7.4) keep this payload's layout, so
/// their dumps restore here too.
const MAX_RDB_VERSION: u16 = 12;
const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_FUNCTION_PRE_GA: u8 = 246;

/// Why a payload was refused; the text is Redis's reply.
#[derive(Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// Too short, from a newer RDB version, or the checksum differs.
    VersionOrChecksum,
    Malformed(&'static str),
}

impl PayloadError {
    pub fn message(&self) -> String {
        match self {
            PayloadError::VersionOrChecksum => {
                "ERR DUMP payload version or checksum are wrong".to_string()
            }
            PayloadError::Malformed(m) => format!("ERR {m}"),
        }
    }
}

/// The payload for libraries with these codes.
pub fn dump<'a>(codes: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_plain_string(&mut out, code);
    }
    seal(out, RDB_VERSION)
}

const TRUNCATED: PayloadError =
    PayloadError::Malformed("failed loading the given functions payload");

/// The library codes a payload holds, in order.
pub fn parse(payload: &[u8]) -> Result<Vec<Bytes>, PayloadError> {
    let body = open(payload, MAX_RDB_VERSION).ok_or(PayloadError::VersionOrChecksum)?;
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    while !r.at_end() {
        match r.byte().ok_or(TRUNCATED)? {
            OPCODE_FUNCTION2 => out.push(r.string().ok_or(TRUNCATED)?),
            OPCODE_FUNCTION_PRE_GA => {
                return Err(PayloadError::Malformed(
                    "Pre-GA function format not supported",
                ))
            }
            _ => return Err(PayloadError::Malformed("given type is not a function")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb_value::primitives::{put_length, CRC64};

    #[test]
    fn round_trip_and_damage() {
        let long = "x".repeat(20_000);
        let codes: Vec<&[u8]> = vec![b"#!lua name=a\nreturn", long.as_bytes(), b""];
        let p = dump(codes.iter().copied());
        let back = parse(&p).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(&back[1][..], long.as_bytes());
        for i in 0..p.len() {
            let mut d = p.clone();
            d[i] ^= 0x20;
            assert!(parse(&d).is_err(), "flip at {i} accepted");
        }
        assert_eq!(parse(b"bad_payload"), Err(PayloadError::VersionOrChecksum));
        assert_eq!(parse(b""), Err(PayloadError::VersionOrChecksum));
    }

    #[test]
    fn reads_lzf_and_integer_strings_as_redis_writes_them() {
        let code =
            "#!lua name=mylib\nredis.register_function('f', function() return 1 end)".repeat(3);
        let packed = lzf::compress(code.as_bytes()).unwrap();
        let mut body = vec![OPCODE_FUNCTION2, 0xc3];
        put_length(&mut body, packed.len() as u64);
        put_length(&mut body, code.len() as u64);
        body.extend_from_slice(&packed);
        body.extend_from_slice(&[OPCODE_FUNCTION2, 0xc1, 0x39, 0x30]);
        body.extend_from_slice(&10u16.to_le_bytes());
        let crc = CRC64.checksum(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        let back = parse(&body).unwrap();
        assert_eq!(&back[0][..], code.as_bytes());
        assert_eq!(&back[1][..], b"12345");
        let mut newer = body.clone();
        let n = newer.len();
        newer[n - 10] = 200;
        assert_eq!(parse(&newer), Err(PayloadError::VersionOrChecksum));
    }
}
