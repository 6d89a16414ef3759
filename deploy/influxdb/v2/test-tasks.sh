#!/usr/bin/env bash
# Runs the InfluxDB 2.x tasks' Flux on the Flux engine itself — the `flux` CLI of the Flux release
# InfluxDB 2.7.11 ships (v0.195.2) — with in-memory data in place of the buckets, and checks that a
# 10 s burst survives as deploy/influxdb/test-setup.sh checks it on 1.x. Each task file is used as
# it is, except that `from(bucket: …)` reads the test data, `to(bucket: …)` becomes `yield()`, and
# now() is fixed. No influxd is involved, so bucket I/O, task scheduling and DBRP are not tested.
#
#   deploy/influxdb/v2/test-tasks.sh          exit 0 when every check passes
#
# Needs python3 and a `flux` CLI on PATH or in $FLUX; without one it builds it (go install with
# influxdata's pkg-config wrapper, which builds libflux with cargo: 4.5 min on two busy cores).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/storwatch-flux-tasks.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

flux=${FLUX:-$(command -v flux || true)}
if [ -z "$flux" ]; then
  go=$(command -v go || echo /usr/local/go/bin/go)
  gobin=${XDG_CACHE_HOME:-$HOME/.cache}/storwatch-flux/bin
  if [ ! -x "$gobin/flux" ]; then
    mkdir -p "$gobin"
    GOBIN=$gobin "$go" install github.com/influxdata/pkg-config@v0.2.11
    # libflux pins an old Rust toolchain (rust-toolchain.toml) and denies warnings, also in the
    # copy of flux-core its build script uses (which RUSTFLAGS does not reach when cargo is given
    # --target, as the wrapper does): build with the current toolchain, lints capped to warnings.
    printf '#!/bin/sh\nexec "$@" --cap-lints warn\n' >"$gobin/rustc-cap-lints"
    chmod +x "$gobin/rustc-cap-lints"
    RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-stable} RUSTC_WRAPPER=$gobin/rustc-cap-lints \
      PKG_CONFIG=$gobin/pkg-config GOBIN=$gobin \
      "$go" install github.com/influxdata/flux/cmd/flux@v0.195.2
  fi
  flux=$gobin/flux
fi

# run TASK-FILE NOW DATA-FLUX: the task with from() reading DATA-FLUX, yielding what it would write
run() {
  python3 - "$1" "$2" "$3" >"$dir/q.flux" <<'EOF'
import re, sys
task, now, data = sys.argv[1], sys.argv[2], sys.argv[3]
src = open(task).read()
src, n_from = re.subn(r'from\(bucket: "[^"]*"\)', "testdata", src)
src, n_to = re.subn(r'\|> to\(bucket: "[^"]*"\)', '|> yield(name: "rollup")', src)
assert n_from == 1 and n_to == 1, (task, n_from, n_to)
# imports must come first, after the task option nothing else may precede them
print('import "csv"')
print(f"option now = () => {now}")
print(data)
print(src)
EOF
  "$flux" --format csv "$dir/q.flux" >"$dir/out.csv" 2>"$dir/err" || fail "$1: $(cat "$dir/err")"
}

