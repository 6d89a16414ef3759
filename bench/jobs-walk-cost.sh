#!/usr/bin/env bash
# What the jobs collector costs on a node without batch jobs (a disk server): agents side by side
# on one tree — the build machine's captured /proc files and a cgroup v2 tree of systemd services
# and user sessions, no batch system — one with the jobs collector on (the default), one with
# `[jobs] enabled = false`, and with STORWATCH_AGENT_BIN_BEFORE a second build with it on; 1 s
# sample, 10 s report interval; CPU from the kernel's per-thread accounting (schedstat, ns) of
# every thread of each agent over each round's window. The difference between on and off is
# the jobs collector's cost: walking the tree to find batch systems.
#
#   bench/jobs-walk-cost.sh [--duration 60] [--rounds 3] [--services 150] [--warmup 12] [--report 10]
#
# STORWATCH_AGENT_BIN names the agent binary (default: the release build, built first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
duration=60
rounds=3
services=150
warmup=12
report=10
while [ $# -gt 0 ]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --services) services=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    *) echo "usage: $0 [--duration S] [--rounds N] [--services N] [--warmup S] [--report S]" >&2; exit 2 ;;
  esac
done
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
agent_bin=$(agent_binary)
before_bin=${STORWATCH_AGENT_BIN_BEFORE:-}
base=$(mktemp -d /dev/shm/storwatch-jobs-walk.XXXXXX 2>/dev/null || mktemp -d)
cleanup() {
  for p in ${pids:-}; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$base"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

captured_proc "$base/proc"
python3 - "$repo" "$base" "$services" <<'PY'
import os, sys
repo, base, services = sys.argv[1], sys.argv[2], int(sys.argv[3])
cg = os.path.join(base, "sys/fs/cgroup")
os.makedirs(cg)
open(os.path.join(cg, "cgroup.controllers"), "w").write("cpuset cpu io memory pids\n")
for i in range(services):
    os.makedirs(os.path.join(cg, "system.slice", f"service-{i}.service"))
for u in range(3):
    os.makedirs(os.path.join(cg, "user.slice", f"user-{1000 + u}.slice", f"session-{u}.scope"))
os.makedirs(os.path.join(cg, "init.scope"))
PY
printf '[jobs]\nenabled = false\n' >"$base/off.toml"

declare -A pid
names="on off"
start_agent() { # name binary [config]
  local name=$1 bin=$2
  shift 2
  "$bin" run "$@" --proc-root "$base/proc" --sys-root "$base/sys" --sample-interval 1s \
    --report-interval "${report}s" --host "walk-$name" --output "file:$base/$name.lp" \
    2>"$base/$name.log" &
  pid[$name]=$!
  pids="${pids:-} $!"
}
start_agent on "$agent_bin"
start_agent off "$agent_bin" --config "$base/off.toml"
if [ -n "$before_bin" ]; then
  start_agent before "$before_bin"
  names="$names before"
fi

echo "services=$services duration=${duration}s rounds=$rounds agent=$agent_bin${before_bin:+ before=$before_bin}"
sleep "$warmup"
for round in $(seq 1 "$rounds"); do
  declare -A start
  for n in $names; do start[$n]=$(cpu_ns "${pid[$n]}"); done
  sleep "$duration"
  line="round $round:"
  declare -A per_s
  for n in $names; do
    per_s[$n]=$(python3 -c "print(($(cpu_ns "${pid[$n]}") - ${start[$n]}) / 1e6 / $duration)")
  done
  line+=$(python3 -c "print(' jobs off %.4f ms CPU per s; on %.4f, the jobs collector %.4f' % (${per_s[off]}, ${per_s[on]}, ${per_s[on]} - ${per_s[off]}))")
  if [ -n "$before_bin" ]; then
    line+=$(python3 -c "print('; before %.4f, its jobs collector %.4f' % (${per_s[before]}, ${per_s[before]} - ${per_s[off]}))")
  fi
  echo "$line"
done
for n in $names; do
  grep -q . "$base/$n.lp" || { echo "agent $n wrote no line; its log:" >&2; cat "$base/$n.log" >&2; exit 1; }
done
echo "jobs lines written (a disk server writes none): $(cat "$base"/*.lp | grep -c '^jobs,' || true)"
