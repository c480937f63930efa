//! The `kv {}` configuration block, with redis.conf's defaults:
//!
//! ```text
//! kv {
//!     listen 127.0.0.1:6380;
//!     hz 10;
//!     dynamic_hz on;
//!     timeout 0;
//!     maxclients 10000;
//!     databases 16;
//!     proto_max_bulk_len 512m;
//!     client_query_buffer_limit 1g;
//!     hash-max-listpack-entries 128;   # or hash_max_listpack_entries
//!     hash-max-listpack-value 64;
//!     set-max-intset-entries 512;
//!     set-max-listpack-entries 128;
//!     zset-max-listpack-entries 128;
//!     zset-max-listpack-value 64;
//!     list-max-listpack-size -2;
//!     dir data;                        # relative to the prefix; default: the prefix
//!     dbfilename dump.rdb;
//!     save 3600 1 300 100 60 10000;    # save ""; turns snapshots off
//!     rdbcompression yes;
//!     rdbchecksum yes;
//!     stop-writes-on-bgsave-error yes;
//!     rdb-del-sync-files no;
//!     rdb-save-incremental-fsync yes;  # fdatasync every 4 MB of a dump
//!     bgsave-slice-us 250;             # gyre's: sweep time per loop turn of a BGSAVE
//! }
//! ```
//!
//! The encoding thresholds take redis.conf's spelling, its `ziplist`
//! aliases, and the underscore form of both. So do the cache settings:
//!
//! ```text
//!     requirepass "secret";                       # never logged
//!     protected-mode yes;                         # yes|no (on|off too)
//!     notify-keyspace-events "Ex";
//!     client-output-buffer-limit pubsub 32mb 8mb 60;   # repeatable, per class
//!     maxmemory 100mb;
//!     maxmemory-policy allkeys-lru;   # the 8 policies, samples, tenacity, lfu-*
//!     user alice on >secret ~cache:* +@read;      # redis.conf's ACL user lines
//!     aclfile users.acl;                          # or an ACL file (not both)
//!     acllog-max-len 128;
//!     rename-command CONFIG "";                   # or a new name
//!     bind 127.0.0.1 ::1;                         # with port: where to listen
//! ```
//!
//! `redis_conf FILE;` reads an existing redis.conf in Redis's own syntax
//! ([`crate::redis_conf`]): its settings apply as if written here, at
//! that point of the block (a later directive wins, as a later line does
//! in redis.conf), and CONFIG REWRITE writes the running settings back
//! into it as redis-server does.

use crate::object::Limits;
use crate::persist::{PersistConfig, DEFAULT_SAVE};
use crate::tls;
use gyre_core::conf::{
    Args, Block, ConfCtx, ConfError, Context, Directive, DirectiveSpec, ListenConf, ModuleDef,
};

/// The `kv {}` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvConf {
    /// Whether `kv {}` appeared.
    pub present: bool,
    pub listen: Vec<ListenConf>,
    /// serverCron runs this many times a second (1..=500).
    pub hz: u32,
    pub dynamic_hz: bool,
    /// Close clients idle this many seconds (0: never).
    pub timeout_secs: u64,
    pub maxclients: u64,
    pub databases: u32,
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: u64,
    /// `port`, `tls-port` and the other TLS settings (crate::tls).
    pub tls: crate::tls::KvTls,
    /// Encoding thresholds (`*-max-listpack-*`).
    pub encodings: Limits,
    /// RDB settings; `dir` resolved against the prefix.
    pub persist: PersistConfig,
    /// A `save` line replaced the default rules.
    save_set: bool,
    /// `requirepass` (`None`: the default user is nopass).
    pub requirepass: Option<Vec<u8>>,
    /// `protected-mode`.
    pub protected_mode: bool,
    /// `notify-keyspace-events` flags.
    pub notify_keyspace_events: u32,
    /// `client-output-buffer-limit` per class.
    pub client_output_buffer_limit: crate::output::ObufLimits,
    /// `maxmemory` (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory-policy` and the eviction tuning.
    pub evict: crate::evict::EvictConfig,
    /// `aclfile` (resolved against the prefix).
    pub aclfile: Option<std::path::PathBuf>,
    /// `acllog-max-len`.
    pub acllog_max_len: u64,
    /// `user NAME RULES...` lines.
    pub users: Vec<Vec<Vec<u8>>>,
    /// `lazyfree-lazy-expire`, `lazyfree-lazy-eviction`.
    pub lazyfree_lazy_expire: bool,
    pub lazyfree_lazy_eviction: bool,
    /// `rename-command OLD NEW` lines.
    pub rename_command: Vec<(String, String)>,
    /// `bind` addresses (with `port`: where to listen).
    pub bind: Vec<String>,
    /// `redis_conf FILE` (CONFIG REWRITE writes it back).
    pub redis_conf: Option<std::path::PathBuf>,
    /// `maxmemory-clients`.
    pub maxmemory_clients: crate::client_evict::Limit,
    /// `acl-pubsub-default allchannels`.
    pub acl_pubsub_default_all: bool,
    /// `latency-tracking`, `latency-tracking-info-percentiles`.
    pub latency_tracking: bool,
    pub latency_percentiles: crate::latency::Percentiles,
    /// `latency-monitor-threshold` (ms).
    pub latency_monitor_threshold: u64,
    /// `slowlog-log-slower-than` (µs), `slowlog-max-len`.
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: u64,
    /// `enable-debug-command no|yes|local`.
    pub enable_debug_command: crate::debug::Protected,
}

