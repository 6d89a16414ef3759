//! `storwatch-agent`: the command line and the loops (run, once, top).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use storwatch_agent::assemble;
use storwatch_agent::clock::{self, sleep_until, wall_ns, Woke};
use storwatch_agent::collect::Live;
use storwatch_agent::command::at_exit;
use storwatch_agent::config::{self, Config};
use storwatch_agent::duration;
use storwatch_agent::prometheus;
use storwatch_agent::scheduler::Scheduler;
use storwatch_agent::sink::{self, OutputSpec, Sink};
use storwatch_agent::startup_code;
use storwatch_agent::{selfstat, top};
use storwatch_wire::lp::LineWriter;

/// Per-node storage and network monitoring: iostat/sar-exact rates every second, burst-preserving
/// reports as InfluxDB line protocol.
#[derive(Debug, Parser)]
#[command(name = "storwatch-agent", version, about, long_about = None)]
struct Cli {
    /// Configuration file (TOML). The default path may be absent; a named one must exist.
    #[arg(long, short = 'c', global = true, value_name = "PATH")]
    config: Option<PathBuf>,

    /// Print the commented default configuration and exit.
    #[arg(long)]
    print_default_config: bool,

    #[command(flatten)]
    overrides: Overrides,

    #[command(subcommand)]
    command: Option<Command>,
}

/// Flags that override the configuration file.
#[derive(Debug, Clone, Args)]
struct Overrides {
    /// Read the proc tree from DIR instead of /proc.
    #[arg(long, global = true, value_name = "DIR")]
    proc_root: Option<PathBuf>,
    /// Read the sys tree from DIR instead of /sys.
    #[arg(long, global = true, value_name = "DIR")]
    sys_root: Option<PathBuf>,
    /// Sampling interval (e.g. 1s, 500ms).
    #[arg(long, global = true, value_parser = duration::parse)]
    sample_interval: Option<Duration>,
    /// Report interval, a whole multiple of the sampling interval (e.g. 10s).
    #[arg(long, global = true, value_parser = duration::parse)]
    report_interval: Option<Duration>,
    /// %util at or above which a second counts as saturated.
    #[arg(long, global = true, value_name = "PCT")]
    saturation_threshold: Option<f64>,
    /// Output: '-' (stdout), 'file:PATH', or an http(s):// write URL.
    #[arg(long, short = 'o', global = true)]
    output: Option<String>,
    /// Value of the host tag (default: the hostname).
    #[arg(long, global = true)]
    host: Option<String>,
    /// Extra tag on every line, KEY=VALUE (repeatable).
    #[arg(long = "tag", global = true, value_name = "KEY=VALUE")]
    tags: Vec<String>,
    /// Log level (error, warn, info, debug, trace).
    #[arg(long, global = true)]
    log_level: Option<String>,
    /// HTTP output: file holding the token sent as `Authorization: Token …`.
    #[arg(long, global = true, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// HTTP output: directory of the durable spool.
    #[arg(long, global = true, value_name = "DIR")]
    spool_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sample and report until stopped (SIGTERM/SIGINT flush the output first).
    Run,
    /// Sample one report interval, print the report, exit (SIGTERM/SIGINT end it at once).
    Once,
    /// Live view of the iostat -x and sar -n DEV columns, busiest devices first.
    Top(TopArgs),
}

#[derive(Debug, Args)]
struct TopArgs {
    /// Stop after N screens (default: until `q` or interrupted).
    #[arg(long, short = 'n')]
    count: Option<u64>,
    /// One screen and exit (`--count 1`).
    #[arg(long, conflicts_with = "count")]
    once: bool,
    /// Devices shown at most (the first in sort order; fewer when the terminal is short).
    #[arg(long, default_value_t = 40)]
    devices: usize,
    /// Print screens one after another instead of redrawing (for logs and pipes).
    #[arg(long)]
    no_clear: bool,
    /// Columns to fit (default: the terminal's width, else $COLUMNS, else every column).
    #[arg(long, value_name = "COLS", value_parser = clap::value_parser!(u16).range(1..))]
    width: Option<u16>,
    /// Initial sort: util, await, read, write, iops or name (keys u a r w i n).
    #[arg(long, default_value = "util", value_parser = parse_sort)]
    sort: top::SortKey,
    /// Start with the MD / multipath / zpool pane hidden (key h shows it).
    #[arg(long)]
    no_health: bool,
}

