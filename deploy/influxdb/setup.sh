#!/usr/bin/env bash
# Apply deploy/influxdb/setup.influxql to an InfluxDB 1.x server (1.6 or later; also 1.8 in the
# compose file). Idempotent: run it again after editing the file and the retention policies are
# altered to match and every continuous query is replaced.
#
#   deploy/influxdb/setup.sh [--url http://127.0.0.1:8086] [--db storwatch] [--file setup.influxql]
#                            [--dry-run]
#
# Credentials, when the server has auth enabled: INFLUX_USERNAME and INFLUX_PASSWORD (the names
# the influx CLI uses), sent as HTTP basic auth. Only curl is needed (no influx CLI).
# --db renames the database everywhere in the file. --dry-run prints the statements instead.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
url=http://127.0.0.1:8086
db=storwatch
file=$here/setup.influxql
dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --url) url=$2; shift 2 ;;
    --db) db=$2; shift 2 ;;
    --file) file=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $db in *[!A-Za-z0-9_-]*|'') echo "setup.sh: database name '$db' must be [A-Za-z0-9_-]+" >&2; exit 2 ;; esac

auth=()
if [ -n "${INFLUX_USERNAME:-}" ]; then auth=(-u "$INFLUX_USERNAME:${INFLUX_PASSWORD:-}"); fi

# One statement per record: "--" comment lines dropped, lines joined until a ";" ends one.
statements() {
  awk '
    /^[[:space:]]*--/ { next }
    /^[[:space:]]*$/  { next }
    { buf = buf (buf == "" ? "" : " ") $0 }
    /;[[:space:]]*$/  { sub(/;[[:space:]]*$/, "", buf); gsub(/[[:space:]]+/, " ", buf); print buf; buf = "" }
    END { if (buf != "") { print "setup.sh: statement without ;: " buf > "/dev/stderr"; exit 1 } }
  ' "$file" | sed "s/\"storwatch\"/\"$db\"/g"
}

# POST one statement to /query; prints the error InfluxDB returned, if any, and sets $?.
query() {
  local body err code
  # (no --fail-with-body: curl 7.74 in the influxdb:1.8 image lacks it)
  body=$(curl -sS -w '\n%{http_code}' "${auth[@]}" -XPOST "$url/query" --data-urlencode "q=$1" 2>&1) || {
    echo "$body"; return 1; }
  code=${body##*$'\n'}
  body=${body%$'\n'*}
  err=$(printf '%s' "$body" | sed -n 's/.*"error":"\([^"]*\)".*/\1/p')
  if [ -n "$err" ]; then echo "$err"; return 1; fi
  case $code in 2??) return 0 ;; *) echo "HTTP $code: $body"; return 1 ;; esac
}

if [ "$dry" = 1 ]; then statements; exit 0; fi

curl -sSf "${auth[@]}" "$url/ping" >/dev/null || { echo "setup.sh: no InfluxDB answering at $url" >&2; exit 1; }

n=0
while IFS= read -r st; do
  case $st in
    "CREATE RETENTION POLICY "*)
      if ! out=$(query "$st"); then
        if [[ $out == *"already exists"* ]]; then
          # same name, other settings: bring it to what the file says
          alter=${st/CREATE RETENTION POLICY/ALTER RETENTION POLICY}
          out=$(query "$alter") || { echo "setup.sh: $alter: $out" >&2; exit 1; }
        else
          echo "setup.sh: $st: $out" >&2; exit 1
        fi
      fi ;;
    "CREATE CONTINUOUS QUERY "*)
      name=$(printf '%s' "$st" | sed -n 's/^CREATE CONTINUOUS QUERY \("[^"]*"\) ON \("[^"]*"\).*/\1 ON \2/p')
      # replace: a continuous query cannot be altered; dropping one that is absent is an error
      # InfluxDB words as "continuous query not found", which is fine here
      if ! out=$(query "DROP CONTINUOUS QUERY $name") && [[ $out != *"not found"* ]]; then
        echo "setup.sh: DROP CONTINUOUS QUERY $name: $out" >&2; exit 1
      fi
      out=$(query "$st") || { echo "setup.sh: $st: $out" >&2; exit 1; } ;;
    *)
      out=$(query "$st") || { echo "setup.sh: $st: $out" >&2; exit 1; } ;;
  esac
  n=$((n + 1))
done < <(statements)
echo "setup.sh: $n statements applied to $url (database $db)"
