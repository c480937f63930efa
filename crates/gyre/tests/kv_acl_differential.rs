//! Differential tests of the ACL log, the ACL file and `user` lines
//! against a real redis-server 7.0 (Debian's `/usr/bin/redis-server`):
//! the same scripts run against both, transcripts compared (ACL LOG's
//! ages and connection-dependent client fields masked, see
//! [`kv_script`]). Skips with a message when redis-server is missing.
#![allow(clippy::unwrap_used)]

mod kv_script;
mod util;

use kv_script::{assert_same, differential, run_script, start_gyre, start_redis};
use util::Prefix;

#[test]
fn acl_log_matches_redis() {
    differential(
        "kvdiff-acllog",
        &[],
        "",
        "
        0> ACL LOG
        0> ACL SETUSER bob on >pw ~k* &news* +get +set +publish +subscribe +multi +exec +acl|whoami
        1> AUTH bob pw
        1> GET other
        1> GET k1
        1> SET other v
        1> INCR k1
        1> PUBLISH chat m
        1> SUBSCRIBE news1 chat
        0>l ACL LOG
        1> GET other
        1> GET other
        0>l ACL LOG 2
        2> AUTH bob wrong
        2> AUTH nobody x
        2> HELLO 2 AUTH bob nope
        2> auth bob wrong
        0>l ACL LOG 3
        1> MULTI
        1> GET other
        1> DEL k1
        1> GET k1
        1> EXEC
        1> MULTI
        1> GET k1
        1> SET k2 v
        0> ACL SETUSER bob -get
        1> EXEC
        1> MULTI
        1> AUTH bob wrong
        1> EXEC
        0>l ACL LOG 5
        3> SELECT 3
        3> ACL SETUSER db3 on nopass ~a* +select +get
        3> AUTH db3 x
        3> GET b
        0>l ACL LOG 1
        0> ACL LOG 0
        0> ACL LOG -5
        0> ACL LOG x
        0> ACL LOG 1 2
        0> ACL LOG RESET
        0> ACL LOG
        0> CONFIG GET acllog-max-len
        0> CONFIG SET acllog-max-len 2
        1> GET o1
        1> GET o2
        1> GET o3
        0>l ACL LOG
        0> CONFIG SET acllog-max-len -1
        0> CONFIG SET acllog-max-len 128
        0>? HELLO 3
        0>l ACL LOG 1
        0> ACL HELP
        0> ACL Cat a b
        ",
    );
}

/// Runs `script` on a redis-server and a gyre that share an ACL file's
/// first contents; the transcripts with each side's path shown as
/// `<aclfile>`, and the two files at the end.
fn with_aclfile(name: &str, acl: &str, script: &str) -> Option<(String, String)> {
    let dir = Prefix::new(name);
    let rpath = dir.write("redis.acl", acl);
    let redis = start_redis(&["--aclfile", rpath.to_str().unwrap()])?;
    let gpath = dir.write("gyre0.acl", acl);
    let gyre = start_gyre(name, &format!("    aclfile {};", gpath.display()));
    let mask = |t: Vec<String>, p: &std::path::Path| -> Vec<String> {
        let p = p.display().to_string();
        t.into_iter().map(|l| l.replace(&p, "<aclfile>")).collect()
    };
    let want = mask(run_script(redis.port, script), &rpath);
    let got = mask(run_script(gyre.port, script), &gpath);
    assert_same(name, &want, &got, &gyre.s.log());
    Some((
        std::fs::read_to_string(&rpath).unwrap(),
        std::fs::read_to_string(&gpath).unwrap(),
    ))
}

#[test]
fn aclfile_load_save_match_redis() {
    let acl = "user bob on #148de9c5a7a44d19e56cd9ae1a554bf67847afb0c58f6e12fa29ac7ddfca9940 ~* resetchannels +@all\n\
               user default on nopass ~* &* +@all\n\
               \n\
               user carol on nopass %R~r* &news -@all +get +@hash\n";
    let Some((r, g)) = with_aclfile(
        "kvdiff-aclfile",
        acl,
        "
        0> ACL LIST
        1> AUTH bob p
        1> ACL WHOAMI
        2> AUTH carol x
        2> GET r1
        2> GET w1
        0> ACL SETUSER dave on >secret ~d* +@string
        0> ACL SETUSER carol -get
        0> ACL SAVE
        0> ACL SETUSER eve on
        0> ACL LOAD
        0> ACL LIST
        1> PING
        2> PING
        0> PING
        3> AUTH dave secret
        3> GET d1
        0> CONFIG GET aclfile
        0> CONFIG SET aclfile /tmp/x
        ",
    ) else {
        return;
    };
    assert_eq!(r, g, "ACL SAVE wrote different files");
}

