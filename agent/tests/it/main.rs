//! The agent's integration tests: the `storwatch-agent` binary on fixture roots, simulated hosts
//! and this machine, and the library's sinks against scripted servers.
//!
//! One test binary for all of them, each file a module (`cargo test -p <crate> --test it
//! <module>::`): one binary links once, where a binary per file linked the crate and its
//! dependencies again for each. Tests of different modules run at the same time in one process:
//! each module's fixed ports are its own (no other module of this binary uses them), and no test
//! changes what the process shares (its environment, working directory, umask, signal handlers)
//! but its limit of open files, raised, which only helps the others.
//!
//! Not here, each a binary of its own because it changes what the agent's library does for its
//! whole process, and tests here start commands through that library (`top`):
//! `tests/dying_commands.rs` fills the process's count of killed commands not yet reaped, and
//! `tests/commands_at_exit.rs` runs the agent's cleanup at exit, after which the process refuses
//! every new command (with it here, `top`'s tests saw every zpool and dmsetup call refused).
//! `tests/prometheus_hostile.rs` measures the agent's sampling cadence beside thousands of
//! hostile connections: next to another test of this binary on two cores its debug build lost
//! reports.

mod dead_mount;
mod delivery;
mod drive_agent;
mod drive_rebuild_risk;
mod drive_without_smartctl;
mod hwraid_agent;
mod jobs;
mod mount_tags;
mod procfs_core_agrees;
mod prometheus_big_page;
mod signals;
mod top;
mod whole_agent;