impl Default for KvConf {
    fn default() -> KvConf {
        KvConf {
            present: false,
            listen: Vec::new(),
            hz: 10,
            dynamic_hz: true,
            timeout_secs: 0,
            maxclients: 10_000,
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            tls: crate::tls::KvTls::default(),
            encodings: Limits::default(),
            persist: PersistConfig {
                dir: std::path::PathBuf::new(),
                save: DEFAULT_SAVE.to_vec(),
                ..PersistConfig::default()
            },
            save_set: false,
            requirepass: None,
            protected_mode: true,
            notify_keyspace_events: 0,
            client_output_buffer_limit: crate::output::DEFAULT_LIMITS,
            maxmemory: 0,
            evict: crate::evict::EvictConfig::default(),
            aclfile: None,
            acllog_max_len: crate::acl_log::DEFAULT_MAX_LEN,
            users: Vec::new(),
            lazyfree_lazy_expire: false,
            lazyfree_lazy_eviction: false,
            rename_command: Vec::new(),
            bind: Vec::new(),
            redis_conf: None,
            maxmemory_clients: crate::client_evict::Limit::Bytes(0),
            acl_pubsub_default_all: false,
            latency_tracking: true,
            latency_percentiles: Default::default(),
            latency_monitor_threshold: 0,
            slowlog_log_slower_than: crate::slowlog::DEFAULT_SLOWER_THAN,
            slowlog_max_len: crate::slowlog::DEFAULT_MAX_LEN,
            enable_debug_command: Default::default(),
        }
    }
}

fn set_maxmemory(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.maxmemory = crate::util::memtoull(d.arg(0).as_bytes())
        .ok_or_else(|| format!("invalid value \"{}\" in \"{}\"", d.arg(0), d.name))?;
    Ok(())
}

fn set_maxmemory_clients(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.maxmemory_clients =
        crate::client_evict::parse(d.arg(0).as_bytes()).map_err(str::to_string)?;
    Ok(())
}

/// `acl-pubsub-default allchannels|resetchannels`.
fn set_acl_pubsub_default(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.acl_pubsub_default_all = crate::acl::parse_pubsub_default(d.arg(0).as_bytes())
        .ok_or_else(|| crate::acl::ERR_PUBSUB_DEFAULT.to_string())?;
    Ok(())
}

fn set_latency_tracking(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.latency_tracking = yes_no(d)?;
    Ok(())
}

fn set_latency_monitor(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.latency_monitor_threshold = d.number(0)?;
    Ok(())
}

fn set_slowlog_slower_than(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.slowlog_log_slower_than = d
        .arg(0)
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    Ok(())
}

fn set_slowlog_max_len(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.slowlog_max_len = d.number(0)?;
    Ok(())
}

fn set_enable_debug(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.enable_debug_command = crate::debug::Protected::parse(d.arg(0).as_bytes())
        .ok_or_else(|| "argument(s) must be one of the following: no, yes, local".to_string())?;
    Ok(())
}

/// `latency-tracking-info-percentiles P...` (one `""` for none).
fn set_latency_percentiles(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let args: Vec<&[u8]> = d.args.iter().map(|a| a.as_bytes()).collect();
    c.latency_percentiles = crate::latency::parse_percentiles(&args).map_err(str::to_string)?;
    Ok(())
}

