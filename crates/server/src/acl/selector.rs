//! A selector: one set of command, key and channel permissions. A user has
//! a root selector and any number of `(...)` selectors; a command runs if
//! one of them allows the command, all its keys and all its channels.

use super::index::INDEX;
use super::RuleError;
use crate::glob::glob_match;

/// A key pattern and the access it grants (`~` both, `%R~` / `%W~` one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

impl KeyPattern {
    fn describe(&self) -> String {
        let pat = String::from_utf8_lossy(&self.pattern);
        match (self.read, self.write) {
            (true, true) => format!("~{pat}"),
            (true, false) => format!("%R~{pat}"),
            _ => format!("%W~{pat}"),
        }
    }
}

/// What a key argument is used for, from its key-spec flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyAccess {
    pub read: bool,
    pub write: bool,
}

#[derive(Clone, Debug)]
pub struct Selector {
    /// One bit per command or subcommand id ([`index::Index`]).
    allowed: Vec<u64>,
    /// Every bit is set: skip the lookup.
    all_commands: bool,
    /// The last of `+@all` / `-@all` was `+@all`: the description starts
    /// with it (and commands added later would be allowed).
    future_commands: bool,
    /// Command and category rules in the order they were applied, each
    /// at most once (`+get`, `-@string`, `+client|id`).
    rules: Vec<String>,
    /// First arguments allowed for a command whose bit is clear: Redis's
    /// deprecated `+select|0`, `+debug|digest`.
    first_args: Vec<(usize, Vec<String>)>,
    keys: Vec<KeyPattern>,
    all_keys: bool,
    channels: Vec<Vec<u8>>,
    all_channels: bool,
}

impl Selector {
    /// No commands, no keys; channels as `acl-pubsub-default` says.
    pub fn new(all_channels: bool) -> Selector {
        Selector {
            allowed: vec![0; INDEX.count.div_ceil(64)],
            all_commands: false,
            future_commands: false,
            rules: Vec::new(),
            first_args: Vec::new(),
            keys: Vec::new(),
            all_keys: false,
            channels: Vec::new(),
            all_channels,
        }
    }

    /// Allows every command, key and channel: nothing to check.
    pub fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    pub fn all_keys(&self) -> bool {
        self.all_keys
    }

    pub fn all_channels(&self) -> bool {
        self.all_channels
    }

    pub fn channels(&self) -> &[Vec<u8>] {
        &self.channels
    }

