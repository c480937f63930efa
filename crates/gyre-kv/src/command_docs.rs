//! COMMAND, COMMAND COUNT / INFO / DOCS / LIST / HELP: the command table
//! described to clients.

use crate::cmd::{eq, help_lines, spec, CommandSpec, Ctx, ADMIN};
use crate::server::Server;

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: COMMAND_SUBS,
    ..spec!(
        "command",
        -1,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Get array of Redis command details",
        command
    )
}];

static COMMAND_SUBS: &[CommandSpec] = &[
    spec!(
        "count",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Get total number of Redis commands",
        command_count
    ),
    spec!(
        "info",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.13",
        "Get array of specific Redis command details, or all when no argument is given",
        command_info
    ),
    spec!(
        "docs",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "7.0.0",
        "Get array of specific Redis command documentation",
        command_docs
    ),
    spec!(
        "list",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "7.0.0",
        "Get an array of Redis command names",
        command_list
    ),
    spec!(
        "help",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "5.0.0",
        "Show helpful text about the different subcommands",
        command_help
    ),
];

fn command_info_one(ctx: &mut Ctx<'_>, c: &CommandSpec, parent: Option<&str>) {
    ctx.array(10);
    let name = match parent {
        Some(p) => format!("{p}|{}", c.name),
        None => c.name.to_string(),
    };
    ctx.bulk(name.as_bytes());
    ctx.int(i64::from(c.arity));
    ctx.set_len(c.flags.len());
    for f in c.flags {
        ctx.simple(f);
    }
    ctx.int(i64::from(c.first_key));
    ctx.int(i64::from(c.last_key));
    ctx.int(i64::from(c.step));
    ctx.set_len(1);
    // The ACL category of a group ("sorted-set" is "@sortedset").
    ctx.simple(&format!("@{}", c.group.replace('-', "")));
    ctx.set_len(0); // tips
    ctx.set_len(0); // key specs
    ctx.set_len(c.subcommands.len());
    for s in c.subcommands {
        command_info_one(ctx, s, Some(c.name));
    }
}

/// The commands as the server knows them: after `rename-command`, a
/// renamed command is found by its new name but shown by its own (its
/// `fullname`, as in Redis), a removed one is gone.
fn commands(server: &Server) -> Vec<&'static CommandSpec> {
    server
        .table
        .ids()
        .iter()
        .filter(|r| r.parent.is_none())
        .map(|r| r.spec)
        .collect()
}

fn command(server: &mut Server, ctx: &mut Ctx<'_>) {
    let all = commands(server);
    ctx.array(all.len());
    for c in all {
        command_info_one(ctx, c, None);
    }
}

fn command_count(server: &mut Server, ctx: &mut Ctx<'_>) {
    ctx.int(commands(server).len() as i64);
}

fn find_spec(server: &Server, name: &[u8]) -> Option<&'static CommandSpec> {
    let mut parts = name.splitn(2, |&b| b == b'|');
    let top = parts.next()?;
    let spec = server.table.get(top)?;
    let lower = name.to_ascii_lowercase();
    let mut parts = lower.splitn(2, |&b| b == b'|');
    parts.next();
    match parts.next() {
        None => Some(spec),
        Some(sub) => spec.subcommands.iter().find(|s| s.name.as_bytes() == sub),
    }
}

fn command_info(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() == 2 {
        return command(server, ctx);
    }
    ctx.array(ctx.argc() - 2);
    for i in 2..ctx.argc() {
        match find_spec(server, ctx.arg(i)) {
            Some(c) => command_info_one(ctx, c, None),
            // Redis answers an unknown name with a null (`$-1` in RESP2).
            None => ctx.null(),
        }
    }
}

fn command_doc_one(ctx: &mut Ctx<'_>, c: &CommandSpec) {
    ctx.bulk(c.name.as_bytes());
    ctx.map(3);
    ctx.bulk(b"summary");
    ctx.bulk(c.summary.as_bytes());
    ctx.bulk(b"since");
    ctx.bulk(c.since.as_bytes());
    ctx.bulk(b"group");
    ctx.bulk(c.group.as_bytes());
}

fn command_docs(server: &mut Server, ctx: &mut Ctx<'_>) {
    if ctx.argc() == 2 {
        let all = commands(server);
        ctx.map(all.len());
        for c in all {
            command_doc_one(ctx, c);
        }
        return;
    }
    let found: Vec<&CommandSpec> = (2..ctx.argc())
        .filter_map(|i| find_spec(server, ctx.arg(i)))
        .collect();
    ctx.map(found.len());
    for c in found {
        command_doc_one(ctx, c);
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]:
/// every command and subcommand by its full name (`memory|usage`), as
/// Redis 7.0 lists them; no module is loaded, an unknown category matches
/// nothing, a pattern matches the full names without case.
fn command_list(server: &mut Server, ctx: &mut Ctx<'_>) {
    let names: Vec<String> = server.table.ids().iter().map(|r| r.full_name()).collect();
    let keep: Vec<&String> = match ctx.argc() {
        2 => names.iter().collect(),
        5 if eq(ctx.arg(2), "filterby") => {
            let v = ctx.arg(4);
            if eq(ctx.arg(3), "module") {
                Vec::new()
            } else if eq(ctx.arg(3), "aclcat") {
                let cat = String::from_utf8_lossy(v).to_ascii_lowercase();
                let ix = crate::acl::index();
                let in_cat = |n: &str| {
                    ix.names
                        .binary_search_by(|x| x.as_str().cmp(n))
                        .is_ok_and(|id| ix.cats[id].iter().any(|c| *c == cat))
                };
                names.iter().filter(|n| in_cat(n)).collect()
            } else if eq(ctx.arg(3), "pattern") {
                names
                    .iter()
                    .filter(|n| crate::glob::stringmatch(v, n.as_bytes(), true))
                    .collect()
            } else {
                return ctx.syntax();
            }
        }
        _ => return ctx.syntax(),
    };
    ctx.array(keep.len());
    for n in keep {
        ctx.bulk(n.as_bytes());
    }
}

fn command_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "COMMAND",
        &[
            "COUNT",
            "DOCS [<command-name> ...]",
            "INFO [<command-name> ...]",
            "LIST",
        ],
    );
}
