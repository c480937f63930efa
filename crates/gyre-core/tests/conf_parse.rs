//! Configuration loading end to end: real files in a temporary prefix,
//! nginx's exact error texts with file and line, includes, defaults, `-g`,
//! the `-T` dump, and a protocol module registered from outside the crate.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use gyre_core::conf::{
    self, Args, Block, Conf, ConfCtx, ConfError, Context, CpuAffinity, Directive, DirectiveSpec,
    EventMethod, ListenConf, Location, LogLevel, LogTarget, ModuleDef,
};

// ---------------------------------------------------------------------------
// A third-party protocol module, defined here to prove the core needs no
// knowledge of it:
//
//     echo { listen 127.0.0.1:7000; idle_timeout 5s; echo_types { a b; } }

const ECHO_CTX: Context = Context::custom(0);

#[derive(Debug, Default)]
struct EchoConf {
    servers: Vec<EchoServer>,
}

#[derive(Debug)]
struct EchoServer {
    listen: Vec<ListenConf>,
    idle_timeout: u64,
    types: Vec<(String, Vec<String>)>,
    at: Location,
    blocks_seen: Vec<String>,
}

fn echo_block(c: &mut EchoConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    c.servers.push(EchoServer {
        listen: Vec::new(),
        idle_timeout: 60_000,
        types: Vec::new(),
        at: d.location.clone(),
        blocks_seen: Vec::new(),
    });
    Ok(())
}

fn server(c: &mut EchoConf) -> Result<&mut EchoServer, String> {
    c.servers
        .last_mut()
        .ok_or_else(|| "no echo block".to_string())
}

fn echo_listen(c: &mut EchoConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let listen = d.listen(7000)?;
    server(c)?.listen.push(listen);
    Ok(())
}

fn echo_idle(c: &mut EchoConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
    let ms = d.msec(0)?;
    let s = server(c)?;
    s.idle_timeout = ms;
    s.blocks_seen = cx.blocks().to_vec();
    Ok(())
}

/// A raw block: its body is data, read by the setter itself.
fn echo_types(c: &mut EchoConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
    let s = server(c)?;
    for entry in d.block.as_deref().unwrap_or_default() {
        if entry.block.is_some() {
            return Err("unexpected \"{\"".to_string());
        }
        s.types.push((entry.name.clone(), entry.args.clone()));
    }
    Ok(())
}

fn echo_init(c: &mut EchoConf, _: &ConfCtx) -> Result<(), ConfError> {
    for s in &c.servers {
        if s.listen.is_empty() {
            return Err(ConfError::at(
                "no \"listen\" in \"echo\" block",
                s.at.clone(),
            ));
        }
    }
    Ok(())
}

static ECHO_DIRECTIVES: &[DirectiveSpec<EchoConf>] = &[
    DirectiveSpec::block(
        "echo",
        Context::MAIN,
        Args::NOARGS,
        Block::Context(ECHO_CTX),
        true,
        echo_block,
    ),
    DirectiveSpec::multi("listen", ECHO_CTX, Args::ONE_MORE, echo_listen),
    DirectiveSpec::new("idle_timeout", ECHO_CTX, Args::TAKE1, echo_idle),
    DirectiveSpec::block(
        "echo_types",
        ECHO_CTX,
        Args::NOARGS,
        Block::Raw,
        false,
        echo_types,
    ),
];

static ECHO_MODULE: ModuleDef<EchoConf> = ModuleDef {
    name: "echo",
    directives: ECHO_DIRECTIVES,
    create_conf: EchoConf::default,
    init_conf: echo_init,
};

// ---------------------------------------------------------------------------
// Temporary prefixes.

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A prefix directory `<tmp>/gyre-conf-<pid>-<n>-<tag>` with a `conf/`
/// subdirectory, removed on drop.
struct Prefix {
    root: PathBuf,
}

