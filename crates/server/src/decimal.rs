//! Exact decimal arithmetic for INCRBYFLOAT. Redis adds in C `long double`
//! and prints 17 fractional digits (`%.17Lf`, zeros trimmed), so `0.1 + 0.2`
//! is `0.3` there, which f64 cannot reproduce. Adding the decimal texts
//! exactly and rounding to 17 fractional digits gives the same answer as
//! Redis where `long double` is binary128 (aarch64). x86-64 Redis's 80-bit
//! `long double` shows artifacts on larger values (`1000.5 + 0.3` prints
//! `1000.79999999999999999`) that this deliberately does not copy.
//!
//! A `long double` also reaches far past a double: Redis takes `1e400`
//! and adds to it, and refuses as not a float only what `strtold` finds
//! out of its range (past about 1.19e4932, or below about 3.6e-4951 and
//! not zero). [`sum`] keeps those rules.

/// Beyond these sizes the exact path is not worth its cost; the caller
/// falls back to f64. (A `long double`'s decimal exponents run from about
/// -4951 to 4932.)
const MAX_EXPONENT: i64 = 5000;
const MAX_DIGITS: usize = 1000;
/// Redis prints INCRBYFLOAT results with this many fractional digits.
const FRACTION_DIGITS: i64 = 17;

/// `digits` (most significant first) × 10^`exp`, negated when `neg`.
struct Decimal {
    neg: bool,
    digits: Vec<u8>,
    exp: i64,
}

