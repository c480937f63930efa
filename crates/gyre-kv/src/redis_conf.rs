//! `redis_conf FILE;` inside `kv {}`: an existing redis.conf read in
//! Redis's own syntax (Redis's `loadServerConfigFromString`): one
//! directive a line, `#` comments, arguments split as `sdssplitargs`
//! splits them (double quotes with escapes, single quotes), names in any
//! case, `include FILE` read in place. Each directive is applied as the
//! same directive in `kv {}` would be ([`crate::conf`]), so the two
//! spellings cannot drift apart.
//!
//! Names redis-server does not know are refused with its message and
//! line (`Bad directive or wrong number of arguments`). Names it knows
//! that this server does not implement (replication, AOF, cluster, ...)
//! are logged and skipped, so a stock redis.conf loads. CONFIG REWRITE
//! writes the settings back to the file ([`crate::config_rewrite`]).

use std::path::{Path, PathBuf};

/// How deep `include` may nest (a file including itself stops here).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Every configuration name redis-server 7.0.15 accepts in its file
/// (CONFIG GET * and the file-only `include`, `rename-command`, `user`,
/// `loadmodule`), sorted.
pub const REDIS_NAMES: &[&str] = &[
    "acl-pubsub-default",
    "aclfile",
    "acllog-max-len",
    "active-defrag-cycle-max",
    "active-defrag-cycle-min",
    "active-defrag-ignore-bytes",
    "active-defrag-max-scan-fields",
    "active-defrag-threshold-lower",
    "active-defrag-threshold-upper",
    "active-expire-effort",
    "activedefrag",
    "activerehashing",
    "always-show-logo",
    "aof-disable-auto-gc",
    "aof-load-truncated",
    "aof-rewrite-incremental-fsync",
    "aof-timestamp-enabled",
    "aof-use-rdb-preamble",
    "aof_rewrite_cpulist",
    "appenddirname",
    "appendfilename",
    "appendfsync",
    "appendonly",
    "auto-aof-rewrite-min-size",
    "auto-aof-rewrite-percentage",
    "bgsave_cpulist",
    "bind",
    "bind-source-addr",
    "bio_cpulist",
    "busy-reply-threshold",
    "client-output-buffer-limit",
    "client-query-buffer-limit",
    "cluster-allow-pubsubshard-when-down",
    "cluster-allow-reads-when-down",
    "cluster-allow-replica-migration",
    "cluster-announce-bus-port",
    "cluster-announce-hostname",
    "cluster-announce-ip",
    "cluster-announce-port",
    "cluster-announce-tls-port",
    "cluster-config-file",
    "cluster-enabled",
    "cluster-link-sendbuf-limit",
    "cluster-migration-barrier",
    "cluster-node-timeout",
    "cluster-port",
    "cluster-preferred-endpoint-type",
    "cluster-replica-no-failover",
    "cluster-replica-validity-factor",
    "cluster-require-full-coverage",
    "cluster-slave-no-failover",
    "cluster-slave-validity-factor",
    "crash-log-enabled",
    "crash-memcheck-enabled",
    "daemonize",
    "databases",
    "dbfilename",
    "dir",
    "disable-thp",
    "dynamic-hz",
    "enable-debug-command",
    "enable-module-command",
    "enable-protected-configs",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "hash-max-ziplist-entries",
    "hash-max-ziplist-value",
    "hll-sparse-max-bytes",
    "hz",
    "ignore-warnings",
    "include",
    "io-threads",
    "io-threads-do-reads",
    "jemalloc-bg-thread",
    "latency-monitor-threshold",
    "latency-tracking",
    "latency-tracking-info-percentiles",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "lfu-decay-time",
    "lfu-log-factor",
    "list-compress-depth",
    "list-max-listpack-size",
    "list-max-ziplist-size",
    "loadmodule",
    "logfile",
    "loglevel",
    "lua-time-limit",
    "masterauth",
    "masteruser",
    "maxclients",
    "maxmemory",
    "maxmemory-clients",
    "maxmemory-eviction-tenacity",
    "maxmemory-policy",
    "maxmemory-samples",
    "min-replicas-max-lag",
    "min-replicas-to-write",
    "min-slaves-max-lag",
    "min-slaves-to-write",
    "no-appendfsync-on-rewrite",
    "notify-keyspace-events",
    "oom-score-adj",
    "oom-score-adj-values",
    "pidfile",
    "port",
    "proc-title-template",
    "propagation-error-behavior",
    "protected-mode",
    "proto-max-bulk-len",
    "rdb-del-sync-files",
    "rdb-save-incremental-fsync",
    "rdbchecksum",
    "rdbcompression",
    "rename-command",
    "repl-backlog-size",
    "repl-backlog-ttl",
    "repl-disable-tcp-nodelay",
    "repl-diskless-load",
    "repl-diskless-sync",
    "repl-diskless-sync-delay",
    "repl-diskless-sync-max-replicas",
    "repl-ping-replica-period",
    "repl-ping-slave-period",
    "repl-timeout",
    "replica-announce-ip",
    "replica-announce-port",
    "replica-announced",
    "replica-ignore-disk-write-errors",
    "replica-ignore-maxmemory",
    "replica-lazy-flush",
    "replica-priority",
    "replica-read-only",
    "replica-serve-stale-data",
    "replicaof",
    "requirepass",
    "sanitize-dump-payload",
    "save",
    "server_cpulist",
    "set-max-intset-entries",
    "set-proc-title",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "shutdown-timeout",
    "slave-announce-ip",
    "slave-announce-port",
    "slave-ignore-maxmemory",
    "slave-lazy-flush",
    "slave-priority",
    "slave-read-only",
    "slave-serve-stale-data",
    "slaveof",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "socket-mark-id",
    "stop-writes-on-bgsave-error",
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "supervised",
    "syslog-enabled",
    "syslog-facility",
    "syslog-ident",
    "tcp-backlog",
    "tcp-keepalive",
    "timeout",
    "tls-auth-clients",
    "tls-ca-cert-dir",
    "tls-ca-cert-file",
    "tls-cert-file",
    "tls-ciphers",
    "tls-ciphersuites",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-cluster",
    "tls-dh-params-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-port",
    "tls-prefer-server-ciphers",
    "tls-protocols",
    "tls-replication",
    "tls-session-cache-size",
    "tls-session-cache-timeout",
    "tls-session-caching",
    "tracking-table-max-keys",
    "unixsocket",
    "unixsocketperm",
    "user",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "zset-max-ziplist-entries",
    "zset-max-ziplist-value",
];

