//! COMMAND: the command table as clients see it (COUNT, INFO, DOCS,
//! LIST, GETKEYS), from the same specs dispatch uses.
use super::command_doc_facts::doc_fields;
use super::command_flags::informational_flags;
use super::command_syntax::{arg_frame, syntax_of};
use super::command_tips::tips_of;
use super::key_flags::{call_key_flags, flags_of_key, is_not_key, key_spec_flags};
use super::key_specs::{legacy_triple, redis_key_specs, Begin, Find, KeySpec};
use crate::command::{
    flags::*, key_indexes_of, spec, CommandSpec, Ctx, Handler, Keys, Reply, COMMANDS, NO_KEYS,
};
use crate::errors;
use crate::glob::glob_match;
use crate::util::is;
use bytes::Bytes;
use durakv_protocol::Frame;

use super::subcommands::*;

pub fn commands() -> Vec<CommandSpec> {
    vec![spec(
        "command",
        -1,
        LOADING | STALE,
        NO_KEYS,
        Handler::Conn(command),
        "server",
        "Describes every command the server knows.",
    )]
}

pub(super) const COMMAND_SUBS: &[SubSpec] = &[
    sub(
        "count",
        2,
        LOADING | STALE,
        "Counts the commands the server knows.",
    ),
    sub(
        "info",
        -2,
        LOADING | STALE,
        "Describes the named commands, or every command.",
    ),
    sub(
        "docs",
        -2,
        LOADING | STALE,
        "Gives usage documentation for the named commands, or all of them.",
    ),
    sub(
        "list",
        -2,
        LOADING | STALE,
        "Names the server's commands, optionally filtered.",
    ),
    sub(
        "getkeys",
        -4,
        LOADING | STALE,
        "Works out which arguments of a command line are keys.",
    ),
    sub(
        "getkeysandflags",
        -4,
        LOADING | STALE,
        "Works out a command line's keys and how each is accessed.",
    ),
    sub(
        "help",
        2,
        LOADING | STALE,
        "Describes each COMMAND subcommand.",
    ),
];

// ---------------------------------------------------------------------------
// COMMAND
// ---------------------------------------------------------------------------

/// What COMMAND INFO / DOCS need to know about a command or subcommand.
struct View {
    name: String,
    arity: i32,
    flags: u32,
    keys: Keys,
    group: &'static str,
    summary: &'static str,
    subs: &'static [SubSpec],
}

impl View {
    fn of(spec: &CommandSpec) -> View {
        View {
            name: spec.name.to_string(),
            arity: spec.arity,
            flags: spec.flags,
            keys: spec.shown_keys(),
            group: spec.group,
            summary: spec.summary,
            subs: subcommands_of(spec.name),
        }
    }

    fn of_sub(parent: &CommandSpec, s: &SubSpec) -> View {
        // MEMORY USAGE and OBJECT's subcommands but HELP have a key at 2
        // (XGROUP's and XINFO's are in their key specs only).
        let keys = if (parent.name == "memory" && s.name == "usage")
            || (parent.name == "object" && s.name != "help")
        {
            Keys::Range {
                first: 2,
                last: 2,
                step: 1,
            }
        } else {
            Keys::None
        };
        View {
            name: format!("{}|{}", parent.name, s.name),
            arity: s.arity,
            flags: s.flags,
            keys,
            group: parent.group,
            summary: s.summary,
            subs: &[],
        }
    }

    /// A container: Redis gives it no flags and no keys of its own, its
    /// subcommands have them.
    fn is_container(&self) -> bool {
        !self.subs.is_empty()
    }

    fn triple(&self) -> (i64, i64, i64) {
        if let Some(specs) = redis_key_specs(&self.name) {
            return legacy_triple(specs);
        }
        if self.is_container() {
            return (0, 0, 0);
        }
        match self.keys {
            Keys::Range { first, last, step } => (first as i64, last as i64, step as i64),
            Keys::Custom(_) => (0, 0, 0),
            Keys::None | Keys::All => (0, 0, 0),
        }
    }

