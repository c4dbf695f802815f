//! Numbers every command and every subcommand of a container, so a
//! selector's permissions are one bit each. Commands keep their table id;
//! subcommands follow them.

use crate::cmd::subcommands::subcommands_of;
use crate::command::{CommandSpec, COMMANDS};
use std::collections::HashMap;
use std::sync::LazyLock;

pub struct Index {
    pub count: usize,
    /// Full names by id: `get`, `client|list`.
    pub names: Vec<String>,
    /// ACL categories by id (bits of [`super::categories::NAMES`]).
    pub categories: Vec<u32>,
    /// The container of a subcommand's id.
    pub parent: Vec<Option<usize>>,
    by_name: HashMap<String, usize>,
    /// A container's subcommand ids.
    subs: Vec<Vec<usize>>,
}

pub static INDEX: LazyLock<Index> = LazyLock::new(build);

fn build() -> Index {
    let mut specs: Vec<&'static CommandSpec> = COMMANDS.values().collect();
    specs.sort_by_key(|s| s.id);
    let commands = specs.len();
    let mut ix = Index {
        count: commands,
        names: vec![String::new(); commands],
        categories: vec![0; commands],
        parent: vec![None; commands],
        by_name: HashMap::new(),
        subs: vec![Vec::new(); commands],
    };
    for s in &specs {
        ix.names[s.id] = s.name.to_string();
        ix.categories[s.id] = super::categories::of(s.name, None, s.flags, s.group);
        ix.by_name.insert(s.name.to_string(), s.id);
    }
    for s in &specs {
        for sub in subcommands_of(s.name) {
            let id = ix.count;
            ix.count += 1;
            let full = format!("{}|{}", s.name, sub.name);
            ix.names.push(full.clone());
            ix.categories.push(super::categories::of(
                s.name,
                Some(sub.name),
                sub.flags,
                s.group,
            ));
            ix.parent.push(Some(s.id));
            ix.subs.push(Vec::new());
            ix.subs[s.id].push(id);
            ix.by_name.insert(full, id);
        }
    }
    ix
}

impl Index {
    /// The id of `get` or `client|list` (lower-case).
    pub fn id(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub fn subs_of(&self, id: usize) -> &[usize] {
        &self.subs[id]
    }

    /// The id a call is checked against: its subcommand's when the command
    /// is a container and `args[1]` names one, else the command's.
    pub fn id_of_call(&self, spec: &CommandSpec, args: &[bytes::Bytes]) -> usize {
        let subs = &self.subs[spec.id];
        if subs.is_empty() || args.len() < 2 {
            return spec.id;
        }
        subs.iter()
            .copied()
            .find(|&id| {
                let sub = &self.names[id][spec.name.len() + 1..];
                args[1].eq_ignore_ascii_case(sub.as_bytes())
            })
            .unwrap_or(spec.id)
    }
}
