//! The integration tests: one crate, one binary (`it`), one module per area, as ripgrep does.
//! Every test starts the real `mur` binary with `HOME` a fresh temporary directory.
//!
//! One binary rather than one per file: each test binary links the whole support code and its
//! dependencies, so a change to `src/` relinked 27 of them; now it relinks one. Run one module
//! with `cargo test --test it stop::`, one test with its full name.
//!
//! One crate also means one process: every test here shares the process's global state with
//! every other module's tests running beside it. Nothing here may change that state for the
//! whole process while other tests run (environment, working directory, signal dispositions,
//! umask, rlimits, the child-subreaper flag): a test that needs such a change makes it in a child
//! (`pre_exec`, `sh -c 'umask 000; …'`) or runs alone in a process of its own
//! (`common::alone::own_process`, as the subreaper tests do); a resource shared across modules
//! (uid 65534's process allowance) is taken under one lock (`common::alone::as_nobody`).

// Test scaffolding provokes the kernel directly (kill, prctl, waitpid, setrlimit, landlock and
// seccomp probes); each block says why it is sound. `unsafe` stays denied in the product,
// outside `src/sys`.
#![allow(unsafe_code)]

#[path = "../common/mod.rs"]
mod common;
/// The A2A SDK clients' harness, shared by the `a2a_sdk*` modules.
#[path = "../sdk/interop.rs"]
mod interop;
/// `kubernetes`'s fixtures: the emitted objects, network namespaces, podman.
#[path = "../kube/mod.rs"]
mod kube;

mod a2a_sdk;
mod a2a_sdk_js;
mod a2a_sdk_v1;
mod bounds;
mod budget;
mod chaos;
mod cli;
mod door_a2a;
mod door_events;
mod door_input;
mod ended;
mod engine;
mod examples;
mod faults;
mod formation;
mod handler_user;
mod hardening;
mod home_trust;
mod install;
mod kubernetes;
mod leaks;
mod logs;
mod parity;
mod ps;
mod push;
mod races;
mod rest;
mod run;
// Landlock and seccomp are Linux's; elsewhere there is no sandbox to test.
#[cfg(target_os = "linux")]
mod sandbox;
mod service;
mod stop;
mod store;
mod streaming;
mod supervision;
mod tasks_rich;
mod token;
mod ulimit;
