#!/usr/bin/env bash
# Runs every test of the project, on a fresh machine too:
#
#   scripts/test.sh
#
# Installs what the tests need beyond the Rust toolchain — from the OS packages: curl, python3 and
# openssl (scripts and test certificates), influxdb-client, python3-influxdb and python3-requests
# (real InfluxDB and HTTP clients against the collector), faketime (a collector whose clock is set back, in the dashboards
# test), prometheus (promtool and a real Prometheus scraping the agent), rpm (rpmbuild for the
# packaging test), fuse3, libfuse3-dev and pkg-config (a hung FUSE mount for the agent's
# dead-mount tests), procps and gcc (smoke runs of the quickstart and bench/read-walk.c) and
# InfluxDB 1.x (every test that stores data runs a real influxd on
# 127.0.0.1); from PyPI influxdb-client and datafusion (the InfluxDB 3 plugin's SQL runs on it);
# with Go (golang-go installed when there is none; 1.21 or later builds them) Telegraf and
# VictoriaMetrics from the Go module proxy — then checks
# formatting and lints, builds the tests and runs the whole workspace's tests, those that mostly wait
# (the short soak, the InfluxDB setup's continuous queries) beside the others. Snapshots are never
# rewritten here. Each phase prints its time, and the end a summary with the slowest test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$SECONDS
phase_t=$SECONDS
phase_name=""
summary=""
# phase NAME: ends the current phase (printing its time) and starts NAME; `phase ""` ends the last.
phase() {
  if [ -n "$phase_name" ]; then
    local took=$((SECONDS - phase_t))
    echo "== $phase_name: ${took} s"
    summary+=$(printf '  %-26s %5d s' "$phase_name" "$took")$'\n'
  fi
  phase_name=$1
  phase_t=$SECONDS
  if [ -n "$phase_name" ]; then echo "== $phase_name"; fi
}

