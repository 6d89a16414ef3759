//! The shape rules `cargo xtask check` enforces on every workspace crate's sources:
//! * [`size`]: no non-test source file over [`size::MAX_LINES`] lines;
//! * [`cycles`]: no import cycle between the modules (files) of a crate;
//! * [`layers`]: the agent's arrows point down — parsers and models import nothing above them.

pub(crate) mod cycles;
pub(crate) mod layers;
pub(crate) mod size;

use std::path::{Path, PathBuf};

/// The line where a file's tests start: the first `#[cfg(test)]` at column 0 (its index), or
/// the number of lines.
pub(crate) fn non_test_lines(text: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or_else(|| text.lines().count())
}

/// The text before the tests (see [`non_test_lines`]).
pub(crate) fn non_test_text(text: &str) -> String {
    let n = non_test_lines(text);
    text.lines().take(n).collect::<Vec<_>>().join("\n")
}

/// The workspace members of `root/Cargo.toml` (`members = ["wire", "agent", …]`).
pub(crate) fn members(root: &Path) -> Result<Vec<String>, String> {
    let text =
        std::fs::read_to_string(root.join("Cargo.toml")).map_err(|e| format!("Cargo.toml: {e}"))?;
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .ok_or("Cargo.toml: no members line")?;
    Ok(line
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect())
}

/// Every `.rs` file under `dir`, sorted, `target/` and symbolic links left out.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            // symbolic links are not followed: fixture trees link directories in circles
            let Ok(kind) = e.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if p.file_name().is_some_and(|n| n != "target" && n != ".git") {
                    stack.push(p);
                }
            } else if kind.is_file() && p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Both rules over the workspace at `root`.
pub(crate) fn problems(root: &Path) -> Vec<String> {
    let members = match members(root) {
        Ok(m) => m,
        Err(e) => return vec![e],
    };
    let mut errs = Vec::new();
    for m in &members {
        errs.extend(size::problems(root, m));
        errs.extend(cycles::problems(root, m));
        errs.extend(layers::problems(root, m));
    }
    errs
}

/// A scratch tree of `(path, text)` files, for the rules' tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tests_start_at_the_first_cfg_test_in_column_0() {
        assert_eq!(non_test_lines("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
        assert_eq!(non_test_lines("a\n    #[cfg(test)]\nb\n"), 3);
        assert_eq!(non_test_lines(""), 0);
    }

    #[test]
    fn members_are_read_from_the_workspace_manifest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[workspace]\nmembers = [\"a\", \"b/c\"]\n",
        )
        .unwrap();
        assert_eq!(members(dir.path()).unwrap(), ["a", "b/c"]);
    }
}
