//! The tokenizer: turns configuration text into statements (nginx's
//! `ngx_conf_read_token`).
//!
//! A *statement* is the list of words up to and including its terminator:
//! `;`, `{`, a lone `}`, or the end of input. Producing whole statements rather
//! than single tokens keeps the grammar checks nginx does while scanning (a
//! `;` with no words before it, a `}` after words, a quoted word glued to the
//! next one) in one place, with nginx's exact messages and line numbers.
//!
//! The rules are nginx's, including its less obvious ones:
//! - whitespace is space, tab, CR and LF; `#` starts a comment only at the
//!   start of a word (`a#b` is one word);
//! - `}` ends a block only at the start of a word (`html}` is one word), and
//!   `{` right after `$` is part of a variable name (`${var}`);
//! - quotes open only at the start of a word, and a closing quote must be
//!   followed by whitespace, `;`, `{` or `)`;
//! - a backslash makes the next byte ordinary while scanning; when the word is
//!   stored, `\"`, `\'`, `\\` become the quoted byte, `\n`, `\r`, `\t` the
//!   control character, and any other backslash is kept as written.

/// How a statement ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// `;`: a simple directive.
    Semicolon,
    /// `{`: a block directive; its body follows.
    Open,
    /// `}` with no words before it: the enclosing block is done.
    Close,
    /// End of input with no words pending.
    Eof,
}

/// One statement: its words (directive name first) and terminator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    pub(crate) words: Vec<String>,
    pub(crate) end: End,
    /// Line of the terminator, which is the line nginx reports for a
    /// directive: its handler runs once the terminator has been read.
    pub(crate) line: usize,
}

/// A syntax error, without the file name (the parser knows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub(crate) message: String,
    pub(crate) line: usize,
}

/// Scanner over one source (a file or the `-g` string).
pub(crate) struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: usize,
    /// The `-g` string: nginx words its end-of-input error differently there.
    param: bool,
}

fn is_space(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a [u8], param: bool) -> Self {
        Lexer {
            src,
            pos: 0,
            line: 1,
            param,
        }
    }

    fn error(&self, message: String) -> LexError {
        LexError {
            message,
            line: self.line,
        }
    }

    fn done(&self, words: Vec<String>, end: End) -> Result<Statement, LexError> {
        Ok(Statement {
            words,
            end,
            line: self.line,
        })
    }

    /// Reads the next statement.
    pub(crate) fn next_statement(&mut self) -> Result<Statement, LexError> {
        let mut words = Vec::new();
        let mut start = self.pos;
        let mut need_space = false;
        let mut last_space = true;
        let mut comment = false;
        let mut variable = false;
        let mut quoted = false;
        let mut s_quoted = false;
        let mut d_quoted = false;

        loop {
            let Some(&ch) = self.src.get(self.pos) else {
                if !words.is_empty() || !last_space {
                    let message = if self.param {
                        "unexpected end of parameter, expecting \";\""
                    } else {
                        "unexpected end of file, expecting \";\" or \"}\""
                    };
                    return Err(self.error(message.to_string()));
                }
                return self.done(words, End::Eof);
            };
            self.pos += 1;

            if ch == b'\n' {
                self.line += 1;
                comment = false;
            }
            if comment {
                continue;
            }
            if quoted {
                quoted = false;
                continue;
            }

            if need_space {
                if is_space(ch) {
                    last_space = true;
                    need_space = false;
                    continue;
                }
                match ch {
                    b';' => return self.done(words, End::Semicolon),
                    b'{' => return self.done(words, End::Open),
                    // nginx lets `)` follow a quoted word (for `if ("a")`);
                    // the `)` then starts the next word.
                    b')' => {
                        last_space = true;
                        need_space = false;
                    }
                    _ => return Err(self.error(format!("unexpected \"{}\"", ch as char))),
                }
            }

            if last_space {
                start = self.pos - 1;
                if is_space(ch) {
                    continue;
                }
                match ch {
                    b';' | b'{' => {
                        if words.is_empty() {
                            return Err(self.error(format!("unexpected \"{}\"", ch as char)));
                        }
                        let end = if ch == b'{' {
                            End::Open
                        } else {
                            End::Semicolon
                        };
                        return self.done(words, end);
                    }
                    b'}' => {
                        if !words.is_empty() {
                            return Err(self.error("unexpected \"}\"".to_string()));
                        }
                        return self.done(words, End::Close);
                    }
                    b'#' => comment = true,
                    b'\\' => {
                        quoted = true;
                        last_space = false;
                    }
                    b'"' => {
                        start += 1;
                        d_quoted = true;
                        last_space = false;
                    }
                    b'\'' => {
                        start += 1;
                        s_quoted = true;
                        last_space = false;
                    }
                    b'$' => {
                        variable = true;
                        last_space = false;
                    }
                    _ => last_space = false,
                }
                continue;
            }

            if ch == b'{' && variable {
                continue;
            }
            variable = false;
            if ch == b'\\' {
                quoted = true;
                continue;
            }
            if ch == b'$' {
                variable = true;
                continue;
            }

            let found = if d_quoted {
                if ch == b'"' {
                    d_quoted = false;
                    need_space = true;
                    true
                } else {
                    false
                }
            } else if s_quoted {
                if ch == b'\'' {
                    s_quoted = false;
                    need_space = true;
                    true
                } else {
                    false
                }
            } else if is_space(ch) || ch == b';' || ch == b'{' {
                last_space = true;
                true
            } else {
                false
            };

            if found {
                words.push(unescape(&self.src[start..self.pos - 1]));
                match ch {
                    b';' => return self.done(words, End::Semicolon),
                    b'{' => return self.done(words, End::Open),
                    _ => {}
                }
            }
        }
    }
}

