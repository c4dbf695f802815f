//! Incremental request parser.
//!
//! A request is either a RESP multibulk (`*N\r\n$len\r\n...`) or an inline
//! command (a line of space-separated, optionally quoted words, as `nc` and
//! telnet send). The parser is fed whatever the socket produced; frames may
//! be split at any byte. It never panics on client bytes: every malformed
//! input becomes a [`ParseError`] whose text is Redis's protocol error.

use bytes::{Buf, Bytes, BytesMut};

/// Longest inline request, and longest `*N` / `$N` header line, Redis accepts
/// (PROTO_INLINE_MAX_SIZE).
pub const INLINE_MAX_SIZE_BYTES: usize = 64 * 1024;

/// Arguments at least this long are sliced out of the read buffer instead
/// of copied.
pub const ZERO_COPY_MIN_BYTES: usize = 16 * 1024;

/// Requests of at most this many arguments are parsed without allocating
/// for their offsets.
const FEW_ARGS: usize = 8;

/// Limits that bound what a single request may claim.
#[derive(Clone, Copy, Debug)]
pub struct RequestLimits {
    /// `proto-max-bulk-len`: the largest bulk argument (default 512 MB).
    pub max_bulk_len_bytes: u64,
    /// Largest argument count of one multibulk request.
    pub max_multibulk_len: u64,
    /// The client has not logged in: Redis's much smaller bounds apply
    /// ([`UNAUTHENTICATED_MAX_ARGS`], [`UNAUTHENTICATED_MAX_BULK_BYTES`]),
    /// so a stranger cannot make the server buffer a large request.
    pub unauthenticated: bool,
}

/// Most arguments a request of a client that has not logged in may have.
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// Largest argument of a request of a client that has not logged in.
pub const UNAUTHENTICATED_MAX_BULK_BYTES: i64 = 16 * 1024;

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_bulk_len_bytes: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as u64,
            unauthenticated: false,
        }
    }
}

/// A malformed request. The connection must reply with the message and close.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    #[error("Protocol error: expected '$', got '{0}'")]
    ExpectedDollar(char),
    #[error("Protocol error: too big mbulk count string")]
    TooBigMultibulkCount,
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    #[error("Protocol error: too big inline request")]
    TooBigInline,
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
}

impl ParseError {
    /// The full error reply text, `ERR Protocol error: ...`.
    pub fn reply_text(&self) -> String {
        format!("ERR {self}")
    }
}

/// Parses requests out of a connection's read buffer.
#[derive(Debug, Default, Clone)]
pub struct RequestParser {
    pub limits: RequestLimits,
}

enum Step<T> {
    Done(T),
    Incomplete,
}

impl RequestParser {
    pub fn new(limits: RequestLimits) -> Self {
        RequestParser { limits }
    }

    /// Takes the next complete request off the front of `buf`.
    ///
    /// Returns `Ok(None)` when more bytes are needed. Empty requests (a blank
    /// inline line, `*0`) are consumed silently, as Redis does.
    pub fn parse(&self, buf: &mut BytesMut) -> Result<Option<Vec<Bytes>>, ParseError> {
        let mut args = Vec::new();
        Ok(self.parse_into(buf, &mut args)?.then_some(args))
    }

    /// [`RequestParser::parse`] into `args`, which must be empty, so that a
    /// connection reuses one vector for every request it runs. Returns
    /// whether a request was taken.
    pub fn parse_into(
        &self,
        buf: &mut BytesMut,
        args: &mut Vec<Bytes>,
    ) -> Result<bool, ParseError> {
        debug_assert!(args.is_empty());
        loop {
            if buf.is_empty() {
                return Ok(false);
            }
            let step = if buf[0] == b'*' {
                self.multibulk(buf, args)?
            } else {
                inline(buf, args)?
            };
            match step {
                Step::Incomplete => return Ok(false),
                Step::Done(()) if args.is_empty() => continue,
                Step::Done(()) => return Ok(true),
            }
        }
    }

