//! The building blocks every RDB payload shares: the length and string
//! encodings, and the version + CRC-64/REDIS trailer of DUMP and FUNCTION
//! DUMP payloads.
//!
//! Reading never trusts a length: every read is bounds-checked and answers
//! `None` on damage, and nothing is preallocated from a claimed size.

use bytes::Bytes;
use durakv_engine::value::parse_i64;

/// Redis's payload checksum: CRC-64 with the Jones polynomial, reflected.
pub const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
/// Version (2) and checksum (8).
pub const FOOTER_BYTES: usize = 10;
/// No string is bigger than a command argument may be.
const MAX_STRING_BYTES: u64 = 512 << 20;
/// Redis compresses strings longer than this (`rdbcompression yes`).
const LZF_MIN_LEN: usize = 20;

thread_local! {
    /// Off while a full sync's RDB is written (`without_lzf`).
    static LZF_ON: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Runs `f` with LZF compression of strings off on this thread. A full
/// sync's RDB goes to a replica over a socket, where its size matters
/// little, and LZF was most of its cost: the `lzf` crate sets up a 512 KiB
/// hash table for every string, which made encoding 200K YCSB records
/// (2M strings of 100 bytes) take about 35 s. Readers take either form.
pub fn without_lzf<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            LZF_ON.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(LZF_ON.with(|c| c.replace(false)));
    f()
}

const ENC_INT8: u8 = 0xc0;
const ENC_INT16: u8 = 0xc1;
const ENC_INT32: u8 = 0xc2;
const ENC_LZF: u8 = 0xc3;

/// Appends the RDB version and the checksum of everything before it.
pub fn seal(mut body: Vec<u8>, version: u16) -> Vec<u8> {
    body.extend_from_slice(&version.to_le_bytes());
    let crc = CRC64.checksum(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

/// The body of a payload whose trailer is intact and whose version is at
/// most `max_version`; `None` is Redis's "version or checksum are wrong".
pub fn open(payload: &[u8], max_version: u16) -> Option<&[u8]> {
    let body_len = payload.len().checked_sub(FOOTER_BYTES)?;
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    let signed = &payload[..payload.len() - 8];
    (version <= max_version && CRC64.checksum(signed) == u64::from_le_bytes(crc)).then_some(body)
}

/// RDB's length encoding: 6, 14, 32 or 64 bits.
pub fn put_length(out: &mut Vec<u8>, n: u64) {
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

/// A string as stored, with no integer or LZF encoding.
pub fn put_plain_string(out: &mut Vec<u8>, s: &[u8]) {
    put_length(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A string as Redis saves one: short canonical integers that fit 32 bits
/// as integers, long strings LZF-compressed when that saves bytes.
pub fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = parse_i64(s) {
            if let Ok(v) = i8::try_from(v) {
                out.extend_from_slice(&[ENC_INT8, v as u8]);
                return;
            }
            if let Ok(v) = i16::try_from(v) {
                out.push(ENC_INT16);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
            if let Ok(v) = i32::try_from(v) {
                out.push(ENC_INT32);
                out.extend_from_slice(&v.to_le_bytes());
                return;
            }
        }
    }
    if s.len() > LZF_MIN_LEN && LZF_ON.with(|c| c.get()) {
        // Redis gives LZF an output buffer of len - 4 bytes, and LZF's
        // bounds checks refuse a result that would fill it exactly: only
        // a result saving more than 4 bytes is stored compressed.
        if let Ok(packed) = lzf::compress(s) {
            if packed.len() < s.len() - 4 {
                out.push(ENC_LZF);
                put_length(out, packed.len() as u64);
                put_length(out, s.len() as u64);
                out.extend_from_slice(&packed);
                return;
            }
        }
    }
    put_plain_string(out, s);
}

/// A bounds-checked reader over a payload body.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.remaining() < n {
            return None;
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }

    pub fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    pub fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Some(a)
    }

    /// (length or encoding, whether it is an encoding).
    fn length_or_encoding(&mut self) -> Option<(u64, bool)> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => (u64::from(b & 0x3f), false),
            1 => ((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?), false),
            2 if b == 0x80 => (u64::from(u32::from_be_bytes(self.array()?)), false),
            2 if b == 0x81 => (u64::from_be_bytes(self.array()?), false),
            3 => (u64::from(b & 0x3f), true),
            _ => return None,
        })
    }

    /// A plain length (an element count, a node container).
    pub fn length(&mut self) -> Option<u64> {
        match self.length_or_encoding()? {
            (n, false) => Some(n),
            _ => None,
        }
    }

    fn size(&mut self) -> Option<usize> {
        self.length()
            .filter(|&n| n <= MAX_STRING_BYTES)
            .map(|n| n as usize)
    }

    /// A string in any of its encodings: plain, 8/16/32-bit integer, LZF.
    pub fn string(&mut self) -> Option<Bytes> {
        let (n, encoded) = self.length_or_encoding()?;
        if !encoded {
            let n = usize::try_from(n).ok()?;
            return Some(Bytes::copy_from_slice(self.take(n)?));
        }
        Some(match n as u8 | 0xc0 {
            ENC_INT8 => Bytes::from((self.byte()? as i8).to_string()),
            ENC_INT16 => Bytes::from(i16::from_le_bytes(self.array()?).to_string()),
            ENC_INT32 => Bytes::from(i32::from_le_bytes(self.array()?).to_string()),
            ENC_LZF => {
                let compressed = self.size()?;
                let len = self.size()?;
                // LZF expands at most ~100-fold: a larger claim is damage.
                if len == 0 || len > compressed.saturating_mul(256) {
                    return None;
                }
                let data = self.take(compressed)?;
                match lzf::decompress(data, len) {
                    Ok(v) if v.len() == len => Bytes::from(v),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// A double in the old text form (ZSET v1): a length byte, with 253,
    /// 254 and 255 standing for NaN, +inf and -inf.
    pub fn text_double(&mut self) -> Option<f64> {
        match self.byte()? {
            253 => Some(f64::NAN),
            254 => Some(f64::INFINITY),
            255 => Some(f64::NEG_INFINITY),
            n => std::str::from_utf8(self.take(usize::from(n))?)
                .ok()?
                .parse()
                .ok(),
        }
    }

    pub fn binary_double(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_redis_crc64() {
        // Redis's own test vector for crc64.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn strings_round_trip_in_every_encoding() {
        let long = "abc".repeat(100);
        for s in [
            "",
            "0",
            "-1",
            "127",
            "-128",
            "300",
            "-40000",
            "2147483647",
            "2147483648",
            "007",
            "hello",
            &long,
        ] {
            let mut out = Vec::new();
            put_string(&mut out, s.as_bytes());
            let mut r = Reader::new(&out);
            assert_eq!(r.string().unwrap(), s.as_bytes(), "{s}");
            assert!(r.at_end());
        }
        let mut out = Vec::new();
        put_string(&mut out, long.as_bytes());
        assert_eq!(out[0], ENC_LZF);
    }

    #[test]
    fn lengths_round_trip() {
        for n in [
            0u64,
            63,
            64,
            16383,
            16384,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
        ] {
            let mut out = Vec::new();
            put_length(&mut out, n);
            assert_eq!(Reader::new(&out).length(), Some(n));
        }
    }
}
