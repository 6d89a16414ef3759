//! storwatch-collector: the command line. Flags override the TOML file given with `--config`.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use storwatch_collector::config::{Config, OutputConfig, DEFAULT_CONFIG};

/// Site collector for storwatch agents: InfluxDB-compatible write API, durable queue,
/// forwarding to InfluxDB v1/v2/v3.
#[derive(Debug, Parser)]
#[command(name = "storwatch-collector", version)]
struct Cli {
    /// TOML configuration file (see --print-default-config).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the commented default configuration and exit.
    #[arg(long)]
    print_default_config: bool,
    /// Listen address, e.g. 0.0.0.0:8186.
    #[arg(long)]
    listen: Option<String>,
    /// Queue directory.
    #[arg(long)]
    queue_dir: Option<PathBuf>,
    /// File of accepted client tokens (`name:token` per line).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Run without tokens (only on a loopback listen address).
    #[arg(long)]
    insecure_open: bool,
    /// Output URL (repeatable): base URL or full /write, /api/v2/write, /api/v3/write_lp URL.
    /// Replaces the outputs of the config file.
    #[arg(long = "output")]
    outputs: Vec<String>,
    /// Database for the --output URLs (v1, v3).
    #[arg(long)]
    db: Option<String>,
    /// Organisation for the --output URLs (v2).
    #[arg(long)]
    org: Option<String>,
    /// Bucket for the --output URLs (v2).
    #[arg(long)]
    bucket: Option<String>,
    /// File holding the token for the --output URLs.
    #[arg(long)]
    output_token_file: Option<PathBuf>,
}

/// Blocks of 2 MiB and more (large request bodies, their inflated copies) are mapped and
/// unmapped by themselves, so what a burst of large bodies took is given back when it is
/// freed. glibc's default raises its mapping threshold each time a mapped block is freed (up
/// to 32 MiB): after one burst of 4 MiB bodies the next ones came from the heaps of the
/// threads that read them and stayed resident there — 39 to 133 MiB three seconds after 400
/// bodies at once, in runs of `hostile::four_hundred_large_bodies_at_once_stay_within_memory`
/// (20–23 MiB with this). Not lower: a block mapped anew is faulted in anew, and at 1 MiB the
/// bench's 1.07 MB bodies (5,000 lines) cost 10–15 % more CPU a line.
fn large_blocks_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets an allocator parameter; it is called before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 2 << 20);
    }
}

fn main() -> anyhow::Result<()> {
    large_blocks_mapped();
    let cli = Cli::parse();
    if cli.print_default_config {
        print!("{DEFAULT_CONFIG}");
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // No colour codes in the journal or a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cfg = load_config(&cli)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut collector = storwatch_collector::start(cfg).await?;
        let mut term = signal(SignalKind::terminate()).context("cannot install signal handlers")?;
        let mut hup = signal(SignalKind::hangup()).context("cannot install signal handlers")?;
        let mut usr1 = signal(SignalKind::user_defined1()).context("cannot install signal handlers")?;
        let mut usr2 = signal(SignalKind::user_defined2()).context("cannot install signal handlers")?;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = hup.recv() => match load_config(&cli) {
                    Ok(new) => collector.reload(new),
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "reload: cannot read the configuration; keeping the running one"),
                },
                _ = usr1.recv() => tracing::info!("SIGUSR1 ignored (SIGHUP reloads the configuration)"),
                _ = usr2.recv() => tracing::info!("SIGUSR2 ignored"),
            }
        }
        tracing::info!("stopping");
        collector.shutdown().await;
        anyhow::Ok(())
    })
}

/// The configuration file (or the defaults) with the command line's flags on top; read at start
/// and again on SIGHUP.
fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let mut cfg = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(v) = &cli.listen {
        cfg.listen = v.clone();
    }
    if let Some(v) = &cli.queue_dir {
        cfg.queue_dir = v.clone();
    }
    if let Some(v) = &cli.token_file {
        cfg.token_file = Some(v.clone());
    }
    if cli.insecure_open {
        cfg.insecure_open = true;
    }
    if !cli.outputs.is_empty() {
        cfg.outputs = cli
            .outputs
            .iter()
            .map(|url| OutputConfig {
                url: url.clone(),
                db: cli.db.clone(),
                org: cli.org.clone(),
                bucket: cli.bucket.clone(),
                token_file: cli.output_token_file.clone(),
                ..OutputConfig::default()
            })
            .collect();
    }
    Ok(cfg)
}
