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
# formatting, builds the tests (one test binary per crate) with clippy's lints as errors and runs the whole workspace's
# tests, those that mostly wait (the short soak, the InfluxDB setup's continuous queries, the
# dashboards' package) beside the others. Snapshots are never
# rewritten here. Each phase prints its time, and the end a summary with the slowest test binaries
# and the tests that ran for over a minute.
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
# builds the rpms tests/tests/it/packages.rs installs into a scratch root, pgrep and cc serve the
# smoke runs of scripts/quickstart.sh and bench/read-walk.c (tests/tests/it/smoke_scripts.rs)
for pair in curl:curl python3:python3 pip3:python3-pip openssl:openssl faketime:faketime promtool:prometheus rpmbuild:rpm pgrep:procps cc:gcc; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
# real InfluxDB clients against the collector (collector/tests/it/clients.rs): the influx CLI, the
# Python v1 client, pip for the v2 client below
command -v influx >/dev/null || missing+=(influxdb-client)
/usr/bin/python3 -c 'import influxdb' 2>/dev/null || missing+=(python3-influxdb)
# a refusal must reach Python's requests as an answer (collector/tests/it/refusals.rs)
/usr/bin/python3 -c 'import requests' 2>/dev/null || missing+=(python3-requests)
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
# a FUSE filesystem whose statfs hangs, compiled and mounted by agent/tests/it/dead_mount.rs
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
# --- PyPI: the InfluxDB v2 Python client for collector/tests/it/clients.rs, kept under target/
if ! PYTHONPATH=target/pyclients /usr/bin/python3 -c 'import influxdb_client' 2>/dev/null; then
  /usr/bin/python3 -m pip install -q --target target/pyclients 'influxdb-client==1.50.0'
fi
# --- end PyPI
# --- Telegraf for collector/tests/it/clients.rs, from the Go module proxy into target/telegraf/,
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
# --- VictoriaMetrics single node for collector/tests/it/remote_write.rs, from the Go module proxy
# into target/victoriametrics/ (scripts/victoriametrics-test.sh), built beside the Rust build
vm_pid=""
if [ ! -x target/victoriametrics/victoria-metrics ] && [ -x "$go_bin" ]; then
  PATH=$(dirname "$go_bin"):$PATH scripts/victoriametrics-test.sh install &
  vm_pid=$!
fi
# --- end VictoriaMetrics

phase "cargo fmt --check"
cargo fmt --all -- --check

# Clippy lints inside the test build: cargo runs clippy-driver (rustc with clippy's lints) in
# rustc's place for the workspace's own crates (RUSTC_WORKSPACE_WRAPPER; the dependencies are
# compiled by rustc alone, as `cargo clippy` leaves them unlinted too), with every warning an
# error, so one build both lints and compiles; `cargo clippy --workspace --all-targets` before
# it checked every crate a second time (README, "Test it", gives the two timings). The targets
# are the same: the test build compiles every library, binary, test and example, and the
# benchmarks are compiled in their test mode below, all through the same wrapper. CLIPPY_ARGS
# is how `cargo clippy` passes `-- -D warnings` to clippy-driver (the arguments joined by
# __CLIPPY_HACKERY__). Cargo keeps these artifacts apart from a plain `cargo test`'s (the
# wrapper is part of their hash), so neither build undoes the other.
clippy_driver=$(rustc --print sysroot)/bin/clippy-driver
if [ ! -x "$clippy_driver" ]; then
  echo "no clippy-driver in the Rust toolchain ($clippy_driver): rustup component add clippy" >&2
  exit 1
fi
export RUSTC_WORKSPACE_WRAPPER=$clippy_driver
export CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

# Fewer codegen units when nothing is kept for an incremental rebuild (.ci/run's clean clone):
# rustc cuts each crate into 256 units by default, so that many cores can compile one crate
# and a rebuild recompiles little; on 2 cores and a build made once, every unit's copy of the
# generic code it inlines is CPU spent for nothing. Measured on the agent's library (opt-level
# 1, `touch agent/src/lib.rs; cargo build -p storwatch-agent --lib --config
# 'profile.dev.package.storwatch-agent.codegen-units=N'`): 64 CPU-s at 256 units, 59 at 16, 53
# at 8, 54 at 4; tokio 10.0 → 8.7 CPU-s at 16, rustls 20.1 → 17.1 (opt-level 2). With
# incremental builds on, rustc's default is kept.
if [ "${CARGO_INCREMENTAL:-}" = 0 ]; then
  export CARGO_PROFILE_DEV_CODEGEN_UNITS=${CARGO_PROFILE_DEV_CODEGEN_UNITS:-8}
