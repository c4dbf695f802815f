//! `cjson.decode` as Redis 7's lua-cjson reads JSON, which is looser than
//! the standard and says where it stopped in its own words. A script that
//! decodes what its application stored gets the same table from durakv,
//! and a script that reports a parse error the same message:
//!
//! - string bytes pass through as they are (invalid UTF-8, raw tabs and
//!   other control characters included); `\u` escapes become UTF-8, a
//!   surrogate pair one character;
//! - numbers are read as C's `strtod` reads them, so `+5`, `01`, `0x10`,
//!   `-inf`, `nan` and `1e400` (infinity) are numbers unless
//!   `cjson.decode_invalid_numbers(false)` refuses the first five kinds;
//! - a NUL byte ends the text, and one in its first two bytes is taken
//!   for UTF-16 or UTF-32;
//! - nesting deeper than `decode_max_depth` (1000) is refused;
//! - errors read "Expected <what> but found <token> at character <n>",
//!   with lua-cjson's token names (`T_END`, `T_NUMBER`, ...) or the
//!   reason a token could not be read ("invalid number", ...).

use mlua::{Lua, Value};

/// What the tokenizer found, as lua-cjson names it in errors.
enum Token {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Number(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    /// A token that could not be read, and why.
    Error(&'static str),
}

impl Token {
    fn name(&self) -> &'static str {
        match self {
            Token::ObjBegin => "T_OBJ_BEGIN",
            Token::ObjEnd => "T_OBJ_END",
            Token::ArrBegin => "T_ARR_BEGIN",
            Token::ArrEnd => "T_ARR_END",
            Token::Str(_) => "T_STRING",
            Token::Number(_) => "T_NUMBER",
            Token::Bool(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(why) => why,
        }
    }
}

pub(super) struct Decoder<'a> {
    lua: &'a Lua,
    data: &'a [u8],
    pos: usize,
    depth: u32,
    max_depth: u32,
    invalid_numbers: bool,
}

fn fail<T>(msg: String) -> mlua::Result<T> {
    Err(mlua::Error::RuntimeError(msg))
}

/// Decodes `data` into a Lua value.
pub(super) fn decode(
    lua: &Lua,
    data: &[u8],
    max_depth: u32,
    invalid_numbers: bool,
) -> mlua::Result<Value> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return fail("JSON parser does not support UTF-16 or UTF-32".into());
    }
    let mut d = Decoder {
        lua,
        data,
        pos: 0,
        depth: 0,
        max_depth,
        invalid_numbers,
    };
    let (first, at) = d.next_token();
    let v = d.value(first, at)?;
    match d.next_token() {
        (Token::End, _) => Ok(v),
        (t, at) => expected("the end", &t, at),
    }
}

fn expected<T>(what: &str, found: &Token, at: usize) -> mlua::Result<T> {
    fail(format!(
        "Expected {what} but found {} at character {}",
        found.name(),
        at + 1
    ))
}

