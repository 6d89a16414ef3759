//! The agent's arrows point down: what its lower layers may not import.
//!
//! ARCHITECTURE's layering, as rules on the imports [`super::cycles`] reads (non-test code,
//! comments and strings left out):
//! * `sources/` — the pure parsers — import only each other, `root` (the file-tree reader they
//!   parse from) and `command` (its error type: a parser of a tool's output reports the tool's
//!   failure); never a collector, a model, the configuration or an output;
//! * `health/` — the models — import parsers, each other and the event type; never a collector,
//!   the scheduler, an output or the configuration (a model's settings are its own struct);
//! * `collect/` — one collector per domain — never the scheduler, the outputs (`sink`,
//!   `prometheus`) or the screen (`top`).
//!
//! Test code is exempt (after a column-0 `#[cfg(test)]`, and files named `tests.rs`).
//! A violation names the importing file, the module it reaches and the names it uses.

use std::path::Path;

use super::cycles::edges;

/// (member, layer: a module directory under `src/`, the top-level modules it may import or
/// may not import).
struct Rule {
    member: &'static str,
    layer: &'static str,
    allowed: Option<&'static [&'static str]>,
    forbidden: &'static [&'static str],
}

const RULES: [Rule; 3] = [
    Rule {
        member: "agent",
        layer: "sources",
        allowed: Some(&["sources", "root", "command"]),
        forbidden: &[],
    },
    Rule {
        member: "agent",
        layer: "health",
        allowed: None,
        forbidden: &[
            "collect",
            "scheduler",
            "assemble",
            "config",
            "sink",
            "prometheus",
            "top",
        ],
    },
    Rule {
        member: "agent",
        layer: "collect",
        allowed: None,
        forbidden: &["scheduler", "sink", "prometheus", "top"],
    },
];

/// The top-level module of a file path relative to the workspace (`agent/src/health/md.rs` is
/// `health`; `agent/src/root.rs` is `root`).
fn top_module<'a>(member: &str, rel: &'a str) -> Option<&'a str> {
    let inner = rel.strip_prefix(member)?.strip_prefix("/src/")?;
    let first = inner.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first))
}

/// The imports of `member` that break its rules.
pub(crate) fn problems(root: &Path, member: &str) -> Vec<String> {
    let rules: Vec<&Rule> = RULES.iter().filter(|r| r.member == member).collect();
    let src = root.join(member).join("src");
    if rules.is_empty() || !src.is_dir() {
        return Vec::new();
    }
    let mut errs = Vec::new();
    for ((from, to), names) in edges(root, &src) {
        // a module of tests (`tests.rs`, beside the code it tests) is test code
        if from.ends_with("/tests.rs") {
            continue;
        }
        let (Some(a), Some(b)) = (top_module(member, &from), top_module(member, &to)) else {
            continue;
        };
        for r in rules.iter().filter(|r| r.layer == a) {
            let broken = match r.allowed {
                Some(ok) => !ok.contains(&b),
                None => r.forbidden.contains(&b),
            };
            if broken {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                errs.push(format!(
                    "{from} imports {to} ({}): `{}` may not import `{b}` (arrows point down: \
                     parsers, then models, then collectors, then the scheduler and outputs)",
                    names.join(", "),
                    r.layer
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::shape::tree;

    const LIB: &str = "pub mod sources;\npub mod health;\npub mod collect;\npub mod config;\n\
                       pub mod root;\npub mod command;\npub mod scheduler;\n";

    #[test]
    fn a_parser_that_reaches_up_is_reported_with_the_names() {
        let t = tree(&[
            ("agent/src/lib.rs", LIB),
            ("agent/src/sources/mod.rs", "pub mod md;\n"),
            (
                "agent/src/sources/md.rs",
                "use crate::root::Root;\nuse crate::config::MdConfig;\npub struct A;\n",
            ),
            ("agent/src/root.rs", "pub struct Root;\n"),
            ("agent/src/config.rs", "pub struct MdConfig;\n"),
        ]);
        let errs = problems(t.path(), "agent");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("agent/src/sources/md.rs imports agent/src/config.rs (MdConfig)"),
            "{}",
            errs[0]
        );
    }

    #[test]
    fn a_model_may_read_parsers_but_not_collectors_and_tests_are_exempt() {
        let t = tree(&[
            ("agent/src/lib.rs", LIB),
            ("agent/src/sources/mod.rs", "pub struct Md;\n"),
            ("agent/src/collect/mod.rs", "pub struct MdCollector;\n"),
            (
                "agent/src/health/mod.rs",
                "use crate::sources::Md;\n#[cfg(test)]\nmod tests {\n    use crate::collect::MdCollector;\n}\n",
            ),
            (
                "agent/src/collect/md.rs",
                "use crate::health::Model;\nfn f() { crate::scheduler::run(); }\n",
            ),
            ("agent/src/scheduler.rs", "pub fn run() {}\n"),
        ]);
        let errs = problems(t.path(), "agent");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].contains("`collect` may not import `scheduler`"),
            "{}",
            errs[0]
        );
        // another member has no rules
        assert!(problems(t.path(), "wire").is_empty());
    }
}
