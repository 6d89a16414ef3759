#!/usr/bin/env bash
# Opens storwatch's dashboards in a real browser, as the on-call would, over the quickstart fleet,
# and checks what every panel shows. Opt-in: scripts/test.sh never runs it (it needs a Grafana
# home with its frontend, node with puppeteer-core and Chromium; see docs/deploy.md, "Grafana
# versions verified").
#
#   scripts/grafana-browser-check.sh --grafana-home DIR [--node-modules DIR] [--node PATH]
#        [--out DIR] [--fill SECONDS] [--bin DIR] [--scenario NAME]... [--dashboard KIND]...
#        [--quickstart-dir DIR] [--keep]
#
#   --grafana-home DIR   a Grafana home with bin/grafana, conf/ and public/build (the frontend)
#   --node-modules DIR   a node_modules holding puppeteer-core (a Grafana source tree's own has
#                        it); default: NODE_PATH
#   --node PATH          node (default: DIR/../.gf-build/node/bin/node next to --node-modules
#                        when there, else node on PATH)
#   --out DIR            PNG + JSON per page, pages.tsv, verdicts.txt (default: a new directory
#                        under ${TMPDIR:-/tmp}; never inside the repository)
#   --fill SECONDS       how long the fleet reports before the pages are opened (default 240)
#   --bin DIR            storwatch binaries already built (storwatch-agent, -collector, -sim);
#                        default: the quickstart builds the release ones
#   --scenario NAME      only this scenario's host (repeatable; `healthy` is always included);
#                        default: every scenario of scripts/grafana-ui/expectations.yaml
#   --dashboard KIND     only this dashboard kind: disk-server, storage-health, worker-node,
#                        site-overview (repeatable); both query languages of each
#   --quickstart-dir DIR a quickstart already running with --prometheus (its ports.env): use
#                        it, and leave it running; default: start one in a scratch directory and
#                        stop it at the end
#   --keep               keep the scratch directory (Grafana's log and database, the fleet's data)
#
# What it does, everything on 127.0.0.1:
#  1. scripts/quickstart.sh start --prometheus --hosts-per-scenario 1 (QUICKSTART_DIR in the
#     scratch directory): InfluxDB, the collector, a simulated host per scenario, Prometheus;
#  2. deploy/grafana/install.sh --datasource both into a scratch Grafana provisioning directory;
#  3. Grafana from --grafana-home (scripts/grafana-ui/run-grafana.sh: anonymous Viewer);
#  4. after --fill, headless Chromium (scripts/grafana-ui/shot.js, 1600 px wide) renders every
#     dashboard of both languages for the host of each scenario that
#     scripts/grafana-ui/expectations.yaml lists for it, and for sim-healthy-01 (the site
#     overview once): a PNG and a JSON of what every panel shows, per page;
#  5. scripts/grafana-ui/verdicts.py: per dashboard x host, pass or fail with the reasons: no
#     panel error, no "No data" where the host has the data, the table columns the expectations
#     name in view at 1600 px, the scenario's incident words and values in the first 1,200 px;
#     and on Grafana's alert list, one set of rules: Grafana's, none of Prometheus's beside them.
# Prints the verdicts (also OUT/verdicts.txt); exits 1 when a page fails, 2 when the check cannot
# run. Nothing it started is left running.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
ui=$repo/scripts/grafana-ui

die() { echo "grafana-browser-check: $*" >&2; exit 2; }
say() { echo "grafana-browser-check: $*"; }

gf_home='' node_modules=${NODE_PATH:-} node='' out='' fill=240 bin='' scenarios=() kinds=() qs_given='' keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --grafana-home) gf_home=${2:-}; shift 2 ;;
    --node-modules) node_modules=${2:-}; shift 2 ;;
    --node) node=${2:-}; shift 2 ;;
    --out) out=${2:-}; shift 2 ;;
    --fill) fill=${2:-}; shift 2 ;;
    --bin) bin=${2:-}; shift 2 ;;
    --scenario) scenarios+=("${2:-}"); shift 2 ;;
    --dashboard) kinds+=("${2:-}"); shift 2 ;;
    --quickstart-dir) qs_given=${2:-}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (--help)" ;;
  esac
done

# ---------------------------------------------------------------- prerequisites

