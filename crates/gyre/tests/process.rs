//! The process model with the real binary: workers start, a killed worker is
//! replaced, stop / quit / reopen via -s, the open-file-limit warning.
#![allow(clippy::unwrap_used)]

mod util;

use std::time::Duration;

use util::{wait_for, Prefix};

const BASE: &str = "daemon off;\nerror_log logs/error.log notice;\n";

#[test]
fn workers_start_and_a_killed_worker_is_replaced() {
    let p = Prefix::new("proc-respawn");
    p.conf(&format!(
        "{BASE}worker_processes 2;\nevents {{ worker_connections 64; }}\n"
    ));
    let s = p.start();
    assert!(wait_for(Duration::from_secs(5), || s.workers().len() == 2));
    let old = s.workers();
    std::process::Command::new("kill")
        .args(["-9", &old[0].to_string()])
        .status()
        .unwrap();
    assert!(
        s.logged(
            &format!("worker process {} exited on signal 9", old[0]),
            Duration::from_secs(5)
        ),
        "{}",
        s.log()
    );
    assert!(wait_for(Duration::from_secs(1), || {
        let w = s.workers();
        w.len() == 2 && !w.contains(&old[0])
    }));
    assert!(
        s.workers().contains(&old[1]),
        "the other worker is untouched"
    );
}

#[test]
fn stop_and_quit_via_the_pid_file() {
    for (sig, line) in [("stop", "exiting"), ("quit", "gracefully shutting down")] {
        let p = Prefix::new(&format!("proc-{sig}"));
        p.conf(&format!("{BASE}worker_processes 2;\nevents {{}}\n"));
        let mut s = p.start();
        assert!(wait_for(Duration::from_secs(5), || s.workers().len() == 2));
        let o = s.signal(sig);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            s.wait_exit(Duration::from_secs(5)),
            "master did not exit on {sig}"
        );
        assert!(s.log().contains(line), "{}", s.log());
        assert!(
            !p.path("logs/gyre.pid").exists(),
            "pid file removed on exit"
        );
    }
}

#[test]
fn reopen_moves_the_error_log() {
    let p = Prefix::new("proc-reopen");
    p.conf(&format!("{BASE}worker_processes 1;\nevents {{}}\n"));
    let s = p.start();
    assert!(s.logged("start worker process", Duration::from_secs(5)));
    std::fs::rename(p.path("logs/error.log"), p.path("logs/error.log.1")).unwrap();
    let o = s.signal("reopen");
    assert!(o.status.success());
    assert!(wait_for(Duration::from_secs(5), || p
        .path("logs/error.log")
        .exists()));
    assert!(s.logged("reopening logs", Duration::from_secs(5)));
}

#[test]
fn worker_connections_over_the_open_file_limit_warns() {
    let p = Prefix::new("proc-nofile");
    p.conf(&format!(
        "{BASE}worker_processes 1;\nevents {{ worker_connections 1000000; }}\n"
    ));
    let s = p.start();
    assert!(
        s.logged(
            "1000000 worker_connections exceed open file resource limit: ",
            Duration::from_secs(5)
        ),
        "{}",
        s.log()
    );
}

#[test]
fn reload_with_a_bad_config_keeps_serving_the_old_one() {
    let p = Prefix::new("proc-badreload");
    p.conf(&format!("{BASE}worker_processes 1;\nevents {{}}\n"));
    let s = p.start();
    assert!(wait_for(Duration::from_secs(5), || s.workers().len() == 1));
    let before = s.workers();
    p.conf("events {}\nbogus;\n");
    let o = s.signal("reload");
    // `-s` itself reads the configuration, as nginx's does: a bad file fails
    // there. Signal the master directly to see what it does.
    assert_eq!(o.status.code(), Some(1));
    std::process::Command::new("kill")
        .args(["-HUP", &s.pid().to_string()])
        .status()
        .unwrap();
    assert!(
        s.logged("unknown directive \"bogus\"", Duration::from_secs(5)),
        "{}",
        s.log()
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(s.workers(), before, "old worker kept");
}
