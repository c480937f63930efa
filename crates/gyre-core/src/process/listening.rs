//! The master's listening sockets (nginx's `cycle->listening`).
//!
//! Every listener a configuration asks for is bound once in the master, before
//! fork, so all workers share it; a `reuseport` listener is bound once per
//! worker instead (nginx's `ngx_clone_listening`), each worker accepting on
//! its own socket and the kernel spreading connections. On reload the sockets
//! of listeners whose address and options are unchanged are kept (connections
//! waiting in their queues are not lost), new ones are bound, and removed
//! ones closed.

use std::io;

use crate::conn::{ListenOptions, Listener};

/// One listener: a socket, or one socket per worker with `reuseport`.
pub struct ListenSet {
    pub opts: ListenOptions,
    pub sockets: Vec<Listener>,
}

fn same(a: &ListenOptions, b: &ListenOptions) -> bool {
    a.addr == b.addr && a.reuseport == b.reuseport
}

/// Binds what `wanted` lists for `workers` workers, sharing the sockets of
/// `old` where the address and `reuseport` match. `old` is left intact, so a
/// failed reload changes nothing; dropping it afterwards closes the sockets
/// no longer wanted.
pub fn bind_all(
    wanted: &[ListenOptions],
    workers: usize,
    old: &[ListenSet],
) -> io::Result<Vec<ListenSet>> {
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let n = if w.reuseport { workers.max(1) } else { 1 };
        let mut sockets = Vec::with_capacity(n);
        if let Some(o) = old.iter().find(|o| same(&o.opts, w)) {
            for ls in o.sockets.iter().take(n) {
                sockets.push(ls.try_clone()?);
            }
        }
        while sockets.len() < n {
            let ls = Listener::bind(*w).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "bind() to {} failed ({})",
                        w.addr,
                        crate::sys_error_text(&e)
                    ),
                )
            })?;
            sockets.push(ls);
        }
        out.push(ListenSet { opts: *w, sockets });
    }
    Ok(out)
}

/// The sockets worker `worker` accepts on, one per listener, in order.
pub fn for_worker(sets: &[ListenSet], worker: usize) -> io::Result<Vec<Listener>> {
    sets.iter()
        .map(|s| {
            let i = if s.opts.reuseport {
                worker % s.sockets.len().max(1)
            } else {
                0
            };
            match s.sockets.get(i) {
                Some(ls) => ls.try_clone(),
                None => Err(io::Error::other("listener has no socket")),
            }
        })
        .collect()
}