fn set_policy(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.evict.policy = crate::evict::Policy::parse(d.arg(0).as_bytes()).ok_or_else(|| {
        "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction".to_string()
    })?;
    Ok(())
}

/// An integer setting within Redis's bounds.
fn bounded(d: &Directive, min: u64, max: u64) -> Result<u32, String> {
    let n = d.number(0)?;
    if n < min || n > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(n as u32)
}

fn set_samples(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.evict.samples = bounded(d, 1, i32::MAX as u64)?;
    Ok(())
}

fn set_tenacity(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.evict.tenacity = bounded(d, 0, 100)?;
    Ok(())
}

fn set_lfu_log_factor(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.evict.lfu_log_factor = bounded(d, 0, i32::MAX as u64)?;
    Ok(())
}

fn set_lfu_decay_time(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.evict.lfu_decay_time = bounded(d, 0, i32::MAX as u64)?;
    Ok(())
}

fn set_requirepass(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let p = d.arg(0);
    c.requirepass = (!p.is_empty()).then(|| p.as_bytes().to_vec());
    Ok(())
}

/// redis.conf's `yes`/`no`, and nginx's `on`/`off`.
fn yes_no(d: &Directive) -> Result<bool, String> {
    match d.arg(0).to_ascii_lowercase().as_str() {
        "yes" | "on" => Ok(true),
        "no" | "off" => Ok(false),
        _ => Err(format!(
            "invalid value \"{}\" in \"{}\" directive, it must be \"yes\" or \"no\"",
            d.arg(0),
            d.name
        )),
    }
}

fn set_dir(c: &mut KvConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    c.persist.dir = cx.prefix().join(d.arg(0));
    Ok(())
}

fn set_dbfilename(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let name = d.arg(0);
    // Redis: "dbfilename can't be a path, just a filename".
    if name.is_empty() || name.contains('/') {
        return Err("dbfilename can't be a path, just a filename".into());
    }
    c.persist.dbfilename = name.to_string();
    Ok(())
}

/// `save <seconds> <changes> [...]`, repeatable; `save ""` clears.
fn set_save(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    if !c.save_set {
        c.persist.save.clear();
        c.save_set = true;
    }
    let text = d.args.join(" ");
    let rules =
        PersistConfig::parse_save(&text).ok_or_else(|| "Invalid save parameters".to_string())?;
    c.persist.save.extend(rules);
    Ok(())
}

fn set_rdbcompression(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.persist.rdbcompression = yes_no(d)?;
    Ok(())
}

fn set_rdbchecksum(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.persist.rdbchecksum = yes_no(d)?;
    Ok(())
}

fn set_stop_writes(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.persist.stop_writes_on_bgsave_error = yes_no(d)?;
    Ok(())
}

fn set_del_sync(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.persist.rdb_del_sync_files = yes_no(d)?;
    Ok(())
}

fn set_incremental_fsync(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.persist.rdb_save_incremental_fsync = yes_no(d)?;
    Ok(())
}

/// `bgsave-slice-us` (gyre's own, no Redis counterpart: Redis forks): the
/// longest a background save's slice runs per loop turn, 10..1000000 µs.
fn set_bgsave_slice(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let n = d.number(0)?;
    if !(10..=1_000_000).contains(&n) {
        return Err(format!(
            "invalid value \"{}\" in \"bgsave-slice-us\" directive, it must be between 10 and 1000000",
            d.arg(0)
        ));
    }
    c.persist.bgsave_slice_us = n;
    Ok(())
}

