//! The parser: turns statements into the directive tree, reading files and
//! expanding `include` (nginx's `ngx_conf_parse` and `ngx_conf_include`).
//!
//! It owns block structure (`{`/`}` balance, nginx's "unexpected ..."
//! messages), file I/O with nginx's `open() "..." failed (N: text)` errors,
//! glob expansion for `include`, and the record of every file read for the
//! `-T` dump. It knows no directive but `include`: checking names, contexts
//! and arguments is the walker's job, once the whole tree exists.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::directive::{Directive, Location};
use super::lexer::{End, Lexer};
use super::ConfError;

/// Include depth beyond which we assume a file includes itself; nginx has no
/// limit and would recurse until it runs out of file descriptors.
const MAX_INCLUDE_DEPTH: usize = 32;

/// What closes the statement list being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A whole file: ends at end of input; a stray `}` is an error.
    File,
    /// A `{ }` body: ends at `}`; end of input is an error.
    Block,
    /// The `-g` string: like a file, but blocks are refused.
    Param,
}

/// The origin of the statements being read, to build [`Location`]s.
#[derive(Debug, Clone)]
enum Source {
    File(Arc<Path>),
    Param,
}

impl Source {
    fn at(&self, line: usize) -> Location {
        match self {
            Source::File(path) => Location::File {
                path: Arc::clone(path),
                line,
            },
            Source::Param => Location::CommandLine,
        }
    }
}

/// Formats an I/O error as nginx does: `(2: No such file or directory)`.
pub(crate) fn os_error(err: &io::Error) -> String {
    match err.raw_os_error() {
        Some(code) => {
            let text = io::Error::from_raw_os_error(code).to_string();
            let suffix = format!(" (os error {code})");
            let text = text.strip_suffix(&suffix).unwrap_or(&text);
            format!("({code}: {text})")
        }
        None => format!("({err})"),
    }
}

/// Reads configuration sources into directive trees.
#[derive(Debug)]
pub(crate) struct Parser {
    /// Directory relative `include` paths resolve against.
    conf_dir: PathBuf,
    /// Every file read, in order, without repeats: the `-T` dump.
    files: Vec<(PathBuf, String)>,
    depth: usize,
}

impl Parser {
    pub(crate) fn new(conf_dir: PathBuf) -> Self {
        Parser {
            conf_dir,
            files: Vec::new(),
            depth: 0,
        }
    }

    pub(crate) fn into_files(self) -> Vec<(PathBuf, String)> {
        self.files
    }

    /// Reads and parses a file. `from` is the `include` that named it, whose
    /// location an open failure is reported at (none for the main file).
    pub(crate) fn parse_file(
        &mut self,
        path: &Path,
        from: Option<&Location>,
    ) -> Result<Vec<Directive>, ConfError> {
        let fail = |op: &str, err: io::Error| ConfError {
            message: format!("{op}() \"{}\" failed {}", path.display(), os_error(&err)),
            location: from.cloned(),
        };
        let mut text = Vec::new();
        File::open(path)
            .map_err(|e| fail("open", e))?
            .read_to_end(&mut text)
            .map_err(|e| fail("read", e))?;
        self.parse_text(path, &text)
    }

    /// Parses text as if it were the file `path` (used for a configuration
    /// built into the binary, and by [`Parser::parse_file`]).
    pub(crate) fn parse_text(
        &mut self,
        path: &Path,
        text: &[u8],
    ) -> Result<Vec<Directive>, ConfError> {
        if !self.files.iter().any(|(p, _)| p == path) {
            self.files.push((
                path.to_path_buf(),
                String::from_utf8_lossy(text).into_owned(),
            ));
        }
        let source = Source::File(Arc::from(path));
        self.parse(&mut Lexer::new(text, false), &source, Kind::File)
    }

    /// Parses the `-g` string.
    pub(crate) fn parse_param(&mut self, text: &str) -> Result<Vec<Directive>, ConfError> {
        self.parse(
            &mut Lexer::new(text.as_bytes(), true),
            &Source::Param,
            Kind::Param,
        )
    }

    fn parse(
        &mut self,
        lx: &mut Lexer<'_>,
        source: &Source,
        kind: Kind,
    ) -> Result<Vec<Directive>, ConfError> {
        let mut out = Vec::new();
        loop {
            let st = lx
                .next_statement()
                .map_err(|e| ConfError::at(e.message, source.at(e.line)))?;
            let location = source.at(st.line);
            match st.end {
                End::Close if kind == Kind::Block => return Ok(out),
                End::Close => return Err(ConfError::at("unexpected \"}\"", location)),
                End::Eof if kind == Kind::Block => {
                    return Err(ConfError::at(
                        "unexpected end of file, expecting \"}\"",
                        location,
                    ))
                }
                End::Eof => return Ok(out),
                End::Open | End::Semicolon => {}
            }

            let mut words = st.words.into_iter();
            let name = words.next().unwrap_or_default();
            let args: Vec<String> = words.collect();

            if st.end == End::Open {
                if kind == Kind::Param {
                    return Err(ConfError::at(
                        "block directives are not supported in -g option",
                        location,
                    ));
                }
                if name == "include" {
                    return Err(ConfError::at(
                        "directive \"include\" is not terminated by \";\"",
                        location,
                    ));
                }
                let body = self.parse(lx, source, Kind::Block)?;
                out.push(Directive {
                    name,
                    args,
                    block: Some(body),
                    location,
                });
            } else if name == "include" {
                if args.len() != 1 {
                    return Err(ConfError::at(
                        "invalid number of arguments in \"include\" directive",
                        location,
                    ));
                }
                out.extend(self.include(&args[0], &location)?);
            } else {
                out.push(Directive {
                    name,
                    args,
                    block: None,
                    location,
                });
            }
        }
    }

