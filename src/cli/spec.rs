//! Each applet's command line as data: its options (long, short, whether and what value it takes,
//! help) and its operands. The one table is read twice — by [`Parser`], which accepts exactly
//! what it lists, and by `cli::complete`, which writes the shell completions — so the options a
//! shell offers can never drift from the ones an applet takes. An unknown option is a usage
//! error suggesting the nearest one ([`suggest`]).

use std::ffi::OsString;

use super::Failure;

/// What fills an option's value or an operand's place: what a shell completes there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Free text (a task, a number, a template): nothing to complete.
    Text,
    /// A file or directory path.
    Path,
    /// A directory.
    Dir,
    /// A running session or formation, as `mur ps` names them.
    Address,
    /// One of these words.
    Words(&'static [&'static str]),
}

/// One option of an applet.
#[derive(Debug)]
pub struct Opt {
    pub long: &'static str,
    pub short: Option<char>,
    /// The value's name in the help (`SECS`) and what it is; `None` for a flag.
    pub value: Option<(&'static str, Kind)>,
    pub help: &'static str,
    /// Passed between mur's own processes (`run --detached-session`), never typed: parsed like
    /// any other, but not offered by completion nor listed in help.
    pub internal: bool,
}

impl Opt {
    /// A flag: `--long` (or `-s`), no value.
    pub const fn flag(long: &'static str, short: Option<char>, help: &'static str) -> Self {
        Self {
            long,
            short,
            value: None,
            help,
            internal: false,
        }
    }

    /// An option taking a value named `name`, of kind `kind`.
    pub const fn value(
        long: &'static str,
        short: Option<char>,
        name: &'static str,
        kind: Kind,
        help: &'static str,
    ) -> Self {
        Self {
            long,
            short,
            value: Some((name, kind)),
            help,
            internal: false,
        }
    }

    /// A flag only mur itself passes (see [`Opt::internal`]).
    pub const fn internal(long: &'static str) -> Self {
        Self {
            long,
            short: None,
            value: None,
            help: "",
            internal: true,
        }
    }
}

/// An applet's (or a sub-command's) command line.
#[derive(Debug)]
pub struct Spec {
    pub options: &'static [Opt],
    /// The operands in order; the last one repeats when `repeats` (`stop ADDR...`).
    pub operands: &'static [Kind],
    pub repeats: bool,
    /// Words that, as the first operand, select a command line of their own (`formation call`).
    pub subcommands: &'static [(&'static str, &'static Spec)],
}

impl Spec {
    /// A command line of `options` and `operands`, with no repetition or sub-command.
    pub const fn new(options: &'static [Opt], operands: &'static [Kind]) -> Self {
        Self {
            options,
            operands,
            repeats: false,
            subcommands: &[],
        }
    }

