//! nginx-syntax configuration: reading files, checking directives against
//! module tables, and the core's own typed configuration.
//!
//! This module owns everything between "a path on disk" and "typed structs
//! with defaults applied": the lexer ([`lexer`]), the parser with `include`
//! expansion ([`parser`]), the directive-table types ([`directive`]), value
//! syntaxes ([`value`]), the core's `main`/`events` tables ([`core_conf`]),
//! and the walker here that ties them together. Error texts are nginx's, and
//! `Display` of a [`ConfError`] is exactly what follows `gyre: [emerg] `.
//!
//! # Design: parse to a tree, then walk it with the module tables
//!
//! 1. The parser reads the main file (after the `-g` string, which nginx
//!    reads first) into a tree of [`Directive`]s, expanding `include`
//!    anywhere it appears. Each directive keeps its file and line.
//! 2. The walker visits the tree in order. For each directive it finds the
//!    first module with a directive of that name allowed in the current
//!    context, checks block vs `;`, argument count and repeats, then calls
//!    the module's setter with the module's own typed configuration. Block
//!    bodies are walked in the context the directive's table entry names.
//! 3. Each module's `init_conf` applies defaults that depend on the whole
//!    file (or on the prefix) and makes cross-directive checks.
//!
//! Keeping a tree lets a block be handed to its setter whole when its body is
//! data rather than directives ([`Block::Raw`], nginx's `types { }`).
//! The cost is ordering: a syntax error (or a missing include) anywhere is
//! reported before a semantic error earlier in the file, where nginx reports
//! whichever comes first. Each message and location is still nginx's.
//!
//! The core knows no protocol. A protocol crate declares its tables and its
//! conf type as a [`ModuleDef`] and passes it to [`load`]; a block directive
//! whose module is not passed is simply an `unknown directive`.
//!
//! # Registering a protocol module
//!
//! ```
//! use gyre_core::conf::{
//!     self, Args, Block, ConfCtx, Context, Directive, DirectiveSpec, ListenConf, ModuleDef,
//! };
//!
//! #[derive(Default)]
//! struct HttpConf {
//!     servers: Vec<ServerConf>,
//! }
//! #[derive(Default)]
//! struct ServerConf {
//!     listen: Vec<ListenConf>,
//!     locations: Vec<(String, Option<String>)>, // (uri, root)
//! }
//!
//! fn set_http(_: &mut HttpConf, _: &Directive, _: &ConfCtx) -> Result<(), String> {
//!     Ok(())
//! }
//! // A block setter runs before its body: it opens the entry the body's
//! // directives then fill in (the last one pushed).
//! fn set_server(c: &mut HttpConf, _: &Directive, _: &ConfCtx) -> Result<(), String> {
//!     c.servers.push(ServerConf::default());
//!     Ok(())
//! }
//! fn set_listen(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
//!     let listen = d.listen(80)?;
//!     c.servers.last_mut().ok_or("no server")?.listen.push(listen);
//!     Ok(())
//! }
//! fn set_location(c: &mut HttpConf, d: &Directive, _: &ConfCtx) -> Result<(), String> {
//!     let server = c.servers.last_mut().ok_or("no server")?;
//!     server.locations.push((d.arg(0).to_string(), None));
//!     Ok(())
//! }
//! fn set_root(c: &mut HttpConf, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
//!     let server = c.servers.last_mut().ok_or("no server")?;
//!     let location = server.locations.last_mut().ok_or("no location")?;
//!     location.1 = Some(cx.full_path(d.arg(0)).display().to_string());
//!     Ok(())
//! }
//!
//! static HTTP_DIRECTIVES: &[DirectiveSpec<HttpConf>] = &[
//!     DirectiveSpec::block("http", Context::MAIN, Args::NOARGS,
//!                          Block::Context(Context::HTTP), false, set_http),
//!     DirectiveSpec::block("server", Context::HTTP, Args::NOARGS,
//!                          Block::Context(Context::SERVER), true, set_server),
//!     DirectiveSpec::multi("listen", Context::SERVER, Args::ONE_MORE, set_listen),
//!     DirectiveSpec::block("location", Context::SERVER, Args::TAKE1,
//!                          Block::Context(Context::LOCATION), true, set_location),
//!     DirectiveSpec::new("root", Context::LOCATION, Args::TAKE1, set_root),
//! ];
//!
//! static HTTP_MODULE: ModuleDef<HttpConf> = ModuleDef {
//!     name: "http",
//!     directives: HTTP_DIRECTIVES,
//!     create_conf: HttpConf::default,
//!     init_conf: conf::no_init,
//! };
//!
//! let text = "events {}\n\
//!             http { server { listen 127.0.0.1:8080; location / { root html; } } }\n";
//! let cf = conf::load_str(text, "conf/gyre.conf".as_ref(), "/srv/gyre".as_ref(),
//!                         None, &[&HTTP_MODULE]).unwrap();
//! let http = cf.module::<HttpConf>().unwrap();
//! assert_eq!(http.servers[0].listen[0].addr.port(), 8080);
//! assert_eq!(http.servers[0].locations[0].1.as_deref(), Some("/srv/gyre/html"));
//! ```

