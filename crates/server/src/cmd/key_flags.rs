//! The flags of each command's key specs (Redis 7's `RO`/`RW`/`OW`/`RM`
//! with `access`/`update`/`insert`/`delete`), as COMMAND GETKEYSANDFLAGS
//! reports them and ACL key permissions (`%R~`, `%W~`) check them.
//!
//! A command's keys map onto its specs in order: the i-th key reported has
//! the i-th spec's flags, and every key past the last spec has the last
//! one's (MSET's pairs, ZUNIONSTORE's sources, LMOVE's destination).
//!
//! The flags are those of Redis's key specs ([`super::key_specs`]); only
//! what Redis gives no key specs is decided here: containers as a whole
//! (`xgroup`, `object`: their subcommands have the specs) and durakv's own
//! commands.

const RO_ACCESS: &[&str] = &["RO", "access"];
const RO: &[&str] = &["RO"];
const RW_ACCESS_UPDATE: &[&str] = &["RW", "access", "update"];

/// The key specs' flags of `name`, one per spec; `write` picks the
/// default for commands Redis has no key specs for (a read is `RO access`,
/// a write `RW access update`).
pub fn key_spec_flags(name: &str, write: bool) -> Vec<&'static [&'static str]> {
    use super::key_specs::{redis_key_specs, Begin};
    if let Some(specs) = redis_key_specs(name) {
        let n = specs.len();
        // SORT's BY/GET spec (begin_search unknown) is for keys GETKEYS
        // never reports; its STORE key is the one after the sorted key.
        return specs
            .iter()
            .enumerate()
            .filter(|(i, s)| i + 1 == n || s.begin != Begin::Unknown)
            .map(|(_, s)| s.flags)
            .collect();
    }
    let flags = match name {
        // Their subcommands' keys are only looked at.
        "object" | "memory" => RO,
        _ if write => RW_ACCESS_UPDATE,
        _ => RO_ACCESS,
    };
    vec![flags]
}

const OW_UPDATE: &[&str] = &["OW", "update"];

/// The key flags of the call `args` (name first) as Redis's key-finding
/// functions give them: a container's from its subcommand's specs, SET's
/// and BITFIELD's (`variable_flags`) from their arguments, MIGRATE's every
/// key from its first spec (the `KEYS` one is only a hint).
pub fn call_key_flags(
    name: &str,
    write: bool,
    args: &[bytes::Bytes],
) -> Vec<&'static [&'static str]> {
    let has = |from: usize, w: &str| {
        args.iter()
            .skip(from)
            .any(|a| a.eq_ignore_ascii_case(w.as_bytes()))
    };
    match name {
        "set" if has(3, "get") => return vec![RW_ACCESS_UPDATE],
        "set" => return vec![OW_UPDATE],
        "bitfield" if !has(2, "set") && !has(2, "incrby") => return vec![RO_ACCESS],
        "bitfield" => return vec![RW_ACCESS_UPDATE],
        "migrate" => return key_spec_flags(name, write).into_iter().take(1).collect(),
        _ => {}
    }
    let sub = args.get(1).and_then(|a| {
        super::subcommands::subcommands_of(name)
            .iter()
            .find(|s| a.eq_ignore_ascii_case(s.name.as_bytes()))
    });
    match sub.map(|s| format!("{name}|{}", s.name)) {
        Some(full) if super::key_specs::redis_key_specs(&full).is_some() => {
            key_spec_flags(&full, write)
        }
        _ => key_spec_flags(name, write),
    }
}

/// Whether a key with these flags is a channel, not a key (SPUBLISH's):
/// GETKEYS leaves it out, as Redis does.
pub fn is_not_key(flags: &[&str]) -> bool {
    flags.contains(&"not_key")
}

/// The flags of the `i`-th key a command reports.
pub fn flags_of_key(specs: &[&'static [&'static str]], i: usize) -> &'static [&'static str] {
    specs
        .get(i)
        .or_else(|| specs.last())
        .copied()
        .unwrap_or(RO_ACCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_past_the_last_spec_take_its_flags() {
        let lmove = key_spec_flags("lmove", true);
        assert_eq!(flags_of_key(&lmove, 0), &["RW", "access", "delete"]);
        assert_eq!(flags_of_key(&lmove, 1), &["RW", "insert"]);
        let mset = key_spec_flags("mset", true);
        assert_eq!(flags_of_key(&mset, 3), &["OW", "update"]);
        assert_eq!(flags_of_key(&key_spec_flags("get", false), 0), RO_ACCESS);
    }

    #[test]
    fn call_flags_follow_arguments_and_subcommands() {
        let args = |s: &str| -> Vec<bytes::Bytes> {
            s.split(' ')
                .map(|w| bytes::Bytes::copy_from_slice(w.as_bytes()))
                .collect()
        };
        let f = |s: &str| call_key_flags(s.split(' ').next().unwrap(), true, &args(s));
        assert_eq!(f("set k v"), vec![OW_UPDATE]);
        assert_eq!(f("set k v GET"), vec![RW_ACCESS_UPDATE]);
        assert_eq!(f("bitfield k get u8 0"), vec![RO_ACCESS]);
        assert_eq!(f("xgroup create k g $"), vec![&["RW", "insert"][..]]);
        assert_eq!(f("migrate h 1 k 0 5").len(), 1);
    }

    #[test]
    fn sort_store_key_is_overwritten() {
        let sort = key_spec_flags("sort", false);
        assert_eq!(flags_of_key(&sort, 0), RO_ACCESS);
        assert_eq!(flags_of_key(&sort, 1), &["OW", "update"]);
        assert_eq!(
            flags_of_key(&key_spec_flags("hdel", true), 0),
            &["RW", "delete"]
        );
    }
}
