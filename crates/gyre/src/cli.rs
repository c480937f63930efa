//! The command line, in nginx's words:
//! `gyre [-?hvVtTq] [-s signal] [-p prefix] [-e filename] [-c filename] [-g directives]`.
//!
//! Flags combine as nginx's do (`-tq`), and an option's value may follow it
//! directly (`-cconf/x.conf`) or as the next argument.

use std::fmt;

/// What the command line asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cli {
    /// `-?` / `-h`.
    pub help: bool,
    /// `-v`.
    pub version: bool,
    /// `-V`: version and build information.
    pub build_info: bool,
    /// `-t`: test the configuration and exit.
    pub test: bool,
    /// `-T`: test and dump the configuration.
    pub dump: bool,
    /// `-q`: suppress non-error messages while testing.
    pub quiet: bool,
    /// `-s stop|quit|reopen|reload`.
    pub signal: Option<String>,
    /// `-p prefix`.
    pub prefix: Option<String>,
    /// `-e filename`: the error log before the configuration is read.
    pub error_log: Option<String>,
    /// `-c filename`.
    pub conf: Option<String>,
    /// `-g directives`.
    pub directives: Option<String>,
}

/// A command-line error, printed as nginx prints it.
#[derive(Debug, PartialEq, Eq)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub const USAGE: &str = "Usage: gyre [-?hvVtTq] [-s signal] [-p prefix]
             [-e filename] [-c filename] [-g directives]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and configure options then exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to a master process: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: current directory)
  -e filename   : set error log file (default: logs/error.log)
  -c filename   : set configuration file (default: conf/gyre.conf)
  -g directives : set global directives out of configuration file
";

/// Parses the arguments after the program name.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Cli, CliError> {
    let mut cli = Cli::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let Some(flags) = arg.strip_prefix('-') else {
            return Err(CliError(format!("invalid option: \"{arg}\"")));
        };
        if flags.is_empty() {
            return Err(CliError(format!("invalid option: \"{arg}\"")));
        }
        for (i, ch) in flags.char_indices() {
            match ch {
                '?' | 'h' => cli.help = true,
                'v' => cli.version = true,
                'V' => {
                    cli.version = true;
                    cli.build_info = true;
                }
                't' => cli.test = true,
                'T' => {
                    cli.test = true;
                    cli.dump = true;
                }
                'q' => cli.quiet = true,
                's' | 'p' | 'e' | 'c' | 'g' => {
                    let rest = &flags[i + ch.len_utf8()..];
                    let value = if !rest.is_empty() {
                        rest.to_string()
                    } else {
                        match it.next() {
                            Some(v) => v,
                            None => {
                                return Err(CliError(format!(
                                    "option \"-{ch}\" requires {}",
                                    match ch {
                                        's' => "parameter",
                                        'p' => "directory name",
                                        'e' | 'c' => "file name",
                                        _ => "parameter",
                                    }
                                )))
                            }
                        }
                    };
                    match ch {
                        's' => {
                            if !matches!(value.as_str(), "stop" | "quit" | "reopen" | "reload") {
                                return Err(CliError(format!("invalid option: \"-s {value}\"")));
                            }
                            cli.signal = Some(value);
                        }
                        'p' => cli.prefix = Some(value),
                        'e' => cli.error_log = Some(value),
                        'c' => cli.conf = Some(value),
                        _ => cli.directives = Some(value),
                    }
                    break;
                }
                _ => return Err(CliError(format!("invalid option: \"{ch}\""))),
            }
        }
    }
    Ok(cli)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Cli, CliError> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn combined_flags_and_values() {
        let c = p(&[
            "-tq",
            "-p",
            "/srv/gyre",
            "-cconf/a.conf",
            "-g",
            "daemon off;",
        ])
        .unwrap();
        assert!(c.test && c.quiet && !c.dump);
        assert_eq!(c.prefix.as_deref(), Some("/srv/gyre"));
        assert_eq!(c.conf.as_deref(), Some("conf/a.conf"));
        assert_eq!(c.directives.as_deref(), Some("daemon off;"));
        let c = p(&["-T", "-s", "reload"]).unwrap();
        assert!(c.test && c.dump);
        assert_eq!(c.signal.as_deref(), Some("reload"));
        assert!(p(&["-V"]).unwrap().build_info);
        assert!(p(&["-?"]).unwrap().help);
    }

    #[test]
    fn errors_in_nginx_words() {
        assert_eq!(p(&["-x"]), Err(CliError("invalid option: \"x\"".into())));
        assert_eq!(p(&["foo"]), Err(CliError("invalid option: \"foo\"".into())));
        assert_eq!(
            p(&["-c"]),
            Err(CliError("option \"-c\" requires file name".into()))
        );
        assert_eq!(
            p(&["-s", "restart"]),
            Err(CliError("invalid option: \"-s restart\"".into()))
        );
    }
}
