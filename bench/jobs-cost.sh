#!/usr/bin/env bash
# What 100 batch jobs cost the agent: two agents side by side for the same duration, one on a
# worker-node tree with 100 Slurm jobs under sys/fs/cgroup, one on the same tree without them,
# 1 s sample and 10 s report interval; CPU from the kernel's per-thread accounting (schedstat, ns)
# of every thread of each agent. A ticker moves the jobs' counters (cpu.stat, io.stat,
# io.pressure, memory.current) every second, so that every job writes its full job and job_io
# lines.
#
#   bench/jobs-cost.sh [--duration 120] [--jobs 100] [--rounds 3] [--warmup 12] [--report 10] [--real]
#                      [--callgrind DIR]
#
# --warmup: seconds before the window (past the first reading and report); --report: the report
# interval, seconds (10 for the figures; the test suite's smoke run uses 1).
#
# Beside the agents runs the read floor (bench/jobs-floor.c, built with cc or $CC): a C reader that keeps
# the same jobs' files open and reads each with pread once per report interval, nothing else —
# what the kernel charges for producing the files the contract needs, which no reader of them
# avoids. Each round prints the jobs' cost (jobs − nojobs), the floor's, and the difference: what
# the agent adds above the floor (parsing, the arithmetic, the lines, and off cgroupfs the rename
# check).
#
# --real (root, cgroup v2 mounted: /sys/fs/cgroup, or its `unified` mount on a hybrid host): the
# two cgroup trees are real cgroups under <cgroup2 mount>/storwatch-bench.slice/{nojobs,jobs}, the
# jobs each holding one `sleep` (in step_batch/user/task_0), bind-mounted as each tree's
# sys/fs/cgroup in a private mount namespace (gone with the script). The kernel makes every
# number (no ticker): the counters are whatever the controllers the mount has give — on a hybrid
# host no cpu, io or memory controller, so cpu.stat and the *.pressure files are there, io.stat,
# memory.*, cpu.max and the cpuset are not (no cores, no efficiency). Sleeps killed and cgroups
# removed on exit.
#
# --callgrind DIR: the two agents run under `valgrind --tool=callgrind` instead (their CPU
# figures then mean nothing); the counts are zeroed after the warmup and dumped after the
# window (callgrind_control -z / -d), the dumps kept in DIR (callgrind.<tree>.<pid>.1), and
# each round prints the user instructions of the window, per reading (the jobs collector's
# readings in the window, counted in the dump), of the agent with jobs, without, and their
# difference. Instruction counts do not depend on the machine's load: two builds' runs may
# share the machine.
#
# STORWATCH_AGENT_BIN names the agent binary (default: the release build, built first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
duration=120
jobs=100
rounds=3
warmup=12
report=10
args=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    --real) real=1; shift ;;
    --callgrind) callgrind=$2; shift 2 ;;
    *) echo "usage: $0 [--duration S] [--jobs N] [--rounds N] [--warmup S] [--report S] [--real] [--callgrind DIR]" >&2; exit 2 ;;
  esac
done
real=${real:-}
callgrind=${callgrind:-}
if [ -n "$callgrind" ]; then
  mkdir -p "$callgrind"
  callgrind=$(cd "$callgrind" && pwd)
fi
if [ -n "$real" ] && [ -z "${STORWATCH_BENCH_NS:-}" ]; then
  # The bind mounts in a mount namespace of their own: nothing left mounted, whatever happens.
  STORWATCH_BENCH_NS=1 exec unshare --mount --propagation private "$0" "${args[@]}"
