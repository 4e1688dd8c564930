//! Compiled regular expressions, the value of `~r/.../flags`: Elixir's modifiers mapped onto the
//! `regex` crate (linear-time matching, so no backreferences or look-around), and the match
//! iteration of Erlang's `re:run(..., [global])`, which `Regex.scan`, `replace` and `split` share.

use std::fmt;

use crate::value::Str;

/// The most memory one regex's compiled program may take: 1 MiB. A guess, a tenth of the
/// `regex` crate's default of 10 MiB: a page's patterns compile to a few kilobytes, and the
/// limit stops `~r/(((a{100}){100}){100})/` from taking gigabytes at compile time.
pub(crate) const MAX_REGEX_SIZE: usize = 1 << 20;

/// The most memory the lazy DFA of one regex may cache while matching: 1 MiB (the crate's
/// default is 2 MiB); past it the crate falls back to slower, still linear, engines.
const MAX_DFA_SIZE: usize = 1 << 20;

/// A compiled regular expression with the source and modifiers it was written with (what
/// `Regex.source/1` and `inspect` give back). Two regexes are equal when both are.
#[derive(Clone)]
pub struct Regex {
    re: regex::Regex,
    source: Str,
    opts: Str,
}

impl Regex {
    /// Compiles `source` with Elixir's modifier letters `opts` (`"iu"`): `i` caseless, `m`
    /// multiline, `s` dotall, `x` extended, `U` ungreedy, `u` (always on: galleon matches code
    /// points). `f` (firstline) and letters Elixir rejects are errors, as is a pattern the
    /// `regex` crate cannot compile (a backreference, look-around) or one too big.
    pub(crate) fn compile(source: &str, opts: &str) -> Result<Regex, String> {
        let mut b = regex::RegexBuilder::new(source);
        b.size_limit(MAX_REGEX_SIZE).dfa_size_limit(MAX_DFA_SIZE);
        for c in opts.chars() {
            match c {
                'i' => b.case_insensitive(true),
                'm' => b.multi_line(true),
                's' => b.dot_matches_new_line(true),
                'x' => b.ignore_whitespace(true),
                'U' => b.swap_greed(true),
                'u' => b.unicode(true),
                'f' => {
                    return Err(
                        "the regex modifier `f` (firstline) is not supported by galleon's regex engine"
                            .to_owned(),
                    );
                }
                other => return Err(format!("invalid regex modifier `{other}`")),
            };
        }
        let re = b.build().map_err(|e| compile_error(&e))?;
        Ok(Regex {
            re,
            source: Str::new(source),
            opts: Str::new(opts),
        })
    }

    /// The pattern as written (`Regex.source/1`).
    pub fn source(&self) -> &str {
        self.source.as_str()
    }

    /// The modifier letters as written (`"i"` for `~r/a/i`).
    pub fn opts(&self) -> &str {
        self.opts.as_str()
    }

    /// The compiled expression.
    pub(crate) fn inner(&self) -> &regex::Regex {
        &self.re
    }

    /// Every match in `hay`, as Erlang's `re:run` with `global` finds them (see [`Matches`]).
    pub(crate) fn matches<'r, 'h>(&'r self, hay: &'h str) -> Matches<'r, 'h> {
        Matches {
            re: &self.re,
            hay,
            at: 0,
            done: false,
        }
    }
}

/// A short message for a pattern the crate rejects: its last line (`error: ...`), with a hint
/// when the pattern uses what only PCRE has.
fn compile_error(e: &regex::Error) -> String {
    match e {
        regex::Error::Syntax(text) => {
            let last = text.lines().last().unwrap_or(text);
            let msg = last.strip_prefix("error: ").unwrap_or(last);
            let pcre = msg.contains("backreference") || msg.contains("look-around");
            let hint = if pcre {
                " (galleon's regex engine matches in linear time, without PCRE's backreferences and look-around)"
            } else {
                ""
            };
            format!("invalid regex: {msg}{hint}")
        }
        regex::Error::CompiledTooBig(limit) => {
            format!("regex too big: its compiled form exceeds {limit} bytes")
        }
        other => format!("invalid regex: {other}"),
    }
}

impl PartialEq for Regex {
    fn eq(&self, other: &Regex) -> bool {
        self.source == other.source && self.opts == other.opts
    }
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "~r/{}/{}", self.source, self.opts)
    }
}

/// The matches of a regex, left to right, with PCRE's global rule for empty matches: after an
/// empty match the search resumes one character later, after a non-empty one at its end (where
/// an empty match may follow: `~r/a*/` finds `"", "aaa", "", ""` in `"baaac"`, as Elixir does).
/// (PCRE first retries a non-empty match at the empty match's position; the `regex` crate cannot
/// ask for that, so a pattern matching both empty and non-empty there, `~r/a*?/`, differs.)
#[derive(Debug)]
pub(crate) struct Matches<'r, 'h> {
    re: &'r regex::Regex,
    hay: &'h str,
    at: usize,
    done: bool,
}

impl<'h> Iterator for Matches<'_, 'h> {
    type Item = regex::Captures<'h>;

    fn next(&mut self) -> Option<regex::Captures<'h>> {
        if self.done {
            return None;
        }
        let Some(caps) = self.re.captures_at(self.hay, self.at) else {
            self.done = true;
            return None;
        };
        let whole = caps.get(0)?;
        if whole.is_empty() {
            match self.hay[whole.end()..].chars().next() {
                Some(c) => self.at = whole.end() + c.len_utf8(),
                None => self.done = true,
            }
        } else {
            self.at = whole.end();
        }
        Some(caps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(re: &str, hay: &str) -> Vec<String> {
        let re = Regex::compile(re, "").unwrap();
        re.matches(hay).map(|c| c[0].to_owned()).collect()
    }

    #[test]
    fn empty_matches_follow_pcre() {
        assert_eq!(found("", "abc"), ["", "", "", ""]);
        assert_eq!(found("a*", "baaac"), ["", "aaa", "", ""]);
        assert_eq!(found("", "é"), ["", ""]);
        assert_eq!(found("x", ""), Vec::<String>::new());
        assert_eq!(found("", ""), [""]);
    }

    #[test]
    fn modifiers_and_errors() {
        assert!(Regex::compile("A", "i").unwrap().inner().is_match("a"));
        assert!(Regex::compile("a.b", "s").unwrap().inner().is_match("a\nb"));
        assert!(Regex::compile("^b", "m").unwrap().inner().is_match("a\nb"));
        assert!(Regex::compile("a b", "x").unwrap().inner().is_match("ab"));
        assert_eq!(found_with("a+", "U", "aaa"), ["a", "a", "a"]);
        let err = Regex::compile("(a)\\1", "").unwrap_err();
        assert!(
            err.contains("backreference") && err.contains("PCRE"),
            "{err}"
        );
        let err = Regex::compile("a(?=b)", "").unwrap_err();
        assert!(err.contains("look-around"), "{err}");
        assert!(
            Regex::compile("(a", "")
                .unwrap_err()
                .starts_with("invalid regex: ")
        );
        assert!(Regex::compile("a", "f").unwrap_err().contains("firstline"));
        assert!(Regex::compile("a", "z").unwrap_err().contains("`z`"));
        let err = Regex::compile("((a{100}){100}){100}", "").unwrap_err();
        assert!(err.starts_with("regex too big"), "{err}");
    }

    fn found_with(re: &str, opts: &str, hay: &str) -> Vec<String> {
        let re = Regex::compile(re, opts).unwrap();
        re.matches(hay).map(|c| c[0].to_owned()).collect()
    }
}
