#!/usr/bin/env bash
# A throw-away InfluxDB 1.x server on 127.0.0.1 for tests and the quickstart.
#
#   scripts/influxd-test.sh install            apt-get install influxdb when influxd is missing
#   scripts/influxd-test.sh start DIR [PORT]   start influxd with data in DIR, HTTP on 127.0.0.1:PORT
#                                              (default 18086); waits until /ping answers
#   scripts/influxd-test.sh stop DIR           stop the server started for DIR, wait for it to exit
#
# STORWATCH_INFLUXD_OWNER=PID (start): the server is also stopped, within a second, when process
# PID ends — a test process killed before it could stop its server (an interrupted test run)
# leaves none behind on its port. Without it the server runs until `stop` (the quickstart's).
#
# The Debian package's own service is never used: each test gets its own directory and port, and
# nothing listens beyond loopback.
set -euo pipefail

cmd=${1:-}
influxd_bin() { command -v influxd || echo /usr/bin/influxd; }

install_influxdb() {
  if [ -x "$(influxd_bin)" ]; then return 0; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # policy-rc.d keeps the package's postinst from starting a system-wide influxd on 0.0.0.0:8086
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -q --no-install-recommends influxdb >/dev/null
  rm -f /usr/sbin/policy-rc.d
  # some package versions start it anyway under systemd-less containers: stop that one
  pkill -f '^/usr/bin/influxd -config /etc/influxdb/influxdb.conf' 2>/dev/null || true
}

start() {
  local dir=$1 port=${2:-18086}
  install_influxdb
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local rpc=$((port + 1))
  cat >"$dir/influxdb.conf" <<CONF
reporting-disabled = true
bind-address = "127.0.0.1:$rpc"
[meta]
  dir = "$dir/meta"
[data]
  dir = "$dir/data"
  wal-dir = "$dir/wal"
  query-log-enabled = false
  wal-fsync-delay = "0s"
[http]
  enabled = true
  bind-address = "127.0.0.1:$port"
  log-enabled = false
  max-body-size = 0
[monitor]
  store-enabled = false
[continuous_queries]
  enabled = true
  run-interval = "1s"
CONF
  if [ -f "$dir/influxd.pid" ] && kill -0 "$(cat "$dir/influxd.pid")" 2>/dev/null; then
    echo "influxd already running for $dir (pid $(cat "$dir/influxd.pid"))"
    return 0
  fi
  setsid "$(influxd_bin)" -config "$dir/influxdb.conf" >"$dir/influxd.log" 2>&1 </dev/null &
  echo $! >"$dir/influxd.pid"
  local owner=${STORWATCH_INFLUXD_OWNER:-}
  if [ -n "$owner" ]; then
    # Ends with the server (a `stop`) or stops it when the owner is gone. Both pids are told by
    # more than their number: the owner by its start time (a pid reused by another process is
    # not the owner), the server by its config file on its command line (unique to this DIR),
    # so that no other process is ever kept waiting on or signalled.
    setsid bash -c 'started() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
        s=${s##*) }; set -- $s; echo "${20}"; }
      since=$(started "$1")
      while [ -n "$since" ] && [ "$(started "$1")" = "$since" ] && kill -0 "$2" 2>/dev/null; do
        sleep 1
      done
      if grep -qF "$3" "/proc/$2/cmdline" 2>/dev/null; then kill "$2" 2>/dev/null; fi' \
      _ "$owner" "$!" "$dir/influxdb.conf" </dev/null >/dev/null 2>&1 &
  fi
  for _ in $(seq 1 200); do
    if curl -sf "http://127.0.0.1:$port/ping" >/dev/null 2>&1; then
      echo "influxd on 127.0.0.1:$port (pid $(cat "$dir/influxd.pid"), data $dir)"
      return 0
    fi
    if ! kill -0 "$(cat "$dir/influxd.pid")" 2>/dev/null; then
      echo "influxd exited; log:" >&2; tail -20 "$dir/influxd.log" >&2; return 1
    fi
    sleep 0.1
  done
  echo "influxd did not answer on 127.0.0.1:$port within 20 s" >&2
  return 1
}

stop() {
  local dir=$1 pid
  [ -f "$dir/influxd.pid" ] || return 0
  pid=$(cat "$dir/influxd.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/influxd.pid"
}

case $cmd in
  install) install_influxdb ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
