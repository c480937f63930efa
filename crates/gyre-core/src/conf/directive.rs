//! Directive tables and the parsed directive tree: what a module declares
//! (contexts, argument rules, blocks, setters) and what the parser hands it.
//!
//! A module's table is plain `const` data ([`DirectiveSpec`]) typed by the
//! module's own configuration struct; [`ModuleDef`] erases that type behind
//! the object-safe [`Module`] trait so the generic walker in
//! [`conf`](super) can hold modules it knows nothing about.

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::value::{self, ListenConf};
use super::ConfError;

/// Where directives may appear, as a bit set (nginx's `NGX_MAIN_CONF`,
/// `NGX_EVENT_CONF`, `NGX_HTTP_SRV_CONF`...).
///
/// Bits 0..=5 are assigned below; bits 16..=31 are free for protocol modules
/// to name their own block contexts with [`Context::custom`] (nginx's
/// `upstream`, `if`, `types` would be such contexts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Context(pub u32);

impl Context {
    /// The top level of the configuration.
    pub const MAIN: Context = Context(1 << 0);
    /// Inside `events { }`.
    pub const EVENTS: Context = Context(1 << 1);
    /// Inside `http { }`.
    pub const HTTP: Context = Context(1 << 2);
    /// Inside `http { server { } }`.
    pub const SERVER: Context = Context(1 << 3);
    /// Inside `location { }`.
    pub const LOCATION: Context = Context(1 << 4);
    /// Inside the Redis-protocol module's block.
    pub const KV: Context = Context(1 << 5);
    /// Every context (nginx's `NGX_ANY_CONF`).
    pub const ANY: Context = Context(u32::MAX);

    /// A module-defined context; `n` in 0..=15 maps to bits 16..=31.
    pub const fn custom(n: u32) -> Context {
        Context(1 << (16 + (n & 15)))
    }

    /// The union of two sets, usable in `const` tables.
    pub const fn or(self, other: Context) -> Context {
        Context(self.0 | other.0)
    }

    /// True when the sets share a context.
    pub const fn intersects(self, other: Context) -> bool {
        self.0 & other.0 != 0
    }
}

/// How many arguments a directive takes, not counting its name (nginx's
/// `NGX_CONF_NOARGS`, `TAKE1`..`TAKE7`, `TAKE12`..., `1MORE`, `2MORE`,
/// `FLAG`, `ANY`).
///
/// The fixed counts are a bit set, so `TAKE1.or(Args::TAKE3)` accepts one or
/// three arguments, as nginx's `NGX_CONF_TAKE13` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Args(u32);

impl Args {
    pub const NOARGS: Args = Args(1 << 0);
    pub const TAKE1: Args = Args(1 << 1);
    pub const TAKE2: Args = Args(1 << 2);
    pub const TAKE3: Args = Args(1 << 3);
    pub const TAKE4: Args = Args(1 << 4);
    pub const TAKE5: Args = Args(1 << 5);
    pub const TAKE6: Args = Args(1 << 6);
    pub const TAKE7: Args = Args(1 << 7);
    pub const TAKE12: Args = Args(Self::TAKE1.0 | Self::TAKE2.0);
    pub const TAKE13: Args = Args(Self::TAKE1.0 | Self::TAKE3.0);
    pub const TAKE23: Args = Args(Self::TAKE2.0 | Self::TAKE3.0);
    pub const TAKE123: Args = Args(Self::TAKE12.0 | Self::TAKE3.0);
    pub const TAKE1234: Args = Args(Self::TAKE123.0 | Self::TAKE4.0);
    /// Exactly one argument, `on` or `off` (checked by [`Directive::flag`]).
    pub const FLAG: Args = Args(1 << 8);
    /// One or more.
    pub const ONE_MORE: Args = Args(1 << 9);
    /// Two or more.
    pub const TWO_MORE: Args = Args(1 << 10);
    /// Any number, including none.
    pub const ANY: Args = Args(1 << 11);

    /// The union of two fixed counts.
    pub const fn or(self, other: Args) -> Args {
        Args(self.0 | other.0)
    }

