//! The protocol modules gyre is built with, and how they plug into the
//! process model: the configuration modules they register, the sockets they
//! listen on, and the protocol each worker puts on each socket.

use std::io;

use gyre_core::conf::{Conf, Module};
use gyre_core::conn::{ListenOptions, Listener};
use gyre_core::event::Core;
use gyre_core::process::App;
use gyre_http::conf::{HttpConf, HTTP_MODULE};

/// The configuration modules, after the core's own.
pub fn modules() -> Vec<&'static dyn Module> {
    vec![&HTTP_MODULE]
}

pub struct GyreApp;

impl App for GyreApp {
    fn listeners(&self, conf: &Conf) -> Vec<ListenOptions> {
        conf.module::<HttpConf>()
            .map(gyre_http::glue::listeners)
            .unwrap_or_default()
    }

    fn init_worker(
        &self,
        conf: &Conf,
        core: &mut Core,
        listeners: Vec<Listener>,
        _worker: usize,
    ) -> io::Result<()> {
        if let Some(http) = conf.module::<HttpConf>() {
            gyre_http::glue::init_worker(http, core, listeners)?;
        }
        Ok(())
    }
}
