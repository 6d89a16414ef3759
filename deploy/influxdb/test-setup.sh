#!/usr/bin/env bash
# Proves deploy/influxdb/setup.influxql on a real InfluxDB 1.x: starts a throw-away influxd
# (scripts/influxd-test.sh) on 127.0.0.1:${STORWATCH_TEST_INFLUX_PORT:-18400}, applies the setup
# twice (idempotent), writes an hour of 10 s `disk` reports with one 10 s burst at 100 % util plus
# state lines (md, mpath_path, net), runs every continuous query's own SELECT ... INTO over that
# hour (the backfill the setup file describes), and checks that the burst survived both rollups.
# Then it writes reports dated in the last few minutes and waits for the server's own scheduled
# 1 min continuous query (RESAMPLE ... FOR 5m) to roll them up: up to ~70 s.
#
#   deploy/influxdb/test-setup.sh            exit 0 when every check passes
# Needs influxd (installed by scripts/influxd-test.sh when missing), curl, python3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
port=${STORWATCH_TEST_INFLUX_PORT:-18400}
url=http://127.0.0.1:$port
dir=$(mktemp -d "${TMPDIR:-/tmp}/storwatch-influx-setup.XXXXXX")
cleanup() { "$repo/scripts/influxd-test.sh" stop "$dir" || true; rm -rf "$dir"; }
trap cleanup EXIT

# pyenv-style shims cost a few hundred ms per start: resolve the interpreter once
python3() { "$py" "$@"; }
py=$(command python3 -c "import sys; print(sys.executable)")

fail() { echo "FAIL: $*" >&2; exit 1; }

"$repo/scripts/influxd-test.sh" start "$dir" "$port"
time "$here/setup.sh" --url "$url"
"$here/setup.sh" --url "$url"   # a second run must change nothing and fail on nothing

q() { curl -sS -G "$url/query" --data-urlencode "db=storwatch" --data-urlencode "epoch=s" --data-urlencode "q=$1"; }
write() { # write RP <<lines
  local code
  code=$(curl -sS -o "$dir/write.out" -w '%{http_code}' -XPOST "$url/write?db=storwatch&rp=$1&precision=s" --data-binary @-)
  [ "$code" = 204 ] || fail "write to $1: HTTP $code $(cat "$dir/write.out")"
}
# value of column $2 in the first row of the JSON on stdin ("" when absent)
col() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)["results"][0]
if "error" in d: sys.exit("query error: " + d["error"])
s = d.get("series") or []
if not s: print(""); sys.exit()
cols, row = s[0]["columns"], s[0]["values"][0]
v = row[cols.index(sys.argv[1])]
print("" if v is None else (str(v).lower() if isinstance(v, bool) else v))' "$1"
}
expect() { # expect WHAT GOT WANT
  if python3 -c 'import sys; g, w = sys.argv[1], sys.argv[2]
try: sys.exit(0 if abs(float(g) - float(w)) < 1e-6 else 1)
except ValueError: sys.exit(0 if g == w else 1)' "$2" "$3"; then
    echo "ok: $1 = $2"
  else
    fail "$1: got '$2', want '$3'"
  fi
}

# --- the retention policies and queries exist ------------------------------------------------
rps=$(q 'SHOW RETENTION POLICIES ON "storwatch"')
for rp in '"raw","336h0m0s","24h0m0s",1,true' '"rp_1m","2160h0m0s"' '"rp_1h","43824h0m0s"'; do
  [[ $rps == *"[$rp"* ]] || fail "retention policy $rp missing in $rps"
done
echo "ok: retention policies raw (default, 14 d), rp_1m (90 d), rp_1h (5 y)"
want_cqs=$(grep -c '^CREATE CONTINUOUS QUERY' "$here/setup.influxql")
have_cqs=$(q 'SHOW CONTINUOUS QUERIES' | grep -o '"cq_1[mh]_[a-z_]*"' | sort -u | wc -l)
[ "$have_cqs" = "$want_cqs" ] || fail "server has $have_cqs continuous queries, setup file $want_cqs"
echo "ok: $have_cqs continuous queries installed"

