//! No non-test source file over [`MAX_LINES`] lines: the lines before the first column-0
//! `#[cfg(test)]` count; files under a `tests/` directory and files named `tests.rs` are
//! exempt (they are tests).

use std::path::Path;

use super::{non_test_lines, rust_files};

pub(crate) const MAX_LINES: usize = 600;

/// Files of workspace member `member` (a directory under `root`) over the limit.
pub(crate) fn problems(root: &Path, member: &str) -> Vec<String> {
    let dir = root.join(member);
    let mut errs = Vec::new();
    for p in rust_files(&dir) {
        let rel = p.strip_prefix(root).unwrap_or(&p);
        let inner = p.strip_prefix(&dir).unwrap_or(&p);
        let is_test = inner.components().any(|c| c.as_os_str() == "tests")
            || p.file_name().is_some_and(|n| n == "tests.rs");
        // another member nested in this one (tests/dashboards in tests) is checked as itself
        if is_test || nested_member(&dir, &p) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            errs.push(format!("{}: unreadable", rel.display()));
            continue;
        };
        let n = non_test_lines(&text);
        if n > MAX_LINES {
            errs.push(format!(
                "{}: {n} lines of non-test code, over {MAX_LINES}: split it by concern",
                rel.display()
            ));
        }
    }
    errs
}

/// Whether `file` belongs to a crate nested below `dir` (a directory between them has its own
/// `Cargo.toml`).
fn nested_member(dir: &Path, file: &Path) -> bool {
    let mut d = file.parent();
    while let Some(x) = d {
        if x == dir {
            return false;
        }
        if x.join("Cargo.toml").exists() {
            return true;
        }
        d = x.parent();
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_file_over_the_limit_is_named_and_tests_do_not_count() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let lines = |n: usize| "x\n".repeat(n);
        write(root, "c/Cargo.toml", "");
        write(root, "c/src/at_limit.rs", &lines(600));
        write(root, "c/src/over.rs", &lines(601));
        write(
            root,
            "c/src/tests_below.rs",
            &format!("{}#[cfg(test)]\n{}", lines(600), lines(900)),
        );
        write(root, "c/src/tests.rs", &lines(900));
        write(root, "c/tests/big.rs", &lines(900));
        write(root, "c/sub/Cargo.toml", "");
        write(root, "c/sub/src/big.rs", &lines(900));
        let errs = problems(root, "c");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with("c/src/over.rs: 601 lines"), "{errs:?}");
        assert_eq!(problems(root, "c/sub").len(), 1);
    }
}