    /// Whether operand `n` (from 0) is the last, repeated one (`stop ADDR...`).
    pub fn repeats_at(&self, n: usize) -> bool {
        self.repeats && n + 1 == self.operands.len()
    }
}

/// One argument as the table names it.
#[derive(Debug)]
pub enum Arg {
    /// A flag, by its long name (`-q` arrives as `"quiet"`).
    Flag(&'static str),
    /// An option that takes a value, by its long name, with the value.
    Opt(&'static str, OsString),
    /// An operand.
    Operand(OsString),
}

impl Arg {
    /// The usage error for an argument the applet has no place for.
    pub fn unexpected(self) -> Failure {
        Failure::Usage(match self {
            Arg::Flag(long) | Arg::Opt(long, _) => format!("--{long} is not allowed here"),
            Arg::Operand(value) => format!("unexpected argument '{}'", value.to_string_lossy()),
        })
    }
}

/// lexopt, restricted to what a [`Spec`] lists: an option it does not list is a usage error
/// with a suggestion, and an option it lists with a value always takes one, so "takes a value"
/// is said once, in the table.
pub struct Parser {
    inner: lexopt::Parser,
    spec: &'static Spec,
}

impl Parser {
    pub fn new(spec: &'static Spec, args: Vec<OsString>) -> Self {
        Self {
            inner: lexopt::Parser::from_args(args),
            spec,
        }
    }

    /// The next argument, `None` after the last.
    pub fn next_arg(&mut self) -> Result<Option<Arg>, Failure> {
        let options = self.spec.options;
        let opt = match self.inner.next()? {
            None => return Ok(None),
            Some(lexopt::Arg::Value(value)) => return Ok(Some(Arg::Operand(value))),
            Some(lexopt::Arg::Long(name)) => options
                .iter()
                .find(|o| o.long == name)
                .ok_or_else(|| unknown_option(&format!("--{name}"), self.spec))?,
            Some(lexopt::Arg::Short(c)) => options
                .iter()
                .find(|o| o.short == Some(c))
                .ok_or_else(|| unknown_option(&format!("-{c}"), self.spec))?,
        };
        Ok(Some(match opt.value {
            None => Arg::Flag(opt.long),
            Some(_) => Arg::Opt(opt.long, self.inner.value()?),
        }))
    }
}

/// Every way `spec`'s options are written (`--json`, `-q`), for suggestions. Internal ones too:
/// a typo of one deserves the same help.
fn spellings(spec: &Spec) -> Vec<String> {
    let mut all = vec!["--help".to_string()];
    for opt in spec.options.iter().filter(|o| !o.internal) {
        all.push(format!("--{}", opt.long));
        all.extend(opt.short.map(|c| format!("-{c}")));
    }
    all
}

fn unknown_option(typed: &str, spec: &Spec) -> Failure {
    let spellings = spellings(spec);
    Failure::Usage(format!(
        "unknown option '{typed}'{}",
        did_you_mean(typed, spellings.iter().map(String::as_str))
    ))
}

/// `"; did you mean 'X'?"` when one of `candidates` is near `typed`, else nothing.
pub fn did_you_mean<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(typed, candidates).map_or_else(String::new, |s| format!("; did you mean '{s}'?"))
}

/// The candidate nearest `typed`: within one edit (a swap of neighbours counts as one: `sotp`
/// is `stop`), two for words of 5 or more characters, never as many edits as `typed` has letters
/// (`-x` is not `-q`), or else the only one `typed` begins (`--jso`). Further than that a guess
/// misleads more than it helps.
pub fn suggest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let candidates: Vec<&str> = candidates.into_iter().collect();
    let stem = typed.trim_start_matches('-');
    let allowed = if stem.chars().count() >= 5 { 2 } else { 1 };
    let nearest = candidates
        .iter()
        .map(|c| (distance(typed, c), *c))
        .filter(|(d, _)| *d <= allowed && *d < stem.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c);
    nearest.or_else(|| {
        let mut starting = candidates
            .iter()
            .filter(|c| stem.len() >= 2 && c.starts_with(typed) && c.len() > typed.len());
        match (starting.next(), starting.next()) {
            (Some(only), None) => Some(*only),
            _ => None,
        }
    })
}

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of
/// two neighbours, each one edit.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_near_or_unique_prefixes() {
        let applets = ["run", "ps", "stop", "token", "logs"];
        assert_eq!(suggest("sotp", applets), Some("stop"));
        assert_eq!(suggest("tokn", applets), Some("token"));
        assert_eq!(suggest("sto", applets), Some("stop"));
        assert_eq!(suggest("xyz", applets), None);
        assert_eq!(
            suggest("--versoin", ["--version", "--help"]),
            Some("--version")
        );
        assert_eq!(suggest("--jsno", ["--json", "--quiet"]), Some("--json"));
        assert_eq!(suggest("--jso", ["--json", "--quiet"]), Some("--json"));
        assert_eq!(suggest("-x", ["-q", "--json"]), None);
        assert_eq!(did_you_mean("zzzzzz", applets), "");
    }

    static SPEC: Spec = Spec::new(
        &[
            Opt::flag("quiet", Some('q'), "ids"),
            Opt::value("timeout", Some('t'), "SECS", Kind::Text, "grace"),
        ],
        &[],
    );

    #[test]
    fn the_table_decides_what_parses_and_what_takes_a_value() {
        let args = ["-q", "-t5", "--timeout", "7", "x"]
            .map(OsString::from)
            .to_vec();
        let mut parser = Parser::new(&SPEC, args);
        let mut seen = vec![];
        while let Some(arg) = parser.next_arg().unwrap() {
            seen.push(format!("{arg:?}"));
        }
        assert_eq!(
            seen,
            [
                "Flag(\"quiet\")",
                "Opt(\"timeout\", \"5\")",
                "Opt(\"timeout\", \"7\")",
                "Operand(\"x\")"
            ]
        );
        let mut parser = Parser::new(&SPEC, vec!["--quite".into()]);
        match parser.next_arg() {
            Err(Failure::Usage(why)) => {
                assert_eq!(why, "unknown option '--quite'; did you mean '--quiet'?");
            }
            other => panic!("{other:?}"),
        }
    }
}