    /// Applies one rule; on error the selector may be half-changed, so
    /// callers work on a copy.
    pub fn apply(&mut self, op: &str) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.keys.clear();
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            "allcommands" | "+@all" => {
                self.allowed.iter_mut().for_each(|w| *w = u64::MAX);
                self.all_commands = true;
                self.future_commands = true;
                self.rules.clear();
                self.first_args.clear();
            }
            "nocommands" | "-@all" => {
                self.allowed.iter_mut().for_each(|w| *w = 0);
                self.all_commands = false;
                self.future_commands = false;
                self.rules.clear();
                self.first_args.clear();
            }
            _ => self.apply_pattern_or_command(op, &lower)?,
        }
        Ok(())
    }

    fn apply_pattern_or_command(&mut self, op: &str, lower: &str) -> Result<(), RuleError> {
        let b = op.as_bytes();
        match b.first() {
            Some(b'~' | b'%') => self.add_key_pattern(b),
            Some(b'&') => {
                if self.all_channels {
                    return Err(RuleError::ChannelAfterAll);
                }
                let pat = &b[1..];
                if has_space(pat) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pat) {
                    self.channels.push(pat.to_vec());
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) => {
                let allow = sign == b'+';
                let name = &lower[1..];
                if let Some(cat) = name.strip_prefix('@') {
                    let mask = super::categories::bit(cat).ok_or(RuleError::Unknown)?;
                    for id in 0..INDEX.count {
                        if INDEX.categories[id] & mask != 0 {
                            self.set_bit(id, allow);
                        }
                    }
                    self.record(name, allow);
                    return Ok(());
                }
                if allow {
                    if let Some((cmd, arg)) = name.rsplit_once('|') {
                        return self.allow_sub_or_first_arg(name, cmd, arg);
                    }
                }
                self.apply_command(name, allow)
            }
            _ => Err(RuleError::Syntax),
        }
    }

    /// `+container|sub`, or `+command|arg` for a command without
    /// subcommands (allowed only with that first argument).
    fn allow_sub_or_first_arg(
        &mut self,
        name: &str,
        cmd: &str,
        arg: &str,
    ) -> Result<(), RuleError> {
        let id = INDEX.id(cmd).ok_or(RuleError::Unknown)?;
        if INDEX.parent[id].is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if arg.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !INDEX.subs_of(id).is_empty() {
            return self.apply_command(name, true);
        }
        match self.first_args.iter_mut().find(|(c, _)| *c == id) {
            Some((_, args)) if !args.iter().any(|a| a == arg) => args.push(arg.to_string()),
            Some(_) => {}
            None => self.first_args.push((id, vec![arg.to_string()])),
        }
        self.record(name, true);
        Ok(())
    }

    fn apply_command(&mut self, name: &str, allow: bool) -> Result<(), RuleError> {
        let id = INDEX.id(name).ok_or(RuleError::Unknown)?;
        self.set_bit(id, allow);
        self.first_args.retain(|(c, _)| *c != id);
        for &sub in INDEX.subs_of(id) {
            self.set_bit(sub, allow);
        }
        self.record(&INDEX.names[id], allow);
        Ok(())
    }

    fn add_key_pattern(&mut self, b: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAll);
        }
        let (read, write, offset) = if b[0] == b'%' {
            let (mut read, mut write) = (false, false);
            let mut i = 1;
            loop {
                match b.get(i).map(u8::to_ascii_uppercase) {
                    Some(b'R') if !read => read = true,
                    Some(b'W') if !write => write = true,
                    Some(b'~') if read || write => break,
                    _ => return Err(RuleError::Syntax),
                }
                i += 1;
            }
            (read, write, i + 1)
        } else {
            (true, true, 1)
        };
        let pattern = &b[offset..];
        if has_space(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => {
                k.read |= read;
                k.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        let (w, b) = (id / 64, id % 64);
        if on {
            self.allowed[w] |= 1 << b;
        } else {
            self.allowed[w] &= !(1 << b);
            self.all_commands = false;
        }
    }

    /// Keeps the rule list as Redis shows it: a rule replaces an earlier
    /// one for the same name, and for that name's subcommands.
    fn record(&mut self, name: &str, allow: bool) {
        self.rules.retain(|r| {
            let existing = &r[1..];
            !(existing == name
                || existing
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('|')))
        });
        self.rules
            .push(format!("{}{name}", if allow { '+' } else { '-' }));
    }

    /// Whether the call may run: its bit, or an allowed first argument.
    pub fn allows_call(&self, id: usize, args: &[bytes::Bytes]) -> bool {
        self.allows_command(id)
            || args.get(1).is_some_and(|a| {
                self.first_args.iter().any(|(c, v)| {
                    *c == id && v.iter().any(|x| a.eq_ignore_ascii_case(x.as_bytes()))
                })
            })
    }

    pub fn allows_command(&self, id: usize) -> bool {
        self.all_commands || self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    pub fn allows_key(&self, key: &[u8], access: KeyAccess) -> bool {
        self.all_keys
            || self.keys.iter().any(|p| {
                (p.read || !access.read)
                    && (p.write || !access.write)
                    && glob_match(&p.pattern, key, false)
            })
    }

    /// Every key is readable: `allkeys`, or a readable `*` pattern.
    pub fn all_keys_pattern_readable(&self) -> bool {
        self.all_keys || self.keys.iter().any(|k| k.read && k.pattern == b"*")
    }

    /// A channel (or, for pattern subscriptions, the pattern itself, which
    /// must be one the user was given literally).
    pub fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p == channel
                } else {
                    glob_match(p, channel, false)
                }
            })
    }

    /// `+@all -debug`, as ACL GETUSER's `commands`.
    pub fn describe_commands(&self) -> String {
        let mut s = String::from(if self.future_commands {
            "+@all"
        } else {
            "-@all"
        });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// `~a* %R~b*`, as ACL GETUSER's `keys`.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let v: Vec<String> = self.keys.iter().map(KeyPattern::describe).collect();
        v.join(" ")
    }

    /// `&a &b`, as ACL GETUSER's `channels`.
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let v: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        v.join(" ")
    }

    /// The selector as rules that rebuild it (ACL LIST, ACL SAVE).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.all_keys {
            parts.push("~*".to_string());
        } else {
            parts.extend(self.keys.iter().map(KeyPattern::describe));
        }
        if self.all_channels {
            parts.push("&*".into());
        } else {
            parts.push("resetchannels".into());
            parts.extend(
                self.channels
                    .iter()
                    .map(|c| format!("&{}", String::from_utf8_lossy(c))),
            );
        }
        parts.push(self.describe_commands());
        parts.join(" ")
    }
}

fn has_space(b: &[u8]) -> bool {
    b.iter()
        .any(|&c| c.is_ascii_whitespace() || c == 0x0b || c == 0)
}

/// The access a command's `i`-th key needs, from its key-spec flags (for
/// SET ... GET, BITFIELD with only GETs and a container's subcommand, as
/// its arguments make them: see [`crate::cmd::key_flags::call_key_flags`]).
/// The ACL check takes the call's flags once for all its keys.
#[cfg(test)]
fn key_access(command: &str, is_write: bool, i: usize, args: &[bytes::Bytes]) -> KeyAccess {
    let specs = crate::cmd::key_flags::call_key_flags(command, is_write, args);
    access_of(crate::cmd::key_flags::flags_of_key(&specs, i))
}

