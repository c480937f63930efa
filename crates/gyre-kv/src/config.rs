//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP (Redis's `config.c`):
//! the runtime parameter table. The `kv {}` block is [`crate::conf`].

use crate::cmd::{c_str, eq, help_lines, no_handler, spec, CommandSpec, Ctx, ADMIN};
use crate::glob::stringmatch;
use crate::server::Server;
use crate::util::{memtoull, string2ll};

pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: CONFIG_SUBS,
    ..spec!(
        "config",
        -2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.0.0",
        "A container for server configuration commands",
        no_handler
    )
}];

static CONFIG_SUBS: &[CommandSpec] = &[
    spec!(
        "get",
        -3,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.0.0",
        "Get the values of configuration parameters",
        config_get
    ),
    spec!(
        "set",
        -4,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.0.0",
        "Set configuration parameters to the given values",
        config_set
    ),
    spec!(
        "resetstat",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.0.0",
        "Reset the stats returned by INFO",
        config_resetstat
    ),
    spec!(
        "rewrite",
        2,
        ADMIN,
        0,
        0,
        0,
        "server",
        "2.8.0",
        "Rewrite the configuration file with the in memory configuration",
        config_rewrite
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
        config_help
    ),
];

#[derive(Clone, Copy)]
enum Kind {
    Int {
        min: i64,
        max: i64,
    },
    Mem {
        min: u64,
        max: u64,
    },
    Bool,
    /// Text checked by [`crate::persist::check_config`].
    Str,
    Immutable,
    /// Parsed and applied by [`special_set`] (strings and lists).
    Special,
}

struct Param {
    name: &'static str,
    kind: Kind,
}

