//! Redis's `serverCron` for the kv process, minus I/O: the periodic work
//! ([`Server::cron`]: statistics, dynamic hz, clientsCron's idle timeouts,
//! the lazy-free slices), the active expire cycle (slow from the cron, fast
//! from `beforeSleep`) and their time budgets.

use super::*;

impl Server {
    /// Effective hz (after dynamic scaling in the last `cron`).
    pub fn hz(&self) -> u32 {
        self.cron.hz
    }

    /// Redis's `run_with_period(ms)`.
    pub(super) fn run_with_period(&self, ms: u64) -> bool {
        let period = 1000 / u64::from(self.cron.hz.max(1));
        ms <= period || self.cron.cronloops % (ms / period.max(1)).max(1) == 0
    }

    /// `serverCron` minus I/O. Call it as a periodic timer; it returns when
    /// to run next. Duties, in Redis's order: dynamic hz, instantaneous
    /// metrics (every 100 ms), memory peak, clients cron (idle timeouts,
    /// `numclients / hz` clients per call, at least 5), databases cron (slow
    /// active expire cycle), persistence hook.
    /// Free buried aggregates ([`crate::db::Db::free_some`]): chunks of
    /// `chunk` elements until done or, with a limit, until it is spent.
    pub fn lazyfree_step(&mut self, chunk: usize, limit: Option<Duration>) {
        let start = std::time::Instant::now();
        for db in &mut self.dbs {
            while db.free_some(chunk) {
                if limit.is_none_or(|l| start.elapsed() >= l) {
                    return;
                }
            }
        }
    }

    /// Aggregates waiting to be freed (INFO lazyfree_pending_objects).
    pub fn lazyfree_pending(&self) -> usize {
        self.dbs.iter().map(Db::lazyfree_pending).sum()
    }

    pub fn cron(&mut self, now_ms: i64) -> CronOutcome {
        self.lazyfree_step(LAZYFREE_CHUNK, Some(Duration::from_millis(1)));
        // Dynamic hz: double while there are many clients per tick.
        let mut hz = self.config.hz.clamp(MIN_HZ, MAX_HZ);
        if self.config.dynamic_hz {
            while self.clients.len() / hz as usize > MAX_CLIENTS_PER_CLOCK_TICK {
                hz *= 2;
                if hz > MAX_HZ {
                    hz = MAX_HZ;
                    break;
                }
            }
        }
        self.cron.hz = hz;

        if self.run_with_period(100) {
            let s = &mut self.stats;
            s.process_rss = crate::util::process_rss().unwrap_or(s.process_rss);
            s.inst_commands
                .track(now_ms, s.total_commands_processed as i64);
            s.inst_net_input
                .track(now_ms, s.total_net_input_bytes as i64);
            s.inst_net_output
                .track(now_ms, s.total_net_output_bytes as i64);
        }

        let used = self.used_memory();
        self.clients_mem_cached =
            used.saturating_sub(900 * 1024 + self.dbs.iter().map(Db::used_memory).sum::<u64>());
        if used > self.stats.used_memory_peak {
            self.stats.used_memory_peak = used;
        }

        self.output_limits_cron(now_ms);
        if crate::client_evict::limit_bytes(self) > 0 {
            crate::client_evict::cron(self, now_ms);
        }
        self.sync_dirty_cas();
        let mut close = self.clients_cron(now_ms);
        close.append(&mut self.to_close);

        let budget = if self.config.expire_slices {
            self.slice_budget()
        } else {
            self.slow_budget()
        };
        // No active expiry while a CLIENT PAUSE holds writes.
        let expire = if self.pause_pending() && self.writes_paused(now_ms) {
            ExpireCycleStats::default()
        } else {
            self.active_expire_cycle(now_ms, CycleKind::Slow, budget)
        };
        crate::notify::drain_expired(self, None, now_ms);
        if self.prop.on {
            self.propagate_expired_keys();
        }

        let bgsave_started = self.persistence_cron(now_ms);

        self.cron.cronloops += 1;
        CronOutcome {
            next_in_ms: 1000 / u64::from(hz),
            close,
            expire,
            hz,
            expire_backlog: self.expire_backlog(),
            bgsave_started,
        }
    }

