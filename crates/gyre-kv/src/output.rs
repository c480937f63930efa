//! Client output buffers (the part of Redis's `networking.c` that keeps a
//! client's reply list and `checkClientOutputBufferLimits`).
//!
//! What it owns: appending to another client's output (PUBLISH, keyspace
//! events), the list of clients with new output for the glue to flush
//! ([`Server::take_writers`]), the glue's hand-back of what a socket did
//! not take ([`Server::queue_output`], [`Server::output_sent`]), and the
//! `client-output-buffer-limit` classes with their hard and soft limits.
//!
//! A client over its hard limit, or over its soft limit for longer than
//! the soft seconds, is scheduled to close; its buffer is dropped at once
//! and nothing more is appended, so a subscriber that never reads costs at
//! most its limit.

use crate::server::{Client, ClientId, Server};

/// One `client-output-buffer-limit` class: `<hard> <soft> <soft seconds>`
/// (0 = no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ObufLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

/// The classes in Redis's order: normal, replica, pubsub.
pub type ObufLimits = [ObufLimit; 3];

/// Redis's defaults: `normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60`.
pub const DEFAULT_LIMITS: ObufLimits = [
    ObufLimit {
        hard: 0,
        soft: 0,
        soft_secs: 0,
    },
    ObufLimit {
        hard: 256 << 20,
        soft: 64 << 20,
        soft_secs: 60,
    },
    ObufLimit {
        hard: 32 << 20,
        soft: 8 << 20,
        soft_secs: 60,
    },
];

pub const CLASS_NAMES: [&str; 3] = ["normal", "replica", "pubsub"];

/// An emptied output buffer up to this capacity is kept for reuse: a
/// subscriber gets messages every batch (~13 KiB of a 200-PUBLISH batch
/// on one channel), and a buffer grown, freed and grown again cost
/// reallocations and glibc's trimmed heap top faulted in again each time
/// (pub/sub 1 x 1,000: 0.27 -> 0.16 us of CPU per delivery). Redis keeps
/// a 16 KiB buffer in every client and its reply blocks in jemalloc's
/// retained pages. The clients cron gives back what a client's recent
/// peak does not need ([`Client::resize_output_buffer`]).
const OBUF_KEEP: usize = 64 * 1024;

/// The least the clients cron shrinks a kept buffer to (Redis's
/// `PROTO_REPLY_MIN_BYTES`).
const OBUF_MIN: usize = 1024;

impl Client {
    /// Redis's `clientsCronResizeOutputBuffer`, for an emptied buffer: one
    /// kept at more than twice the most the client needed since the last
    /// look shrinks to that (at least [`OBUF_MIN`]).
    pub(crate) fn resize_output_buffer(&mut self) {
        let peak = std::mem::take(&mut self.obuf_peak).max(self.obuf.len());
        if self.obuf.is_empty()
            && self.obuf.capacity() > OBUF_MIN
            && peak * 2 < self.obuf.capacity()
        {
            self.obuf.shrink_to(peak.max(OBUF_MIN));
        }
    }
}

/// Class index of a client (Redis's `getClientType`: pub/sub when it has
/// subscriptions).
fn class_of(c: &Client) -> usize {
    if c.subs.count() > 0 {
        2
    } else {
        0
    }
}

/// Whether client `c` is over its class's hard limit, or over its soft
/// limit for longer than the soft seconds (the soft clock starts or
/// stops here); never for a client already closing.
fn over_limits(c: &mut Client, limits: &ObufLimits, now_ms: i64) -> bool {
    let used = c.pending_output().len() as u64;
    let lim = limits[class_of(c)];
    let hard = lim.hard > 0 && used >= lim.hard;
    let mut soft = false;
    if lim.soft > 0 && used >= lim.soft {
        match c.obuf_soft_since {
            None => c.obuf_soft_since = Some(now_ms),
            Some(t) => soft = (now_ms - t) / 1000 > lim.soft_secs as i64,
        }
    } else {
        c.obuf_soft_since = None;
    }
    (hard || soft) && !c.closing
}

/// `client-output-buffer-limit` as CONFIG GET shows it.
pub fn format_limits(l: &ObufLimits) -> String {
    let mut s = String::new();
    for (i, x) in l.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let name = if i == 1 { "slave" } else { CLASS_NAMES[i] };
        s.push_str(&format!("{name} {} {} {}", x.hard, x.soft, x.soft_secs));
    }
    s
}

/// Parse `class hard soft secs [class hard soft secs ...]` onto `l`
/// (Redis's `updateClientOutputBufferLimit`); `Err` with Redis's reason.
pub fn parse_limits(args: &[&[u8]], l: &mut ObufLimits) -> Result<(), &'static str> {
    if args.is_empty() || args.len() % 4 != 0 {
        return Err("Wrong number of arguments in buffer limit configuration.");
    }
    let mut new = *l;
    for ch in args.chunks(4) {
        let class = ch[0].to_ascii_lowercase();
        let i = match class.as_slice() {
            b"normal" => 0,
            b"replica" | b"slave" => 1,
            b"pubsub" => 2,
            _ => return Err("Invalid client class specified in buffer limit configuration."),
        };
        let hard = crate::util::memtoull(ch[1]);
        let soft = crate::util::memtoull(ch[2]);
        let secs = crate::util::string2ll(ch[3]).filter(|&v| v >= 0);
        let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            );
        };
        new[i] = ObufLimit {
            hard,
            soft,
            soft_secs: secs as u64,
        };
    }
    *l = new;
    Ok(())
}