#[test]
fn bad_aclfile_on_load_matches_redis() {
    let dir = Prefix::new("kvdiff-aclbad");
    let good = "user bob on nopass ~* +@all\n";
    let rpath = dir.write("redis.acl", good);
    let Some(redis) = start_redis(&["--aclfile", rpath.to_str().unwrap()]) else {
        return;
    };
    let gpath = dir.write("gyre.acl", good);
    let gyre = start_gyre(
        "kvdiff-aclbad",
        &format!("    aclfile {};", gpath.display()),
    );
    // The kv process has read its file once it answers.
    run_script(gyre.port, "0> PING");
    let bad = "user bob on >p ~* +@all\nuser bob off\n# a comment\nuser carol badrule +nosuch >x alsobad\nuser\n\tuser dan on\n";
    std::fs::write(&rpath, bad).unwrap();
    std::fs::write(&gpath, bad).unwrap();
    let script = "
        0> ACL LOAD
        0> ACL LIST
        0> ACL SAVE
        ";
    let mask = |t: Vec<String>, p: &std::path::Path| -> Vec<String> {
        let p = p.display().to_string();
        t.into_iter().map(|l| l.replace(&p, "<aclfile>")).collect()
    };
    let want = mask(run_script(redis.port, script), &rpath);
    let got = mask(run_script(gyre.port, script), &gpath);
    assert_same("kvdiff-aclbad", &want, &got, &gyre.s.log());
    // ACL SAVE wrote the rules in force (the good file's) over the bad one.
    assert_eq!(
        std::fs::read_to_string(&rpath).unwrap(),
        std::fs::read_to_string(&gpath).unwrap()
    );
    std::fs::remove_file(&gpath).unwrap();
    std::fs::remove_file(&rpath).unwrap();
    let script = "0> ACL LOAD\n0> ACL LIST\n";
    let want = mask(run_script(redis.port, script), &rpath);
    let got = mask(run_script(gyre.port, script), &gpath);
    assert_same("kvdiff-aclbad-missing", &want, &got, &gyre.s.log());
}

#[test]
fn user_lines_match_redis() {
    differential(
        "kvdiff-userlines",
        &[
            "--user",
            "alice",
            "on",
            ">p1",
            "~cache:*",
            "+get",
            "--user",
            "default",
            "on",
            "nopass",
            "~*",
            "+@all",
            "-flushall",
        ],
        "    user alice on >p1 ~cache:* +get;\n    user default on nopass ~* +@all -flushall;",
        "
        0> ACL LIST
        0> FLUSHALL
        1> AUTH alice p1
        1> GET cache:1
        1> GET x
        ",
    );
}

/// `gyre -t` refuses what redis-server refuses at start, with its words.
#[test]
fn bad_acl_configuration_is_refused() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "user alice on badrule;",
            "",
            "Error in user declaration 'alice': Syntax error",
        ),
        (
            "user alice on >x;\n    user alice off;",
            "",
            "Error in user declaration 'alice': Duplicate user found. A user can only be defined once in config files",
        ),
        (
            "user alice on +nosuch;",
            "",
            "Error loading ACL rule '+nosuch' for the user named 'alice': Unknown command or category name in ACL",
        ),
        (
            "user alice on;\n    aclfile conf/users.acl;",
            "user bob on\n",
            "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid.",
        ),
        (
            "aclfile conf/users.acl;",
            "user bob on\nuser bob off\n",
            "Aborting Redis startup because of ACL errors: WARNING: Duplicate user 'bob' found on line 2. WARNING: ACL errors detected",
        ),
        (
            "aclfile conf/nosuch.acl;",
            "",
            "Error loading ACLs, opening file '",
        ),
    ];
    for (kv, acl, want) in cases {
        let p = Prefix::new("kv-aclconf");
        p.write("conf/users.acl", acl);
        p.conf(&format!(
            "daemon off;\nerror_log logs/error.log notice;\nevents {{}}\nkv {{\n    listen 127.0.0.1:1;\n    {kv}\n}}\n"
        ));
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{kv}: accepted");
        assert!(err.contains(want), "{kv}: {err}");
    }
}

