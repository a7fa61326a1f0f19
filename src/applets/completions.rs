//! `mur completions bash|zsh|fish`: the shell completions, written from the option table every
//! applet parses with ([`Spec`]), so a shell never offers an option an applet refuses nor
//! misses one it takes. The files install.sh installs (`completions/`) are this output; a test
//! holds them equal.

use super::{APPLETS, Applet};
use crate::cli::spec::{Arg, Kind, Opt, Parser, Spec};
use crate::cli::{self, Failure, Out, Outcome};

pub const APPLET: Applet = Applet {
    name: "completions",
    summary: "print the completion script for bash, zsh or fish",
    usage: "\
Usage: mur completions bash|zsh|fish

Print the completion script for that shell on stdout: every applet, its
options (what each takes) and, where an address goes, the running sessions
('mur ps' names them). install.sh installs the three; by hand:
  mur completions bash > ~/.local/share/bash-completion/completions/mur
  mur completions zsh > ~/.zfunc/_mur         (a directory on $fpath)
  mur completions fish > ~/.config/fish/completions/mur.fish

Exit status: 0; 2 on a usage error (no shell, or another one).
",
    main,
    spec: &SPEC,
};

const SHELLS: &[&str] = &["bash", "zsh", "fish"];

/// `completions`'s command line, the one table its parser and the shell completions read.
static SPEC: Spec = Spec::new(&[], &[Kind::Words(SHELLS)]);

fn main(args: Vec<std::ffi::OsString>) -> Outcome {
    let mut shell = None;
    let mut parser = Parser::new(&SPEC, args);
    while let Some(arg) = parser.next_arg()? {
        match arg {
            Arg::Operand(value) if shell.is_none() => shell = Some(cli::utf8(value)?),
            other => return Err(other.unexpected()),
        }
    }
    let script = match shell.as_deref() {
        Some("bash") => bash(),
        Some("zsh") => zsh(),
        Some("fish") => fish(),
        Some(other) => {
            return Err(Failure::Usage(format!(
                "no completions for '{other}' (the shells: bash, zsh, fish){}",
                cli::spec::did_you_mean(other, SHELLS.iter().copied())
            )));
        }
        None => return Err(Failure::Usage("name a shell: bash, zsh or fish".into())),
    };
    Out::default().line(script.trim_end());
    Ok(0)
}

/// Every command line completion knows: each applet's, then each sub-command's as
/// `"formation call"`.
fn commands() -> Vec<(String, &'static Spec)> {
    let mut all = vec![];
    for applet in APPLETS {
        all.push((applet.name.to_string(), applet.spec));
        for (sub, spec) in applet.spec.subcommands {
            all.push((format!("{} {sub}", applet.name), *spec));
        }
    }
    all
}

fn public(spec: &Spec) -> impl Iterator<Item = &Opt> {
    spec.options.iter().filter(|o| !o.internal)
}

/// Every way an option of `spec` is written (`--json`, `-q`), `--help` included; with
/// `valued`, only those that take a value.
fn spellings(spec: &Spec, valued: bool) -> Vec<String> {
    let mut all = vec![];
    for opt in public(spec).filter(|o| !valued || o.value.is_some()) {
        all.extend(opt.short.map(|c| format!("-{c}")));
        all.push(format!("--{}", opt.long));
    }
    if !valued {
        all.push("--help".into());
    }
    all
}

fn applet_names() -> String {
    APPLETS.iter().map(|a| a.name).collect::<Vec<_>>().join(" ")
}

fn links() -> String {
    APPLETS
        .iter()
        .map(|a| format!("mur-{}", a.name))
        .collect::<Vec<_>>()
        .join(" ")
}

const HEADER: &str = "written by 'mur completions SHELL' from the table the applets parse with";

/// What bash's completion does where `kind` goes.
fn bash_action(kind: Kind) -> String {
    match kind {
        Kind::Text => String::new(),
        Kind::Path => "COMPREPLY=($(compgen -f -- \"$cur\"))".into(),
        Kind::Dir => "COMPREPLY=($(compgen -d -- \"$cur\"))".into(),
        Kind::Address => "COMPREPLY=($(compgen -W \"$(_mur_addresses)\" -- \"$cur\"))".into(),
        Kind::Words(words) => format!(
            "COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))",
            words.join(" ")
        ),
    }
}

/// The `case` arms of the bash script, command by command.
#[derive(Default)]
struct BashCases {
    /// The sub-commands, as `case` patterns.
    subs: Vec<String>,
    /// Each command's options, and those that take a value.
    tables: String,
    /// What completes each option's value, where something does.
    values: String,
    /// What completes each operand, by command and position.
    operands: String,
}

