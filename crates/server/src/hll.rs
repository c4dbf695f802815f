//! Redis's HyperLogLog string format, so a value made by Redis counts the
//! same here and the other way round (see `docs/format.md`, "HyperLogLog").
//!
//! A value is a 16-byte header (`HYLL`, the encoding, three unused bytes,
//! the cached cardinality as 8 little-endian bytes whose top bit marks it
//! stale) followed by 16384 six-bit registers, either packed (dense) or
//! run-length coded (sparse). Commands decode the registers into a plain
//! array, change them, and write back only what changed: the format is
//! compact enough that the decode is cheap, and it keeps every encoding
//! rule in one place.

/// Registers: 2^14, indexed by the hash's low 14 bits.
pub const P: u32 = 14;
pub const REGISTERS: usize = 1 << P;
/// Bits of the hash left for the run of zeros.
const Q: u32 = 64 - P;
pub const HEADER: usize = 16;
pub const DENSE_SIZE: usize = HEADER + (REGISTERS * 6).div_ceil(8);
const MAGIC: &[u8; 4] = b"HYLL";
pub const DENSE: u8 = 0;
pub const SPARSE: u8 = 1;
/// The header byte holding the stale-cardinality bit.
pub const CARD_FLAG_BYTE: usize = 15;
const STALE: u8 = 0x80;
/// The largest value a sparse VAL opcode holds; larger needs dense.
const SPARSE_VAL_MAX: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
const SEED: u64 = 0xadc8_3b19;

/// Why a string cannot be read as a HyperLogLog.
#[derive(Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Not a HyperLogLog at all (Redis's WRONGTYPE).
    NotHll,
    /// Has the header but the registers do not decode (INVALIDOBJ).
    Corrupt,
}

pub type Registers = [u8; REGISTERS];

/// A decoded value: the registers, its encoding and its header.
pub struct Hll {
    pub regs: Box<Registers>,
    pub encoding: u8,
    pub header: [u8; HEADER],
}

/// Checks the header the way Redis does before touching the registers.
pub fn check(s: &[u8]) -> Result<u8, Invalid> {
    if s.len() < HEADER || &s[..4] != MAGIC {
        return Err(Invalid::NotHll);
    }
    match s[4] {
        DENSE if s.len() == DENSE_SIZE => Ok(DENSE),
        SPARSE => Ok(SPARSE),
        _ => Err(Invalid::NotHll),
    }
}

pub fn decode(s: &[u8]) -> Result<Hll, Invalid> {
    let encoding = check(s)?;
    let mut regs = Box::new([0u8; REGISTERS]);
    merge_body(s, encoding, &mut regs)?;
    let mut header = [0u8; HEADER];
    header.copy_from_slice(&s[..HEADER]);
    Ok(Hll {
        regs,
        encoding,
        header,
    })
}

/// Raises each register of `into` to the value's (a checked value of
/// `encoding`), without building a register array for it first.
pub fn merge_body(s: &[u8], encoding: u8, into: &mut Registers) -> Result<(), Invalid> {
    let body = &s[HEADER..];
    if encoding == DENSE {
        dense_merge(body, into);
        Ok(())
    } else {
        sparse_merge(body, into)
    }
}

/// Four registers per three bytes; plain indexing, as this runs for every
/// register of every value a PFCOUNT or PFMERGE reads.
fn dense_merge(body: &[u8], into: &mut Registers) {
    for c in 0..REGISTERS / 4 {
        let (b0, b1, b2) = (body[3 * c], body[3 * c + 1], body[3 * c + 2]);
        let r = [
            b0 & 0x3f,
            (b0 >> 6 | b1 << 2) & 0x3f,
            (b1 >> 4 | b2 << 4) & 0x3f,
            b2 >> 2,
        ];
        for k in 0..4 {
            if into[4 * c + k] < r[k] {
                into[4 * c + k] = r[k];
            }
        }
    }
}

/// Register `i` of a packed body: six bits starting at bit `6 i`, least
/// significant bit first.
pub fn dense_get(body: &[u8], i: usize) -> u8 {
    let bit = i * 6;
    let (b, shift) = (bit / 8, bit % 8);
    let lo = u16::from(body.get(b).copied().unwrap_or(0));
    let hi = u16::from(body.get(b + 1).copied().unwrap_or(0));
    (((lo | hi << 8) >> shift) & 0x3f) as u8
}

pub fn dense_set(body: &mut [u8], i: usize, v: u8) {
    let bit = i * 6;
    let (b, shift) = (bit / 8, bit % 8);
    let mask = 0x3fu16 << shift;
    let v = u16::from(v) << shift;
    body[b] = (u16::from(body[b]) & !mask | v) as u8;
    if let Some(next) = body.get_mut(b + 1) {
        *next = ((u16::from(*next) << 8 & !mask | v) >> 8) as u8;
    }
}

