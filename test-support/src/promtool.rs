//! Prometheus's own checker, `promtool` (Debian package `prometheus`; scripts/test.sh installs it).

use std::ffi::OsStr;
use std::io::Write;
use std::process::{Command, Stdio};

/// `promtool args…`, `stdin` written to its standard input: whether it exited 0, and its standard
/// output and error together.
pub fn promtool<S: AsRef<OsStr>>(args: &[S], stdin: Option<&[u8]>) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/test.sh installs it)");
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input).expect("promtool's standard input");
    }
    let out = child.wait_with_output().expect("promtool's output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// [`promtool`], failing the test with what promtool printed unless it exits 0; its output.
pub fn promtool_ok<S: AsRef<OsStr>>(args: &[S], stdin: Option<&[u8]>) -> String {
    let (ok, text) = promtool(args, stdin);
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    assert!(ok, "promtool {}:\n{text}", shown.join(" "));
    text
}
