//! The command line every applet shares (issue 32): suggestions for a mistyped applet or option,
//! exit 2 for every usage error, one duration syntax for every time an option takes, and the
//! shell completions — the shipped files are what `mur completions SHELL` writes, and bash and
//! fish, run for real, offer each applet's options and, where an address goes, the sessions.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{
    home::{Home, repo},
    run::{mur_bin, run},
    skip::skipped,
};

/// The applets, as `mur --list` prints them.
fn applets(home: &Home) -> Vec<String> {
    let out = home.mur(&["--list"]);
    out.expect_code(0);
    out.stdout.lines().map(String::from).collect()
}

/// Each command line of `mur APPLET --help`'s synopsis (`mur formation ready`, say) with the
/// options it shows (`--formation-dir`, `-q`).
fn synopsis(home: &Home, applet: &str) -> Vec<(Vec<String>, BTreeSet<String>)> {
    let help = home.mur(&[applet, "--help"]);
    help.expect_code(0);
    let mut commands: Vec<(Vec<String>, BTreeSet<String>)> = vec![];
    for line in help.stdout.lines().take_while(|l| !l.is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(at) = words.iter().position(|w| *w == "mur") {
            // `mur APPLET` and the sub-command words after it (`call`, `ready`).
            let command = words[at + 1..]
                .iter()
                .enumerate()
                .take_while(|(i, w)| *i == 0 || w.chars().all(|c| c.is_ascii_lowercase()))
                .map(|(_, w)| w.to_string())
                .collect();
            commands.push((command, BTreeSet::new()));
        }
        let options = &mut commands.last_mut().expect("Usage: mur ...").1;
        for word in line.split(|c: char| " []|.".contains(c)) {
            let long = word.starts_with("--") && word.len() > 2;
            let short = word.len() == 2 && word.starts_with('-') && word != "--";
            if long || short {
                options.insert(word.split('=').next().unwrap().to_string());
            }
        }
    }
    commands
}

