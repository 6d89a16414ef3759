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
//! linker: a stale list costs locality, never correctness — but ~2 MB of resident code, since
//! the compiler's inlining, and so the functions' names, move with any edit. The list records the
//! fingerprint of the code it was made from ([`fingerprint`]); a release build of other code
//! says so in a warning.

use std::path::{Path, PathBuf};

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
        let repo = Path::new(&dir).join("..");
        for input in FINGERPRINTED {
            println!("cargo:rerun-if-changed=../{input}");
        }
        let made_from = std::fs::read_to_string(&script)
            .ok()
            .and_then(|s| recorded(&s).map(str::to_owned));
        let now = fingerprint(&repo);
        if made_from.as_deref() != Some(now.as_str()) {
            println!(
                "cargo:warning=agent/link/hot-text.ld was made from other code (fingerprint {}, \
                 this tree {now}): ~2 MB more of the agent's code will be resident; make it \
                 again with bench/hot-text.sh before a release",
                made_from.as_deref().unwrap_or("none")
            );
        }
    }
}

/// What the fingerprint covers, from the workspace's root: the agent's and wire's sources (every
/// `.rs` file under a directory), their manifests, the workspace's (its profiles) and the lock.
/// bench/hot-text.sh computes the same. The tests written beside the code count too: a change to
/// them alone warns as well, though the release code is the same.
const FINGERPRINTED: [&str; 6] = [
    "agent/src",
    "wire/src",
    "agent/Cargo.toml",
    "wire/Cargo.toml",
    "Cargo.toml",
    "Cargo.lock",
];

/// The fingerprint the list records: `Code: fnv1a64 <16 hex digits>` in its header.
fn recorded(script: &str) -> Option<&str> {
    let at = script.find("Code: fnv1a64 ")? + "Code: fnv1a64 ".len();
    script.get(at..at + 16)
}

/// FNV-1a (64 bits) over each file of [`FINGERPRINTED`] in the order of their paths from the
/// root (`/`-separated, byte order): the path, a NUL, the content, a NUL. A file that cannot be
/// read counts as empty.
fn fingerprint(repo: &Path) -> String {
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for input in FINGERPRINTED {
        let path = repo.join(input);
        if path.is_dir() {
            walk(&path, input, &mut files);
        } else {
            files.push((input.to_owned(), path));
        }
    }
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes.iter().chain(&[0u8]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, path) in &files {
        eat(name.as_bytes());
        eat(&std::fs::read(path).unwrap_or_default());
    }
    format!("{h:016x}")
}

fn walk(dir: &Path, name: &str, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        let sub = format!("{name}/{file}");
        if path.is_dir() {
            walk(&path, &sub, out);
        } else if file.ends_with(".rs") {
            out.push((sub, path));
        }
    }
}
