#!/usr/bin/env bash
# Whole-process benchmark of storwatch-agent on the synthetic 200-disk storage server of the shared
# bench harness (../shared/bench: 200 disks, 40 dm-multipath maps, 8 md arrays, 8 NICs, 64 CPUs),
# 1 s sample and 10 s report interval, CPU from the kernel's per-thread accounting (schedstat).
#
#   bench/run-agent-bench.sh [--duration 60] [--rounds 2] [--only storwatch,floor-full] [--drives]
#                            [--drives-steady] [--smartd-attrlog]
#
# Besides the harness's agents: storwatch-core (below) and floor-paths, the I/O floor with the 80
# multipath path states added to its list (the files the agent reads each second that the
# harness's floor does not).
#
# The harness is read-only where it is shared, so it is copied to a scratch directory
# (STORWATCH_BENCH_DIR, /tmp/storwatch-bench) and the agents run in a directory named after it
# (STORWATCH_BENCH_RUNDIR, /dev/shm/<its name>-run), so that two runs with different scratch
# directories do not share one; results land in bench/out/ (table.txt, results.jsonl). The
# harness's options pass through: --root DIR, and --regen --disks N for a host of N disks. To compare with Telegraf, node_exporter and collectd,
# run `./run.sh install` in the scratch copy first (it builds Telegraf with Go: ~10 min) and add them
# to --only. STORWATCH_AGENT_BIN names an agent binary to measure instead of building the release
# one (the test suite's smoke run passes its debug build).
#
# Every agent's CPU counts its child processes too: the harness's own figures are the agent's
# live process tree (utime+stime, schedstat); the copy here also records the CPU of the children
# the agent started and reaped during the window (cutime+cstime of its /proc/PID/stat, 10 ms
# ticks: exact only summed over many children) as children_ms_per_coll, and their sum with the
# schedstat figure as total_ms_per_coll, printed in a table of its own at the end.
#
# --drives adds the drive-health and hardware-RAID monitors' cost: fake smartctl and storcli64
# (shell stand-ins printing real smartctl 7.3 and storcli 007.2807 outputs from agent/fixtures/)
# and two agents with every monitor on, beside `storwatch` (the same agent without them, since on
# a tree other than /sys they run only with a program given by path): storwatch-drives at the
# default intervals ([drive] 30m, [hwraid] 60s) and storwatch-drives-fast at compressed ones
# ([drive] 60s, [hwraid] 10s) so that many calls fall in the window. The 200 disks are read as
# smartctl reads SAS disks (JSON, then `-l error` text), the two OS SSDs as SATA; storcli answers
# a RAID6 controller with one VD degraded and a drive rebuilding (every detail call made every
# round), or with STORWATCH_BENCH_RAID=healthy the same controller healthy (the calls a steady
# site's controller gets: most rounds `show all` alone). The I/O floor (`floor-full`:
# the harness's files read once a second in C) runs in the same run, so that what the monitors
# add is measured against the floor and the agent without them under the same load.
#
# Each round starts every agent afresh, so with --drives the window is its first drive round:
# every SAS disk gets both calls (JSON, then `-l error`). In the rounds after it, `[drive]
# sas_error_log_every` (6) leaves out the second call in 5 rounds of 6.
#
# --drives-steady measures those later rounds: storwatch-steady runs every monitor with the drive
# round compressed from 30 min to 60 s ([drive] interval = "60s", everything else at its default:
# sas_error_log_every 6, [hwraid] every 60 s), and the window starts after the first drive round
# (--warmup 70 unless given; --duration 120 unless given: two whole rounds). So the window holds
# the default cadence's call mix — per round 200 JSON calls and the `-l error` calls of one round
# in six — at 30 times its rate: its figure is an upper bound of the default cadence's steady
# state, and the drive thread's and the children's share of it (printed apart) is what one round
# costs, measured.
#
# --smartd-attrlog is --drives-steady with one more agent, storwatch-attrlog: the steady settings
# and smartd's attribute logs ([drive] smartd_attrlog_prefix in the bench's directory,
# smartd_attrlog_scsi = true: the fake disks are SAS). A stand-in for smartd, started before the
# run and stopped after it, appends one line a minute (smartd's 30 min cycle compressed as the
# drive round is) to each SAS disk's log, `VENDOR-PRODUCT-SERIAL.scsi.csv`, with the values the
# fake smartctl answers (its error counters, the `-l error` count, temperature), so every round
# finds each disk's log fresh and unchanged: smartctl reads a SAS disk in one round of
# `smartd_attrlog_full_every` (4) and the log confirms it in the others. That agent's smartctl
# prints each disk's serial (`WAF1<disk>`) so that each has a log of its own. The two OS SSDs
# (sda, sdb, ATA) get no log and are read by smartctl every round. The build before
# (STORWATCH_BEFORE_BIN) has no such keys: storwatch-steady-before is its figure for the same
# call mix without the logs.
#
# STORWATCH_BEFORE_BIN names a second agent binary (the build before a change): every storwatch
# agent of the run is run with it too, as <name>-before, in the same run and rounds, so that
# before and after are compared under the same load.
#
# Every agent's threads are also recorded by name (schedstat of /proc/PID/task/*; the sampling
# thread is `storwatch-agent`, the drive monitor's `storwatch-drive`, the RAID monitor's
# `storwatch-hwraid`) and printed beside the totals.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
harness=${STORWATCH_BENCH_HARNESS:-$repo/../shared/bench}
work=${STORWATCH_BENCH_DIR:-/tmp/storwatch-bench}
drives=0
steady=0
attrlog=0
args=()
for a in "$@"; do
  case $a in
    --drives) drives=1 ;;
    --drives-steady) drives=1 steady=1 ;;
    --smartd-attrlog) drives=1 steady=1 attrlog=1 ;;
    *) args+=("$a") ;;
  esac
