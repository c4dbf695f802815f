//! What COMMAND DOCS reports beyond a summary and a group: the version
//! that brought a command in, and its arguments, which redis-cli turns
//! into the hints it shows while a command is typed and into `help`'s
//! usage line. They come from `command_syntax_table`, one line per
//! (sub)command, where an argument is written
//! `[TOKEN@]name:type[#key-spec][{since}][{!deprecated-since}][flags][(arguments)]`:
//! a token (possibly empty) before `@`, the name and Redis's argument type,
//! the index of its key spec for a key, the versions that brought it in
//! and deprecated it, the flags `?` optional, `*` multiple and `+`
//! multiple_token, and the arguments of a oneof or block in parentheses.

use super::command_syntax_table::SYNTAX;
use super::subcommands::{bulk, status};
use durakv_protocol::Frame;

/// One argument of a command.
#[derive(Debug, PartialEq)]
pub(super) struct Arg {
    name: &'static str,
    kind: &'static str,
    token: Option<&'static str>,
    key_spec: Option<&'static str>,
    since: Option<&'static str>,
    deprecated_since: Option<&'static str>,
    optional: bool,
    multiple: bool,
    multiple_token: bool,
    args: Vec<Arg>,
}

/// (since, arguments) of `name` (`client|kill` for a subcommand); None
/// for one the table lacks.
pub(super) fn syntax_of(name: &str) -> Option<(&'static str, Vec<Arg>)> {
    let i = SYNTAX.binary_search_by(|(n, _, _)| (*n).cmp(name)).ok()?;
    let (_, since, text) = SYNTAX[i];
    Some((since, parse(text)))
}

fn parse(text: &'static str) -> Vec<Arg> {
    let mut rest = text;
    parse_list(&mut rest)
}

/// Arguments up to a `)` or the end, which is left in `rest`.
fn parse_list(rest: &mut &'static str) -> Vec<Arg> {
    let mut out = Vec::new();
    loop {
        *rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with(')') {
            return out;
        }
        let end = rest.find([' ', '(', ')']).unwrap_or(rest.len());
        let (head, tail) = rest.split_at(end);
        let mut arg = parse_head(head);
        *rest = tail;
        if let Some(inner) = rest.strip_prefix('(') {
            *rest = inner;
            arg.args = parse_list(rest);
            *rest = rest.strip_prefix(')').unwrap_or(rest);
        }
        out.push(arg);
    }
}

fn parse_head(head: &'static str) -> Arg {
    let (token, rest) = match head.split_once('@') {
        Some((token, rest)) => (Some(token), rest),
        None => (None, head),
    };
    let described = rest.trim_end_matches(['?', '*', '+']);
    let flags = &rest[described.len()..];
    let (mut since, mut deprecated_since) = (None, None);
    let mut described = described;
    while let Some((before, version)) = described.strip_suffix('}').and_then(|d| d.rsplit_once('{'))
    {
        match version.strip_prefix('!') {
            Some(v) => deprecated_since = Some(v),
            None => since = Some(version),
        }
        described = before;
    }
    let (described, key_spec) = match described.rsplit_once('#') {
        Some((d, k)) => (d, Some(k)),
        None => (described, None),
    };
    let (name, kind) = described.rsplit_once(':').unwrap_or((described, "string"));
    Arg {
        name,
        kind,
        token,
        key_spec,
        since,
        deprecated_since,
        optional: flags.contains('?'),
        multiple: flags.contains('*'),
        multiple_token: flags.contains('+'),
        args: Vec::new(),
    }
}

