//! The release agent's hot code laid out together (`link/hot-text.ld`, docs/performance.md,
//! "The agent's code in memory").
//!
//! The kernel maps a program's code 64 KiB at a time around each page it runs
//! (`fault_around_bytes`), so the agent's resident size follows how many 64 KiB windows its
//! code touches, not how much code it runs. Linked in crate order, the ~0.8 MB it runs every
//! second and every drive round lies across most of the 5 MB of `.text`. The script lists those
//! functions (made by `bench/hot-text.sh` from a profile of the running agent) and places them in
//! one output section ahead of `.text`: the rest of the layout is the linker's own (`INSERT`).
//!
//! Only for the `release` profile (and `profiling`, which inherits it), only where the linker
//! is one that reads such a script (GNU ld or lld: Linux), and never with
//! `STORWATCH_NO_HOT_TEXT` set. A name the list has that the build does not is skipped by the
//! linker: a stale list costs locality, never correctness.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=link/hot-text.ld");
    println!("cargo:rerun-if-env-changed=STORWATCH_NO_HOT_TEXT");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let off = std::env::var_os("STORWATCH_NO_HOT_TEXT").is_some();
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let script = Path::new(&dir).join("link/hot-text.ld");
    if release && linux && !off && script.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=storwatch-agent=-Wl,-T,{}",
            script.display()
        );
    }
}
