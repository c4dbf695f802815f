//! Users from the configuration (`user` lines) and the ACL file
//! (`aclfile`, ACL LOAD / ACL SAVE). Both hold lines of the form
//! `user <name> <rule> ...`, the format `ACL LIST` prints.

use super::{Acl, User};
use crate::config::Config;
use std::collections::BTreeMap;
use std::path::Path;

/// Parses `<name> <rule> ...` (a `user` directive's value) into a user
/// built from nothing, `default` included, as Redis does for config lines.
pub fn parse_user(acl: &Acl, line: &str) -> Result<User, String> {
    let mut words = line.split_whitespace().map(String::from);
    let name = words.next().ok_or("a user line needs a user name")?;
    let rules: Vec<String> = words.collect();
    acl.build_from(User::new(&name, acl.pubsub_default_all()), &rules)
}

/// Parses a whole ACL file into users; errors name the file and line,
/// worded as Redis words them.
pub fn parse_file(acl: &Acl, path: &Path, text: &str) -> Result<BTreeMap<String, User>, String> {
    let all_channels = acl.pubsub_default_all();
    let file = path.display();
    let mut users = BTreeMap::new();
    let mut errors = String::new();
    for (n, line) in text.split('\n').enumerate() {
        let n = n + 1;
        let line = line.trim_matches([' ', '\t', '\r']);
        if line.is_empty() {
            continue;
        }
        let words: Vec<String> = line
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect();
        if words[0] != "user" || words.len() < 2 {
            errors.push_str(&format!(
                "{file}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = &words[1];
        if name.chars().any(|c| c.is_whitespace() || c == '\0') {
            errors.push_str(&format!(
                "'{file}:{n}: username '{name}' contains invalid characters. "
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {n}. "
            ));
            continue;
        }
        let Ok(rules) = super::merge_selector_args(&words[2..]) else {
            errors.push_str(&format!(
                "{file}:{n}: Unmatched parenthesis in selector definition."
            ));
            continue;
        };
        // Each user starts from nothing, not from the running server's.
        let mut u = User::new(name, all_channels);
        let mut reported = false;
        let mut failed = false;
        for r in &rules {
            if let Err(e) = u.apply(r, all_channels) {
                failed = true;
                if e == super::RuleError::Unknown {
                    errors.push_str(&format!(
                        "{file}:{n}: Error in applying operation '{r}': {}. ",
                        e.message()
                    ));
                } else if !reported {
                    errors.push_str(&format!("{file}:{n}: {}. ", e.message()));
                    reported = true;
                }
            }
        }
        if !failed {
            users.insert(name.clone(), u);
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

/// Reads the ACL file and replaces every user with its contents; on any
/// error nothing changes.
pub fn load(acl: &Acl, path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("Error loading ACLs, opening file '{}': {e}", path.display()))?;
    let users = parse_file(acl, path, &text)?;
    acl.replace_all(users);
    Ok(())
}

/// Every user as a `user` line, sorted by name.
pub fn lines(acl: &Acl) -> Vec<String> {
    acl.users()
        .iter()
        .map(|u| format!("user {} {}", u.name, u.describe()))
        .collect()
}

/// Writes every user to `path` through a synced temporary file, so a
/// crash leaves the old file or the new one.
pub fn save(acl: &Acl, path: &Path) -> std::io::Result<()> {
    let mut text = lines(acl).join("\n");
    text.push('\n');
    crate::util::replace_file(path, text.as_bytes())
}

/// The users a server starts with: `default`, the `user` lines, then the
/// ACL file (which may not be combined with `user` lines), then
/// `requirepass` as the default user's password.
pub fn from_config(config: &Config) -> Result<Acl, String> {
    let acl = Acl::default();
    acl.set_pubsub_default_all(config.acl_pubsub_default_all);
    if let Some(path) = &config.aclfile {
        if !config.users.is_empty() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        load(&acl, path)?;
    } else {
        let mut seen = std::collections::HashSet::new();
        for line in &config.users {
            let u = parse_user(&acl, line).map_err(|e| format!("user {line}: {e}"))?;
            if !seen.insert(u.name.clone()) {
                return Err(format!(
                    "Duplicate user '{}' found. A user can only be defined once in config files",
                    u.name
                ));
            }
            acl.put(u);
        }
    }
    if let Some(p) = &config.requirepass {
        acl.set_default_password(Some(p));
    }
    Ok(acl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_round_trips_through_save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl");
        let acl = Acl::default();
        acl.put(parse_user(&acl, "alice on >pw ~a* &ch +get (~b* +set)").unwrap());
        save(&acl, &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("user alice on sanitize-payload #"), "{text}");
        let other = Acl::default();
        load(&other, &path).unwrap();
        assert_eq!(lines(&other), lines(&acl));
        assert!(other.authenticate(b"alice", b"pw").is_some());
    }

    #[test]
    fn what_acl_list_prints_rebuilds_the_same_user() {
        use rand::{Rng, SeedableRng};
        let rules = [
            "on",
            "off",
            "nopass",
            "resetpass",
            ">p1",
            ">p2",
            "<p1",
            "~a*",
            "%R~r*",
            "%W~w*",
            "allkeys",
            "resetkeys",
            "&ch*",
            "allchannels",
            "resetchannels",
            "+get",
            "-get",
            "+@string",
            "-@dangerous",
            "+@all",
            "-@all",
            "+client|id",
            "-client",
            "+select|0",
            "(~s* +set)",
            "(%R~x +@read &c)",
            "clearselectors",
            "skip-sanitize-payload",
            "sanitize-payload",
            "reset",
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let acl = Acl::default();
        for _ in 0..500 {
            let n = rng.gen_range(1..10);
            let picked: Vec<String> = (0..n)
                .map(|_| rules[rng.gen_range(0..rules.len())].to_string())
                .collect();
            let Ok(u) = acl.build("u", &picked) else {
                continue;
            };
            let line = format!("u {}", u.describe());
            let again = parse_user(&acl, &line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(again.describe(), u.describe(), "{picked:?}");
            for (cmd, key) in [("get", "a1"), ("set", "w1"), ("get", "r1"), ("select", "0")] {
                let spec = crate::command::lookup(cmd.as_bytes()).unwrap();
                let args = [bytes::Bytes::from(cmd), bytes::Bytes::from(key)];
                assert_eq!(
                    crate::acl::check::check(&u, spec, &args).is_ok(),
                    crate::acl::check::check(&again, spec, &args).is_ok(),
                    "{line}: {cmd} {key}"
                );
            }
        }
    }

    #[test]
    fn a_bad_line_names_its_place_and_changes_nothing() {
        let acl = Acl::default();
        let path = Path::new("users.acl");
        let err = parse_file(
            &acl,
            path,
            "user a on +get\nuser b bogus\nfoo\nuser a off\nuser c +nosuch",
        )
        .unwrap_err();
        assert!(err.contains("users.acl:2: Syntax error. "), "{err}");
        assert!(
            err.contains("users.acl:3 should start with user keyword followed by the username. "),
            "{err}"
        );
        assert!(
            err.contains("WARNING: Duplicate user 'a' found on line 4. "),
            "{err}"
        );
        assert!(
            err.contains("users.acl:5: Error in applying operation '+nosuch': Unknown command or category name in ACL. "),
            "{err}"
        );
        assert!(
            err.ends_with("no change to the previously active ACL rules was performed"),
            "{err}"
        );
    }
}