impl Prefix {
    fn new(tag: &str) -> Prefix {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("gyre-conf-{}-{n}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("conf")).unwrap();
        Prefix { root }
    }

    /// Writes `text` to `rel` (relative to the prefix), creating directories.
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    /// The main file as it appears in messages.
    fn main(&self) -> String {
        self.path("conf/gyre.conf")
    }

    fn load(&self, params: Option<&str>) -> Result<Conf, ConfError> {
        conf::load(
            &self.root,
            Path::new("conf/gyre.conf"),
            params,
            &[&ECHO_MODULE],
        )
    }

    /// Writes the main file and loads it.
    fn load_main(&self, text: &str) -> Result<Conf, ConfError> {
        self.write("conf/gyre.conf", text);
        self.load(None)
    }

    /// Writes the main file, expects a load error and returns its text.
    fn error(&self, text: &str) -> String {
        self.load_main(text).unwrap_err().to_string()
    }
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

// ---------------------------------------------------------------------------
// Error messages, each with its exact text and location.

#[test]
fn unknown_directive() {
    let p = Prefix::new("unknown");
    let text = "events {}\n".to_string() + &"\n".repeat(10) + "foo bar;\n";
    assert_eq!(
        p.error(&text),
        format!("unknown directive \"foo\" in {}:12", p.main())
    );
}

#[test]
fn unknown_block_of_unregistered_module() {
    let p = Prefix::new("nohttp");
    assert_eq!(
        p.error("events {}\nhttp {\n  server { listen 80; }\n}\n"),
        format!("unknown directive \"http\" in {}:2", p.main())
    );
}

#[test]
fn duplicate_directive() {
    let p = Prefix::new("dup");
    assert_eq!(
        p.error(
            "events {\n  worker_connections 10;\n  use epoll;\n\n  worker_connections 20;\n}\n"
        ),
        format!(
            "\"worker_connections\" directive is duplicate in {}:5",
            p.main()
        )
    );
    assert_eq!(
        p.error("events {}\nevents {}\n"),
        format!("\"events\" directive is duplicate in {}:2", p.main())
    );
    assert_eq!(
        p.error("daemon on;\nevents {}\ndaemon off;\n"),
        format!("\"daemon\" directive is duplicate in {}:3", p.main())
    );
}

#[test]
fn same_directive_in_different_blocks_is_not_duplicate() {
    let p = Prefix::new("nodup");
    let cf = p
        .load_main(
            "events {}\necho { listen 1; idle_timeout 1s; }\necho { listen 2; idle_timeout 2s; }\n",
        )
        .unwrap();
    let echo = cf.module::<EchoConf>().unwrap();
    assert_eq!(echo.servers.len(), 2);
    assert_eq!(echo.servers[1].idle_timeout, 2000);
}

#[test]
fn invalid_number_of_arguments() {
    let p = Prefix::new("nargs");
    let text = "events {}\n".to_string() + &"\n".repeat(6) + "echo {\n  listen;\n}\n";
    assert_eq!(
        p.error(&text),
        format!(
            "invalid number of arguments in \"listen\" directive in {}:9",
            p.main()
        )
    );
    assert_eq!(
        p.error("worker_processes 1 2;\nevents {}\n"),
        format!(
            "invalid number of arguments in \"worker_processes\" directive in {}:1",
            p.main()
        )
    );
    assert_eq!(
        p.error("events {}\ndaemon;\n"),
        format!(
            "invalid number of arguments in \"daemon\" directive in {}:2",
            p.main()
        )
    );
    assert_eq!(
        p.error("events x {}\n"),
        format!(
            "invalid number of arguments in \"events\" directive in {}:1",
            p.main()
        )
    );
}

#[test]
fn unexpected_end_of_file_in_block() {
    let p = Prefix::new("eofblock");
    // nginx reports the line after the last newline.
    let text = "events {\n  worker_connections 10;\n".to_string() + &"\n".repeat(17);
    assert_eq!(
        p.error(&text),
        format!(
            "unexpected end of file, expecting \"}}\" in {}:20",
            p.main()
        )
    );
}

#[test]
fn unexpected_closing_brace() {
    let p = Prefix::new("close");
    assert_eq!(
        p.error("events {}\n}\n"),
        format!("unexpected \"}}\" in {}:2", p.main())
    );
    assert_eq!(
        p.error("events {}\npid x }\n"),
        // `}` glued to a word is part of it; after a space it is a stray.
        format!("unexpected \"}}\" in {}:2", p.main())
    );
}

#[test]
fn unexpected_end_of_file_in_directive() {
    let p = Prefix::new("eofdir");
    assert_eq!(
        p.error("events {}\n\ndaemon off"),
        format!(
            "unexpected end of file, expecting \";\" or \"}}\" in {}:3",
            p.main()
        )
    );
}

#[test]
fn unexpected_characters() {
    let p = Prefix::new("unexp");
    assert_eq!(
        p.error("events {}\n;\n"),
        format!("unexpected \";\" in {}:2", p.main())
    );
    assert_eq!(
        p.error("{\n"),
        format!("unexpected \"{{\" in {}:1", p.main())
    );
    assert_eq!(
        p.error("events {}\npid \"a\"b;\n"),
        format!("unexpected \"b\" in {}:2", p.main())
    );
}

#[test]
fn not_allowed_here() {
    let p = Prefix::new("ctx");
    assert_eq!(
        p.error("events {}\n\nlisten 80;\n"),
        format!("\"listen\" directive is not allowed here in {}:3", p.main())
    );
    assert_eq!(
        p.error("worker_connections 10;\nevents {}\n"),
        format!(
            "\"worker_connections\" directive is not allowed here in {}:1",
            p.main()
        )
    );
    assert_eq!(
        p.error("events {\n daemon off;\n}\n"),
        format!("\"daemon\" directive is not allowed here in {}:2", p.main())
    );
    assert_eq!(
        p.error("events {}\nidle_timeout 5s;\n"),
        format!(
            "\"idle_timeout\" directive is not allowed here in {}:2",
            p.main()
        )
    );
    assert_eq!(
        p.error("events { events {} }\n"),
        format!("\"events\" directive is not allowed here in {}:1", p.main())
    );
}

#[test]
fn block_shape_errors() {
    let p = Prefix::new("shape");
    assert_eq!(
        p.error("\nevents;\n"),
        format!(
            "directive \"events\" has no opening \"{{\" in {}:2",
            p.main()
        )
    );
    assert_eq!(
        p.error("events {}\ndaemon on {}\n"),
        format!(
            "directive \"daemon\" is not terminated by \";\" in {}:2",
            p.main()
        )
    );
}

#[test]
fn invalid_values() {
    let p = Prefix::new("values");
    let cases = [
        (
            "events { worker_connections xyz; }",
            "invalid number \"xyz\"".to_string(),
        ),
        (
            "events {}\nworker_processes many;",
            "\"worker_processes\" directive invalid value".to_string(),
        ),
        (
            "events {}\ndaemon maybe;",
            "invalid value \"maybe\" in \"daemon\" directive, it must be \"on\" or \"off\""
                .to_string(),
        ),
        (
            "events {}\nmaster_process 1;",
            "invalid value \"1\" in \"master_process\" directive, it must be \"on\" or \"off\""
                .to_string(),
        ),
        (
            "events { epoll_events -1; }",
            "\"epoll_events\" directive invalid number".to_string(),
        ),
        (
            "events {}\nworker_rlimit_nofile lots;",
            "\"worker_rlimit_nofile\" directive invalid number".to_string(),
        ),
        (
            "events { accept_mutex_delay 5parsecs; }",
            "\"accept_mutex_delay\" directive invalid value".to_string(),
        ),
        (
            "events {}\ntimer_resolution 30m1h;",
            "\"timer_resolution\" directive invalid value".to_string(),
        ),
        (
            "events { use kqueue; }",
            "invalid event type \"kqueue\"".to_string(),
        ),
        (
            "events {}\nerror_log logs/e.log loud;",
            "invalid log level \"loud\"".to_string(),
        ),
        (
            "events {}\nworker_cpu_affinity 0102;",
            "invalid character \"2\" in \"worker_cpu_affinity\"".to_string(),
        ),
        (
            "events {}\necho { listen 127.0.0.1:99999; }",
            "invalid port in \"127.0.0.1:99999\" of the \"listen\" directive".to_string(),
        ),
        (
            "events {}\necho { listen 80 fast; }",
            "invalid parameter \"fast\"".to_string(),
        ),
    ];
    for (text, message) in cases {
        let line = text.lines().count();
        assert_eq!(
            p.error(text),
            format!("{message} in {}:{line}", p.main()),
            "{text}"
        );
    }
}

#[test]
fn no_events_section() {
    let p = Prefix::new("noevents");
    assert_eq!(
        p.error("worker_processes 2;\n"),
        "no \"events\" section in configuration"
    );
}

#[test]
fn missing_main_file() {
    let p = Prefix::new("nomain");
    let e = p.load(None).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "open() \"{}\" failed (2: No such file or directory)",
            p.main()
        )
    );
    assert_eq!(e.location(), None);
}

