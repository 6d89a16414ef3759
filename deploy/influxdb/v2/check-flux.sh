#!/usr/bin/env bash
# Parse and type-check the InfluxDB 2.x tasks (tasks/*.flux) with Flux's own analyzer — libflux,
# the Rust half of Flux, at the version InfluxDB 2.7.11 ships (flux v0.195.2) — without a server:
# syntax, undefined identifiers and wrong argument names, as `influx task create` would reject
# them. It does not run a task (no data, no to()).
#
#   deploy/influxdb/v2/check-flux.sh [FILE.flux …]      default: every task
#
# Needs go (to fetch the flux module) and cargo; the first run builds the checker (~2 min on two
# cores) in ~/.cache/storwatch-fluxcheck, later runs take a second.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
flux_version=v0.195.2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/storwatch-fluxcheck
go=$(command -v go || echo /usr/local/go/bin/go)

if [ $# -eq 0 ]; then set -- "$here"/tasks/*.flux; fi

libflux=$("$go" mod download -json "github.com/influxdata/flux@$flux_version" \
  | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/libflux
[ -d "$libflux/flux" ] || { echo "check-flux.sh: no libflux in the flux module ($libflux)" >&2; exit 1; }

mkdir -p "$cache/src"
cat >"$cache/Cargo.toml" <<EOF
[package]
name = "storwatch-fluxcheck"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
# default features off: "strict" denies warnings that newer compilers add
flux = { path = "$libflux/flux", default-features = false }

[workspace]
EOF
cat >"$cache/src/main.rs" <<'EOF'
//! Runs Flux's semantic analyzer (with the standard library of this Flux release) on each file.
fn main() {
    let (mut bad, mut n) = (0, 0);
    for path in std::env::args().skip(1) {
        let src = std::fs::read_to_string(&path).expect("readable file");
        let mut analyzer = flux::new_semantic_analyzer(Default::default()).expect("analyzer");
        n += 1;
        if let Err(e) = analyzer.analyze_source("main".into(), path.clone(), &src) {
            bad += 1;
            println!("{path}: {}", e.error);
        }
    }
    println!("{n} files analyzed by flux {}, {bad} with errors", env!("FLUX_VERSION"));
    std::process::exit(i32::from(bad > 0));
}
EOF
# the versions libflux was released with, not the newest that semver allows
[ -f "$cache/Cargo.lock" ] || install -m 644 "$libflux/Cargo.lock" "$cache/Cargo.lock"
FLUX_VERSION=$flux_version cargo build --quiet --release --manifest-path "$cache/Cargo.toml" 2>/dev/null \
  || FLUX_VERSION=$flux_version cargo build --release --manifest-path "$cache/Cargo.toml"
"$cache/target/release/storwatch-fluxcheck" "$@"