/// An argument as COMMAND DOCS sends it, fields in Redis's order.
pub(super) fn arg_frame(a: &Arg) -> Frame {
    let mut m = vec![(bulk("name"), bulk(a.name)), (bulk("type"), bulk(a.kind))];
    if let Some(k) = a.key_spec.and_then(|k| k.parse::<i64>().ok()) {
        m.push((bulk("key_spec_index"), Frame::Integer(k)));
    }
    if let Some(t) = a.token {
        m.push((bulk("token"), bulk(t)));
    }
    if let Some(v) = a.since {
        m.push((bulk("since"), bulk(v)));
    }
    if let Some(v) = a.deprecated_since {
        m.push((bulk("deprecated_since"), bulk(v)));
    }
    let flags: Vec<Frame> = [
        (a.optional, "optional"),
        (a.multiple, "multiple"),
        (a.multiple_token, "multiple_token"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, f)| status(f))
    .collect();
    if !flags.is_empty() {
        m.push((bulk("flags"), Frame::Set(flags)));
    }
    if !a.args.is_empty() {
        m.push((
            bulk("arguments"),
            Frame::Array(a.args.iter().map(arg_frame).collect()),
        ));
    }
    Frame::Map(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The notation again, from a parsed argument.
    fn render(a: &Arg) -> String {
        let mut s = String::new();
        if let Some(t) = a.token {
            s.push_str(t);
            s.push('@');
        }
        s.push_str(&format!("{}:{}", a.name, a.kind));
        if let Some(k) = a.key_spec {
            s.push_str(&format!("#{k}"));
        }
        if let Some(v) = a.since {
            s.push_str(&format!("{{{v}}}"));
        }
        if let Some(v) = a.deprecated_since {
            s.push_str(&format!("{{!{v}}}"));
        }
        for (on, f) in [
            (a.optional, '?'),
            (a.multiple, '*'),
            (a.multiple_token, '+'),
        ] {
            if on {
                s.push(f);
            }
        }
        if !a.args.is_empty() {
            let inner: Vec<String> = a.args.iter().map(render).collect();
            s.push_str(&format!("({})", inner.join(" ")));
        }
        s
    }

    const TYPES: &[&str] = &[
        "key",
        "string",
        "integer",
        "double",
        "pattern",
        "unix-time",
        "pure-token",
        "oneof",
        "block",
    ];

    fn check(a: &Arg, at: &str) {
        assert!(TYPES.contains(&a.kind), "{at}: type {}", a.kind);
        assert!(!a.name.is_empty(), "{at}: a nameless argument");
        let grouping = a.kind == "oneof" || a.kind == "block";
        assert_eq!(grouping, !a.args.is_empty(), "{at}: {}", a.name);
        // A pattern may name keys too (SORT's BY and GET).
        assert!(a.kind != "key" || a.key_spec.is_some(), "{at}: {}", a.name);
        assert!(
            a.token.is_some() || a.kind != "pure-token",
            "{at}: {}",
            a.name
        );
        for sub in &a.args {
            check(sub, at);
        }
    }

    #[test]
    fn every_line_parses_back_to_itself_with_known_types() {
        for (name, _, text) in SYNTAX {
            let args = parse(text);
            let again: Vec<String> = args.iter().map(render).collect();
            assert_eq!(again.join(" "), *text, "{name}");
            for a in &args {
                check(a, name);
            }
        }
    }

    #[test]
    fn the_table_is_sorted_for_binary_search() {
        assert!(SYNTAX.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn every_command_and_subcommand_has_a_line() {
        for c in crate::command::COMMANDS.values() {
            assert!(syntax_of(c.name).is_some(), "{}", c.name);
            for s in super::super::subcommands::subcommands_of(c.name) {
                let full = format!("{}|{}", c.name, s.name);
                assert!(syntax_of(&full).is_some(), "{full}");
            }
        }
    }

    #[test]
    fn set_reads_as_redis_documents_it() {
        let (since, args) = syntax_of("set").unwrap();
        assert_eq!(since, "1.0.0");
        assert_eq!(args[0].name, "key");
        assert_eq!(args[0].key_spec, Some("0"));
        let expiration = &args[4];
        assert_eq!((expiration.kind, expiration.optional), ("oneof", true));
        assert_eq!(expiration.args[0].token, Some("EX"));
        assert_eq!(expiration.args[0].name, "seconds");
    }
}