    /// The flags COMMAND reports, in Redis's order. A container's own
    /// flags (CLIENT's `loading stale`, XGROUP's `write`) let dispatch
    /// treat its subcommands alike; Redis shows none for it, unless it
    /// also runs without a subcommand (COMMAND, arity -1).
    fn flag_names(&self) -> Vec<&'static str> {
        let mut flags = if self.is_container() && self.arity != -1 {
            0
        } else {
            self.flags | informational_flags(&self.name)
        };
        if matches!(self.keys, Keys::Custom(_)) && !self.is_container() {
            flags |= MOVABLEKEYS;
        }
        NAMES
            .iter()
            .filter(|(bit, _)| flags & bit != 0)
            .map(|(_, n)| *n)
            .collect()
    }

    /// The ACL categories the ACL rules use for it, with `@`.
    fn acl_categories(&self) -> Vec<String> {
        use crate::acl::{categories, index::INDEX};
        let mask = INDEX.id(&self.name).map_or(0, |id| INDEX.categories[id]);
        categories::names(mask)
            .into_iter()
            .map(|c| format!("@{c}"))
            .collect()
    }

    fn key_specs(&self) -> Frame {
        if let Some(specs) = redis_key_specs(&self.name) {
            return Frame::Set(specs.iter().map(key_spec_frame).collect());
        }
        if self.is_container() {
            return Frame::Set(Vec::new());
        }
        let specs = key_spec_flags(&self.name, self.flags & WRITE != 0);
        let flag_set = Frame::Set(flags_of_key(&specs, 0).iter().map(|f| status(*f)).collect());
        let (begin, find) = match self.keys {
            Keys::Range { first, last, step } => {
                // Redis counts `lastkey` from the first key, not from argv[0].
                let lastkey = if last >= 0 { last - first } else { last };
                (
                    Frame::Map(vec![
                        (bulk("type"), bulk("index")),
                        (
                            bulk("spec"),
                            Frame::Map(vec![(bulk("index"), Frame::Integer(first as i64))]),
                        ),
                    ]),
                    Frame::Map(vec![
                        (bulk("type"), bulk("range")),
                        (
                            bulk("spec"),
                            Frame::Map(vec![
                                (bulk("lastkey"), Frame::Integer(lastkey as i64)),
                                (bulk("keystep"), Frame::Integer(step as i64)),
                                (bulk("limit"), Frame::Integer(0)),
                            ]),
                        ),
                    ]),
                )
            }
            Keys::Custom(_) => {
                let unknown = || {
                    Frame::Map(vec![
                        (bulk("type"), bulk("unknown")),
                        (bulk("spec"), Frame::Map(Vec::new())),
                    ])
                };
                (unknown(), unknown())
            }
            Keys::None | Keys::All => return Frame::Set(Vec::new()),
        };
        Frame::Set(vec![Frame::Map(vec![
            (bulk("flags"), flag_set),
            (bulk("begin_search"), begin),
            (bulk("find_keys"), find),
        ])])
    }

    /// `[name, arity, flags, first, last, step, acl, tips, key specs, subcommands]`.
    fn info(&self, parent: Option<&CommandSpec>) -> Frame {
        let (first, last, step) = self.triple();
        // Redis sends a set for a command without subcommands (RESP3
        // tells them apart), an array of a container's.
        let subs = match parent {
            Some(p) if self.is_container() => Frame::Array(
                self.subs
                    .iter()
                    .map(|s| View::of_sub(p, s).info(None))
                    .collect(),
            ),
            _ => Frame::Set(Vec::new()),
        };
        Frame::Array(vec![
            bulk(&self.name),
            Frame::Integer(self.arity as i64),
            Frame::Set(self.flag_names().into_iter().map(status).collect()),
            Frame::Integer(first),
            Frame::Integer(last),
            Frame::Integer(step),
            Frame::Set(self.acl_categories().into_iter().map(status).collect()),
            Frame::Set(tips_of(&self.name).iter().copied().map(bulk).collect()),
            self.key_specs(),
            subs,
        ])
    }

    fn docs(&self, parent: Option<&CommandSpec>) -> Frame {
        let syntax = syntax_of(&self.name);
        let mut m = vec![(bulk("summary"), bulk(self.summary))];
        if let Some((since, _)) = syntax.as_ref().filter(|(since, _)| !since.is_empty()) {
            m.push((bulk("since"), bulk(since)));
        }
        m.push((bulk("group"), bulk(self.group)));
        m.extend(doc_fields(&self.name));
        if let Some((_, args)) = syntax.as_ref().filter(|(_, args)| !args.is_empty()) {
            let args = args.iter().map(arg_frame).collect();
            m.push((bulk("arguments"), Frame::Array(args)));
        }
        if let Some(p) = parent {
            if !self.subs.is_empty() {
                let subs = self
                    .subs
                    .iter()
                    .map(|s| {
                        let v = View::of_sub(p, s);
                        (bulk(&v.name), v.docs(None))
                    })
                    .collect();
                m.push((bulk("subcommands"), Frame::Map(subs)));
            }
        }
        Frame::Map(m)
    }
}