fi

logs=$(mktemp -d)
# a stop of this script (an error, Ctrl-C) ends the lanes still running (see "run the tests"):
# each runs in a session of its own (setsid), whose process group is ended with everything it
# started
end_lanes() {
  local f
  for f in "$logs"/*.pgid; do
    if [ -e "$f" ] && [ ! -e "${f%.pgid}.status" ]; then
      kill -TERM -- "-$(cat "$f")" 2>/dev/null || true
    fi
  done
  rm -rf "$logs"
}
trap end_lanes EXIT
trap 'exit 130' INT TERM

phase "build the tests, with clippy's lints"
# Every test executable, with the `xtask` binary (xtask's own test runs it), built once for the
# features the whole workspace resolves. Cargo's list of what it built names each executable's
# package and directory: the lanes below run their executables from it, since a `cargo test -p`
# of one package would resolve its dependencies' features for that package alone and build them
# again (serde, serde_json and everything above them: the agent, the simulator...).
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics \
  | python3 -c 'import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    source, _, name = m["package_id"].partition("#")  # path+file:///…/dir#[name@]version
    name = name.split("@")[0] if "@" in name else source.rstrip("/").rsplit("/", 1)[-1]
    mode = "test" if m["profile"]["test"] else "build"
    print(name, m["target"]["name"], mode, m["executable"], os.path.dirname(m["manifest_path"]))' \
  >"$logs/executables"
# run_test PACKAGE TARGET [ARGUMENTS]: runs the test executable of PACKAGE's TARGET as cargo test
# would (from the package's directory), after cargo's `Running` line
run_test() {
  local exe dir
  read -r exe dir < <(awk -v p="$1" -v t="$2" '$1 == p && $2 == t && $3 == "test" { print $4, $5 }' \
    "$logs/executables")
  [ -n "$exe" ] || { echo "no test executable $2 of $1"; return 1; }
  shift 2
  echo "     Running $exe"
  (cd "$dir" && "$exe" "$@")
}

phase "cargo xtask check"
# generated files against their sources (the metric contract, the PromQL definitions), no
# non-test source file over 600 lines, no import cycle between a crate's modules, no upward
# import between the agent's layers: what `cargo xtask check` runs, with the binary the test build made (`cargo run -p xtask` would build the
# workspace's crates again, for the features xtask's dependencies alone resolve)
xtask=$(awk '$1 == "xtask" && $2 == "xtask" && $3 == "build" { print $4 }' "$logs/executables")
"${xtask:?the test build made no xtask binary}" check
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
# Each crate's integration tests are one test binary (`<crate>/tests/it/`, a module per file), so
# tests are named `module::test`. What mostly waits runs beside the rest, in lanes: each lane runs
# its test executables in a session of its own, its output in a log printed after the rest, its
# exit status honoured, and the rest skips exactly what the lanes run. (The two cores would
# otherwise sit idle while a test waits.) A lane's tests use ports no other test uses (the soak
# 18920-18925, the InfluxDB setup 18400-18401, the dashboards' package 19611-19651).
lane_names=(soak influx_setup dashboards)
# 3 minutes of a simulated fleet's wall-clock time with faults, ~7 % of a core
lane_soak() { run_test storwatch-tests it --exact soak::short_soak; }
# up to a minute waiting for the minute boundary at which influxd runs its continuous queries
lane_influx_setup() {
  run_test storwatch-collector it --exact influx_setup::influxdb_setup_keeps_bursts_through_the_rollups
}
# the dashboards' and rules' package (storwatch-dashboards-tests; its doc tests run with the
# rest's): simulated fleets stepped into a real InfluxDB or
# Prometheus, and every query asked of them
lane_dashboards() {
  local rc=0
  run_test storwatch-dashboards-tests storwatch_dashboards_tests || rc=1
  run_test storwatch-dashboards-tests it || rc=1
  return $rc
}
rest_skips=(--skip soak::short_soak --skip influx_setup::influxdb_setup_keeps_bursts_through_the_rollups)
export logs
export -f run_test "${lane_names[@]/#/lane_}"
lane_pids=()
for i in "${!lane_names[@]}"; do
  INSTA_UPDATE=no setsid -w bash -c 'echo $$ >"$1.pgid"; start=$SECONDS
    "$2" >"$1" 2>&1 && rc=0 || rc=$?
    echo "$rc $((SECONDS - start))" >"$1.status"' _ "$logs/lane-$i" "lane_${lane_names[$i]}" &
  lane_pids+=($!)
done
# The rest: what `cargo test --workspace` runs, in three parts, because the benchmarks (criterion,
# harness = false, run once in its test mode) take no --skip: the libraries', binaries' and
# integration tests (libtest) less what the lanes run, the benchmarks, the doc tests. (Less one
# package, the workspace resolves the same features: nothing is built again.)
rest() { # cargo test's target selection [-- the tests' arguments]
  INSTA_UPDATE=no cargo test --workspace --locked --no-fail-fast "$@" 2>&1 | tee -a "$logs/rest"
}
# The rest's test binaries mostly wait on what their tests start (agents sampling every second,
# collectors, influxd, simulated hosts): at libtest's default of one test per core, the agent's,
# simulator's, collector's and end-to-end integration tests used 5-15 % of their wall time in
# CPU (README, "Test it"). Four tests a core (at most 16 at once; STORWATCH_TEST_THREADS sets
# it) keeps the cores busy instead. The lanes keep libtest's default: the dashboards' package is
# CPU-bound.
rest_threads=${STORWATCH_TEST_THREADS:-$(($(nproc) * 4 > 16 ? 16 : $(nproc) * 4))}
failed=()
rest --exclude storwatch-dashboards-tests --lib --bins --test '*' -- --exact \
  --test-threads "$rest_threads" "${rest_skips[@]}" || failed+=("the rest's tests")
rest --bench '*' || failed+=("the benchmarks (test mode)")
rest --doc || failed+=("the doc tests")
rest_took=$((SECONDS - phase_t))
lanes_summary=""
for i in "${!lane_names[@]}"; do
  wait "${lane_pids[$i]}" || true
  read -r l_rc l_took <"$logs/lane-$i.status" || { l_rc=1; l_took=0; }
  echo "== ${lane_names[$i]}, run beside the rest: $l_took s, exit status $l_rc"
  cat "$logs/lane-$i" 2>/dev/null || echo "(no log: the run did not start)"
  if [ "$l_rc" != 0 ]; then failed+=("${lane_names[$i]}"); fi
  lanes_summary+=$(printf '    %-24s %5d s' "${lane_names[$i]} (beside)" "$l_took")$'\n'
done
phase ""
summary+=$(printf '    %-24s %5d s' "the rest" "$rest_took")$'\n'$lanes_summary

echo "== time per phase"
printf '%s' "$summary"
echo "== slowest test binaries (a crate's integration tests are one binary; the rest ran $rest_threads tests at a time)"
# `Running … (target/debug/deps/it-hash)` or `Doc-tests crate`, then its `test result: …
# finished in 1.23s`; the package of an executable from cargo's list of what it built
awk 'FNR == NR { pkg[$4] = $1; next }
     /^ *Running / { exe=$NF; gsub(/[()]/, "", exe); p=""
                     for (e in pkg) if (e == exe || substr(e, length(e) - length(exe)) == "/" exe) p=pkg[e]
                     t=exe; sub(/^.*\//, "", t); sub(/-[0-9a-f]+$/, "", t); name=p " " t }
     /^ *Doc-tests / { name="doc-tests " $2 }
     /^test result:/ && name != "" { t=$NF; sub(/s$/, "", t); printf "  %8.2f s  %s\n", t, name; name="" }' \
  "$logs/executables" "$logs/rest" "$logs"/lane-? | sort -rn | head -8
# libtest names the tests still running after a minute: the candidates for a lane of their own
if grep -hq 'has been running for over 60 seconds' "$logs/rest" "$logs"/lane-?; then
  echo "== tests that ran for over a minute"
  grep -h 'has been running for over 60 seconds' "$logs/rest" "$logs"/lane-? \
    | sed -E 's/^test (.*) has been running.*/  \1/' | sort -u
fi
if [ ${#failed[@]} -gt 0 ]; then
  printf '== FAILED after %d s (output above):' "$((SECONDS - t0))"
  printf ' %s;' "${failed[@]}"
  echo
  exit 1
fi
echo "== all tests passed in $((SECONDS - t0)) s"
