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
//! Not here: `tests/dying_commands.rs`, a binary of its own, since it counts the commands its
//! whole process has killed and not yet reaped, and tests here start commands through the agent's
//! library (`top`, the whole-agent tests).

mod commands_at_exit;
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
mod prometheus_hostile;
mod signals;
mod top;
mod whole_agent;