/// The access a key with these key-spec flags needs.
pub fn access_of(flags: &[&str]) -> KeyAccess {
    let has = |f: &str| flags.iter().any(|x| x.eq_ignore_ascii_case(f));
    KeyAccess {
        read: has("access"),
        write: has("insert") || has("delete") || has("update"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(rules: &[&str]) -> Selector {
        let mut s = Selector::new(false);
        for r in rules {
            s.apply(r).unwrap();
        }
        s
    }

    #[test]
    fn rules_replace_earlier_rules_for_the_same_name() {
        let s = sel(&["-@all", "+get", "+set", "-get"]);
        assert_eq!(s.describe_commands(), "-@all +set -get");
        let s = sel(&["+client|id", "+client"]);
        assert_eq!(s.describe_commands(), "-@all +client");
        let s = sel(&["+@all", "-debug"]);
        assert_eq!(s.describe_commands(), "+@all -debug");
        assert!(!s.allows_command(INDEX.id("debug").unwrap()));
        assert!(s.allows_command(INDEX.id("get").unwrap()));
    }

    #[test]
    fn a_container_rule_covers_its_subcommands() {
        let s = sel(&["+client", "-client|kill"]);
        assert!(s.allows_command(INDEX.id("client|id").unwrap()));
        assert!(!s.allows_command(INDEX.id("client|kill").unwrap()));
    }

    #[test]
    fn a_first_argument_rule_allows_only_that_argument() {
        let s = sel(&["-@all", "+select|0"]);
        let id = INDEX.id("select").unwrap();
        let call = |a: &str| {
            vec![
                bytes::Bytes::from("select"),
                bytes::Bytes::from(a.to_string()),
            ]
        };
        assert!(s.allows_call(id, &call("0")));
        assert!(!s.allows_call(id, &call("1")));
        assert_eq!(s.describe_commands(), "-@all +select|0");
        let s = sel(&["-@all", "+select|0", "-select"]);
        assert!(!s.allows_call(id, &call("0")));
        assert_eq!(s.describe_commands(), "-@all -select");
    }

    #[test]
    fn key_patterns_grant_read_and_write_separately() {
        let s = sel(&["%R~r*", "%W~w*", "~b*"]);
        let (r, w) = (
            KeyAccess {
                read: true,
                write: false,
            },
            KeyAccess {
                read: false,
                write: true,
            },
        );
        assert!(s.allows_key(b"r1", r) && !s.allows_key(b"r1", w));
        assert!(s.allows_key(b"w1", w) && !s.allows_key(b"w1", r));
        assert!(s.allows_key(b"b1", r) && s.allows_key(b"b1", w));
        assert_eq!(s.describe_keys(), "%R~r* %W~w* ~b*");
        assert_eq!(sel(&["%RW~x"]).describe_keys(), "~x");
    }

    #[test]
    fn bad_rules_are_refused() {
        let mut s = Selector::new(false);
        assert_eq!(s.apply("+nosuch"), Err(RuleError::Unknown));
        assert_eq!(s.apply("+@nosuch"), Err(RuleError::Unknown));
        assert_eq!(s.apply("%X~a"), Err(RuleError::Syntax));
        assert_eq!(s.apply("%R"), Err(RuleError::Syntax));
        assert_eq!(s.apply("+client|"), Err(RuleError::Syntax));
        assert_eq!(
            s.apply("+client|id|x"),
            Err(RuleError::FirstArgOfSubcommand)
        );
        assert_eq!(s.apply("+get|a|b"), Err(RuleError::Unknown));
        s.apply("allkeys").unwrap();
        assert_eq!(s.apply("~a"), Err(RuleError::KeyAfterAll));
        s.apply("&*").unwrap();
        assert_eq!(s.apply("&a"), Err(RuleError::ChannelAfterAll));
    }

    #[test]
    fn pattern_subscriptions_need_the_pattern_itself() {
        let s = sel(&["&news.*"]);
        assert!(s.allows_channel(b"news.1", false));
        assert!(s.allows_channel(b"news.*", true));
        assert!(!s.allows_channel(b"news.1*", true));
        assert_eq!(s.describe(), "resetchannels &news.* -@all");
    }

    #[test]
    fn key_access_follows_key_specs() {
        let args = |s: &str| -> Vec<bytes::Bytes> {
            s.split(' ')
                .map(|w| bytes::Bytes::from(w.to_string()))
                .collect()
        };
        let a = key_access("get", false, 0, &args("get k"));
        assert!(a.read && !a.write);
        let a = key_access("set", true, 0, &args("set k v"));
        assert!(!a.read && a.write);
        let a = key_access("set", true, 0, &args("set k v get"));
        assert!(a.read && a.write);
        let a = key_access("bitfield", true, 0, &args("bitfield k get u4 0"));
        assert!(a.read && !a.write);
        let a = key_access("bitfield", true, 0, &args("bitfield k set u4 0 1"));
        assert!(a.read && a.write);
        let a = key_access("lmove", true, 0, &args("lmove a b left left"));
        assert!(a.read && a.write);
        let a = key_access("exists", false, 0, &args("exists k"));
        assert!(!a.read && !a.write);
    }
}
