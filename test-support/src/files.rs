//! Where things are: the workspace, the agent's fixture roots, and scratch directories.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use tempfile::TempDir;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Free space tmpfs must have for [`scratch`] to use it.
const TMPFS_MIN_FREE_KB: u64 = 2 << 20;

/// A temporary directory, removed on drop, for what writes many small files or syncs often
/// (simulated host trees rewritten every simulated second, spools, queues, influxd's data): on
/// tmpfs (`/dev/shm`) when it has 2 GiB free, where a rename or an fsync costs no disk I/O,
/// otherwise in the usual temporary directory. The code under test behaves the same on both:
/// nothing a test checks survives a machine crash, only process crashes, and those keep the
/// page cache either way.
pub fn scratch() -> TempDir {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let mut b = tempfile::Builder::new();
    b.prefix("storwatch-test-");
    match BASE.get_or_init(tmpfs_with_room) {
        Some(base) => b.tempdir_in(base),
        None => b.tempdir(),
    }
    .unwrap()
}

fn tmpfs_with_room() -> Option<PathBuf> {
    let shm = PathBuf::from("/dev/shm");
    let out = Command::new("df").arg("-PkT").arg(&shm).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // Filesystem Type 1024-blocks Used Available Capacity Mounted-on
    let row: Vec<&str> = text.lines().nth(1)?.split_whitespace().collect();
    let tmpfs = row.get(1) == Some(&"tmpfs");
    let free_kb: u64 = row.get(4)?.parse().ok()?;
    let writable = tempfile::tempdir_in(&shm).is_ok();
    (out.status.success() && tmpfs && free_kb >= TMPFS_MIN_FREE_KB && writable).then_some(shm)
}

/// A proc root made of the agent's real captured fixtures (provenance in agent/fixtures) under
/// `dir`, and the disk-server sys tree: `(proc, sys)`.
pub fn fixture_roots(dir: &Path) -> (PathBuf, PathBuf) {
    (
        fixture_proc_root(dir),
        workspace().join("agent/fixtures/sysfs/disk-server/sys"),
    )
}

/// `dir/proc`, made of the agent's real captured fixtures (provenance in agent/fixtures):
/// diskstats, net/dev, stat, meminfo, pressure/io and uptime of one build machine. Tests add
/// their own files (mdstat, kstat...) beside them.
pub fn fixture_proc_root(dir: &Path) -> PathBuf {
    let fx = workspace().join("agent/fixtures");
    let proc_root = dir.join("proc");
    std::fs::create_dir_all(proc_root.join("net")).unwrap();
    std::fs::create_dir_all(proc_root.join("pressure")).unwrap();
    for (from, to) in [
        (
            "diskstats/build-machine-linux-6.18-20-field.txt",
            "diskstats",
        ),
        ("netdev/build-machine-linux-6.18.txt", "net/dev"),
        ("stat/build-machine-linux-6.18-2cpu.txt", "stat"),
        ("meminfo/build-machine-linux-6.18.txt", "meminfo"),
        ("pressure/build-machine-linux-6.18-io.txt", "pressure/io"),
        ("uptime/build-machine-linux-6.18.txt", "uptime"),
    ] {
        std::fs::copy(fx.join(from), proc_root.join(to)).unwrap();
    }
    proc_root
}

/// Writes `text` to `path` as the kernel's files appear to a reader, whole or not at all: into
/// a temporary file beside it, then renamed over it. Creates the parent directories.
pub fn write_replacing(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a file in a directory")).expect("mkdir");
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}
