# Shared by the bench scripts (sourced, with $repo set to the checkout): the agent binary to
# measure, a thread-summed CPU counter, and the captured /proc files of the build machine.

# The agent binary: $STORWATCH_AGENT_BIN, else the release build, built first.
agent_binary() {
  if [ -n "${STORWATCH_AGENT_BIN:-}" ]; then
    echo "$STORWATCH_AGENT_BIN"
    return
  fi
  cargo build --release -p storwatch-agent --manifest-path "$repo/Cargo.toml" >&2
  local target
  target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$repo/Cargo.toml" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  echo "$target/release/storwatch-agent"
}

# Sum of every thread's run time of process $1, ns (schedstat).
cpu_ns() {
  local sum=0 f ns
  for f in /proc/"$1"/task/*/schedstat; do
    read -r ns _ <"$f" || continue
    sum=$((sum + ns))
  done
  echo "$sum"
}

# The build machine's captured /proc files (diskstats, net/dev, stat, meminfo, pressure/io) as
# the proc root $1.
captured_proc() {
  local proc=$1 fx=$repo/agent/fixtures
  mkdir -p "$proc/net" "$proc/pressure"
  cp "$fx/diskstats/build-machine-linux-6.18-20-field.txt" "$proc/diskstats"
  cp "$fx/netdev/build-machine-linux-6.18.txt" "$proc/net/dev"
  cp "$fx/stat/build-machine-linux-6.18-2cpu.txt" "$proc/stat"
  cp "$fx/meminfo/build-machine-linux-6.18.txt" "$proc/meminfo"
  cp "$fx/pressure/build-machine-linux-6.18-io.txt" "$proc/pressure/io"
}

# Starts the shared harness's 200-disk host ticking (the read floor alone in its window) in the
# background, as a process group of its own: sets $ticker, the group's leader; stop it with
# stop_ticking_host. $1 the bench's work directory, $2 the host's root, $3 how long it ticks (s),
# the rest passed to run-agent-bench.sh (e.g. --regen --disks N). Returns once the host ticks and
# the fake smartctl and storcli64 of --drives-steady are in $1/bench/bin/drive.
start_ticking_host() {
  local work=$1 host=$2 seconds=$3
  shift 3
  STORWATCH_BENCH_DIR=$work/bench STORWATCH_BENCH_RUNDIR=/dev/shm/$(basename "$work")-bench-run \
    STORWATCH_AGENT_BIN=${agent_bin:?} setsid "$here/run-agent-bench.sh" --drives-steady \
    --root "$host" "$@" --warmup 5 --duration "$seconds" --rounds 1 --only floor-full \
    >"$work/ticker.log" 2>&1 &
  ticker=$!
  for _ in $(seq 600); do
    [ -x "$work/bench/bin/drive/smartctl" ] && [ -e "$host/proc/diskstats" ] && break
    kill -0 "$ticker" 2>/dev/null || { cat "$work/ticker.log" >&2; return 1; }
    sleep 1
  done
  [ -e "$host/proc/diskstats" ] || { echo "the harness made no host" >&2; return 1; }
  sleep 10 # the floor's window has begun: the host ticks
}

# Stops what start_ticking_host $1 started: the harness's process group (the host's ticker is a
# grandchild that would write the host again after it is removed) and the read floor, which the
# harness runs in a session of its own, found by the work directory in its command line.
stop_ticking_host() {
  local _
  if [ -n "${ticker:-}" ]; then
    kill -- -"$ticker" 2>/dev/null || true
    # its ticker ends its write (the host's state file) before it goes: at most 10 s
    for _ in $(seq 50); do
      kill -0 -- -"$ticker" 2>/dev/null || break
      sleep 0.2
    done
  fi
  pkill -f -- "$1/bench/bin/" 2>/dev/null || true
}

# rm -rf of the bench's directories, tried again for a few seconds: a process of the bench
# killed just before may still be writing into them (rm then fails with "Directory not empty",
# and a host was left in /dev/shm at every other run).
remove_dirs() {
  local _
  for _ in 1 2 3 4 5; do
    rm -rf "$@" 2>/dev/null && return 0
    sleep 1
  done
  rm -rf "$@"
}