/// One of Redis's key specs as COMMAND INFO sends it.
fn key_spec_frame(s: &KeySpec) -> Frame {
    let int = |n: i32| Frame::Integer(n as i64);
    let search = |kind: &str, spec: Vec<(Frame, Frame)>| {
        Frame::Map(vec![
            (bulk("type"), bulk(kind)),
            (bulk("spec"), Frame::Map(spec)),
        ])
    };
    let begin = match s.begin {
        Begin::Index(i) => search("index", vec![(bulk("index"), int(i))]),
        Begin::Keyword(k, from) => search(
            "keyword",
            vec![(bulk("keyword"), bulk(k)), (bulk("startfrom"), int(from))],
        ),
        Begin::Unknown => search("unknown", Vec::new()),
    };
    let find = match s.find {
        Find::Range {
            lastkey,
            keystep,
            limit,
        } => search(
            "range",
            vec![
                (bulk("lastkey"), int(lastkey)),
                (bulk("keystep"), int(keystep)),
                (bulk("limit"), int(limit)),
            ],
        ),
        Find::Keynum {
            keynumidx,
            firstkey,
            keystep,
        } => search(
            "keynum",
            vec![
                (bulk("keynumidx"), int(keynumidx)),
                (bulk("firstkey"), int(firstkey)),
                (bulk("keystep"), int(keystep)),
            ],
        ),
        Find::Unknown => search("unknown", Vec::new()),
    };
    let mut m = Vec::with_capacity(4);
    if let Some(notes) = s.notes {
        m.push((bulk("notes"), bulk(notes)));
    }
    m.push((
        bulk("flags"),
        Frame::Set(s.flags.iter().map(|f| status(*f)).collect()),
    ));
    m.push((bulk("begin_search"), begin));
    m.push((bulk("find_keys"), find));
    Frame::Map(m)
}

/// Every command, sorted by name so replies are stable.
fn all_specs() -> Vec<&'static CommandSpec> {
    let mut v: Vec<&'static CommandSpec> = COMMANDS.values().collect();
    v.sort_by_key(|s| s.name);
    v
}

/// Looks up `name` or `container|sub`.
fn view_by_name(name: &[u8]) -> Option<(View, Option<&'static CommandSpec>)> {
    let text = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    match text.split_once('|') {
        None => {
            let s = crate::command::lookup(text.as_bytes())?;
            Some((View::of(s), Some(s)))
        }
        Some((parent, child)) => {
            let p = crate::command::lookup(parent.as_bytes())?;
            let s = subcommands_of(p.name).iter().find(|s| s.name == child)?;
            Some((View::of_sub(p, s), None))
        }
    }
}

