#!/usr/bin/env bash
# Whole-process benchmark of storwatch-agent on the synthetic 200-disk storage server of the shared
# bench harness (../shared/bench: 200 disks, 40 dm-multipath maps, 8 md arrays, 8 NICs, 64 CPUs),
# 1 s sample and 10 s report interval, CPU from the kernel's per-thread accounting (schedstat).
#
#   bench/run-agent-bench.sh [--duration 60] [--rounds 2] [--only storwatch,floor-full]
#
# The harness is read-only where it is shared, so it is copied to a scratch directory; results land
# in bench/out/ (table.txt, results.jsonl). To compare with Telegraf, node_exporter and collectd,
# run `./run.sh install` in the scratch copy first (it builds Telegraf with Go: ~10 min) and add them
# to --only. STORWATCH_AGENT_BIN names an agent binary to measure instead of building the release
# one (the test suite's smoke run passes its debug build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
harness=${STORWATCH_BENCH_HARNESS:-$repo/../shared/bench}
work=${STORWATCH_BENCH_DIR:-/tmp/storwatch-bench}
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--duration 60 --rounds 2 --only storwatch,storwatch-core,floor-full)

agent_bin=${STORWATCH_AGENT_BIN:-}
if [ -z "$agent_bin" ]; then
  cargo build --release -p storwatch-agent --manifest-path "$repo/Cargo.toml"
  target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$repo/Cargo.toml" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  agent_bin=$target/release/storwatch-agent
fi
mkdir -p "$work"
cp -r "$harness"/. "$work"/
chmod -R u+w "$work"
mkdir -p "$work/bin"
cp "$agent_bin" "$work/bin/storwatch-agent"
[ -x "$work/bin/floor" ] || gcc -O2 -Wall -o "$work/bin/floor" "$work/floor.c"
# storwatch-core: the same agent with the storage-health monitors off (block devices, NICs, CPU,
# memory and PSI only), to show what the core sampling costs on its own.
cat >"$work/conf/storwatch-core.toml" <<'TOML'
[md]
enabled = false
[mpath]
enabled = false
[zpool]
enabled = false
TOML
grep -q '^storwatch-core ' "$work/agents.conf" || echo 'storwatch-core  | file | {bin}/storwatch-agent run --config {conf:storwatch-core.toml} --proc-root {proc} --sys-root {sys} --sample-interval 1s --report-interval 10s --output file:{out}' >>"$work/agents.conf"
(cd "$work" && ./run.sh "${args[@]}")
mkdir -p "$here/out"
cp "$work"/out/table*.txt "$work"/out/results.jsonl "$here/out/" 2>/dev/null || true