/// The AOF directives (`appendonly`, `appendfsync`, ...), Redis's names.
fn set_aof(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let a = &mut c.persist.aof;
    match d.name.as_str() {
        "appendonly" => a.appendonly = yes_no(d)?,
        "appendfsync" => {
            a.appendfsync = crate::aof::Fsync::parse(d.arg(0).as_bytes()).ok_or_else(|| {
                format!("invalid value \"{}\" in \"appendfsync\" directive, it must be \"always\", \"everysec\" or \"no\"", d.arg(0))
            })?
        }
        "appendfilename" | "appenddirname" => {
            let v = d.arg(0);
            if v.is_empty() || v.contains('/') {
                return Err(format!("{} can't be a path, just a filename", d.name));
            }
            if d.name == "appendfilename" {
                a.appendfilename = v.to_string();
            } else {
                a.appenddirname = v.to_string();
            }
        }
        "no-appendfsync-on-rewrite" => a.no_appendfsync_on_rewrite = yes_no(d)?,
        "auto-aof-rewrite-percentage" => {
            a.auto_rewrite_perc = d
                .arg(0)
                .parse::<u32>()
                .map_err(|_| d.error("invalid number"))?
                .into()
        }
        "auto-aof-rewrite-min-size" => {
            a.auto_rewrite_min_size = crate::util::memtoull(d.arg(0).as_bytes())
                .ok_or_else(|| format!("invalid value \"{}\" in \"{}\"", d.arg(0), d.name))?
        }
        "aof-use-rdb-preamble" => a.use_rdb_preamble = yes_no(d)?,
        "aof-load-truncated" => a.load_truncated = yes_no(d)?,
        "aof-timestamp-enabled" => a.timestamp_enabled = yes_no(d)?,
        "aof-rewrite-incremental-fsync" => a.rewrite_incremental_fsync = yes_no(d)?,
        "lazyfree-lazy-expire" => c.lazyfree_lazy_expire = yes_no(d)?,
        "lazyfree-lazy-eviction" => c.lazyfree_lazy_eviction = yes_no(d)?,
        _ => {}
    }
    Ok(())
}

fn set_dynamic_hz_yes_no(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.dynamic_hz = yes_no(d)?;
    Ok(())
}

fn set_protected_mode(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.protected_mode = yes_no(d)?;
    Ok(())
}

fn set_notify(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.notify_keyspace_events = crate::notify::string_to_flags(d.arg(0).as_bytes())
        .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string())?;
    Ok(())
}

fn set_obuf_limit(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let args: Vec<&[u8]> = (0..4).map(|i| d.arg(i).as_bytes()).collect();
    crate::output::parse_limits(&args, &mut c.client_output_buffer_limit).map_err(str::to_string)
}

fn set_aclfile(c: &mut KvConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let p = d.arg(0);
    c.aclfile = (!p.is_empty()).then(|| cx.prefix().join(p));
    Ok(())
}

fn set_acllog_max_len(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.acllog_max_len = d.number(0)?;
    Ok(())
}

/// `user NAME RULES...` (redis.conf's ACL user lines), checked as Redis
/// checks them when it reads its configuration.
fn set_user(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let args: Vec<Vec<u8>> = d.args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let seen: Vec<Vec<u8>> = c.users.iter().map(|u| u[0].clone()).collect();
    crate::acl_file::check_user_line(&args, &seen)?;
    c.users.push(args);
    Ok(())
}

/// `rename-command OLD NEW` (`""`: the command is removed), checked
/// with the lines before it as Redis checks them.
fn set_rename_command(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.rename_command
        .push((d.arg(0).to_string(), d.arg(1).to_string()));
    crate::cmd::CommandTable::with_renames(crate::cmd::all(), &c.rename_command)
        .map(|_| ())
        .map_err(str::to_string)
}

/// `bind ADDR...` (redis.conf's): with `port`, listen on each address
/// (`-` prefix: optional in Redis, taken as given here; `*`: all IPv4,
/// `::*`: all IPv6).
fn set_bind(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.bind.clear();
    for a in &d.args {
        let a = a.strip_prefix('-').unwrap_or(a);
        let ip = match a {
            "*" => "0.0.0.0".to_string(),
            "::*" => "::".to_string(),
            other => other.to_string(),
        };
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(format!("Invalid bind address '{a}'"));
        }
        c.bind.push(ip);
    }
    Ok(())
}

/// `redis_conf FILE;`: read a redis.conf ([`crate::redis_conf`]; a
/// relative path is against the prefix, as `dir` and `aclfile` are).
fn set_redis_conf(c: &mut KvConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let path = cx.prefix().join(d.arg(0));
    c.redis_conf = Some(path.clone());
    crate::redis_conf::load(&path, cx.prefix(), &mut |l| apply_redis_line(c, l, cx))
}

/// One redis.conf line, applied as the same directive in `kv {}`.
fn apply_redis_line(
    c: &mut KvConf,
    l: &crate::redis_conf::Line,
    cx: &ConfCtx,
) -> crate::redis_conf::Applied {
    use crate::redis_conf::Applied;
    if !crate::redis_conf::known_to_redis(&l.name) {
        return Applied::Refused("Bad directive or wrong number of arguments".into());
    }
    let Some(spec) = KV_DIRECTIVES.iter().find(|s| s.name == l.name) else {
        return Applied::Skipped;
    };
    if !spec.args.accepts(l.args.len()) {
        return Applied::Refused("wrong number of arguments".into());
    }
    let d = Directive {
        name: l.name.clone(),
        args: l.args.clone(),
        block: None,
        location: gyre_core::conf::Location::File {
            path: l.file.clone().into(),
            line: l.line,
        },
    };
    match (spec.set)(c, &d, cx) {
        Ok(()) => Applied::Done,
        Err(e) => Applied::Refused(e),
    }
}