fn command(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Reply {
    if args.len() == 1 {
        return Ok(Frame::Array(
            all_specs()
                .into_iter()
                .map(|s| View::of(s).info(Some(s)))
                .collect(),
        ));
    }
    let s = find_sub("command", args)?;
    note_subcommand(ctx, "command", s);
    match s.name {
        "count" => Ok(Frame::Integer(COMMANDS.len() as i64)),
        "info" => {
            if args.len() == 2 {
                return Ok(Frame::Array(
                    all_specs()
                        .into_iter()
                        .map(|s| View::of(s).info(Some(s)))
                        .collect(),
                ));
            }
            Ok(Frame::Array(
                args[2..]
                    .iter()
                    .map(|n| match view_by_name(n) {
                        Some((v, p)) => v.info(p),
                        None => Frame::Null,
                    })
                    .collect(),
            ))
        }
        "docs" => {
            let pairs = if args.len() == 2 {
                all_specs()
                    .into_iter()
                    .map(|s| (bulk(s.name), View::of(s).docs(Some(s))))
                    .collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|n| {
                        let (v, p) = view_by_name(n)?;
                        Some((bulk(&v.name), v.docs(p)))
                    })
                    .collect()
            };
            Ok(Frame::Map(pairs))
        }
        "list" => Ok(command_list(args)),
        "getkeys" => Ok(Frame::Array(
            command_keys(&args[2..])?
                .into_iter()
                .map(|(key, _)| key)
                .collect(),
        )),
        "getkeysandflags" => Ok(Frame::Array(
            command_keys(&args[2..])?
                .into_iter()
                .map(|(key, flags)| {
                    let flags = flags.iter().map(|f| status(*f)).collect();
                    Frame::Array(vec![key, Frame::Set(flags)])
                })
                .collect(),
        )),
        _ => help(
            "command",
            &[
                "(no subcommand)",
                "    Describe every command the server knows, as INFO does.",
                "COUNT",
                "    Give how many commands the server knows.",
                "LIST",
                "    Name every command the server knows.",
                "LIST FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)",
                "    Name only the commands in an ACL category or matching a glob pattern",
                "    (no command comes from a module in durakv).",
                "INFO [<command-name> ...]",
                "    Describe the named commands: arity, flags, key positions and so on.",
                "    With no names, every command is described.",
                "DOCS [<command-name> ...]",
                "    Give the named commands' documentation: summary, version, complexity,",
                "    deprecation, history, arguments.",
                "    With no names, every command's documentation is given.",
                "GETKEYS <full-command>",
                "    Pick out which arguments of <full-command> are keys.",
                "GETKEYSANDFLAGS <full-command>",
                "    As GETKEYS, with the access flags of each key (RW, RO, insert...).",
            ],
        ),
    }
}

/// The keys of the command `inner` (name first) with their key-spec flags,
/// as COMMAND GETKEYS / GETKEYSANDFLAGS report them.
fn command_keys(inner: &[Bytes]) -> Result<Vec<(Frame, &'static [&'static str])>, Frame> {
    let Some(spec) = crate::command::lookup(&inner[0]) else {
        return Err(Frame::error("ERR Invalid command specified"));
    };
    if !spec.arity_ok(inner.len()) {
        return Err(Frame::error(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let keys = spec.shown_keys();
    let specs = call_key_flags(spec.name, spec.is_write(), inner);
    let found: Vec<_> = key_indexes_of(keys, inner)
        .into_iter()
        .enumerate()
        .map(|(n, i)| (Frame::Bulk(inner[i].clone()), flags_of_key(&specs, n)))
        .filter(|(_, flags)| !is_not_key(flags))
        .collect();
    // A command whose keys depend on its arguments (EVAL's numkeys) may
    // name none; one with fixed key positions always has some, unless
    // they are channels (SPUBLISH's).
    if found.is_empty() && !matches!(keys, Keys::Custom(_)) {
        return Err(Frame::error("ERR The command has no key arguments"));
    }
    Ok(found)
}

fn command_list(args: &[Bytes]) -> Frame {
    enum Filter {
        All,
        None,
        Category(String),
        Pattern(Bytes),
    }
    let filter = match args.len() {
        2 => Filter::All,
        5 if is(&args[2], "filterby") => {
            if is(&args[3], "module") {
                Filter::None
            } else if is(&args[3], "aclcat") {
                Filter::Category(format!("@{}", lossy(&args[4]).to_ascii_lowercase()))
            } else if is(&args[3], "pattern") {
                Filter::Pattern(args[4].clone())
            } else {
                return errors::err(errors::SYNTAX);
            }
        }
        _ => return errors::err(errors::SYNTAX),
    };
    let mut names = Vec::new();
    for spec in all_specs() {
        let mut views = vec![View::of(spec)];
        views.extend(
            subcommands_of(spec.name)
                .iter()
                .map(|s| View::of_sub(spec, s)),
        );
        for v in views {
            let keep = match &filter {
                Filter::All => true,
                Filter::None => false,
                Filter::Category(c) => v.acl_categories().contains(c),
                Filter::Pattern(p) => glob_match(p, v.name.as_bytes(), true),
            };
            if keep {
                names.push(bulk(&v.name));
            }
        }
    }
    Frame::Array(names)
}