const PARAMS: &[Param] = &[
    Param {
        name: "hz",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "dynamic-hz",
        kind: Kind::Bool,
    },
    Param {
        name: "timeout",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "maxclients",
        kind: Kind::Int {
            min: 1,
            max: u32::MAX as i64,
        },
    },
    Param {
        name: "databases",
        kind: Kind::Immutable,
    },
    Param {
        name: "maxmemory-clients",
        kind: Kind::Special,
    },
    Param {
        name: "acl-pubsub-default",
        kind: Kind::Special,
    },
    Param {
        name: "latency-tracking",
        kind: Kind::Bool,
    },
    Param {
        name: "latency-tracking-info-percentiles",
        kind: Kind::Special,
    },
    Param {
        name: "latency-monitor-threshold",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "slowlog-log-slower-than",
        kind: Kind::Int {
            min: i64::MIN,
            max: i64::MAX,
        },
    },
    Param {
        name: "slowlog-max-len",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "enable-debug-command",
        kind: Kind::Immutable,
    },
    Param {
        name: "acllog-max-len",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "aclfile",
        kind: Kind::Immutable,
    },
    Param {
        name: "proto-max-bulk-len",
        kind: Kind::Mem {
            min: 1024 * 1024,
            max: i64::MAX as u64,
        },
    },
    Param {
        name: "client-query-buffer-limit",
        kind: Kind::Mem {
            min: 1024 * 1024,
            max: i64::MAX as u64,
        },
    },
    Param {
        name: "maxmemory",
        kind: Kind::Mem {
            min: 0,
            max: u64::MAX,
        },
    },
    Param {
        name: "port",
        kind: Kind::Immutable,
    },
    Param {
        name: "tls-cert-file",
        kind: Kind::Special,
    },
    Param {
        name: "tls-key-file",
        kind: Kind::Special,
    },
    Param {
        name: "tls-ca-cert-file",
        kind: Kind::Special,
    },
    Param {
        name: "tls-ciphers",
        kind: Kind::Special,
    },
    Param {
        name: "tls-ciphersuites",
        kind: Kind::Special,
    },
    Param {
        name: "tls-prefer-server-ciphers",
        kind: Kind::Special,
    },
    Param {
        name: "tls-protocols",
        kind: Kind::Special,
    },
    Param {
        name: "tls-auth-clients",
        kind: Kind::Special,
    },
    Param {
        name: "bind",
        kind: Kind::Immutable,
    },
    Param {
        name: "save",
        kind: Kind::Str,
    },
    Param {
        name: "dir",
        kind: Kind::Str,
    },
    Param {
        name: "dbfilename",
        kind: Kind::Str,
    },
    Param {
        name: "rdbcompression",
        kind: Kind::Bool,
    },
    Param {
        name: "rdbchecksum",
        kind: Kind::Bool,
    },
    Param {
        name: "stop-writes-on-bgsave-error",
        kind: Kind::Bool,
    },
    Param {
        name: "rdb-del-sync-files",
        kind: Kind::Bool,
    },
    Param {
        name: "rdb-save-incremental-fsync",
        kind: Kind::Bool,
    },
    Param {
        name: "bgsave-slice-us",
        kind: Kind::Int {
            min: 10,
            max: 1_000_000,
        },
    },
    Param {
        name: "appendonly",
        kind: Kind::Bool,
    },
    Param {
        name: "appendfsync",
        kind: Kind::Special,
    },
    Param {
        name: "appendfilename",
        kind: Kind::Immutable,
    },
    Param {
        name: "appenddirname",
        kind: Kind::Immutable,
    },
    Param {
        name: "no-appendfsync-on-rewrite",
        kind: Kind::Bool,
    },
    Param {
        name: "auto-aof-rewrite-percentage",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "auto-aof-rewrite-min-size",
        kind: Kind::Mem {
            min: 0,
            max: i64::MAX as u64,
        },
    },
    Param {
        name: "aof-use-rdb-preamble",
        kind: Kind::Bool,
    },
    Param {
        name: "aof-load-truncated",
        kind: Kind::Bool,
    },
    Param {
        name: "aof-timestamp-enabled",
        kind: Kind::Bool,
    },
    Param {
        name: "aof-rewrite-incremental-fsync",
        kind: Kind::Bool,
    },
    Param {
        name: "lazyfree-lazy-expire",
        kind: Kind::Bool,
    },
    Param {
        name: "lazyfree-lazy-eviction",
        kind: Kind::Bool,
    },
    Param {
        name: "maxmemory-policy",
        kind: Kind::Special,
    },
    Param {
        name: "maxmemory-samples",
        kind: Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "maxmemory-eviction-tenacity",
        kind: Kind::Int { min: 0, max: 100 },
    },
    Param {
        name: "lfu-log-factor",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "lfu-decay-time",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "requirepass",
        kind: Kind::Special,
    },
    Param {
        name: "protected-mode",
        kind: Kind::Bool,
    },
    Param {
        name: "client-output-buffer-limit",
        kind: Kind::Special,
    },
    Param {
        name: "notify-keyspace-events",
        kind: Kind::Special,
    },
    Param {
        name: "hash-max-listpack-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "hash-max-ziplist-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "hash-max-listpack-value",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "hash-max-ziplist-value",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "set-max-intset-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "set-max-listpack-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "zset-max-listpack-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "zset-max-ziplist-entries",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "zset-max-listpack-value",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "zset-max-ziplist-value",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    },
    Param {
        name: "list-max-listpack-size",
        kind: Kind::Int {
            min: i32::MIN as i64,
            max: i32::MAX as i64,
        },
    },
    Param {
        name: "list-max-ziplist-size",
        kind: Kind::Int {
            min: i32::MIN as i64,
            max: i32::MAX as i64,
        },
    },
];

fn param_value(server: &Server, name: &str) -> String {
    param_value_of(&server.config, name)
}

/// A parameter's CONFIG GET value in configuration `c`.
pub(crate) fn param_value_of(c: &crate::server::Config, name: &str) -> String {
    let yn = |b: bool| if b { "yes" } else { "no" }.to_string();
    match name {
        "hz" => c.hz.to_string(),
        "dynamic-hz" => yn(c.dynamic_hz),
        "timeout" => c.timeout.to_string(),
        "maxclients" => c.maxclients.to_string(),
        "databases" => c.databases.to_string(),
        "acllog-max-len" => c.acllog_max_len.to_string(),
        "latency-tracking" => yn(c.latency_tracking),
        "latency-monitor-threshold" => c.latency_monitor_threshold.to_string(),
        "slowlog-log-slower-than" => c.slowlog_log_slower_than.to_string(),
        "slowlog-max-len" => c.slowlog_max_len.to_string(),
        "enable-debug-command" => c.enable_debug_command.name().to_string(),
        "latency-tracking-info-percentiles" => {
            crate::latency::format_percentiles(&c.latency_percentiles.0)
        }
        "acl-pubsub-default" => if c.acl_pubsub_default_all {
            "allchannels"
        } else {
            "resetchannels"
        }
        .to_string(),
        "maxmemory-clients" => crate::client_evict::format(c.maxmemory_clients),
        "aclfile" => c
            .aclfile
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        "proto-max-bulk-len" => c.proto_max_bulk_len.to_string(),
        "client-query-buffer-limit" => c.client_query_buffer_limit.to_string(),
        "maxmemory" => c.maxmemory.to_string(),
        "port" => c.port.to_string(),
        n if crate::tls::PARAMS.contains(&n) => {
            c.tls.as_ref().map(|t| t.get(n)).unwrap_or_default()
        }
        "bind" => c.bind.clone(),
        "save" => c.persist.save_text(),
        "dir" => c.persist.dir.display().to_string(),
        "dbfilename" => c.persist.dbfilename.clone(),
        "rdbcompression" => yn(c.persist.rdbcompression),
        "rdbchecksum" => yn(c.persist.rdbchecksum),
        "stop-writes-on-bgsave-error" => yn(c.persist.stop_writes_on_bgsave_error),
        "rdb-del-sync-files" => yn(c.persist.rdb_del_sync_files),
        "rdb-save-incremental-fsync" => yn(c.persist.rdb_save_incremental_fsync),
        "bgsave-slice-us" => c.persist.bgsave_slice_us.to_string(),
        "appendonly" => yn(c.persist.aof.appendonly),
        "appendfsync" => c.persist.aof.appendfsync.name().into(),
        "appendfilename" => c.persist.aof.appendfilename.clone(),
        "appenddirname" => c.persist.aof.appenddirname.clone(),
        "no-appendfsync-on-rewrite" => yn(c.persist.aof.no_appendfsync_on_rewrite),
        "auto-aof-rewrite-percentage" => c.persist.aof.auto_rewrite_perc.to_string(),
        "auto-aof-rewrite-min-size" => c.persist.aof.auto_rewrite_min_size.to_string(),
        "aof-use-rdb-preamble" => yn(c.persist.aof.use_rdb_preamble),
        "aof-load-truncated" => yn(c.persist.aof.load_truncated),
        "aof-timestamp-enabled" => yn(c.persist.aof.timestamp_enabled),
        "aof-rewrite-incremental-fsync" => yn(c.persist.aof.rewrite_incremental_fsync),
        "lazyfree-lazy-expire" => yn(c.lazyfree_lazy_expire),
        "lazyfree-lazy-eviction" => yn(c.lazyfree_lazy_eviction),
        "maxmemory-policy" => c.evict.policy.name().into(),
        "maxmemory-samples" => c.evict.samples.to_string(),
        "maxmemory-eviction-tenacity" => c.evict.tenacity.to_string(),
        "lfu-log-factor" => c.evict.lfu_log_factor.to_string(),
        "lfu-decay-time" => c.evict.lfu_decay_time.to_string(),
        "requirepass" => c
            .requirepass
            .as_deref()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default(),
        "protected-mode" => yn(c.protected_mode),
        "client-output-buffer-limit" => crate::output::format_limits(&c.client_output_buffer_limit),
        "notify-keyspace-events" => crate::notify::flags_to_string(c.notify_keyspace_events),
        "hash-max-listpack-entries" => c.encodings.hash_max_listpack_entries.to_string(),
        "hash-max-ziplist-entries" => c.encodings.hash_max_listpack_entries.to_string(),
        "hash-max-listpack-value" => c.encodings.hash_max_listpack_value.to_string(),
        "hash-max-ziplist-value" => c.encodings.hash_max_listpack_value.to_string(),
        "set-max-intset-entries" => c.encodings.set_max_intset_entries.to_string(),
        "set-max-listpack-entries" => c.encodings.set_max_listpack_entries.to_string(),
        "zset-max-listpack-entries" => c.encodings.zset_max_listpack_entries.to_string(),
        "zset-max-ziplist-entries" => c.encodings.zset_max_listpack_entries.to_string(),
        "zset-max-listpack-value" => c.encodings.zset_max_listpack_value.to_string(),
        "zset-max-ziplist-value" => c.encodings.zset_max_listpack_value.to_string(),
        "list-max-listpack-size" => c.encodings.list_max_listpack_size.to_string(),
        "list-max-ziplist-size" => c.encodings.list_max_listpack_size.to_string(),
        _ => String::new(),
    }
}

fn config_get(server: &mut Server, ctx: &mut Ctx<'_>) {
    let mut names: Vec<&'static str> = Vec::new();
    for i in 2..ctx.argc() {
        let pat = ctx.arg(i).to_vec();
        for p in PARAMS {
            if stringmatch(&pat, p.name.as_bytes(), true) && !names.contains(&p.name) {
                names.push(p.name);
            }
        }
    }
    ctx.map(names.len());
    for n in names {
        ctx.bulk(n.as_bytes());
        let v = param_value(server, n);
        ctx.bulk(v.as_bytes());
    }
}

enum NewValue {
    Int(i64),
    Mem(u64),
    Bool(bool),
    Str(String),
    Special(Vec<u8>),
}

/// Check a [`Kind::Special`] value; `Err` with Redis's reason.
fn special_check(server: &Server, name: &str, val: &[u8]) -> Result<(), &'static str> {
    match name {
        "client-output-buffer-limit" => {
            let text = String::from_utf8_lossy(val);
            let args: Vec<&[u8]> = text.split_ascii_whitespace().map(str::as_bytes).collect();
            let mut l = server.config.client_output_buffer_limit;
            crate::output::parse_limits(&args, &mut l)
        }
        "maxmemory-policy" => crate::evict::Policy::parse(val)
            .map(|_| ())
            .ok_or("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"),
        "maxmemory-clients" => crate::client_evict::parse(val).map(|_| ()),
        "acl-pubsub-default" => crate::acl::parse_pubsub_default(val)
            .map(|_| ())
            .ok_or(crate::acl::ERR_PUBSUB_DEFAULT),
        "notify-keyspace-events" => crate::notify::string_to_flags(val)
            .map(|_| ())
            .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
        "latency-tracking-info-percentiles" => {
            crate::latency::parse_percentiles(&split_list(val)).map(|_| ())
        }
        "appendfsync" => crate::aof::Fsync::parse(val)
            .map(|_| ())
            .ok_or("argument(s) must be one of the following: always, everysec, no"),
        _ => Ok(()),
    }
}

