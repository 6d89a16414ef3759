#!/usr/bin/env bash
# Set up storwatch on InfluxDB 2.x with the `influx` v2 CLI: the buckets that stand for the 1.x
# retention policies of ../setup.influxql, the DBRP mappings that let the collector keep writing
# /write?db=storwatch and the dashboards keep querying "rp_1m"."disk" in InfluxQL, and one task per
# continuous query (tasks/*.flux, generated with setup.influxql by `cargo xtask gen`). Idempotent: an
# existing bucket gets its retention updated, an existing task (same name) its Flux replaced.
#
#   deploy/influxdb/v2/setup.sh [--org ORG] [--dry-run]
#
# The CLI's own configuration or environment says where and as whom: INFLUX_HOST, INFLUX_TOKEN
# (an all-access or operator token: it creates buckets, mappings and tasks), INFLUX_ORG or --org.
# Needs influx (2.x CLI) and python3. --dry-run prints the commands instead of running them.
#
#   bucket            retention  shard groups   1.x retention policy
#   storwatch/raw     14 d       1 d            raw (default)
#   storwatch/rp_1m   90 d       7 d            rp_1m
#   storwatch/rp_1h   1826 d     30 d           rp_1h
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
org=${INFLUX_ORG:-}
dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --org) org=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$org" ] || { echo "setup.sh: --org or INFLUX_ORG is required" >&2; exit 2; }

# the buckets: name, retention, shard group duration, 1.x retention policy name, default?
buckets=(
  "storwatch/raw 14d 1d raw default"
  "storwatch/rp_1m 90d 7d rp_1m -"
  "storwatch/rp_1h 1826d 30d rp_1h -"
)

run() {
  if [ "$dry" = 1 ]; then printf "%q " "$@"; echo; else "$@" >/dev/null; fi
}
# the value of KEY in the JSON objects on stdin whose "name" is NAME (one per line)
json_id() { # json_id NAME
  python3 -c '
import json, sys
data = json.load(sys.stdin)
for item in data if isinstance(data, list) else [data]:
    if item.get("name") == sys.argv[1]:
        print(item["id"])' "$1"
}

for b in "${buckets[@]}"; do
  read -r name retention shard rp default <<<"$b"
  id=""
  if [ "$dry" = 0 ]; then
    id=$(influx bucket list --org "$org" --name "$name" --json 2>/dev/null | json_id "$name" || true)
  fi
  if [ -n "$id" ]; then
    run influx bucket update --id "$id" --retention "$retention" --shard-group-duration "$shard"
  else
    run influx bucket create --org "$org" --name "$name" --retention "$retention" \
      --shard-group-duration "$shard"
    if [ "$dry" = 0 ]; then
      id=$(influx bucket list --org "$org" --name "$name" --json | json_id "$name")
    else
      id='<bucket-id>'
    fi
  fi
  # InfluxQL and the 1.x write API address storwatch.<rp>: map it to the bucket.
  mapped=""
  if [ "$dry" = 0 ]; then
    mapped=$(influx v1 dbrp list --org "$org" --db storwatch --rp "$rp" --json 2>/dev/null \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d) if isinstance(d, list) else 1)' \
      || echo 0)
  fi
  if [ "${mapped:-0}" = 0 ]; then
    extra=()
    if [ "$default" = default ]; then extra=(--default); fi
    run influx v1 dbrp create --org "$org" --db storwatch --rp "$rp" --bucket-id "$id" "${extra[@]}"
  fi
done

n=0
for f in "$here"/tasks/*.flux; do
  name=$(sed -n 's/^option task = {name: "\([^"]*\)".*/\1/p' "$f")
  [ -n "$name" ] || { echo "setup.sh: no task name in $f" >&2; exit 1; }
  id=""
  if [ "$dry" = 0 ]; then
    id=$(influx task list --org "$org" --json | json_id "$name" || true)
  fi
  if [ -n "$id" ]; then
    run influx task update --id "$id" --file "$f"
  else
    run influx task create --org "$org" --file "$f"
  fi
  n=$((n + 1))
done
echo "setup.sh: ${#buckets[@]} buckets and $n tasks for org $org"