#[test]
fn missing_include() {
    let p = Prefix::new("noinc");
    assert_eq!(
        p.error("events {}\n\ninclude x.conf;\n"),
        format!(
            "open() \"{}\" failed (2: No such file or directory) in {}:3",
            p.path("conf/x.conf"),
            p.main()
        )
    );
}

#[test]
fn include_shape_errors() {
    let p = Prefix::new("incshape");
    assert_eq!(
        p.error("events {}\ninclude a.conf b.conf;\n"),
        format!(
            "invalid number of arguments in \"include\" directive in {}:2",
            p.main()
        )
    );
    assert_eq!(
        p.error("events {}\ninclude a.conf {}\n"),
        format!(
            "directive \"include\" is not terminated by \";\" in {}:2",
            p.main()
        )
    );
}

#[test]
fn error_inside_included_file_names_that_file() {
    let p = Prefix::new("incerr");
    p.write("conf/sub/bad.conf", "# comment\n\nbogus on;\n");
    assert_eq!(
        p.error("events {}\ninclude sub/*.conf;\n"),
        format!(
            "unknown directive \"bogus\" in {}:3",
            p.path("conf/sub/bad.conf")
        )
    );
    // A block may not be closed by an included file.
    p.write("conf/sub/bad.conf", "}\n");
    assert_eq!(
        p.error("events {\ninclude sub/bad.conf;\n}\n"),
        format!("unexpected \"}}\" in {}:1", p.path("conf/sub/bad.conf"))
    );
}