/// A list value's items (CONFIG SET splits it at spaces; `""` is one
/// empty item, the empty list).
fn split_list(val: &[u8]) -> Vec<&[u8]> {
    let v: Vec<&[u8]> = val
        .split(u8::is_ascii_whitespace)
        .filter(|a| !a.is_empty())
        .collect();
    if v.is_empty() {
        vec![&b""[..]]
    } else {
        v
    }
}

/// Apply a checked [`Kind::Special`] value.
fn special_set(server: &mut Server, name: &str, val: &[u8]) {
    let c = &mut server.config;
    match name {
        "requirepass" => {
            c.requirepass = (!val.is_empty()).then(|| val.to_vec());
            let pass = c.requirepass.clone();
            server.users.set_default_password(pass.as_deref());
        }
        "maxmemory-policy" => {
            if let Some(p) = crate::evict::Policy::parse(val) {
                c.evict.policy = p;
            }
            crate::evict::sync_policy(server);
        }
        "client-output-buffer-limit" => {
            let text = String::from_utf8_lossy(val);
            let args: Vec<&[u8]> = text.split_ascii_whitespace().map(str::as_bytes).collect();
            let _ = crate::output::parse_limits(&args, &mut c.client_output_buffer_limit);
        }
        "acl-pubsub-default" => {
            let all = crate::acl::parse_pubsub_default(val).unwrap_or(false);
            c.acl_pubsub_default_all = all;
            server.users.set_pubsub_default(all);
        }
        "maxmemory-clients" => {
            if let Ok(l) = crate::client_evict::parse(val) {
                c.maxmemory_clients = l;
            }
            // Count everyone now: the total is only kept while a limit is.
            crate::client_evict::recount(server);
        }
        "notify-keyspace-events" => {
            c.notify_keyspace_events = crate::notify::string_to_flags(val).unwrap_or(0);
            crate::notify::sync_expired_log(server);
            crate::notify::sync_change_log(server);
        }
        "latency-tracking-info-percentiles" => {
            if let Ok(v) = crate::latency::parse_percentiles(&split_list(val)) {
                c.latency_percentiles = v;
            }
        }
        "appendfsync" => {
            if let Some(f) = crate::aof::Fsync::parse(val) {
                c.persist.aof.appendfsync = f;
            }
        }
        _ => {}
    }
}