phase "prerequisites"
missing=()
# tool:package — promtool and prometheus check the agent's Prometheus exposition, rpmbuild
# builds the rpms tests/tests/packages.rs installs into a scratch root, pgrep and cc serve the
# smoke runs of scripts/quickstart.sh and bench/read-walk.c (tests/tests/smoke_scripts.rs)
for pair in curl:curl python3:python3 pip3:python3-pip openssl:openssl faketime:faketime promtool:prometheus rpmbuild:rpm pgrep:procps cc:gcc; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
# real InfluxDB clients against the collector (collector/tests/clients.rs): the influx CLI, the
# Python v1 client, pip for the v2 client below
command -v influx >/dev/null || missing+=(influxdb-client)
/usr/bin/python3 -c 'import influxdb' 2>/dev/null || missing+=(python3-influxdb)
# a refusal must reach Python's requests as an answer (collector/tests/refusals.rs)
/usr/bin/python3 -c 'import requests' 2>/dev/null || missing+=(python3-requests)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
# a FUSE filesystem whose statfs hangs, compiled and mounted by agent/tests/dead_mount.rs
command -v fusermount3 >/dev/null || missing+=(fuse3)
command -v pkg-config >/dev/null || missing+=(pkg-config)
pkg-config --exists fuse3 2>/dev/null || missing+=(libfuse3-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
# the InfluxDB 3 plugin's SQL runs on Apache DataFusion, the query engine inside InfluxDB 3
python3 -c 'import datafusion' 2>/dev/null || python3 -m pip install --quiet datafusion \
  || python3 -m pip install --quiet --break-system-packages datafusion
scripts/influxd-test.sh install
# --- PyPI: the InfluxDB v2 Python client for collector/tests/clients.rs, kept under target/
if ! PYTHONPATH=target/pyclients /usr/bin/python3 -c 'import influxdb_client' 2>/dev/null; then
  /usr/bin/python3 -m pip install -q --target target/pyclients 'influxdb-client==1.50.0'
fi
# --- end PyPI
# --- Telegraf for collector/tests/clients.rs, from the Go module proxy into target/telegraf/,
# built beside the Rust build (a fresh machine: see docs/collector.md for the figures)
telegraf_bin=$PWD/target/telegraf/telegraf
telegraf_pid=""
# Go: Telegraf v1.37.2 asks for go 1.25.5 and VictoriaMetrics v1.151.0 for go 1.26.6; a Go of
# 1.21 or later fetches the toolchain a module asks for from the module proxy (GOTOOLCHAIN=auto).
# Without Go, the OS's golang-go is installed; when it is older than 1.21 (Debian 12 has 1.19)
# nothing can build them here, and their tests fail, saying so (STORWATCH_ALLOW_SKIP).
go_bin=$(command -v go || echo /usr/local/go/bin/go)
if [ ! -x "$go_bin" ] && { [ ! -x target/telegraf/telegraf ] || [ ! -x target/victoriametrics/victoria-metrics ]; }; then
  echo "installing golang-go"
  apt-get update -q >/dev/null || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends golang-go >/dev/null || true
  go_bin=$(command -v go || echo /usr/bin/go)
fi
if [ -x "$go_bin" ]; then
  go_version=$("$go_bin" env GOVERSION 2>/dev/null || "$go_bin" version | awk '{print $3}')
  if ! printf '1.21\n%s\n' "${go_version#go}" | sort -C -V; then
    echo "Go ${go_version#go} cannot build Telegraf or VictoriaMetrics (they need Go 1.21 or later to" \
      "fetch their toolchains): their tests will fail unless STORWATCH_ALLOW_SKIP=telegraf,victoriametrics" >&2
    go_bin=/nonexistent
  fi
  export GOTOOLCHAIN=auto
fi
if [ ! -x "$telegraf_bin" ] && [ -x "$go_bin" ]; then
  mkdir -p target/telegraf
  GOBIN=$PWD/target/telegraf "$go_bin" install \
    -tags "custom,inputs.mem,outputs.influxdb,outputs.influxdb_v2" \
    github.com/influxdata/telegraf/cmd/telegraf@v1.37.2 >target/telegraf/build.log 2>&1 &
  telegraf_pid=$!
fi
# --- end Telegraf
# --- VictoriaMetrics single node for collector/tests/remote_write.rs, from the Go module proxy
# into target/victoriametrics/ (scripts/victoriametrics-test.sh), built beside the Rust build
vm_pid=""
if [ ! -x target/victoriametrics/victoria-metrics ] && [ -x "$go_bin" ]; then
  PATH=$(dirname "$go_bin"):$PATH scripts/victoriametrics-test.sh install &
  vm_pid=$!
fi
# --- end VictoriaMetrics

phase "cargo fmt --check"
cargo fmt --all -- --check

phase "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

phase "cargo xtask check"
# generated files against their sources (the metric contract, the PromQL definitions), no
# non-test source file over 600 lines, no import cycle between a crate's modules
cargo xtask check

phase "build the tests"
cargo test --workspace --locked --no-run

if [ -n "$telegraf_pid" ]; then
  phase "wait for the Telegraf build"
  wait "$telegraf_pid" || { echo "Telegraf build failed:"; tail -20 target/telegraf/build.log; exit 1; }
fi
if [ -x "$telegraf_bin" ]; then export STORWATCH_TELEGRAF=$telegraf_bin; fi
if [ -n "$vm_pid" ]; then
  phase "wait for the VictoriaMetrics build"
  wait "$vm_pid" || { echo "VictoriaMetrics build failed (target/victoriametrics/build.log)"; exit 1; }
fi

phase "run the tests"
# Test binaries that mostly wait run beside the rest, each in a cargo of its own, its output in a
# log printed after the rest and its exit status honoured; the rest skip exactly these tests. (The
# two cores would otherwise sit idle while one binary waits.) Ports: each of these must use ports
# that no other test uses (the soak 18920-18925, the InfluxDB setup 18400-18401).
#   soak short_soak: 3 minutes of a simulated fleet's wall-clock time with faults, ~7 % of a core
#   influx_setup: up to a minute waiting for the minute boundary at which influxd runs its
#   continuous queries
beside_targets=(soak influx_setup)
beside_tests=(short_soak influxdb_setup_keeps_bursts_through_the_rollups)
# A second lane: the dashboards' and rules' package (storwatch-dashboards-tests), whose binaries
# each step a simulated fleet and query a real InfluxDB or Prometheus, runs beside the rest as one
# cargo of its own (its tests use ports 19611-19650, no other test's); the rest excludes it.
lane_package=storwatch-dashboards-tests
logs=$(mktemp -d)
# a stop of this script (an error, Ctrl-C) ends the tests still running beside the rest: each runs
# in a session of its own (setsid), whose process group is ended with everything it started
end_beside() {
  local f
  for f in "$logs"/*.pgid; do
    if [ -e "$f" ] && [ ! -e "${f%.pgid}.status" ]; then
      kill -TERM -- "-$(cat "$f")" 2>/dev/null || true
    fi
  done
  rm -rf "$logs"
}
trap end_beside EXIT
trap 'exit 130' INT TERM
skips=()
beside_pids=()
for i in "${!beside_targets[@]}"; do
  skips+=(--skip "${beside_tests[$i]}")
  INSTA_UPDATE=no setsid -w bash -c 'echo $$ >"$3.pgid"; start=$SECONDS
    cargo test --workspace --locked --test "$1" -- --exact "$2" >"$3" 2>&1 && rc=0 || rc=$?
    echo "$rc $((SECONDS - start))" >"$3.status"' \
    _ "${beside_targets[$i]}" "${beside_tests[$i]}" "$logs/${beside_targets[$i]}" &
  beside_pids+=($!)
done
INSTA_UPDATE=no setsid -w bash -c 'echo $$ >"$2.pgid"; start=$SECONDS
  cargo test --locked --no-fail-fast -p "$1" >"$2" 2>&1 && rc=0 || rc=$?
  echo "$rc $((SECONDS - start))" >"$2.status"' _ "$lane_package" "$logs/$lane_package" &
lane_pid=$!
# The rest: what `cargo test --workspace` runs, in three parts, because the benchmarks (criterion,
# harness = false, run once in its test mode) take no --skip: the libraries', binaries' and
# integration tests (libtest) less those run beside, the benchmarks, the doc tests.
rest() { # cargo test's target selection [-- the tests' arguments]
  INSTA_UPDATE=no cargo test --workspace --exclude "$lane_package" --locked --no-fail-fast "$@" 2>&1 \
    | tee -a "$logs/rest"
}
failed=()
rest --lib --bins --test '*' -- --exact "${skips[@]}" || failed+=("the rest's tests")
rest --bench '*' || failed+=("the benchmarks (test mode)")
rest --doc || failed+=("the doc tests")
rest_took=$((SECONDS - phase_t))
beside_summary=""
for i in "${!beside_targets[@]}"; do
  target=${beside_targets[$i]}
  wait "${beside_pids[$i]}" || true
  read -r b_rc b_took <"$logs/$target.status" || { b_rc=1; b_took=0; }
  echo "== $target, run beside the rest: $b_took s, exit status $b_rc"
  cat "$logs/$target" 2>/dev/null || echo "(no log: the run did not start)"
  if [ "$b_rc" != 0 ]; then failed+=("$target (${beside_tests[$i]})"); fi
  beside_summary+=$(printf '    %-24s %5d s' "$target (beside)" "$b_took")$'\n'
done
wait "$lane_pid" || true
read -r l_rc l_took <"$logs/$lane_package.status" || { l_rc=1; l_took=0; }
echo "== $lane_package, run beside the rest: $l_took s, exit status $l_rc"
cat "$logs/$lane_package" 2>/dev/null || echo "(no log: the run did not start)"
if [ "$l_rc" != 0 ]; then failed+=("$lane_package"); fi
beside_summary+=$(printf '    %-24s %5d s' "$lane_package (beside)" "$l_took")$'\n'
phase ""
summary+=$(printf '    %-24s %5d s' "the rest" "$rest_took")$'\n'$beside_summary

echo "== time per phase"
printf '%s' "$summary"
echo "== slowest test binaries"
# `Running tests/x.rs (target/debug/deps/x-hash)` or `Doc-tests crate`, then its
# `test result: … finished in 1.23s`; in the rest's log and each one's run beside it
awk '/^ *Running / { l=$0; sub(/^ *Running /, "", l); f=l; sub(/ \(.*$/, "", f)
                      b=l; sub(/^.*\//, "", b); sub(/-[0-9a-f]+\)$/, "", b); name=b ": " f }
     /^ *Doc-tests / { name="doc-tests " $2 }
     /^test result:/ && name != "" { t=$NF; sub(/s$/, "", t); printf "  %8.2f s  %s\n", t, name; name="" }' \
  "$logs/rest" "${beside_targets[@]/#/$logs/}" "$logs/$lane_package" | sort -rn | head -8
if [ ${#failed[@]} -gt 0 ]; then
  printf '== FAILED after %d s (output above):' "$((SECONDS - t0))"
  printf ' %s;' "${failed[@]}"
  echo
  exit 1
fi
echo "== all tests passed in $((SECONDS - t0)) s"