fn parse_sort(s: &str) -> Result<top::SortKey, String> {
    top::SortKey::parse(s).ok_or_else(|| {
        let names: Vec<&str> = top::SortKey::ALL.iter().map(|k| k.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn main() {
    one_malloc_arena();
    // Before any thread: the commands the agent starts inherit it, with no copy per child.
    storwatch_agent::command::set_c_locale();
    // The commands still running and the monitors' private directories do not outlive the
    // agent, however it ends: a panic here, the rest below.
    at_exit::install_panic_hook();
    let r = real_main();
    at_exit::cleanup_and_log();
    if let Err(e) = r {
        eprintln!("storwatch-agent: {e:#}");
        std::process::exit(1);
    }
}

/// glibc gives each thread that allocates a malloc arena of its own (up to 8 per core), and
/// memory freed in one is reused by that thread only: the drive and RAID monitors' threads, which
/// parse a smartctl or storcli document now and then, each kept 200–700 kB of such pages. The
/// agent's threads allocate little and seldom at once, so one arena for all of them costs no
/// measurable waiting and keeps what one frees for the others (some 0.55 MiB less resident with
/// every monitor on; docs/performance.md).
///
/// Blocks of [`MMAP_THRESHOLD`] and more are mapped on their own and unmapped when freed. glibc
/// starts there too, but raises the threshold to the size of each such block freed, so that the
/// next ones of that size come from the heap; there the `/metrics` page and what made it, freed
/// between reports, left holes that small allocations then pinned (14.3–14.9 MiB of heap
/// resident with the HTTP output and `/metrics`, 2.7 MiB with the HTTP output alone;
/// docs/performance.md).
/// Setting it keeps it where it is.
fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets an allocator parameter; it is called before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// See [`one_malloc_arena`]: glibc's own starting threshold, 128 KiB.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 << 10;

fn real_main() -> Result<()> {
    let mut cli = Cli::parse();
    if cli.print_default_config {
        print!("{}", config::DEFAULT_CONFIG);
        return Ok(());
    }
    let Some(command) = cli.command.take() else {
        bail!("no command given: use `run`, `once` or `top` (see --help)");
    };
    let cfg = load_config(&cli)?;
    init_logging(&cfg.log_level);
    match command {
        Command::Run => run(cfg, &|| load_config(&cli)),
        Command::Once => once(&cfg),
        Command::Top(args) => top_loop(&cfg, &args),
    }
}

/// The configuration file (or the defaults) with the command line's flags on top, checked; read
/// at start and again on SIGHUP.
fn load_config(cli: &Cli) -> Result<Config> {
    let (path, required) = match &cli.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(config::DEFAULT_PATH), false),
    };
    let mut cfg = Config::load(&path, required)?;
    apply(&mut cfg, cli.overrides.clone())?;
    cfg.validate()?;
    if cfg.host.is_empty() {
        cfg.host = selfstat::hostname();
    }
    for (dir, what) in [(&cfg.proc_root, "proc"), (&cfg.sys_root, "sys")] {
        if !dir.is_dir() {
            bail!("{what} root {} is not a directory", dir.display());
        }
    }
    Ok(cfg)
}

fn apply(cfg: &mut Config, o: Overrides) -> Result<()> {
    if let Some(v) = o.proc_root {
        cfg.proc_root = v;
    }
    if let Some(v) = o.sys_root {
        cfg.sys_root = v;
    }
    if let Some(v) = o.sample_interval {
        cfg.sample_interval = v;
    }
    if let Some(v) = o.report_interval {
        cfg.report_interval = v;
    }
    if let Some(v) = o.saturation_threshold {
        cfg.saturation_threshold_pct = v;
    }
    if let Some(v) = o.output {
        cfg.output = v;
    }
    if let Some(v) = o.host {
        cfg.host = v;
    }
    if let Some(v) = o.log_level {
        cfg.log_level = v;
    }
    if let Some(v) = o.token_file {
        cfg.http.token_file = Some(v);
    }
    if let Some(v) = o.spool_dir {
        cfg.http.spool_dir = v;
    }
    for t in o.tags {
        let Some((k, v)) = t.split_once('=') else {
            bail!("--tag {t:?}: expected KEY=VALUE");
        };
        cfg.tags.insert(k.to_owned(), v.to_owned());
    }
    Ok(())
}

fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

fn open_sink(cfg: &Config) -> Result<Box<dyn Sink>> {
    let spec: OutputSpec = cfg.output.parse()?;
    Ok(sink::open(&spec, &cfg.http, &cfg.file)?)
}

fn writer(cfg: &Config) -> LineWriter {
    let tags: Vec<(String, String)> = cfg
        .tags
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    LineWriter::new(&cfg.host, &tags)
}

/// The daemon loop: samples on wall-clock multiples of the sample interval (so every agent of a
/// site samples at the same instants) and reports on multiples of the report interval, each
/// report stamped with the end of its interval.
///
/// SIGTERM/SIGINT: the interval so far is reported (marked partial), the output flushed.
/// SIGHUP: the configuration is read again (`reload`); when it changed, the interval so far is
/// reported as partial and sampling starts over with the new one. A configuration that does not
/// load keeps the running one, with an error in the log.
fn run(mut cfg: Config, reload: &dyn Fn() -> Result<Config>) -> Result<()> {
    let sig = clock::signals().context("installing signal handlers")?;
    let (stop, reload_flag) = (&sig.stop, &sig.reload);
    let mut sink = open_sink(&cfg)?;
    let exporter = match cfg.prometheus.listen.as_str() {
        "" => None,
        listen => Some(
            prometheus::Exporter::start(&cfg.prometheus)
                .with_context(|| format!("[prometheus] listen = {listen:?}"))?,
        ),
    };
    let mut sampler = Scheduler::new(&cfg, assemble::storage(&cfg, false));
    let start = Instant::now();
    tracing::info!(
        host = %cfg.host,
        proc = %cfg.proc_root.display(),
        sys = %cfg.sys_root.display(),
        output = %cfg.output,
        sample = %duration::format(cfg.sample_interval),
        report = %duration::format(cfg.report_interval),
        "storwatch-agent {} starting", env!("CARGO_PKG_VERSION")
    );
    sampler.sample(0.0);
    let mut sample_ns = i64::try_from(cfg.sample_interval.as_nanos()).unwrap_or(i64::MAX);
    let mut report_ns = i64::try_from(cfg.report_interval.as_nanos()).unwrap_or(i64::MAX);
    let mut next = (wall_ns() / sample_ns + 1) * sample_ns;
    let mut last_tick = next - sample_ns;
    let mut reported_once = false;
    let mut released_again = false;
    // One writer for every report (made again when the host or the common tags change): a
    // report is written into the buffer the last one grew, with no growth or page fault.
    let mut kept: Option<(String, BTreeMap<String, String>, LineWriter)> = None;
    let mut report =
        |sampler: &mut Scheduler, sink: &mut Box<dyn Sink>, cfg: &Config, tick: i64| {
            if !kept
                .as_ref()
                .is_some_and(|(host, tags, _)| *host == cfg.host && *tags == cfg.tags)
            {
                kept = Some((cfg.host.clone(), cfg.tags.clone(), writer(cfg)));
            }
            let Some((_, _, w)) = kept.as_mut() else {
                return;
            };
            w.clear();
            sampler.report(w, tick, start.elapsed().as_secs_f64(), sink.stats());
            if let Err(e) = sink.send(w.as_bytes()) {
                tracing::error!("output: {e}");
            }
            if let Some(x) = &exporter {
                x.update(w.as_bytes());
            }
            if !reported_once {
                tracing::info!(lines = w.lines(), "first report written");
                reported_once = true;
                // Startup is over: its code and the loader's tables need not stay mapped.
                startup_code::release_logged("startup");
            } else if !released_again && start.elapsed() >= startup_code::RELEASE_AGAIN_AFTER {
                released_again = true;
                startup_code::release_logged("first rounds'");
            }
        };
    while !stop.load(Ordering::Relaxed) {
        match sleep_until(next, sample_ns, &sig) {
            Woke::OnTime => {}
            Woke::Stopped => break,
            Woke::ClockBack => {
                let now = wall_ns();
                let back_s = (next - sample_ns - now) as f64 / 1e9;
                tracing::warn!(
                    back_s,
                    "the wall clock went back; sampling goes on from now"
                );
                next = (now / sample_ns + 1) * sample_ns;
                continue;
            }
        }
        let tick = next;
        sampler.sample(start.elapsed().as_secs_f64());
        last_tick = tick;
        if tick % report_ns == 0 {
            report(&mut sampler, &mut sink, &cfg, tick);
        }
        if reload_flag.swap(false, Ordering::Relaxed) {
            match reload() {
                Ok(new) if new == cfg => tracing::info!("SIGHUP: configuration unchanged"),
                Ok(new) => {
                    if sampler.pending_samples() > 0 {
                        sampler.mark_partial();
                        report(&mut sampler, &mut sink, &cfg, tick);
                    }
                    if new.output != cfg.output || new.http != cfg.http || new.file != cfg.file {
                        if let Err(e) = sink.flush() {
                            tracing::warn!("output: {e}");
                        }
                        match open_sink(&new) {
                            Ok(s) => sink = s,
                            Err(e) => {
                                tracing::error!(
                                    "reload: output {}: {e:#}; keeping the running configuration",
                                    new.output
                                );
                                next += sample_ns;
                                continue;
                            }
                        }
                    }
                    let mut later = Vec::new();
                    if new.prometheus != cfg.prometheus {
                        later.push("prometheus");
                    }
                    if new.log_level != cfg.log_level {
                        later.push("log_level");
                    }
                    if !later.is_empty() {
                        tracing::warn!(
                            settings = later.join(", "),
                            "changed in the configuration; they take effect at the next restart"
                        );
                    }
                    sampler = Scheduler::new(&new, assemble::storage(&new, false));
                    sampler.sample(start.elapsed().as_secs_f64());
                    cfg = new;
                    sample_ns = i64::try_from(cfg.sample_interval.as_nanos()).unwrap_or(i64::MAX);
                    report_ns = i64::try_from(cfg.report_interval.as_nanos()).unwrap_or(i64::MAX);
                    next = (wall_ns() / sample_ns) * sample_ns;
                    tracing::info!(output = %cfg.output, sample = %duration::format(cfg.sample_interval), report = %duration::format(cfg.report_interval), "SIGHUP: configuration reloaded");
                }
                Err(e) => tracing::error!("SIGHUP: {e:#}; keeping the running configuration"),
            }
        }
        // Behind schedule (a stalled disk made a read slow, the VM was paused): skip the
        // missed instants instead of sampling in a burst.
        next += sample_ns;
        let now = wall_ns();
        if next <= now {
            let skipped = (now - next) / sample_ns + 1;
            tracing::warn!(skipped, "sampling fell behind; skipping missed samples");
            next += skipped * sample_ns;
        }
    }
    tracing::info!("stopping");
    // First the commands still running (a smartctl hung on a dead disk would otherwise outlive
    // the agent, and hold a service stop for its whole timeout), then the report and the flush.
    at_exit::cleanup_and_log();
    if sampler.pending_samples() > 0 {
        // The unfinished interval is not dropped: reported as far as it goes, marked partial.
        sampler.mark_partial();
        report(&mut sampler, &mut sink, &cfg, last_tick);
    }
    sink.flush()?;
    Ok(())
}

/// Samples one report interval and prints its report.
fn once(cfg: &Config) -> Result<()> {
    // SIGTERM and SIGINT end `once` as their default action does, even when the agent was started
    // with them ignored (a background job of a non-interactive shell has SIGINT ignored): a thread
    // kills the commands still running (they run in process groups of their own, which the
    // signal does not reach) and removes the monitors' directories, then restores the default
    // action and raises the signal again.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("storwatch-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                at_exit::cleanup(at_exit::EXIT_WAIT);
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                // Not ended by the signal (it cannot fail for these two): end as it would.
                std::process::exit(128 + sig);
            }
        })
        .context("starting the signal thread")?;
    let mut sink = open_sink(cfg)?;
    let mut sampler = Scheduler::new(cfg, assemble::storage(cfg, true));
    let start = Instant::now();
    sampler.sample(0.0);
    let n = (cfg.report_interval.as_nanos() / cfg.sample_interval.as_nanos()).max(1);
    for _ in 0..n {
        std::thread::sleep(cfg.sample_interval);
        sampler.sample(start.elapsed().as_secs_f64());
    }
    let mut w = writer(cfg);
    sampler.report(
        &mut w,
        wall_ns(),
        start.elapsed().as_secs_f64(),
        sink.stats(),
    );
    sink.send(w.as_bytes())?;
    sink.flush()?;
    Ok(())
}