    /// True when a directive with `n` arguments satisfies the rule; more than
    /// seven fixed arguments are never accepted, as in nginx.
    pub fn accepts(self, n: usize) -> bool {
        if self.0 & Self::ANY.0 != 0 {
            true
        } else if self.0 & Self::FLAG.0 != 0 {
            n == 1
        } else if self.0 & Self::ONE_MORE.0 != 0 {
            n >= 1
        } else if self.0 & Self::TWO_MORE.0 != 0 {
            n >= 2
        } else {
            n <= 7 && self.0 & (1 << n) != 0
        }
    }
}

/// Whether a directive opens a block, and how its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// A simple directive, ended by `;`.
    None,
    /// A block whose body is directives checked against the tables in the
    /// given context (`events`, `http`, `server`, `location`).
    Context(Context),
    /// A block whose body is data the setter interprets itself from
    /// [`Directive::block`] (nginx's `types { text/html html; }`, `map`); the
    /// walker does not look inside.
    Raw,
}

/// The setter of a directive: applies it to the module's configuration.
///
/// It returns nginx's message without the location (the walker appends
/// ` in FILE:LINE`), typically built by the [`Directive`] helpers.
pub type Setter<C> = fn(&mut C, &Directive, &ConfCtx) -> Result<(), String>;

/// One entry of a module's directive table (nginx's `ngx_command_t`).
pub struct DirectiveSpec<C> {
    pub name: &'static str,
    /// Contexts the directive may appear in.
    pub contexts: Context,
    pub args: Args,
    pub block: Block,
    /// May appear more than once in the same block (`listen`, `error_log`).
    /// Otherwise a repeat is `"NAME" directive is duplicate`, the check
    /// nginx's slots make against their "unset" markers.
    pub multi: bool,
    pub set: Setter<C>,
}

impl<C> DirectiveSpec<C> {
    /// A simple directive that may appear once per block.
    pub const fn new(name: &'static str, contexts: Context, args: Args, set: Setter<C>) -> Self {
        DirectiveSpec {
            name,
            contexts,
            args,
            block: Block::None,
            multi: false,
            set,
        }
    }

    /// A simple directive that may repeat.
    pub const fn multi(name: &'static str, contexts: Context, args: Args, set: Setter<C>) -> Self {
        DirectiveSpec {
            name,
            contexts,
            args,
            block: Block::None,
            multi: true,
            set,
        }
    }

    /// A block directive whose body is in context `inner`; `multi` says
    /// whether the block may repeat (`server` does, `events` does not).
    pub const fn block(
        name: &'static str,
        contexts: Context,
        args: Args,
        inner: Block,
        multi: bool,
        set: Setter<C>,
    ) -> Self {
        DirectiveSpec {
            name,
            contexts,
            args,
            block: inner,
            multi,
            set,
        }
    }

    fn shape(&self) -> SpecShape {
        SpecShape {
            name: self.name,
            contexts: self.contexts,
            args: self.args,
            block: self.block,
            multi: self.multi,
        }
    }
}

impl<C> fmt::Debug for DirectiveSpec<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shape().fmt(f)
    }
}

/// A [`DirectiveSpec`] without its typed setter: what the walker needs to
/// check a directive before calling the module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecShape {
    pub name: &'static str,
    pub contexts: Context,
    pub args: Args,
    pub block: Block,
    pub multi: bool,
}

/// Where a directive was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The `-g` command-line string, which nginx reports without a line.
    CommandLine,
    /// A file and the line of the directive's `;` or `{` (the line nginx
    /// reports, since it handles a directive once its terminator is read).
    File { path: Arc<Path>, line: usize },
}

impl fmt::Display for Location {
    /// Formats the location the way nginx's messages end: `in FILE:LINE` or
    /// `in command line`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::CommandLine => f.write_str("in command line"),
            Location::File { path, line } => write!(f, "in {}:{}", path.display(), line),
        }
    }
}

/// One parsed directive: name, arguments, optional block body, origin.
/// Includes are already expanded, so a body may mix directives from several
/// files, each keeping its own [`Location`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    /// Arguments after the name, unquoted and unescaped.
    pub args: Vec<String>,
    /// The body of a `{ }` block.
    pub block: Option<Vec<Directive>>,
    pub location: Location,
}

