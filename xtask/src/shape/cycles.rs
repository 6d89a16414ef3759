//! No import cycle between the modules of a crate.
//!
//! Each file of `<member>/src` is a module (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`,
//! `lib.rs` — or `main.rs` without one — the root; `src/bin/` holds crates of their own). A
//! file imports another when its non-test code names a path into it: `use crate::a::b::X`,
//! `use super::X`, `self::x::Y`, brace groups expanded (`use crate::{a::X, b::{Y, Z}}`), and the
//! same paths written inline (`crate::config::glob_match(..)`). A path goes to the deepest
//! module it names. Files that import each other, directly or around a circle, are a cycle:
//! it is reported with its files and, for each import along it, the names imported.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{non_test_text, rust_files};

/// (importing file, imported file) -> the names imported.
pub(crate) type Edges = BTreeMap<(String, String), BTreeSet<String>>;

/// The module path of `file` under `src`, or `None` for a file of another crate root.
fn module_path(src: &Path, file: &Path, has_lib: bool) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop()?;
    match last.as_str() {
        "lib.rs" if parts.is_empty() => return Some(Vec::new()),
        "main.rs" if parts.is_empty() => return (!has_lib).then(Vec::new),
        "mod.rs" => {}
        other => parts.push(other.strip_suffix(".rs")?.to_string()),
    }
    Some(parts)
}