done
# the fake host's root (the harness's --root, /dev/shm/fakehost by default)
fakeroot=/dev/shm/fakehost
prev=
for a in "${args[@]}"; do
  [ "$prev" != --root ] || fakeroot=$a
  prev=$a
done
before_bin=${STORWATCH_BEFORE_BIN:-}
# adds "<name>-before" after each storwatch agent of a list, when a before binary is given
with_before() {
  local out="" n
  for n in ${1//,/ }; do
    out+="${out:+,}$n"
    case $n in storwatch*) [ -z "$before_bin" ] || out+=",$n-before" ;; esac
  done
  echo "$out"
}
if [ "$steady" = 1 ]; then
  case " ${args[*]} " in *" --warmup "*) ;; *) args+=(--warmup 70) ;; esac
  case " ${args[*]} " in *" --duration "*) ;; *) args+=(--duration 120) ;; esac
  case " ${args[*]} " in
    *" --only "*) ;;
    *)
      if [ "$attrlog" = 1 ]; then
        args+=(--only "$(with_before floor-full,storwatch-steady),storwatch-attrlog")
      else
        args+=(--only "$(with_before floor-full,storwatch,storwatch-steady)")
      fi
      ;;
  esac
elif [ "$drives" = 1 ]; then
  # the agents with and without the drive monitors, unless --only names others
  case " ${args[*]} " in
    *" --only "*) ;;
    *) args+=(--only "$(with_before floor-full,storwatch,storwatch-drives,storwatch-drives-fast)") ;;
  esac
fi
[ ${#args[@]} -gt 0 ] || args=(--duration 60 --rounds 2 --only "$(with_before storwatch,storwatch-core,floor-full)")

# shellcheck source=bench/lib.sh
. "$here/lib.sh"
agent_bin=$(agent_binary)
mkdir -p "$work"
cp -r "$harness"/. "$work"/
chmod -R u+w "$work"
mkdir -p "$work/bin"
# the agents' run directory (their outputs, on tmpfs as the harness's default) named after the
# scratch copy: the harness's default, /dev/shm/bench-run, is one for every run on the machine
rundir=${STORWATCH_BENCH_RUNDIR:-/dev/shm/$(basename "$work")-run}
sed -i "s|python3 bench.py --root \"\\\$ROOT\"|python3 bench.py --rundir '$rundir' --root \"\\\$ROOT\"|" "$work/run.sh"
grep -q -- "--rundir '$rundir'" "$work/run.sh" || { echo "run.sh changed: cannot set its run directory" >&2; exit 1; }
cp "$agent_bin" "$work/bin/storwatch-agent"
[ -z "$before_bin" ] || cp "$before_bin" "$work/bin/storwatch-agent-before"
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
[drive]
enabled = false
[hwraid]
enabled = false
TOML
grep -q '^storwatch-core ' "$work/agents.conf" || echo 'storwatch-core  | file | {bin}/storwatch-agent run --config {conf:storwatch-core.toml} --proc-root {proc} --sys-root {sys} --sample-interval 1s --report-interval 10s --output file:{out}' >>"$work/agents.conf"

# floor-paths: the floor's list and, beside it, every multipath path's `device/state` (the 80
# files the multipath monitor reads each second and the floor's list leaves out), read the same
# way (open, read, close each), so that what the kernel charges for them is measured, not guessed.
cat >"$work/bin/floor-paths" <<'SH'
#!/bin/sh
# floor-paths LIST INTERVAL
list=$1
root=$(sed -n 's,/proc/diskstats$,,p' "$list" | head -1)
out=${list%.list}-paths.list
cp "$list" "$out"
for dm in "$root"/sys/block/dm-*; do
  case $(cat "$dm/dm/uuid" 2>/dev/null) in mpath-*) ;; *) continue ;; esac
  for s in "$dm"/slaves/*; do echo "$root/sys/block/${s##*/}/device/state"; done
