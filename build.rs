//! Embeds what `mur --version` names besides the version: the target triple the binary was built
//! for, and the git commit when the source is a git checkout.
//!
//! A tarball build has no `.git`; it still builds, and `--version` says the commit is unknown
//! rather than inventing one. The target comes from cargo, so a cross build names the machine it
//! runs on, not the one it was built on.

use std::process::Command;

/// One line of `git rev-parse ARGS` in the source tree, or `None` without git or a checkout.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MUR_GIT_COMMIT={commit}");
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=MUR_TARGET={target}");
    // Rebuild when HEAD moves. Asked of git rather than assumed to be `.git/HEAD`: in a linked
    // worktree `.git` is a file and HEAD lives in the worktree's own git directory, while the
    // refs a branch commit moves are shared. Only paths that exist: cargo reruns the script on
    // every build for a missing one (a checkout without `packed-refs`, say).
    for file in ["HEAD", "refs", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file])
            .filter(|path| std::path::Path::new(path).exists())
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
