#!/usr/bin/env bash
# Resident memory of the agent as a site runs it: every monitor on, on the 200-disk host of the
# shared harness (../shared/bench, ticked by bench/run-agent-bench.sh running the read floor
# beside it), the fake smartctl and storcli64 of --drives-steady (drive and controller rounds
# every 60 s), its reports sent by the HTTP output and spool to a storwatch-collector on
# 127.0.0.1, and `/metrics` served and scraped every 10 s.
#
#   bench/http-rss.sh [--warmup 70] [--duration 120] [--disks N] [--outputs both|http|metrics]
#                     [--callgrind DIR] [--functions N]
#
# --callgrind DIR runs each agent under valgrind's callgrind instead (no RSS figures then),
# counted from the end of --warmup for --duration s, and prints the instructions of the whole
# agent and of its `/metrics` page's making a report (the report read into the series,
# `Exporter::update`, on the sampling thread; the page made for a scrape, `Served::page`, on the
# listener's; before the page was made when asked, `Exporter::update` made it); the profiles are
# left in DIR.
# --outputs http leaves `/metrics` off; --outputs metrics sends the reports to a file in the
# bench's directory instead of the collector (the line-protocol output a scrape-only site does
# not use).
# STORWATCH_AGENT_BIN is measured (else the release build, built here); with STORWATCH_BEFORE_BIN
# a second agent, that binary, runs at the same time on the same host with its own spool and
# `/metrics`, to the same collector (STORWATCH_COLLECTOR_BIN, else the release build beside the
# agent; its own output unreachable: it only queues). After --warmup s (startup and a first drive
# round), VmRSS is read every second for --duration s; at the end each agent's /proc/PID/smaps is
# summed by mapping: the agent's own file, the heap (brk), other anonymous memory (glibc's mmapped
# blocks, thread stacks), shared libraries. Prints one line per agent, kB, and its CPU over the
# window (every thread's schedstat, ms per s; children not counted), then each agent's own
# file by ELF section (bench/resident-sections.py: which of its pages are in memory, and how much
# of it in the page cache's large folios); with --functions N, also the N functions of its code
# outside the hot section with the most pages in memory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
warmup=70
duration=120
disks=
outputs=both
callgrind=
functions=
while [ $# -gt 0 ]; do
  case $1 in
    --warmup) warmup=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --disks) disks=$2; shift 2 ;;
    --outputs) outputs=$2; shift 2 ;;
    --callgrind) callgrind=$2; shift 2 ;;
    --functions) functions=(--functions "$2"); shift 2 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
case $outputs in both | http | metrics) ;; *) echo "--outputs: both, http or metrics" >&2; exit 2 ;; esac
command -v curl >/dev/null || { echo "needs curl" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. "$here/lib.sh"
agent_bin=$(agent_binary)
before_bin=${STORWATCH_BEFORE_BIN:-}
collector_bin=${STORWATCH_COLLECTOR_BIN:-$(dirname "$agent_bin")/storwatch-collector}
[ -x "$collector_bin" ] || { echo "no collector at $collector_bin (STORWATCH_COLLECTOR_BIN)" >&2; exit 1; }
work=$(mktemp -d /tmp/storwatch-http-rss.XXXXXX)
host=/dev/shm/$(basename "$work")-host
ticker=
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_ticking_host "$work"
  wait 2>/dev/null || true
  remove_dirs "$work" "$host" "/dev/shm/$(basename "$work")-bench-run"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # the EXIT trap runs on these too

regen=()
[ -z "$disks" ] || regen=(--regen --disks "$disks")
start_ticking_host "$work" "$host" $((warmup + duration + 60)) "${regen[@]}"

free_ports() {
  python3 -c 'import socket,sys
s=[socket.socket() for _ in range(int(sys.argv[1]))]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])' "$1"
}
read -r cport pport1 pport2 < <(free_ports 3)
(umask 077; printf 'http-rss-token-0123456789\n' >"$work/agent.token"
  printf 'rss:http-rss-token-0123456789\n' >"$work/collector.tokens")
mkdir -p "$work/queue"
"$collector_bin" --listen "127.0.0.1:$cport" --queue-dir "$work/queue" \
  --token-file "$work/collector.tokens" --output http://127.0.0.1:9 --db storwatch \
  >"$work/collector.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$cport/ping" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$cport/ping" >/dev/null || { cat "$work/collector.log" >&2; exit 1; }

names=(agent)
bins=("$agent_bin")
ports=("$pport1")
if [ -n "$before_bin" ]; then
  names+=(before)
  bins+=("$before_bin")
  ports+=("$pport2")
