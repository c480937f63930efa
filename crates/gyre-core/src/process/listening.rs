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
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::conn::{ListenOptions, Listener};

/// The environment variable through which a binary upgrade (USR2) hands
/// the listening sockets to the new master: `GYRE=fd;fd;...;` (nginx's
/// `NGINX` variable).
pub const INHERIT_ENV: &str = "GYRE";

/// One listener: a socket, or one socket per worker with `reuseport`.
pub struct ListenSet {
    pub opts: ListenOptions,
    pub sockets: Vec<Listener>,
}

fn same(a: &ListenOptions, b: &ListenOptions) -> bool {
    a.addr == b.addr && a.reuseport == b.reuseport
}

/// nginx's `ngx_open_listening_sockets` tries: an address in use (an old
/// master not gone yet, a port freed a moment later) is tried 5 times,
/// 500 ms apart, before the start or reload fails.
const BIND_TRIES: u32 = 5;
const BIND_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// Binds what `wanted` lists for `workers` workers, sharing the sockets of
/// `old` where the address and `reuseport` match. `old` is left intact, so a
/// failed reload changes nothing; dropping it afterwards closes the sockets
/// no longer wanted. "Address already in use" is retried as nginx does
/// (each failure logged at emerg, then `try again to bind() after 500ms`
/// at notice, in the end `still could not bind()`); any other error fails
/// at once.
pub fn bind_all(
    wanted: &[ListenOptions],
    workers: usize,
    old: &[ListenSet],
) -> io::Result<Vec<ListenSet>> {
    bind_retrying(wanted, workers, old, BIND_TRIES, BIND_RETRY)
}

fn bind_retrying(
    wanted: &[ListenOptions],
    workers: usize,
    old: &[ListenSet],
    tries: u32,
    pause: std::time::Duration,
) -> io::Result<Vec<ListenSet>> {
    for _ in 0..tries {
        match bind_once(wanted, workers, old) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                log::error!(target: crate::errlog::EMERG, "{e}");
                log::info!("try again to bind() after {}ms", pause.as_millis());
                std::thread::sleep(pause);
            }
            other => return other,
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "still could not bind()",
    ))
}

fn bind_once(
    wanted: &[ListenOptions],
    workers: usize,
    old: &[ListenSet],
) -> io::Result<Vec<ListenSet>> {
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        let n = if w.reuseport { workers.max(1) } else { 1 };
        let mut sockets = Vec::with_capacity(n);
        for o in old.iter().filter(|o| same(&o.opts, w)) {
            for ls in o.sockets.iter() {
                if sockets.len() < n {
                    sockets.push(ls.try_clone()?);
                }
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

/// Takes the listening sockets a previous master handed over in
/// [`INHERIT_ENV`] (binary upgrade), as sets [`bind_all`] can reuse. Each fd
/// must be a listening socket; anything else is logged and closed.
pub fn inherited() -> Vec<ListenSet> {
    let Ok(v) = std::env::var(INHERIT_ENV) else {
        return Vec::new();
    };
    std::env::remove_var(INHERIT_ENV);
    let mut sets: Vec<ListenSet> = Vec::new();
    for part in v.split(';').filter(|p| !p.is_empty()) {
        let Ok(fd) = part.parse::<RawFd>() else {
            log::error!("invalid socket number \"{part}\" in {INHERIT_ENV} environment variable, ignoring the rest");
            break;
        };
        if fd < 3 || !crate::sys::socket::is_listening_socket(fd) {
            log::error!("inherited fd {fd} is not a listening socket, ignored");
            continue;
        }
        // SAFETY: the previous master passed this fd to us (exec keeps it
        // open) and nothing else in this process owns it; checked above to
        // be an open listening socket.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let reuseport = crate::sys::socket::reuseport(owned.as_fd());
        let addr = match crate::sys::socket::local_addr(owned.as_fd()) {
            Ok(a) => a,
            Err(e) => {
                log::error!("getsockname() of inherited fd {fd} failed ({e})");
                continue;
            }
        };
        let mut opts = ListenOptions::new(addr);
        opts.reuseport = reuseport;
        match Listener::from_fd(owned, opts) {
            Ok(ls) => {
                log::info!("using inherited sockets from \"{v}\"");
                match sets.iter_mut().find(|s| same(&s.opts, &opts)) {
                    Some(s) => s.sockets.push(ls),
                    None => sets.push(ListenSet {
                        opts,
                        sockets: vec![ls],
                    }),
                }
            }
            Err(e) => log::error!("inherited fd {fd} unusable ({e})"),
        }
    }
    sets
}

/// The value of [`INHERIT_ENV`] for `sets`, after clearing close-on-exec on
/// each socket so it survives the new binary's exec. Call
/// [`restore_cloexec`] afterwards in this process.
pub fn export(sets: &[ListenSet]) -> io::Result<String> {
    let mut v = String::new();
    for s in sets {
        for ls in &s.sockets {
            crate::sys::socket::set_cloexec(ls.as_fd(), false)?;
            v.push_str(&ls.as_fd().as_raw_fd().to_string());
            v.push(';');
        }
    }
    Ok(v)
}

/// Sets close-on-exec again on every socket.
pub fn restore_cloexec(sets: &[ListenSet]) {
    for s in sets {
        for ls in &s.sockets {
            let _ = crate::sys::socket::set_cloexec(ls.as_fd(), true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn taken() -> (std::net::TcpListener, ListenOptions) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        (l, ListenOptions::new(addr))
    }

    #[test]
    fn an_address_in_use_is_tried_again_then_given_up_in_nginx_words() {
        let (_held, want) = taken();
        let e = match bind_retrying(&[want], 1, &[], 3, Duration::from_millis(20)) {
            Err(e) => e,
            Ok(_) => panic!("bound a port that is listened on"),
        };
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert_eq!(e.to_string(), "still could not bind()");
    }

    #[test]
    fn a_port_freed_meanwhile_is_bound_on_a_later_try() {
        let (held, want) = taken();
        let free = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        let sets = bind_retrying(&[want], 1, &[], 50, Duration::from_millis(20))
            .expect("bound once the holder let go");
        free.join().expect("join");
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0].sockets.len(), 1);
    }
}
