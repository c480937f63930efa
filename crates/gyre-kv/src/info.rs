//! INFO text, in Redis's exact layout: `# Section\r\n` then `key:value\r\n`
//! lines, sections separated by an empty line (`\r\n`).

use std::fmt::Write;

use crate::server::Server;
use crate::util::bytes_to_human;

const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];
/// Redis's order for `all`.
const ALL: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// Render the sections asked for (`[]` = default; `all`, `everything`,
/// `default` understood; unknown names contribute nothing).
pub fn render(server: &Server, now_ms: i64, args: &[Vec<u8>]) -> String {
    let mut want: Vec<&str> = Vec::new();
    if args.is_empty() {
        want.extend_from_slice(DEFAULT);
    }
    for a in args {
        match a.as_slice() {
            b"all" | b"everything" => want.extend_from_slice(ALL),
            b"default" => want.extend_from_slice(DEFAULT),
            other => {
                if let Some(s) = ALL.iter().find(|s| s.as_bytes() == other) {
                    want.push(s);
                }
            }
        }
    }
    let mut out = String::new();
    // Keep Redis's section order, each once.
    for s in ALL {
        if !want.contains(s) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(server, now_ms, s, &mut out);
    }
    out
}

/// Fields of what the kv process does not have (replicas, Lua, active
/// defrag...): present, as exporters expect them, at zero.
fn zeros(out: &mut String, keys: &[&str]) {
    for k in keys {
        line(out, k, 0);
    }
}

fn line(out: &mut String, k: &str, v: impl std::fmt::Display) {
    let _ = write!(out, "{k}:{v}\r\n");
}

