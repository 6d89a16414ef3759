//! The one include/exclude filter every collector that leaves names out applies: disks
//! (`exclude_devices`), NICs (`exclude_interfaces`), filesystems (`[fs] exclude_fstypes`,
//! `exclude_mounts`) and drives (`[drive] exclude`).
//!
//! Patterns are shell-style globs where only `*` is special (`loop*`, `sd*1`, `/run/user/*`); a
//! name is kept when the include list is empty or one of its patterns matches it, and none of the
//! exclude list's does. It sits below the config and the collectors and imports nothing of the
//! agent's, so both can use it.

/// Include and exclude glob lists, and the one question asked of them: [`Filter::matches`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// When not empty, a name must match one of these.
    include: Vec<Glob>,
    /// A name matching one of these is left out, included or not.
    exclude: Vec<Glob>,
}

impl Filter {
    /// A filter keeping the names `include` matches (all, when empty) that `exclude` does not.
    pub fn new(include: Vec<String>, exclude: Vec<String>) -> Self {
        Self {
            include: include.iter().map(|p| Glob::new(p)).collect(),
            exclude: exclude.iter().map(|p| Glob::new(p)).collect(),
        }
    }

    /// A filter keeping every name but those `exclude` matches.
    pub fn excluding(exclude: &[String]) -> Self {
        Self::new(Vec::new(), exclude.to_vec())
    }

    /// Whether `name` is kept.
    pub fn matches(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|g| g.matches(name)))
            && !self.exclude.iter().any(|g| g.matches(name))
    }
}

/// A glob cut at its `*`s once, when the filter is made: the question is asked of every
/// excluded name at every sample (a `loop*` row of `/proc/diskstats` is read each second and
/// left out each second), so a match allocates nothing and splits nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Glob {
    /// The text before the first `*` (the whole pattern when it has none).
    first: Box<str>,
    /// The pieces between the first and the last `*`, in order.
    middle: Box<[Box<str>]>,
    /// The text after the last `*`; `None` when the pattern has no `*`.
    last: Option<Box<str>>,
}

impl Glob {
    fn new(pat: &str) -> Self {
        let Some((first, tail)) = pat.split_once('*') else {
            return Self {
                first: pat.into(),
                middle: Box::default(),
                last: None,
            };
        };
        let (middle, last) = tail.rsplit_once('*').unwrap_or(("", tail));
        Self {
            first: first.into(),
            middle: middle
                .split('*')
                .filter(|p| !p.is_empty())
                .map(Into::into)
                .collect(),
            last: Some(last.into()),
        }
    }

    /// The text before the first `*` starts the name, the text after the last ends it, and the
    /// pieces between are found in order, each at its first place, in what lies between.
    fn matches(&self, name: &str) -> bool {
        let Some(last) = &self.last else {
            return name == &*self.first;
        };
        let Some(mut rest) = name
            .strip_prefix(&*self.first)
            .and_then(|r| r.strip_suffix(&**last))
        else {
            return false;
        };
        for p in &self.middle {
            match rest.find(&**p) {
                Some(i) => rest = &rest[i + p.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True when `name` matches the shell-style glob `pat` (only `*` is special).
    fn glob_match(pat: &str, name: &str) -> bool {
        Glob::new(pat).matches(name)
    }

    fn list(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn globs() {
        assert!(glob_match("loop*", "loop0"));
        assert!(!glob_match("loop*", "sdloop"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("sd*1", "sda1"));
        assert!(!glob_match("sd*1", "sda2"));
        assert!(glob_match("lo", "lo"));
        assert!(!glob_match("lo", "lo0"));
        assert!(glob_match("veth*", "veth1234abc"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxcyyb"));
        assert!(
            !glob_match("ab*b", "ab"),
            "the last piece may not reuse the first's bytes"
        );
        assert!(!glob_match("a*b*b", "ab"));
        assert!(glob_match("a*bc*c", "abcc"));
        assert!(glob_match("**", ""));
    }

    /// The form before, which gathered the pieces in a `Vec` at every call.
    fn glob_match_collected(pat: &str, name: &str) -> bool {
        let mut parts = pat.split('*');
        let first = parts.next().unwrap_or_default();
        let Some(mut rest) = name.strip_prefix(first) else {
            return false;
        };
        let parts: Vec<&str> = parts.collect();
        let Some((last, middle)) = parts.split_last() else {
            return rest.is_empty();
        };
        for p in middle {
            match rest.find(p) {
                Some(i) => rest = &rest[i + p.len()..],
                None => return false,
            }
        }
        rest.ends_with(last)
    }

    proptest::proptest! {
        /// Over a small alphabet, so that pieces repeat and overlap: the same answer as the
        /// form before for every pattern and name.
        #[test]
        fn the_glob_without_allocation_answers_as_before(
            pat in "[ab*]{0,8}",
            name in "[abc]{0,10}",
        ) {
            proptest::prop_assert_eq!(
                glob_match(&pat, &name),
                glob_match_collected(&pat, &name),
                "{:?} {:?}", pat, name
            );
        }
    }

    #[test]
    fn an_empty_filter_keeps_everything() {
        let f = Filter::default();
        assert!(f.matches("sda"));
        assert!(f.matches(""));
    }

    #[test]
    fn exclude_wins_over_include() {
        let f = Filter::new(list(&["sd*", "nvme*"]), list(&["sdz", "loop*"]));
        assert!(f.matches("sda"));
        assert!(f.matches("nvme0n1"));
        assert!(!f.matches("sdz"), "excluded although included");
        assert!(!f.matches("loop0"));
        assert!(!f.matches("md0"), "not included");
    }

    #[test]
    fn excluding_keeps_all_but_the_excluded() {
        let f = Filter::excluding(&list(&["loop*", "ram*"]));
        assert!(f.matches("sda"));
        assert!(!f.matches("loop3"));
        assert!(!f.matches("ram0"));
    }
}
