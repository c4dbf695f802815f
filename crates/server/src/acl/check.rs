//! Whether a user may run one call: its command (or subcommand), every key
//! it names and every channel it publishes or subscribes to. Denials are
//! logged to ACL LOG and answered with Redis's NOPERM errors.

use super::index::INDEX;
use super::log::{Context, Entry, Reason};
use super::selector::{access_of, Selector};
use super::User;
use crate::cmd::key_flags::{call_key_flags, flags_of_key};
use crate::command::{flags, key_indexes_of, CommandSpec, Ctx};
use bytes::Bytes;
use durakv_protocol::Frame;

/// A denied call: why, and the command, key or channel denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: Reason,
    pub object: String,
    /// The denied argument's position (0 for the command itself).
    pub pos: usize,
}

impl Denial {
    /// The NOPERM reply (Redis hides which key or channel).
    pub fn reply(&self, user: &str) -> Frame {
        Frame::error(format!("NOPERM {}", self.message(user, false)))
    }

    /// `verbose` names the key or channel, as ACL DRYRUN does.
    pub fn message(&self, user: &str, verbose: bool) -> String {
        match (self.reason, verbose) {
            (Reason::Key, false) => "No permissions to access a key".into(),
            (Reason::Channel, false) => "No permissions to access a channel".into(),
            (Reason::Key, true) => format!(
                "User {user} has no permissions to access the '{}' key",
                self.object
            ),
            (Reason::Channel, true) => format!(
                "User {user} has no permissions to access the '{}' channel",
                self.object
            ),
            _ => format!(
                "User {user} has no permissions to run the '{}' command",
                self.object
            ),
        }
    }
}

/// Checks one call against every selector of `user`; the first that
/// allows it wins.
pub fn check(user: &User, spec: &CommandSpec, args: &[Bytes]) -> Result<(), Denial> {
    if user.unrestricted() || spec.flags & flags::NOAUTH != 0 {
        return Ok(());
    }
    let id = INDEX.id_of_call(spec, args);
    first_allowing(user, id, |s| check_selector(s, id, spec, args))
}

/// For a served blocked command: its command, and `args[1..]` as keys it
/// reads (and writes, if it is a write), against every selector.
pub fn check_keys(user: &User, spec: &CommandSpec, args: &[Bytes]) -> Result<(), Denial> {
    let id = INDEX.id_of_call(spec, args);
    let access = super::selector::KeyAccess {
        read: true,
        write: spec.is_write(),
    };
    first_allowing(user, id, |s| {
        if !s.allows_command(id) {
            return Err(command_denial(id));
        }
        match args
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, k)| !s.allows_key(k, access))
        {
            Some((i, k)) => Err(Denial {
                reason: Reason::Key,
                object: String::from_utf8_lossy(k).into_owned(),
                pos: i,
            }),
            None => Ok(()),
        }
    })
}

/// Ok if `check` passes for some selector of `user`. Otherwise the
/// denial Redis reports: a channel one before a key one before a command
/// one, and of equal ones the one further along the arguments, which
/// names what no selector could allow.
fn first_allowing(
    user: &User,
    id: usize,
    check: impl Fn(&Selector) -> Result<(), Denial>,
) -> Result<(), Denial> {
    let mut worst: Option<Denial> = None;
    for s in user.all_selectors() {
        let d = match check(s) {
            Ok(()) => return Ok(()),
            Err(d) => d,
        };
        let key = |d: &Denial| (rank(d.reason), d.pos);
        if worst.as_ref().is_none_or(|w| key(&d) > key(w)) {
            worst = Some(d);
        }
    }
    Err(worst.unwrap_or_else(|| command_denial(id)))
}

fn command_denial(id: usize) -> Denial {
    Denial {
        reason: Reason::Command,
        object: INDEX.names[id].clone(),
        pos: 0,
    }
}

fn rank(r: Reason) -> u8 {
    match r {
        Reason::Command => 1,
        Reason::Key => 2,
        Reason::Auth => 3,
        Reason::Channel => 4,
    }
}