done | sort -u >>"$out"
exec "${0%/*}/floor" -l "$out" -i "$2"
SH
chmod +x "$work/bin/floor-paths"
grep -q '^floor-paths ' "$work/agents.conf" || echo 'floor-paths     | none | {bin}/floor-paths {list:full} {interval}' >>"$work/agents.conf"

# The children's CPU: cutime+cstime of the agent before and after the window.
python3 - "$work/bench.py" <<'PY'
import sys
p = sys.argv[1]
t = open(p).read()
if "threads_by_name" not in t:
    edits = [
        ("def status_kb(pid, key):",
         "def children_cpu(pid):\n"
         "    \"\"\"CPU of the children pid started and reaped (and of theirs): cutime+cstime.\"\"\"\n"
         "    s = read(\"/proc/%d/stat\" % pid)\n"
         "    rest = s[s.rindex(\")\") + 2:].split()\n"
         "    return (int(rest[13]) + int(rest[14])) / HZ\n\n\n"
         "def threads_by_name(pid):\n"
         "    \"\"\"schedstat run time (s) of pid's threads, summed by thread name.\"\"\"\n"
         "    out = {}\n"
         "    for t in os.listdir(\"/proc/%d/task\" % pid):\n"
         "        try:\n"
         "            name = read(\"/proc/%d/task/%s/comm\" % (pid, t)).strip()\n"
         "            ns = int(read(\"/proc/%d/task/%s/schedstat\" % (pid, t)).split()[0])\n"
         "        except (OSError, ValueError):\n"
         "            continue\n"
         "        out[name] = out.get(name, 0) + ns / 1e9\n"
         "    return out\n\n\n"
         "def status_kb(pid, key):"),
        ("        s0 = tree_sched(p.pid)\n",
         "        s0 = tree_sched(p.pid)\n        k0 = children_cpu(p.pid)\n        n0 = threads_by_name(p.pid)\n"),
        ("        s1 = tree_sched(p.pid)\n",
         "        s1 = tree_sched(p.pid)\n        k1 = children_cpu(p.pid)\n        n1 = threads_by_name(p.pid)\n"),
        ("        ncoll = (t1 - t0) / args.interval\n",
         "        ncoll = (t1 - t0) / args.interval\n"
         "        res.update(children_cpu_s=round(k1 - k0, 3),\n"
         "                   children_ms_per_coll=round((k1 - k0) * 1000 / ncoll, 4),\n"
         "                   total_ms_per_coll=round(((s1 - s0) + (k1 - k0)) * 1000 / ncoll, 4),\n"
         "                   threads_ms_per_coll={k: round((v - n0.get(k, 0)) * 1000 / ncoll, 4)\n"
         "                                        for k, v in n1.items()})\n"),
    ]
    for old, new in edits:
        if t.count(old) != 1:
            sys.exit("bench.py changed: cannot add the children's CPU at %r" % old.strip())
        t = t.replace(old, new)
    open(p, "w").write(t)
PY

if [ "$drives" = 1 ]; then
  fx=$repo/agent/fixtures
  d=$work/bin/drive
  mkdir -p "$d"
  cp "$fx/smartctl/libblockdev-scsi-seagate-st600mp0036.json" "$d/sas.json"
  cp "$fx/smartctl/karlsbakk-sas-text-a-error-counter-log-non-medium-3-fragment.txt" "$d/sas-error.txt"
  cp "$fx/smartctl/sce-ata-ssd-samsung-mz7wd240.json" "$d/ata-ssd.json"
  case ${STORWATCH_BENCH_RAID:-rebuilding} in
    rebuilding) show=edited-netdata-c0-show-all-raid6-dgrd-pd-252-3-rbld.json ;;
    healthy) show=netdata-c0-show-all-raid6-optl-ibbu-optimal.json ;;
    *) echo "STORWATCH_BENCH_RAID: rebuilding (the default) or healthy" >&2; exit 2 ;;
  esac
  cp "$fx/storcli/$show" "$d/show-all.json"
  cp "$fx/storcli/cloudpods-c0-vall-show-all-7-vds-os-drive-name-wb-wt.json" "$d/vall.json"
  cp "$fx/storcli/netdata-c0-eall-sall-show-all-6-sata-media-other-predictive.json" "$d/pds.json"
  cp "$fx/storcli/synthetic-c0-eall-sall-show-rebuild-252-3-37pct.json" "$d/rebuild.json"
  # as cheap as a shell can be: no command substitution, one exec of cat
  cat >"$d/smartctl" <<'SH'