/// Stores a scanned word, applying nginx's escape rules (see the module
/// comment). Bytes that are not UTF-8 are replaced rather than rejected, as
/// the configuration is otherwise byte-transparent.
fn unescape(raw: &[u8]) -> String {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' {
            if let Some(&next) = raw.get(i + 1) {
                let replaced = match next {
                    b'"' | b'\'' | b'\\' => Some(next),
                    b't' => Some(b'\t'),
                    b'r' => Some(b'\r'),
                    b'n' => Some(b'\n'),
                    _ => None,
                };
                if let Some(byte) = replaced {
                    out.push(byte);
                    i += 2;
                    continue;
                }
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(src: &str) -> Result<Vec<(Vec<String>, End, usize)>, LexError> {
        let mut lx = Lexer::new(src.as_bytes(), false);
        let mut out = Vec::new();
        loop {
            let st = lx.next_statement()?;
            let end = st.end;
            out.push((st.words, st.end, st.line));
            if end == End::Eof {
                return Ok(out);
            }
        }
    }

    fn words(src: &str) -> Vec<Vec<String>> {
        all(src)
            .unwrap()
            .into_iter()
            .map(|(w, _, _)| w)
            .filter(|w| !w.is_empty())
            .collect()
    }

    fn err(src: &str) -> (String, usize) {
        let e = all(src).unwrap_err();
        (e.message, e.line)
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn simple_and_adjacent_punctuation() {
        let got = all("events{worker_connections 10;}").unwrap();
        assert_eq!(
            got,
            vec![
                (v(&["events"]), End::Open, 1),
                (v(&["worker_connections", "10"]), End::Semicolon, 1),
                (vec![], End::Close, 1),
                (vec![], End::Eof, 1),
            ]
        );
    }

    #[test]
    fn tokens_across_lines_report_terminator_line() {
        let got = all("listen\n  127.0.0.1:80\n  default_server\n;\n").unwrap();
        assert_eq!(
            got[0],
            (
                v(&["listen", "127.0.0.1:80", "default_server"]),
                End::Semicolon,
                4
            )
        );
        assert_eq!(got[1], (vec![], End::Eof, 5));
    }

    #[test]
    fn comments() {
        assert_eq!(
            words("# top\na b; # trailing ; { }\n#last"),
            vec![v(&["a", "b"])]
        );
        // `#` inside a word is ordinary.
        assert_eq!(words("a b#c;"), vec![v(&["a", "b#c"])]);
        // A comment ends at the newline, which still separates words.
        assert_eq!(words("a #x\nb;"), vec![v(&["a", "b"])]);
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            words(r#"a "b c" 'd e' "";"#),
            vec![v(&["a", "b c", "d e", ""])]
        );
        assert_eq!(
            words(r#"a "q\"q" 'q\'q' "b\\s" "t\tn\nr\r";"#),
            vec![v(&["a", "q\"q", "q'q", "b\\s", "t\tn\nr\r"])]
        );
        // Other backslashes stay as written.
        assert_eq!(words(r#"a "\d\." x\y;"#), vec![v(&["a", "\\d\\.", "x\\y"])]);
        // A backslash protects a separator outside quotes.
        assert_eq!(words(r"a b\ c\;d;"), vec![v(&["a", "b\\ c\\;d"])]);
        // Quotes protect separators and comments.
        assert_eq!(words("a \"x; {#}\";"), vec![v(&["a", "x; {#}"])]);
        // Quoted strings may span lines.
        assert_eq!(words("a \"x\ny\";"), vec![v(&["a", "x\ny"])]);
        // Quotes in the middle of a word are ordinary.
        assert_eq!(words("a b\"c;"), vec![v(&["a", "b\"c"])]);
        // A quoted word may be followed directly by `;` or `{`.
        assert_eq!(all("\"a\"{}").unwrap()[0], (v(&["a"]), End::Open, 1));
    }

    #[test]
    fn variables_and_closing_brace_inside_word() {
        assert_eq!(words("set ${a}b;"), vec![v(&["set", "${a}b"])]);
        assert_eq!(words("root html};"), vec![v(&["root", "html}"])]);
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(err(";"), ("unexpected \";\"".to_string(), 1));
        assert_eq!(err("\n{"), ("unexpected \"{\"".to_string(), 2));
        assert_eq!(err("a b }"), ("unexpected \"}\"".to_string(), 1));
        assert_eq!(err("a \"b\"c;"), ("unexpected \"c\"".to_string(), 1));
        assert_eq!(
            err("a b"),
            (
                "unexpected end of file, expecting \";\" or \"}\"".to_string(),
                1
            )
        );
        assert_eq!(
            err("a \"b;\n\n"),
            (
                "unexpected end of file, expecting \";\" or \"}\"".to_string(),
                3
            )
        );
        let mut lx = Lexer::new(b"daemon off", true);
        assert_eq!(
            lx.next_statement().unwrap_err().message,
            "unexpected end of parameter, expecting \";\""
        );
    }

    #[test]
    fn empty_and_whitespace_only() {
        assert_eq!(all("").unwrap(), vec![(vec![], End::Eof, 1)]);
        assert_eq!(all(" \t\r\n\n").unwrap(), vec![(vec![], End::Eof, 3)]);
    }
}
