//! Where ACL users come from besides ACL SETUSER (Redis's `acl.c`
//! loading and saving): `user` lines of the configuration, the `aclfile`
//! read at start and by ACL LOAD, and ACL SAVE writing it back in ACL
//! LIST's format.
//!
//! Redis's rules, kept here: a file is all or nothing (one bad line and
//! nothing changes; every problem is listed in one line of errors), lines
//! are split on single spaces (no quoting) and must start with `user`,
//! a user may be defined once, comments are errors (the file is rewritten
//! by ACL SAVE). Users from the configuration and an ACL file exclude
//! each other.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crate::acl::{User, Users};
use crate::cmd::Ctx;
use crate::server::{ClientId, Server};

const ERR_UNKNOWN: &str = "Unknown command or category name in ACL";

/// Redis's `ACLStringHasSpaces`.
fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b == 0 || b.is_ascii_whitespace() || b == 0x0b)
}

/// Redis's `ACLLoadFromFile`: the users of `path`, or the error line
/// ACL LOAD answers and the start-up log prints.
/// `all`: `acl-pubsub-default allchannels` (users start with `&*`).
pub fn load_file(path: &Path, all: bool) -> Result<BTreeMap<String, User>, String> {
    let shown = path.display();
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{shown}': {}",
            os_error(&e)
        )
    })?;
    let mut users: BTreeMap<String, User> = BTreeMap::new();
    let mut errors = String::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line = trim(raw, b" \t\r\n");
        let n = i + 1;
        if line.is_empty() {
            continue;
        }
        let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if argv[0] != b"user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{shown}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = String::from_utf8_lossy(argv[1]).into_owned();
        if has_spaces(argv[1]) {
            errors.push_str(&format!(
                "'{shown}:{n}: username '{name}' contains invalid characters. "
            ));
            continue;
        }
        if users.contains_key(&name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {n}. "
            ));
            continue;
        }
        let mut u = User::with_default(&name, all);
        // Unknown commands are all reported (they say nothing secret);
        // of the other errors only the first, without the rule (it may
        // be a password).
        let mut syntax_error = false;
        for op in &argv[2..] {
            let op = trim(op, b"\t\r\n");
            if op.is_empty() {
                continue;
            }
            if let Err(why) = u.apply(op) {
                if why == ERR_UNKNOWN {
                    errors.push_str(&format!(
                        "{shown}:{n}: Error in applying operation '{}': {why}. ",
                        String::from_utf8_lossy(op)
                    ));
                } else if !syntax_error {
                    errors.push_str(&format!("{shown}:{n}: {why}. "));
                    syntax_error = true;
                }
            }
        }
        users.insert(name, u);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    users
        .entry("default".to_string())
        .or_insert_with(User::default_user);
    for u in users.values_mut() {
        u.pubsub_default_all = all;
    }
    Ok(users)
}

/// `strerror(errno)` of an I/O error (Rust appends " (os error N)").
pub(crate) fn os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn trim<'a>(mut s: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let [first, rest @ ..] = s {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s
}

/// ACL SAVE's text: ACL LIST's lines, one per user, by name.
pub fn file_text(users: &Users) -> String {
    let mut s = String::new();
    for u in users.users.values() {
        s.push_str(&u.describe());
        s.push('\n');
    }
    s
}

/// Redis's `ACLSaveToFile`: a temporary file beside `path`, renamed over
/// it; false on failure, logged as Redis logs it.
pub fn save_file(users: &Users, path: &Path) -> bool {
    let mut tmp = path.as_os_str().to_owned();
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    tmp.push(format!(".tmp-{}-{ms}", std::process::id()));
    let tmp = std::path::PathBuf::from(tmp);
    let text = file_text(users);
    let mut f = match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
    {
        Ok(f) => f,
        Err(e) => {
            log::warn!("Opening temp ACL file for ACL SAVE: {}", os_error(&e));
            return false;
        }
    };
    if let Err(e) = f.write_all(text.as_bytes()) {
        log::warn!("Writing ACL file for ACL SAVE: {}", os_error(&e));
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    drop(f);
    if let Err(e) = std::fs::rename(&tmp, path) {
        log::warn!("Renaming ACL file for ACL SAVE: {}", os_error(&e));
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    true
}

/// Check one `user` line of the configuration as Redis's
/// `ACLAppendUserForLoading` and `ACLLoadConfiguredUsers` do; `seen` is
/// the names of the lines before it. `Err` is Redis's message.
pub fn check_user_line(args: &[Vec<u8>], seen: &[Vec<u8>]) -> Result<(), String> {
    let name = &args[0];
    // Redis names argv[1] (the user) in these two messages.
    let shown = String::from_utf8_lossy(name);
    if seen.contains(name) {
        return Err(format!(
            "Error in user declaration '{shown}': Duplicate user found. A user can only be defined once in config files"
        ));
    }
    if has_spaces(name) {
        return Err("Spaces not allowed in ACL usernames".to_string());
    }
    let mut u = User::new(&shown);
    for op in &args[1..] {
        if let Err(why) = u.apply(op) {
            return Err(if why == ERR_UNKNOWN {
                format!(
                    "Error loading ACL rule '{}' for the user named '{shown}': {why}",
                    String::from_utf8_lossy(op)
                )
            } else {
                // Redis's `argc_err` indexes the rules but prints argv
                // from the directive's start: the user's name.
                format!("Error in user declaration '{shown}': {why}")
            });
        }
    }
    Ok(())
}

/// Apply the configuration's `user` lines (Redis's
/// `ACLLoadConfiguredUsers`; `user default` starts from `reset`).
pub fn apply_user_lines(users: &mut Users, lines: &[Vec<Vec<u8>>]) -> Result<(), String> {
    let all = users.pubsub_default_all;
    for args in lines {
        let name = String::from_utf8_lossy(&args[0]).into_owned();
        let u = users
            .users
            .entry(name.clone())
            .or_insert_with(|| User::with_default(&name, all));
        if name == "default" {
            let _ = u.apply(b"reset");
        }
        for op in &args[1..] {
            u.apply(op).map_err(|why| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{name}': {why}",
                    String::from_utf8_lossy(op)
                )
            })?;
        }
        if !u.enabled {
            log::info!(
                "The user '{name}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error."
            );
        }
    }
    Ok(())
}

