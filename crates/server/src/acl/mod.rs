//! Access control lists, as Redis 6+ has them: named users with hashed
//! passwords, and per user the commands, keys and pub/sub channels it may
//! use. Users are immutable values behind `Arc`s; `ACL SETUSER` builds a
//! new one and bumps a generation counter, and each connection picks up
//! the new value before its next command.

pub mod categories;
pub mod check;
pub mod file;
pub mod index;
pub mod log;
pub mod selector;
pub mod user;

use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
pub use user::User;

/// Why a rule was refused, with Redis's wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    Unknown,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    /// Bumped on every change; connections compare it with theirs.
    generation: AtomicU64,
    /// `acl-pubsub-default allchannels`: new users get every channel.
    pubsub_default_all: AtomicBool,
    pub log: Mutex<log::AclLog>,
    pub denied: log::DeniedCounters,
}

impl Default for Acl {
    fn default() -> Acl {
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), Arc::new(User::default_user()));
        Acl {
            users: RwLock::new(users),
            generation: AtomicU64::new(1),
            pubsub_default_all: AtomicBool::new(false),
            log: Mutex::new(log::AclLog::default()),
            denied: Default::default(),
        }
    }
}

/// CONFIG SET of `requirepass`, `acl-pubsub-default` or `acllog-max-len`.
pub fn apply_config(shared: &crate::state::Shared, before: &crate::config::Config) {
    let c = shared.config.read();
    shared.acl.set_pubsub_default_all(c.acl_pubsub_default_all);
    shared.acl.log.lock().trim(c.acllog_max_len);
    if c.requirepass != before.requirepass {
        shared.acl.set_default_password(c.requirepass.as_deref());
    }
}

/// Splits `ACL SETUSER` arguments into rules, joining the words of a
/// `(...)` selector that a config line split at spaces.
pub fn merge_selector_args(args: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize)> = None;
    for (i, a) in args.iter().enumerate() {
        match &mut open {
            Some((s, _)) => {
                s.push(' ');
                s.push_str(a);
                if a.ends_with(')') {
                    out.extend(open.take().map(|(s, _)| s));
                }
            }
            None if a.starts_with('(') && !a.ends_with(')') => open = Some((a.clone(), i)),
            None => out.push(a.clone()),
        }
    }
    if let Some((_, i)) = open {
        return Err(format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            args[i]
        ));
    }
    Ok(out)
}

impl Acl {
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    pub fn pubsub_default_all(&self) -> bool {
        self.pubsub_default_all.load(Ordering::Relaxed)
    }

    pub fn set_pubsub_default_all(&self, all: bool) {
        self.pubsub_default_all.store(all, Ordering::Relaxed);
    }

    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get("default")
            .unwrap_or_else(|| Arc::new(User::default_user()))
    }

    /// A new connection starts logged in as `default` when that user is on
    /// and needs no password.
    pub fn default_needs_no_auth(&self) -> bool {
        let u = self.default_user();
        u.enabled && u.nopass
    }

    /// Names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.users.read().keys().cloned().collect()
    }

    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Builds user `name` from its current value (or a new user) and
    /// `rules`, all or nothing.
    pub fn build(&self, name: &str, rules: &[String]) -> Result<User, String> {
        let start = match self.get(name) {
            Some(u) => (*u).clone(),
            None => User::new(name, self.pubsub_default_all()),
        };
        self.build_from(start, rules)
    }

    /// Applies `rules` to `u`, all or nothing.
    pub fn build_from(&self, mut u: User, rules: &[String]) -> Result<User, String> {
        let all = self.pubsub_default_all();
        for r in merge_selector_args(rules)? {
            u.apply(&r, all)
                .map_err(|e| format!("Error in ACL SETUSER modifier '{r}': {}", e.message()))?;
        }
        Ok(u)
    }

    pub fn put(&self, user: User) {
        self.users.write().insert(user.name.clone(), Arc::new(user));
        self.bump();
    }

    /// Deletes users other than `default`; returns how many existed.
    pub fn delete(&self, names: &[String]) -> usize {
        let mut users = self.users.write();
        let n = names.iter().filter(|n| users.remove(*n).is_some()).count();
        drop(users);
        self.bump();
        n
    }

    /// Replaces every user at once (ACL LOAD); a set without `default`
    /// gets the built-in one.
    pub fn replace_all(&self, mut users: BTreeMap<String, User>) {
        users
            .entry("default".into())
            .or_insert_with(User::default_user);
        *self.users.write() = users.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
        self.bump();
    }

    /// The user `name` logs in as with `password`, if it may.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let name = std::str::from_utf8(name).ok()?;
        let u = self.get(name)?;
        (u.enabled && u.password_matches(password)).then_some(u)
    }

    /// `requirepass`: the default user's only password, or none.
    pub fn set_default_password(&self, password: Option<&str>) {
        let mut u = (*self.default_user()).clone();
        let all = self.pubsub_default_all.load(Ordering::Relaxed);
        let _ = u.apply("resetpass", all);
        let rule = match password {
            Some(p) => format!(">{p}"),
            None => "nopass".into(),
        };
        let _ = u.apply(&rule, all);
        self.put(u);
    }
}