fn check_selector(
    s: &Selector,
    id: usize,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Result<(), Denial> {
    if !s.allows_call(id, args) {
        return Err(command_denial(id));
    }
    // Shard channels have key specs for cluster routing; they are channels.
    if !s.all_keys() && !matches!(spec.name, "spublish" | "ssubscribe" | "sunsubscribe") {
        // The call's key flags once, not once per key (MSET's thousand).
        let specs = call_key_flags(spec.name, spec.is_write(), args);
        for (i, idx) in key_indexes_of(spec.shown_keys(), args)
            .into_iter()
            .enumerate()
        {
            let access = access_of(flags_of_key(&specs, i));
            if !s.allows_key(&args[idx], access) {
                return Err(Denial {
                    reason: Reason::Key,
                    object: String::from_utf8_lossy(&args[idx]).into_owned(),
                    pos: idx,
                });
            }
        }
    }
    if !s.all_channels() {
        let (channels, is_pattern): (&[Bytes], bool) = match spec.name {
            "publish" | "spublish" => (args.get(1..2).unwrap_or(&[]), false),
            "subscribe" | "ssubscribe" => (&args[1..], false),
            "psubscribe" => (&args[1..], true),
            _ => (&[], false),
        };
        if let Some((i, c)) = channels
            .iter()
            .enumerate()
            .find(|(_, c)| !s.allows_channel(c, is_pattern))
        {
            return Err(Denial {
                reason: Reason::Channel,
                object: String::from_utf8_lossy(c).into_owned(),
                pos: i + 1,
            });
        }
    }
    Ok(())
}

/// Whether some selector lets `user` read any key at all (SORT's BY and
/// GET patterns read keys found only while sorting).
pub fn may_read_every_key(user: &User) -> bool {
    user.unrestricted() || user.all_selectors().any(|s| s.all_keys_pattern_readable())
}

/// Picks up a changed or deleted user before a command: a connection
/// whose user was deleted is closed, as in Redis.
pub fn refresh(ctx: &mut Ctx<'_>) {
    let acl = &ctx.shared.acl;
    let generation = acl.generation();
    if ctx.client.acl_generation == generation {
        return;
    }
    ctx.client.acl_generation = generation;
    match acl.get(&ctx.client.user.name) {
        Some(u) => ctx.client.user = u,
        None => {
            ctx.client.user = std::sync::Arc::new(User::new(&ctx.client.user.name, false));
            ctx.client.handle.kill();
        }
    }
}

/// The calling client's denial for this call, logged under `context`;
/// None when it may run (the replication link always may).
fn denied(ctx: &Ctx<'_>, spec: &CommandSpec, args: &[Bytes], context: Context) -> Option<Denial> {
    if ctx.client.user.unrestricted() || ctx.client.is_master {
        return None;
    }
    let denial = check(&ctx.client.user, spec, args).err()?;
    log(ctx, denial.reason, context, denial.object.clone(), None);
    Some(denial)
}

/// The check `dispatch` makes before running or queueing a command:
/// None to go ahead, or the NOPERM reply (logged).
pub fn enforce(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) -> Option<Frame> {
    refresh(ctx);
    let context = if ctx.client.in_script {
        Context::Lua
    } else if ctx.client.multi.is_some() || ctx.client.in_exec {
        Context::Multi
    } else {
        Context::Toplevel
    };
    let denial = denied(ctx, spec, args, context)?;
    Some(denial.reply(&ctx.client.user.name))
}

/// `redis.call`'s check, for the user that runs the script.
pub fn in_script(ctx: &Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) -> Option<Frame> {
    let denial = denied(ctx, spec, args, Context::Lua)?;
    Some(Frame::error(format!(
        "ERR ACL failure in script: {}",
        denial.message(&ctx.client.user.name, false)
    )))
}

/// EXEC checks each queued command again, in case the rules changed
/// since it was queued.
pub fn recheck_in_exec(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) -> Option<Frame> {
    refresh(ctx);
    let denial = denied(ctx, spec, args, Context::Multi)?;
    let reason = match denial.reason {
        Reason::Command => "no permission to execute the command or subcommand",
        Reason::Key => "no permission to touch the specified keys",
        Reason::Channel => "no permission to access one of the channels used as arguments",
        Reason::Auth => "no permission",
    };
    Some(Frame::error(format!(
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
    )))
}

/// Adds an ACL LOG entry for the calling client (`username`: the name
/// tried, for failed logins).
pub fn log(
    ctx: &Ctx<'_>,
    reason: Reason,
    context: Context,
    object: String,
    username: Option<&str>,
) {
    let acl = &ctx.shared.acl;
    acl.denied.count(reason);
    let max_len = ctx.shared.config.read().acllog_max_len;
    let now = crate::util::now_ms();
    let entry = Entry {
        count: 1,
        reason,
        context,
        object,
        username: username.unwrap_or(&ctx.client.user.name).to_string(),
        client_info: crate::cmd::client::own_line(ctx),
        entry_id: 0,
        created_ms: now,
        updated_ms: now,
    };
    acl.log.lock().add(entry, max_len);
}