/// `text` without comments and the contents of string literals.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied()) {
            ('/', Some('/')) => {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            ('"', _) => {
                i += 1;
                while i < b.len() && b[i] != '"' {
                    if b[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                out.push_str("\"\"");
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Splits `s` at `sep` where it is outside braces.
fn split_top(s: &str, sep: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if depth == 0 && rest.starts_with(sep) {
            out.push(std::mem::take(&mut cur));
            rest = &rest[sep.len()..];
            continue;
        }
        let Some(c) = rest.chars().next() else {
            break;
        };
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        cur.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out.push(cur);
    out
}

/// The paths of a use tree (`crate::{a::X, b::{Y as Z, self}}`), each as its segments.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let t = tree.trim();
    if t.is_empty() {
        return;
    }
    if let Some(inner) = t.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        for part in split_top(inner, ",") {
            expand(&part, prefix, out);
        }
        return;
    }
    let segs = split_top(t, "::");
    let mut path = prefix.to_vec();
    for (i, s) in segs.iter().enumerate() {
        let s = s.trim();
        if s.starts_with('{') {
            expand(s, &path, out);
            return;
        }
        let name = s.split(" as ").next().unwrap_or(s).trim();
        if i + 1 == segs.len() && (name == "self" || name == "*") {
            break;
        }
        path.push(name.to_string());
    }
    out.push(path);
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path starting `crate`, `super` or `self` in `code`: from its `use` items (expanded)
/// and written inline.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = String::new();
    for stmt in code.split_inclusive(';') {
        // a `use` item ends this statement: what precedes it is other code
        let at = find_word(stmt, "use");
        match at {
            Some(i) if stmt.trim_end().ends_with(';') => {
                rest.push_str(&stmt[..i]);
                let tree = stmt[i + 3..].trim_end().trim_end_matches(';');
                let mut found = Vec::new();
                expand(tree, &[], &mut found);
                out.extend(found.into_iter().filter(|p| {
                    p.first()
                        .is_some_and(|f| matches!(f.as_str(), "crate" | "super" | "self"))
                }));
            }
            _ => rest.push_str(stmt),
        }
    }
    // inline paths
    let chars: Vec<char> = rest.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let boundary = i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':';
        if boundary && is_ident(chars[i]) {
            let start = i;
            let mut segs = Vec::new();
            loop {
                let s = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                segs.push(chars[s..i].iter().collect::<String>());
                let more = chars.get(i) == Some(&':')
                    && chars.get(i + 1) == Some(&':')
                    && chars.get(i + 2).copied().is_some_and(is_ident);
                if !more {
                    break;
                }
                i += 2;
            }
            if segs.len() > 1 && matches!(segs[0].as_str(), "crate" | "super" | "self") {
                out.push(segs);
            }
            if i == start {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Where the word `w` first stands alone in `s` (not part of an identifier).
fn find_word(s: &str, w: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(j) = s[from..].find(w) {
        let i = from + j;
        let before = s[..i].chars().next_back();
        let after = s[i + w.len()..].chars().next();
        if !before.is_some_and(is_ident) && after.is_some_and(char::is_whitespace) {
            return Some(i);
        }
        from = i + w.len();
    }
    None
}

/// `path` (from module `at`) made absolute: `crate::a` is `a`, `super::b` is `b` beside `at`.
fn absolute(path: &[String], at: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = at.to_vec();
    let mut segs = path.iter().peekable();
    match segs.next()?.as_str() {
        "crate" => base.clear(),
        "self" => {}
        "super" => {
            base.pop()?;
            while segs.peek().is_some_and(|s| *s == "super") {
                segs.next();
                base.pop()?;
            }
        }
        _ => return None,
    }
    base.extend(segs.cloned());
    Some(base)
}

/// The imports between the files of the crate whose sources are in `src`.
pub(crate) fn edges(root: &Path, src: &Path) -> Edges {
    let has_lib = src.join("lib.rs").exists();
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut texts = Vec::new();
    for f in rust_files(src) {
        let Some(m) = module_path(src, &f, has_lib) else {
            continue;
        };
        let rel = f.strip_prefix(root).unwrap_or(&f).display().to_string();
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        modules.insert(m.clone(), rel.clone());
        texts.push((m, rel, text));
    }
    let mut out = Edges::new();
    for (m, rel, text) in &texts {
        for p in paths(&code_only(&non_test_text(text))) {
            let Some(abs) = absolute(&p, m) else {
                continue;
            };
            let Some(depth) = (0..=abs.len())
                .rev()
                .find(|&n| modules.contains_key(&abs[..n]))
            else {
                continue;
            };
            let target = &modules[&abs[..depth]];
            if target == rel {
                continue;
            }
            let name = abs
                .get(depth)
                .or(abs.last())
                .cloned()
                .unwrap_or_else(|| "crate".to_string());
            out.entry((rel.clone(), target.clone()))
                .or_default()
                .insert(name);
        }
    }
    out
}

/// The strongly connected components of more than one file (Tarjan).
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
        next.entry(b).or_default();
    }
    struct St<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(v: &'a str, next: &BTreeMap<&'a str, Vec<&'a str>>, st: &mut St<'a>) {
        let i = st.index.len();
        st.index.insert(v, i);
        st.low.insert(v, i);
        st.stack.push(v);
        st.on.insert(v);
        for &w in next.get(v).into_iter().flatten() {
            if !st.index.contains_key(w) {
                visit(w, next, st);
                let lw = st.low[w];
                if let Some(x) = st.low.get_mut(v) {
                    *x = (*x).min(lw);
                }
            } else if st.on.contains(w) {
                let iw = st.index[w];
                if let Some(x) = st.low.get_mut(v) {
                    *x = (*x).min(iw);
                }
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                st.out.push(comp);
            }
        }
    }
    let mut st = St {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in next.keys() {
        if !st.index.contains_key(v) {
            visit(v, &next, &mut st);
        }
    }
    st.out.sort();
    st.out
}

/// Each import cycle of workspace member `member`, with its files and the names along it.
pub(crate) fn problems(root: &Path, member: &str) -> Vec<String> {
    let src = root.join(member).join("src");
    if !src.is_dir() {
        return Vec::new();
    }
    let e = edges(root, &src);
    cycles(&e)
        .into_iter()
        .map(|comp| {
            let along: Vec<String> = e
                .iter()
                .filter(|((a, b), _)| comp.contains(a) && comp.contains(b))
                .map(|((a, b), names)| {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    format!("  {a} -> {b} ({})", names.join(", "))
                })
                .collect();
            format!(
                "{member}: import cycle between {} files: {}\n{}",
                comp.len(),
                comp.join(", "),
                along.join("\n")
            )
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::shape::tree;

    #[test]
    fn use_trees_expand_to_every_path() {
        let mut out = Vec::new();
        expand("crate::{a::X, b::{Y as Z, self}, c::*}", &[], &mut out);
        let s: Vec<String> = out.iter().map(|p| p.join("::")).collect();
        assert_eq!(s, ["crate::a::X", "crate::b::Y", "crate::b", "crate::c"]);
    }

    #[test]
    fn paths_come_from_use_items_and_inline_code_not_comments_or_strings() {
        let code = code_only(
            "use std::fmt;\npub(crate) use super::model::Model;\n// crate::gone::X\n\
             fn f() { let _ = \"crate::nope::Y\"; crate::config::glob_match(a, b); }\n",
        );
        let s: Vec<String> = paths(&code).iter().map(|p| p.join("::")).collect();
        assert_eq!(s, ["super::model::Model", "crate::config::glob_match"]);
    }

    #[test]
    fn a_two_file_cycle_is_reported_with_the_names_imported() {
        let d = tree(&[
            ("k/src/lib.rs", "pub mod config;\npub mod collect;\n"),
            (
                "k/src/config.rs",
                "use crate::collect::fs::FsConfig;\npub fn glob_match() {}\n",
            ),
            ("k/src/collect/mod.rs", "pub mod fs;\n"),
            (
                "k/src/collect/fs.rs",
                "pub struct FsConfig;\nfn f() { crate::config::glob_match(); }\n",
            ),
        ]);
        let errs = problems(d.path(), "k");
        assert_eq!(errs.len(), 1, "{errs:?}");
        let e = &errs[0];
        assert!(
            e.starts_with("k: import cycle between 2 files: k/src/collect/fs.rs, k/src/config.rs"),
            "{e}"
        );
        assert!(
            e.contains("k/src/config.rs -> k/src/collect/fs.rs (FsConfig)"),
            "{e}"
        );
        assert!(
            e.contains("k/src/collect/fs.rs -> k/src/config.rs (glob_match)"),
            "{e}"
        );
    }

    #[test]
    fn a_cycle_around_three_files_through_super_is_one_problem() {
        let d = tree(&[
            ("k/src/lib.rs", "mod h;\n"),
            ("k/src/h/mod.rs", "mod a;\nmod b;\nuse self::a::A;\n"),
            ("k/src/h/a.rs", "use super::b::B;\n"),
            ("k/src/h/b.rs", "use super::super::h::Root;\n"),
        ]);
        let errs = problems(d.path(), "k");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].contains("between 3 files"), "{errs:?}");
        assert!(
            errs[0].contains("k/src/h/b.rs -> k/src/h/mod.rs (Root)"),
            "{errs:?}"
        );
    }

    #[test]
    fn one_way_imports_and_test_code_are_no_cycle() {
        let d = tree(&[
            ("k/src/lib.rs", "mod a;\nmod b;\n"),
            ("k/src/a.rs", "use crate::b::B;\n"),
            (
                "k/src/b.rs",
                "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::*;\n}\n",
            ),
            ("k/src/bin/tool.rs", "use crate::a::A;\n"),
        ]);
        assert!(problems(d.path(), "k").is_empty());
        // the same import outside the tests makes one
        std::fs::write(d.path().join("k/src/b.rs"), "use crate::a::A;\n").unwrap();
        assert_eq!(problems(d.path(), "k").len(), 1);
    }

    #[test]
    fn modules_are_named_by_their_files() {
        let src = Path::new("/x/src");
        let m = |f: &str, lib| module_path(src, &src.join(f), lib);
        assert_eq!(m("lib.rs", true), Some(vec![]));
        assert_eq!(m("main.rs", true), None);
        assert_eq!(m("main.rs", false), Some(vec![]));
        assert_eq!(m("a/mod.rs", true), Some(vec!["a".to_string()]));
        assert_eq!(
            m("a/b.rs", true),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(m("bin/t.rs", true), None);
    }
}