# value of FIELD at TIME for the tag filter, from the annotated CSV of the last run
value() { # value FIELD TIME [TAG=VALUE]
  python3 - "$dir/out.csv" "$@" <<'EOF'
import csv, sys
path, field, time = sys.argv[1], sys.argv[2], sys.argv[3]
tags = dict(kv.split("=", 1) for kv in sys.argv[4:])
header, found = None, []
for row in csv.reader(open(path)):
    if not row or row[0].startswith("#"):
        header = None if not row else header
        continue
    if header is None:
        header = row
        continue
    r = dict(zip(header, row))
    if r.get("_field") == field and r.get("_time") == time and all(r.get(k) == v for k, v in tags.items()):
        found.append(r["_value"])
print(found[0] if len(found) == 1 else f"<{len(found)} rows>")
EOF
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

# testdata: points on stdin, one a line: MEASUREMENT TAGS FIELD TYPE TIME VALUE (TAGS k=v,…;
# TYPE double, long, string or boolean), as annotated CSV, one table per series, so that (as
# from() a bucket) each table has its own value type.
testdata() {
  python3 -c '
import sys
series = {}
for line in sys.stdin:
    m, tags, field, kind, t, v = line.split(maxsplit=5)
    series.setdefault((m, tags, field, kind), []).append((t, v.strip()))
tag_keys = sorted({kv.split("=")[0] for (_, tags, _, _) in series for kv in tags.split(",")})
blocks = []
for table, ((m, tags, field, kind), points) in enumerate(series.items()):
    tv = dict(kv.split("=") for kv in tags.split(","))
    n = len(tag_keys)
    lines = ["#datatype,string,long,dateTime:RFC3339,string,string," + kind + ",string" * n,
             "#group,false,false,false,true,true,false" + ",true" * n,
             "#default,_result,,,,," + "," * n,
             ",result,table,_time,_measurement,_field,_value," + ",".join(tag_keys)]
    lines += [",,%d,%s,%s,%s,%s,%s" % (table, t, m, field, v, ",".join(tv.get(k, "") for k in tag_keys))
              for t, v in points]
    blocks.append("\n".join(lines))
print("testdata = csv.from(csv: \"\n" + "\n\n".join(blocks) + "\n\")")'
}
at() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

now=$(date -u -d 2026-01-01T12:00:00Z +%s)

# --- 1 min: five minutes of 10 s disk reports before 12:00, one burst at 100 % at 11:57:30 ------
tags=host=ds01,device=sdq,kind=disk
for ((t = now - 290; t <= now; t += 10)); do
  if [ $t = $((now - 150)) ]; then u=100; umax=100; sat=10; aw=250; else u=5; umax=8; sat=0; aw=4; fi
  ts=$(at $t)
  echo "disk $tags util_pct double $ts $u"
  echo "disk $tags util_max_pct double $ts $umax"
  echo "disk $tags saturated_s double $ts $sat"
  echo "disk $tags interval_s double $ts 10"
  echo "disk $tags await_ms double $ts $aw"
  echo "disk $tags in_flight long $ts 2"
done | testdata >"$dir/raw.flux"
grep -c ',disk,util_pct,' "$dir/raw.flux" | grep -qx 30 || fail "test data: 30 reports"

run "$here/tasks/1m_disk.flux" "$(at $now)" "$(cat "$dir/raw.flux")"
m=2026-01-01T11:57:00Z
expect "1m_disk util_max_pct (burst minute)" "$(value util_max_pct $m host=ds01 device=sdq kind=disk)" 100
expect "1m_disk util_pct_10s_max (burst minute)" "$(value util_pct_10s_max $m)" 100
expect "1m_disk saturated_s (burst minute)" "$(value saturated_s $m)" 10
expect "1m_disk util_pct (mean of 100 and 5x5)" "$(value util_pct $m)" "$(python3 -c 'print((100 + 25) / 6)')"
expect "1m_disk await_ms_10s_max" "$(value await_ms_10s_max $m)" 250
expect "1m_disk interval_s (sum)" "$(value interval_s $m)" 60
expect "1m_disk in_flight (max of an integer)" "$(value in_flight $m)" 2
expect "1m_disk util_max_pct of a quiet minute" "$(value util_max_pct 2026-01-01T11:56:00Z)" 8
expect "1m_disk minute 11:59 (window start, last whole minute)" "$(value interval_s 2026-01-01T11:59:00Z)" 60
expect "1m_disk no row for the minute still open at now()" "$(value interval_s 2026-01-01T12:00:00Z)" "<0 rows>"

# --- 1 min, states: an MD array degraded for 20 s inside 11:58, then clean again ---------------
tags=host=ds01,array=md127,level=raid6
for ((t = now - 290; t <= now; t += 10)); do
  if [ $t -ge $((now - 110)) ] && [ $t -le $((now - 100)) ]; then s=degraded; red=1; deg=1; else s=clean; red=2; deg=0; fi
  ts=$(at $t)
  echo "md $tags state string $ts $s"
  echo "md $tags redundancy_left long $ts $red"
  echo "md $tags degraded long $ts $deg"
  echo "md $tags stalled boolean $ts false"
done | testdata >"$dir/md.flux"
run "$here/tasks/1m_md.flux" "$(at $now)" "$(cat "$dir/md.flux")"
m=2026-01-01T11:58:00Z
expect "1m_md state (last of the minute)" "$(value state $m array=md127 level=raid6)" clean
expect "1m_md redundancy_left (worst of the minute)" "$(value redundancy_left $m)" 1
expect "1m_md degraded (worst of the minute)" "$(value degraded $m)" 1
expect "1m_md stalled (last, boolean)" "$(value stalled $m)" false
expect "1m_md redundancy_left of a quiet minute" "$(value redundancy_left 2026-01-01T11:57:00Z)" 2

# --- 1 h: the 1 min rollup of 10:00–12:00, one burst minute at 11:17 ---------------------------
tags=host=ds01,device=sdq,kind=disk
for ((t = now - 7200; t < now; t += 60)); do
  if [ $t = $((now - 3600 + 17 * 60)) ]; then u=20.8; umax=100; u10=100; sat=10; else u=5; umax=8; u10=5; sat=0; fi
  ts=$(at $t)
  echo "disk $tags util_pct double $ts $u"
  echo "disk $tags util_max_pct double $ts $umax"
  echo "disk $tags util_pct_10s_max double $ts $u10"
  echo "disk $tags saturated_s double $ts $sat"
  echo "disk $tags interval_s double $ts 60"
done | testdata >"$dir/rp_1m.flux"
run "$here/tasks/1h_disk.flux" "$(at $now)" "$(cat "$dir/rp_1m.flux")"
h=2026-01-01T11:00:00Z
expect "1h_disk util_max_pct" "$(value util_max_pct $h host=ds01 device=sdq)" 100
expect "1h_disk util_pct_10s_max" "$(value util_pct_10s_max $h)" 100
expect "1h_disk saturated_s" "$(value saturated_s $h)" 10
expect "1h_disk interval_s" "$(value interval_s $h)" 3600
expect "1h_disk util_pct (hourly mean)" "$(value util_pct $h)" "$(python3 -c 'print((20.8 + 59 * 5) / 60)')"
expect "1h_disk util_max_pct of the hour before" "$(value util_max_pct 2026-01-01T10:00:00Z)" 8

echo "PASS: the 2.x tasks keep a 10 s burst through 1 min and 1 h, and states through 1 min, on flux v0.195.2"