/// Whether redis-server knows the (lowercased) name.
pub fn known_to_redis(name: &str) -> bool {
    REDIS_NAMES.binary_search(&name).is_ok()
}

/// One directive of a redis.conf: its name lowercased, its arguments, and
/// where it is (for errors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub name: String,
    pub args: Vec<String>,
    pub file: PathBuf,
    pub line: usize,
    /// The line as written (trimmed), which Redis's errors quote.
    pub text: String,
}

/// What applying a directive did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    Done,
    /// redis-server knows the name; this server does not implement it.
    Skipped,
    /// The directive was refused, with the reason.
    Refused(String),
}

/// Redis's fatal configuration error, on one line.
pub fn fatal(l: &Line, why: &str) -> String {
    format!(
        "*** FATAL CONFIG FILE ERROR (Redis {}) *** Reading the configuration file {}, at line {} >>> '{}' {why}",
        crate::REDIS_VERSION,
        l.file.display(),
        l.line,
        l.text
    )
}

/// Read `path` (relative paths against `base`) and hand each directive
/// to `apply`, `include`s read in place. `Err` is the whole error text.
pub fn load(
    path: &Path,
    base: &Path,
    apply: &mut dyn FnMut(&Line) -> Applied,
) -> Result<(), String> {
    load_at(path, base, apply, 0)
}

fn load_at(
    path: &Path,
    base: &Path,
    apply: &mut dyn FnMut(&Line) -> Applied,
    depth: usize,
) -> Result<(), String> {
    let path = base.join(path);
    let text = std::fs::read(&path).map_err(|e| {
        format!(
            "Fatal error, can't open config file '{}': {}",
            path.display(),
            crate::acl_file::os_error(&e)
        )
    })?;
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let trimmed = trim(raw);
        if trimmed.is_empty() || trimmed[0] == b'#' {
            continue;
        }
        let mut l = Line {
            name: String::new(),
            args: Vec::new(),
            file: path.clone(),
            line: i + 1,
            text: String::from_utf8_lossy(trimmed).into_owned(),
        };
        let Some(argv) = crate::resp::split_args(trimmed) else {
            return Err(fatal(&l, "Unbalanced quotes in configuration line"));
        };
        let Some((first, rest)) = argv.split_first() else {
            continue;
        };
        l.name = String::from_utf8_lossy(first).to_ascii_lowercase();
        l.args = rest
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if l.name == "include" {
            if l.args.len() != 1 {
                return Err(fatal(&l, "Bad directive or wrong number of arguments"));
            }
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(fatal(&l, "include nested too deeply"));
            }
            load_at(Path::new(&l.args[0]), base, apply, depth + 1)?;
            continue;
        }
        match apply(&l) {
            Applied::Done => {}
            Applied::Skipped => log::warn!(
                "redis.conf setting \"{}\" is not supported by this server, ignored ({}:{})",
                l.name,
                l.file.display(),
                l.line
            ),
            Applied::Refused(why) => return Err(fatal(&l, &why)),
        }
    }
    Ok(())
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t' | b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_for_the_search() {
        assert!(REDIS_NAMES.windows(2).all(|w| w[0] < w[1]));
        assert!(known_to_redis("appendonly"));
        assert!(!known_to_redis("listen"));
    }

    #[test]
    fn lines_are_split_as_redis_splits_them() {
        let dir = std::env::temp_dir().join(format!("gyre-redisconf-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        std::fs::write(dir.join("inc.conf"), "MaxMemory 10mb\n").unwrap_or_default();
        std::fs::write(
            dir.join("r.conf"),
            "# a comment\n\n  save \"\"  \nrequirepass \"a b\\x41\"\ninclude inc.conf\nfoo 'x y'\n",
        )
        .unwrap_or_default();
        let mut seen = Vec::new();
        let r = load(Path::new("r.conf"), &dir, &mut |l| {
            seen.push((l.name.clone(), l.args.clone(), l.line));
            if l.name == "foo" {
                Applied::Refused("Bad directive or wrong number of arguments".into())
            } else {
                Applied::Done
            }
        });
        assert_eq!(
            seen,
            vec![
                ("save".into(), vec![String::new()], 3),
                ("requirepass".into(), vec!["a bA".to_string()], 4),
                ("maxmemory".into(), vec!["10mb".to_string()], 1),
                ("foo".into(), vec!["x y".to_string()], 6),
            ]
        );
        let e = r.err().unwrap_or_default();
        assert!(e.contains("at line 6 >>> 'foo 'x y'' Bad directive"), "{e}");
        std::fs::write(dir.join("q.conf"), "save \"3600 1\n").unwrap_or_default();
        let e = load(Path::new("q.conf"), &dir, &mut |_| Applied::Done)
            .err()
            .unwrap_or_default();
        assert!(
            e.ends_with("Unbalanced quotes in configuration line"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