impl Directive {
    /// The file the directive came from (`command line` for `-g`).
    pub fn file(&self) -> String {
        match &self.location {
            Location::CommandLine => "command line".to_string(),
            Location::File { path, .. } => path.display().to_string(),
        }
    }

    /// The line of the directive's terminator (0 for `-g`).
    pub fn line(&self) -> usize {
        match self.location {
            Location::CommandLine => 0,
            Location::File { line, .. } => line,
        }
    }

    /// Argument `i` (0-based, after the name), or `""` if absent; the
    /// argument count was checked against the table before the setter runs.
    pub fn arg(&self, i: usize) -> &str {
        self.args.get(i).map_or("", String::as_str)
    }

    /// nginx's setter-result form: `"NAME" directive REASON`.
    pub fn error(&self, reason: &str) -> String {
        format!("\"{}\" directive {}", self.name, reason)
    }

    /// Builds a [`ConfError`] at this directive, for checks made after the
    /// walk (in a module's `init_conf`).
    pub fn conf_error(&self, message: impl Into<String>) -> ConfError {
        ConfError::at(message, self.location.clone())
    }

    /// The first argument as a flag, with nginx's flag-slot message.
    pub fn flag(&self) -> Result<bool, String> {
        value::parse_flag(self.arg(0)).ok_or_else(|| {
            format!(
                "invalid value \"{}\" in \"{}\" directive, it must be \"on\" or \"off\"",
                self.arg(0),
                self.name
            )
        })
    }

    /// Argument `i` as a number (nginx's num slot: `invalid number`).
    pub fn number(&self, i: usize) -> Result<u64, String> {
        value::parse_number(self.arg(i)).ok_or_else(|| self.error("invalid number"))
    }

    /// Argument `i` as a size in bytes (nginx's size slot: `invalid value`).
    pub fn size(&self, i: usize) -> Result<usize, String> {
        value::parse_size(self.arg(i)).ok_or_else(|| self.error("invalid value"))
    }

    /// Argument `i` as an offset (nginx's off slot: `invalid value`).
    pub fn offset(&self, i: usize) -> Result<u64, String> {
        value::parse_offset(self.arg(i)).ok_or_else(|| self.error("invalid value"))
    }

    /// Argument `i` as milliseconds (nginx's msec slot: `invalid value`).
    pub fn msec(&self, i: usize) -> Result<u64, String> {
        value::parse_time_ms(self.arg(i)).ok_or_else(|| self.error("invalid value"))
    }

    /// Argument `i` as seconds (nginx's sec slot: `invalid value`).
    pub fn sec(&self, i: usize) -> Result<u64, String> {
        value::parse_time_sec(self.arg(i)).ok_or_else(|| self.error("invalid value"))
    }

    /// All arguments as a `listen` directive (see [`value::parse_listen`]).
    pub fn listen(&self, default_port: u16) -> Result<ListenConf, String> {
        value::parse_listen(&self.args, default_port)
    }
}

/// What a setter may know besides its directive: the paths relative names
/// resolve against, and the chain of enclosing blocks.
#[derive(Debug, Clone)]
pub struct ConfCtx {
    pub(crate) prefix: PathBuf,
    pub(crate) conf_file: PathBuf,
    pub(crate) conf_dir: PathBuf,
    pub(crate) blocks: Vec<String>,
}

impl ConfCtx {
    /// The `-p` prefix.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The main configuration file.
    pub fn conf_file(&self) -> &Path {
        &self.conf_file
    }

    /// The directory of the main configuration file (nginx's conf prefix),
    /// against which `include` resolves.
    pub fn conf_dir(&self) -> &Path {
        &self.conf_dir
    }

    /// Names of the enclosing blocks, outermost first (`["http", "server"]`
    /// for a `listen`). A module with nested blocks uses it to find the
    /// innermost entry it created (e.g. how many `location`s deep it is).
    pub fn blocks(&self) -> &[String] {
        &self.blocks
    }

    /// Resolves a path from the configuration against the prefix, as nginx
    /// does for `pid`, `error_log`, `root`: absolute paths are kept.
    pub fn full_path(&self, name: &str) -> PathBuf {
        self.prefix.join(name)
    }
}