/// The users at start: `requirepass`, then `user` lines, then the ACL
/// file (the configuration checked these already; an error now — the
/// file changed in between — is logged and the users stay as they are).
pub(crate) fn load_at_startup(server: &mut Server) {
    let lines = std::mem::take(&mut server.config.users);
    if let Err(e) = apply_user_lines(&mut server.users, &lines) {
        log::warn!("{e}");
    }
    server.config.users = lines;
    if let Some(path) = server.config.aclfile.clone() {
        match load_file(&path, server.users.pubsub_default_all) {
            Ok(users) => server.users.users = users,
            Err(e) => log::warn!("Aborting Redis startup because of ACL errors: {e}"),
        }
    }
    server.acl_restricted = server.users.any_restricted();
}

/// ACL LOAD: replace every user from the file; the clients of the old
/// users (all but `default`'s) are disconnected, as Redis frees the old
/// users and their clients.
pub(crate) fn acl_load(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(path) = server.config.aclfile.clone() else {
        return no_file(ctx);
    };
    let users = match load_file(&path, server.users.pubsub_default_all) {
        Ok(u) => u,
        Err(e) => return ctx.err(&format!("ERR {e}")),
    };
    server.users.users = users;
    server.acl_restricted = server.users.any_restricted();
    let ids: Vec<ClientId> = server
        .clients
        .values()
        .filter(|c| c.user != "default")
        .map(|c| c.id)
        .collect();
    for id in ids {
        if id == ctx.client_id {
            ctx.close = true;
        } else {
            server.schedule_close(id);
        }
    }
    ctx.ok();
}

/// ACL SAVE.
pub(crate) fn acl_save(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(path) = server.config.aclfile.clone() else {
        return no_file(ctx);
    };
    match save_file(&server.users, &path) {
        true => ctx.ok(),
        false => ctx.err(
            "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
        ),
    }
}

fn no_file(ctx: &mut Ctx<'_>) {
    ctx.err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("gyre-aclfile-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap_or_default();
        p
    }

    #[test]
    fn a_file_loads_and_gets_a_default_user() {
        let p = tmp("ok", "user bob on >p ~* +@all\n\n  \r\n");
        let users = load_file(&p, false).unwrap_or_default();
        assert!(users.contains_key("bob"));
        assert!(users.contains_key("default"));
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn errors_are_listed_as_redis_lists_them() {
        let p = tmp(
            "bad",
            "user bob on >p ~* +@all\nuser bob off\nfoo bar\nuser carol badrule +nosuch >x badtoo\n",
        );
        let e = load_file(&p, false).err().unwrap_or_default();
        let f = p.display();
        assert_eq!(
            e,
            format!(
                "WARNING: Duplicate user 'bob' found on line 2. {f}:3 should start with user keyword followed by the username. {f}:4: Syntax error. {f}:4: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
            )
        );
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn a_missing_file_says_why() {
        let p = std::path::Path::new("/nonexistent/gyre.acl");
        assert_eq!(
            load_file(p, false).err().unwrap_or_default(),
            "Error loading ACLs, opening file '/nonexistent/gyre.acl': No such file or directory"
        );
    }

    #[test]
    fn user_lines_are_checked_as_redis_checks_them() {
        let v = |s: &str| {
            s.split(' ')
                .map(|w| w.as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        assert!(check_user_line(&v("alice on >x ~* +@all"), &[]).is_ok());
        assert_eq!(
            check_user_line(&v("alice on badrule"), &[])
                .err()
                .unwrap_or_default(),
            "Error in user declaration 'alice': Syntax error"
        );
        assert_eq!(
            check_user_line(&v("alice off"), &[b"alice".to_vec()]).err().unwrap_or_default(),
            "Error in user declaration 'alice': Duplicate user found. A user can only be defined once in config files"
        );
        assert_eq!(
            check_user_line(&v("alice on +nosuch"), &[]).err().unwrap_or_default(),
            "Error loading ACL rule '+nosuch' for the user named 'alice': Unknown command or category name in ACL"
        );
    }
}
