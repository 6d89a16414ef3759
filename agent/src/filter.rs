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
    include: Vec<String>,
    /// A name matching one of these is left out, included or not.
    exclude: Vec<String>,
}

impl Filter {
    /// A filter keeping the names `include` matches (all, when empty) that `exclude` does not.
    pub fn new(include: Vec<String>, exclude: Vec<String>) -> Self {
        Self { include, exclude }
    }

    /// A filter keeping every name but those `exclude` matches.
    pub fn excluding(exclude: &[String]) -> Self {
        Self::new(Vec::new(), exclude.to_vec())
    }

    /// Whether `name` is kept.
    pub fn matches(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| glob_match(p, name)))
            && !self.exclude.iter().any(|p| glob_match(p, name))
    }
}

/// True when `name` matches the shell-style glob `pat` (only `*` is special).
pub fn glob_match(pat: &str, name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
