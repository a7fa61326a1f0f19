//! `mur run`: one capsule session. Not built yet; the applet answers so rather than pretending.

use super::Applet;
use crate::cli::{Failure, Outcome};

pub const APPLET: Applet = Applet {
    name: "run",
    summary: "run one capsule session behind an A2A door (not yet built)",
    usage: "\
Usage: mur run [MANIFEST|DIR] [--task TEXT] [--json]

Run one capsule session. This applet is not built yet in this version of mur:
it exits 1 without starting anything.
",
    main,
};

fn main(_args: Vec<std::ffi::OsString>) -> Outcome {
    Err(Failure::Failed(
        "not yet built in this version of mur".into(),
    ))
}