    /// Whether expired keys are piling up: the last expire cycle ran out of
    /// budget, or the running share of stale samples is above
    /// [`EXPIRE_ACCEPTABLE_STALE`] (the condition of Redis's fast cycle).
    pub fn expire_backlog(&self) -> bool {
        self.cron.timelimit_exit
            || self.stats.expired_stale_perc >= EXPIRE_ACCEPTABLE_STALE as f64 / 100.0
    }

    /// One short expire cycle ([`EXPIRE_SLICE_US`] of budget) for a driver
    /// working off a backlog in slices (see [`Config::expire_slices`]).
    pub fn expire_slice(&mut self, now_ms: i64) -> ExpireCycleStats {
        if self.pause_pending() && self.writes_paused(now_ms) {
            return ExpireCycleStats::default();
        }
        let budget = self.slice_budget();
        let st = self.active_expire_cycle(now_ms, CycleKind::Fast, budget);
        crate::notify::drain_expired(self, None, now_ms);
        if self.prop.on {
            self.propagate_expired_keys();
        }
        st
    }

    pub(super) fn slice_budget(&self) -> ExpireBudget {
        ExpireBudget {
            time_limit: self
                .config
                .expire_use_wall_clock
                .then(|| Duration::from_micros(EXPIRE_SLICE_US)),
            max_samples: EXPIRE_SLICE_US * EXPIRE_SAMPLES_PER_US,
        }
    }

    /// Redis's `clientsCron` timeout part: visit `numclients / hz` clients
    /// (at least 5), round robin, and pick those idle longer than `timeout`.
    pub(super) fn clients_cron(&mut self, now_ms: i64) -> Vec<ClientId> {
        let mut close = Vec::new();
        let n = self.clients.len();
        if n == 0 {
            return close;
        }
        let mut iterations = n / self.cron.hz.max(1) as usize;
        if iterations < CLIENTS_CRON_MIN_ITERATIONS {
            iterations = n.min(CLIENTS_CRON_MIN_ITERATIONS);
        }
        let timeout = self.config.timeout;
        let mut cursor = self.cron.clients_cursor;
        for _ in 0..iterations {
            let next = self
                .clients
                .range(cursor.saturating_add(1)..)
                .next()
                .or_else(|| self.clients.iter().next())
                .map(|(id, _)| *id);
            let Some(id) = next else { break };
            cursor = id;
            // Blocked clients are not idle (Redis times them out by their
            // own deadline only).
            let blocked = self.blocked.is_blocked(id);
            let Some(c) = self.clients.get_mut(&id) else {
                continue;
            };
            c.resize_output_buffer();
            if timeout == 0 || blocked {
                continue;
            }
            let idle_s = now_ms.div_euclid(1000) - c.last_interaction_ms.div_euclid(1000);
            if !c.closing && idle_s > 0 && idle_s as u64 > timeout {
                c.closing = true;
                close.push(id);
            }
        }
        self.cron.clients_cursor = cursor;
        close
    }

    pub(super) fn slow_budget(&self) -> ExpireBudget {
        let us = EXPIRE_SLOW_TIME_PERC * 1_000_000 / u64::from(self.cron.hz.max(1)) / 100;
        ExpireBudget {
            time_limit: self
                .config
                .expire_use_wall_clock
                .then(|| Duration::from_micros(us)),
            max_samples: us * EXPIRE_SAMPLES_PER_US,
        }
    }

    /// Call before the event loop sleeps (Redis's `beforeSleep`): runs a
    /// fast expire cycle when the last one ran out of budget or many keys
    /// are stale, at most once per 2 ms. Nothing in sliced mode (the
    /// driver's slices do that work on a timer).
    pub fn before_sleep(&mut self, now_ms: i64) -> ExpireCycleStats {
        self.lazyfree_step(LAZYFREE_CHUNK, None);
        let st = self.before_sleep_expire(now_ms);
        if self.prop.on {
            self.propagate_expired_keys();
            self.aof_before_sleep(now_ms);
        }
        self.release_held();
        st
    }

