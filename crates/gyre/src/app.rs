//! The protocol modules gyre is built with, and how they plug into the
//! process model: the configuration modules they register, the sockets they
//! listen on, and the protocol each worker puts on each socket.

use std::io;

use gyre_core::conf::{Conf, Module};
use gyre_core::conn::{ListenOptions, Listener};
use gyre_core::event::Core;
use gyre_core::process::App;

/// The configuration modules, after the core's own.
pub fn modules() -> Vec<&'static dyn Module> {
    Vec::new()
}

pub struct GyreApp;

impl App for GyreApp {
    fn listeners(&self, _conf: &Conf) -> Vec<ListenOptions> {
        Vec::new()
    }

    fn init_worker(
        &self,
        _conf: &Conf,
        _core: &mut Core,
        _listeners: Vec<Listener>,
        _worker: usize,
    ) -> io::Result<()> {
        Ok(())
    }
}