impl Server {
    /// Append to client `id`'s output (from another client's command or
    /// the cron) and check its limits. Nothing is appended to a client
    /// that is closing.
    ///
    /// The bytes are what `pick` gives for the client's protocol (a
    /// message encoded once per protocol): one client lookup serves the
    /// protocol, the append and the limit check, which is all a PUBLISH
    /// costs per subscriber.
    #[inline]
    pub(crate) fn append_output<'b>(
        &mut self,
        id: ClientId,
        now_ms: i64,
        pick: impl FnOnce(crate::resp::Proto) -> &'b [u8],
    ) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        if c.closing || c.reply_mode == crate::reply_mode::ReplyMode::Off {
            return;
        }
        if c.pending_output().is_empty() {
            self.writers.push(id);
        }
        c.obuf.extend_from_slice(pick(c.resp));
        if over_limits(c, &self.config.client_output_buffer_limit, now_ms) {
            self.close_for_limits(id, now_ms);
        }
    }

    /// The glue keeps what the socket did not take of a read's replies.
    pub fn queue_output(&mut self, id: ClientId, bytes: &[u8], now_ms: i64) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        if c.closing {
            return;
        }
        c.obuf.extend_from_slice(bytes);
        self.check_output_limits(id, now_ms);
    }

    /// Bytes waiting for client `id`'s socket (none while they wait for
    /// the AOF's fsync: [`Server::hold_output`]).
    pub fn pending_output(&self, id: ClientId) -> &[u8] {
        if self.output_held(id) {
            return &[];
        }
        self.clients.get(&id).map_or(&[], |c| c.pending_output())
    }

    /// `n` pending bytes went out; an emptied buffer is released.
    pub fn output_sent(&mut self, id: ClientId, n: usize) {
        if let Some(c) = self.clients.get_mut(&id) {
            c.obuf_off += n;
            if c.obuf_off >= c.obuf.len() {
                c.obuf_peak = c.obuf_peak.max(c.obuf.len());
                // A small buffer is kept for the next messages (a
                // subscriber gets some every batch: no malloc, growth and
                // free each time); a big one goes back.
                if c.obuf.capacity() <= OBUF_KEEP {
                    c.obuf.clear();
                } else {
                    c.obuf = Vec::new();
                }
                c.obuf_off = 0;
                c.obuf_soft_since = None;
            } else if c.obuf_off > 64 * 1024 && c.obuf_off * 2 > c.obuf.len() {
                c.obuf.drain(..c.obuf_off);
                c.obuf_off = 0;
            }
        }
    }

    /// Clients given new output by others since the last call: the glue
    /// writes to them.
    pub fn take_writers(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.writers)
    }

    /// Redis's `checkClientOutputBufferLimits` +
    /// `closeClientOnOutputBufferLimitReached`.
    pub(crate) fn check_output_limits(&mut self, id: ClientId, now_ms: i64) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        if over_limits(c, &self.config.client_output_buffer_limit, now_ms) {
            self.close_for_limits(id, now_ms);
        }
    }

    /// Close a client over its limits, as Redis logs it.
    fn close_for_limits(&mut self, id: ClientId, now_ms: i64) {
        let info = crate::client::client_line(self, id, now_ms, None);
        log::warn!(
            "Client {info} scheduled to be closed ASAP for overcoming of output buffer limits."
        );
        if let Some(c) = self.clients.get_mut(&id) {
            c.obuf = Vec::new();
            c.obuf_off = 0;
        }
        self.schedule_close(id);
    }

    /// The soft-limit clock in serverCron: a client that stayed over its
    /// soft limit without new output is closed here.
    pub(crate) fn output_limits_cron(&mut self, now_ms: i64) {
        let over: Vec<ClientId> = self
            .clients
            .values()
            .filter(|c| c.obuf_soft_since.is_some())
            .map(|c| c.id)
            .collect();
        for id in over {
            self.check_output_limits(id, now_ms);
        }
    }

    /// Output bytes held for clients (INFO, used_memory).
    pub fn output_memory(&self) -> u64 {
        self.clients
            .values()
            .map(|c| c.obuf.capacity() as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_limits() {
        let mut l = DEFAULT_LIMITS;
        assert_eq!(
            format_limits(&l),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        parse_limits(&[b"pubsub", b"1mb", b"512kb", b"5"], &mut l).unwrap();
        assert_eq!(
            l[2],
            ObufLimit {
                hard: 1 << 20,
                soft: 512 << 10,
                soft_secs: 5
            }
        );
        assert!(parse_limits(&[b"nope", b"1", b"1", b"1"], &mut l).is_err());
        assert!(parse_limits(&[b"normal", b"1"], &mut l).is_err());
        assert!(parse_limits(&[b"normal", b"x", b"1", b"1"], &mut l).is_err());
    }
}