#[test]
fn include_loop_is_refused() {
    let p = Prefix::new("incloop");
    p.write("conf/loop.conf", "include loop.conf;\n");
    let e = p.error("events {}\ninclude loop.conf;\n");
    assert!(e.contains("nested too deeply"), "{e}");
    assert!(
        e.ends_with(&format!("in {}:1", p.path("conf/loop.conf"))),
        "{e}"
    );
}

#[test]
fn command_line_errors() {
    let p = Prefix::new("gerr");
    p.write("conf/gyre.conf", "events {}\ndaemon on;\n");
    assert_eq!(
        p.load(Some("daemon off")).unwrap_err().to_string(),
        "unexpected end of parameter, expecting \";\" in command line"
    );
    assert_eq!(
        p.load(Some("bogus 1;")).unwrap_err().to_string(),
        "unknown directive \"bogus\" in command line"
    );
    assert_eq!(
        p.load(Some("events { }")).unwrap_err().to_string(),
        "block directives are not supported in -g option in command line"
    );
    // -g is read first, so the file's repeat is the duplicate.
    assert_eq!(
        p.load(Some("daemon off;")).unwrap_err().to_string(),
        format!("\"daemon\" directive is duplicate in {}:2", p.main())
    );
}

#[test]
fn module_init_error_with_location() {
    let p = Prefix::new("init");
    assert_eq!(
        p.error("events {}\n\necho {\n  idle_timeout 1s;\n}\n"),
        format!("no \"listen\" in \"echo\" block in {}:3", p.main())
    );
}