/// A module as the walker sees it: its directive shapes and a type-erased
/// configuration. Implemented by [`ModuleDef`]; a module only implements it
/// by hand if it needs something `ModuleDef` cannot express.
pub trait Module {
    /// Module name, for diagnostics.
    fn name(&self) -> &'static str;
    /// Shape of directive `i`, `None` past the end of the table.
    fn spec(&self, i: usize) -> Option<SpecShape>;
    /// A fresh configuration with defaults (nginx's `create_conf`).
    fn create_conf(&self) -> Box<dyn Any>;
    /// Runs the setter of directive `i` on `conf`, which the walker always
    /// created with this module's `create_conf`.
    fn set(&self, i: usize, conf: &mut dyn Any, d: &Directive, cx: &ConfCtx) -> Result<(), String>;
    /// Final checks and derived values once every file is read (nginx's
    /// `init_conf`).
    fn init_conf(&self, conf: &mut dyn Any, cx: &ConfCtx) -> Result<(), ConfError>;
}

/// A module described as data: a typed conf, its constructor, its table and
/// its final hook. Declare one as a `static` and pass `&STATIC` to
/// [`load`](super::load).
pub struct ModuleDef<C: 'static> {
    pub name: &'static str,
    pub directives: &'static [DirectiveSpec<C>],
    pub create_conf: fn() -> C,
    pub init_conf: fn(&mut C, &ConfCtx) -> Result<(), ConfError>,
}

impl<C> fmt::Debug for ModuleDef<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModuleDef")
            .field("name", &self.name)
            .field("directives", &self.directives)
            .finish()
    }
}

/// A no-op `init_conf` for modules whose defaults are all set by
/// `create_conf`.
pub fn no_init<C>(_: &mut C, _: &ConfCtx) -> Result<(), ConfError> {
    Ok(())
}

fn wrong_type(module: &str) -> String {
    format!("internal error: configuration of module \"{module}\" has the wrong type")
}

impl<C: Any> Module for ModuleDef<C> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn spec(&self, i: usize) -> Option<SpecShape> {
        self.directives.get(i).map(DirectiveSpec::shape)
    }

    fn create_conf(&self) -> Box<dyn Any> {
        Box::new((self.create_conf)())
    }

    fn set(&self, i: usize, conf: &mut dyn Any, d: &Directive, cx: &ConfCtx) -> Result<(), String> {
        let conf = conf
            .downcast_mut::<C>()
            .ok_or_else(|| wrong_type(self.name))?;
        match self.directives.get(i) {
            Some(spec) => (spec.set)(conf, d, cx),
            None => Err(format!("unknown directive \"{}\"", d.name)),
        }
    }

    fn init_conf(&self, conf: &mut dyn Any, cx: &ConfCtx) -> Result<(), ConfError> {
        let conf = conf
            .downcast_mut::<C>()
            .ok_or_else(|| ConfError::new(wrong_type(self.name)))?;
        (self.init_conf)(conf, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_rules() {
        assert!(Args::NOARGS.accepts(0) && !Args::NOARGS.accepts(1));
        assert!(Args::TAKE1.accepts(1) && !Args::TAKE1.accepts(0) && !Args::TAKE1.accepts(2));
        assert!(Args::TAKE12.accepts(1) && Args::TAKE12.accepts(2) && !Args::TAKE12.accepts(3));
        assert!(Args::TAKE13.accepts(3) && !Args::TAKE13.accepts(2));
        assert!(Args::TAKE7.accepts(7) && !Args::TAKE7.or(Args::TAKE1).accepts(8));
        assert!(Args::FLAG.accepts(1) && !Args::FLAG.accepts(2));
        assert!(Args::ONE_MORE.accepts(9) && !Args::ONE_MORE.accepts(0));
        assert!(Args::TWO_MORE.accepts(2) && !Args::TWO_MORE.accepts(1));
        assert!(Args::ANY.accepts(0) && Args::ANY.accepts(100));
    }

    #[test]
    fn contexts() {
        assert!(Context::MAIN.or(Context::HTTP).intersects(Context::HTTP));
        assert!(!Context::MAIN.intersects(Context::EVENTS));
        assert_eq!(Context::custom(0), Context(1 << 16));
        assert!(Context::ANY.intersects(Context::custom(15)));
    }
}
