#!/usr/bin/env bash
# The InfluxDB 2.x tasks on a real influxd 2.x, through its HTTP API (no influx CLI needed): a
# throw-away server on 127.0.0.1:${STORWATCH_TEST_INFLUX2_PORT:-18600}, the three buckets, every
# task of tasks/*.flux created (the server compiles each), DBRP mappings, then a minute of reports
# in the last whole hour with one 10 s burst, manual runs of 1m_disk two minutes after it and of
# 1h_disk at the end of that hour, and the burst read back from storwatch/rp_1m and
# storwatch/rp_1h with Flux and, through the mapping, with InfluxQL.
#
#   INFLUXD=/path/to/influxd deploy/influxdb/v2/test-server.sh      exit 0 when every check passes
#
# influxd 2.x is no OS package here; it builds from its Go module with influxdata's pkg-config
# wrapper (see test-tasks.sh for the libflux lint workaround):
#   cd "$(go env GOMODCACHE)/github.com/influxdata/influxdb/v2@v2.7.11" && \
#     RUSTC_WRAPPER=<rustc --cap-lints warn> RUSTUP_TOOLCHAIN=stable PKG_CONFIG=<pkg-config wrapper> \
#     go build -o /tmp/influxd ./cmd/influxd
# Needs curl and python3. Opens a port: run it in a network namespace of its own if you like
# (unshare -n bash -c 'ip link set lo up; deploy/influxdb/v2/test-server.sh').
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
influxd=${INFLUXD:-$(command -v influxd || true)}
[ -x "$influxd" ] || { echo "test-server.sh: set INFLUXD to an influxd 2.x binary" >&2; exit 2; }
port=${STORWATCH_TEST_INFLUX2_PORT:-18600}
url=http://127.0.0.1:$port
token=storwatch-test-token-0123456789
dir=$(mktemp -d "${TMPDIR:-/tmp}/storwatch-influx2.XXXXXX")
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$dir/influxd.log" ] && tail -20 "$dir/influxd.log" >&2; exit 1; }

"$influxd" run --bolt-path "$dir/influxd.bolt" --engine-path "$dir/engine" \
  --http-bind-address "127.0.0.1:$port" --reporting-disabled --log-level warn >"$dir/influxd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "$url/health" >/dev/null && break; sleep 0.2; done
curl -sf "$url/health" >/dev/null || fail "influxd did not start"
echo "ok: $("$influxd" version) on $url"

# api METHOD PATH [JSON]: the response body; fails on a status >= 300
api() {
  local code
  code=$(curl -sS -o "$dir/resp" -w '%{http_code}' -X "$1" "$url$2" -H "Authorization: Token $token" \
    -H 'Content-Type: application/json' ${3:+--data-binary "$3"})
  [ "$code" -lt 300 ] || fail "$1 $2: HTTP $code $(cat "$dir/resp")"
  cat "$dir/resp"
}
json() { python3 -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1], {"d": d}))' "$1"; }

setup=$(curl -sS -X POST "$url/api/v2/setup" -H 'Content-Type: application/json' --data-binary \
  "{\"username\":\"storwatch\",\"password\":\"storwatch-test-pw\",\"org\":\"storwatch\",\"bucket\":\"storwatch/raw\",\"token\":\"$token\",\"retentionPeriodSeconds\":1209600}")
org=$(json 'd["org"]["id"]' <<<"$setup")
raw=$(json 'd["bucket"]["id"]' <<<"$setup")
bucket() { # bucket NAME RETENTION_S SHARD_S -> id
  api POST /api/v2/buckets "{\"orgID\":\"$org\",\"name\":\"$1\",\"retentionRules\":[{\"type\":\"expire\",\"everySeconds\":$2,\"shardGroupDurationSeconds\":$3}]}" | json 'd["id"]'
}
rp_1m=$(bucket storwatch/rp_1m $((90 * 86400)) $((7 * 86400)))
bucket storwatch/rp_1h $((1826 * 86400)) $((30 * 86400)) >/dev/null
api POST /api/v2/dbrps "{\"orgID\":\"$org\",\"bucketID\":\"$rp_1m\",\"database\":\"storwatch\",\"retention_policy\":\"rp_1m\",\"default\":false}" >/dev/null
api POST /api/v2/dbrps "{\"orgID\":\"$org\",\"bucketID\":\"$raw\",\"database\":\"storwatch\",\"retention_policy\":\"raw\",\"default\":true}" >/dev/null
echo "ok: buckets storwatch/raw, storwatch/rp_1m, storwatch/rp_1h and DBRP mappings"

