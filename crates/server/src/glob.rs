//! Redis-style glob matching (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes), used by
//! KEYS, SCAN MATCH, CONFIG GET and friends.

/// True if `text` matches `pattern`. `nocase` folds ASCII case.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    // Iterative with one backtrack point for the last `*`, so pathological
    // patterns cannot recurse deeply or take exponential time.
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class_match(pattern, p, text[t], nocase) {
                        if matched {
                            p = next;
                            t += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], text[t]) {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, text[t]) {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, st)) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches a `[...]` class starting at `p`; returns (matched, index after `]`).
fn class_match(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let mut i = p + 1;
    let negate = i < pattern.len() && pattern[i] == b'^';
    if negate {
        i += 1;
    }
    let fold = |x: u8| if nocase { x.to_ascii_lowercase() } else { x };
    let c = fold(c);
    let mut matched = false;
    loop {
        if i >= pattern.len() {
            // Unterminated class: Redis treats the rest as the class.
            return Some((matched != negate, i));
        }
        match pattern[i] {
            b']' => return Some((matched != negate, i + 1)),
            b'\\' if i + 1 < pattern.len() => {
                if fold(pattern[i + 1]) == c {
                    matched = true;
                }
                i += 2;
            }
            lo if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']' => {
                let (mut a, mut b) = (fold(lo), fold(pattern[i + 2]));
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                if (a..=b).contains(&c) {
                    matched = true;
                }
                i += 3;
            }
            x => {
                if fold(x) == c {
                    matched = true;
                }
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn patterns() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h*llo", b"heeeello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"key:\\*", b"key:*", false));
        assert!(!glob_match(b"key:\\*", b"key:a", false));
        assert!(glob_match(b"MAXMEM*", b"maxmemory", true));
        assert!(!glob_match(b"a*b", b"acd", false));
        assert!(!glob_match(b"*a*a*a*a*a*a*a*b", &[b'a'; 20], false));
    }
}