# --- an hour of past 10 s reports, one burst ---------------------------------------------------
now=$(date +%s)
h0=$(( (now / 3600 - 3) * 3600 ))      # an aligned hour, three hours back (inside raw's 14 d)
burst=$(( h0 + 17 * 60 + 30 ))         # the 10 s report ending at 17:30 into the hour
{
  for ((t = h0; t < h0 + 3600; t += 10)); do
    if [ "$t" = "$burst" ]; then
      u=100; umax=100; sat=10; aw=250
    else
      u=5; umax=8; sat=0; aw=4
    fi
    echo "disk,host=ds01,site=T2_EX,device=sdq,name=sdq,kind=disk,rotational=1 util_pct=$u,util_max_pct=$umax,util_p95_pct=$umax,saturated_s=$sat,interval_s=10,await_ms=$aw,r_per_s=10,in_flight=2i,resets=0i $t"
  done
  # an MD array that degrades for 20 s inside minute 40, then recovers
  for ((t = h0; t < h0 + 3600; t += 10)); do
    if [ "$t" -ge $((h0 + 40 * 60 + 10)) ] && [ "$t" -le $((h0 + 40 * 60 + 20)) ]; then
      s=degraded; red=1i; deg=1i
    else
      s=clean; red=2i; deg=0i
    fi
    echo "md,host=ds01,site=T2_EX,array=md127,level=raid6 state=\"$s\",redundancy_left=$red,degraded=$deg,members=14i $t"
  done
  echo "mpath_path,host=ds01,site=T2_EX,map=mpatha,path=sdc,group=1 active=false,flapping=true,state=\"failed\",transitions=1i,fail_count=3i $((h0 + 300))"
  echo "mpath_path,host=ds01,site=T2_EX,map=mpatha,path=sdc,group=1 active=true,flapping=true,state=\"active\",transitions=1i,fail_count=3i $((h0 + 310))"
  echo "net,host=ds01,site=T2_EX,iface=eth0 rx_bytes_per_s=1.2e9,rx_bytes_max_per_s=1.25e9,util_pct=96,util_max_pct=100,speed_mbps=10000i,operstate=\"up\",interval_s=10 $((h0 + 600))"
} | write raw

# --- backfill: each continuous query's own SELECT ... INTO, limited to that hour -----------------
backfill() { # backfill LEVEL (1m or 1h)
  local n=0 sel st out
  while IFS= read -r st; do
    case $st in "CREATE CONTINUOUS QUERY \"cq_${1}_"*) ;; *) continue ;; esac
    sel=${st#* BEGIN }
    sel=${sel% END}
    sel=${sel/ GROUP BY / WHERE time >= ${h0}s AND time < $((h0 + 3600))s GROUP BY }
    out=$(q "$sel")
    [[ $out == *'"error"'* ]] && fail "backfill $1: $out (query: $sel)"
    n=$((n + 1))
  done < <("$here/setup.sh" --dry-run)
  echo "ok: $n continuous queries of the $1 level run by hand over the hour"
}
backfill 1m
backfill 1h

m17=$(( h0 + 17 * 60 ))
r='"rp_1m"."disk"'
row=$(q "SELECT * FROM $r WHERE host='ds01' AND device='sdq' AND time = ${m17}s")
expect "rp_1m disk util_max_pct (burst minute)" "$(col util_max_pct <<<"$row")" 100
expect "rp_1m disk util_pct_10s_max (burst minute)" "$(col util_pct_10s_max <<<"$row")" 100
expect "rp_1m disk saturated_s (burst minute)" "$(col saturated_s <<<"$row")" 10
expect "rp_1m disk util_pct (burst minute, mean of 100 and 5x5)" "$(col util_pct <<<"$row")" "$(python3 -c 'print((100 + 5 * 5) / 6)')"
expect "rp_1m disk await_ms_10s_max (burst minute)" "$(col await_ms_10s_max <<<"$row")" 250
expect "rp_1m disk interval_s" "$(col interval_s <<<"$row")" 60
expect "rp_1m disk in_flight (integer kept)" "$(col in_flight <<<"$row")" 2
expect "rp_1m keeps the tags: kind" "$(q "SELECT util_max_pct FROM $r WHERE kind='disk' AND rotational='1' AND site='T2_EX' AND time = ${m17}s" | col util_max_pct)" 100
hour="host='ds01' AND time >= ${h0}s AND time < $((h0 + 3600))s"
expect "rp_1m disk minutes written" "$(q "SELECT count(util_pct) FROM $r WHERE $hour" | col count)" 60
expect "rp_1m disk minutes at 100 % (only the burst's)" "$(q "SELECT count(util_max_pct) FROM $r WHERE util_max_pct >= 100 AND $hour" | col count)" 1
expect "rp_1m disk util_max_pct of the other minutes" "$(q "SELECT max(util_max_pct) FROM $r WHERE util_max_pct < 100 AND $hour" | col max)" 8