    fn multibulk(&self, buf: &mut BytesMut, args: &mut Vec<Bytes>) -> Result<Step<()>, ParseError> {
        let Some((count, mut pos)) = length_header(buf, 0, ParseError::TooBigMultibulkCount)?
        else {
            return Ok(Step::Incomplete);
        };
        let count = count.ok_or(ParseError::InvalidMultibulkLength)?;
        if self.limits.unauthenticated && count > UNAUTHENTICATED_MAX_ARGS {
            return Err(ParseError::UnauthenticatedMultibulkLength);
        }
        if count > self.limits.max_multibulk_len as i64 {
            return Err(ParseError::InvalidMultibulkLength);
        }
        if count <= 0 {
            buf.advance(pos);
            return Ok(Step::Done(()));
        }
        // Where each argument lies in the request. Bytes are taken only once
        // the whole request has arrived, so a partial request costs a header
        // re-scan, never a copy; the offsets of a request of few arguments
        // (nearly all of them) live on the stack.
        let count = count as usize;
        let mut few = [(0usize, 0usize); FEW_ARGS];
        let mut many = Vec::new();
        if count > FEW_ARGS {
            many.reserve(count.min(1024));
        }
        let mut large = false;
        for k in 0..count {
            if pos >= buf.len() {
                return Ok(Step::Incomplete);
            }
            if buf[pos] != b'$' {
                return Err(ParseError::ExpectedDollar(buf[pos] as char));
            }
            let Some((len, next)) = length_header(buf, pos, ParseError::TooBigBulkCount)? else {
                return Ok(Step::Incomplete);
            };
            let len = len.ok_or(ParseError::InvalidBulkLength)?;
            if self.limits.unauthenticated && len > UNAUTHENTICATED_MAX_BULK_BYTES {
                return Err(ParseError::UnauthenticatedBulkLength);
            }
            if len < 0 || len as u64 > self.limits.max_bulk_len_bytes {
                return Err(ParseError::InvalidBulkLength);
            }
            let len = len as usize;
            if buf.len() < next + len + 2 {
                if buf.capacity() < next + len + 2 {
                    buf.reserve(next + len + 2 - buf.len());
                }
                return Ok(Step::Incomplete);
            }
            large |= len >= ZERO_COPY_MIN_BYTES;
            match few.get_mut(k) {
                Some(slot) if count <= FEW_ARGS => *slot = (next, len),
                _ => many.push((next, len)),
            }
            pos = next + len + 2;
        }
        let spans = if count > FEW_ARGS {
            &many[..]
        } else {
            &few[..count]
        };
        // Arguments often outlive the request (a SET value goes into a log
        // record, a channel name into the subscriptions). Slicing them out
        // of the read buffer would pin the whole buffer for as long as any
        // of them lives, so a request of small arguments is copied once and
        // the arguments are slices of that copy: one allocation for all of
        // them, and cloning one is a reference count. A large argument is
        // most of the request, so such a request is taken without a copy.
        let frame = if large {
            buf.split_to(pos).freeze()
        } else {
            let copy = copy_request(&buf[..pos]);
            buf.advance(pos);
            copy
        };
        // The last argument takes the frame's own handle: one reference
        // count fewer to take and drop per request.
        if let Some((&(at, len), rest)) = spans.split_last() {
            args.extend(rest.iter().map(|&(at, len)| frame.slice(at..at + len)));
            let mut last = frame;
            last.truncate(at + len);
            last.advance(at);
            args.push(last);
        }
        Ok(Step::Done(()))
    }
}

/// A copy of a request of small arguments. Most requests are short, and
/// those go into one allocation with the reference count their arguments
/// share: a vector would be one allocation and its first slice another
/// (the count), each paid again when freed.
fn copy_request(request: &[u8]) -> Bytes {
    match request.len() {
        0..=64 => held_in_place::<64>(request),
        65..=128 => held_in_place::<128>(request),
        129..=256 => held_in_place::<256>(request),
        _ => Bytes::copy_from_slice(request),
    }
}

/// Up to `N` bytes held in place.
struct InPlace<const N: usize> {
    len: usize,
    data: [u8; N],
}

