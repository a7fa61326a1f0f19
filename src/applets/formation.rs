//! `mur formation`: a formation. Not built yet; the applet answers so rather than pretending.

use super::Applet;
use crate::cli::{Failure, Outcome};

pub const APPLET: Applet = Applet {
    name: "formation",
    summary: "run a roster of capsules as one unit (not yet built)",
    usage: "\
Usage: mur formation [ROSTER] [--task TEXT] [--json]

Launch a formation. This applet is not built yet in this version of mur:
it exits 1 without starting anything.
",
    main,
};

fn main(_args: Vec<std::ffi::OsString>) -> Outcome {
    Err(Failure::Failed(
        "not yet built in this version of mur".into(),
    ))
}