impl BashCases {
    fn add(&mut self, command: &str, spec: &Spec) {
        if command.contains(' ') {
            self.subs.push(format!("\"{command}\""));
        }
        self.tables += &format!(
            "        \"{command}\") opts=\"{}\"; takes=\" {} \" ;;\n",
            spellings(spec, false).join(" "),
            spellings(spec, true).join(" ")
        );
        for opt in public(spec) {
            let Some((_, kind)) = opt.value.filter(|(_, kind)| *kind != Kind::Text) else {
                continue;
            };
            let mut patterns = vec![format!("\"{command} --{}\"", opt.long)];
            patterns.extend(opt.short.map(|c| format!("\"{command} -{c}\"")));
            self.values += &format!(
                "            {}) {} ;;\n",
                patterns.join("|"),
                bash_action(kind)
            );
        }
        let subs: Vec<&str> = spec.subcommands.iter().map(|(name, _)| *name).collect();
        for (n, kind) in spec.operands.iter().enumerate() {
            let action = match (n, subs.is_empty()) {
                (0, false) => format!(
                    "COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")); {}",
                    subs.join(" "),
                    bash_action(*kind).replace("COMPREPLY=(", "COMPREPLY+=(")
                ),
                _ if *kind == Kind::Text => continue,
                _ => bash_action(*kind),
            };
            let pattern = if spec.repeats_at(n) {
                format!("\"{command} \"*")
            } else {
                format!("\"{command} {n}\"")
            };
            self.operands += &format!("        {pattern}) {action} ;;\n");
        }
    }
}