[ -n "$gf_home" ] || die "--grafana-home DIR is required: a Grafana home with bin/grafana and public/build (--help)"
[ -x "$gf_home/bin/grafana" ] || die "--grafana-home $gf_home: no bin/grafana"
[ -s "$gf_home/public/build/assets-manifest.json" ] || die "--grafana-home $gf_home: no frontend build (public/build/assets-manifest.json)"
gf_home=$(cd "$gf_home" && pwd)
case $fill in '' | *[!0-9]*) die "--fill wants seconds" ;; esac
for c in curl python3; do command -v "$c" >/dev/null || die "$c is needed"; done
python3 -c 'import yaml' 2>/dev/null || die "python3 cannot import yaml (apt-get install python3-yaml)"
[ -n "$node_modules" ] || die "--node-modules DIR (a node_modules with puppeteer-core, e.g. a Grafana source tree's) or NODE_PATH is required"
node_modules=$(cd "${node_modules%%:*}" && pwd) || die "--node-modules: no such directory"
if [ -z "$node" ]; then
  if [ -x "$node_modules/../.gf-build/node/bin/node" ]; then node=$node_modules/../.gf-build/node/bin/node; else node=node; fi
fi
command -v "$node" >/dev/null || die "no node (--node PATH)"
NODE_PATH=$node_modules "$node" -e "require('puppeteer-core')" 2>/dev/null ||
  die "puppeteer-core not found in $node_modules (--node-modules)"
chromium=${CHROMIUM:-chromium}
command -v "$chromium" >/dev/null || die "no $chromium (apt-get install -y chromium fonts-liberation, or CHROMIUM=PATH)"
if [ -n "$bin" ]; then
  bin=$(cd "$bin" && pwd)
  for b in storwatch-agent storwatch-collector storwatch-sim; do
    [ -x "$bin/$b" ] || die "--bin $bin: no $b there"
  done
fi