#[test]
fn commandstats_and_errorstats_match_redis() {
    differential(
        "kvdiff-cmdstats",
        &[],
        "",
        "
        0> CONFIG RESETSTAT
        0> SET a 1
        0> GET a
        0> GET
        0> INCR a x
        0> LPUSH a x
        0> NOSUCH
        0> CLIENT NOSUCH
        0> CLIENT
        0> CLIENT INFO x
        0> CONFIG GET maxmemory
        1> AUTH x y
        0> MULTI
        0> SET b 1
        0> INCR a
        0> LPUSH a x
        0> EXEC
        0> MULTI
        0> GET
        0> EXEC
        0> ACL SETUSER u on nopass ~k* +get +info
        2> AUTH u x
        2> GET a
        2> SET k v
        2> GET k
        0>i INFO commandstats
        0>i INFO errorstats
        0> CONFIG RESETSTAT
        0>i INFO commandstats
        0>i INFO errorstats
        ",
    );
}

#[test]
fn rename_command_matches_redis() {
    differential(
        "kvdiff-rename",
        &[
            "--rename-command",
            "config",
            "cfg",
            "--rename-command",
            "FLUSHALL",
            "",
            "--rename-command",
            "get",
            "fetch_value_of_key",
        ],
        "    rename-command config cfg;\n    rename-command FLUSHALL \"\";\n    rename-command get fetch_value_of_key;",
        "
        0> SET a 1
        0> GET a
        0> fetch_value_of_key a
        0> FETCH_VALUE_OF_KEY a
        0> fetch_value_of_key
        0> FLUSHALL
        0> CONFIG GET maxmemory
        0> cfg GET maxmemory
        0> CFG nosuch
        0> cfg
        0> MULTI
        0> fetch_value_of_key a
        0> GET a
        0> EXEC
        0>l CLIENT INFO
        0> ACL SETUSER u on nopass ~* +get
        1> AUTH u x
        1> fetch_value_of_key a
        1> cfg GET x
        0>i INFO commandstats
        0> COMMAND INFO config flushall nosuch
        ",
    );
}

#[test]
fn client_no_evict_matches_redis() {
    differential(
        "kvdiff-noevict",
        &[],
        "",
        "
        0> CLIENT NO-EVICT on
        0>l ACL LOG
        0> CLIENT NO-EVICT maybe
        0> CLIENT NO-EVICT
        0> CLIENT NO-EVICT a b
        0> MULTI
        0> CLIENT NO-EVICT OFF
        0> EXEC
        0> CLIENT NO-EVICT ON
        0> RESET
        0>l CLIENT INFO
        ",
    );
}

/// `gyre -t` refuses bad `rename-command` lines with Redis's words.
#[test]
fn bad_rename_command_is_refused() {
    for (kv, want) in [
        (
            "rename-command nosuch x;",
            "No such command in rename-command",
        ),
        (
            "rename-command get set;",
            "Target command name already exists",
        ),
        (
            "rename-command get \"\";\n    rename-command get x;",
            "No such command in rename-command",
        ),
    ] {
        let p = Prefix::new("kv-rename");
        p.conf(&format!(
            "daemon off;\nerror_log logs/error.log notice;\nevents {{}}\nkv {{\n    listen 127.0.0.1:1;\n    {kv}\n}}\n"
        ));
        let out = p.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{kv}: accepted");
        assert!(err.contains(want), "{kv}: {err}");
    }
}

/// COMMAND after `rename-command`: a removed command is not counted or
/// listed, a renamed one is found by its new name and shown by its own
/// (Redis's `fullname`). Not differential: this server's command table
/// is not Redis's whole one.
#[test]
fn command_reflects_rename_command() {
    let count = |kv: &str| {
        let g = start_gyre("kv-rename-count", kv);
        let mut c = kv_script::Conn::open(g.port);
        c.send(&["COMMAND", "COUNT"]);
        let n: i64 = String::from_utf8_lossy(&c.frame())
            .trim()
            .trim_start_matches(':')
            .parse()
            .unwrap();
        c.send(&["COMMAND", "INFO", "cfg", "config"]);
        let info = String::from_utf8_lossy(&c.frame()).into_owned();
        c.send(&["COMMAND", "LIST"]);
        let list = String::from_utf8_lossy(&c.frame()).into_owned();
        (n, info, list)
    };
    let (base, _, _) = count("");
    let (n, info, list) =
        count("    rename-command flushall \"\";\n    rename-command config cfg;");
    assert_eq!(n, base - 1);
    assert!(info.starts_with("*2\r\n*10\r\n$6\r\nconfig\r\n"), "{info}");
    assert!(info.ends_with("$-1\r\n"), "{info}");
    assert!(
        list.contains("\r\nconfig\r\n") && !list.contains("flushall"),
        "{list}"
    );
}

