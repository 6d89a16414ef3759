#!/usr/bin/env bash
# The site-scale soak on one machine (not part of scripts/test.sh):
#
#   scripts/soak.sh [--hosts N] [--minutes M] [--report FILE]
#
# 600 simulated nodes by default (`storwatch-sim agents`: the agent's own HTTP sink and spool per
# node, all in one process) → a TCP balancer → two collectors with TLS → a real InfluxDB on
# 127.0.0.1, for 30 minutes, with faults on a schedule: collector A kill -9'd and restarted,
# InfluxDB stopped for 3 minutes, collector B's queue filesystem filled for 3 minutes, a quarter
# of the fleet cut off for 5 minutes, a twentieth of the clocks stepped 2 minutes ahead and back.
# Then every spool and queue must drain and every report be in InfluxDB exactly once; the
# collectors' answer latency, peak RSS and CPU are printed (and written to --report).
#
# The harness is tests/tests/it/soak.rs (`site_scale_soak`); its short form (60 nodes, 3 minutes,
# the same faults at a tenth of the time) runs in the default test suite. Needs what the tests
# need (influxd, openssl, curl, unshare; see scripts/test.sh). Ports 18940-18945 by default
# (SOAK_PORT_BASE).
set -euo pipefail
cd "$(dirname "$0")/.."

hosts=600
minutes=30
report=target/soak-report.md
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $report in /*) ;; *) report=$PWD/$report ;; esac

# the fleet opens a spool, two threads and a connection per node
[ "$(ulimit -n)" -ge $((hosts * 8 + 1024)) ] || ulimit -n $((hosts * 8 + 1024)) 2>/dev/null || true

cargo build --release -p storwatch-sim -p storwatch-collector
echo "soak: $hosts hosts for $minutes minutes; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
SOAK_HOSTS=$hosts SOAK_MINUTES=$minutes SOAK_REPORT=$report \
  cargo test --release -p storwatch-tests --test it -- --ignored --exact soak::site_scale_soak --nocapture
echo "soak: figures in $report"
