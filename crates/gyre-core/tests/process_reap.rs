//! `waitpid(-1, WNOHANG)` reaping, as the master does after SIGCHLD.
//!
//! Kept alone in its own test binary: `waitpid(-1)` collects *any* child of
//! the process, so it would steal statuses from tests running in parallel.

mod util;

use std::collections::HashMap;

use std::time::{Duration, Instant};
use util::fork::spawn;

use gyre_core::sys::process::{reap_all, reap_one, ExitStatus};
use gyre_core::sys::signal::send_kill;

#[test]
fn reap_collects_every_ended_child() {
    // No children at all: ECHILD is reported as "nothing to reap".
    assert_eq!(reap_one().expect("reap"), None);

    let mut expected = HashMap::new();
    for code in 1..=3 {
        expected.insert(spawn(move || code), ExitStatus::Exited(code));
    }
    let sleeper = spawn(|| loop {
        std::thread::sleep(Duration::from_millis(50));
    });
    expected.insert(sleeper, ExitStatus::Signaled(libc::SIGKILL, false));

    // The sleeper is alive, so until it is killed at most three can be reaped.
    let mut got = HashMap::new();
    let start = Instant::now();
    while got.len() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "children not reaped"
        );
        for (pid, st) in reap_all().expect("reap") {
            got.insert(pid, st);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(!got.contains_key(&sleeper));

    send_kill(sleeper).expect("kill");
    while got.len() < 4 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "sleeper not reaped"
        );
        if let Some((pid, st)) = reap_one().expect("reap") {
            got.insert(pid, st);
        } else {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert_eq!(got, expected);
    assert_eq!(reap_one().expect("reap"), None);
}
