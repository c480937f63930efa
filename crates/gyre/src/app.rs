//! The protocol modules gyre is built with, and how they plug into the
//! process model: the configuration modules they register, the sockets they
//! listen on, and the protocol each worker puts on each socket.

use std::io;

use gyre_core::conf::{Conf, Module};
use gyre_core::conn::{ListenOptions, Listener};
use gyre_core::event::Core;
use gyre_core::process::App;
use gyre_http::conf::{HttpConf, HINTS_MODULE, HTTP_MODULE};
use gyre_kv::conf::KV_MODULE;

/// The configuration modules, after the core's own.
pub fn modules() -> Vec<&'static dyn Module> {
    vec![&HTTP_MODULE, &HINTS_MODULE, &KV_MODULE]
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

    /// The keyspace lives in one process: the kv process.
    fn singleton_listeners(&self, conf: &Conf) -> Vec<ListenOptions> {
        gyre_kv::glue::conf_of(conf)
            .map(gyre_kv::glue::listeners)
            .unwrap_or_default()
    }

    fn init_singleton(
        &self,
        conf: &Conf,
        core: &mut Core,
        listeners: Vec<Listener>,
    ) -> io::Result<()> {
        match gyre_kv::glue::conf_of(conf) {
            Some(kv) => gyre_kv::glue::init(kv, core, listeners),
            None => Ok(()),
        }
    }

    fn singleton_changed(&self, old: &Conf, new: &Conf) -> bool {
        gyre_kv::glue::changed(gyre_kv::glue::conf_of(old), gyre_kv::glue::conf_of(new))
    }

    fn singleton_name(&self) -> &'static str {
        "kv process"
    }
}
