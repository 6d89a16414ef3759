//! The wire crate's integration tests: line protocol round trips, the segment log on a full
//! filesystem, and queues written by older code.
//!
//! One test binary for all of them, each file a module (`cargo test -p <crate> --test it
//! <module>::`): one binary links once, where a binary per file linked the crate and its
//! dependencies again for each. Tests of different modules run at the same time in one process:
//! each module's fixed ports are its own (no other module of this binary uses them), and no test
//! changes what the process shares (its environment, working directory, umask, signal handlers).

mod full_disk;
mod legacy_formats;
mod lp_roundtrip;
