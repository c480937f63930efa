//! nginx's `c->number` (`*N` in the error log, `$connection`): with a shared
//! zone, two loops that share it number their connections from one counter,
//! starting at 1, never twice the same.
#![allow(clippy::unwrap_used)]

use std::cell::RefCell;
use std::net::TcpStream;
use std::rc::Rc;
use std::time::{Duration, Instant};

use gyre_core::conn::{ConnId, ListenOptions, Listener, Protocol};
use gyre_core::event::{Core, CoreOptions, Handler, Next};
use gyre_core::process::shm::SharedZone;

struct Numbers(Rc<RefCell<Vec<u64>>>);

/// Records each new connection's number and closes it.
impl Protocol for Numbers {
    fn init_connection(&mut self, core: &mut Core, c: ConnId) -> Option<Box<dyn Handler>> {
        self.0.borrow_mut().push(core.conn(c).unwrap().number);
        None
    }
}

fn loop_with(zone: &SharedZone, seen: &Rc<RefCell<Vec<u64>>>) -> (Core, std::net::SocketAddr) {
    let mut core = Core::new(CoreOptions::default()).unwrap();
    core.set_shared(zone.clone());
    let ls = Listener::bind(ListenOptions::new("127.0.0.1:0".parse().unwrap())).unwrap();
    let addr = ls.local_addr();
    core.add_listener(ls, Box::new(Numbers(seen.clone())))
        .unwrap();
    (core, addr)
}

#[test]
fn connections_of_loops_sharing_a_zone_are_numbered_from_one_counter() {
    let zone = SharedZone::new().unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let (mut a, addr_a) = loop_with(&zone, &seen);
    let (mut b, addr_b) = loop_with(&zone, &seen);
    let end = Instant::now() + Duration::from_secs(10);
    for i in 0..20 {
        let addr = if i % 2 == 0 { addr_a } else { addr_b };
        let _s = TcpStream::connect(addr).unwrap();
        let want = i + 1;
        while seen.borrow().len() < want {
            assert!(Instant::now() < end, "connection {i} not accepted");
            for core in [&mut a, &mut b] {
                let te = core.create_time_event(1, |_, _| Next::NoMore);
                core.process_events_and_timers().unwrap();
                let _ = core.delete_time_event(te);
            }
        }
    }
    let got = seen.borrow().clone();
    assert_eq!(got, (1..=20).collect::<Vec<u64>>());
    assert_eq!(zone.connection_counter().get(), 20);
}
