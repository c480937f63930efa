//! Reading a request body a handler asked for (nginx's
//! `ngx_http_read_client_request_body` on the connection's side): what the
//! machine has buffered, then the socket while it is readable, handed to
//! [`crate::request_body`] to store.

use std::io;

use gyre_core::conn::ConnId;
use gyre_core::event::{Core, Ev};

use super::HttpConn;
use crate::request::HttpRequest;

/// What [`HttpConn::read_body`] got to.
pub(super) enum BodyRead {
    /// Waiting for the client (a read event or the body timer).
    Wait,
    Done,
    /// The machine ended the request with this status (logged).
    Ended(u16),
    /// Storing the body failed: finalize with 500.
    Failed,
}

impl HttpConn {
    /// Reads the request body a handler asked for (crate::request_body):
    /// what the machine has buffered, then the socket while it is
    /// readable. Bounded: each turn takes input or stops.
    pub(super) fn read_body(
        &mut self,
        core: &mut Core,
        c: ConnId,
        r: &mut HttpRequest,
    ) -> BodyRead {
        // Out of the request while it is filled, so `r` names the lines.
        let Some(mut rb) = r.st.body.take() else {
            return BodyRead::Failed;
        };
        let got = self.read_body_into(core, c, r, &mut rb);
        r.st.body = Some(rb);
        got
    }

    fn read_body_into(
        &mut self,
        core: &mut Core,
        c: ConnId,
        r: &HttpRequest,
        rb: &mut crate::request_body::RequestBody,
    ) -> BodyRead {
        use crate::request_body::Pumped;
        let shared = self.shared.clone();
        for _ in 0..64 {
            let now = core.now();
            let Some(m) = self.m.as_mut() else {
                return BodyRead::Ended(400);
            };
            let date = core.clock().http_date();
            let pumped = crate::request_body::pump(m, rb, &shared.conf, r, now, date);
            match pumped {
                Pumped::Done => return BodyRead::Done,
                Pumped::Failed => return BodyRead::Failed,
                Pumped::Ended(s) => return BodyRead::Ended(s),
                Pumped::Again => {}
            }
            if m.has_output() {
                // `100 Continue` goes out before the body is read on.
                return BodyRead::Wait;
            }
            let ready = core.conn(c).is_some_and(|x| x.read.ready);
            if !ready || !m.wants_read() {
                return BodyRead::Wait;
            }
            let mut buf = shared.buf.borrow_mut();
            match core.recv(c, &mut buf) {
                Ok(0) => m.on_eof(now),
                Ok(n) => m.on_read(&buf[..n], now),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return BodyRead::Wait,
                Err(e) => {
                    drop(buf);
                    self.log_recv_error(core, c, &e);
                    if let Some(m) = self.m.as_mut() {
                        m.on_recv_error(&e, now);
                    }
                }
            }
        }
        // Yield to the other connections: the posted write event comes
        // back here.
        self.delayed = true;
        core.del_timer(Ev::write(c));
        core.post(Ev::write(c));
        BodyRead::Wait
    }
}