/// The context inside `kv {}`.
pub const KV: Context = Context::KV;

fn set_kv(c: &mut KvConf, _: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.present = true;
    Ok(())
}

fn set_listen(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.listen.push(d.listen(6379)?);
    Ok(())
}

fn set_hz(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let n = d.number(0)?;
    // redis.conf clamps hz to 1..500.
    c.hz = n.clamp(1, 500) as u32;
    Ok(())
}

fn set_dynamic_hz(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.dynamic_hz = d.flag()?;
    Ok(())
}

fn set_timeout(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.timeout_secs = d.sec(0)?;
    Ok(())
}

fn set_maxclients(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let n = d.number(0)?;
    if n == 0 {
        return Err(format!("invalid value \"{}\" in \"maxclients\"", d.arg(0)));
    }
    c.maxclients = n;
    Ok(())
}

fn set_databases(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let n = d.number(0)?;
    if n == 0 || n > 1_000_000 {
        return Err(format!("invalid value \"{}\" in \"databases\"", d.arg(0)));
    }
    c.databases = n as u32;
    Ok(())
}

/// A size in nginx's form (`512m`) or redis.conf's (`512mb`, `1gb`).
fn size(d: &Directive) -> Result<u64, String> {
    d.offset(0)
        .or_else(|e| crate::util::memtoull(d.arg(0).as_bytes()).ok_or(e))
}

fn set_bulk(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.proto_max_bulk_len = size(d)?;
    Ok(())
}

fn set_qbuf(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.client_query_buffer_limit = size(d)?;
    Ok(())
}

fn set_hash_max_listpack_entries(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.encodings.hash_max_listpack_entries = d.number(0)?;
    Ok(())
}

fn set_hash_max_listpack_value(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.encodings.hash_max_listpack_value = d.number(0)?;
    Ok(())
}

fn set_set_max_intset_entries(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.encodings.set_max_intset_entries = d.number(0)?;
    Ok(())
}

fn set_set_max_listpack_entries(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.encodings.set_max_listpack_entries = d.number(0)?;
    Ok(())
}

fn set_zset_max_listpack_entries(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.encodings.zset_max_listpack_entries = d.number(0)?;
    Ok(())
}

fn set_zset_max_listpack_value(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.encodings.zset_max_listpack_value = d.number(0)?;
    Ok(())
}

fn set_list_max_listpack_size(c: &mut KvConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.encodings.list_max_listpack_size = d
        .arg(0)
        .parse::<i32>()
        .map(i64::from)
        .map_err(|_| d.error("invalid number"))?;
    Ok(())
}

