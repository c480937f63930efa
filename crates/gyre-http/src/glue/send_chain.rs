//! The write path (nginx's `c->send_chain`, `ngx_linux_sendfile_chain`):
//! the machine's in-memory output goes in one send, files by sendfile,
//! until the socket is full or all of it went out.

use std::io;
use std::os::fd::AsFd;

use gyre_core::conn::ConnId;
use gyre_core::event::Core;

use super::HttpConn;
use crate::conn::Chunk;

impl HttpConn {
    /// Writes the machine's output in place; true when all of it went
    /// out. In-memory output (heads and small bodies of every response of
    /// the batch) is one buffer, so it is one send; files go by sendfile.
    pub(super) fn write(&mut self, core: &mut Core, c: ConnId) -> io::Result<bool> {
        let Some(m) = self.m.as_mut() else {
            return Ok(true);
        };
        while let Some(chunk) = m.next_output() {
            match chunk {
                Chunk::Bytes(b) => {
                    let want = b.len();
                    let sent = if m.file_follows() && !self.head_alone {
                        core.send_more(c, b)
                    } else {
                        core.send(c, b)
                    };
                    match sent {
                        Ok(n) => {
                            self.head_alone = false;
                            m.consume_output(n as u64);
                            if n < want {
                                // A short write: the socket buffer is full.
                                return Ok(false);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                        Err(e) => return Err(e),
                    }
                }
                Chunk::File { token, offset, len } => {
                    let Some(info) = self
                        .files
                        .iter()
                        .find(|(t, _)| *t == token)
                        .map(|(_, f)| f.clone())
                    else {
                        return Err(io::Error::other("lost file"));
                    };
                    let mut pos = offset;
                    let left = (len as usize).min(1 << 30);
                    match core.sendfile(c, info.file.as_fd(), &mut pos, left) {
                        Ok(0) => return Err(io::Error::other("file truncated")),
                        Ok(n) => m.consume_output(n as u64),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        // Release the files: an idle connection keeps no capacity (a
        // suspended request may still send from them).
        if self.r.is_none() {
            self.files = Vec::new();
        }
        Ok(true)
    }
}