pub mod core_conf;
pub mod directive;
mod lexer;
mod parser;
pub mod value;

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};

pub use core_conf::{
    parse_error_log, CoreConf, CpuAffinity, CpuMask, ErrorLog, EventMethod, EventsConf, LogLevel,
    LogTarget, WorkerUser, CORE_MODULE, EVENTS_MODULE,
};
pub use directive::{
    no_init, Args, Block, ConfCtx, Context, Directive, DirectiveSpec, Location, Module, ModuleDef,
    Setter, SpecShape,
};
pub use value::{
    parse_flag, parse_listen, parse_number, parse_offset, parse_size, parse_time_ms,
    parse_time_sec, ListenConf, DEFAULT_BACKLOG,
};

/// A configuration error: nginx's message and, when it has one, the place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfError {
    pub(crate) message: String,
    pub(crate) location: Option<Location>,
}

impl ConfError {
    /// An error with no location (`no "events" section in configuration`).
    pub fn new(message: impl Into<String>) -> Self {
        ConfError {
            message: message.into(),
            location: None,
        }
    }

    /// An error at a place in the configuration.
    pub fn at(message: impl Into<String>, location: Location) -> Self {
        ConfError {
            message: message.into(),
            location: Some(location),
        }
    }

    /// The message without its location.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn location(&self) -> Option<&Location> {
        self.location.as_ref()
    }
}

impl fmt::Display for ConfError {
    /// `MESSAGE in FILE:LINE`, `MESSAGE in command line` or `MESSAGE`: the
    /// text nginx logs after `[emerg] `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(location) => write!(f, "{} {}", self.message, location),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfError {}

/// A loaded configuration: the core's typed sections, each registered
/// module's configuration, and what was read.
pub struct Conf {
    /// The `-p` prefix relative paths resolve against.
    pub prefix: PathBuf,
    /// The main configuration file, resolved against the prefix.
    pub conf_file: PathBuf,
    /// Its directory, against which `include` resolves.
    pub conf_dir: PathBuf,
    pub core: CoreConf,
    pub events: EventsConf,
    modules: Vec<(&'static str, Box<dyn Any>)>,
    files: Vec<(PathBuf, String)>,
    tree: Vec<Directive>,
}

impl fmt::Debug for Conf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.modules.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Conf")
            .field("prefix", &self.prefix)
            .field("conf_file", &self.conf_file)
            .field("core", &self.core)
            .field("events", &self.events)
            .field("modules", &names)
            .finish_non_exhaustive()
    }
}

impl Conf {
    /// The configuration of the registered module whose conf type is `C`.
    pub fn module<C: Any>(&self) -> Option<&C> {
        self.modules
            .iter()
            .find_map(|(_, conf)| conf.downcast_ref::<C>())
    }

    /// Mutable access to a module's configuration (to move parts out).
    pub fn module_mut<C: Any>(&mut self) -> Option<&mut C> {
        self.modules
            .iter_mut()
            .find_map(|(_, conf)| conf.downcast_mut::<C>())
    }

    /// Every configuration file read, in order, each once, with its text.
    pub fn files(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.files.iter().map(|(p, t)| (p.as_path(), t.as_str()))
    }

    /// The directive tree (includes expanded; `-g` directives first).
    pub fn directives(&self) -> &[Directive] {
        &self.tree
    }

    /// The `-T` dump: each file read, preceded by
    /// `# configuration file PATH:`, followed by an empty line, like
    /// `nginx -T`.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for (path, text) in &self.files {
            out.push_str("# configuration file ");
            out.push_str(&path.display().to_string());
            out.push_str(":\n");
            out.push_str(text);
            out.push('\n');
        }
        out
    }
}

/// Loads a configuration file.
///
/// `conf_file` is resolved against `prefix` when relative; relative `include`s
/// resolve against its directory; `params` is the `-g` string, read before the
/// file as extra main-context directives. `modules` are the protocol modules
/// to register after the core's own (main and events).
pub fn load(
    prefix: &Path,
    conf_file: &Path,
    params: Option<&str>,
    modules: &[&dyn Module],
) -> Result<Conf, ConfError> {
    let conf_file = prefix.join(conf_file);
    build(prefix, conf_file, params, modules, |parser, path| {
        parser.parse_file(path, None)
    })
}

/// Loads a configuration from text, as if read from the file `name` (used in
/// messages and the dump, and whose directory relative `include`s resolve
/// against): how a configuration built into the binary is read.
pub fn load_str(
    text: &str,
    name: &Path,
    prefix: &Path,
    params: Option<&str>,
    modules: &[&dyn Module],
) -> Result<Conf, ConfError> {
    let conf_file = prefix.join(name);
    build(prefix, conf_file, params, modules, |parser, path| {
        parser.parse_text(path, text.as_bytes())
    })
}

