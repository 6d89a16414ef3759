#!/usr/bin/env bash
# VictoriaMetrics single node for the collector's remote-write tests (collector/tests/it/remote_write.rs),
# built from the Go module proxy like Telegraf:
#
#   scripts/victoriametrics-test.sh install   build target/victoriametrics/victoria-metrics when missing
#   scripts/victoriametrics-test.sh path      print where the binary is (built or not)
#
# The tests start it themselves, each on 127.0.0.1 with a port and a data directory of its own.
# Needs Go (scripts/test.sh installs nothing else for it); the build log is
# target/victoriametrics/build.log.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v1.151.0
dir=$PWD/target/victoriametrics
bin=$dir/victoria-metrics

case ${1:-} in
  install)
    if [ -x "$bin" ]; then exit 0; fi
    go_bin=$(command -v go || echo /usr/local/go/bin/go)
    if [ ! -x "$go_bin" ]; then
      echo "victoriametrics-test.sh: no Go toolchain, cannot build VictoriaMetrics" >&2
      exit 1
    fi
    mkdir -p "$dir"
    if ! GOBIN=$dir "$go_bin" install \
      "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@$version" >"$dir/build.log" 2>&1; then
      echo "VictoriaMetrics build failed:" >&2
      tail -20 "$dir/build.log" >&2
      exit 1
    fi
    ;;
  path) echo "$bin" ;;
  *)
    echo "usage: $0 install|path" >&2
    exit 2
    ;;
esac
