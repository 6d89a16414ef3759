#!/usr/bin/env bash
# Whole-process measurement of the collector's prometheus_remote_write output into a real
# Prometheus and a real VictoriaMetrics at once (docs/scaling.md, "Ingest on this machine"):
#
#   scripts/remote-write-bench.sh REPORT.lp [HOSTS] [REPORTS]
#
# REPORT.lp is one agent report (`storwatch-agent once … > REPORT.lp`); it is copied for HOSTS
# hosts (default 20) at REPORTS report times 10 s apart (default 6), posted to a release
# collector (`cargo build --release -p storwatch-collector`) with one output to each receiver,
# and the script waits until both outputs have drained the queue. It prints the lines and
# samples sent, the time, and the CPU seconds and peak RSS of the collector, Prometheus and
# VictoriaMetrics (scripts/victoriametrics-test.sh install builds it). Everything runs on
# 127.0.0.1 in a scratch directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

report=$(realpath "$1")
hosts=${2:-20}
reports=${3:-6}
collector=$PWD/target/release/storwatch-collector
vm=$(scripts/victoriametrics-test.sh path)
[ -x "$collector" ] || { echo "build it first: cargo build --release -p storwatch-collector" >&2; exit 1; }
[ -x "$vm" ] || { echo "build it first: scripts/victoriametrics-test.sh install" >&2; exit 1; }
command -v prometheus >/dev/null || { echo "needs prometheus (apt-get install prometheus)" >&2; exit 1; }

d=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$d"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pport=$(port) vport=$(port) cport=$(port)

printf 'global:\n  scrape_interval: 1h\n' >"$d/prometheus.yml"
prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/prom" \
  --web.listen-address=127.0.0.1:$pport --web.enable-remote-write-receiver --log.level=warn >"$d/prom.log" 2>&1 &
ppid=$!; pids+=($ppid)
"$vm" -storageDataPath="$d/vm" -httpListenAddr=127.0.0.1:$vport -dedup.minScrapeInterval=1ms \
  -loggerLevel=ERROR >"$d/vm.log" 2>&1 &
vpid=$!; pids+=($vpid)
token=remote-write-bench-token
printf 'bench:%s\n' $token >"$d/tokens"; chmod 600 "$d/tokens"
cat >"$d/collector.toml" <<CONF
listen = "127.0.0.1:$cport"
queue_dir = "$d/queue"
token_file = "$d/tokens"
[heartbeat]
interval_s = 0
[[outputs]]
type = "prometheus_remote_write"
name = "prometheus"
url = "http://127.0.0.1:$pport/api/v1/write"
[[outputs]]
type = "prometheus_remote_write"
name = "victoriametrics"
url = "http://127.0.0.1:$vport/api/v1/write"
CONF
until curl -sf http://127.0.0.1:$pport/-/ready >/dev/null && curl -sf http://127.0.0.1:$vport/health >/dev/null; do sleep 0.2; done

# HOSTS copies of the report (host=benchNNNN) at REPORTS times, disk_tunables left out as in a
# steady report, ending a minute ago
python3 - "$report" "$hosts" "$reports" >"$d/body.lp" <<'PY'
import sys, time
rep, hosts, reports = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = [l.rstrip("\n") for l in open(rep) if l.strip() and not l.startswith("disk_tunables")]
t0 = (int(time.time()) - reports * 10 - 60) * 10**9
for k in range(reports):
    for h in range(hosts):
        for l in lines:
            key, rest = l.split(" ", 1)
            fields = rest.rsplit(" ", 1)[0]
            m, _, tags = key.partition(",")
            tags = ",".join(f"host=bench{h:04d}" if t.startswith("host=") else t for t in tags.split(","))
            print(f"{m},{tags} {fields} {t0 + k * 10 * 10**9}")
PY
lines=$(wc -l <"$d/body.lp")
cpu() { awk '{printf "%.2f", ($14+$15)/100}' "/proc/$1/stat"; }
rss_mb() { awk '/VmHWM/{printf "%d", $2/1024}' "/proc/$1/status"; }
p0=$(cpu $ppid) v0=$(cpu $vpid)

RUST_LOG=error "$collector" --config "$d/collector.toml" >"$d/collector.log" 2>&1 &
cpid=$!; pids+=($cpid)
until curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$cport/ping | grep -q 204; do sleep 0.1; done
start=$(date +%s.%N)
# in bodies of 2,000 lines (~0.5 MB, under the default max_body_bytes)
split -l 2000 "$d/body.lp" "$d/part."
for f in "$d"/part.*; do
  curl -sf -XPOST -H "Authorization: Token $token" --data-binary @"$f" "http://127.0.0.1:$cport/write" >/dev/null
done
accepted=$(date +%s.%N)
metric() { curl -s http://127.0.0.1:$cport/metrics | awk -v m="storwatch_collector_$1" '$1==m {print $2}'; }
until [ "$(metric 'output_backlog_bytes{output="prometheus"}')" = 0 ] &&
  [ "$(metric 'output_backlog_bytes{output="victoriametrics"}')" = 0 ]; do sleep 0.2; done
done_at=$(date +%s.%N)

echo "lines: $lines ($hosts hosts x $reports reports)"
echo "samples sent: prometheus $(metric 'output_samples_sent_total{output="prometheus"}')," \
  "victoriametrics $(metric 'output_samples_sent_total{output="victoriametrics"}')"
echo "dead-lettered: prometheus $(metric 'output_dead_lettered_total{output="prometheus"}')," \
  "victoriametrics $(metric 'output_dead_lettered_total{output="victoriametrics"}')"
echo "accepted in $(echo "$accepted - $start" | bc) s, both outputs drained in $(echo "$done_at - $start" | bc) s"
echo "collector:       $(cpu $cpid) CPU-s, peak RSS $(rss_mb $cpid) MiB"
echo "prometheus:      $(echo "$(cpu $ppid) - $p0" | bc) CPU-s, peak RSS $(rss_mb $ppid) MiB"
echo "victoriametrics: $(echo "$(cpu $vpid) - $v0" | bc) CPU-s, peak RSS $(rss_mb $vpid) MiB"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
