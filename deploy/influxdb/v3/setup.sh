#!/usr/bin/env bash
# Set up storwatch on InfluxDB 3 Core or Enterprise with the `influxdb3` CLI: a database per 1.x
# retention policy of ../setup.influxql (retention set at creation: Core cannot change it later),
# and the rollups as two schedule triggers of the Processing Engine plugin storwatch_rollups.py.
#
#   deploy/influxdb/v3/setup.sh --plugin-dir DIR [--dry-run]
#
# DIR is the server's --plugin-dir (INFLUXDB3_PLUGIN_DIR): the plugin is copied there, since a
# trigger names a file in it. Host and token come from INFLUXDB3_HOST_URL and INFLUXDB3_AUTH_TOKEN
# (an admin token), as for the CLI itself. An existing database is left as it is (its retention
# cannot change); an existing trigger is kept, so re-running after a plugin update only copies
# the file (the engine loads it at the next run). --dry-run prints the commands instead.
#
#   database          retention  filled by
#   storwatch         14 d       the collector (10 s reports)
#   storwatch/rp_1m   90 d       trigger storwatch_rollups_1m (every:1m, last 5 min)
#   storwatch/rp_1h   1826 d     trigger storwatch_rollups_1h (every:1h, last 2 h)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
plugin_dir=${INFLUXDB3_PLUGIN_DIR:-}
dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --plugin-dir) plugin_dir=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$plugin_dir" ] || { echo "setup.sh: --plugin-dir (the server's plugin directory) is required" >&2; exit 2; }

run() {
  if [ "$dry" = 1 ]; then printf "%q " "$@"; echo; else "$@"; fi
}
# true when the CLI's error says the thing already exists
exists() { grep -qi 'already exists'; }

run cp "$here/storwatch_rollups.py" "$plugin_dir/storwatch_rollups.py"

for db in "storwatch 14d" "storwatch/rp_1m 90d" "storwatch/rp_1h 1826d"; do
  read -r name retention <<<"$db"
  if [ "$dry" = 1 ]; then
    run influxdb3 create database --retention-period "$retention" "$name"
  elif ! out=$(influxdb3 create database --retention-period "$retention" "$name" 2>&1); then
    exists <<<"$out" || { echo "setup.sh: database $name: $out" >&2; exit 1; }
  fi
done

for t in "storwatch 1m" "storwatch/rp_1m 1h"; do
  read -r source level <<<"$t"
  args=(influxdb3 create trigger --database "$source" --plugin-filename storwatch_rollups.py
    --trigger-spec "every:$level" --trigger-arguments "level=$level" "storwatch_rollups_$level")
  if [ "$dry" = 1 ]; then
    run "${args[@]}"
  elif ! out=$("${args[@]}" 2>&1); then
    exists <<<"$out" || { echo "setup.sh: trigger storwatch_rollups_$level: $out" >&2; exit 1; }
  fi
done
echo "setup.sh: 3 databases, 2 triggers"
