//! Simulated hosts on disk: one [`Sim`] per host root, stepped by hand (tests, `--steps`) or
//! once per second of wall time, half a second off the whole second so a reader sampling on
//! whole seconds never meets a rename in progress.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::Host;
use crate::scenario::{Kind, Scenario};
use crate::tree::{self, Tree};

/// One simulated host and the tree it writes.
pub struct Sim {
    host: Host,
    scenario: Scenario,
    tree: Tree,
    fs: Vec<crate::fs::SimFs>,
}

impl Sim {
    /// Builds host `name` for `kind` under `root` and writes its first state.
    pub fn new(root: &Path, kind: Kind, name: &str, seed: u64, speed: f64) -> io::Result<Self> {
        let mut scenario = Scenario::new(kind, speed);
        let host = scenario.build(name, seed);
        let mut tree = Tree::new(root)?;
        tree::write_static(&mut tree, &host)?;
        tree::write_dynamic(&mut tree, &host)?;
        let fs = crate::fs::build(&host, kind);
        write_fs(&mut tree, &fs)?;
        Ok(Self {
            host,
            scenario,
            tree,
            fs,
        })
    }

    /// Advances one second (uptime +1.00 s) and writes the new state.
    pub fn step(&mut self) -> io::Result<()> {
        self.host.tick();
        self.scenario.drive(&mut self.host);
        crate::fs::tick(&mut self.fs, &mut self.host);
        tree::write_dynamic(&mut self.tree, &self.host)?;
        write_fs(&mut self.tree, &self.fs)
    }

    /// The simulated host, as of the last state written.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The scenario it runs.
    pub fn kind(&self) -> Kind {
        self.scenario.kind
    }

    /// The root directory (`proc/`, `sys/`, `bin/`, `run/`, `host`).
    pub fn root(&self) -> &Path {
        self.tree.root()
    }
}

/// The mount table and the filesystems' numbers.
fn write_fs(tree: &mut Tree, fs: &[crate::fs::SimFs]) -> io::Result<()> {
    tree.write("proc/self/mountinfo", &crate::fs::mountinfo(fs))?;
    tree.write("run/statvfs.txt", &crate::fs::statvfs(fs))
}

/// The name of host `i` (0-based) of scenario `kind` in a fleet.
pub fn fleet_host_name(kind: Kind, i: usize) -> String {
    format!("sim-{}-{:02}", kind.name(), i + 1)
}

/// A fleet: `per` hosts of each scenario in `kinds`, each under `root/<host>/`, each with its
/// own seed. Host trees of an earlier fleet under `root` that are not part of this one are
/// removed.
pub fn fleet(
    root: &Path,
    kinds: &[Kind],
    per: usize,
    seed: u64,
    speed: f64,
) -> io::Result<Vec<Sim>> {
    let mut sims = Vec::new();
    let names: Vec<String> = kinds
        .iter()
        .flat_map(|&k| (0..per).map(move |i| fleet_host_name(k, i)))
        .collect();
    // Hosts of an earlier, larger fleet would otherwise sit there frozen for a launcher to
    // pick up: remove those the simulator wrote (and nothing else).
    if let Ok(entries) = std::fs::read_dir(root) {
        for e in entries.flatten() {
            let p = e.path();
            let ours = p.join(tree::MARKER).is_file();
            let wanted = e
                .file_name()
                .to_str()
                .is_some_and(|n| names.iter().any(|x| x == n));
            if ours && !wanted {
                std::fs::remove_dir_all(&p)?;
            }
        }
    }
    for (ki, &kind) in kinds.iter().enumerate() {
        for i in 0..per {
            let name = fleet_host_name(kind, i);
            let dir: PathBuf = root.join(&name);
            let host_seed = seed
                .wrapping_mul(1_000_003)
                .wrapping_add((ki * 1000 + i) as u64);
            sims.push(Sim::new(&dir, kind, &name, host_seed, speed)?);
        }
    }
    Ok(sims)
}

/// Steps every host once per wall-clock second at x.500 s until `duration` has passed (or
/// forever). A host that fell behind (a stalled machine) catches up by stepping once per
/// missed second, so uptime keeps pace with the wall clock.
pub fn run_realtime(sims: &mut [Sim], duration: Option<Duration>) -> io::Result<()> {
    let start = SystemTime::now();
    let now_s = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let mut next = now_s().floor() + 0.5;
    if next <= now_s() {
        next += 1.0;
    }
    loop {
        if let Some(d) = duration {
            if start.elapsed().unwrap_or_default() >= d {
                return Ok(());
            }
        }
        let now = now_s();
        if now < next {
            std::thread::sleep(Duration::from_secs_f64((next - now).min(0.5)));
            continue;
        }
        let behind = ((now - next).floor() as u64).min(60) + 1;
        for _ in 0..behind {
            for s in sims.iter_mut() {
                s.step()?;
            }
        }
        next += behind as f64;
    }
}
