//! Re-arming a connection after each step (the `ngx_handle_read_event` /
//! `ngx_handle_write_event` calls after nginx's handlers, and
//! `ngx_http_set_keepalive`): the send timer while output waits, the
//! machine's next deadline, and going idle — TCP_NODELAY, the keep-alive
//! timer, the machine back to the pool, a gracefully exiting worker's last
//! call.

use gyre_core::conn::ConnId;
use gyre_core::event::clock::{msec_before, msec_diff};
use gyre_core::event::{Core, Ev};

use super::{HttpConn, Stat, LAST_CALL_MS};

impl HttpConn {
    /// Re-arms interest and timers after a step.
    pub(super) fn after(&mut self, core: &mut Core, c: ConnId) {
        let output = self.has_output();
        let proxied = match self.r.as_ref().map(|r| &r.content) {
            Some(crate::request::Content::Proxy(p)) => {
                if p.is_tunnel() && !output {
                    // An upgraded connection: the tunnel arms both sides itself.
                    core.del_timer(Ev::write(c));
                    core.del_timer(Ev::read(c));
                    return;
                }
                true
            }
            _ => false,
        };
        let watch_client = proxied
            && core.edge_triggered()
            && !output
            && !self.m.as_ref().is_some_and(|m| m.wants_read());
        if output {
            if core.handle_write_event(c).is_err() {
                self.close(core, c);
                return;
            }
            let send_timeout = self.m.as_ref().map_or(0, |m| m.settings().send_timeout);
            core.add_timer(Ev::write(c), send_timeout);
            let _ = core.disable_read(c);
            return;
        }
        if !self.delayed {
            core.del_timer(Ev::write(c));
        }
        if self.is_fresh() {
            // The first read found nothing yet: wait for it.
            if core.handle_read_event(c).is_err() {
                self.close(core, c);
            }
            return;
        }
        let now = core.now();
        let idle = self.is_idle();
        if idle && !self.last_call && core.is_exiting() {
            // Went idle after a graceful shutdown began: the client may be
            // sending its next request already, so wait for one last call
            // instead of being closed with the exiting worker.
            self.last_call = true;
            core.set_cancelable(Ev::read(c), false);
            core.add_timer(Ev::read(c), LAST_CALL_MS);
        }
        if idle && self.last_call {
            self.set_stat(core, Stat::None);
            if core.handle_read_event(c).is_err() {
                self.close(core, c);
            }
            return;
        }
        if idle {
            self.set_stat(core, Stat::None);
            if !self.nodelay {
                self.nodelay = true;
                if let Some(fd) = core.fd(c) {
                    let _ = gyre_core::sys::socket::set_nodelay(fd, true);
                }
            }
            core.set_keepalive(c, true);
            if core.conn(c).is_some_and(|x| x.close) {
                self.close(core, c);
                return;
            }
            if let Some(d) = self.m.as_ref().and_then(|m| m.next_deadline()) {
                // The keep-alive timer of the previous idle period fires
                // before this deadline (it only moves later, unless a
                // location with a shorter keepalive_timeout answered):
                // left as it is, it re-arms itself when it fires.
                self.idle_deadline = d;
                let armed = core.timer_deadline(Ev::read(c));
                if armed.is_none_or(|t| msec_before(d, t)) {
                    core.add_timer(Ev::read(c), msec_diff(d, now).max(0) as u64);
                }
            }
            self.release_machine();
        } else {
            match self.m.as_ref().and_then(|m| m.next_deadline()) {
                Some(d) => core.add_timer(Ev::read(c), msec_diff(d, now).max(0) as u64),
                None => core.del_timer(Ev::read(c)),
            }
        }
        if watch_client || self.m.as_ref().is_none_or(|m| m.wants_read()) {
            // A proxied request watches its client too (edge-triggered:
            // one report when it sends or closes), to notice it leaving.
            if core.handle_read_event(c).is_err() {
                self.close(core, c);
            }
        } else {
            let _ = core.disable_read(c);
        }
    }
}
