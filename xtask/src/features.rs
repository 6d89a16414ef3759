//! The agent is the same code built alone or with the other members of the workspace.
//!
//! Cargo turns on, in each dependency, the features of every package one build selects: `cargo
//! build --release` (the packages' recipe) or `-p storwatch-agent -p storwatch-collector` (the
//! deploy guide's) gives the agent's dependencies the collector's features as well. A
//! dependency's features change its build hash, and with it the hash in the names of the agent's
//! generic functions that `agent/link/hot-text.ld` lists (made from `-p storwatch-agent` alone by
//! `bench/hot-text.sh`): a name the build does not have is skipped by the linker, and the code
//! the list should have laid out together stays spread over the binary (~2 MB more resident).
//! `agent/Cargo.toml` turns those features on itself; this check compares what `cargo tree`
//! resolves for the agent alone and for the whole workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Each package of a tree (`name vX.Y.Z`, a path dependency's path left out) with the feature
/// lists `cargo tree` prints for it (one for each way it is built: for the target, for a build
/// script or procedural macro).
type Features = BTreeMap<String, BTreeSet<String>>;

pub(crate) fn problems(root: &Path) -> Vec<String> {
    let alone = match tree(root, &["-p", "storwatch-agent"]) {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    let all = match tree(root, &["--workspace"]) {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    differences(&alone, &all)
}

/// What the agent's dependencies have in the workspace's build that they lack in its own.
fn differences(alone: &Features, all: &Features) -> Vec<String> {
    let mut errs = Vec::new();
    for (package, features) in alone {
        let with_all = all.get(package).cloned().unwrap_or_default();
        if &with_all != features {
            errs.push(format!(
                "{package}: built with the workspace {}, with the agent alone {}: turn the \
                 difference on in agent/Cargo.toml, so that agent/link/hot-text.ld names the \
                 functions of either build",
                shown(&with_all),
                shown(features),
            ));
        }
    }
    errs
}

fn shown(lists: &BTreeSet<String>) -> String {
    let lists: Vec<String> = lists.iter().map(|l| format!("[{l}]")).collect();
    lists.join(" and ")
}

/// `cargo tree` for `selection`: normal and build dependencies (what a release build compiles),
/// each package once with its features.
fn tree(root: &Path, selection: &[&str]) -> Result<Features, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .current_dir(root)
        .args(["tree", "--locked", "-e", "normal,build", "--prefix", "none"])
        .args(["-f", "{p} [{f}]"])
        .args(selection)
        .output()
        .map_err(|e| format!("cargo tree {}: {e}", selection.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree {} failed: {}",
            selection.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(parse(&String::from_utf8_lossy(&out.stdout)))
}

/// Lines `name vX.Y.Z [(path)] [f1,f2]`, a repeated package ending in ` (*)`.
fn parse(text: &str) -> Features {
    let mut tree = Features::new();
    for line in text.lines() {
        let line = line.trim_end_matches(" (*)");
        let (Some(open), true) = (line.rfind(" ["), line.ends_with(']')) else {
            continue;
        };
        let mut words = line[..open].split(' ');
        let (Some(name), Some(version)) = (words.next(), words.next()) else {
            continue;
        };
        let features = line[open + 2..line.len() - 1].to_owned();
        tree.entry(format!("{name} {version}"))
            .or_default()
            .insert(features);
    }
    tree
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_feature_only_the_workspace_turns_on_is_a_problem() {
        let alone = parse(
            "storwatch-agent v0.1.0 (/src/agent) []\nsmallvec v1.16.5 [union]\nserde v1.0.229 [default,std]\nsmallvec v1.16.5 [union] (*)\n",
        );
        assert_eq!(alone.len(), 3);
        let same = parse(
            "storwatch-agent v0.1.0 (/elsewhere/agent) []\nsmallvec v1.16.5 [union]\nserde v1.0.229 [default,std]\ntokio v1.48.0 [rt]\n",
        );
        assert_eq!(differences(&alone, &same), Vec::<String>::new());
        let more = parse(
            "storwatch-agent v0.1.0 (/src/agent) []\nsmallvec v1.16.5 [const_new,union]\nserde v1.0.229 [default,std]\n",
        );
        let errs = differences(&alone, &more);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with("smallvec v1.16.5: built with the workspace [const_new,union], with the agent alone [union]"), "{}", errs[0]);
        // a package built for a build script too: both lists must match
        let twice = parse(
            "storwatch-agent v0.1.0 (/src/agent) []\nsmallvec v1.16.5 [union]\nsmallvec v1.16.5 [const_new]\nserde v1.0.229 [default,std]\n",
        );
        assert_eq!(differences(&alone, &twice).len(), 1);
    }
}