// ---------------------------------------------------------------------------
// Successful loads.

#[test]
fn defaults() {
    let p = Prefix::new("defaults");
    let cf = p.load_main("events {}\n").unwrap();
    let core = &cf.core;
    assert_eq!(core.worker_processes, 1);
    assert_eq!(core.worker_rlimit_nofile, None);
    assert_eq!(core.pid, p.root.join("logs/gyre.pid"));
    assert_eq!(core.error_log.len(), 1);
    assert_eq!(
        core.error_log[0].target,
        LogTarget::File(p.root.join("logs/error.log"))
    );
    assert_eq!(core.error_log[0].level, LogLevel::Error);
    assert!(core.daemon);
    assert!(core.master_process);
    assert_eq!(core.timer_resolution, 0);
    assert_eq!(core.worker_shutdown_timeout, None);
    assert_eq!(core.worker_cpu_affinity, None);

    let ev = &cf.events;
    assert_eq!(ev.worker_connections, 512);
    assert_eq!(ev.method, EventMethod::Epoll);
    assert!(!ev.multi_accept);
    assert!(!ev.accept_mutex);
    assert_eq!(ev.accept_mutex_delay, 500);
    assert_eq!(ev.epoll_events, 512);

    assert_eq!(cf.conf_file, p.root.join("conf/gyre.conf"));
    assert_eq!(cf.conf_dir, p.root.join("conf"));
    assert!(cf.module::<EchoConf>().unwrap().servers.is_empty());
}

#[test]
fn every_core_directive() {
    let p = Prefix::new("all");
    let cf = p
        .load_main(
            r#"
# main context
worker_processes 4;
worker_rlimit_nofile 65535;
pid /run/gyre.pid;
error_log stderr debug;
error_log logs/warn.log warn;
daemon off;
master_process OFF;
timer_resolution 100ms;
worker_shutdown_timeout 1m30s;
worker_cpu_affinity 0001 0010 0100;

events {
    worker_connections 1024;
    use poll;
    multi_accept on;
    accept_mutex on;
    accept_mutex_delay 1s;
    epoll_events 64;
    coalesce off;
}
"#,
        )
        .unwrap();
    let core = &cf.core;
    assert_eq!(core.worker_processes, 4);
    assert_eq!(core.worker_rlimit_nofile, Some(65535));
    assert_eq!(core.pid, PathBuf::from("/run/gyre.pid"));
    assert_eq!(core.error_log.len(), 2);
    assert_eq!(core.error_log[0].target, LogTarget::Stderr);
    assert_eq!(core.error_log[0].level, LogLevel::Debug);
    assert_eq!(
        core.error_log[1].target,
        LogTarget::File(p.root.join("logs/warn.log"))
    );
    assert_eq!(core.error_log[1].level, LogLevel::Warn);
    assert!(!core.daemon);
    assert!(!core.master_process);
    assert_eq!(core.timer_resolution, 100);
    assert_eq!(core.worker_shutdown_timeout, Some(90_000));
    match &core.worker_cpu_affinity {
        Some(CpuAffinity::Masks(masks)) => {
            let cpus: Vec<Vec<usize>> = masks.iter().map(|m| m.cpus.clone()).collect();
            assert_eq!(cpus, vec![vec![0], vec![1], vec![2]]);
        }
        other => panic!("{other:?}"),
    }
    let ev = &cf.events;
    assert_eq!(ev.worker_connections, 1024);
    assert_eq!(ev.method, EventMethod::Poll);
    assert!(!ev.coalesce);
    assert!(ev.multi_accept && ev.accept_mutex);
    assert_eq!(ev.accept_mutex_delay, 1000);
    assert_eq!(ev.epoll_events, 64);
}