impl Decoder<'_> {
    /// The byte at `i`; past the end a NUL, as the C string lua-cjson
    /// reads ends.
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn rest_starts_with(&self, word: &[u8]) -> bool {
        self.data[self.pos.min(self.data.len())..].starts_with(word)
    }

    /// The next token and where it starts.
    fn next_token(&mut self) -> (Token, usize) {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let single = match self.at(start) {
            0 => return (Token::End, start),
            b'{' => Token::ObjBegin,
            b'}' => Token::ObjEnd,
            b'[' => Token::ArrBegin,
            b']' => Token::ArrEnd,
            b',' => Token::Comma,
            b':' => Token::Colon,
            b'"' => {
                // A string's error is placed where it was found.
                let t = self.string();
                let at = if matches!(t, Token::Error(_)) {
                    self.pos
                } else {
                    start
                };
                return (t, at);
            }
            b'-' | b'0'..=b'9' => {
                if !self.invalid_numbers && self.invalid_number() {
                    return (Token::Error("invalid number"), start);
                }
                return (self.number(), start);
            }
            _ => {
                for (word, token) in [
                    (&b"true"[..], Token::Bool(true)),
                    (b"false", Token::Bool(false)),
                    (b"null", Token::Null),
                ] {
                    if self.rest_starts_with(word) {
                        self.pos += word.len();
                        return (token, start);
                    }
                }
                if self.invalid_numbers
                    && matches!(self.at(start), b'+' | b'i' | b'I' | b'n' | b'N')
                    && self.invalid_number()
                {
                    return (self.number(), start);
                }
                return (Token::Error("invalid token"), start);
            }
        };
        self.pos += 1;
        (single, start)
    }

    /// Whether what starts here is a number strict JSON refuses but
    /// `strtod` reads: a leading `+` or zero, hex, infinity or NaN.
    fn invalid_number(&self) -> bool {
        let mut p = self.pos;
        match self.at(p) {
            b'+' => return true,
            b'-' => p += 1,
            _ => {}
        }
        if self.at(p) == b'0' {
            let next = self.at(p + 1);
            return next | 0x20 == b'x' || next.is_ascii_digit();
        }
        if self.at(p) <= b'9' {
            return false;
        }
        let rest = &self.data[p.min(self.data.len())..];
        starts_with_ignore_case(rest, b"inf") || starts_with_ignore_case(rest, b"nan")
    }

    fn number(&mut self) -> Token {
        match strtod(&self.data[self.pos..]) {
            Some((n, len)) => {
                self.pos += len;
                Token::Number(n)
            }
            None => Token::Error("invalid number"),
        }
    }

    /// A string token; `pos` is at its opening quote. An error leaves
    /// `pos` where it was found.
    fn string(&mut self) -> Token {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.at(self.pos) {
                b'"' => {
                    self.pos += 1;
                    return Token::Str(out);
                }
                0 => return Token::Error("unexpected end of string"),
                b'\\' => {
                    let c = match self.at(self.pos + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => match self.unicode_escape(&mut out) {
                            Some(len) => {
                                self.pos += len;
                                continue;
                            }
                            None => return Token::Error("invalid unicode escape code"),
                        },
                        _ => return Token::Error("invalid escape code"),
                    };
                    out.push(c);
                    self.pos += 2;
                }
                c => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (at..at + 4).try_fold(0u32, |acc, i| {
            let d = (self.at(i) as char).to_digit(16)?;
            Some(acc << 4 | d)
        })
    }

    /// Appends the character of the `\uXXXX` escape (or surrogate pair)
    /// at `pos` as UTF-8; returns the escape's length.
    fn unicode_escape(&self, out: &mut Vec<u8>) -> Option<usize> {
        let mut cp = self.hex4(self.pos + 2)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            // Only a high surrogate followed by an escaped low one.
            if cp & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.pos + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        // Every value reaching here is a scalar value: surrogates were
        // paired or refused above.
        let ch = char::from_u32(cp)?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        Some(len)
    }

    fn descend(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return fail(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            ));
        }
        Ok(())
    }

    fn value(&mut self, token: Token, at: usize) -> mlua::Result<Value> {
        Ok(match token {
            Token::Str(s) => Value::String(self.lua.create_string(&s)?),
            Token::Number(n) => Value::Number(n),
            Token::Bool(b) => Value::Boolean(b),
            Token::Null => Value::NULL,
            Token::ObjBegin => self.object()?,
            Token::ArrBegin => self.array()?,
            other => return expected("value", &other, at),
        })
    }

    fn object(&mut self) -> mlua::Result<Value> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let (mut token, mut at) = self.next_token();
        if matches!(token, Token::ObjEnd) {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        loop {
            let Token::Str(key) = token else {
                return expected("object key string", &token, at);
            };
            let key = self.lua.create_string(&key)?;
            let (colon, at_colon) = self.next_token();
            if !matches!(colon, Token::Colon) {
                return expected("colon", &colon, at_colon);
            }
            let (v, at_v) = self.next_token();
            let v = self.value(v, at_v)?;
            t.raw_set(key, v)?;
            let (next, at_next) = self.next_token();
            match next {
                Token::ObjEnd => {
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                Token::Comma => (token, at) = self.next_token(),
                other => return expected("comma or object end", &other, at_next),
            }
        }
    }

    fn array(&mut self) -> mlua::Result<Value> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let (mut token, mut at) = self.next_token();
        if matches!(token, Token::ArrEnd) {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        for i in 1.. {
            let v = self.value(token, at)?;
            t.raw_set(i, v)?;
            let (next, at_next) = self.next_token();
            match next {
                Token::ArrEnd => break,
                Token::Comma => (token, at) = self.next_token(),
                other => return expected("comma or array end", &other, at_next),
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }
}

fn starts_with_ignore_case(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// The number C's `strtod` reads at the start of `s` and its length, or
/// None if it reads none: an optional sign, then a decimal number with an
/// optional exponent, a hex one (`0x1.8p3`), `inf`, `infinity` or `nan`
/// (with an optional `(chars)`), in any case. Out of range is infinity.
pub(super) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let negative = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let signed = |v: f64| if negative { -v } else { v };
    let rest = &s[i..];
    if starts_with_ignore_case(rest, b"infinity") {
        return Some((signed(f64::INFINITY), i + 8));
    }
    if starts_with_ignore_case(rest, b"inf") {
        return Some((signed(f64::INFINITY), i + 3));
    }
    if starts_with_ignore_case(rest, b"nan") {
        let mut len = i + 3;
        if at(len) == b'(' {
            let close = (len + 1..s.len())
                .take_while(|&j| at(j).is_ascii_alphanumeric() || at(j) == b'_' || at(j) == b')')
                .find(|&j| at(j) == b')');
            if let Some(j) = close {
                len = j + 1;
            }
        }
        return Some((signed(f64::NAN), len));
    }
    if at(i) == b'0' && at(i + 1) | 0x20 == b'x' {
        if let Some((v, len)) = hex_float(&s[i + 2..]) {
            return Some((signed(v), i + 2 + len));
        }
        // "0x" with no hex digit after it: the 0 alone.
        return Some((signed(0.0), i + 1));
    }
    let digits = |from: usize| (from..).take_while(|&j| at(j).is_ascii_digit()).count();
    let int = digits(i);
    let mut end = i + int;
    let mut frac = 0;
    if at(end) == b'.' {
        frac = digits(end + 1);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    if at(end) | 0x20 == b'e' {
        let sign = usize::from(matches!(at(end + 1), b'+' | b'-'));
        let exp = digits(end + 1 + sign);
        if exp > 0 {
            end += 1 + sign + exp;
        }
    }
    // What was scanned is a valid Rust float literal, sign included.
    let text = std::str::from_utf8(&s[..end]).ok()?;
    let v: f64 = text.parse().ok()?;
    Some((v, end))
}

/// A hex float's digits after `0x`: `h*[.h*][p[+-]d+]`, at least one hex
/// digit.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let hex = |c: u8| (c as char).to_digit(16);
    let (mut mantissa, mut exp2, mut i, mut seen) = (0f64, 0i64, 0, false);
    while let Some(d) = hex(at(i)) {
        mantissa = mantissa * 16.0 + f64::from(d);
        seen = true;
        i += 1;
    }
    if at(i) == b'.' {
        let mut j = i + 1;
        while let Some(d) = hex(at(j)) {
            mantissa = mantissa * 16.0 + f64::from(d);
            exp2 -= 4;
            seen = true;
            j += 1;
        }
        if seen {
            i = j;
        }
    }
    if !seen {
        return None;
    }
    if at(i) | 0x20 == b'p' {
        let sign = usize::from(matches!(at(i + 1), b'+' | b'-'));
        let digits = (i + 1 + sign..)
            .take_while(|&j| at(j).is_ascii_digit())
            .count();
        if digits > 0 {
            let text = std::str::from_utf8(&s[i + 1 + sign..i + 1 + sign + digits]).ok()?;
            let e: i64 = text.parse().unwrap_or(i64::MAX / 2);
            exp2 = if at(i + 1) == b'-' {
                exp2.saturating_sub(e)
            } else {
                exp2.saturating_add(e)
            };
            i += 1 + sign + digits;
        }
    }
    let e = exp2.clamp(-2000, 2000) as i32;
    Some((mantissa * 2f64.powi(e), i))
}

#[cfg(test)]
mod tests {
    use super::strtod;

    #[test]
    fn strtod_reads_what_c_reads() {
        let cases: &[(&str, f64, usize)] = &[
            ("1", 1.0, 1),
            ("-1.5e3x", -1500.0, 6),
            ("1.5e", 1.5, 3),
            ("1e+", 1.0, 1),
            ("5.", 5.0, 2),
            ("-.5", -0.5, 3),
            ("+5", 5.0, 2),
            ("01", 1.0, 2),
            ("0x10", 16.0, 4),
            ("0x1.8p1", 3.0, 7),
            ("0xg", 0.0, 1),
            ("1e400", f64::INFINITY, 5),
            ("-inf", f64::NEG_INFINITY, 4),
            ("Infinity", f64::INFINITY, 8),
            ("infinit", f64::INFINITY, 3),
        ];
        for &(text, v, len) in cases {
            assert_eq!(strtod(text.as_bytes()), Some((v, len)), "{text}");
        }
        let (nan, len) = strtod(b"nan(12)x").unwrap();
        assert!(nan.is_nan());
        assert_eq!(len, 7);
        for text in ["", "-", ".", "-.e1", "x"] {
            assert_eq!(strtod(text.as_bytes()), None, "{text}");
        }
    }
}
