#!/usr/bin/env bash
# The agent and the read floor at the same time on one ticking host: the floor's figure and the
# agents' come from the same seconds, so what the machine does meanwhile (other work, a kernel
# whose reads cost twice what they did the day before, as happened) falls on both sides of the
# ratio. bench/run-agent-bench.sh runs one agent after the other, minutes apart.
#
#   bench/side-by-side.sh [--disks 200] [--warmup 70] [--duration 240] [--agents core,attrlog]
#
# The host is the shared harness's (../shared/bench), generated afresh with --disks disks and
# ticking once a second, its read floor (`floor-full`: the harness's files read once a second
# in C) running as run-agent-bench.sh runs it. Beside it, at once, each agent of --agents:
#
#   core     every monitor that runs on a tree other than /sys (MD, multipath, zpool, NICs,
#            filesystems; the drive and RAID monitors need a program given by path): the
#            harness's `storwatch`
#   steady   every monitor, drives and controllers too, with run-agent-bench.sh's fake smartctl
#            and storcli64 and the drive round compressed from 30 min to 60 s (its
#            `storwatch-steady`)
#   attrlog  `steady` with smartd's attribute logs (its `storwatch-attrlog`, with the stand-in
#            for smartd that appends a line a minute to each SAS disk's log)
#   raid     `core` with the RAID monitor alone, at its default interval (60 s), with the fake
#            storcli64: its children are the controller's calls alone, which `steady` and
#            `attrlog` count together with the drive round's
#
# The controller is run-agent-bench.sh's: a drive rebuilding, or healthy with
# STORWATCH_BENCH_RAID=healthy.
#
# With STORWATCH_BEFORE_BIN each agent runs a second time at once with that binary
# (<name>-before). STORWATCH_AGENT_BIN is the binary measured (else the release build).
#
# The window starts --warmup seconds after the agents (past the first drive round) and lasts
# --duration seconds. For each process: the run time of each of its threads (schedstat, by
# thread name) and of the children it reaped (cutime+cstime of /proc/PID/stat: 10 ms ticks,
# exact only summed over many children), both ends of the window, and its RSS at the end;
# printed in ms a collection (the agents sample once a second) and as a multiple of the floor's
# in the same window.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
disks=200 warmup=70 duration=240 agents=core,attrlog
while [ $# -gt 0 ]; do
  case $1 in
    --disks) disks=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --agents) agents=$2; shift 2 ;;
    *) echo "side-by-side.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for a in ${agents//,/ }; do
  case $a in
    core | steady | attrlog | raid) ;;
    *) echo "side-by-side.sh: unknown agent $a (core, steady, attrlog, raid)" >&2; exit 2 ;;
  esac
done
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
agent_bin=$(agent_binary)
before_bin=${STORWATCH_BEFORE_BIN:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/storwatch-side.XXXXXX")
host=/dev/shm/$(basename "$work")-host
# the agents' outputs on tmpfs, as the harness's run directory: a report written to a disk
# would put the disk's I/O into the sampling thread's time
out=/dev/shm/$(basename "$work")-out
mkdir -p "$out"
cleanup() {
  local p
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  stop_ticking_host "$work"
  remove_dirs "$host" "$out" "/dev/shm/$(basename "$work")-bench-run" "$work"
}
pids=()
trap cleanup EXIT
start_ticking_host "$work" "$host" $((warmup + duration + 60)) --regen --disks "$disks" --smartd-attrlog
floor=$(pgrep -f -- "$work/bench/bin/floor" | head -1)
[ -n "$floor" ] || { echo "the harness's floor is not running" >&2; exit 1; }
# run-agent-bench.sh's configurations, their {bin} made the bench copy's bin/
for n in steady attrlog; do
  sed "s|{bin}|$work/bench/bin|g" "$work/bench/conf/storwatch-$n.toml" >"$work/$n.toml"
done
printf '[hwraid]\nstorcli = "%s/storcli64"\n' "$work/bench/bin/drive" >"$work/raid.toml"
names=(floor-full)
pids=("$floor")
start_agent() { # name binary
  local conf=()
  case $1 in
    core*) ;;
    steady*) conf=(--config "$work/steady.toml") ;;
    attrlog*) conf=(--config "$work/attrlog.toml") ;;
    raid*) conf=(--config "$work/raid.toml") ;;
  esac
  "$2" run "${conf[@]}" --proc-root "$host/proc" --sys-root "$host/sys" --sample-interval 1s \
    --report-interval 10s --output "file:$out/$1.lp" >"$work/$1.log" 2>&1 &
  names+=("$1")
  pids+=($!)
}
for a in ${agents//,/ }; do
  start_agent "$a" "$agent_bin"
  [ -z "$before_bin" ] || start_agent "$a-before" "$before_bin"
done
# into file $1, a line each: `name pid thread comm ns` (schedstat), `name pid children - ns`
# (cutime+cstime), `name pid rss - kB`
snapshot() {
  local i p t ns s
  for i in "${!pids[@]}"; do
    p=${pids[$i]}
    for t in /proc/"$p"/task/*; do
      read -r ns _ <"$t/schedstat" 2>/dev/null || continue
      echo "${names[$i]} $p thread $(tr ' ' _ <"$t/comm") $ns"
    done
    s=$(cat /proc/"$p"/stat)
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    echo "${names[$i]} $p children - $(( (${14} + ${15}) * 10000000 ))"
    echo "${names[$i]} $p rss - $(awk '/^VmRSS:/ {print $2}' /proc/"$p"/status)"
  done >"$1"
}
sleep "$warmup"
snapshot "$work/s0"
sleep "$duration"
snapshot "$work/s1"
for i in "${!pids[@]}"; do
  kill -0 "${pids[$i]}" 2>/dev/null || { echo "${names[$i]} exited: $(tail -3 "$work/${names[$i]}.log" 2>/dev/null)" >&2; exit 1; }
done
echo "# $(date -u +%FT%TZ) $disks disks, window ${duration} s after ${warmup} s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/s0" "$work/s1" "$duration" <<'PY'
import sys
from collections import defaultdict
def read(path):
    d = {}
    for line in open(path):
        name, pid, kind, what, ns = line.split()
        d[(name, kind, what, pid)] = int(ns)
    return d
a, b, secs = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
threads, children = defaultdict(lambda: defaultdict(float)), defaultdict(float)
rss = {key[0]: ns for key, ns in b.items() if key[1] == "rss"}
order = []
for key, ns in b.items():
    name, kind, what, _ = key
    if name not in order:
        order.append(name)
    ms = (ns - a.get(key, 0)) / 1e6 / secs  # a thread born in the window counts whole
    if kind == "rss":
        continue
    if kind == "thread":
        threads[name][what] += ms
    else:
        children[name] += ms
floor = sum(threads["floor-full"].values())
print("| ms a collection | threads (schedstat) | of which | children | total | × floor | RSS MiB |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name in order:
    t = sum(threads[name].values())
    parts = ", ".join(f"{k} {v:.3f}" for k, v in sorted(threads[name].items(), key=lambda kv: -kv[1]) if v >= 0.001)
    total = t + children[name]
    print(f"| {name} | {t:.3f} | {parts} | {children[name]:.3f} | {total:.3f} | {total / floor:.2f} | {rss[name] / 1024:.1f} |")
PY
