//! FUNCTION DUMP / RESTORE's payload, in Redis 7's layout so that payloads
//! move between Redis and durakv: per library the RDB opcode
//! `FUNCTION2` (245) and the library's code as an RDB string, then the RDB
//! version (u16, little-endian) and a CRC-64/REDIS (Jones polynomial) of
//! everything before it (u64, little-endian).
//!
//! The code is written as a plain RDB string; reading also takes the
//! integer and LZF-compressed string encodings, which Redis uses when it
//! dumps (`rdbcompression yes`).

use bytes::Bytes;

/// The RDB version written (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// Newer RDB versions (Redis 7.2, 7.4) keep this payload's layout, so
/// their dumps restore here too.
const MAX_RDB_VERSION: u16 = 12;
const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_FUNCTION_PRE_GA: u8 = 246;
/// Version (2) and checksum (8).
const FOOTER_BYTES: usize = 10;
/// No library is bigger than a command argument may be.
const MAX_STRING_BYTES: usize = 512 << 20;

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

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
        put_length(&mut out, code.len() as u64);
        out.extend_from_slice(code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes a payload holds, in order.
pub fn parse(payload: &[u8]) -> Result<Vec<Bytes>, PayloadError> {
    if payload.len() < FOOTER_BYTES {
        return Err(PayloadError::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - FOOTER_BYTES);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    let signed = &payload[..payload.len() - 8];
    if version > MAX_RDB_VERSION || CRC64.checksum(signed) != u64::from_le_bytes(crc) {
        return Err(PayloadError::VersionOrChecksum);
    }
    let mut r = Cursor { buf: body, pos: 0 };
    let mut out = Vec::new();
    while r.pos < body.len() {
        match r.byte()? {
            OPCODE_FUNCTION2 => out.push(r.string()?),
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

/// RDB's length encoding: 6, 14, 32 or 64 bits.
fn put_length(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

const TRUNCATED: PayloadError =
    PayloadError::Malformed("failed loading the given functions payload");

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], PayloadError> {
        if self.buf.len() - self.pos < n {
            return Err(TRUNCATED);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, PayloadError> {
        Ok(self.take(1)?[0])
    }

    /// (length or encoding, whether it is an encoding).
    fn length(&mut self) -> Result<(u64, bool), PayloadError> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => (u64::from(b & 0x3f), false),
            1 => ((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?), false),
            2 if b == 0x80 => {
                let s = self.take(4)?;
                (
                    u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
                    false,
                )
            }
            2 if b == 0x81 => {
                let mut a = [0u8; 8];
                a.copy_from_slice(self.take(8)?);
                (u64::from_be_bytes(a), false)
            }
            3 => (u64::from(b & 0x3f), true),
            _ => return Err(TRUNCATED),
        })
    }

    fn size(&mut self) -> Result<usize, PayloadError> {
        match self.length()? {
            (n, false) if n <= MAX_STRING_BYTES as u64 => Ok(n as usize),
            _ => Err(TRUNCATED),
        }
    }

    fn string(&mut self) -> Result<Bytes, PayloadError> {
        let (n, encoded) = self.length()?;
        if !encoded {
            let n = usize::try_from(n).map_err(|_| TRUNCATED)?;
            return Ok(Bytes::copy_from_slice(self.take(n)?));
        }
        // Integers are little-endian; LZF is (compressed len, len, data).
        let int = |b: &[u8]| {
            let mut a = [0u8; 8];
            a[..b.len()].copy_from_slice(b);
            if b[b.len() - 1] & 0x80 != 0 {
                a[b.len()..].fill(0xff);
            }
            i64::from_le_bytes(a)
        };
        Ok(match n {
            0..=2 => {
                let v = int(self.take(1 << n)?);
                Bytes::from(v.to_string())
            }
            3 => {
                let compressed = self.size()?;
                let len = self.size()?;
                // LZF expands at most ~100-fold: a larger claim is damage.
                if len > compressed.saturating_mul(256) {
                    return Err(TRUNCATED);
                }
                let data = self.take(compressed)?;
                match lzf::decompress(data, len) {
                    Ok(v) if v.len() == len => Bytes::from(v),
                    _ => return Err(TRUNCATED),
                }
            }
            _ => return Err(TRUNCATED),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn crc_is_redis_crc64() {
        // Redis's own test vector for crc64 (src/crc64.c).
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
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
