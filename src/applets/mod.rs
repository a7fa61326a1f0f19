//! One file per applet: its usage text, its option parsing, its main.

pub mod formation;
pub mod ps;
pub mod run;
pub mod stop;
pub mod token;

use crate::cli::Outcome;

/// One applet: how it is named, what `--help` prints, and its main, which takes the arguments
/// after the applet name.
pub struct Applet {
    pub name: &'static str,
    pub summary: &'static str,
    pub usage: &'static str,
    pub main: fn(Vec<std::ffi::OsString>) -> Outcome,
}

/// Every applet, in the order `mur --list` prints them.
pub const APPLETS: &[Applet] = &[
    run::APPLET,
    ps::APPLET,
    stop::APPLET,
    token::APPLET,
    formation::APPLET,
];
