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
