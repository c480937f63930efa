//! The ACL command (Redis's `aclCommand`): SETUSER GETUSER DELUSER LIST
//! USERS WHOAMI CAT GENPASS DRYRUN SAVE LOAD LOG HELP, over the users and
//! rules of [`crate::acl`] (LOG: [`crate::acl_log`]; SAVE, LOAD:
//! [`crate::acl_file`]).

use crate::acl::{check, index, Denied, User, CATEGORIES};
use crate::cmd::{help_lines, no_handler, spec, CommandSpec, Ctx};
use crate::server::{ClientId, Server};
use crate::sha256::hex;

const ADMIN_SLOW: &[&str] = &["admin", "noscript", "loading", "stale"];
const SLOW: &[&str] = &["noscript", "loading", "stale"];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: ACL_SUBS,
    ..spec!(
        "acl",
        -2,
        &[],
        0,
        0,
        0,
        "server",
        "6.0.0",
        "A container for Access List Control commands",
        no_handler
    )
}];

static ACL_SUBS: &[CommandSpec] = &[
    spec!(
        "setuser",
        -3,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Modify or create the rules for a specific ACL user",
        acl_setuser
    ),
    spec!(
        "getuser",
        3,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Get the rules for a specific ACL user",
        acl_getuser
    ),
    spec!(
        "deluser",
        -3,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Remove the specified ACL users and the associated rules",
        acl_deluser
    ),
    spec!(
        "list",
        2,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "List the current ACL rules in ACL config file format",
        acl_list
    ),
    spec!(
        "users",
        2,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "List the username of all the configured ACL rules",
        acl_users
    ),
    spec!(
        "whoami",
        2,
        SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Return the name of the user associated to the current connection",
        acl_whoami
    ),
    spec!(
        "cat",
        -2,
        SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "List the ACL categories or the commands inside a category",
        acl_cat
    ),
    spec!(
        "genpass",
        -2,
        SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Generate a pseudorandom secure password to use for ACL users",
        acl_genpass
    ),
    spec!(
        "save",
        2,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Save the current ACL rules in the configured ACL file",
        crate::acl_file::acl_save
    ),
    spec!(
        "load",
        2,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Reload the ACLs from the configured ACL file",
        crate::acl_file::acl_load
    ),
    spec!(
        "log",
        -2,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "List latest events denied because of ACLs in place",
        acl_log
    ),
    spec!(
        "dryrun",
        -4,
        ADMIN_SLOW,
        0,
        0,
        0,
        "server",
        "7.0.0",
        "Returns whether the user can execute the given command without executing the command",
        acl_dryrun
    ),
    spec!(
        "help",
        2,
        SLOW,
        0,
        0,
        0,
        "server",
        "6.0.0",
        "Show helpful text about the different subcommands",
        acl_help
    ),
];

fn acl_setuser(server: &mut Server, ctx: &mut Ctx<'_>) {
    let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
    if name.contains(' ') || name.contains('\0') {
        return ctx.err("ERR Usernames can't contain spaces or null characters");
    }
    // All or nothing: the rules apply to a copy.
    let mut u = server
        .users
        .get(&name)
        .cloned()
        .unwrap_or_else(|| server.users.new_user(&name));
    for i in 3..ctx.argc() {
        let op = ctx.arg(i);
        if let Err(why) = u.apply(op) {
            let m = format!(
                "ERR Error in ACL SETUSER modifier '{}': {why}",
                String::from_utf8_lossy(op)
            );
            return ctx.err(&m);
        }
    }
    server.users.users.insert(name, u);
    server.acl_restricted = server.users.any_restricted();
    ctx.ok();
}

fn acl_getuser(server: &mut Server, ctx: &mut Ctx<'_>) {
    let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
    let Some(u) = server.users.get(&name) else {
        return ctx.null();
    };
    let (flags, pw, cmds, keys, chans) = (
        u.flags(),
        u.passwords.iter().map(hex).collect::<Vec<_>>(),
        u.describe_commands(),
        u.describe_keys(),
        u.describe_channels(),
    );
    ctx.map(6);
    ctx.bulk(b"flags");
    ctx.array(flags.len());
    for f in flags {
        ctx.bulk(f.as_bytes());
    }
    ctx.bulk(b"passwords");
    ctx.array(pw.len());
    for p in pw {
        ctx.bulk(p.as_bytes());
    }
    ctx.bulk(b"commands");
    ctx.bulk(cmds.as_bytes());
    ctx.bulk(b"keys");
    ctx.bulk(keys.as_bytes());
    ctx.bulk(b"channels");
    ctx.bulk(chans.as_bytes());
    ctx.bulk(b"selectors");
    ctx.array(0);
}

fn acl_deluser(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut n = 0;
    let mut gone = Vec::new();
    for i in 2..ctx.argc() {
        let name = String::from_utf8_lossy(ctx.arg(i)).into_owned();
        if name == "default" {
            return ctx.err("ERR The 'default' user cannot be removed");
        }
        gone.push(name);
    }
    for name in gone {
        if server.users.users.remove(&name).is_some() {
            n += 1;
            // Its connections go (Redis frees them asynchronously).
            let ids: Vec<ClientId> = server
                .clients
                .values()
                .filter(|c| c.user == name)
                .map(|c| c.id)
                .collect();
            for id in ids {
                if id == ctx.client_id {
                    ctx.close = true;
                } else {
                    server.schedule_close(id);
                }
            }
        }
    }
    server.acl_restricted = server.users.any_restricted();
    ctx.int(n);
}

