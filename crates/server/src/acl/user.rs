//! A user: whether it may log in, its password hashes, and its selectors.

use super::selector::Selector;
use super::RuleError;
use sha2::{Digest, Sha256};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sanitize {
    Payload,
    SkipPayload,
}

#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    /// Any password logs in.
    pub nopass: bool,
    pub sanitize: Sanitize,
    /// SHA-256 of each password, lower-case hex, in the order added.
    pub passwords: Vec<String>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
}

impl User {
    /// A user as `ACL SETUSER` creates it: off, no password, no commands,
    /// no keys, and channels as `acl-pubsub-default` says.
    pub fn new(name: &str, all_channels: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: Sanitize::Payload,
            passwords: Vec::new(),
            root: Selector::new(all_channels),
            selectors: Vec::new(),
        }
    }

    /// The built-in `default` user: on, no password, everything allowed.
    pub fn default_user() -> User {
        let mut u = User::new("default", true);
        for r in ["+@all", "~*", "&*", "on", "nopass"] {
            let applied = u.apply(r, true);
            debug_assert!(applied.is_ok());
        }
        u
    }

    /// Every command, key and channel, with no selector to consult.
    pub fn unrestricted(&self) -> bool {
        self.root.unrestricted()
    }

    /// Applies one user-level or root-selector rule. A `(...)` argument is
    /// a whole selector.
    pub fn apply(&mut self, op: &str, pubsub_default_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.sanitize = Sanitize::SkipPayload,
            "sanitize-payload" => self.sanitize = Sanitize::Payload,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels"] {
                    self.apply(r, pubsub_default_all)?;
                }
                if pubsub_default_all {
                    self.apply("allchannels", pubsub_default_all)?;
                }
                for r in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                    self.apply(r, pubsub_default_all)?;
                }
            }
            _ => return self.apply_other(op, pubsub_default_all),
        }
        Ok(())
    }

    fn apply_other(&mut self, op: &str, pubsub_default_all: bool) -> Result<(), RuleError> {
        let b = op.as_bytes();
        match b[0] {
            b'>' | b'#' => {
                let hash = if b[0] == b'>' {
                    hash_password(&b[1..])
                } else {
                    checked_hash(&op[1..])?
                };
                if !self.passwords.contains(&hash) {
                    self.passwords.push(hash);
                }
                self.nopass = false;
            }
            b'<' | b'!' => {
                let hash = if b[0] == b'<' {
                    hash_password(&b[1..])
                } else {
                    checked_hash(&op[1..])?
                };
                let pos = self
                    .passwords
                    .iter()
                    .position(|p| *p == hash)
                    .ok_or(RuleError::NoSuchPassword)?;
                self.passwords.remove(pos);
            }
            b'(' if b.len() > 1 && b[b.len() - 1] == b')' => {
                let mut s = Selector::new(pubsub_default_all);
                for r in op[1..op.len() - 1].split(' ').filter(|r| !r.is_empty()) {
                    s.apply(r)?;
                }
                self.selectors.push(s);
            }
            _ => self.root.apply(op)?,
        }
        Ok(())
    }

    /// Whether `password` logs this user in.
    pub fn password_matches(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hash = hash_password(password);
        // Compare every stored hash fully, so timing says nothing.
        self.passwords.iter().fold(false, |ok, p| {
            ok | constant_time_eq(p.as_bytes(), hash.as_bytes())
        })
    }

    /// The flags ACL GETUSER and ACL LIST show, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut v = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            v.push("nopass");
        }
        v.push(match self.sanitize {
            Sanitize::SkipPayload => "skip-sanitize-payload",
            Sanitize::Payload => "sanitize-payload",
        });
        v
    }

    /// The user as rules that rebuild it, without the `user <name>` head.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.flags().iter().map(|f| f.to_string()).collect();
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        parts.push(self.root.describe());
        parts.extend(self.selectors.iter().map(|s| format!("({})", s.describe())));
        parts.join(" ")
    }

    /// The root selector first, then the others.
    pub fn all_selectors(&self) -> impl Iterator<Item = &Selector> {
        std::iter::once(&self.root).chain(self.selectors.iter())
    }
}

pub fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn checked_hash(hex: &str) -> Result<String, RuleError> {
    if hex.len() == 64
        && hex
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    {
        Ok(hex.to_string())
    } else {
        Err(RuleError::BadHash)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_user_describes_itself_as_redis_does() {
        let u = User::default_user();
        assert_eq!(u.describe(), "on nopass sanitize-payload ~* &* +@all");
        assert!(u.unrestricted());
    }

    #[test]
    fn a_new_user_is_off_with_nothing_allowed() {
        let u = User::new("alice", false);
        assert_eq!(u.describe(), "off sanitize-payload resetchannels -@all");
        assert!(!u.password_matches(b""));
    }

    #[test]
    fn passwords_are_stored_hashed_and_removed_by_value_or_hash() {
        let mut u = User::new("u", false);
        u.apply(">p1", false).unwrap();
        u.apply(">p2", false).unwrap();
        assert!(u.password_matches(b"p1") && u.password_matches(b"p2"));
        u.apply("<p1", false).unwrap();
        assert!(!u.password_matches(b"p1"));
        assert_eq!(u.apply("<p1", false), Err(RuleError::NoSuchPassword));
        let h = hash_password(b"p2");
        u.apply(&format!("!{h}"), false).unwrap();
        assert!(u.passwords.is_empty());
        assert_eq!(u.apply("#abc", false), Err(RuleError::BadHash));
        u.apply(&format!("#{}", hash_password(b"p3")), false)
            .unwrap();
        assert!(u.password_matches(b"p3"));
        u.apply("nopass", false).unwrap();
        assert!(u.password_matches(b"anything"));
        u.apply("resetpass", false).unwrap();
        assert!(!u.password_matches(b"anything"));
    }

    #[test]
    fn odd_rules_are_answered_never_panicked_on() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let alphabet: Vec<char> = "+-@~%&#!<>()|*RWrw aé\0xyz".chars().collect();
        let fixed = [
            "",
            "+",
            "-",
            "+@",
            "-@",
            "~",
            "%",
            "%R",
            "%R~",
            "%~",
            "%RR~a",
            "&",
            "#",
            "!",
            ">",
            "<",
            "(",
            ")",
            "()",
            "( )",
            "(+get",
            "+get)",
            "+|",
            "+get|",
            "+|x",
            "+client||id",
            "+config|get|x",
            "-client|nosuch",
            "é",
            "%é~x",
            "+@ALL",
            "-@Read",
        ];
        let mut u = User::new("fuzz", false);
        for r in fixed {
            let _ = u.apply(r, false);
            let _ = u.describe();
        }
        for _ in 0..20_000 {
            let len = rng.gen_range(0..8);
            let r: String = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            let _ = u.apply(&r, rng.gen_bool(0.5));
            if rng.gen_ratio(1, 100) {
                let _ = u.describe();
                u = User::new("fuzz", false);
            }
        }
    }

    #[test]
    fn selectors_are_described_in_parentheses() {
        let mut u = User::new("u", false);
        u.apply("(~a* +get)", false).unwrap();
        assert_eq!(
            u.describe(),
            "off sanitize-payload resetchannels -@all (~a* resetchannels -@all +get)"
        );
        u.apply("clearselectors", false).unwrap();
        assert!(u.selectors.is_empty());
    }
}