    /// Expands `include NAME`: a plain name must exist; a glob may match
    /// nothing. Matches are read in sorted order, as glob(3) returns them.
    fn include(&mut self, name: &str, at: &Location) -> Result<Vec<Directive>, ConfError> {
        let path = self.conf_dir.join(name);
        if self.depth >= MAX_INCLUDE_DEPTH {
            return Err(ConfError::at(
                format!(
                    "include of \"{}\" nested too deeply (an include loop?)",
                    path.display()
                ),
                at.clone(),
            ));
        }
        let files = if name.contains(['*', '?', '[']) {
            glob(&path)
        } else {
            vec![path]
        };
        self.depth += 1;
        let mut out = Vec::new();
        for file in &files {
            match self.parse_file(file, Some(at)) {
                Ok(list) => out.extend(list),
                Err(e) => {
                    self.depth -= 1;
                    return Err(e);
                }
            }
        }
        self.depth -= 1;
        Ok(out)
    }
}

/// Expands a glob pattern into the sorted list of regular files it matches.
/// Every path component may hold `*`, `?` and `[...]`; unreadable
/// directories simply match nothing, as glob(3) without `GLOB_ERR`.
pub(crate) fn glob(pattern: &Path) -> Vec<PathBuf> {
    let mut candidates = vec![PathBuf::new()];
    for component in pattern.components() {
        let part = component.as_os_str();
        let text = part.to_string_lossy();
        if !text.contains(['*', '?', '[']) {
            for c in &mut candidates {
                c.push(part);
            }
            continue;
        }
        let mut next = Vec::new();
        for dir in &candidates {
            let listing = if dir.as_os_str().is_empty() {
                Path::new(".").read_dir()
            } else {
                dir.read_dir()
            };
            let Ok(listing) = listing else { continue };
            for entry in listing.flatten() {
                let file_name = entry.file_name();
                if fnmatch(text.as_bytes(), file_name.as_encoded_bytes()) {
                    next.push(dir.join(&file_name));
                }
            }
        }
        candidates = next;
    }
    candidates.retain(|p| p.is_file());
    candidates.sort();
    candidates
}

/// Matches one path component against a shell pattern (fnmatch(3) without
/// flags but with glob's rule that a leading `.` must be matched literally).
pub(crate) fn fnmatch(pattern: &[u8], name: &[u8]) -> bool {
    if name.first() == Some(&b'.') && pattern.first() != Some(&b'.') {
        return false;
    }
    match_from(pattern, name)
}

fn match_from(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // Position to retry from after the last `*`: (pattern after it, name).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p + 1, n));
                    p += 1;
                    continue;
                }
                b'?' if n < name.len() => {
                    p += 1;
                    n += 1;
                    continue;
                }
                b'[' if n < name.len() => {
                    if let Some((matched, len)) = match_class(&pattern[p..], name[n]) {
                        if matched {
                            p += len;
                            n += 1;
                            continue;
                        }
                    } else if name[n] == b'[' {
                        // An unclosed `[` is an ordinary character.
                        p += 1;
                        n += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() && n < name.len() && pattern[p + 1] == name[n] => {
                    p += 2;
                    n += 1;
                    continue;
                }
                // `?`, `[` and an escaping `\` only match as handled above.
                c if n < name.len()
                    && c == name[n]
                    && c != b'?'
                    && c != b'['
                    && !(c == b'\\' && p + 1 < pattern.len()) =>
                {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
        } else if n == name.len() {
            return true;
        }
        // Mismatch: let the last `*` swallow one more byte, if any.
        match star {
            Some((sp, sn)) if sn < name.len() => {
                star = Some((sp, sn + 1));
                p = sp;
                n = sn + 1;
            }
            _ => return false,
        }
    }
}

/// Matches `c` against the bracket expression at the start of `pattern`;
/// returns whether it matched and the expression's length, or `None` if the
/// `[` is not closed.
fn match_class(pattern: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pattern.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let lo = *pattern.get(i)?;
        if lo == b']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if pattern.get(i + 1) == Some(&b'-') && pattern.get(i + 2).is_some_and(|&b| b != b']') {
            let hi = pattern[i + 2];
            matched |= lo <= c && c <= hi;
            i += 3;
        } else {
            matched |= lo == c;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_basics() {
        assert!(fnmatch(b"*.conf", b"a.conf"));
        assert!(!fnmatch(b"*.conf", b".conf"));
        assert!(fnmatch(b".*", b".hidden"));
        assert!(!fnmatch(b"*.conf", b"a.conf.bak"));
        assert!(fnmatch(b"a?c", b"abc"));
        assert!(!fnmatch(b"a?c", b"ac"));
        assert!(fnmatch(b"[ab]x", b"bx"));
        assert!(!fnmatch(b"[ab]x", b"cx"));
        assert!(fnmatch(b"[!ab]x", b"cx"));
        assert!(fnmatch(b"[a-c]*", b"cat"));
        assert!(!fnmatch(b"[a-c]*", b"dog"));
        assert!(fnmatch(b"[]]", b"]"));
        assert!(fnmatch(b"a[", b"a["));
        assert!(fnmatch(b"*a*b*", b"xxaxxbxx"));
        assert!(!fnmatch(b"*a*b*", b"xxbxxaxx"));
        assert!(fnmatch(b"\\*", b"*"));
        assert!(!fnmatch(b"\\*", b"x"));
        assert!(fnmatch(b"*", b"anything"));
        assert!(fnmatch(b"x*", b"x"));
    }

    #[test]
    fn os_error_text() {
        let e = io::Error::from_raw_os_error(2);
        assert_eq!(os_error(&e), "(2: No such file or directory)");
    }
}