fn acl_list(server: &mut Server, ctx: &mut Ctx<'_>) {
    let lines: Vec<String> = server.users.users.values().map(User::describe).collect();
    ctx.array(lines.len());
    for l in lines {
        ctx.bulk(l.as_bytes());
    }
}

fn acl_users(server: &mut Server, ctx: &mut Ctx<'_>) {
    let names: Vec<String> = server.users.users.keys().cloned().collect();
    ctx.array(names.len());
    for n in names {
        ctx.bulk(n.as_bytes());
    }
}

fn acl_whoami(server: &mut Server, ctx: &mut Ctx<'_>) {
    let name = server
        .clients
        .get(&ctx.client_id)
        .map_or_else(|| "default".to_string(), |c| c.user.clone());
    ctx.bulk(name.as_bytes());
}

fn acl_cat(_: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return subcommand_syntax_error(ctx);
    }
    if ctx.argc() == 2 {
        ctx.array(CATEGORIES.len());
        for c in CATEGORIES {
            ctx.bulk(c.as_bytes());
        }
        return;
    }
    let cat = String::from_utf8_lossy(ctx.arg(2)).to_ascii_lowercase();
    let Some(cat) = CATEGORIES.iter().find(|c| **c == cat) else {
        let m = format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(ctx.arg(2))
        );
        return ctx.err(&m);
    };
    let ix = index();
    let names: Vec<&String> = (0..ix.names.len())
        .filter(|&id| ix.cats[id].contains(cat))
        .map(|id| &ix.names[id])
        .collect();
    ctx.array(names.len());
    for n in names {
        ctx.bulk(n.as_bytes());
    }
}

/// Random bytes from the kernel (ACL GENPASS must not be guessable).
fn urandom(n: usize) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open("/dev/urandom").ok()?;
    let mut b = vec![0u8; n];
    f.read_exact(&mut b).ok()?;
    Some(b)
}

fn acl_genpass(_: &mut Server, ctx: &mut Ctx<'_>) {
    let bits = if ctx.argc() > 2 {
        match crate::util::string2ll(ctx.arg(2)) {
            Some(b) if (1..=4096).contains(&b) => b as usize,
            _ => return ctx.err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"),
        }
    } else {
        256
    };
    let chars = bits.div_ceil(4);
    let Some(bytes) = urandom(chars.div_ceil(2)) else {
        return ctx.err("ERR Failed to read random bytes");
    };
    let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.truncate(chars);
    ctx.bulk(s.as_bytes());
}

/// ACL DRYRUN user command [args...]: what the check would say.
fn acl_dryrun(server: &mut Server, ctx: &mut Ctx<'_>) {
    let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
    let Some(u) = server.users.get(&name) else {
        return ctx.err(&format!("ERR User '{name}' not found"));
    };
    // The command's own argv (arguments 3..).
    let mut buf = Vec::new();
    let mut spans = Vec::new();
    for i in 3..ctx.argc() {
        let s = buf.len();
        buf.extend_from_slice(ctx.arg(i));
        spans.push((s, buf.len()));
    }
    let argv = crate::resp::Argv::new(&buf, &spans);
    let first = argv.get(0).unwrap_or_default();
    if server.table.get(first).is_none() {
        let m = format!("ERR Command '{}' not found", String::from_utf8_lossy(first));
        return ctx.err(&m);
    }
    let cmd = match server.lookup_command(argv) {
        Ok(c) => c,
        Err(msg) => {
            ctx.errors += 1;
            return crate::resp::write_error(ctx.out, &msg);
        }
    };
    let arg = |i: usize| String::from_utf8_lossy(argv.get(i).unwrap_or_default()).into_owned();
    match check(u, &cmd, argv) {
        Ok(()) => ctx.ok(),
        Err(d) => {
            let m = match d {
                Denied::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    cmd.full_name()
                ),
                Denied::Key(i) => {
                    format!(
                        "This user has no permissions to access the '{}' key",
                        arg(i)
                    )
                }
                Denied::Channel(i) => format!(
                    "This user has no permissions to access the '{}' channel",
                    arg(i)
                ),
            };
            ctx.bulk(m.as_bytes());
        }
    }
}

/// ACL LOG [count | RESET] (arity -2 with at most one argument).
fn acl_log(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() > 3 {
        return subcommand_syntax_error(ctx);
    }
    crate::acl_log::acl_log_command(server, ctx);
}

/// Redis's `addReplySubcommandSyntaxError` (the subcommand as typed).
fn subcommand_syntax_error(ctx: &mut Ctx<'_>) {
    let m = format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        String::from_utf8_lossy(crate::cmd::c_str(ctx.arg(1), 128))
    );
    ctx.err(&m);
}

fn acl_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
}
