//! LEB128 varints for the packed in-memory encodings (small hashes, stream
//! nodes). Those buffers are written only by their own modules; reading
//! never panics even if one were cut short.

pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint at `*pos`, advancing it.
pub fn get(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&b) = buf.get(*pos) {
        *pos += 1;
        if shift < 64 {
            v |= u64::from(b & 0x7f) << shift;
        }
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    v
}
