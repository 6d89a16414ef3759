//! The collector's integration tests: its handlers in process, and the `storwatch-collector`
//! binary against real InfluxDB, Prometheus and client programs and against hostile peers.
//!
//! One test binary for all of them, each file a module (`cargo test -p <crate> --test it
//! <module>::`): one binary links once, where a binary per file linked the crate and its
//! dependencies again for each. Tests of different modules run at the same time in one process:
//! each module's fixed ports are its own (no other module of this binary uses them), and no test
//! changes what the process shares (its environment, working directory, umask, signal handlers)
//! but its limit of open files, raised, which only helps the others.

mod app;
mod bench_smoke;
mod clients;
mod forward_window;
mod full_disk;
mod hostile;
mod hostile_outputs;
mod influx;
mod influx_setup;
mod lp_differential;
mod outputs;
mod refusals;
mod remote_write;
mod remote_write_resend;
mod tls;