fn config_set(server: &mut Server, ctx: &mut Ctx<'_>) {
    // An odd count past the arity check: Redis 7.0.15 says syntax error.
    if ctx.argc() % 2 != 0 {
        return ctx.syntax();
    }
    let mut updates: Vec<(&'static str, NewValue)> = Vec::new();
    let mut j = 2;
    while j + 1 < ctx.argc() {
        let name_arg = ctx.arg(j).to_ascii_lowercase();
        let val = ctx.arg(j + 1).to_vec();
        let shown = String::from_utf8_lossy(c_str(ctx.arg(j), 128)).into_owned();
        j += 2;
        let Some(p) = PARAMS
            .iter()
            .find(|p| p.name.as_bytes() == name_arg.as_slice())
        else {
            return ctx.err(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{shown}'"
            ));
        };
        let fail = |why: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{shown}') - {why}")
        };
        if updates.iter().any(|(n, _)| *n == p.name) {
            return ctx.err(&fail("duplicate parameter"));
        }
        let nv = match p.kind {
            Kind::Immutable => return ctx.err(&fail("can't set immutable config")),
            Kind::Str => {
                let text = String::from_utf8_lossy(&val).into_owned();
                match crate::persist::check_config(&server.config.persist, p.name, &text) {
                    Ok(v) => NewValue::Str(v),
                    Err(why) => return ctx.err(&fail(&why)),
                }
            }
            Kind::Special => match special_check(server, p.name, &val) {
                Ok(()) => NewValue::Special(val),
                Err(why) => return ctx.err(&fail(why)),
            },
            Kind::Bool => {
                if eq(&val, "yes") {
                    NewValue::Bool(true)
                } else if eq(&val, "no") {
                    NewValue::Bool(false)
                } else {
                    return ctx.err(&fail("argument must be 'yes' or 'no'"));
                }
            }
            Kind::Int { min, max } => match string2ll(&val) {
                None => return ctx.err(&fail("argument couldn't be parsed into an integer")),
                Some(v) if v < min || v > max => {
                    return ctx.err(&fail(&format!(
                        "argument must be between {min} and {max} inclusive"
                    )))
                }
                Some(v) => NewValue::Int(v),
            },
            Kind::Mem { min, max } => match memtoull(&val) {
                None => return ctx.err(&fail("argument must be a memory value")),
                Some(v) if v < min || v > max => {
                    return ctx.err(&fail(&format!(
                        "argument must be between {min} and {max} inclusive"
                    )))
                }
                Some(v) => NewValue::Mem(v),
            },
        };
        updates.push((p.name, nv));
    }
    // The TLS files change together (a new certificate and its key) and
    // are read before anything is applied, as Redis's applyTlsCfg.
    let tls: Vec<(&str, String)> = updates
        .iter()
        .filter(|(n, _)| crate::tls::PARAMS.contains(n))
        .filter_map(|(n, v)| match v {
            NewValue::Special(val) => Some((*n, String::from_utf8_lossy(val).into_owned())),
            _ => None,
        })
        .collect();
    if let (false, Some(swap)) = (tls.is_empty(), server.config.tls.clone()) {
        let changes: Vec<(&str, &str)> = tls.iter().map(|(n, v)| (*n, v.as_str())).collect();
        if let Err(e) = swap.set(&changes) {
            let shown = tls.first().map_or("", |(n, _)| n);
            log::warn!("{e}");
            log::warn!(
                "Failed applying new configuration. Possibly related to new {shown} setting. Restoring previous settings."
            );
            return ctx.err(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{shown}') - Unable to update TLS configuration. Check server logs."
            ));
        }
    }
    let aof_was = server.config.persist.aof.appendonly;
    for (name, v) in updates {
        if let NewValue::Special(val) = v {
            special_set(server, name, &val);
            continue;
        }
        let c = &mut server.config;
        match (name, v) {
            ("protected-mode", NewValue::Bool(b)) => c.protected_mode = b,
            ("maxmemory-samples", NewValue::Int(v)) => c.evict.samples = v as u32,
            ("maxmemory-eviction-tenacity", NewValue::Int(v)) => c.evict.tenacity = v as u32,
            ("lfu-log-factor", NewValue::Int(v)) => c.evict.lfu_log_factor = v as u32,
            ("lfu-decay-time", NewValue::Int(v)) => c.evict.lfu_decay_time = v as u32,
            ("hz", NewValue::Int(v)) => {
                c.hz = (v as u32).clamp(crate::server::MIN_HZ, crate::server::MAX_HZ)
            }
            ("dynamic-hz", NewValue::Bool(b)) => c.dynamic_hz = b,
            ("timeout", NewValue::Int(v)) => c.timeout = v as u64,
            ("maxclients", NewValue::Int(v)) => c.maxclients = v as u64,
            ("acllog-max-len", NewValue::Int(v)) => c.acllog_max_len = v as u64,
            ("proto-max-bulk-len", NewValue::Mem(v)) => c.proto_max_bulk_len = v,
            ("client-query-buffer-limit", NewValue::Mem(v)) => c.client_query_buffer_limit = v,
            ("maxmemory", NewValue::Mem(v)) => c.maxmemory = v,
            ("hash-max-listpack-entries", NewValue::Int(v)) => {
                c.encodings.hash_max_listpack_entries = v as u64
            }
            ("hash-max-ziplist-entries", NewValue::Int(v)) => {
                c.encodings.hash_max_listpack_entries = v as u64
            }
            ("hash-max-listpack-value", NewValue::Int(v)) => {
                c.encodings.hash_max_listpack_value = v as u64
            }
            ("hash-max-ziplist-value", NewValue::Int(v)) => {
                c.encodings.hash_max_listpack_value = v as u64
            }
            ("set-max-intset-entries", NewValue::Int(v)) => {
                c.encodings.set_max_intset_entries = v as u64
            }
            ("set-max-listpack-entries", NewValue::Int(v)) => {
                c.encodings.set_max_listpack_entries = v as u64
            }
            ("zset-max-listpack-entries", NewValue::Int(v)) => {
                c.encodings.zset_max_listpack_entries = v as u64
            }
            ("zset-max-ziplist-entries", NewValue::Int(v)) => {
                c.encodings.zset_max_listpack_entries = v as u64
            }
            ("zset-max-listpack-value", NewValue::Int(v)) => {
                c.encodings.zset_max_listpack_value = v as u64
            }
            ("zset-max-ziplist-value", NewValue::Int(v)) => {
                c.encodings.zset_max_listpack_value = v as u64
            }
            ("list-max-listpack-size", NewValue::Int(v)) => c.encodings.list_max_listpack_size = v,
            ("list-max-ziplist-size", NewValue::Int(v)) => c.encodings.list_max_listpack_size = v,
            ("rdbcompression", NewValue::Bool(b)) => c.persist.rdbcompression = b,
            ("rdbchecksum", NewValue::Bool(b)) => c.persist.rdbchecksum = b,
            ("stop-writes-on-bgsave-error", NewValue::Bool(b)) => {
                c.persist.stop_writes_on_bgsave_error = b
            }
            ("rdb-del-sync-files", NewValue::Bool(b)) => c.persist.rdb_del_sync_files = b,
            ("rdb-save-incremental-fsync", NewValue::Bool(b)) => {
                c.persist.rdb_save_incremental_fsync = b
            }
            ("bgsave-slice-us", NewValue::Int(v)) => c.persist.bgsave_slice_us = v as u64,
            ("appendonly", NewValue::Bool(b)) => c.persist.aof.appendonly = b,
            ("no-appendfsync-on-rewrite", NewValue::Bool(b)) => {
                c.persist.aof.no_appendfsync_on_rewrite = b
            }
            ("auto-aof-rewrite-percentage", NewValue::Int(v)) => {
                c.persist.aof.auto_rewrite_perc = v as u64
            }
            ("auto-aof-rewrite-min-size", NewValue::Mem(v)) => {
                c.persist.aof.auto_rewrite_min_size = v
            }
            ("aof-use-rdb-preamble", NewValue::Bool(b)) => c.persist.aof.use_rdb_preamble = b,
            ("aof-load-truncated", NewValue::Bool(b)) => c.persist.aof.load_truncated = b,
            ("aof-timestamp-enabled", NewValue::Bool(b)) => c.persist.aof.timestamp_enabled = b,
            ("aof-rewrite-incremental-fsync", NewValue::Bool(b)) => {
                c.persist.aof.rewrite_incremental_fsync = b
            }
            ("lazyfree-lazy-expire", NewValue::Bool(b)) => c.lazyfree_lazy_expire = b,
            ("latency-tracking", NewValue::Bool(b)) => c.latency_tracking = b,
            ("latency-monitor-threshold", NewValue::Int(v)) => {
                c.latency_monitor_threshold = v as u64
            }
            ("slowlog-log-slower-than", NewValue::Int(v)) => c.slowlog_log_slower_than = v,
            ("slowlog-max-len", NewValue::Int(v)) => c.slowlog_max_len = v as u64,
            ("lazyfree-lazy-eviction", NewValue::Bool(b)) => c.lazyfree_lazy_eviction = b,
            (name @ ("save" | "dir" | "dbfilename"), NewValue::Str(v)) => {
                crate::persist::apply_config(&mut c.persist, name, v)
            }
            _ => {}
        }
    }
    crate::evict::sync_policy(server);
    server.cmdstats.tracking = server.config.latency_tracking;
    let t = server.config.latency_monitor_threshold;
    server.latmon.set_threshold(t);
    // `appendonly` changed: start (a rewrite writes the first base) or
    // stop the AOF, as Redis's `updateAppendonly`.
    let aof_now = server.config.persist.aof.appendonly;
    if aof_now != aof_was {
        if aof_now {
            if server.aof_start(ctx.now).is_err() {
                server.config.persist.aof.appendonly = false;
                return ctx.err("ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs.");
            }
        } else {
            server.aof_stop(ctx.now);
        }
    }
    ctx.ok();
}

fn config_resetstat(server: &mut Server, ctx: &mut Ctx<'_>) {
    server.reset_stats();
    ctx.ok();
}

/// CONFIG REWRITE: into the `redis_conf` file ([`crate::config_rewrite`]).
fn config_rewrite(server: &mut Server, ctx: &mut Ctx<'_>) {
    let Some(path) = server.config.redis_conf.clone() else {
        return ctx.err("ERR The server is running without a config file");
    };
    match crate::config_rewrite::rewrite(server, &path) {
        Ok(()) => {
            log::info!("CONFIG REWRITE executed with success.");
            ctx.ok()
        }
        Err(e) => {
            let why = crate::acl_file::os_error(&e);
            log::warn!("CONFIG REWRITE failed: {why}");
            ctx.err(&format!("ERR Rewriting config file: {why}"))
        }
    }
}

fn config_help(_: &mut Server, ctx: &mut Ctx<'_>) {
    help_lines(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "SET <directive> <value>",
            "RESETSTAT",
            "REWRITE",
        ],
    );
}
