#!/usr/bin/env bash
# storwatch on one machine: InfluxDB, the collector, an agent on this host and a simulated fleet.
#
#   scripts/quickstart.sh start [--hosts-per-scenario N] [--prometheus]
#                                  build, start everything, print where the data is; --prometheus:
#                                  a Prometheus too, scraping every agent's /metrics, with the rules
#   scripts/quickstart.sh status   what runs, rows and hosts per measurement (and Prometheus targets up)
#   scripts/quickstart.sh stop     stop everything start started
#
# Everything lives in .quickstart/ at the top of the repository (QUICKSTART_DIR overrides it): pid
# files, logs, InfluxDB's and Prometheus's data, the collector's queue, the agents' spools, the
# simulated trees, the token. Nothing listens beyond 127.0.0.1. `start` is safe to run again: what
# runs is left alone, what died is started again (Prometheus too, once started with --prometheus,
# until stop). QUICKSTART_BIN=DIR uses the binaries already built in DIR instead of building the
# release ones (the test suite's smoke run does). See docs/quickstart.md.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
state=${QUICKSTART_DIR:-$repo/.quickstart}
case $state in /*) ;; *) state=$repo/$state ;; esac
run=$state/run   # pid files
logs=$state/logs
target=${CARGO_TARGET_DIR:-$repo/target}
case $target in /*) ;; *) target=$repo/$target ;; esac
bin=${QUICKSTART_BIN:-$target/release}
case $bin in /*) ;; *) bin=$repo/$bin ;; esac
db=storwatch

die() { echo "quickstart: $*" >&2; exit 1; }
say() { echo "quickstart: $*"; }

# ---------------------------------------------------------------- processes

# ours PID: PID runs and its command line names the state directory (every process start starts
# does), so a stale pid file (after a reboot) never makes stop signal somebody else's process.
ours() {
  local pid=$1
  case $pid in '' | *[!0-9]*) return 1 ;; esac
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$state/"
}

alive() { # NAME: the process of run/NAME.pid is running
  local f=$run/$1.pid
  [ -f "$f" ] || return 1
  ours "$(cat "$f")"
}

# launch NAME LOG CMD...: start CMD in its own session (its pid = its process group), unless the
# process of run/NAME.pid is still running.
launch() {
  local name=$1 log=$2 pid; shift 2
  if alive "$name"; then return 0; fi
  setsid "$@" >>"$log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$run/$name.pid"
  started=$((started + 1))
  # Until the child has exec'd, its command line is this script's, which names no state
  # directory: `alive` would take it for dead. Wait for the exec (or its failure).
  for _ in $(seq 1 100); do
    ours "$pid" && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.02
  done
}

# stop_group NAME: SIGTERM to the process group, up to 15 s to exit, then SIGKILL.
stop_group() {
  local f=$run/$1.pid pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  rm -f "$f"
  ours "$pid" || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  echo "$pid"
}

wait_gone() { # PID...: wait until they exit, SIGKILL their groups after 15 s
  local pid left
  for _ in $(seq 1 150); do
    left=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && left=1; done
    [ "$left" = 0 ] && return 0
    sleep 0.1
  done
  for pid in "$@"; do
    if kill -0 "$pid" 2>/dev/null; then
      echo "quickstart: pid $pid did not exit on SIGTERM within 15 s: SIGKILL" >&2
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

# Processes whose command line names the state directory: everything start started.
leftovers() { pgrep -af -- "$state/" | grep -v -e "pgrep" -e "quickstart.sh" || true; }

# ---------------------------------------------------------------- ports

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() { # FIRST [NEED_NEXT]: FIRST or the next free port above it (and PORT+1 free too when asked)
  local p=$1
  while port_taken "$p" || { [ "${2:-}" = next ] && port_taken $((p + 1)); }; do
    p=$((p + 2))
    [ "$p" -lt 65000 ] || die "no free port found above $1"
  done
  echo "$p"
}

influx_url() { echo "http://127.0.0.1:$INFLUX_PORT"; }

q() { # INFLUXQL: run one query, CSV out
  curl -sS -G "$(influx_url)/query" -H 'Accept: application/csv' \
    --data-urlencode "db=$db" --data-urlencode "q=$1"
}

# ---------------------------------------------------------------- start

prerequisites() {
  local missing=()
  command -v cargo >/dev/null || missing+=("cargo (a Rust toolchain: https://rustup.rs, or apt-get install cargo)")
  command -v curl >/dev/null || missing+=("curl (apt-get install curl)")
  command -v setsid >/dev/null || missing+=("setsid (util-linux)")
  command -v pgrep >/dev/null || missing+=("pgrep (procps)")
  if ! command -v influxd >/dev/null && [ ! -x /usr/bin/influxd ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      missing+=("influxd, InfluxDB 1.x (apt-get install influxdb as root, or the InfluxData 1.8 package); run start as root on Debian/Ubuntu to have it installed")
    fi
  fi
  if [ "$with_prometheus" = 1 ] && ! { command -v prometheus && command -v promtool; } >/dev/null; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      missing+=("prometheus and promtool (apt-get install prometheus, or the release tarball from prometheus.io on PATH); run start as root on Debian/Ubuntu to have it installed")
    fi
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "quickstart: missing prerequisites:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 1
  fi
}

# The Debian package, without the system-wide Prometheus its postinst would start on 0.0.0.0:9090
# (policy-rc.d refuses every service start while it is installed).
install_prometheus() {
  { command -v prometheus && command -v promtool; } >/dev/null && return 0
  say "installing prometheus (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # a policy-rc.d the machine already has (container images ship one) is left as it is
  local own_policy=''
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  apt-get install -y -q --no-install-recommends prometheus >/dev/null \
    || { [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d; die "apt-get install prometheus failed"; }
  [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
  command -v prometheus >/dev/null || die "prometheus still missing after apt-get install"
}

# metrics_port NAME HOST: sets `port` to the /metrics port of HOST's agent (run/NAME.pid): the one
# it has while it runs, else its previous one when free, else the next free one from 9634 (the
# agent's usual port). Ports handed out by this start are not handed out twice (`claimed`).
metrics_port() {
  local name=$1 h=$2 p
  p=$(awk -v h="$h" '$1 == h {print $2}' "$state/metrics.ports" 2>/dev/null || true)
  if [ -n "$p" ] && alive "$name"; then port=$p; return 0; fi
  if [ -z "$p" ] || port_taken "$p" || case " $claimed " in *" $p "*) true ;; *) false ;; esac; then
    p=$next_metrics
    while port_taken "$p" || case " $claimed " in *" $p "*) true ;; *) false ;; esac; do
      p=$((p + 1))
      [ "$p" -lt 65000 ] || die "no free port found for the agents' /metrics"
    done
    next_metrics=$((p + 1))
  fi
  claimed+=" $p"
  port=$p
}

cmd_start() {
  local per_scenario=2
  with_prometheus=0
  # an earlier start --prometheus that was not stopped: Prometheus stays part of the quickstart
  [ ! -f "$run/prometheus.pid" ] || with_prometheus=1
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts-per-scenario) per_scenario=${2:-}; shift 2 ;;
      --prometheus) with_prometheus=1; shift ;;
      *) die "start: unknown argument $1 (see $0 --help)" ;;
    esac
  done
  case $per_scenario in '' | *[!0-9]* | 0) die "--hosts-per-scenario wants a number ≥ 1" ;; esac
  prerequisites
  mkdir -p "$run" "$logs"
  started=0
  local t0=$SECONDS

  if [ -n "${QUICKSTART_BIN:-}" ]; then
    say "using the binaries in $bin (QUICKSTART_BIN)"
  else
    say "building the release binaries (cargo build --release; the first build takes a few minutes)"
    cargo build --release -p storwatch-agent -p storwatch-collector -p storwatch-sim \
      || die "cargo build failed"
  fi
  local b
  for b in storwatch-agent storwatch-collector storwatch-sim; do
    [ -x "$bin/$b" ] || die "$bin/$b missing (CARGO_TARGET_DIR=$target? QUICKSTART_BIN=${QUICKSTART_BIN:-}?)"
  done

  # Ports: those of a previous start while its processes run, else 8086 / 8186 or the next free ones.
  INFLUX_PORT='' COLLECTOR_PORT='' PROMETHEUS_PORT=''
  local f any=0
  for f in "$run"/*.pid; do [ -e "$f" ] && alive "$(basename "$f" .pid)" && any=1; done
  if [ "$any" = 1 ] && [ -f "$state/ports.env" ]; then . "$state/ports.env"; fi
  # (a process that died gets its old port back when it is free: what still runs points at it)
  if ! alive influxd; then
    INFLUX_PORT=$(free_port "${INFLUX_PORT:-8086}" next)
    [ "$INFLUX_PORT" = 8086 ] || say "port 8086 or 8087 is taken: InfluxDB goes on 127.0.0.1:$INFLUX_PORT"
  fi
  if ! alive collector; then
    COLLECTOR_PORT=$(free_port "${COLLECTOR_PORT:-8186}")
    [ "$COLLECTOR_PORT" = 8186 ] || say "port 8186 is taken: the collector goes on 127.0.0.1:$COLLECTOR_PORT"
  fi
  if [ "$with_prometheus" = 1 ] && ! alive prometheus; then
    PROMETHEUS_PORT=$(free_port "${PROMETHEUS_PORT:-9090}")
    [ "$PROMETHEUS_PORT" = 9090 ] || say "port 9090 is taken: Prometheus goes on 127.0.0.1:$PROMETHEUS_PORT"
  fi
  printf 'INFLUX_PORT=%s\nCOLLECTOR_PORT=%s\nPROMETHEUS_PORT=%s\n' "$INFLUX_PORT" "$COLLECTOR_PORT" \
    "${PROMETHEUS_PORT:-}" >"$state/ports.env"

  # InfluxDB: the throw-away server of the tests, with its data in .quickstart/influxdb.
  if [ -f "$state/influxdb/influxd.pid" ] && ours "$(cat "$state/influxdb/influxd.pid")"; then
    ln -sf "$state/influxdb/influxd.pid" "$run/influxd.pid"
  else
    rm -f "$state/influxdb/influxd.pid" # stale: influxd-test.sh would take it for a running server
    scripts/influxd-test.sh start "$state/influxdb" "$INFLUX_PORT" >/dev/null \
      || die "InfluxDB did not start (log: $state/influxdb/influxd.log)"
    ln -sf "$state/influxdb/influxd.pid" "$run/influxd.pid"
    started=$((started + 1))
  fi
  deploy/influxdb/setup.sh --url "$(influx_url)" --db "$db" >"$logs/influxdb-setup.log" 2>&1 \
    || { cat "$logs/influxdb-setup.log" >&2; die "deploy/influxdb/setup.sh failed"; }

  # The collector, with a token made here (agents present it; nothing without it gets in).
  if [ ! -s "$state/agent.token" ] || [ ! -s "$state/collector.tokens" ]; then
    (umask 077; od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$state/agent.token")
    (umask 077; printf 'quickstart:%s\n' "$(cat "$state/agent.token")" >"$state/collector.tokens")
  fi
  mkdir -p "$state/collector"
  launch collector "$logs/collector.log" "$bin/storwatch-collector" \
    --listen "127.0.0.1:$COLLECTOR_PORT" --queue-dir "$state/collector" \
    --token-file "$state/collector.tokens" --output "$(influx_url)" --db "$db"
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$COLLECTOR_PORT/ping" >/dev/null 2>&1 && break
    alive collector || { tail -20 "$logs/collector.log" >&2; die "the collector exited"; }
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$COLLECTOR_PORT/ping" >/dev/null 2>&1 \
    || die "the collector does not answer on 127.0.0.1:$COLLECTOR_PORT (log: $logs/collector.log)"
  local write_url="http://127.0.0.1:$COLLECTOR_PORT/write?db=$db"

  # The simulated fleet: every scenario, per_scenario hosts each, one tree per host.
  local scenarios
  scenarios=$("$bin/storwatch-sim" --list | awk '{print $1}')
  [ -n "$scenarios" ] || die "storwatch-sim --list printed no scenario"
  if alive sim && [ "$(cat "$state/fleet.hosts-per-scenario" 2>/dev/null)" != "$per_scenario" ]; then
    say "the running fleet has $(cat "$state/fleet.hosts-per-scenario" 2>/dev/null) hosts per scenario; stop first to change it"
    per_scenario=$(cat "$state/fleet.hosts-per-scenario")
  fi
  echo "$per_scenario" >"$state/fleet.hosts-per-scenario"
  # A simulator starting anew replaces every tree (proc, sys, run, bin) once it runs: the last
  # run's trees go first, so that the wait below is for this run's and no agent starts on a tree
  # that is about to disappear (it would exit: "proc root ... is not a directory").
  alive sim || rm -rf "$state/fleet"
  launch sim "$logs/sim.log" "$bin/storwatch-sim" fleet --root "$state/fleet" \
    --hosts-per-scenario "$per_scenario"
  local s n roots=() missing
  for s in $scenarios; do
    for n in $(seq 1 "$per_scenario"); do roots+=("$state/fleet/$(printf 'sim-%s-%02d' "$s" "$n")"); done
  done
  # (well under a second on an idle machine; the bound is for a simulator that hangs)
  local i
  for i in $(seq 1 1200); do
    missing=0
    for r in "${roots[@]}"; do [ -s "$r/host" ] && [ -s "$r/proc/diskstats" ] || missing=1; done
    [ "$missing" = 0 ] && break
    alive sim || { tail -20 "$logs/sim.log" >&2; die "the simulator exited"; }
    [ "$i" != 100 ] || say "waiting for the simulator to write the ${#roots[@]} host trees (a busy machine)"
    sleep 0.1
  done
  [ "$missing" = 0 ] || die "the simulator did not write every host tree within 120 s (log: $logs/sim.log)"
  sleep 1 # one whole tick written

  # Every agent serves its latest report at http://127.0.0.1:<port>/metrics, a port each
  # (metrics.ports: host and port), for a Prometheus to scrape (start --prometheus).
  local port claimed='' next_metrics=9634 ports=()
  # One agent on this host...
  mkdir -p "$state/spool"
  local host
  host=$(cat /proc/sys/kernel/hostname 2>/dev/null || hostname)
  metrics_port agent-local "$host"
  ports+=("$host $port")
  printf '# the agent of this host (written by scripts/quickstart.sh)\n[prometheus]\nlisten = "127.0.0.1:%s"\n' \
    "$port" >"$state/agent-local.toml"
  launch agent-local "$logs/agent-local.log" "$bin/storwatch-agent" run --config "$state/agent-local.toml" \
    --host "$host" --tag site=quickstart \
    --output "$write_url" --token-file "$state/agent.token" --spool-dir "$state/spool/local"
  # ...and one per simulated host, reading its tree, with its dmsetup/zpool stand-ins first on PATH.
  # dmsetup is the only multipath source there: the device-mapper ioctl and multipathd's socket
  # would be this machine's, not the simulated host's.
  cat >"$state/agent-sim.toml" <<'TOML'
# agents of the simulated hosts (written by scripts/quickstart.sh)
[mpath]
use_ioctl = false
use_multipathd = false
TOML
  local r h role
  for r in "${roots[@]}"; do
    h=$(cat "$r/host")
    metrics_port "agent-$h" "$h"
    ports+=("$h $port")
    # batch workers (worker-*, jobs-io-starved): their agents read the jobs' cgroup tree too
    case $h in sim-worker-* | sim-jobs-*) role=worker ;; *) role=disk-server ;; esac
    # the tree's filesystem numbers: its mount points have no real filesystem behind them
    # smartctl (every host; each disk read every 5 min rather than 30) and storcli64 (hosts with
    # a MegaRAID controller) by path: a smartctl found in PATH is never run on a tree other than
    # /sys, so it cannot touch this machine's disks
    { cat "$state/agent-sim.toml"; printf '[fs]\nstatvfs_file = "%s/run/statvfs.txt"\n' "$r"
      printf '[drive]\nsmartctl = "%s/bin/smartctl"\ninterval = "5m"\n' "$r"
      [ ! -x "$r/bin/storcli64" ] || printf '[hwraid]\nstorcli = "%s/bin/storcli64"\n' "$r"
      # the frozen rebuild is called stalled after 5 min here, not the 2 h default
      case $h in sim-hwraid-stalled-*) printf 'stall_after = "5m"\n' ;; esac
      printf '[prometheus]\nlisten = "127.0.0.1:%s"\n' "$port"
    } >"$state/agent-$h.toml"
    launch "agent-$h" "$logs/agent-$h.log" env PATH="$r/bin:$PATH" "$bin/storwatch-agent" run --config "$state/agent-$h.toml" \
      --proc-root "$r/proc" --sys-root "$r/sys" --host "$h" --tag site=quickstart --tag role="$role" \
      --output "$write_url" --token-file "$state/agent.token" --spool-dir "$state/spool/$h"
  done

  printf '%s\n' "${ports[@]}" >"$state/metrics.ports"
  [ "$with_prometheus" = 0 ] || start_prometheus

  local agents=$(( ${#roots[@]} + 1 ))
  if [ "$started" = 0 ]; then
    say "everything was already running ($agents agents)"
  else
    say "started $started process(es) in $((SECONDS - t0)) s; $agents agents report every 10 s"
  fi
  sleep 1
  local dead=()
  for f in "$run"/*.pid; do
    n=$(basename "$f" .pid)
    alive "$n" || dead+=("$n")
  done
  [ ${#dead[@]} -eq 0 ] || die "exited right after start: ${dead[*]} (logs in $logs/)"
  info "$host" "${#roots[@]}"
}

prom_url() { echo "http://127.0.0.1:$PROMETHEUS_PORT"; }

promq() { # PROMQL: the value of an instant query's one sample (0 when it has none)
  local v
  v=$(curl -sfG "$(prom_url)/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    grep -o '"value":\[[^]]*\]' | head -1 | sed 's/.*,"\(.*\)"\]/\1/' || true)
  echo "${v:-0}"
}

# Prometheus (start --prometheus): deploy/prometheus/prometheus.yml as a site installs it, in
# .quickstart/prometheus/ with the agents as its file_sd targets and the rule file beside it (each
# rule's runbook link pointing into this tree); data in .quickstart/prometheus/data. A running one
# re-reads its configuration and rules (SIGHUP).
start_prometheus() {
  [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || install_prometheus
  local dir=$state/prometheus rules=$repo/alerts/prometheus/storwatch-rules.yml
  mkdir -p "$dir/storwatch/targets" "$dir/storwatch/rules" "$dir/data"
  cp deploy/prometheus/prometheus.yml "$dir/prometheus.yml"
  { echo "# every quickstart agent's /metrics (written by scripts/quickstart.sh)"
    echo "- targets:"
    awk '{printf "    - 127.0.0.1:%s\n", $2}' "$state/metrics.ports"
  } >"$dir/storwatch/targets/quickstart.yml.tmp"
  # renamed into place: Prometheus watches the directory and must never read half a file
  mv "$dir/storwatch/targets/quickstart.yml.tmp" "$dir/storwatch/targets/quickstart.yml"
  if [ -f "$rules" ]; then
    sed "s#^\( *runbook_url: \)alerts/runbooks/#\1file://$repo/alerts/runbooks/#" "$rules" \
      >"$dir/storwatch/rules/storwatch-rules.yml"
  else
    rm -f "$dir/storwatch/rules/storwatch-rules.yml"
    say "alerts/prometheus/storwatch-rules.yml is not in this tree: Prometheus runs without alerting rules"
  fi
  promtool check config "$dir/prometheus.yml" >"$logs/promtool.log" 2>&1 \
    || { cat "$logs/promtool.log" >&2; die "promtool check config $dir/prometheus.yml failed"; }
  if alive prometheus; then
    kill -HUP "$(cat "$run/prometheus.pid")"
  else
    launch prometheus "$logs/prometheus.log" prometheus --config.file="$dir/prometheus.yml" \
      --storage.tsdb.path="$dir/data" --storage.tsdb.retention.time=14d \
      --web.listen-address="127.0.0.1:$PROMETHEUS_PORT"
  fi
  for _ in $(seq 1 150); do
    curl -sf "$(prom_url)/-/ready" >/dev/null 2>&1 && return 0
    alive prometheus || { tail -20 "$logs/prometheus.log" >&2; die "Prometheus exited"; }
    sleep 0.1
  done
  die "Prometheus is not ready on $(prom_url) after 15 s (log: $logs/prometheus.log)"
}

info() {
  local host=$1 nsim=$2 url
  url=$(influx_url)
  cat <<EOF

InfluxDB        $url  (127.0.0.1 only), database "$db", retention policy "raw" (10 s points;
                rp_1m and rp_1h are filled by continuous queries); data in $state/influxdb
Collector       http://127.0.0.1:$COLLECTOR_PORT/write?db=$db  (token in $state/agent.token)
Agents          this host ($host) and $nsim simulated hosts under $state/fleet/; each serves its
                latest report at http://127.0.0.1:<port>/metrics (ports in $state/metrics.ports)
Logs, pids      $logs/, $run/
EOF
  if [ "$with_prometheus" = 1 ]; then
    local rules="the alerting rules of alerts/prometheus/storwatch-rules.yml"
    [ -f "$state/prometheus/storwatch/rules/storwatch-rules.yml" ] || rules="no alerting rules (alerts/prometheus/storwatch-rules.yml missing)"
    cat <<EOF
Prometheus      $(prom_url)  (127.0.0.1 only), job "storwatch" scraping every agent every 10 s,
                $rules; configuration and data in $state/prometheus/
EOF
  fi
  cat <<EOF

The first reports arrive about 10-20 s after start. Then:

  curl -sG '$url/query' --data-urlencode db=$db -H 'Accept: application/csv' \\
    --data-urlencode 'q=SELECT last(util_max_pct) FROM disk WHERE time > now() - 5m GROUP BY host'

  scripts/quickstart.sh status     # what runs, rows and hosts per measurement

Live iostat -x / sar -n DEV view of this host:   $bin/storwatch-agent top
... of a simulated host, e.g. the write storm:
  r=$state/fleet/sim-write-storm-01; PATH=\$r/bin:\$PATH $bin/storwatch-agent top --proc-root \$r/proc --sys-root \$r/sys
... of the worker whose jobs read from a server in that storm (its jobs pane: efficiency, I/O stall):
  r=$state/fleet/sim-jobs-io-starved-01; PATH=\$r/bin:\$PATH $bin/storwatch-agent top --proc-root \$r/proc --sys-root \$r/sys

Batch jobs (worker-htcondor, worker-slurm, jobs-io-starved hosts), per node:
  curl -sG '$url/query' --data-urlencode db=$db -H 'Accept: application/csv' \
    --data-urlencode 'q=SELECT last(cpu_efficiency_pct), last(io_stall_pct), last(count) FROM jobs WHERE time > now() - 5m GROUP BY host'

Grafana (on this machine; no Grafana release has been verified, see docs/quickstart.md "Which
Grafana" and scripts/grafana-check.sh): datasource, dashboards and alert rules with their
runbooks, from the repository:
  sudo deploy/grafana/install.sh --influx-url $url --runbook-base file://$repo/alerts/runbooks
  sudo systemctl daemon-reload && sudo systemctl restart grafana-server
  dashboards in the folder "storwatch", site "quickstart" (docs/deploy.md, section 4)
EOF
  if [ "$with_prometheus" = 1 ]; then
    cat <<EOF
With Prometheus as a datasource too (the "(Prometheus)" dashboards beside the InfluxDB ones; the
alert rules stay Grafana's InfluxQL ones, the PromQL ones run in this Prometheus):
  sudo deploy/grafana/install.sh --datasource both --influx-url $url --prometheus-url $(prom_url) \\
    --runbook-base file://$repo/alerts/runbooks
PromQL, e.g. each host's peak 1 s %util over the last 5 minutes:
  curl -sG '$(prom_url)/api/v1/query' --data-urlencode 'query=max by (host) (max_over_time(storwatch_disk_util_max_percent[5m]))'
EOF
  else
    echo "A Prometheus scraping the agents, with the PromQL rules: scripts/quickstart.sh start --prometheus"
  fi
  cat <<EOF

Stop everything: scripts/quickstart.sh stop
EOF
}

# ---------------------------------------------------------------- stop

cmd_stop() {
  [ -d "$state" ] || { say "nothing to stop ($state does not exist)"; return 0; }
  mkdir -p "$run"
  local pids=() f n p
  # agents first (SIGTERM makes them hand their last report to the spool), then the simulator,
  # the collector (it has fsync'd what it acknowledged), Prometheus, InfluxDB last
  for f in "$run"/agent-*.pid; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .pid)
    p=$(stop_group "$n")
    [ -n "$p" ] && pids+=("$p")
  done
  for n in sim collector prometheus; do
    p=$(stop_group "$n")
    [ -n "$p" ] && pids+=("$p")
  done
  [ ${#pids[@]} -eq 0 ] || wait_gone "${pids[@]}"
  if [ -f "$state/influxdb/influxd.pid" ]; then
    if ours "$(cat "$state/influxdb/influxd.pid")"; then
      scripts/influxd-test.sh stop "$state/influxdb"
    else
      rm -f "$state/influxdb/influxd.pid"
    fi
  fi
  rm -f "$run/influxd.pid"
  local left
  left=$(leftovers)
  if [ -n "$left" ]; then
    echo "quickstart: still running after stop:" >&2
    echo "$left" >&2
    exit 1
  fi
  say "stopped ${#pids[@]} process(es) and InfluxDB; nothing of $state is running"
  say "data kept in $state (rm -rf it to start from scratch)"
}

# ---------------------------------------------------------------- status

cmd_status() {
  [ -d "$run" ] || { say "not started ($state does not exist)"; return 3; }
  if [ -f "$state/ports.env" ]; then . "$state/ports.env"; fi
  local f n up=0 down=0
  for f in "$run"/*.pid; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .pid)
    if alive "$n"; then
      up=$((up + 1))
      case $n in agent-sim-*) ;; *) printf '  %-12s running  pid %s\n' "$n" "$(cat "$f")" ;; esac
    else
      down=$((down + 1))
      printf '  %-12s NOT RUNNING (log: %s)\n' "$n" "$logs/$n.log"
    fi
  done
  local sims=0 sims_up=0
  for f in "$run"/agent-sim-*.pid; do
    [ -e "$f" ] || continue
    sims=$((sims + 1))
    alive "$(basename "$f" .pid)" && sims_up=$((sims_up + 1))
  done
  printf '  %-12s %s of %s simulated hosts have their agent running\n' "agent-sim-*" "$sims_up" "$sims"
  echo "  $up running, $down not"
  [ "$up" -gt 0 ] || { say "nothing runs: scripts/quickstart.sh start"; return 3; }
  if [ -f "$run/prometheus.pid" ] && [ -n "${PROMETHEUS_PORT:-}" ]; then
    if curl -sf "$(prom_url)/-/ready" >/dev/null 2>&1; then
      local rules health
      rules=$(curl -sf "$(prom_url)/api/v1/rules?type=alert" 2>/dev/null || true)
      health=$(grep -o '"health":"[a-z]*"' <<<"$rules" | sed 's/.*:"\(.*\)"/\1/' | sort | uniq -c |
        awk '{printf "%s%s %s", sep, $1, $2; sep = ", "}' || true)
      printf '  Prometheus %s: %s of %s agents up (job storwatch); alerting rules: %s; %s alerts firing\n' \
        "$(prom_url)" "$(promq 'count(up{job="storwatch"} == 1)')" "$(promq 'count(up{job="storwatch"})')" \
        "${health:-none}" "$(promq 'count(ALERTS{alertstate="firing"})')"
    else
      echo "  Prometheus does not answer at $(prom_url)"
    fi
  fi
  if ! curl -sf "$(influx_url)/ping" >/dev/null 2>&1; then
    echo "  InfluxDB does not answer at $(influx_url)"
    return 1
  fi
  echo
  printf '  %-20s %8s %6s   (retention policy raw, %s)\n' measurement rows hosts "$(influx_url)"
  local m rows hosts
  for m in $(q 'SHOW MEASUREMENTS' | awk -F, 'NR > 1 {print $3}'); do
    # rows: the largest per-field count (fields present on every line give the line count)
    rows=$(q "SELECT count(*) FROM \"raw\".\"$m\"" | awk -F, 'NR == 1 {next} {for (i = 4; i <= NF; i++) if ($i + 0 > max) max = $i + 0} END {print max + 0}')
    hosts=$(q "SHOW TAG VALUES FROM \"raw\".\"$m\" WITH KEY = \"host\"" | awk 'NR > 1' | wc -l)
    printf '  %-20s %8s %6s\n' "$m" "$rows" "$hosts"
  done
}

case ${1:-} in
  start) shift; cmd_start "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  -h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d' ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
