//! The simulator's integration tests: its kernel files keep the kernel's invariants, and the real
//! agent reads the scenarios as they are meant.
//!
//! One test binary for all of them, each file a module (`cargo test -p <crate> --test it
//! <module>::`): one binary links once, where a binary per file linked the crate and its
//! dependencies again for each. Tests of different modules run at the same time in one process:
//! each module's fixed ports are its own (no other module of this binary uses them), and no test
//! changes what the process shares (its environment, working directory, umask, signal handlers).

mod agent_on_drives;
mod agent_on_scenarios;
mod consistency;
mod jobs;