r='"rp_1h"."disk"'
row=$(q "SELECT * FROM $r WHERE host='ds01' AND device='sdq' AND time = ${h0}s")
expect "rp_1h disk util_max_pct" "$(col util_max_pct <<<"$row")" 100
expect "rp_1h disk util_pct_10s_max" "$(col util_pct_10s_max <<<"$row")" 100
expect "rp_1h disk saturated_s" "$(col saturated_s <<<"$row")" 10
expect "rp_1h disk interval_s" "$(col interval_s <<<"$row")" 3600
expect "rp_1h disk util_pct (hourly mean)" "$(col util_pct <<<"$row")" "$(python3 -c 'print(((100 + 25) / 6 + 59 * 5) / 60)')"

row=$(q "SELECT * FROM \"rp_1m\".\"md\" WHERE array='md127' AND time = $(( h0 + 40 * 60 ))s")
expect "rp_1m md state (last of the minute)" "$(col state <<<"$row")" clean
expect "rp_1m md redundancy_left (worst of the minute)" "$(col redundancy_left <<<"$row")" 1
expect "rp_1m md degraded (worst of the minute)" "$(col degraded <<<"$row")" 1
row=$(q "SELECT * FROM \"rp_1h\".\"md\" WHERE array='md127' AND time = ${h0}s")
expect "rp_1h md redundancy_left (worst of the hour)" "$(col redundancy_left <<<"$row")" 1
expect "rp_1h md state" "$(col state <<<"$row")" clean
row=$(q "SELECT * FROM \"rp_1m\".\"mpath_path\" WHERE path='sdc' AND time = $(( h0 + 300 ))s")
expect "rp_1m mpath_path transitions (sum)" "$(col transitions <<<"$row")" 2
expect "rp_1m mpath_path active (last, boolean)" "$(col active <<<"$row")" true
row=$(q "SELECT * FROM \"rp_1h\".\"net\" WHERE iface='eth0' AND time = ${h0}s")
expect "rp_1h net util_max_pct" "$(col util_max_pct <<<"$row")" 100
expect "rp_1h net speed_mbps" "$(col speed_mbps <<<"$row")" 10000
expect "rp_1h net operstate" "$(col operstate <<<"$row")" up

# --- the server's own schedule: reports dated in the last minutes are rolled up -------------
# RESAMPLE ... FOR 5m recomputes the last five minutes at every minute boundary, so data that
# arrives late (an agent's spool replaying) is still rolled up. Write a burst dated two minutes
# back and wait for the next boundary.
now=$(date +%s)
m=$(( now / 60 * 60 - 120 ))   # start of the minute two minutes back
{
  for ((t = m + 10; t <= m + 60; t += 10)); do
    if [ "$t" = $((m + 30)) ]; then u=100; sat=10; else u=3; sat=0; fi
    echo "disk,host=live01,device=sdb,name=sdb,kind=disk,rotational=1 util_pct=$u,util_max_pct=$u,saturated_s=$sat,interval_s=10 $t"
  done
} | write raw
deadline=$(( $(date +%s) + 75 ))
got=""
while [ "$(date +%s)" -lt "$deadline" ]; do
  got=$(q "SELECT util_max_pct, saturated_s FROM \"rp_1m\".\"disk\" WHERE host='live01' AND time = ${m}s" | col util_max_pct)
  [ -n "$got" ] && break
  sleep 2
done
[ -n "$got" ] || fail "the scheduled 1 min continuous query did not roll up reports dated $(( now - m ))s back within 75 s"
expect "scheduled cq_1m_disk: util_max_pct of late data" "$got" 100
expect "scheduled cq_1m_disk: saturated_s of late data" "$(q "SELECT saturated_s FROM \"rp_1m\".\"disk\" WHERE host='live01' AND time = ${m}s" | col saturated_s)" 10

echo "PASS: setup.influxql keeps bursts through 10 s -> 1 min -> 1 h"