/// The live view. On a terminal the screen is redrawn in place and, when standard input is the
/// terminal too, keys are read between samples: `q` quits, `u a r w i n` sort, `h` toggles the
/// health pane, each redrawing at once, as does a resize. Otherwise screens are printed one
/// after another, as wide as `--width`, `$COLUMNS` or all the columns.
fn top_loop(cfg: &Config, args: &TopArgs) -> Result<()> {
    use std::io::Write;
    let stop = clock::signals().context("installing signal handlers")?.stop;
    let resized = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGWINCH, Arc::clone(&resized))
        .context("installing signal handler")?;
    let mut sampler = Scheduler::new(cfg, assemble::storage(cfg, false));
    let start = Instant::now();
    let count = if args.once { Some(1) } else { args.count };
    let tty = std::io::stdout().is_terminal();
    let in_place = tty && !args.no_clear;
    // Keys and the alternate screen only for a view that runs until `q`: a counted run leaves
    // its last screen on the terminal.
    let interactive = in_place && count.is_none() && std::io::stdin().is_terminal();
    let screen = if interactive {
        Some(top::term::Screen::enter().context("setting up the terminal")?)
    } else {
        None
    };
    let mut view = top::View {
        threshold_pct: cfg.saturation_threshold_pct,
        max_devices: args.devices,
        color: tty,
        width: usize::MAX,
        sort: args.sort,
        health: !args.no_health,
        footer: interactive,
        height: None,
    };
    let draw = |live: &Live, mut view: top::View| {
        // Read again for every screen: the terminal may have been resized.
        let size = top::term::size(std::io::stdout().as_raw_fd());
        view.width = args
            .width
            .map(usize::from)
            .or(size.map(|s| s.0))
            .or_else(top::term::columns_env)
            .unwrap_or(usize::MAX);
        view.height = if in_place { size.map(|s| s.1) } else { None };
        let screen = top::render(&cfg.host, live, view);
        let mut out = std::io::stdout().lock();
        let written = if in_place {
            // No newline after the last line: on a screen exactly as high, it would scroll
            // the title away.
            write!(out, "\x1b[H\x1b[2J{}", screen.trim_end_matches('\n'))
        } else {
            writeln!(out, "{screen}")
        };
        written.and_then(|()| out.flush())
    };
    sampler.sample(0.0);
    let mut live = Live::default();
    let mut shown = 0u64;
    let mut next = Instant::now() + cfg.sample_interval;
    'screens: while !stop.load(Ordering::Relaxed) && count.is_none_or(|c| shown < c) {
        // Until the next sample: keys and resizes, each redrawing the last sample at once.
        loop {
            let now = Instant::now();
            if now >= next || stop.load(Ordering::Relaxed) {
                break;
            }
            let wait = (next - now).min(Duration::from_millis(200));
            let Some(s) = &screen else {
                std::thread::sleep(wait);
                continue;
            };
            let mut redraw = resized.swap(false, Ordering::Relaxed);
            for b in s.keys(wait).context("reading keys")? {
                match top::action(b) {
                    top::Action::Quit => break 'screens,
                    top::Action::None => {}
                    a => {
                        view = view.apply(a);
                        redraw = true;
                    }
                }
            }
            if redraw && shown > 0 {
                draw(&live, view).context("writing the screen")?;
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // A slow sample (a stalled disk) delays the next one instead of bunching them up.
        if let Some(t) = Instant::now().checked_sub(cfg.sample_interval) {
            next = next.max(t);
        }
        next += cfg.sample_interval;
        sampler.sample(start.elapsed().as_secs_f64());
        sampler.live(&mut live);
        match draw(&live, view) {
            Ok(()) => {}
            // The reader went away (`| head`): done, not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(e) => return Err(e).context("writing the screen"),
        }
        shown += 1;
    }
    if screen.is_none() && in_place && shown > 0 {
        // The last screen stays: the prompt goes below it.
        println!();
    }
    drop(screen);
    Ok(())
}
