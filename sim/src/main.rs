//! `storwatch-sim`: writes an evolving fake /proc + /sys tree for a named scenario, for one
//! host or a fleet. See docs/simulator.md.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use storwatch_sim::scenario::{Kind, ALL};
use storwatch_sim::sim::{self, Sim};

#[derive(Parser, Debug)]
#[command(
    name = "storwatch-sim",
    version,
    about = "Simulated storage hosts for storwatch-agent (--proc-root DIR/proc --sys-root DIR/sys)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Print the scenarios, one line each, and exit.
    #[arg(long)]
    list: bool,
    /// Directory to write the host's tree into (proc/, sys/, bin/, run/, host).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Scenario to run (see --list).
    #[arg(long)]
    scenario: Option<String>,
    /// Host name written to <root>/host (default: sim-<scenario>).
    #[arg(long)]
    host: Option<String>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Many hosts at once: <root>/<host>/… for each scenario and host.
    Fleet {
        /// Directory holding one subdirectory per host.
        #[arg(long)]
        root: PathBuf,
        /// Hosts per scenario.
        #[arg(long, default_value_t = 1)]
        hosts_per_scenario: usize,
        /// Comma-separated scenarios (default: all).
        #[arg(long, value_delimiter = ',')]
        scenarios: Vec<String>,
        #[command(flatten)]
        run: RunArgs,
    },
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Seed of the random variation (same seed, same run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds of wall time (default: run until killed).
    #[arg(long)]
    duration: Option<f64>,
    /// Run the scenario's timeline N times faster (gaps between events; each tick stays one
    /// second of device time).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Write the first state and exit.
    #[arg(long)]
    once: bool,
    /// Write N consecutive states (uptime +1 s each) as fast as possible and exit.
    #[arg(long)]
    steps: Option<u64>,
}

fn kind(name: &str) -> Result<Kind> {
    match Kind::parse(name) {
        Some(k) => Ok(k),
        None => bail!(
            "unknown scenario {name:?}; known: {}",
            ALL.map(Kind::name).join(", ")
        ),
    }
}

fn run(sims: &mut [Sim], a: &RunArgs) -> Result<()> {
    if a.once {
        return Ok(());
    }
    if let Some(n) = a.steps {
        for _ in 0..n {
            for s in sims.iter_mut() {
                s.step()
                    .with_context(|| format!("writing {}", s.root().display()))?;
            }
        }
        return Ok(());
    }
    let duration = match a.duration {
        Some(d) if d.is_finite() && d >= 0.0 => Some(Duration::from_secs_f64(d)),
        Some(d) => bail!("--duration {d}: not a number of seconds"),
        None => None,
    };
    sim::run_realtime(sims, duration).context("writing the simulated hosts")
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if cli.list {
        for k in ALL {
            println!("{:<18} {}", k.name(), k.about());
        }
        return Ok(());
    }
    if !(cli.run.speed.is_finite() && cli.run.speed >= 1.0) {
        bail!("--speed must be at least 1");
    }
    match cli.cmd {
        Some(Cmd::Fleet {
            root,
            hosts_per_scenario,
            scenarios,
            run: a,
        }) => {
            if !(a.speed.is_finite() && a.speed >= 1.0) {
                bail!("--speed must be at least 1");
            }
            let kinds: Vec<Kind> = if scenarios.is_empty() {
                ALL.to_vec()
            } else {
                scenarios
                    .iter()
                    .map(|s| kind(s.trim()))
                    .collect::<Result<_>>()?
            };
            let mut sims = sim::fleet(&root, &kinds, hosts_per_scenario, a.seed, a.speed)
                .with_context(|| format!("creating the fleet under {}", root.display()))?;
            eprintln!(
                "storwatch-sim: {} hosts under {}",
                sims.len(),
                root.display()
            );
            run(&mut sims, &a)
        }
        None => {
            let Some(root) = cli.root else {
                bail!("--root DIR is required (or --list, or the fleet subcommand)");
            };
            let Some(name) = cli.scenario else {
                bail!("--scenario NAME is required (see --list)");
            };
            let k = kind(&name)?;
            let host = cli.host.unwrap_or_else(|| format!("sim-{}", k.name()));
            let mut sims = vec![Sim::new(&root, k, &host, cli.run.seed, cli.run.speed)
                .with_context(|| format!("creating {}", root.display()))?];
            run(&mut sims, &cli.run)
        }
    }
}