# every task, as setup.sh creates them (influx task create --file sends the file as the flux)
declare -A task_id
for f in "$here"/tasks/*.flux; do
  body=$(python3 -c 'import json, sys; print(json.dumps({"orgID": sys.argv[1], "flux": open(sys.argv[2]).read()}))' "$org" "$f")
  resp=$(api POST /api/v2/tasks "$body")
  name=$(json 'd["name"]' <<<"$resp")
  [ "$(json 'd["status"]' <<<"$resp")" = active ] || fail "$f: task not active: $resp"
  task_id[$name]=$(json 'd["id"]' <<<"$resp")
done
[ ${#task_id[@]} = "$(ls "$here"/tasks/*.flux | wc -l)" ] || fail "tasks created: ${#task_id[@]}"
echo "ok: ${#task_id[@]} tasks created and active"

# reports of minute 17 of the last whole hour, a burst at its 30th second (a manual run is
# executed at once only when scheduled in the past, so both levels look back at that hour)
now=$(date +%s)
m=$((now / 3600 * 3600 - 3600 + 17 * 60))
for ((t = m; t < m + 60; t += 10)); do
  if [ $t = $((m + 30)) ]; then u=100; sat=10; else u=3; sat=0; fi
  echo "disk,host=ds01,device=sdq,kind=disk util_pct=$u,util_max_pct=$u,saturated_s=$sat,interval_s=10,in_flight=2i $t"
done >"$dir/lines"
code=$(curl -sS -o "$dir/resp" -w '%{http_code}' -X POST "$url/api/v2/write?org=storwatch&bucket=storwatch/raw&precision=s" \
  -H "Authorization: Token $token" --data-binary @"$dir/lines")
[ "$code" = 204 ] || fail "write: HTTP $code $(cat "$dir/resp")"

# run NAME SCHEDULED_FOR: a manual run (now() = SCHEDULED_FOR), waited for
run() {
  local id=${task_id[$1]} rid status
  rid=$(api POST "/api/v2/tasks/$id/runs" "{\"scheduledFor\":\"$2\"}" | json 'd["id"]')
  for _ in $(seq 600); do
    status=$(api GET "/api/v2/tasks/$id/runs/$rid" | json 'd["status"]')
    case $status in success) echo "ok: task $1 ran at $2"; return ;; failed|canceled) break ;; esac
    sleep 0.2
  done
  fail "task $1: run $status: $(api GET "/api/v2/tasks/$id/runs/$rid/logs")"
}
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
# value BUCKET FIELD TIME: from a Flux query of the rollup, with its tags checked
value() {
  local q
  q="from(bucket: \"$1\") |> range(start: -3h, stop: 2h) |> filter(fn: (r) => r._measurement == \"disk\" and r._field == \"$2\" and r._time == $3)"
  curl -sS -X POST "$url/api/v2/query?org=storwatch" -H "Authorization: Token $token" \
    -H 'Content-Type: application/vnd.flux' -H 'Accept: application/csv' --data-binary "$q" |
    python3 -c '
import csv, sys
rows = [r for r in csv.DictReader(l for l in sys.stdin if l.strip())]
rows = [r for r in rows if r.get("_value") not in (None, "_value")]
assert len(rows) == 1, rows
r = rows[0]
assert (r["host"], r["device"], r["kind"]) == ("ds01", "sdq", "disk"), r
print(r["_value"])'
}
expect() { # expect WHAT GOT WANT
  if python3 -c 'import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 1e-6 else 1)' "$2" "$3"; then
    echo "ok: $1 = $2"
  else
    fail "$1: got '$2', want '$3'"
  fi
}

run storwatch_1m_disk "$(iso $((m + 120)))"
expect "rp_1m util_max_pct (burst minute)" "$(value storwatch/rp_1m util_max_pct "$(iso $m)")" 100
expect "rp_1m util_pct_10s_max" "$(value storwatch/rp_1m util_pct_10s_max "$(iso $m)")" 100
expect "rp_1m saturated_s" "$(value storwatch/rp_1m saturated_s "$(iso $m)")" 10
expect "rp_1m interval_s" "$(value storwatch/rp_1m interval_s "$(iso $m)")" 60
expect "rp_1m util_pct (mean)" "$(value storwatch/rp_1m util_pct "$(iso $m)")" "$(python3 -c 'print((100 + 5 * 3) / 6)')"
expect "rp_1m in_flight (integer kept)" "$(value storwatch/rp_1m in_flight "$(iso $m)")" 2

# the dashboards' way: InfluxQL on the 1.x compatibility API through the DBRP mapping
got=$(curl -sS -G "$url/query" -H "Authorization: Token $token" --data-urlencode db=storwatch \
  --data-urlencode epoch=s --data-urlencode "q=SELECT util_max_pct FROM \"rp_1m\".\"disk\" WHERE host = 'ds01' AND time = ${m}s" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["results"][0]["series"][0]["values"][0][1])')
expect "InfluxQL \"rp_1m\".\"disk\" util_max_pct" "$got" 100

h=$((m / 3600 * 3600))
run storwatch_1h_disk "$(iso $((h + 3600)))"
expect "rp_1h util_max_pct" "$(value storwatch/rp_1h util_max_pct "$(iso $h)")" 100
expect "rp_1h saturated_s" "$(value storwatch/rp_1h saturated_s "$(iso $h)")" 10
expect "rp_1h util_pct_10s_max" "$(value storwatch/rp_1h util_pct_10s_max "$(iso $h)")" 100

echo "PASS: influxd 2.x accepts every task, and 1m_disk and 1h_disk keep a 10 s burst"