fn build(
    prefix: &Path,
    conf_file: PathBuf,
    params: Option<&str>,
    modules: &[&dyn Module],
    read_main: impl FnOnce(&mut parser::Parser, &Path) -> Result<Vec<Directive>, ConfError>,
) -> Result<Conf, ConfError> {
    let conf_dir = conf_file
        .parent()
        .map_or_else(PathBuf::new, Path::to_path_buf);

    let mut parser = parser::Parser::new(conf_dir.clone());
    let mut tree = match params {
        Some(text) => parser.parse_param(text)?,
        None => Vec::new(),
    };
    tree.extend(read_main(&mut parser, &conf_file)?);
    let files = parser.into_files();

    let mut all: Vec<&dyn Module> = vec![&CORE_MODULE, &EVENTS_MODULE];
    all.extend_from_slice(modules);
    let mut walker = Walker {
        confs: all.iter().map(|m| m.create_conf()).collect(),
        modules: all,
        cx: ConfCtx {
            prefix: prefix.to_path_buf(),
            conf_file: conf_file.clone(),
            conf_dir: conf_dir.clone(),
            blocks: Vec::new(),
        },
    };
    walker.walk(&tree, Context::MAIN)?;

    let Walker {
        modules: all,
        mut confs,
        cx,
    } = walker;
    for (module, conf) in all.iter().zip(confs.iter_mut()) {
        module.init_conf(conf.as_mut(), &cx)?;
    }

    let rest = confs.split_off(2);
    let mut core_confs = confs.into_iter();
    let internal = || ConfError::new("internal error: core configuration missing");
    let core = core_confs
        .next()
        .and_then(|c| c.downcast::<CoreConf>().ok())
        .ok_or_else(internal)?;
    let events = core_confs
        .next()
        .and_then(|c| c.downcast::<EventsConf>().ok())
        .ok_or_else(internal)?;
    let modules = modules.iter().map(|m| m.name()).zip(rest).collect();

    Ok(Conf {
        prefix: prefix.to_path_buf(),
        conf_file,
        conf_dir,
        core: *core,
        events: *events,
        modules,
        files,
        tree,
    })
}

/// Applies a directive tree to module configurations (nginx's
/// `ngx_conf_handler`, run over the tree instead of during the scan).
struct Walker<'m> {
    modules: Vec<&'m dyn Module>,
    /// `confs[i]` belongs to `modules[i]`.
    confs: Vec<Box<dyn Any>>,
    cx: ConfCtx,
}

impl Walker<'_> {
    fn walk(&mut self, list: &[Directive], ctx: Context) -> Result<(), ConfError> {
        // Directives already applied in this block, for the repeat check.
        let mut seen: Vec<(usize, usize)> = Vec::new();
        for d in list {
            let (m, i, shape) = self.find(d, ctx)?;

            match (shape.block, &d.block) {
                (Block::None, Some(_)) => {
                    return Err(d.conf_error(format!(
                        "directive \"{}\" is not terminated by \";\"",
                        d.name
                    )))
                }
                (Block::Context(_) | Block::Raw, None) => {
                    return Err(
                        d.conf_error(format!("directive \"{}\" has no opening \"{{\"", d.name))
                    )
                }
                _ => {}
            }
            if !shape.args.accepts(d.args.len()) {
                return Err(d.conf_error(format!(
                    "invalid number of arguments in \"{}\" directive",
                    d.name
                )));
            }
            if !shape.multi {
                if seen.contains(&(m, i)) {
                    return Err(d.conf_error(d.error("is duplicate")));
                }
                seen.push((m, i));
            }

            let module = self.modules[m];
            module
                .set(i, self.confs[m].as_mut(), d, &self.cx)
                .map_err(|message| d.conf_error(message))?;

            if let (Block::Context(inner), Some(body)) = (shape.block, &d.block) {
                self.cx.blocks.push(d.name.clone());
                let walked = self.walk(body, inner);
                self.cx.blocks.pop();
                walked?;
            }
        }
        Ok(())
    }

    /// Finds the table entry for `d`: the first module declaring that name
    /// for this context. A name declared only for other contexts is "not
    /// allowed here"; a name nobody declares is "unknown".
    fn find(&self, d: &Directive, ctx: Context) -> Result<(usize, usize, SpecShape), ConfError> {
        let mut known = false;
        for (m, module) in self.modules.iter().enumerate() {
            let mut i = 0;
            while let Some(shape) = module.spec(i) {
                if shape.name == d.name {
                    known = true;
                    if shape.contexts.intersects(ctx) {
                        return Ok((m, i, shape));
                    }
                }
                i += 1;
            }
        }
        Err(d.conf_error(if known {
            format!("\"{}\" directive is not allowed here", d.name)
        } else {
            format!("unknown directive \"{}\"", d.name)
        }))
    }
}