fi
# shellcheck source=bench/lib.sh
. "$here/lib.sh"
agent_bin=$(agent_binary)
base=$(mktemp -d /dev/shm/storwatch-jobs-cost.XXXXXX 2>/dev/null || mktemp -d)
cleanup() {
  for p in ${pids:-} ${sleeps:-}; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$real" ]; then
    for tree in nojobs jobs; do umount "$base/$tree/sys/fs/cgroup" 2>/dev/null || true; done
    [ -d "${cgroot:-}" ] && find "$cgroot" -depth -type d -exec rmdir {} + 2>/dev/null || true
  fi
  rm -rf "$base"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
floor_bin=$base/jobs-floor
if ! "${CC:-cc}" -O2 -Wall -o "$floor_bin" "$here/jobs-floor.c"; then
  echo "no C compiler (${CC:-cc}) to build bench/jobs-floor.c: the read floor is not measured" >&2
  floor_bin=""
fi

# The trees: the build machine's captured /proc files, a sys tree with only the cgroup mount
# (50 services in system.slice), and in one of them the jobs.
for tree in nojobs jobs; do captured_proc "$base/$tree/proc"; done
python3 - "$repo" "$base" "$jobs" <<'PY'
import os, sys
repo, base, njobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
for tree in ("nojobs", "jobs"):
    cg = os.path.join(base, tree, "sys/fs/cgroup")
    os.makedirs(cg)
    open(os.path.join(cg, "cgroup.controllers"), "w").write("cpuset cpu io memory pids\n")
    for i in range(50):
        os.makedirs(os.path.join(cg, "system.slice", f"service-{i}.service"))
    os.makedirs(os.path.join(cg, "system.slice/slurmstepd.scope/system"))
    open(os.path.join(cg, "system.slice/slurmstepd.scope/cpu.stat"), "w").write(
        "usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
    if tree == "nojobs":
        continue
    for j in range(njobs):
        d = os.path.join(cg, f"system.slice/slurmstepd.scope/job_{1000 + j}")
        for sub in ("step_batch/slurm", "step_batch/user/task_0", "step_extern/slurm",
                    "step_extern/user/task_0"):
            os.makedirs(os.path.join(d, sub))
        for name, text in [("cpu.max", "max 100000\n"), ("cpu.weight", "100\n"),
                           ("cpuset.cpus.effective", f"{j % 64}\n"),
                           ("memory.peak", "7229440\n"),
                           ("cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500\n"),
                           ("memory.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")]:
            open(os.path.join(d, name), "w").write(text)
PY

if [ -n "$real" ]; then
  cg2=/sys/fs/cgroup
  [ -e "$cg2/cgroup.controllers" ] || cg2=$(findmnt -n -t cgroup2 -o TARGET | head -1)
  [ -n "$cg2" ] && [ -e "$cg2/cgroup.controllers" ] || { echo "no cgroup v2 mount" >&2; exit 1; }
  cgroot=$cg2/storwatch-bench.slice
  sleeps=""
  for tree in nojobs jobs; do
    t=$cgroot/$tree
    for i in $(seq 0 49); do mkdir -p "$t/system.slice/service-$i.service"; done
    mkdir -p "$t/system.slice/slurmstepd.scope/system"
    if [ "$tree" = jobs ]; then
      for j in $(seq 1000 $((1000 + jobs - 1))); do
        d=$t/system.slice/slurmstepd.scope/job_$j
        mkdir -p "$d/step_batch/slurm" "$d/step_batch/user/task_0" "$d/step_extern/slurm" \
          "$d/step_extern/user/task_0"
        sleep 100000 &
        sleeps="$sleeps $!"
        echo $! >"$d/step_batch/user/task_0/cgroup.procs"
      done
    fi
    mount --bind "$t" "$base/$tree/sys/fs/cgroup"
  done
  echo "real cgroups: $cgroot ($(cat "$cg2/cgroup.controllers" | tr -d '\n' || true) controllers at the mount)"
fi

# The read floor's list: every file of KEPT (collect/jobs.rs) in each job's directory; those a
# job does not have (on a hybrid host io.stat and memory.*) are skipped by the reader.
for j in $(seq 1000 $((1000 + jobs - 1))); do
  for f in cpu.stat io.stat io.pressure cpu.pressure memory.pressure memory.current memory.peak; do
    echo "$base/jobs/sys/fs/cgroup/system.slice/slurmstepd.scope/job_$j/$f"
  done
done >"$base/floor.list"

# Every second: each job's counters move on, written in place (truncated and rewritten, the
# same file): the kernel's cgroup files are regenerated for every read, never replaced, so the
# agent's descriptors kept open stay good, as on a real node. (A tree rewritten by renames, as
# the simulator's, makes the agent open each changed file again: that costs more than on cgroupfs.)
cat >"$base/tick.py" <<'PY'
import os, sys, time
cg, njobs = sys.argv[1], int(sys.argv[2])
t = 0
def put(path, text):
    with open(path, "w") as f:
        f.write(text)
while True:
    t += 1
    for j in range(njobs):
        d = os.path.join(cg, f"system.slice/slurmstepd.scope/job_{1000 + j}")
        put(os.path.join(d, "cpu.stat"),
            f"usage_usec {t * 800000}\nuser_usec {t * 700000}\nsystem_usec {t * 100000}\n"
            "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n")
        put(os.path.join(d, "io.stat"),
            f"8:0 rbytes={t * 1048576} wbytes={t * 4096} rios={t * 64} wios={t} dbytes=0 dios=0\n"
            f"253:0 rbytes={t * 1048576} wbytes={t * 4096} rios={t * 64} wios={t} dbytes=0 dios=0\n")
        put(os.path.join(d, "io.pressure"),
            f"some avg10=0.00 avg60=0.00 avg300=0.00 total={t * 200000}\n"
            f"full avg10=0.00 avg60=0.00 avg300=0.00 total={t * 50000}\n")
        put(os.path.join(d, "memory.current"), f"{5660672 + t * 4096}\n")
    put(os.path.join(cg, "system.slice/slurmstepd.scope/cpu.stat"),
        f"usage_usec {t * 800000 * njobs}\nuser_usec 0\nsystem_usec 0\n")
    # Half a second off the agents' readings (on the second): a reading never meets a file
    # truncated and not yet written again, which would read as empty.
    time.sleep(1 - (time.time() + 0.5) % 1)
PY

# User and system time of the process, ms (utime and stime of /proc/PID/stat: clock ticks,
# 10 ms each, so a split good to ~20 ms over the window, against the ns of schedstat above).
user_sys_ms() {
  python3 -c "
import os, sys
f = open('/proc/$1/stat').read().rsplit(')', 1)[1].split()
tick = 1000 / os.sysconf('SC_CLK_TCK')
print(int(f[11]) * tick, int(f[12]) * tick)"
}

echo "jobs=$jobs duration=${duration}s rounds=$rounds agent=$agent_bin"
printf '%-6s %-8s %14s %14s %10s %10s\n' round tree "ms CPU" "ms CPU/s" "user ms" "sys ms"
for round in $(seq 1 "$rounds"); do
  pids=""
  if [ -z "$real" ]; then
    python3 "$base/tick.py" "$base/jobs/sys/fs/cgroup" "$jobs" &
    pids="$pids $!"
    # Its first tick written before anything starts (python starts slowly on a loaded machine,
    # and the read floor opens only the files that exist): the last job's last file, at most 30 s.
    last=$base/jobs/sys/fs/cgroup/system.slice/slurmstepd.scope/job_$((1000 + jobs - 1))/memory.current
    for _ in $(seq 300); do [ -e "$last" ] && break; sleep 0.1; done
  fi
  sleep 1.5
  declare -A pid
  for tree in nojobs jobs; do
    wrap=()
    if [ -n "$callgrind" ]; then
      wrap=(valgrind --tool=callgrind --dump-instr=no
        "--callgrind-out-file=$callgrind/callgrind.$tree.%p")
    fi
    "${wrap[@]}" "$agent_bin" run --proc-root "$base/$tree/proc" --sys-root "$base/$tree/sys" \
      --sample-interval 1s --report-interval "${report}s" --host "bench-$tree" \
      --output "file:$base/$tree.lp" 2>"$base/$tree.log" &
    pid[$tree]=$!
    pids="$pids $!"
  done
  trees="nojobs jobs"
  if [ -n "$floor_bin" ]; then
    "$floor_bin" "$base/floor.list" "$report" >"$base/floor.log" &
    pid[floor]=$!
    pids="$pids $!"
    trees="$trees floor"
  fi
  # Past the start (first reading, first report), then the measured window.
  sleep "$warmup"
  if [ -n "$callgrind" ]; then
    for tree in nojobs jobs; do callgrind_control -z "${pid[$tree]}" >/dev/null; done
    sleep "$duration"
    declare -A instr readings
    for tree in nojobs jobs; do
      callgrind_control -d "${pid[$tree]}" >/dev/null
      dump=$callgrind/callgrind.$tree.${pid[$tree]}.1
      # (awk reads to the end: an early exit would stop callgrind_annotate by SIGPIPE, which
      # pipefail makes the script's end)
      instr[$tree]=$(callgrind_annotate "$dump" 2>/dev/null \
        | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')
      # The readings in the window: the jobs collector's `read` calls (a window of 40 s holds
      # 4 or 5 of them, as it falls on the report clock); the window ÷ the report interval
      # when the symbol is not in the dump.
      readings[$tree]=$(callgrind_annotate --tree=caller --inclusive=yes --threshold=100 "$dump" \
        2>/dev/null | awk '/\* .*JobsCollector>::read \[/ && !done { print prev; done = 1 } { prev = $0 }' \
        | sed -n 's/.*(\([0-9,]*\)x).*/\1/p' | tr -d ,)
    done
    python3 -c "
w = $duration / $report
j, o = ${instr[jobs]:-0}, ${instr[nojobs]:-0}
nj, no = ${readings[jobs]:-0} or w, ${readings[nojobs]:-0} or w
print(f'round $round: readings in the window: jobs {nj:g}, nojobs {no:g}')
print(f'round $round: user instructions a reading: jobs {j / nj:,.0f}, nojobs {o / no:,.0f}, the jobs {j / nj - o / no:,.0f}')"
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    # shellcheck disable=SC2086 # the agents and the ticker
    wait $pids 2>/dev/null || true
    pids=""
    continue
  fi
  declare -A start us0 per_s
  for tree in $trees; do
    start[$tree]=$(cpu_ns "${pid[$tree]}")
    us0[$tree]=$(user_sys_ms "${pid[$tree]}")
  done
  sleep "$duration"
  for tree in $trees; do
    end=$(cpu_ns "${pid[$tree]}")
    per_s[$tree]=$(python3 -c "print(($end - ${start[$tree]}) / 1e6 / $duration)")
    us1=$(user_sys_ms "${pid[$tree]}")
    python3 -c "
d = ($end - ${start[$tree]}) / 1e6
u0, s0 = map(float, '${us0[$tree]}'.split()); u1, s1 = map(float, '$us1'.split())
print(f'{$round:<6} {\"$tree\":<8} {d:14.2f} {d/$duration:14.4f} {u1-u0:10.0f} {s1-s0:10.0f}')"
  done
  if [ -n "$floor_bin" ]; then
    python3 -c "
jobs, floor = ${per_s[jobs]} - ${per_s[nojobs]}, ${per_s[floor]}
print(f'round $round: the jobs cost {jobs:.4f} ms CPU per s; read floor {floor:.4f}; above the floor {jobs - floor:.4f}')"
  fi
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  # shellcheck disable=SC2086 # the agents and the ticker, not the jobs' sleeps
  wait $pids 2>/dev/null || true
  pids=""
done
lines=$(grep -c '^job,' "$base/jobs.lp" || true)
io=$(grep -c '^job_io,' "$base/jobs.lp" || true)
reports=$(grep -c '^jobs,' "$base/jobs.lp" || true)
echo "all rounds: $reports jobs lines, $lines job lines, $io job_io lines written"
grep -m1 '^jobs,' "$base/jobs.lp" || true
[ -n "$floor_bin" ] && head -1 "$base/floor.log" || true