#[test]
fn a_mistyped_applet_or_option_gets_a_suggestion_and_its_exit_code() {
    let home = Home::new();
    // An unknown applet is 127 (DESIGN.md), with the nearest one suggested.
    for args in [&["sotp"][..], &["help", "sotp"]] {
        let out = home.mur(args);
        out.expect_code(127);
        assert!(
            out.stderr.contains("'sotp' is not an applet")
                && out.stderr.contains("did you mean 'stop'?"),
            "{args:?}: {}",
            out.stderr
        );
    }
    let far = home.mur(&["zzzzzz"]);
    far.expect_code(127);
    assert!(!far.stderr.contains("did you mean"), "{}", far.stderr);
    // Through a link too.
    let link = home.path().join("mur-sotp");
    std::os::unix::fs::symlink(mur_bin(), &link).unwrap();
    let mut command = Command::new(&link);
    command.env_clear().stdin(Stdio::null());
    let out = run(command, std::time::Duration::from_secs(10));
    out.expect_code(127);
    assert!(
        out.stderr.contains("did you mean 'stop'?"),
        "{}",
        out.stderr
    );

    // An unknown option of mur itself is a usage error.
    let out = home.mur(&["--versoin"]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("unknown option '--versoin'; did you mean '--version'?")
            && out.stderr.contains("Try 'mur --help'"),
        "{}",
        out.stderr
    );
    home.mur(&["-x"]).expect_code(2);

    // Every applet: an unknown option is exit 2, and a typo of one of its own options (two
    // letters swapped) names the option meant.
    for applet in applets(&home) {
        let out = home.mur(&[&applet, "--no-such-option"]);
        out.expect_code(2);
        assert!(
            out.stderr
                .contains(&format!("mur {applet}: unknown option '--no-such-option'"))
                && out.stderr.contains(&format!("Try 'mur {applet} --help'")),
            "{applet}: {}",
            out.stderr
        );
        for (command, options) in synopsis(&home, &applet) {
            let Some(option) = options.iter().find(|o| o.len() >= 7) else {
                continue;
            };
            let mut typo: Vec<char> = option.chars().collect();
            typo.swap(3, 4);
            let typo: String = typo.into_iter().collect();
            let mut args: Vec<&str> = command.iter().map(String::as_str).collect();
            args.push(&typo);
            let out = home.mur(&args);
            out.expect_code(2);
            assert!(
                out.stderr.contains(&format!("did you mean '{option}'?")),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn every_time_an_option_takes_reads_units_and_bare_seconds() {
    let home = Home::patient();
    for duration in ["500ms", "2s", "1m", "1h", "3"] {
        let session = home.start(&[]);
        let out = home.mur(&["stop", "-t", duration, &session.id]);
        out.expect_code(0);
        assert!(
            out.stdout.starts_with("stopped: "),
            "{duration}: {}",
            out.stdout
        );
    }
    // The same parser for --ready-timeout: a good duration gets as far as the roster.
    for duration in ["90s", "2m", "180"] {
        let out = home.mur(&["formation", "no-roster.json", "--ready-timeout", duration]);
        out.expect_code(1);
    }
    for (args, says) in [
        (&["stop", "--all", "--timeout", "10x"][..], "not '10x'"),
        (&["stop", "--all", "--timeout", "1.5s"], "not '1.5s'"),
        (&["stop", "--all", "--timeout", "400d"], "out of range"),
        (
            &["formation", "r.json", "--ready-timeout", "0s"],
            "out of range",
        ),
        (
            &["formation", "r.json", "--ready-timeout", "s"],
            "500ms, 10s, 2m, 1h",
        ),
    ] {
        let out = home.mur(args);
        out.expect_code(2);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
}

/// The shipped completion files are, byte for byte, what the binary writes from its table.
#[test]
fn the_shipped_completions_are_what_mur_completions_writes() {
    let home = Home::new();
    for (shell, file) in [
        ("bash", "completions/mur.bash"),
        ("zsh", "completions/_mur"),
        ("fish", "completions/mur.fish"),
    ] {
        let out = home.mur(&["completions", shell]);
        out.expect_code(0);
        let shipped = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(
            out.stdout == shipped,
            "{file} is stale: run 'cargo run -- completions {shell} > {file}'"
        );
    }
    let out = home.mur(&["completions", "bsh"]);
    out.expect_code(2);
    assert!(
        out.stderr.contains("did you mean 'bash'?"),
        "{}",
        out.stderr
    );
    home.mur(&["completions"]).expect_code(2);
}

/// `PATH` with the built `mur` first.
fn path_with_mur() -> std::ffi::OsString {
    let dir = Path::new(mur_bin()).parent().unwrap();
    let mut path = std::ffi::OsString::from(dir);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

/// `shell ARGS…` in the repository (where completions/ is), with the home's `HOME` and the
/// built `mur` first on `PATH`: the completions' own `mur ps` calls list the home's sessions.
fn shell(home: &Home, shell: &str, args: &[&str]) -> Command {
    let mut command = Command::new(shell);
    command
        .args(args)
        .current_dir(repo())
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", path_with_mur())
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    command
}

/// What bash's completion offers for `line` (the words before the cursor, then the one being
/// completed), with completions/mur.bash loaded and the home's sessions running.
fn bash_offers(home: &Home, line: &[&str]) -> BTreeSet<String> {
    let words = line
        .iter()
        .map(|w| format!("'{w}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        "source completions/mur.bash\nCOMP_WORDS=({words})\nCOMP_CWORD={}\n_mur\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        line.len() - 1
    );
    let out = shell(home, "bash", &["--norc", "--noprofile", "-c", &script])
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// What fish's completion offers for `line`, with completions/mur.fish loaded; `None` without
/// fish.
fn fish_offers(home: &Home, line: &str) -> Option<BTreeSet<String>> {
    let script = format!("source completions/mur.fish; complete -C '{line}'");
    let out = shell(home, "fish", &["--no-config", "-c", &script])
        .output()
        .ok()?;
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect(),
    )
}

#[test]
fn bash_and_fish_complete_every_option_of_every_applet_and_addresses_only_where_one_goes() {
    let home = Home::patient();
    let session = home.start(&[]);
    let addresses: BTreeSet<String> = ["echo".to_string(), session.id.clone()].into();
    let has_fish = Command::new("fish").arg("--version").output().is_ok();

    // Every option each applet's synopsis shows, offered after `-` by both shells.
    for applet in applets(&home) {
        for (command, options) in synopsis(&home, &applet) {
            let mut line: Vec<&str> = vec!["mur"];
            line.extend(command.iter().map(String::as_str));
            line.push("-");
            let offered = bash_offers(&home, &line);
            let missing: Vec<_> = options.difference(&offered).collect();
            assert!(
                missing.is_empty(),
                "bash {line:?} lacks {missing:?}: {offered:?}"
            );
            if has_fish {
                let offered = fish_offers(&home, &line.join(" ")).unwrap();
                let missing: Vec<_> = options.difference(&offered).collect();
                assert!(
                    missing.is_empty(),
                    "fish {line:?} lacks {missing:?}: {offered:?}"
                );
            }
        }
    }

    let set = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<BTreeSet<_>>();
    let actions = set(&["show", "set", "secret", "forget"]);
    for (line, expected) in [
        (&["mur", "sto"][..], set(&["stop"])),
        (&["mur", "control", ""], addresses.clone()),
        (&["mur", "control", "echo", ""], actions.clone()),
        (&["mur", "control", "echo", "show", ""], set(&[])),
        (&["mur", "stop", "echo", ""], addresses.clone()),
        (&["mur", "stop", "-t", "5s", ""], addresses.clone()),
        (&["mur", "token", "echo", ""], set(&[])),
        (
            &["mur", "ps", "--status", ""],
            set(&["running", "unreachable", "exited", "killed", "gone"]),
        ),
        (&["mur", "formation", "--emit", ""], set(&["kubernetes"])),
        (&["mur", "completions", ""], set(&["bash", "zsh", "fish"])),
        (&["mur-control", "echo", ""], actions),
    ] {
        assert_eq!(bash_offers(&home, line), expected, "bash {line:?}");
        if has_fish {
            let offered = fish_offers(&home, &line.join(" ")).unwrap();
            assert_eq!(offered, expected, "fish {line:?}");
        }
    }
    if !has_fish {
        skipped(
            "bash_and_fish_complete_every_option_of_every_applet_and_addresses_only_where_one_goes",
            "no fish here (Debian: fish): only bash's completion was run",
        );
    }
}

#[test]
fn the_zsh_completion_parses_and_lists_every_option_of_every_applet() {
    let home = Home::new();
    let script = std::fs::read_to_string(repo().join("completions/_mur")).unwrap();
    for applet in applets(&home) {
        assert!(script.contains(&format!("\"{applet}\")\n")), "{applet}");
        for (_, options) in synopsis(&home, &applet) {
            for option in options.iter().filter(|o| o.starts_with("--")) {
                assert!(
                    script.contains(&format!("'{option}["))
                        || script.contains(&format!(",{option}}}")),
                    "zsh lacks {applet} {option}"
                );
            }
        }
    }
    match Command::new("zsh")
        .arg("-n")
        .arg(repo().join("completions/_mur"))
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => skipped(
            "the_zsh_completion_parses_and_lists_every_option_of_every_applet",
            "no zsh here (Debian: zsh): its script was not parsed",
        ),
    }
}
