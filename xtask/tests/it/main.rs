//! `xtask check` as a test: `cargo test --workspace` fails on a generated file that drifted and
//! on the shape rules too. It also makes `cargo test --workspace --no-run` build the `xtask`
//! binary with the features the whole workspace's test build resolves, so `scripts/test.sh` runs
//! the check with that binary (`target/debug/xtask check`) instead of building the workspace's
//! crates a second time for `cargo run -p xtask`, whose dependencies resolve other features.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

#[test]
fn the_workspace_passes_xtask_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("check")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xtask check failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
