//! A test that cannot run (a tool or a facility of the machine is missing) fails, unless the
//! suite is told to skip it: `STORWATCH_ALLOW_SKIP=1` skips every such test, a comma-separated
//! list (`STORWATCH_ALLOW_SKIP=telegraf,fuse`) only those needing what it names. A test that
//! did not run must never read as a pass.

use std::io::Write as _;

/// The variable that allows skipping.
pub const ALLOW_SKIP: &str = "STORWATCH_ALLOW_SKIP";

/// Called by a test that cannot run because `what` is missing (`why` says how, and how to get
/// it): panics with `why` unless [`ALLOW_SKIP`] allows skipping `what`; then says SKIPPED
/// loudly on stderr (past the harness's capture, so it shows in every run) and returns, for the
/// test to return.
pub fn skip_or_fail(what: &str, why: &str) {
    let allowed = std::env::var(ALLOW_SKIP).ok();
    if !allows(allowed.as_deref(), what) {
        panic!(
            "this test cannot run: {why}. scripts/test.sh installs what the tests need; \
             {ALLOW_SKIP}=1 (or ={what}) skips it instead"
        );
    }
    let _ = writeln!(
        std::io::stderr(),
        "\n!!!!!!!! SKIPPED ({what}, {ALLOW_SKIP} is set): {why} !!!!!!!!\n"
    );
}

/// Whether the value of [`ALLOW_SKIP`] allows skipping a test needing `what`.
fn allows(value: Option<&str>, what: &str) -> bool {
    value.is_some_and(|v| {
        v.split(',')
            .map(str::trim)
            .any(|w| w == "1" || w == "all" || w.eq_ignore_ascii_case(what))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_set_variable_naming_the_tool_or_all_allows_a_skip() {
        assert!(!allows(None, "telegraf"));
        assert!(!allows(Some(""), "telegraf"));
        assert!(!allows(Some("0"), "telegraf"));
        assert!(!allows(Some("fuse"), "telegraf"));
        assert!(allows(Some("1"), "telegraf"));
        assert!(allows(Some("all"), "telegraf"));
        assert!(allows(Some("fuse, telegraf"), "telegraf"));
    }
}