#!/bin/sh
d=${0%/*}
for a; do dev=$a; done
case " $* " in
  *" --scan "*) exit 0 ;;
  *" -l error "*) exec cat "$d/sas-error.txt" ;;
esac
case $dev in
  /dev/sda | /dev/sdb) exec cat "$d/ata-ssd.json" ;;
  *) exec cat "$d/sas.json" ;;
esac
SH
  cat >"$d/storcli64" <<'SH'
#!/bin/sh
d=${0%/*}
case "$*" in
  "/call show all J") exec cat "$d/show-all.json" ;;
  "/call/vall show all J") exec cat "$d/vall.json" ;;
  "/call/eall/sall show all J") exec cat "$d/pds.json" ;;
  "/call/eall/sall show rebuild J") exec cat "$d/rebuild.json" ;;
  *) echo "storcli64 (bench stand-in): unsupported: $*" >&2; exit 1 ;;
esac
SH
  chmod +x "$d/smartctl" "$d/storcli64"
  printf '[drive]\nsmartctl = "{bin}/drive/smartctl"\n[hwraid]\nstorcli = "{bin}/drive/storcli64"\n' \
    >"$work/conf/storwatch-drives.toml"
  printf '[drive]\nsmartctl = "{bin}/drive/smartctl"\ninterval = "60s"\n[hwraid]\nstorcli = "{bin}/drive/storcli64"\ninterval = "10s"\n' \
    >"$work/conf/storwatch-drives-fast.toml"
  # the default cadence's call mix, the drive round compressed to 60 s (--drives-steady)
  printf '[drive]\nsmartctl = "{bin}/drive/smartctl"\ninterval = "60s"\n[hwraid]\nstorcli = "{bin}/drive/storcli64"\n' \
    >"$work/conf/storwatch-steady.toml"
  for n in storwatch-drives storwatch-drives-fast storwatch-steady; do
    grep -q "^$n " "$work/agents.conf" || echo "$n | file | {bin}/storwatch-agent run --config {conf:$n.toml} --proc-root {proc} --sys-root {sys} --sample-interval 1s --report-interval 10s --output file:{out}" >>"$work/agents.conf"
  done
fi
if [ -n "$before_bin" ]; then
  # each storwatch agent again with the build before, as <name>-before
  python3 - "$work/agents.conf" <<'PY'
import re, sys
p = sys.argv[1]
lines = open(p).read().splitlines()
names = {l.split("|")[0].strip() for l in lines if "|" in l and not l.startswith("#")}
add = []
for l in lines:
    if l.startswith("storwatch") and "|" in l:
        name = l.split("|")[0].strip()
        if name.endswith("-before") or name + "-before" in names:
            continue
        rest = l.split("|", 1)[1].replace("{bin}/storwatch-agent ", "{bin}/storwatch-agent-before ")
        add.append("%s-before |%s" % (name, rest))
open(p, "a").write("".join(a + "\n" for a in add))
PY
fi
if [ "$attrlog" = 1 ]; then
  # storwatch-attrlog (after the -before copies: the build before has no attrlog keys)
  d=$work/bin/drive
  mkdir -p "$d/json" "$d/attrlog"
  rm -f "$d"/json/*.json "$d"/attrlog/*.csv
  # each SAS disk its own serial, made at its first call (before the window)
  cat >"$d/smartctl-attrlog" <<'SH'
#!/bin/sh
d=${0%/*}
for a; do dev=$a; done
case " $* " in
  *" --scan "*) exit 0 ;;
  *" -l error "*) exec cat "$d/sas-error.txt" ;;
esac
case $dev in
  /dev/sda | /dev/sdb) exec cat "$d/ata-ssd.json" ;;
esac
f=$d/json/${dev##*/}.json
[ -f "$f" ] || sed "s/\"WAF1ABCD\"/\"WAF1${dev##*/}\"/" "$d/sas.json" >"$f"
exec cat "$f"
SH
  chmod +x "$d/smartctl-attrlog"
  printf '[drive]\nsmartctl = "{bin}/drive/smartctl-attrlog"\ninterval = "60s"\nsmartd_attrlog_prefix = "{bin}/drive/attrlog/attrlog."\nsmartd_attrlog_scsi = true\n[hwraid]\nstorcli = "{bin}/drive/storcli64"\n' \
    >"$work/conf/storwatch-attrlog.toml"
  grep -q "^storwatch-attrlog " "$work/agents.conf" || echo "storwatch-attrlog | file | {bin}/storwatch-agent run --config {conf:storwatch-attrlog.toml} --proc-root {proc} --sys-root {sys} --sample-interval 1s --report-interval 10s --output file:{out}" >>"$work/agents.conf"
  # The stand-in for smartd: every 60 s a line for each SAS disk, the fake smartctl's values
  # (libblockdev-scsi-seagate-st600mp0036.json's counters, the -l error text's non-medium count).
  nm=$(sed -n 's/^Non-medium error count: *\([0-9]*\).*/\1/p' "$d/sas-error.txt")
  tabs=$(printf '\t')
  counters="read-corr-by-ecc-fast;170693715;${tabs}read-corr-by-ecc-delayed;0;${tabs}read-corr-by-retry;0;${tabs}read-total-err-corrected;170693715;${tabs}read-corr-algorithm-invocations;0;${tabs}read-gb-processed;88.818;${tabs}read-total-unc-errors;0;${tabs}write-corr-by-ecc-fast;0;${tabs}write-corr-by-ecc-delayed;0;${tabs}write-corr-by-retry;0;${tabs}write-total-err-corrected;0;${tabs}write-corr-algorithm-invocations;0;${tabs}write-gb-processed;2256.473;${tabs}write-total-unc-errors;0;${tabs}verify-corr-by-ecc-fast;26102529;${tabs}verify-corr-by-ecc-delayed;0;${tabs}verify-corr-by-retry;0;${tabs}verify-total-err-corrected;26102529;${tabs}verify-corr-algorithm-invocations;0;${tabs}verify-gb-processed;13.575;${tabs}verify-total-unc-errors;0;${tabs}non-medium-errors;${nm:-0};${tabs}temperature;29;"
  (
    while :; do
      now=$(date '+%Y-%m-%d %H:%M:%S')
      for b in "$fakeroot"/sys/block/sd*; do
        n=${b##*/}
        case $n in sda | sdb | "sd*") continue ;; esac
        printf '%s;\t%s\n' "$now" "$counters" >>"$d/attrlog/attrlog.SEAGATE-ST600MP0036-WAF1$n.scsi.csv"
      done
      sleep 60
    done
  ) &
  fake_smartd=$!
  trap 'kill "$fake_smartd" 2>/dev/null || true' EXIT