fn sparse_merge(body: &[u8], regs: &mut Registers) -> Result<(), Invalid> {
    let mut idx = 0usize;
    let mut p = 0;
    while p < body.len() {
        let op = body[p];
        let (len, val) = if op & 0xc0 == 0 {
            p += 1;
            (usize::from(op & 0x3f) + 1, 0)
        } else if op & 0xc0 == 0x40 {
            let next = *body.get(p + 1).ok_or(Invalid::Corrupt)?;
            p += 2;
            ((usize::from(op & 0x3f) << 8 | usize::from(next)) + 1, 0)
        } else {
            p += 1;
            (usize::from(op & 0x3) + 1, ((op >> 2) & 0x1f) + 1)
        };
        if idx + len > REGISTERS {
            return Err(Invalid::Corrupt);
        }
        if val > 0 {
            for r in &mut regs[idx..idx + len] {
                if *r < val {
                    *r = val;
                }
            }
        }
        idx += len;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Invalid::Corrupt)
    }
}

/// The sparse body of `regs`, or None when a register is too large for it.
pub fn sparse_encode(regs: &Registers) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < REGISTERS {
        let v = regs[i];
        let mut end = i + 1;
        while end < REGISTERS && regs[end] == v {
            end += 1;
        }
        let mut left = end - i;
        i = end;
        if v == 0 {
            while left > 0 {
                if left > SPARSE_ZERO_MAX_LEN {
                    let n = left.min(SPARSE_XZERO_MAX_LEN) - 1;
                    out.push(0x40 | (n >> 8) as u8);
                    out.push((n & 0xff) as u8);
                    left -= n + 1;
                } else {
                    out.push((left - 1) as u8);
                    left = 0;
                }
            }
        } else {
            if v > SPARSE_VAL_MAX {
                return None;
            }
            while left > 0 {
                let n = left.min(SPARSE_VAL_MAX_LEN);
                out.push(0x80 | (v - 1) << 2 | (n - 1) as u8);
                left -= n;
            }
        }
    }
    Some(out)
}

pub fn dense_encode(regs: &Registers) -> Vec<u8> {
    let mut body = vec![0u8; DENSE_SIZE - HEADER];
    for c in 0..REGISTERS / 4 {
        let r = &regs[4 * c..4 * c + 4];
        body[3 * c] = r[0] | r[1] << 6;
        body[3 * c + 1] = r[1] >> 2 | r[2] << 4;
        body[3 * c + 2] = r[2] >> 4 | r[3] << 2;
    }
    body
}

/// A whole value: `header` with `encoding`, then the registers so encoded.
pub fn encode(regs: &Registers, header: &[u8; HEADER], encoding: u8) -> Vec<u8> {
    let body = match encoding {
        SPARSE => sparse_encode(regs),
        _ => None,
    };
    let (encoding, body) = match body {
        Some(b) => (SPARSE, b),
        None => (DENSE, dense_encode(regs)),
    };
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(header);
    out[4] = encoding;
    out.extend_from_slice(&body);
    out
}

/// The header of a new, empty value.
pub fn new_header() -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(MAGIC);
    h[4] = SPARSE;
    h
}

/// The cached cardinality, unless marked stale.
pub fn cached(header: &[u8]) -> Option<u64> {
    if header[CARD_FLAG_BYTE] & STALE != 0 {
        return None;
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&header[8..16]);
    Some(u64::from_le_bytes(b))
}

pub fn invalidate(header: &mut [u8; HEADER]) {
    header[CARD_FLAG_BYTE] |= STALE;
}

pub fn card_bytes(card: u64) -> [u8; 8] {
    card.to_le_bytes()
}

