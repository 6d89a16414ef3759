#!/usr/bin/env bash
# Runs every test of the project, on a fresh machine too:
#
#   scripts/test.sh
#
# Installs what the tests need beyond the Rust toolchain (curl, and InfluxDB 1.x from the OS
# packages: the delivery tests run against a real influxd on 127.0.0.1), then checks formatting
# and lints and runs the whole workspace's tests. Snapshots are never rewritten here.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$SECONDS
if ! command -v curl >/dev/null; then
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends curl >/dev/null
fi
scripts/influxd-test.sh install
echo "== prerequisites ready ($((SECONDS - t0)) s)"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== cargo test"
INSTA_UPDATE=no cargo test --workspace --locked

echo "== all tests passed in $((SECONDS - t0)) s"