fn section(server: &Server, now: i64, name: &str, out: &mut String) {
    let c = &server.config;
    let st = &server.stats;
    match name {
        "server" => {
            out.push_str("# Server\r\n");
            line(out, "redis_version", crate::REDIS_VERSION);
            line(out, "redis_git_sha1", "00000000");
            line(out, "redis_git_dirty", 0);
            line(out, "redis_build_id", "0");
            line(out, "redis_mode", "standalone");
            line(
                out,
                "os",
                format!("{} {}", os_name(), std::env::consts::ARCH),
            );
            line(out, "arch_bits", usize::BITS);
            line(out, "monotonic_clock", "POSIX clock_gettime");
            line(out, "multiplexing_api", "epoll");
            line(out, "atomicvar_api", "c11-builtin");
            line(out, "gcc_version", "0.0.0");
            line(out, "process_id", std::process::id());
            line(out, "process_supervised", "no");
            line(out, "run_id", &server.run_id);
            line(out, "tcp_port", c.port);
            line(out, "server_time_usec", now.saturating_mul(1000));
            let up = (now - server.start_ms).max(0) / 1000;
            line(out, "uptime_in_seconds", up);
            line(out, "uptime_in_days", up / 86400);
            line(out, "hz", server.hz());
            line(out, "configured_hz", c.hz);
            line(out, "lru_clock", (now / 1000) & ((1 << 24) - 1));
            line(out, "executable", "");
            line(out, "config_file", "");
            line(out, "io_threads_active", 0);
            line(out, "gyre_module", "gyre-kv");
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            line(out, "connected_clients", server.connected_clients());
            line(out, "cluster_connections", 0);
            line(out, "maxclients", c.maxclients);
            line(out, "client_recent_max_input_buffer", 0);
            line(out, "client_recent_max_output_buffer", 0);
            line(out, "blocked_clients", server.blocked.len());
            line(out, "tracking_clients", 0);
            line(out, "clients_in_timeout_table", 0);
        }
        "memory" => {
            // Redis 7.0's fields in its order. No Lua, functions,
            // replication or cluster here: those figures are zero. The
            // allocator's own view is the estimate and the RSS (glibc
            // keeps no such figures: see crate::memory).
            let o = crate::memory::overview(server);
            let (used, rss, peak) = (o.total, o.rss, o.peak);
            let system = crate::util::total_system_memory();
            out.push_str("# Memory\r\n");
            line(out, "used_memory", used);
            line(out, "used_memory_human", bytes_to_human(used));
            line(out, "used_memory_rss", rss);
            line(out, "used_memory_rss_human", bytes_to_human(rss));
            line(out, "used_memory_peak", peak);
            line(out, "used_memory_peak_human", bytes_to_human(peak));
            line(
                out,
                "used_memory_peak_perc",
                format!("{:.2}%", o.peak_perc()),
            );
            line(out, "used_memory_overhead", o.overhead);
            line(out, "used_memory_startup", crate::memory::STARTUP);
            line(out, "used_memory_dataset", o.dataset());
            line(
                out,
                "used_memory_dataset_perc",
                format!("{:.2}%", o.dataset_perc()),
            );
            line(out, "allocator_allocated", used);
            line(out, "allocator_active", used);
            line(out, "allocator_resident", rss);
            line(out, "total_system_memory", system);
            line(out, "total_system_memory_human", bytes_to_human(system));
            zeros(out, &["used_memory_lua", "used_memory_vm_eval"]);
            line(out, "used_memory_lua_human", "0B");
            zeros(
                out,
                &[
                    "used_memory_scripts_eval",
                    "number_of_cached_scripts",
                    "number_of_functions",
                    "number_of_libraries",
                    "used_memory_vm_functions",
                    "used_memory_vm_total",
                ],
            );
            line(out, "used_memory_vm_total_human", "0B");
            line(out, "used_memory_functions", 0);
            line(out, "used_memory_scripts", 0);
            line(out, "used_memory_scripts_human", "0B");
            line(out, "maxmemory", c.maxmemory);
            line(out, "maxmemory_human", bytes_to_human(c.maxmemory));
            line(out, "maxmemory_policy", c.evict.policy.name());
            line(out, "allocator_frag_ratio", "1.00");
            line(out, "allocator_frag_bytes", 0);
            line(out, "allocator_rss_ratio", format!("{:.2}", o.frag()));
            line(out, "allocator_rss_bytes", o.frag_bytes());
            line(out, "rss_overhead_ratio", "1.00");
            line(out, "rss_overhead_bytes", 0);
            line(out, "mem_fragmentation_ratio", format!("{:.2}", o.frag()));
            line(out, "mem_fragmentation_bytes", o.frag_bytes());
            zeros(
                out,
                &[
                    "mem_not_counted_for_evict",
                    "mem_replication_backlog",
                    "mem_total_replication_buffers",
                    "mem_clients_slaves",
                ],
            );
            line(out, "mem_clients_normal", o.clients);
            line(out, "mem_cluster_links", 0);
            line(out, "mem_aof_buffer", server.aof.buf.capacity());
            line(out, "mem_allocator", "libc");
            line(out, "active_defrag_running", 0);
            line(out, "lazyfree_pending_objects", server.lazyfree_pending());
            line(
                out,
                "lazyfreed_objects",
                server.dbs.iter().map(crate::db::Db::lazyfreed).sum::<u64>(),
            );
        }
        "persistence" => {
            out.push_str("# Persistence\r\n");
            for (k, v) in server.persistence_info(now) {
                line(out, k, v);
            }
        }
        "stats" => {
            out.push_str("# Stats\r\n");
            line(
                out,
                "total_connections_received",
                st.total_connections_received,
            );
            line(out, "total_commands_processed", st.total_commands_processed);
            line(out, "instantaneous_ops_per_sec", st.inst_commands.get());
            line(out, "total_net_input_bytes", st.total_net_input_bytes);
            line(out, "total_net_output_bytes", st.total_net_output_bytes);
            line(out, "total_net_repl_input_bytes", 0);
            line(out, "total_net_repl_output_bytes", 0);
            line(
                out,
                "instantaneous_input_kbps",
                format!("{:.2}", st.inst_net_input.get() as f64 / 1024.0),
            );
            line(
                out,
                "instantaneous_output_kbps",
                format!("{:.2}", st.inst_net_output.get() as f64 / 1024.0),
            );
            line(out, "instantaneous_input_repl_kbps", "0.00");
            line(out, "instantaneous_output_repl_kbps", "0.00");
            line(out, "rejected_connections", st.rejected_connections);
            line(out, "sync_full", 0);
            line(out, "sync_partial_ok", 0);
            line(out, "sync_partial_err", 0);
            let (mut hits, mut misses, mut expired) = (0u64, 0u64, 0u64);
            for i in 0..c.databases {
                if let Some(db) = server.db(i) {
                    hits += db.stats.keyspace_hits;
                    misses += db.stats.keyspace_misses;
                    expired += db.stats.expired_keys;
                }
            }
            line(out, "expired_keys", expired);
            line(
                out,
                "expired_stale_perc",
                format!("{:.2}", st.expired_stale_perc * 100.0),
            );
            line(
                out,
                "expired_time_cap_reached_count",
                st.expired_time_cap_reached_count,
            );
            line(
                out,
                "expire_cycle_cpu_milliseconds",
                st.expire_cycle_time_used_us / 1000,
            );
            line(out, "evicted_keys", st.evicted_keys);
            line(out, "evicted_clients", st.evicted_clients);
            let (total, current) = server.evict_state.exceeded_ms(now);
            line(out, "total_eviction_exceeded_time", total);
            line(out, "current_eviction_exceeded_time", current);
            line(out, "keyspace_hits", hits);
            line(out, "keyspace_misses", misses);
            line(out, "pubsub_channels", server.pubsub.channels_len());
            line(out, "pubsub_patterns", server.pubsub.patterns_len());
            line(out, "pubsubshard_channels", server.pubsub.shard_len());
            line(out, "latest_fork_usec", 0);
            line(out, "total_forks", 0);
            // No replicas, active defrag, client tracking or I/O threads.
            zeros(
                out,
                &[
                    "migrate_cached_sockets",
                    "slave_expires_tracked_keys",
                    "active_defrag_hits",
                    "active_defrag_misses",
                    "active_defrag_key_hits",
                    "active_defrag_key_misses",
                    "total_active_defrag_time",
                    "current_active_defrag_time",
                    "tracking_total_keys",
                    "tracking_total_items",
                    "tracking_total_prefixes",
                    "unexpected_error_replies",
                ],
            );
            line(out, "total_error_replies", st.total_error_replies);
            line(out, "dump_payload_sanitizations", 0);
            line(out, "total_reads_processed", st.total_reads_processed);
            line(
                out,
                "total_writes_processed",
                st.total_writes_processed.get(),
            );
            zeros(
                out,
                &[
                    "io_threaded_reads_processed",
                    "io_threaded_writes_processed",
                    "reply_buffer_shrinks",
                    "reply_buffer_expands",
                ],
            );
        }
        "replication" => {
            out.push_str("# Replication\r\n");
            line(out, "role", "master");
            line(out, "connected_slaves", 0);
            line(out, "master_failover_state", "no-failover");
            line(out, "master_replid", &server.run_id);
            line(out, "master_replid2", "0".repeat(40));
            line(out, "master_repl_offset", 0);
            line(out, "second_repl_offset", -1);
            line(out, "repl_backlog_active", 0);
            line(out, "repl_backlog_size", 1_048_576);
            line(out, "repl_backlog_first_byte_offset", 0);
            line(out, "repl_backlog_histlen", 0);
        }
        "cpu" => {
            // getrusage of the process, its children (none: the save is a
            // thread) and the calling thread, which is the loop's.
            use gyre_core::sys::process::{cpu_time, CpuOf};
            out.push_str("# CPU\r\n");
            let secs = |us: u64| format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
            for (of, sys, user) in [
                (CpuOf::Process, "used_cpu_sys", "used_cpu_user"),
                (
                    CpuOf::Children,
                    "used_cpu_sys_children",
                    "used_cpu_user_children",
                ),
                (
                    CpuOf::Thread,
                    "used_cpu_sys_main_thread",
                    "used_cpu_user_main_thread",
                ),
            ] {
                let (u, s) = cpu_time(of).unwrap_or((0, 0));
                line(out, sys, secs(s));
                line(out, user, secs(u));
            }
        }
        "modules" => out.push_str("# Modules\r\n"),
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            for r in server.table.ids() {
                let s = server.cmdstats.get(r.id);
                if s.calls > 0 || s.failed > 0 || s.rejected > 0 {
                    crate::cmdstats::stat_line(out, &r.full_name(), s);
                }
            }
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            for (k, n) in server.cmdstats.error_counts() {
                let _ = write!(out, "errorstat_{k}:count={n}\r\n");
            }
        }
        "latencystats" => crate::latency::info_section(server, out),
        "cluster" => {
            out.push_str("# Cluster\r\n");
            line(out, "cluster_enabled", 0);
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            for i in 0..c.databases {
                if let Some(db) = server.db(i) {
                    if !db.is_empty() {
                        let _ = write!(
                            out,
                            "db{i}:keys={},expires={},avg_ttl={}\r\n",
                            db.len(),
                            db.expires_len(),
                            db.avg_ttl
                        );
                    }
                }
            }
        }
        _ => {}
    }
}

fn os_name() -> &'static str {
    match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        "freebsd" => "FreeBSD",
        other => other,
    }
}