fi
agent_pids=()
for i in "${!names[@]}"; do
  n=${names[$i]}
  mkdir -p "$work/spool-$n"
  printf '[drive]\nsmartctl = "%s"\ninterval = "60s"\n[hwraid]\nstorcli = "%s"\n' \
    "$work/bench/bin/drive/smartctl" "$work/bench/bin/drive/storcli64" >"$work/$n.toml"
  [ "$outputs" = http ] || printf '[prometheus]\nlisten = "127.0.0.1:%s"\n' "${ports[$i]}" >>"$work/$n.toml"
  output=(--output "http://127.0.0.1:$cport/write?db=storwatch" --token-file "$work/agent.token"
    --spool-dir "$work/spool-$n")
  [ "$outputs" != metrics ] || output=(--output "file:$work/$n.lp")
  vg=()
  [ -z "$callgrind" ] || vg=(valgrind --tool=callgrind --instr-atstart=no
    "--callgrind-out-file=$callgrind/$n.cg")
  "${vg[@]}" "${bins[$i]}" run --config "$work/$n.toml" --proc-root "$host/proc" --sys-root "$host/sys" \
    --sample-interval 1s --report-interval 10s "${output[@]}" >"$work/$n.log" 2>&1 &
  agent_pids+=($!)
  pids+=($!)
  if [ "$outputs" != http ]; then
    # a Prometheus scraping it every 10 s
    (while sleep 10; do curl -s -o /dev/null "http://127.0.0.1:${ports[$i]}/metrics" || true; done) &
    pids+=($!)
  fi
done
sleep "$warmup"
if [ -n "$callgrind" ]; then
  for p in "${agent_pids[@]}"; do callgrind_control -i on "$p" >/dev/null; done
  sleep "$duration"
  for p in "${agent_pids[@]}"; do callgrind_control -d "$p" >/dev/null; done
  sleep 2
  echo "outputs: $outputs; load average: $(cut -d' ' -f1-3 /proc/loadavg); instructions a report ($((duration / 10)) reports)"
  for n in "${names[@]}"; do
    f=$(ls -t "$callgrind/$n".cg* | head -1)
    callgrind_annotate --inclusive=yes "$f" 2>/dev/null | awk -v n="$n" -v r=$((duration / 10)) '
      /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
      /Exporter::update/ { gsub(",", "", $1); if (!upd) upd = $1 }
      /Served::page/ { gsub(",", "", $1); if (!srv) srv = $1 }
      END { printf "%-7s whole agent %12.0f   Exporter::update %12.0f   Served::page %12.0f   both %12.0f\n",
        n, total / r, upd / r, srv / r, (upd + srv) / r }'
  done
  exit 0
fi
for i in "${!names[@]}"; do : >"$work/rss-${names[$i]}"; done
cpu0=()
for i in "${!names[@]}"; do cpu0+=("$(cpu_ns "${agent_pids[$i]}")"); done
for _ in $(seq "$duration"); do
  for i in "${!names[@]}"; do
    awk '/^VmRSS:/{print $2}' "/proc/${agent_pids[$i]}/status" >>"$work/rss-${names[$i]}"
  done
  sleep 1
done
cpu1=()
for i in "${!names[@]}"; do cpu1+=("$(cpu_ns "${agent_pids[$i]}")"); done
queued=$(curl -s "http://127.0.0.1:$cport/metrics" | awk '/^storwatch_collector_lines_accepted_total /{print $2}')
if [ "$outputs" != metrics ] && [ "${queued:-0}" = 0 ]; then
  echo "the collector took no line from the agents" >&2
  cat "$work"/*.log >&2
  exit 1
fi
echo "outputs: $outputs; load average: $(cut -d' ' -f1-3 /proc/loadavg); the collector took ${queued:-0} lines"
printf '%-7s %9s %9s %9s %9s %9s %9s %9s %9s\n' agent rss_mean rss_max own_file heap other_anon libs metrics_page cpu_ms_s
for i in "${!names[@]}"; do
  n=${names[$i]}
  page=0
  [ "$outputs" = http ] || page=$(curl -s "http://127.0.0.1:${ports[$i]}/metrics" | wc -c)
  cpu=$(awk -v a="${cpu0[$i]}" -v b="${cpu1[$i]}" -v d="$duration" 'BEGIN { printf "%.3f", (b - a) / 1e6 / d }')
  python3 - "/proc/${agent_pids[$i]}" "$work/rss-$n" "$n" "$page" "$cpu" <<'PY'
import os, sys
proc, rss_file, name, page, cpu = sys.argv[1:]
smaps = proc + "/smaps"
binary = os.readlink(proc + "/exe")  # a wrapper script that execs the agent is measured too
own = heap = anon = libs = 0
path = ""
for line in open(smaps):
    f = line.split()
    if len(f) >= 5 and "-" in f[0] and ":" in f[3]:
        path = f[5] if len(f) > 5 else ""
        continue
    if f and f[0] == "Rss:":
        kb = int(f[1])
        if path == binary:
            own += kb
        elif path == "[heap]":
            heap += kb
        elif path == "" or path.startswith("[stack") or path.startswith("[anon"):
            anon += kb
        else:
            libs += kb
rss = [int(x) for x in open(rss_file) if x.strip()]
print("%-7s %9d %9d %9d %9d %9d %9d %9d %9s" % (name, sum(rss) // len(rss), max(rss), own, heap, anon, libs, int(page) // 1024, cpu))
PY
done
for i in "${!names[@]}"; do
  echo "${names[$i]}: its own file resident, by section"
  python3 "$here/resident-sections.py" "${agent_pids[$i]}" ${functions:+"${functions[@]}"} | sed 's/^/  /'
done