impl<const N: usize> AsRef<[u8]> for InPlace<N> {
    fn as_ref(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

fn held_in_place<const N: usize>(bytes: &[u8]) -> Bytes {
    let mut data = [0; N];
    data[..bytes.len()].copy_from_slice(bytes);
    Bytes::from_owner(InPlace {
        len: bytes.len(),
        data,
    })
}

/// Bulk arguments at least this long are read on their own by Redis, its
/// query buffer then holding only them (`PROTO_MBULK_BIG_ARG`).
pub const BIG_ARG_BYTES: usize = 32 * 1024;

/// How many bytes of a partly read request Redis would report as its query
/// buffer (CLIENT LIST's `qbuf`): from the start of a big bulk argument
/// still arriving, what arrived of it; otherwise all of `buf`. Walks the
/// request's headers, so it is for a connection waiting on a partial one.
pub fn pending_query_bytes(buf: &[u8]) -> usize {
    let whole = buf.len();
    if whole < BIG_ARG_BYTES || buf[0] != b'*' {
        return whole;
    }
    let Ok(Some((count, mut pos))) = header_line(buf, 0, ParseError::TooBigMultibulkCount) else {
        return whole;
    };
    let count = parse_len(count).unwrap_or(0);
    for _ in 0..count {
        if pos >= whole || buf[pos] != b'$' {
            return whole;
        }
        let Ok(Some((len, next))) = header_line(buf, pos, ParseError::TooBigBulkCount) else {
            return whole;
        };
        let Some(len) = parse_len(len).filter(|&l| l >= 0) else {
            return whole;
        };
        let end = next + len as usize + 2;
        if end > whole {
            return if len as usize >= BIG_ARG_BYTES {
                whole - next
            } else {
                whole
            };
        }
        pos = end;
    }
    whole
}

/// Requests with more arguments than this end [`peek_second_args`]'s walk.
const PEEK_MAX_ARGS: usize = 16;

/// Calls `f` with the second argument (for most commands, the first key)
/// of each of the first `max` requests complete in `buf`, without parsing
/// them: a hint for prefetching what they will read. It stops early, having
/// said nothing wrong, at anything the parser would refuse or wait for, and
/// at an inline command. Returns how many requests it walked.
pub fn peek_second_args<'b>(buf: &'b [u8], max: usize, mut f: impl FnMut(&'b [u8])) -> usize {
    let mut pos = 0;
    let mut walked = 0;
    while walked < max && buf.get(pos) == Some(&b'*') {
        // A request of many arguments is no pipelined lookup, and walking
        // one still arriving would repeat the parser's own scan of it.
        let Some(count) = peek_header(buf, &mut pos).filter(|&c| c <= PEEK_MAX_ARGS) else {
            break;
        };
        let mut second = None;
        for k in 0..count {
            if buf.get(pos) != Some(&b'$') {
                return walked;
            }
            let Some(len) = peek_header(buf, &mut pos) else {
                return walked;
            };
            let Some(end) = pos.checked_add(len).filter(|&e| e + 2 <= buf.len()) else {
                return walked;
            };
            if k == 1 {
                second = Some(&buf[pos..end]);
            }
            pos = end + 2;
        }
        if let Some(arg) = second {
            f(arg);
        }
        walked += 1;
    }
    walked
}

/// The first argument (the command name) of the request starting `buf`,
/// if it is all there, without parsing the rest: a RESP array's first
/// bulk string, or an inline command's first word. None if it is cut
/// short or is neither.
pub fn peek_first_arg(buf: &[u8]) -> Option<&[u8]> {
    match buf.first()? {
        b'*' => {
            let mut pos = 0;
            peek_header(buf, &mut pos)?;
            if buf.get(pos) != Some(&b'$') {
                return None;
            }
            let len = peek_header(buf, &mut pos)?;
            buf.get(pos..pos.checked_add(len)?)
        }
        c if c.is_ascii_alphabetic() => {
            let end = buf.iter().position(|c| c.is_ascii_whitespace())?;
            Some(&buf[..end])
        }
        _ => None,
    }
}

/// The length in the header at `pos` (a `*` or `$` line), moving `pos`
/// past it; None if it is incomplete or not a plain length.
fn peek_header(buf: &[u8], pos: &mut usize) -> Option<usize> {
    let (n, next) = length_header(buf, *pos, ParseError::TooBigBulkCount).ok()??;
    let n = usize::try_from(n?).ok()?;
    *pos = next;
    Some(n)
}

/// The length in the `*` or `$` header starting at `start` (None if it is
/// not a valid one) and the offset just past it; `Ok(None)` while the
/// header is incomplete. Each request has one more header than arguments,
/// and the pipeline prefetch walks them too, so the usual header (a few
/// plain digits) is read in one pass; anything else goes the general way,
/// which gives the same answer for it.
#[inline]
fn length_header(
    buf: &[u8],
    start: usize,
    too_big: ParseError,
) -> Result<Option<(Option<i64>, usize)>, ParseError> {
    if let Some(plain) = plain_length(buf, start) {
        return Ok(Some(plain));
    }
    Ok(header_line(buf, start, too_big)?.map(|(text, next)| (parse_len(text), next)))
}

/// [`length_header`] for a header of 1 to 18 digits, the first not `0`,
/// then `\r` and at least one byte more (skipped unseen, as Redis skips
/// the `\n`): such a length fits an `i64` without overflow checks. None
/// for anything else.
#[inline]
fn plain_length(buf: &[u8], start: usize) -> Option<(Option<i64>, usize)> {
    const MAX_DIGITS: usize = 18;
    let mut at = start + 1;
    let first = buf.get(at)?.wrapping_sub(b'0');
    if !(1..=9).contains(&first) {
        return None;
    }
    let mut n = i64::from(first);
    let end = buf.len().min(at + MAX_DIGITS);
    at += 1;
    while at < end {
        let d = buf[at].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        n = n * 10 + i64::from(d);
        at += 1;
    }
    (at + 1 < buf.len() && buf[at] == b'\r').then_some((Some(n), at + 2))
}

/// Finds the `\r\n`-terminated header starting at `start` (whose first byte
/// is the type tag) and returns its text and the offset just past it.
fn header_line(
    buf: &[u8],
    start: usize,
    too_big: ParseError,
) -> Result<Option<(&[u8], usize)>, ParseError> {
    let window = &buf[start..];
    match memchr(b'\r', window) {
        Some(i) if i + 1 < window.len() => Ok(Some((&window[1..i], start + i + 2))),
        Some(_) => Ok(None),
        None if window.len() > INLINE_MAX_SIZE_BYTES => Err(too_big),
        None => Ok(None),
    }
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

/// Parses a signed decimal length the way Redis's `string2ll` does: no
/// leading `+`, no spaces, no leading zeros except `0` itself (so `-0` and
/// `-01` are refused too). Every request has a few of these, so it is a
/// plain digit loop rather than UTF-8 validation and `str::parse`.
fn parse_len(text: &[u8]) -> Option<i64> {
    if text == b"0" {
        return Some(0);
    }
    let (negative, digits) = match text.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, text),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut n: u64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    if negative {
        0i64.checked_sub_unsigned(n)
    } else {
        i64::try_from(n).ok()
    }
}

fn inline(buf: &mut BytesMut, args: &mut Vec<Bytes>) -> Result<Step<()>, ParseError> {
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > INLINE_MAX_SIZE_BYTES {
            return Err(ParseError::TooBigInline);
        }
        return Ok(Step::Incomplete);
    };
    if nl > INLINE_MAX_SIZE_BYTES {
        return Err(ParseError::TooBigInline);
    }
    let line = buf.split_to(nl + 1);
    let mut text = &line[..nl];
    if text.last() == Some(&b'\r') {
        text = &text[..text.len() - 1];
    }
    let words = split_args(text).ok_or(ParseError::UnbalancedQuotes)?;
    args.extend(words.into_iter().map(Bytes::from));
    Ok(Step::Done(()))
}

/// Splits an inline command line into words, honouring double quotes (with
/// `\n`, `\t`, `\xHH`-style escapes) and single quotes, like `sdssplitargs`.
/// Returns `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && (line[i].is_ascii_whitespace() || line[i] == 0) {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut word = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        word.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    word.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    // A closing quote must be followed by a space or the end.
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                word.push(c);
                i += 1;
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    word.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                word.push(c);
                i += 1;
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    // As in sdssplitargs, a quote opens quoting anywhere in
                    // a word: `name="foo"` is `name=foo`.
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => word.push(c),
                }
                i += 1;
            }
        }
        out.push(word);
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_first_arg_finds_a_whole_command_name() {
        assert_eq!(
            peek_first_arg(b"*3\r\n$5\r\nBLPOP\r\n$1"),
            Some(&b"BLPOP"[..])
        );
        assert_eq!(peek_first_arg(b"PING\r\n"), Some(&b"PING"[..]));
        assert_eq!(peek_first_arg(b"*3\r\n$5\r\nBLP"), None);
        assert_eq!(peek_first_arg(b"*3\r\n$5\r"), None);
        assert_eq!(peek_first_arg(b"*3\r\n:5\r\n"), None);
        assert_eq!(peek_first_arg(b"SE"), None);
        assert_eq!(peek_first_arg(&[0x16, 0x03, 0x01]), None);
    }

    #[test]
    fn a_big_argument_arriving_counts_from_its_first_byte() {
        let mut req = b"*2\r\n$3\r\nSET\r\n$40000\r\n".to_vec();
        let head = req.len();
        req.extend(std::iter::repeat_n(b'v', 35000));
        assert_eq!(pending_query_bytes(&req), req.len() - head);
        // Small requests and small arguments count whole.
        assert_eq!(pending_query_bytes(b"*1\r\n$4\r\nPI"), 10);
        let mut small = b"*2\r\n$3\r\nSET\r\n$100\r\n".to_vec();
        small.extend(std::iter::repeat_n(b'v', 40000));
        assert_eq!(pending_query_bytes(&small), small.len());
        // Garbage is counted whole, never a panic.
        let junk = vec![b'*'; 40000];
        assert_eq!(pending_query_bytes(&junk), 40000);
    }

    /// The general reading of a length header, for [`length_header`]'s
    /// one-pass reading to agree with.
    fn general_length(buf: &[u8]) -> Result<Option<(Option<i64>, usize)>, ParseError> {
        Ok(header_line(buf, 0, ParseError::TooBigBulkCount)?.map(|(t, n)| (parse_len(t), n)))
    }

    #[test]
    fn the_one_pass_length_reading_agrees_with_the_general_one() {
        let mut cases: Vec<Vec<u8>> = [
            "$3\r\n",
            "$3\r",
            "$3",
            "$",
            "$0\r\n",
            "$01\r\n",
            "$-1\r\n",
            "$12x\r\n",
            "$1\n\r\n",
            "$128\rX",
            "$999999999999999999\r\n",
            "$9223372036854775807\r\n",
            "$9223372036854775808\r\n",
            "$99999999999999999999\r\n",
            "$1000000000000000000\r\n",
            "$123456789012345678",
            "$ 1\r\n",
            "$+1\r\n",
        ]
        .iter()
        .map(|c| c.as_bytes().to_vec())
        .collect();
        // Random headers over the bytes that matter, from a fixed seed.
        let alphabet = b"0123456789-\r\nx$";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..50_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 24) as usize;
            let mut case = vec![b'$'];
            let mut bits = state;
            for k in 0..len {
                if k % 12 == 0 {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1);
                    bits = state;
                }
                // Mostly digits, so that long lengths come up.
                let pick = (bits % 32) as usize;
                bits >>= 5;
                case.push(if pick < 20 {
                    b'0' + (pick % 10) as u8
                } else {
                    alphabet[pick % alphabet.len()]
                });
            }
            cases.push(case);
        }
        for case in &cases {
            assert_eq!(
                length_header(case, 0, ParseError::TooBigBulkCount),
                general_length(case),
                "{case:?}"
            );
            // The same header further into a buffer.
            let mut shifted = b"*1\r\n".to_vec();
            shifted.extend_from_slice(case);
            let want = general_length(case).map(|o| o.map(|(n, next)| (n, next + 4)));
            assert_eq!(
                length_header(&shifted, 4, ParseError::TooBigBulkCount),
                want,
                "{case:?}"
            );
        }
    }

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ParseError> {
        let p = RequestParser::default();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(args) = p.parse(&mut buf)? {
            out.push(args);
        }
        Ok(out)
    }

    /// One vector reused for a pipeline of requests of every kind: each
    /// request comes out exactly as `parse` gives it, whatever the one
    /// before held, and requests on both sides of each size at which the
    /// copy changes form (64, 128, 256 bytes) keep every byte, also after
    /// the next request is parsed and the read buffer moves on.
    #[test]
    fn a_reused_vector_takes_each_request_whole() {
        let mut input = Vec::new();
        let mut want = Vec::new();
        for total in [60usize, 64, 65, 128, 129, 256, 257, 4000] {
            // *2 $3 SET $N value: 13 + (3 + digits of N) + N + 2 bytes.
            let n = (0..total)
                .find(|n| 18 + n.to_string().len() + n == total)
                .unwrap();
            let value: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            let mut req = format!("*2\r\n$3\r\nSET\r\n${n}\r\n").into_bytes();
            req.extend_from_slice(&value);
            req.extend_from_slice(b"\r\n");
            assert_eq!(req.len(), total);
            input.extend_from_slice(&req);
            want.push(vec![Bytes::from("SET"), Bytes::from(value)]);
            input.extend_from_slice(b"*0\r\nPING x \"y z\"\r\n");
            want.push(vec![
                Bytes::from("PING"),
                Bytes::from("x"),
                Bytes::from("y z"),
            ]);
        }
        assert_eq!(parse_all(&input).unwrap(), want);
        let p = RequestParser::default();
        let mut buf = BytesMut::from(&input[..]);
        let mut args = Vec::new();
        let mut kept = Vec::new();
        while p.parse_into(&mut buf, &mut args).unwrap() {
            kept.push(args.clone());
            args.clear();
        }
        buf.clear();
        buf.extend_from_slice(&[b'#'; 8192]);
        assert_eq!(kept, want);
        assert!(!p
            .parse_into(&mut BytesMut::from(&b"*2\r\n$3\r\nGET"[..]), &mut args)
            .unwrap());
        assert!(args.is_empty());
    }

    #[test]
    fn multibulk_and_pipelining() {
        let got = parse_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n").unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], vec![Bytes::from("GET"), Bytes::from("k")]);
    }

    /// More arguments than fit the stack's offsets, and a large argument
    /// (taken from the read buffer without a copy) among small ones: each
    /// comes out whole, and stays so when the buffer is reused.
    #[test]
    fn many_and_large_arguments() {
        let mut wire = b"*20\r\n".to_vec();
        for i in 0..20 {
            let a = format!("arg{i}");
            wire.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
        let big = vec![b'x'; ZERO_COPY_MIN_BYTES + 5];
        wire.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", big.len()).as_bytes(),
        );
        wire.extend_from_slice(&big);
        wire.extend_from_slice(b"\r\n");
        let got = parse_all(&wire).unwrap();
        assert_eq!(got.len(), 2);
        let want: Vec<Bytes> = (0..20).map(|i| Bytes::from(format!("arg{i}"))).collect();
        assert_eq!(got[0], want);
        assert_eq!(got[1][0], Bytes::from("SET"));
        assert_eq!(got[1][1], Bytes::from("k"));
        assert_eq!(got[1][2], Bytes::from(big.clone()));

        let p = RequestParser::default();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"[..]);
        let args = p.parse(&mut buf).unwrap().unwrap();
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            p.parse(&mut buf).unwrap().unwrap(),
            vec![Bytes::from("PING")]
        );
        assert_eq!(args, vec![Bytes::from("GET"), Bytes::from("key")]);
    }

    #[test]
    fn split_at_every_byte() {
        let input = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\nPING\r\n";
        let p = RequestParser::default();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(args) = p.parse(&mut buf).unwrap() {
                out.push(args);
            }
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[0][2], Bytes::from("va\r\nl"));
        assert_eq!(out[1], vec![Bytes::from("PING")]);
    }

    #[test]
    fn unauthenticated_requests_are_small() {
        let p = RequestParser::new(RequestLimits {
            unauthenticated: true,
            ..RequestLimits::default()
        });
        let mut buf = BytesMut::from(&b"*11\r\n"[..]);
        assert_eq!(
            p.parse(&mut buf),
            Err(ParseError::UnauthenticatedMultibulkLength)
        );
        let mut buf = BytesMut::from(&b"*2\r\n$4\r\nAUTH\r\n$16385\r\n"[..]);
        assert_eq!(
            p.parse(&mut buf),
            Err(ParseError::UnauthenticatedBulkLength)
        );
        let mut buf = BytesMut::from(&b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"[..]);
        assert_eq!(p.parse(&mut buf).unwrap().unwrap().len(), 2);
        assert_eq!(
            ParseError::UnauthenticatedBulkLength.reply_text(),
            "ERR Protocol error: unauthenticated bulk length"
        );
    }

    #[test]
    fn inline_with_quotes() {
        let got = parse_all(b"SET k \"a b\\x41\"\r\n\r\nGET 'k'\n").unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0][2], Bytes::from("a bA"));
        assert_eq!(got[1][1], Bytes::from("k"));
        assert_eq!(parse_all(b"SET \"k\n"), Err(ParseError::UnbalancedQuotes));
        assert_eq!(
            split_args(b"#!lua name=\"foo bar\" x='y'"),
            Some(vec![
                b"#!lua".to_vec(),
                b"name=foo bar".to_vec(),
                b"x=y".to_vec()
            ])
        );
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert_eq!(
            parse_all(b"*x\r\n"),
            Err(ParseError::InvalidMultibulkLength)
        );
        assert_eq!(
            parse_all(b"*1\r\n+a\r\n"),
            Err(ParseError::ExpectedDollar('+'))
        );
        assert_eq!(
            parse_all(b"*1\r\n$-5\r\n"),
            Err(ParseError::InvalidBulkLength)
        );
        assert_eq!(
            parse_all(b"*1\r\n$536870913\r\n"),
            Err(ParseError::InvalidBulkLength)
        );
        let big = vec![b'a'; INLINE_MAX_SIZE_BYTES + 10];
        assert_eq!(parse_all(&big), Err(ParseError::TooBigInline));
        assert_eq!(
            ParseError::InvalidBulkLength.reply_text(),
            "ERR Protocol error: invalid bulk length"
        );
    }

    #[test]
    fn never_panics_on_garbage() {
        let mut seed: u64 = 0x9e3779b97f4a7c15;
        for _ in 0..20_000 {
            let len = (seed % 40) as usize;
            let mut v = Vec::with_capacity(len);
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                v.push(b"*$\r\n0123-x \"'"[(seed % 13) as usize]);
            }
            let _ = parse_all(&v);
        }
    }

    #[test]
    fn lengths_are_read_as_string2ll_reads_them() {
        for (text, want) in [
            ("0", Some(0)),
            ("7", Some(7)),
            ("-1", Some(-1)),
            ("123456", Some(123456)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("99999999999999999999", None),
            ("", None),
            ("-", None),
            ("+1", None),
            ("01", None),
            ("-0", None),
            ("-01", None),
            ("1a", None),
            (" 1", None),
            ("1 ", None),
        ] {
            assert_eq!(parse_len(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn peeking_names_the_second_argument_of_each_complete_request() {
        let peek = |buf: &[u8], max: usize| {
            let mut seen = Vec::new();
            let n = peek_second_args(buf, max, |k| seen.push(k.to_vec()));
            (n, seen)
        };
        let pipeline = b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$2\r\nk2\r\n";
        assert_eq!(
            peek(pipeline, 16),
            (3, vec![b"k1".to_vec(), b"k2".to_vec()])
        );
        assert_eq!(peek(pipeline, 1), (1, vec![b"k1".to_vec()]));
        // Cut anywhere, it names only what is complete before the cut.
        for cut in 0..pipeline.len() {
            let (n, seen) = peek(&pipeline[..cut], 16);
            assert!(n <= 3 && seen.len() <= 2, "cut at {cut}");
        }
        // What the parser would refuse or treat as inline ends the walk.
        assert_eq!(peek(b"GET k\r\n", 16).0, 0);
        assert_eq!(peek(b"*2\r\n$-1\r\n", 16).0, 0);
        assert_eq!(peek(b"*2\r\n$99999999999999999999\r\n", 16).0, 0);
        assert_eq!(peek(b"*1\r\n$1\r\nx\r\n*2\r\n:1\r\n", 16).0, 1);
        assert_eq!(peek(b"*x\r\n", 16).0, 0);
        assert_eq!(peek(&[b'*'; 100_000], 16).0, 0);
        // Damaged anywhere, a pipeline is walked without a panic, never
        // past `max` requests.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut buf = pipeline.to_vec();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % buf.len() as u64) as usize;
                buf[at] = [b'*', b'$', b'\r', b'\n', b'-', b'9', b'0', (x >> 40) as u8]
                    [(x >> 32) as usize % 8];
            }
            let (n, seen) = peek(&buf, 2);
            assert!(n <= 2 && seen.len() <= n, "{buf:?}");
        }
    }
}
