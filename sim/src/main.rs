//! `storwatch-sim`: writes an evolving fake /proc + /sys tree for a named scenario, for one
//! host or a fleet. See docs/simulator.md.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use storwatch_agent::sink::http::HttpConfig;
use storwatch_sim::agents;
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
    /// Many agents in one process: each simulated host's reports through its own HTTP sink and
    /// spool (the agent's delivery code), for a site-scale soak. See docs/simulator.md.
    Agents(AgentsArgs),
}

#[derive(Args, Debug)]
struct AgentsArgs {
    /// Number of hosts.
    #[arg(long, default_value_t = 60)]
    hosts: usize,
    /// Host names are PREFIX-0001, PREFIX-0002, …
    #[arg(long, default_value = "soak")]
    prefix: String,
    /// Write URL (collector or InfluxDB) of every host but the rack's.
    #[arg(long)]
    url: String,
    /// Write URL of the last --rack-hosts hosts (a rack a harness can cut off).
    #[arg(long)]
    rack_url: Option<String>,
    /// Hosts in the rack (the last ones).
    #[arg(long, default_value_t = 0)]
    rack_hosts: usize,
    /// Hosts (the first ones) whose clock follows `clock_offset_s N` in --control.
    #[arg(long, default_value_t = 0)]
    stepped_hosts: usize,
    /// Control file, re-read every 250 ms: `clock_offset_s N`.
    #[arg(long)]
    control: Option<PathBuf>,
    /// Directory of the spools (spool/<host>/), produced.log and status.json.
    #[arg(long)]
    state: PathBuf,
    /// Token file sent as `Authorization: Token …`.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// CA certificates of an https:// URL.
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Each sink's longest retry delay, seconds (the agent's default is 60).
    #[arg(long, default_value_t = 60.0)]
    backoff_max_s: f64,
    /// Each sink's request timeout, seconds.
    #[arg(long, default_value_t = 10.0)]
    timeout_s: f64,
    /// Seconds between reports.
    #[arg(long, default_value_t = 10.0)]
    report_interval_s: f64,
    /// Stop producing after this many seconds (default: run until killed).
    #[arg(long)]
    duration: Option<f64>,
    /// Once producing stops, wait this many seconds at most for every spool to drain.
    #[arg(long, default_value_t = 300.0)]
    drain_timeout: f64,
    /// Extra tag on every line, KEY=VALUE (repeatable).
    #[arg(long = "tag", value_parser = parse_tag)]
    tags: Vec<(String, String)>,
}

fn parse_tag(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?}: expected KEY=VALUE")),
    }
}

fn secs(name: &str, v: f64) -> Result<Duration> {
    if v.is_finite() && v > 0.0 && v < 1e9 {
        Ok(Duration::from_secs_f64(v))
    } else {
        bail!("--{name} {v}: expected a positive number of seconds")
    }
}

/// `storwatch-sim agents`: exits 0 when every spool drained after the run, 2 when some did not.
fn agents(a: AgentsArgs) -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let cfg = agents::FleetConfig {
        hosts: a.hosts,
        prefix: a.prefix,
        url: a.url,
        rack_url: a.rack_url,
        rack_hosts: a.rack_hosts,
        stepped_hosts: a.stepped_hosts,
        control: a.control,
        state: a.state,
        http: HttpConfig {
            token_file: a.token_file,
            ca_file: a.ca_file,
            backoff_max_s: a.backoff_max_s,
            timeout_s: a.timeout_s,
            ..HttpConfig::default()
        },
        interval: secs("report-interval-s", a.report_interval_s)?,
        duration: a.duration.map(|d| secs("duration", d)).transpose()?,
        drain_timeout: secs("drain-timeout", a.drain_timeout)?,
        tags: a.tags,
    };
    eprintln!(
        "storwatch-sim agents: {} hosts, state in {}",
        cfg.hosts,
        cfg.state.display()
    );
    let status = agents::run(&cfg).context("running the agents")?;
    eprintln!(
        "storwatch-sim agents: {} reports, {} lines, {} delivered, {} dropped, drained: {}",
        status.reports,
        status.lines,
        status.delivered_lines,
        status.dropped_lines,
        status.drained == Some(true)
    );
    if status.drained != Some(true) {
        eprintln!(
            "storwatch-sim agents: not drained: {}",
            status.undrained_hosts.join(" ")
        );
        std::process::exit(2);
    }
    Ok(())
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
        Some(Cmd::Agents(a)) => agents(a),
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