/// `maxmemory-clients` on both servers: a no-evict client over the limit
/// on its own stays; the other clients are disconnected (Redis may drop
/// their last reply, gyre sends it: only the closing is compared), and
/// INFO counts them alike.
#[test]
fn client_eviction_matches_redis() {
    use kv_script::Conn;
    let Some(redis) = kv_script::start_redis(&[]) else {
        return;
    };
    let gyre = start_gyre("kv-client-evict", "");
    let run = |port: u16| -> (String, String, String, String) {
        let mut admin = Conn::open(port);
        let r = |c: &mut Conn, args: &[&str]| {
            c.send(args);
            String::from_utf8_lossy(&c.frame()).into_owned()
        };
        let mut out = r(&mut admin, &["CLIENT", "NO-EVICT", "on"]);
        out += &r(&mut admin, &["CONFIG", "SET", "maxmemory-clients", "1mb"]);
        out += &r(&mut admin, &["CONFIG", "GET", "maxmemory-clients"]);
        let mut big = Conn::open(port);
        out += &r(&mut big, &["CLIENT", "NO-EVICT", "on"]);
        out += &r(&mut big, &["MULTI"]);
        let v = "x".repeat(100 * 1024);
        for i in 0..15 {
            out += &r(&mut big, &["SET", &format!("k{i}"), &v]);
        }
        // A new client over the total: evicted (its reply may or may not
        // arrive first).
        let mut victim = Conn::open(port);
        let mut closed = String::from("open");
        for _ in 0..3 {
            victim.send(&["PING"]);
            if victim.frame() == b"<closed>" {
                closed = "closed".into();
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(150));
        }
        let exec = r(&mut big, &["EXEC"]);
        admin.send(&["INFO", "stats"]);
        let info = String::from_utf8_lossy(&admin.frame()).into_owned();
        let evicted = info
            .lines()
            .find(|l| l.starts_with("evicted_clients:"))
            .unwrap_or_default()
            .to_string();
        (out, closed, exec, evicted)
    };
    let want = run(redis.port);
    let got = run(gyre.port);
    assert_eq!(want, got, "gyre log:\n{}", gyre.s.log());
    assert_eq!(got.1, "closed");
    assert_eq!(got.3, "evicted_clients:1");
}

#[test]
fn maxmemory_clients_config_matches_redis() {
    differential(
        "kvdiff-maxmemclients",
        &[],
        "",
        "
        0> CONFIG GET maxmemory-clients
        0> CONFIG SET maxmemory-clients 10%
        0> CONFIG GET maxmemory-clients
        0> CONFIG SET maxmemory-clients 1mb
        0> CONFIG GET maxmemory-clients
        0> CONFIG SET maxmemory-clients 101%
        0> CONFIG SET maxmemory-clients -5
        0> CONFIG SET maxmemory-clients abc
        0> CONFIG SET maxmemory-clients 0%
        0> CONFIG GET maxmemory-clients
        ",
    );
}

#[test]
fn acl_pubsub_default_matches_redis() {
    differential(
        "kvdiff-pubsubdefault",
        &[],
        "",
        "
        0> CONFIG GET acl-pubsub-default
        0> CONFIG SET acl-pubsub-default bad
        0> ACL SETUSER n0 on
        0> CONFIG SET acl-pubsub-default allchannels
        0> CONFIG GET acl-pubsub-default
        0> ACL SETUSER n1 on
        0> ACL GETUSER n1
        0> ACL SETUSER n0 reset
        0> ACL LIST
        0> CONFIG SET acl-pubsub-default resetchannels
        0> ACL SETUSER n1 reset
        0> ACL SETUSER n2 on nopass +publish
        0> ACL LIST
        1> AUTH n2 x
        1> PUBLISH c m
        ",
    );
}