    pub(super) fn before_sleep_expire(&mut self, now_ms: i64) -> ExpireCycleStats {
        if self.config.expire_slices || !self.expire_backlog() {
            return ExpireCycleStats::default();
        }
        if self.pause_pending() && self.writes_paused(now_ms) {
            return ExpireCycleStats::default();
        }
        if now_ms < self.cron.last_fast_cycle_ms + (2 * EXPIRE_FAST_DURATION_US / 1000) as i64 {
            return ExpireCycleStats::default();
        }
        self.cron.last_fast_cycle_ms = now_ms;
        let budget = ExpireBudget {
            time_limit: self
                .config
                .expire_use_wall_clock
                .then(|| Duration::from_micros(EXPIRE_FAST_DURATION_US)),
            max_samples: EXPIRE_FAST_DURATION_US * EXPIRE_SAMPLES_PER_US,
        };
        let st = self.active_expire_cycle(now_ms, CycleKind::Fast, budget);
        crate::notify::drain_expired(self, None, now_ms);
        st
    }

    /// Redis's `activeExpireCycle`: visit the databases round robin; in each,
    /// sample 20 keys with a TTL, reclaim the expired ones, and repeat while
    /// more than 10% of a sample was expired. Stops when the budget is spent
    /// (time checked every 16 loops, as Redis does; samples after each loop).
    /// Every step is O(20) whatever the keyspace size.
    pub fn active_expire_cycle(
        &mut self,
        now_ms: i64,
        kind: CycleKind,
        budget: ExpireBudget,
    ) -> ExpireCycleStats {
        let start = Instant::now();
        let mut st = ExpireCycleStats {
            ran: true,
            ..Default::default()
        };
        let ndb = self.dbs.len();
        let mut dbs_per_call = CRON_DBS_PER_CALL.min(ndb);
        if self.cron.timelimit_exit {
            dbs_per_call = ndb;
        }
        self.cron.timelimit_exit = false;
        let mut exhausted = false;
        let mut j = 0;
        while j < dbs_per_call && !exhausted {
            let idx = self.cron.current_db % ndb;
            self.cron.current_db = self.cron.current_db.wrapping_add(1);
            j += 1;
            let db = &mut self.dbs[idx];
            loop {
                let num = db.expires_len();
                if num == 0 {
                    db.avg_ttl = 0;
                    break;
                }
                st.loops += 1;
                let o = db.expire_sample(now_ms, num.min(EXPIRE_KEYS_PER_LOOP));
                st.sampled += o.sampled;
                st.expired += o.expired;
                if o.ttl_samples > 0 {
                    let avg = o.ttl_sum / o.ttl_samples as i64;
                    db.avg_ttl = if db.avg_ttl == 0 {
                        avg
                    } else {
                        (db.avg_ttl / 50) * 49 + avg / 50
                    };
                }
                if st.sampled >= budget.max_samples {
                    exhausted = true;
                } else if st.loops & 0xf == 0 {
                    if let Some(limit) = budget.time_limit {
                        if start.elapsed() > limit {
                            exhausted = true;
                        }
                    }
                }
                if exhausted {
                    self.stats.expired_time_cap_reached_count += 1;
                    break;
                }
                if o.sampled == 0 || o.expired * 100 / o.sampled <= EXPIRE_ACCEPTABLE_STALE {
                    break;
                }
            }
        }
        self.cron.timelimit_exit = exhausted;
        let _ = kind;
        st.budget_exhausted = exhausted;
        st.elapsed_us = start.elapsed().as_micros() as u64;
        self.stats.expire_cycle_time_used_us += st.elapsed_us;
        self.latmon
            .sample_if_needed("expire-cycle", st.elapsed_us.saturating_mul(1000));
        let perc = if st.sampled > 0 {
            st.expired as f64 / st.sampled as f64
        } else {
            0.0
        };
        self.stats.expired_stale_perc = perc * 0.05 + self.stats.expired_stale_perc * 0.95;
        st
    }
}