#[test]
fn worker_processes_auto_and_affinity_auto() {
    let p = Prefix::new("auto");
    let cf = p
        .load_main("worker_processes auto;\nworker_cpu_affinity auto 1010;\nevents{}")
        .unwrap();
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(cf.core.worker_processes, cpus);
    match &cf.core.worker_cpu_affinity {
        Some(CpuAffinity::Auto(Some(mask))) => assert_eq!(mask.cpus, vec![1, 3]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn compact_syntax_and_quotes() {
    let p = Prefix::new("compact");
    let cf = p
        .load_main("events{worker_connections 10;use\t\"epoll\";}\"pid\" 'a b.pid';")
        .unwrap();
    assert_eq!(cf.events.worker_connections, 10);
    assert_eq!(cf.core.pid, p.root.join("a b.pid"));
}

#[test]
fn echo_module_plugs_in() {
    let p = Prefix::new("echo");
    let cf = p
        .load_main(
            "events {}\n\
             echo {\n\
             \x20   listen 127.0.0.1:7000 default_server backlog=128 reuseport deferred;\n\
             \x20   listen [::1]:7001;\n\
             \x20   idle_timeout 5s;\n\
             \x20   echo_types { text/plain txt text; application/json json; }\n\
             }\n",
        )
        .unwrap();
    let echo = cf.module::<EchoConf>().unwrap();
    assert_eq!(echo.servers.len(), 1);
    let s = &echo.servers[0];
    assert_eq!(s.idle_timeout, 5000);
    assert_eq!(s.blocks_seen, vec!["echo".to_string()]);
    assert_eq!(
        s.listen[0],
        ListenConf {
            addr: "127.0.0.1:7000".parse().unwrap(),
            default_server: true,
            backlog: 128,
            reuseport: true,
            deferred: true,
            ssl: false,
        }
    );
    assert_eq!(s.listen[1].addr, "[::1]:7001".parse().unwrap());
    assert_eq!(s.listen[1].backlog, 511);
    assert_eq!(
        s.types,
        vec![
            (
                "text/plain".to_string(),
                vec!["txt".to_string(), "text".to_string()]
            ),
            ("application/json".to_string(), vec!["json".to_string()]),
        ]
    );
    assert_eq!(
        s.at,
        Location::File {
            path: p.root.join("conf/gyre.conf").into(),
            line: 2
        }
    );
}

#[test]
fn includes_relative_absolute_nested_and_empty_globs() {
    let p = Prefix::new("includes");
    // Relative includes resolve against the conf dir, even from a nested
    // included file in a subdirectory.
    p.write("conf/conf.d/b.conf", "error_log logs/b.log;\n");
    p.write(
        "conf/conf.d/a.conf",
        "error_log logs/a.log;\ninclude snippets/s?.conf;\n",
    );
    p.write("conf/conf.d/skip.txt", "bogus;\n");
    p.write("conf/conf.d/.hidden.conf", "bogus;\n");
    p.write("conf/snippets/s1.conf", "error_log logs/s1.log;\n");
    p.write("conf/events.d/wc.conf", "worker_connections 77;\n");
    let abs = p.write("abs/x1.conf", "pid abs.pid;\n");
    let abs_glob = abs.parent().unwrap().join("x[0-9].conf");
    let cf = p
        .load_main(&format!(
            "include conf.d/*.conf;\n\
             include nothing/*.conf;\n\
             include {};\n\
             events {{\n  include events.d/*;\n}}\n",
            abs_glob.display()
        ))
        .unwrap();
    let logs: Vec<PathBuf> = cf
        .core
        .error_log
        .iter()
        .map(|l| match &l.target {
            LogTarget::File(f) => f.clone(),
            LogTarget::Stderr => PathBuf::from("stderr"),
        })
        .collect();
    assert_eq!(
        logs,
        vec![
            p.root.join("logs/a.log"),
            p.root.join("logs/s1.log"),
            p.root.join("logs/b.log"),
        ]
    );
    assert_eq!(cf.core.pid, p.root.join("abs.pid"));
    assert_eq!(cf.events.worker_connections, 77);

    // Each directive remembers the file and line it came from.
    let tree = cf.directives();
    assert_eq!(tree[0].name, "error_log");
    assert_eq!(tree[0].file(), p.path("conf/conf.d/a.conf"));
    assert_eq!(tree[0].line(), 1);
    assert_eq!(tree[1].file(), p.path("conf/snippets/s1.conf"));
    let events = tree.iter().find(|d| d.name == "events").unwrap();
    assert_eq!(events.line(), 4);
    assert_eq!(events.file(), p.main());
    let wc = &events.block.as_ref().unwrap()[0];
    assert_eq!(wc.file(), p.path("conf/events.d/wc.conf"));

    // The dump lists every file read, in order.
    let read: Vec<String> = cf.files().map(|(f, _)| f.display().to_string()).collect();
    assert_eq!(
        read,
        vec![
            p.main(),
            p.path("conf/conf.d/a.conf"),
            p.path("conf/snippets/s1.conf"),
            p.path("conf/conf.d/b.conf"),
            abs.display().to_string(),
            p.path("conf/events.d/wc.conf"),
        ]
    );
}

#[test]
fn dump_like_nginx_t() {
    let p = Prefix::new("dump");
    p.write("conf/log.conf", "error_log stderr;\n");
    let main = "events {}\ninclude log.conf;\ninclude log.conf;\n";
    let cf = p.load_main(main).unwrap();
    assert_eq!(
        cf.dump(),
        format!(
            "# configuration file {}:\n{main}\n# configuration file {}:\nerror_log stderr;\n\n",
            p.main(),
            p.path("conf/log.conf")
        )
    );
    assert_eq!(cf.core.error_log.len(), 2);
}

#[test]
fn command_line_directives() {
    let p = Prefix::new("g");
    p.write("conf/gyre.conf", "events {}\n");
    let cf = p
        .load(Some("daemon off; master_process off; worker_processes 3;"))
        .unwrap();
    assert!(!cf.core.daemon && !cf.core.master_process);
    assert_eq!(cf.core.worker_processes, 3);
    assert_eq!(cf.directives()[0].file(), "command line");
    // -g is not part of the dump.
    assert_eq!(cf.files().count(), 1);
}

#[test]
fn built_in_configuration_from_a_string() {
    let p = Prefix::new("builtin");
    p.write("conf/extra.conf", "worker_processes 2;\n");
    let cf = conf::load_str(
        "include extra.conf;\nevents { worker_connections 64; }\n",
        Path::new("conf/gyre.conf"),
        &p.root,
        Some("daemon off;"),
        &[],
    )
    .unwrap();
    assert_eq!(cf.core.worker_processes, 2);
    assert_eq!(cf.events.worker_connections, 64);
    assert!(!cf.core.daemon);
    assert!(cf.module::<EchoConf>().is_none());
    assert!(cf.dump().starts_with(&format!(
        "# configuration file {}:\ninclude extra.conf;\n",
        p.main()
    )));

    // Errors in it name it like a file.
    let e = conf::load_str(
        "events {}\nnope;\n",
        Path::new("conf/gyre.conf"),
        &p.root,
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("unknown directive \"nope\" in {}:2", p.main())
    );
}