static KV_DIRECTIVES: &[DirectiveSpec<KvConf>] = &[
    DirectiveSpec::new("dir", KV, Args::TAKE1, set_dir),
    DirectiveSpec::new("dbfilename", KV, Args::TAKE1, set_dbfilename),
    DirectiveSpec::multi("save", KV, Args::ONE_MORE, set_save),
    DirectiveSpec::new("rdbcompression", KV, Args::TAKE1, set_rdbcompression),
    DirectiveSpec::new("rdbchecksum", KV, Args::TAKE1, set_rdbchecksum),
    DirectiveSpec::new(
        "stop-writes-on-bgsave-error",
        KV,
        Args::TAKE1,
        set_stop_writes,
    ),
    DirectiveSpec::new("rdb-del-sync-files", KV, Args::TAKE1, set_del_sync),
    DirectiveSpec::new(
        "rdb-save-incremental-fsync",
        KV,
        Args::TAKE1,
        set_incremental_fsync,
    ),
    DirectiveSpec::new("bgsave-slice-us", KV, Args::TAKE1, set_bgsave_slice),
    DirectiveSpec::new("appendonly", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("appendfsync", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("appendfilename", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("appenddirname", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("no-appendfsync-on-rewrite", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("auto-aof-rewrite-percentage", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("auto-aof-rewrite-min-size", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("aof-use-rdb-preamble", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("aof-load-truncated", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("aof-timestamp-enabled", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("aof-rewrite-incremental-fsync", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("lazyfree-lazy-expire", KV, Args::TAKE1, set_aof),
    DirectiveSpec::new("lazyfree-lazy-eviction", KV, Args::TAKE1, set_aof),
    DirectiveSpec::block(
        "kv",
        Context::MAIN,
        Args::NOARGS,
        Block::Context(KV),
        false,
        set_kv,
    ),
    DirectiveSpec::multi("listen", KV, Args::ONE_MORE, set_listen),
    DirectiveSpec::new("hz", KV, Args::TAKE1, set_hz),
    DirectiveSpec::new("dynamic_hz", KV, Args::FLAG, set_dynamic_hz),
    DirectiveSpec::new("dynamic-hz", KV, Args::TAKE1, set_dynamic_hz_yes_no),
    DirectiveSpec::new("timeout", KV, Args::TAKE1, set_timeout),
    DirectiveSpec::new("maxclients", KV, Args::TAKE1, set_maxclients),
    DirectiveSpec::new("databases", KV, Args::TAKE1, set_databases),
    DirectiveSpec::new("proto_max_bulk_len", KV, Args::TAKE1, set_bulk),
    DirectiveSpec::new("proto-max-bulk-len", KV, Args::TAKE1, set_bulk),
    DirectiveSpec::new("client_query_buffer_limit", KV, Args::TAKE1, set_qbuf),
    // crate::tls, in redis.conf's spelling and with underscores.
    DirectiveSpec::new("port", KV, Args::TAKE1, tls::set_port),
    DirectiveSpec::new("tls-port", KV, Args::TAKE1, tls::set_tls_port),
    DirectiveSpec::new("tls_port", KV, Args::TAKE1, tls::set_tls_port),
    DirectiveSpec::new("tls-cert-file", KV, Args::TAKE1, tls::set_cert_file),
    DirectiveSpec::new("tls_cert_file", KV, Args::TAKE1, tls::set_cert_file),
    DirectiveSpec::new("tls-key-file", KV, Args::TAKE1, tls::set_key_file),
    DirectiveSpec::new("tls_key_file", KV, Args::TAKE1, tls::set_key_file),
    DirectiveSpec::new("tls-ca-cert-file", KV, Args::TAKE1, tls::set_ca_cert_file),
    DirectiveSpec::new("tls_ca_cert_file", KV, Args::TAKE1, tls::set_ca_cert_file),
    DirectiveSpec::new("tls-auth-clients", KV, Args::TAKE1, tls::set_auth_clients),
    DirectiveSpec::new("tls_auth_clients", KV, Args::TAKE1, tls::set_auth_clients),
    DirectiveSpec::new("tls-protocols", KV, Args::ONE_MORE, tls::set_protocols),
    DirectiveSpec::new("tls_protocols", KV, Args::ONE_MORE, tls::set_protocols),
    DirectiveSpec::new("tls-ciphers", KV, Args::TAKE1, tls::set_ciphers),
    DirectiveSpec::new("tls_ciphers", KV, Args::TAKE1, tls::set_ciphers),
    DirectiveSpec::new("tls-ciphersuites", KV, Args::TAKE1, tls::set_ciphersuites),
    DirectiveSpec::new("tls_ciphersuites", KV, Args::TAKE1, tls::set_ciphersuites),
    DirectiveSpec::new(
        "tls-prefer-server-ciphers",
        KV,
        Args::TAKE1,
        tls::set_prefer_server_ciphers,
    ),
    DirectiveSpec::new(
        "tls_prefer_server_ciphers",
        KV,
        Args::TAKE1,
        tls::set_prefer_server_ciphers,
    ),
    DirectiveSpec::new("client-query-buffer-limit", KV, Args::TAKE1, set_qbuf),
    DirectiveSpec::new("requirepass", KV, Args::TAKE1, set_requirepass),
    DirectiveSpec::new("aclfile", KV, Args::TAKE1, set_aclfile),
    DirectiveSpec::new("acllog-max-len", KV, Args::TAKE1, set_acllog_max_len),
    DirectiveSpec::new(
        "acl-pubsub-default",
        KV,
        Args::TAKE1,
        set_acl_pubsub_default,
    ),
    DirectiveSpec::new(
        "acl_pubsub_default",
        KV,
        Args::TAKE1,
        set_acl_pubsub_default,
    ),
    DirectiveSpec::new("acllog_max_len", KV, Args::TAKE1, set_acllog_max_len),
    DirectiveSpec::multi("user", KV, Args::ONE_MORE, set_user),
    DirectiveSpec::new("bind", KV, Args::ONE_MORE, set_bind),
    DirectiveSpec::multi("redis_conf", KV, Args::TAKE1, set_redis_conf),
    DirectiveSpec::multi("rename-command", KV, Args::TAKE2, set_rename_command),
    DirectiveSpec::multi("rename_command", KV, Args::TAKE2, set_rename_command),
    DirectiveSpec::new("latency-tracking", KV, Args::TAKE1, set_latency_tracking),
    DirectiveSpec::new(
        "latency-monitor-threshold",
        KV,
        Args::TAKE1,
        set_latency_monitor,
    ),
    DirectiveSpec::new(
        "latency_monitor_threshold",
        KV,
        Args::TAKE1,
        set_latency_monitor,
    ),
    DirectiveSpec::new(
        "slowlog-log-slower-than",
        KV,
        Args::TAKE1,
        set_slowlog_slower_than,
    ),
    DirectiveSpec::new(
        "slowlog_log_slower_than",
        KV,
        Args::TAKE1,
        set_slowlog_slower_than,
    ),
    DirectiveSpec::new("slowlog-max-len", KV, Args::TAKE1, set_slowlog_max_len),
    DirectiveSpec::new("slowlog_max_len", KV, Args::TAKE1, set_slowlog_max_len),
    DirectiveSpec::new("enable-debug-command", KV, Args::TAKE1, set_enable_debug),
    DirectiveSpec::new("enable_debug_command", KV, Args::TAKE1, set_enable_debug),
    DirectiveSpec::new("latency_tracking", KV, Args::TAKE1, set_latency_tracking),
    DirectiveSpec::new(
        "latency-tracking-info-percentiles",
        KV,
        Args::ONE_MORE,
        set_latency_percentiles,
    ),
    DirectiveSpec::new(
        "latency_tracking_info_percentiles",
        KV,
        Args::ONE_MORE,
        set_latency_percentiles,
    ),
    DirectiveSpec::new("maxmemory", KV, Args::TAKE1, set_maxmemory),
    DirectiveSpec::new("maxmemory-clients", KV, Args::TAKE1, set_maxmemory_clients),
    DirectiveSpec::new("maxmemory_clients", KV, Args::TAKE1, set_maxmemory_clients),
    DirectiveSpec::new("maxmemory-policy", KV, Args::TAKE1, set_policy),
    DirectiveSpec::new("maxmemory_policy", KV, Args::TAKE1, set_policy),
    DirectiveSpec::new("maxmemory-samples", KV, Args::TAKE1, set_samples),
    DirectiveSpec::new("maxmemory_samples", KV, Args::TAKE1, set_samples),
    DirectiveSpec::new("maxmemory-eviction-tenacity", KV, Args::TAKE1, set_tenacity),
    DirectiveSpec::new("maxmemory_eviction_tenacity", KV, Args::TAKE1, set_tenacity),
    DirectiveSpec::new("lfu-log-factor", KV, Args::TAKE1, set_lfu_log_factor),
    DirectiveSpec::new("lfu_log_factor", KV, Args::TAKE1, set_lfu_log_factor),
    DirectiveSpec::new("lfu-decay-time", KV, Args::TAKE1, set_lfu_decay_time),
    DirectiveSpec::new("lfu_decay_time", KV, Args::TAKE1, set_lfu_decay_time),
    DirectiveSpec::new("protected-mode", KV, Args::TAKE1, set_protected_mode),
    DirectiveSpec::new("protected_mode", KV, Args::TAKE1, set_protected_mode),
    DirectiveSpec::new("notify-keyspace-events", KV, Args::TAKE1, set_notify),
    DirectiveSpec::new("notify_keyspace_events", KV, Args::TAKE1, set_notify),
    DirectiveSpec::multi(
        "client-output-buffer-limit",
        KV,
        Args::TAKE4,
        set_obuf_limit,
    ),
    DirectiveSpec::multi(
        "client_output_buffer_limit",
        KV,
        Args::TAKE4,
        set_obuf_limit,
    ),
    DirectiveSpec::new(
        "hash-max-listpack-entries",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "hash_max_listpack_entries",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "hash-max-ziplist-entries",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "hash_max_ziplist_entries",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "hash-max-listpack-value",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_value,
    ),
    DirectiveSpec::new(
        "hash_max_listpack_value",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_value,
    ),
    DirectiveSpec::new(
        "hash-max-ziplist-value",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_value,
    ),
    DirectiveSpec::new(
        "hash_max_ziplist_value",
        KV,
        Args::TAKE1,
        set_hash_max_listpack_value,
    ),
    DirectiveSpec::new(
        "set-max-intset-entries",
        KV,
        Args::TAKE1,
        set_set_max_intset_entries,
    ),
    DirectiveSpec::new(
        "set_max_intset_entries",
        KV,
        Args::TAKE1,
        set_set_max_intset_entries,
    ),
    DirectiveSpec::new(
        "set-max-listpack-entries",
        KV,
        Args::TAKE1,
        set_set_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "set_max_listpack_entries",
        KV,
        Args::TAKE1,
        set_set_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "zset-max-listpack-entries",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "zset_max_listpack_entries",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "zset-max-ziplist-entries",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "zset_max_ziplist_entries",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_entries,
    ),
    DirectiveSpec::new(
        "zset-max-listpack-value",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_value,
    ),
    DirectiveSpec::new(
        "zset_max_listpack_value",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_value,
    ),
    DirectiveSpec::new(
        "zset-max-ziplist-value",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_value,
    ),
    DirectiveSpec::new(
        "zset_max_ziplist_value",
        KV,
        Args::TAKE1,
        set_zset_max_listpack_value,
    ),
    DirectiveSpec::new(
        "list-max-listpack-size",
        KV,
        Args::TAKE1,
        set_list_max_listpack_size,
    ),
    DirectiveSpec::new(
        "list_max_listpack_size",
        KV,
        Args::TAKE1,
        set_list_max_listpack_size,
    ),
    DirectiveSpec::new(
        "list-max-ziplist-size",
        KV,
        Args::TAKE1,
        set_list_max_listpack_size,
    ),
    DirectiveSpec::new(
        "list_max_ziplist_size",
        KV,
        Args::TAKE1,
        set_list_max_listpack_size,
    ),
];

fn kv_init(c: &mut KvConf, cx: &ConfCtx) -> Result<(), ConfError> {
    if let Some(path) = &c.aclfile {
        // Redis refuses to start with both, and with a bad ACL file.
        if !c.users.is_empty() {
            return Err(ConfError::new("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both."));
        }
        crate::acl_file::load_file(path, c.acl_pubsub_default_all).map_err(|e| {
            ConfError::new(format!("Aborting Redis startup because of ACL errors: {e}"))
        })?;
    }
    if c.persist.dir.as_os_str().is_empty() {
        c.persist.dir = cx.prefix().to_path_buf();
    }
    match c.tls.port {
        // `port 0`: no plain port (a TLS-only server).
        Some(0) if !c.listen.is_empty() => {
            return Err(ConfError::new(
                "\"port 0\" and \"listen\" exclude each other",
            ))
        }
        Some(0) => {}
        Some(p) => push_binds(c, p)?,
        // `bind` without `port`: Redis's default port.
        None if !c.bind.is_empty() => push_binds(c, 6379)?,
        None => {}
    }
    if c.tls.tls_port.is_some_and(|p| p != 0) {
        // Read now so `gyre -t` reports what Redis reports at start.
        crate::tls::server_config(&c.tls).map_err(|e| ConfError::new(e.to_string()))?;
    }
    if c.present && c.listen.is_empty() && c.tls.port != Some(0) {
        c.listen.push(
            gyre_core::conf::parse_listen(&["127.0.0.1:6379".to_string()], 6379)
                .map_err(ConfError::new)?,
        );
    }
    Ok(())
}

/// Listen on `port` at each `bind` address (127.0.0.1 without `bind`).
fn push_binds(c: &mut KvConf, port: u16) -> Result<(), ConfError> {
    let binds = if c.bind.is_empty() {
        vec!["127.0.0.1".to_string()]
    } else {
        c.bind.clone()
    };
    for ip in binds {
        let addr = match ip.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            _ => format!("{ip}:{port}"),
        };
        c.listen
            .push(gyre_core::conf::parse_listen(&[addr], 6379).map_err(ConfError::new)?);
    }
    Ok(())
}

/// The module gyre registers for `kv {}`.
pub static KV_MODULE: ModuleDef<KvConf> = ModuleDef {
    name: "kv",
    directives: KV_DIRECTIVES,
    create_conf: KvConf::default,
    init_conf: kv_init,
};
