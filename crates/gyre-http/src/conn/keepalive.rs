//! What follows a response on the connection (nginx's
//! `ngx_http_set_keepalive`, `ngx_http_set_lingering_close`): the next
//! pipelined request or the idle keep-alive state, or the decision to
//! close — at once or after lingering — that the glue reads from
//! [`Connection::disposition`].

use gyre_core::event::clock::Msec;

use super::{Connection, Disposition, State};
use crate::settings::LingeringClose;

impl Connection {
    /// What to do with the socket once the output is written.
    pub fn disposition(&self) -> Disposition {
        self.disposition
    }

    /// True once the machine decided to close (Close or Linger).
    pub fn wants_close(&self) -> bool {
        self.disposition != Disposition::Open
    }

    /// The glue wrote everything and shut down its write side; from now on
    /// reads are discarded until EOF or the lingering deadline.
    pub fn start_lingering(&mut self, now: Msec) {
        if self.disposition == Disposition::Linger {
            self.state = State::Lingering;
            self.linger_start = now;
            self.last_read = now;
            if self.eof {
                self.disposition = Disposition::Close;
            }
        }
    }

    pub(super) fn next_request(&mut self) {
        if let Some(d) = self.discarded.take() {
            self.recycle(d);
        }
        self.state = if self.inbuf.is_empty() {
            State::Idle
        } else {
            // nginx's `reading client pipelined request line`.
            self.head.pipelined = true;
            State::Head
        };
        if self.state == State::Idle && self.eof {
            self.close(Disposition::Close);
        }
    }

    /// After a `Connection: close` response: linger when the client may
    /// still be sending, as nginx's `lingering_close on` does.
    pub(super) fn close_after_response(&mut self, unread_body: bool) {
        let unread = unread_body || !self.inbuf.is_empty();
        let d = match self.st.lingering_close {
            LingeringClose::Always => Disposition::Linger,
            LingeringClose::On if unread && !self.eof => Disposition::Linger,
            _ => Disposition::Close,
        };
        self.close(d);
    }

    pub(super) fn close(&mut self, d: Disposition) {
        self.state = State::Done;
        self.disposition = d;
        self.cur = None;
        self.inbuf.clear();
        // The parser's offsets pointed into the input just dropped.
        self.head.reset(&self.st);
    }
}