/// MurmurHash64A, the 64-bit hash Redis feeds its HyperLogLogs, reading
/// the input as little-endian words as Redis does on every platform.
pub fn murmur64a(data: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = SEED ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let mut k = u64::from_le_bytes(w).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the value it offers: one more
/// than the number of trailing zeros above the index bits (bounded by a
/// sentinel bit so it is at most Q + 1).
pub fn position(ele: &[u8]) -> (usize, u8) {
    let h = murmur64a(ele);
    let index = (h & (REGISTERS as u64 - 1)) as usize;
    let rest = (h >> P) | 1u64 << Q;
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Raises the register `ele` lands in; true if it changed.
pub fn add(regs: &mut Registers, ele: &[u8]) -> bool {
    let (i, v) = position(ele);
    if regs[i] < v {
        regs[i] = v;
        true
    } else {
        false
    }
}

/// Ertl's improved estimator, the one Redis 7 uses, so counts match to
/// the unit.
pub fn count(regs: &Registers) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs.iter() {
        histo[usize::from(r & 63)] += 1;
    }
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histo[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    let alpha_inf = 0.5 / std::f64::consts::LN_2;
    (alpha_inf * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// PFDEBUG DECODE's rendering of a sparse body: `Z:len`, `XZ:len` and
/// `v:value,len`, space separated.
pub fn describe_sparse(body: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut p = 0;
    while p < body.len() {
        let op = body[p];
        if op & 0xc0 == 0 {
            parts.push(format!("Z:{}", (op & 0x3f) as usize + 1));
            p += 1;
        } else if op & 0xc0 == 0x40 {
            let next = body.get(p + 1).copied().unwrap_or(0);
            parts.push(format!(
                "XZ:{}",
                ((usize::from(op & 0x3f) << 8) | usize::from(next)) + 1
            ));
            p += 2;
        } else {
            parts.push(format!("v:{},{}", ((op >> 2) & 0x1f) + 1, (op & 3) + 1));
            p += 1;
        }
    }
    parts.join(" ")
}

/// PFSELFTEST: Redis's checks of the implementation. Registers written
/// packed read back the same, both ways of reading them; counts of up to
/// ten million distinct elements stay within six standard errors of the
/// truth (one at ten, where a collision is likely enough); and at each
/// checkpoint the sparse encoding is used while it fits `sparse_max`, and
/// counts what the dense one counts. `seed` varies the elements.
pub fn self_test(sparse_max: usize, seed: u64) -> Result<(), String> {
    // Packed registers: random values written, then read back.
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut body = vec![0u8; DENSE_SIZE - HEADER];
    let mut want = Box::new([0u8; REGISTERS]);
    for _ in 0..1000 {
        for (i, w) in want.iter_mut().enumerate() {
            *w = (next() & 0x3f) as u8;
            dense_set(&mut body, i, *w);
        }
        let mut read = Box::new([0u8; REGISTERS]);
        dense_merge(&body, &mut read);
        for i in 0..REGISTERS {
            if dense_get(&body, i) != want[i] || read[i] != want[i] {
                return Err(format!("TESTFAILED Register error at index {i}"));
            }
        }
    }
    // Estimates, and the two encodings, at 1, 10, 100, ... elements.
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut regs = Box::new([0u8; REGISTERS]);
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        add(&mut regs, &(j ^ seed).to_le_bytes());
        if j != checkpoint {
            continue;
        }
        let sparse = encode(&regs, &new_header(), SPARSE);
        let fits = sparse[4] == SPARSE && sparse.len() <= sparse_max;
        if (j as usize) < sparse_max / 2 && !fits {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let dense = encode(&regs, &new_header(), DENSE);
        let as_read = |v: &[u8]| decode(v).map(|h| count(&h.regs)).ok();
        let estimate = count(&regs);
        if as_read(&sparse) != Some(estimate) || as_read(&dense) != Some(estimate) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let max_err = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        let abs_err = checkpoint.abs_diff(estimate);
        if abs_err > max_err {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abs_err}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_packing_round_trips() {
        let mut regs = Box::new([0u8; REGISTERS]);
        for (i, r) in regs.iter_mut().enumerate() {
            *r = (i * 7 % 64) as u8;
        }
        let body = dense_encode(&regs);
        assert_eq!(body.len(), 12288);
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&body, i), regs[i]);
        }
    }

    #[test]
    fn sparse_round_trips_and_empty_is_one_xzero() {
        let regs = Box::new([0u8; REGISTERS]);
        assert_eq!(sparse_encode(&regs), Some(vec![0x7f, 0xff]));
        let mut regs = regs;
        regs[0] = 3;
        regs[1] = 3;
        regs[100] = 32;
        let body = sparse_encode(&regs).unwrap();
        let mut back = [0u8; REGISTERS];
        sparse_merge(&body, &mut back).unwrap();
        assert_eq!(&back[..], &regs[..]);
        regs[5] = 33;
        assert_eq!(sparse_encode(&regs), None);
    }

    #[test]
    fn estimator_edges() {
        let regs = Box::new([0u8; REGISTERS]);
        assert_eq!(count(&regs), 0);
        let mut regs = regs;
        for i in 0..1000u32 {
            add(&mut regs, i.to_string().as_bytes());
        }
        let c = count(&regs) as f64;
        assert!((c - 1000.0).abs() < 20.0, "{c}");
    }

    #[test]
    fn self_test_passes_at_any_sparse_limit() {
        assert_eq!(self_test(3000, 0x1234_5678_9abc), Ok(()));
        assert_eq!(self_test(0, 42), Ok(()));
    }
}
