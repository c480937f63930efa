//! The gyre server: nginx's command line and process model on gyre-core,
//! with the protocol modules registered.
#![forbid(unsafe_code)]

mod app;
mod cli;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use gyre_core::conf::{self, Conf, ConfError, Module};
use gyre_core::process::master;
use gyre_core::sys::signal::Signal;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The configuration used when no `-c` is given and `conf/gyre.conf` does not
/// exist under the prefix, so `cargo run --release` works from a fresh clone.
pub const DEFAULT_CONF: &str = include_str!("default.conf");

const DEFAULT_CONF_FILE: &str = "conf/gyre.conf";

fn emerg(msg: impl std::fmt::Display) {
    eprintln!("gyre: [emerg] {msg}");
}

fn main() -> ExitCode {
    let cli = match cli::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gyre: {e}");
            eprint!("{}", cli::USAGE);
            return ExitCode::from(1);
        }
    };
    if cli.version {
        eprintln!("gyre version: gyre/{VERSION}");
        if cli.build_info {
            // nginx's -V lines, gyre's facts.
            eprintln!("built by {}", env!("GYRE_RUSTC_VERSION"));
            eprintln!("built with rustls 0.23 (aws-lc-rs), PCRE2, zlib-rs");
            eprintln!("TLS SNI support enabled");
            eprintln!(
                "configure arguments: {}",
                gyre_http::build_info::configure_arguments()
            );
        }
    }
    if cli.help {
        eprint!("{}", cli::USAGE);
    }
    if cli.version || cli.help {
        return ExitCode::SUCCESS;
    }
    gyre_core::errlog::init(log::LevelFilter::Info);
    if let Some(e) = cli.error_log.as_deref() {
        let r = if e == "stderr" {
            gyre_core::errlog::open(None)
        } else {
            gyre_core::errlog::open(Some(Path::new(e)))
        };
        if let Err(err) = r {
            emerg(format!(
                "open() \"{e}\" failed ({})",
                gyre_core::sys_error_text(&err)
            ));
            return ExitCode::from(1);
        }
    }
    let prefix = match &cli.prefix {
        Some(p) => PathBuf::from(p),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    };
    let source = ConfSource::pick(&prefix, cli.conf.as_deref());

    let modules = app::modules();
    let load = || source.load(&prefix, cli.directives.as_deref(), &modules);

    let conf = match load() {
        Ok(c) => c,
        Err(e) => {
            emerg(&e);
            if cli.test {
                eprintln!(
                    "gyre: configuration file {} test failed",
                    source.path(&prefix).display()
                );
            }
            return ExitCode::from(1);
        }
    };

    if cli.test {
        if !cli.quiet {
            let p = source.path(&prefix);
            eprintln!("gyre: the configuration file {} syntax is ok", p.display());
            eprintln!(
                "gyre: configuration file {} test is successful",
                p.display()
            );
        }
        if cli.dump {
            print!("{}", conf.dump());
        }
        return ExitCode::SUCCESS;
    }

    if let Some(s) = cli.signal.as_deref() {
        let Some(sig) = Signal::from_command(s) else {
            emerg(format!("invalid option: \"-s {s}\""));
            return ExitCode::from(1);
        };
        return match master::signal_master(&conf.core.pid, sig) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gyre: [error] {e}");
                ExitCode::from(1)
            }
        };
    }

    match run(conf, &source, &load) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!(target: gyre_core::errlog::EMERG, "{e}");
            emerg(&e);
            ExitCode::from(1)
        }
    }
}

fn run(
    conf: Conf,
    source: &ConfSource,
    load: &dyn Fn() -> Result<Conf, ConfError>,
) -> std::io::Result<()> {
    if matches!(source, ConfSource::BuiltIn) {
        // A fresh clone has no logs/ directory; nginx's installer makes one.
        if let Some(dir) = conf.core.pid.parent() {
            std::fs::create_dir_all(dir)?;
        }
    }
    gyre_core::errlog::configure(&conf.core.error_log)?;
    let to_stderr = conf
        .core
        .error_log
        .first()
        .is_some_and(|l| l.target == conf::LogTarget::Stderr);
    if conf.core.daemon {
        master::daemonize(to_stderr)?;
    }
    let app = app::GyreApp;
    if conf.core.master_process {
        master::run(conf, &app, load)
    } else {
        master::run_single(conf, &app)
    }
}

/// Where the configuration comes from.
enum ConfSource {
    File(PathBuf),
    BuiltIn,
}

impl ConfSource {
    fn pick(prefix: &Path, conf: Option<&str>) -> ConfSource {
        match conf {
            Some(c) => ConfSource::File(PathBuf::from(c)),
            None if prefix.join(DEFAULT_CONF_FILE).exists() => {
                ConfSource::File(PathBuf::from(DEFAULT_CONF_FILE))
            }
            None => ConfSource::BuiltIn,
        }
    }

    fn path(&self, prefix: &Path) -> PathBuf {
        match self {
            ConfSource::File(p) => prefix.join(p),
            ConfSource::BuiltIn => prefix.join("(built-in default)"),
        }
    }

    fn load(
        &self,
        prefix: &Path,
        params: Option<&str>,
        modules: &[&dyn Module],
    ) -> Result<Conf, ConfError> {
        match self {
            ConfSource::File(p) => conf::load(prefix, p, params, modules),
            ConfSource::BuiltIn => conf::load_str(
                DEFAULT_CONF,
                Path::new(DEFAULT_CONF_FILE),
                prefix,
                params,
                modules,
            ),
        }
    }
}