/// Parses `[+-]digits[.digits][e[+-]digits]` (digits on at least one
/// side of the point). Anything else (hex, `inf`) is left to f64.
fn parse(b: &[u8]) -> Option<Decimal> {
    let (neg, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let (mut digits, mut frac, mut dot) = (Vec::new(), 0i64, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'0'..=b'9' => {
                digits.push(c - b'0');
                frac += i64::from(dot);
            }
            b'.' if !dot => dot = true,
            _ => break,
        }
        i += 1;
    }
    if digits.is_empty() || digits.len() > MAX_DIGITS {
        return None;
    }
    let mut exp = 0i64;
    if let Some(&c) = b.get(i) {
        if c != b'e' && c != b'E' {
            return None;
        }
        i += 1;
        let eneg = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            exp = exp * 10 + i64::from(c - b'0');
            if exp > MAX_EXPONENT {
                return None;
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        if eneg {
            exp = -exp;
        }
    }
    if i != b.len() {
        return None;
    }
    Some(Decimal {
        neg,
        digits,
        exp: exp - frac,
    })
}

/// Little-endian digits of `d` scaled to exponent `exp` (<= d.exp).
fn scaled(d: &Decimal, exp: i64) -> Vec<u8> {
    let mut v = vec![0u8; (d.exp - exp) as usize];
    v.extend(d.digits.iter().rev());
    v
}

fn cmp_le(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let len = a.len().max(b.len());
    for i in (0..len).rev() {
        let (x, y) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    std::cmp::Ordering::Equal
}

fn add_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let mut carry = 0;
    for i in 0..a.len().max(b.len()) {
        let s = a.get(i).copied().unwrap_or(0) + b.get(i).copied().unwrap_or(0) + carry;
        out.push(s % 10);
        carry = s / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out
}

/// `a - b` for `a >= b`.
fn sub_le(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i8;
    for (i, &x) in a.iter().enumerate() {
        let mut d = x as i8 - b.get(i).copied().unwrap_or(0) as i8 - borrow;
        borrow = i8::from(d < 0);
        if d < 0 {
            d += 10;
        }
        out.push(d as u8);
    }
    out
}

/// The exact sum of two decimal texts, printed as Redis prints it.
#[cfg(test)]
fn add(a: &[u8], b: &[u8]) -> Option<String> {
    add_checked(a, b)?
}

/// The largest x86 `long double`, in significant digits and the
/// exponent of its first digit: 1.18973149535723176502e4932.
const LDBL_MAX_DIGITS: &[u8] = b"118973149535723176502";
const LDBL_MAX_EXP: i64 = 4932;
/// The exponent of the first digit of the smallest `long double` above
/// zero (a subnormal, 3.6e-4951): anything smaller reads as 0 with ERANGE.
const LDBL_MIN_EXP: i64 = -4951;

/// How a decimal's magnitude sits against a `long double`'s range.
#[derive(PartialEq)]
enum Range {
    Inside,
    Over,
    Under,
}

/// `digits` (most significant first, leading zeros allowed) × 10^`exp`.
fn range(digits: &[u8], exp: i64) -> Range {
    let Some(lead) = digits.iter().position(|&d| d != 0) else {
        return Range::Inside;
    };
    let sig = &digits[lead..];
    let top = exp + (sig.len() as i64) - 1;
    if top > LDBL_MAX_EXP {
        return Range::Over;
    }
    if top == LDBL_MAX_EXP {
        let n = sig.len().min(LDBL_MAX_DIGITS.len());
        let head = sig[..n]
            .iter()
            .map(|d| b'0' + d)
            .cmp(LDBL_MAX_DIGITS[..n].iter().copied());
        let rest_nonzero = sig[n..].iter().any(|&d| d != 0);
        if head.is_gt() || (head.is_eq() && rest_nonzero) {
            return Range::Over;
        }
    }
    if top < LDBL_MIN_EXP {
        return Range::Under;
    }
    Range::Inside
}

/// Whether `b` reads as a `long double` the way Redis's `string2ld`
/// takes one: `strtod`'s syntax over the whole text, not NaN, and inside
/// the range (`inf` itself is taken; what `strtold` overflows or
/// underflows to is not).
pub fn is_long_double(b: &[u8]) -> bool {
    if crate::util::parse_f64_saturating(b).is_none() {
        return false;
    }
    match parse(b) {
        Some(d) => range(&d.digits, d.exp) == Range::Inside,
        // Hex, `inf`, or past what the exact path reads: a double's rules.
        None => crate::util::parse_f64(b).is_some() || is_infinity(b),
    }
}

/// `inf` or `infinity`, signed or not, in any case.
pub fn is_infinity(b: &[u8]) -> bool {
    let b = b
        .strip_prefix(b"-")
        .or_else(|| b.strip_prefix(b"+"))
        .unwrap_or(b);
    b.eq_ignore_ascii_case(b"inf") || b.eq_ignore_ascii_case(b"infinity")
}

/// `a + b` as INCRBYFLOAT and HINCRBYFLOAT store it, for two texts
/// [`is_long_double`] took; None when the sum is NaN or infinite in a
/// `long double` (Redis's "increment would produce NaN or Infinity").
pub fn sum(a: &[u8], b: &[u8]) -> Option<String> {
    if let Some(text) = add_checked(a, b) {
        return text;
    }
    let v = crate::util::parse_f64_saturating(a)? + crate::util::parse_f64_saturating(b)?;
    v.is_finite().then(|| format_fixed17(v))
}

/// The exact sum, Some(None) when it leaves a `long double`'s range;
/// None when either text is not for the exact path.
fn add_checked(a: &[u8], b: &[u8]) -> Option<Option<String>> {
    let (a, b) = (parse(a)?, parse(b)?);
    let exp = a.exp.min(b.exp);
    let (x, y) = (scaled(&a, exp), scaled(&b, exp));
    let (neg, mag) = if a.neg == b.neg {
        (a.neg, add_le(&x, &y))
    } else if cmp_le(&x, &y).is_ge() {
        (a.neg, sub_le(&x, &y))
    } else {
        (b.neg, sub_le(&y, &x))
    };
    let msb_first: Vec<u8> = mag.iter().rev().copied().collect();
    if range(&msb_first, exp) == Range::Over {
        return Some(None);
    }
    Some(Some(format(neg, mag, exp)))
}

/// Prints little-endian digits × 10^`exp` rounded half-to-even to 17
/// fractional digits, trailing zeros and a bare point removed, and
/// never as `-0`.
fn format(neg: bool, mut mag: Vec<u8>, exp: i64) -> String {
    if exp < -FRACTION_DIGITS {
        let drop = (-FRACTION_DIGITS - exp) as usize;
        let first = mag.get(drop - 1).copied().unwrap_or(0);
        let rest_nonzero = mag[..(drop - 1).min(mag.len())].iter().any(|&d| d != 0);
        let kept = mag.get(drop..).unwrap_or_default();
        let last_odd = kept.first().is_some_and(|d| d % 2 == 1);
        let up = first > 5 || (first == 5 && (rest_nonzero || last_odd));
        let mut kept = kept.to_vec();
        if up {
            kept = add_le(&kept, &[1]);
        }
        mag = kept;
    } else {
        let mut v = vec![0u8; (exp + FRACTION_DIGITS) as usize];
        v.extend_from_slice(&mag);
        mag = v;
    }
    // Now mag × 10^-17.
    let frac_len = FRACTION_DIGITS as usize;
    while mag.len() <= frac_len {
        mag.push(0);
    }
    let int: String = mag[frac_len..]
        .iter()
        .rev()
        .map(|d| char::from(b'0' + d))
        .collect::<String>();
    let int = int.trim_start_matches('0');
    let frac: String = mag[..frac_len]
        .iter()
        .rev()
        .map(|d| char::from(b'0' + d))
        .collect();
    let frac = frac.trim_end_matches('0');
    let mut out = String::new();
    if neg && !(int.is_empty() && frac.is_empty()) {
        out.push('-');
    }
    out.push_str(if int.is_empty() { "0" } else { int });
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// The f64 fallback, printed the same way.
pub fn format_fixed17(v: f64) -> String {
    let s = format!("{v:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    match s {
        "-0" | "" => "0".to_string(),
        s => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_print_like_redis() {
        let add = |a: &str, b: &str| add(a.as_bytes(), b.as_bytes()).unwrap();
        assert_eq!(add("0.1", "0.2"), "0.3");
        assert_eq!(add("10.50", "0.1"), "10.6");
        assert_eq!(add("5.0e3", "2.0e2"), "5200");
        assert_eq!(add("1", "-1.1"), "-0.1");
        assert_eq!(add("0", "1e-20"), "0");
        assert_eq!(add("0", "-1e-20"), "0");
        assert_eq!(add("17179869184", "1.5"), "17179869185.5");
        assert_eq!(add("3", "-3"), "0");
        assert_eq!(add("0", "6e-18"), "0.00000000000000001");
        assert_eq!(add("0", "-6e-18"), "-0.00000000000000001");
        assert_eq!(add("0", "1e-30"), "0");
        assert_eq!(add("0", "0.000000000000000005"), "0");
        assert_eq!(add("0", "0.000000000000000015"), "0.00000000000000002");
        assert_eq!(add("0", "0.000000000000000025"), "0.00000000000000002");
        assert_eq!(add("0", "0.0000000000000000251"), "0.00000000000000003");
        assert_eq!(add("9.999999999999999999", "0"), "10");
        assert_eq!(add("+.5", "5."), "5.5");
        assert_eq!(add("1e2", "-250"), "-150");
        assert!(super::parse(b"0x10").is_none());
        assert!(super::parse(b"inf").is_none());
        assert_eq!(format_fixed17(0.5), "0.5");
        assert_eq!(format_fixed17(-0.0), "0");
    }

    #[test]
    fn a_long_double_reaches_past_a_double() {
        assert!(is_long_double(b"1e400"));
        assert!(is_long_double(b"-1.18973149535723176502e4932"));
        assert!(is_long_double(b"1e-4950"));
        assert!(is_long_double(b"inf"));
        assert!(is_long_double(b"0e99999"));
        assert!(!is_long_double(b"1.18973149535723176503e4932"));
        assert!(!is_long_double(b"1e4933"));
        assert!(!is_long_double(b"1e318446744073709551616"));
        assert!(!is_long_double(b"1e-4952"));
        assert!(!is_long_double(b"nan"));
        assert!(!is_long_double(b" 1"));
        let sum = |a: &str, b: &str| sum(a.as_bytes(), b.as_bytes());
        assert_eq!(sum("1e20", "1").as_deref(), Some("100000000000000000001"));
        assert_eq!(sum("1e400", "-1e400").as_deref(), Some("0"));
        assert_eq!(sum("1e400", "1").map(|s| s.len()), Some(401));
        assert_eq!(sum("1.1e4932", "1e4931"), None);
        assert_eq!(sum("inf", "1"), None);
        assert_eq!(sum("0x10", "1").as_deref(), Some("17"));
    }
}