# the pages: kind, uids, host variable, and the scenarios each kind is rendered for
expectations=$ui/expectations.yaml
plan=$(python3 - "$expectations" "${#scenarios[@]}" "${scenarios[@]}" "${kinds[@]}" <<'PY'
import sys, yaml
exp = yaml.safe_load(open(sys.argv[1]))
n = int(sys.argv[2])
want_s, want_k = set(sys.argv[3:3 + n]), set(sys.argv[3 + n:])
kinds = exp["dashboards"]
bad = (want_k - set(kinds)) | (want_s - set(exp["scenarios"]))
if bad:
    sys.exit(f"unknown dashboard kind or scenario: {', '.join(sorted(bad))} "
             f"(kinds: {', '.join(kinds)}; scenarios: {', '.join(exp['scenarios'])})")
for kind, k in kinds.items():
    if want_k and kind not in want_k:
        continue
    for uid in k["uids"]:
        if not k.get("host_var"):
            print(f"{kind}\t{uid}\t-\t-")
            continue
        for s, se in exp["scenarios"].items():
            if kind in se.get("dashboards", []) and (not want_s or s in want_s or s == "healthy"):
                print(f"{kind}\t{uid}\t{k['host_var']}\t{s}")
PY
) || die "scripts/grafana-ui/expectations.yaml: $plan"
[ -n "$plan" ] || die "no page to render for --scenario ${scenarios[*]:-} --dashboard ${kinds[*]:-}"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/storwatch-browser-check.XXXXXX")
if [ -z "$out" ]; then out=$scratch/pages; fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
case $out/ in "$repo"/*) die "--out $out is inside the repository: the pictures stay out of it" ;; esac
qs=${qs_given:-$scratch/quickstart}
gf_state=$scratch/grafana

cleanup() {
  local rc=$?
  if [ -f "$gf_state/grafana.pid" ]; then
    local pid
    pid=$(cat "$gf_state/grafana.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  [ -n "$qs_given" ] || [ ! -d "$qs" ] || QUICKSTART_DIR=$qs scripts/quickstart.sh stop >/dev/null 2>&1 || true
  if [ "$keep" = 1 ] || [ "$rc" = 2 ]; then
    echo "grafana-browser-check: Grafana's state and the fleet's data kept in $scratch"
  else
    case $out/ in "$scratch"/*) mv "$out" "${scratch}.pages" && out=${scratch}.pages ;; esac
    rm -rf "$scratch"
  fi
  echo "grafana-browser-check: pages and verdicts in $out"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p=$1
  while port_taken "$p"; do p=$((p + 1)); done
  echo "$p"
}

# ---------------------------------------------------------------- the fleet

if [ -n "$qs_given" ]; then
  [ -f "$qs/ports.env" ] || die "--quickstart-dir $qs: no ports.env (start it with scripts/quickstart.sh start --prometheus)"
  say "using the running quickstart in $qs"
  fleet_started=$SECONDS
  fill=0
else
  say "starting the quickstart fleet with Prometheus in $qs"
  env QUICKSTART_DIR="$qs" ${bin:+QUICKSTART_BIN="$bin"} scripts/quickstart.sh start --prometheus \
    --hosts-per-scenario 1 >"$scratch/quickstart-start.log" 2>&1 ||
    { tail -30 "$scratch/quickstart-start.log" >&2; die "scripts/quickstart.sh start --prometheus failed (log: $scratch/quickstart-start.log)"; }
  fleet_started=$SECONDS
fi
# shellcheck disable=SC1091
. "$qs/ports.env"
[ -n "${INFLUX_PORT:-}" ] || die "no INFLUX_PORT in $qs/ports.env"
[ -n "${PROMETHEUS_PORT:-}" ] || die "no PROMETHEUS_PORT in $qs/ports.env: the quickstart runs without Prometheus (start --prometheus)"
influx_url=http://127.0.0.1:$INFLUX_PORT
prom_url=http://127.0.0.1:$PROMETHEUS_PORT

# ---------------------------------------------------------------- Grafana

mkdir -p "$gf_state"
deploy/grafana/install.sh --datasource both --runbook-base http://127.0.0.1/storwatch-runbooks \
  --influx-url "$influx_url" --prometheus-url "$prom_url" \
  --provisioning "$gf_state/provisioning" --dashboards "$gf_state/dashboards" \
  --systemd-dir "$gf_state/systemd" >"$gf_state/install.log" 2>&1 ||
  { cat "$gf_state/install.log" >&2; die "deploy/grafana/install.sh --datasource both failed"; }
port=$(free_port 13000)
STORWATCH_INFLUX_URL=$influx_url STORWATCH_PROMETHEUS_URL=$prom_url \
  "$ui/run-grafana.sh" "$gf_home" "$gf_state" "$port" "$gf_state/provisioning" >"$gf_state/run.log" 2>&1 ||
  { cat "$gf_state/run.log" >&2; die "Grafana did not start (log: $gf_state/logs/grafana.log)"; }
grafana_url=http://127.0.0.1:$port
say "Grafana ($("$gf_home/bin/grafana" -v 2>&1 | head -1)) on $grafana_url"
# the dashboards are provisioned shortly after /api/health answers
for _ in $(seq 1 120); do
  n=$(curl -sf "$grafana_url/api/search?type=dash-db&limit=100" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null || echo 0)
  [ "$n" -ge 8 ] && break
  sleep 1
done
[ "$n" -ge 8 ] || die "Grafana lists $n dashboards, not the 8 installed (log: $gf_state/logs/grafana.log)"

left=$((fill - (SECONDS - fleet_started)))
if [ "$left" -gt 0 ]; then
  say "letting the fleet report for $left s more (--fill $fill)"
  sleep "$left"
fi

# ---------------------------------------------------------------- render and judge

pages=$out/pages.tsv
: >"$pages"
set --
while IFS=$'\t' read -r kind uid var scenario; do
  if [ "$scenario" = - ]; then
    name=$uid
    host=-
    url="$grafana_url/d/$uid"
  else
    host=sim-$scenario-01
    name=$uid--$host
    url="$grafana_url/d/$uid?var-$var=$host"
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$uid" "$host" "$scenario" >>"$pages"
  set -- "$@" "$name" "$url"
done <<<"$plan"
# the alert list: one set of rules (install.sh --datasource both: Grafana's)
printf 'alert-list\talert-list\t/alerting/list\t-\t-\n' >>"$pages"
set -- "$@" alert-list "$grafana_url/alerting/list"
say "rendering $(($# / 2)) pages (about 15 s each) into $out"
TZ=UTC SHOT_W=1600 CHROMIUM=$chromium NODE_PATH=$node_modules "$node" "$ui/shot.js" "$out" "$@" \
  >"$out/shot.log" 2>&1 || { tail -20 "$out/shot.log" >&2; say "shot.js could not load every page (log: $out/shot.log)"; }
python3 "$ui/panels.py" "$out" >"$out/panels.txt" || true

status=0
python3 "$ui/verdicts.py" --expectations "$expectations" --pages "$pages" --shots "$out" --repo "$repo" \
  --influx "$influx_url" --prometheus "$prom_url" >"$out/verdicts.txt" || status=$?
cat "$out/verdicts.txt"
[ "$status" -le 1 ] || die "verdicts.py failed (exit $status)"
exit "$status"