fn bash() -> String {
    let mut cases = BashCases::default();
    for (command, spec) in commands() {
        cases.add(&command, spec);
    }
    let BashCases {
        subs,
        tables,
        values,
        operands,
    } = cases;
    format!(
        r#"# bash completion for mur, {HEADER}
# (installed by install.sh as share/bash-completion/completions/mur): applets, their options and
# what each takes, and the running sessions (by capsule name and id) where an address goes.

_mur_addresses() {{
    mur ps --format '{{{{.capsule_name}}}}' 2>/dev/null
    mur ps -q 2>/dev/null
}}

_mur() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
    local cmd=${{COMP_WORDS[0]##*/}} first=1 i n=0 skip= opts= takes=
    cmd=${{cmd#mur}}
    cmd=${{cmd#-}}
    if [ -z "$cmd" ]; then
        if [ "$COMP_CWORD" -eq 1 ]; then
            COMPREPLY=($(compgen -W "{applets} help --list --version --help" -- "$cur"))
            return
        fi
        cmd=${{COMP_WORDS[1]}}
        first=2
    fi
    if [ "$cmd" = help ]; then
        [ "$COMP_CWORD" -eq "$first" ] && COMPREPLY=($(compgen -W "{applets}" -- "$cur"))
        return
    fi
    if [ "$COMP_CWORD" -gt "$first" ]; then
        case "$cmd ${{COMP_WORDS[first]}}" in
            {subs}) cmd="$cmd ${{COMP_WORDS[first]}}"; first=$((first + 1)) ;;
        esac
    fi
    case $cmd in
{tables}        *) return ;;
    esac
    if [ "$COMP_CWORD" -gt "$first" ] && [[ $takes == *" $prev "* ]]; then
        case "$cmd $prev" in
{values}        esac
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    for ((i = first; i < COMP_CWORD; i++)); do
        if [ -n "$skip" ]; then
            skip=
        elif [[ ${{COMP_WORDS[i]}} == -* ]]; then
            [[ $takes == *" ${{COMP_WORDS[i]}} "* ]] && skip=1
        else
            n=$((n + 1))
        fi
    done
    case "$cmd $n" in
{operands}    esac
}}

complete -F _mur mur {links}
"#,
        applets = applet_names(),
        subs = if subs.is_empty() {
            "\"\"".to_string()
        } else {
            subs.join("|")
        },
        links = links(),
    )
}

/// `text` for inside a zsh `_arguments` spec: `[`, `]` and `:` escaped, `'` closed and reopened.
fn zsh_quote(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace(':', "\\:")
        .replace('\'', "'\\''")
}

fn zsh_action(kind: Kind) -> String {
    match kind {
        Kind::Text => " ".into(),
        Kind::Path => "_files".into(),
        Kind::Dir => "_files -/".into(),
        Kind::Address => "_mur_addresses".into(),
        Kind::Words(words) => format!("({})", words.join(" ")),
    }
}

fn zsh() -> String {
    let mut cases = String::new();
    for (command, spec) in commands() {
        let mut specs = vec![];
        for opt in public(spec) {
            let help = format!("[{}]", zsh_quote(opt.help));
            let value = opt.value.map_or_else(String::new, |(name, kind)| {
                format!(":{}:{}", zsh_quote(name), zsh_action(kind))
            });
            specs.push(match opt.short {
                Some(c) => format!(
                    "'(-{c} --{long})'{{-{c},--{long}}}'{help}{value}'",
                    long = opt.long
                ),
                None => format!("'--{}{help}{value}'", opt.long),
            });
        }
        specs.push("'(- *)'{-h,--help}'[this text]'".into());
        let subs: Vec<&str> = spec.subcommands.iter().map(|(name, _)| *name).collect();
        for (n, kind) in spec.operands.iter().enumerate() {
            let position = if spec.repeats_at(n) {
                "*".to_string()
            } else {
                (n + 1).to_string()
            };
            let action = if n == 0 && !subs.is_empty() {
                format!("{{compadd {}; {}}}", subs.join(" "), zsh_action(*kind))
            } else {
                zsh_action(*kind)
            };
            specs.push(format!("'{position}:operand:{action}'"));
        }
        let mut case = String::new();
        if !subs.is_empty() {
            case += &format!(
                "            if (( CURRENT > 2 )) && [[ $words[2] == ({}) ]]; then\n                local sub=$words[2]\n                shift words\n                (( CURRENT-- ))\n                _mur_applet \"{command} $sub\"\n                return\n            fi\n",
                subs.join("|")
            );
        }
        case += &format!(
            "            _arguments -s \\\n                {}\n",
            specs.join(" \\\n                ")
        );
        cases += &format!("        \"{command}\")\n{case}            ;;\n");
    }
    format!(
        r#"#compdef mur {links}
# zsh completion for mur, {HEADER}
# (installed by install.sh as share/zsh/site-functions/_mur).

_mur_addresses() {{
    local -a addrs
    addrs=(${{(f)"$(mur ps --format '{{{{.capsule_name}}}}' 2>/dev/null)"}} ${{(f)"$(mur ps -q 2>/dev/null)"}})
    compadd -a addrs
}}

_mur_applet() {{
    case $1 in
{cases}        help) _arguments '1:applet:({applets})' ;;
    esac
}}

_mur() {{
    local applet=${{service#mur-}}
    if [[ $service == mur ]]; then
        if (( CURRENT == 2 )); then
            compadd {applets} help -- --list --version --help
            return
        fi
        applet=$words[2]
        shift words
        (( CURRENT-- ))
    fi
    _mur_applet $applet
}}

_mur "$@"
"#,
        applets = applet_names(),
        links = links(),
    )
}

/// `text` in fish's single quotes.
fn fish_quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn fish_value(kind: Kind) -> String {
    match kind {
        Kind::Text => "-x".into(),
        Kind::Path => "-r -F".into(),
        Kind::Dir => "-x -a '(__fish_complete_directories)'".into(),
        Kind::Address => "-x -a '(__mur_addresses)'".into(),
        Kind::Words(words) => format!("-x -a {}", fish_quote(&words.join(" "))),
    }
}

/// The fish `complete` lines of one command (its options, then its operands), and the
/// options of it that take a value (for `__mur_where`'s `switch`).
fn fish_command(command: &str, spec: &Spec) -> (String, String) {
    let takes = format!(
        "        case {}\n            set takes {}\n",
        fish_quote(command),
        spellings(spec, true).join(" ")
    );
    let cmd = fish_quote(command);
    let mut lines = String::new();
    for opt in public(spec) {
        let short = opt.short.map_or_else(String::new, |c| format!(" -s {c}"));
        let value = opt
            .value
            .map_or_else(String::new, |(_, kind)| format!(" {}", fish_value(kind)));
        lines += &format!(
            "    complete -c $c -n \"__mur_is {cmd}\" -l {}{short}{value} -d {}\n",
            opt.long,
            fish_quote(opt.help)
        );
    }
    lines += &format!("    complete -c $c -n \"__mur_is {cmd}\" -s h -l help -d 'this text'\n");
    for (n, kind) in spec.operands.iter().enumerate() {
        let more = if spec.repeats_at(n) { " more" } else { "" };
        let mut actions = vec![];
        if n == 0 {
            actions.extend(
                spec.subcommands
                    .iter()
                    .map(|(name, _)| format!("-a {}", fish_quote(name))),
            );
        }
        match kind {
            Kind::Text => {}
            Kind::Path => actions.push("-F".into()),
            other => actions.push(fish_value(*other).replace("-x ", "")),
        }
        for action in actions {
            lines += &format!("    complete -c $c -n \"__mur_operand {cmd} {n}{more}\" {action}\n");
        }
    }
    (takes, lines)
}

fn fish() -> String {
    let mut takes = String::new();
    let mut lines = String::new();
    let subs: Vec<String> = commands()
        .into_iter()
        .filter(|(c, _)| c.contains(' '))
        .map(|(c, _)| fish_quote(&c))
        .collect();
    for (command, spec) in commands() {
        let (command_takes, command_lines) = fish_command(&command, spec);
        takes += &command_takes;
        lines += &command_lines;
    }
    format!(
        r#"# fish completion for mur, {HEADER}
# (installed by install.sh as share/fish/vendor_completions.d/mur.fish).

function __mur_addresses
    mur ps --format '{{{{.capsule_name}}}}' 2>/dev/null
    mur ps -q 2>/dev/null
end

# The command being completed ('ps', 'formation call') on one line, and on the next how many
# operands come before the cursor; false while an option's value is being completed.
function __mur_where
    set -l words (commandline -opc)
    set -l cmd (string replace -r '^(.*/)?mur-?' '' -- $words[1])
    set -e words[1]
    if test -z "$cmd"
        test (count $words) -ge 1; or return 1
        set cmd $words[1]
        set -e words[1]
    end
    if test (count $words) -ge 1; and contains -- "$cmd $words[1]" {subs}
        set cmd "$cmd $words[1]"
        set -e words[1]
    end
    set -l takes
    switch $cmd
{takes}    end
    set -l n 0
    set -l skip 0
    for w in $words
        if test $skip = 1
            set skip 0
        else if string match -q -- '-*' $w
            contains -- $w $takes; and set skip 1
        else
            set n (math $n + 1)
        end
    end
    echo $cmd
    echo $n
    test $skip = 0
end

function __mur_top
    set -l words (commandline -opc)
    test (count $words) -eq 1; and string match -qr '^(.*/)?mur$' -- $words[1]
end

# __mur_is COMMAND: completing COMMAND's options or one of their values.
function __mur_is
    set -l where (__mur_where)
    test "$where[1]" = "$argv[1]"
end

# __mur_operand COMMAND N [more]: completing COMMAND's operand N (from 0), or any after it.
function __mur_operand
    set -l where (__mur_where); or return 1
    test "$where[1]" = "$argv[1]"; or return 1
    if test "$argv[3]" = more
        test $where[2] -ge $argv[2]
    else
        test $where[2] -eq $argv[2]
    end
end

for c in mur {links}
    complete -c $c -f
    complete -c $c -n __mur_top -a {top}
    complete -c $c -n __mur_top -l list -l version -l help
    complete -c $c -n '__mur_operand help 0' -a {applets}
{lines}end
"#,
        subs = subs.join(" "),
        applets = fish_quote(&applet_names()),
        top = fish_quote(&format!("{} help", applet_names())),
        links = links(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option of every applet appears in each shell's script, and in the applet's help.
    #[test]
    fn every_option_of_every_applet_is_completed_and_documented() {
        let (bash, zsh, fish) = (bash(), zsh(), fish());
        for applet in APPLETS {
            assert!(bash.contains(&format!("\"{}\") opts=", applet.name)));
            assert!(zsh.contains(&format!("\"{}\")\n", applet.name)));
            assert!(fish.contains(&format!("case '{}'\n", applet.name)));
            let mut specs = vec![applet.spec];
            specs.extend(applet.spec.subcommands.iter().map(|(_, s)| *s));
            for opt in specs.iter().flat_map(|s| public(s)) {
                let long = format!("--{}", opt.long);
                assert!(bash.contains(&format!("{long} ")), "bash lacks {long}");
                assert!(zsh.contains(&format!("'{long}[")) || zsh.contains(&format!(",{long}}}")));
                assert!(
                    fish.contains(&format!("-l {} ", opt.long)),
                    "fish lacks {long}"
                );
                assert!(
                    applet.usage.contains(&long),
                    "{} --help lacks {long}",
                    applet.name
                );
                if let Some(c) = opt.short {
                    let short = format!("-{c},");
                    assert!(
                        applet.usage.contains(&short),
                        "{} lacks {short}",
                        applet.name
                    );
                }
            }
        }
    }
}