fi
# results.jsonl is appended to: this run's rows are those after the ones already there
before=0
[ ! -f "$work/out/results.jsonl" ] || before=$(wc -l <"$work/out/results.jsonl")
(cd "$work" && ./run.sh "${args[@]}")
mkdir -p "$here/out"
cp "$work"/out/table*.txt "$work"/out/results.jsonl "$here/out/" 2>/dev/null || true
# The agent's own threads (schedstat), its children and the two together, per 1 s collection.
python3 - "$work/out/results.jsonl" "$before" <<'PY' | tee "$here/out/children.txt"
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]).readlines()[int(sys.argv[2]):]:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "children_ms_per_coll" in r:
        rows.setdefault(r["name"], []).append(r)
print("%-24s %5s %24s %24s %24s %7s" % ("ms CPU per collection", "rnds", "agent threads (schedstat)",
                                    "children (cutime+cstime)", "total", "RSS MiB"))
for n, rs in rows.items():
    cols = []
    for k in ("sched_ms_per_coll", "children_ms_per_coll", "total_ms_per_coll"):
        v = [r[k] for r in rs]
        cols.append("%7.4f (%6.4f-%6.4f)" % (statistics.mean(v), min(v), max(v)))
    rss = max(r.get("rss_steady_mib", 0) for r in rs)
    print("%-24s %5d %s %7.1f" % (n, len(rs), " ".join("%24s" % c for c in cols), rss))
# Each agent's threads by name (mean over the rounds), and its total against the floor's.
print()
floor = [r["sched_ms_per_coll"] for r in rows.get("floor-full", [])]
for n, rs in rows.items():
    names = sorted({k for r in rs for k in r.get("threads_ms_per_coll", {})})
    parts = ["%s %.4f" % (k, statistics.mean(r.get("threads_ms_per_coll", {}).get(k, 0) for r in rs))
             for k in names]
    ratio = ""
    if floor and n != "floor-full":
        ratio = "  total/floor %.2f" % (statistics.mean(r["total_ms_per_coll"] for r in rs)
                                        / statistics.mean(floor))
    print("%-24s %s%s" % (n, ", ".join(parts), ratio))
PY
