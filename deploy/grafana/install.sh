#!/usr/bin/env bash
# Installs storwatch's Grafana side: the InfluxDB datasource, the dashboard provider and the
# dashboards, and the alert rules with their runbook links pointing where the site publishes the
# runbooks. Works from the source tree (deploy/grafana/install.sh) and from the collector
# package (/usr/share/storwatch/grafana/install.sh). Restart grafana-server afterwards.
#
#   install.sh --runbook-base URL [--influx-url URL] [--policies FILE|example]
#              [--provisioning DIR] [--dashboards DIR] [--systemd-dir DIR]
#
#   --runbook-base URL   where the runbooks (alerts/runbooks/*.md, packaged in
#                        /usr/share/storwatch/runbooks/) are published: each rule's runbook_url
#                        becomes URL/<rule>.md. Required: Grafana takes annotations verbatim, so
#                        the link has to be written into the rule file. file:///DIR is accepted
#                        for a single machine.
#   --influx-url URL     InfluxDB for the datasource, written as STORWATCH_INFLUX_URL into a
#                        grafana-server drop-in (DIR/grafana-server.service.d/storwatch.conf)
#   --policies FILE      a notification policy / contact point file to install with the rules
#                        (`example`: the shipped storwatch-policies.yaml, which replaces Grafana's
#                        policy tree and mails storage-oncall@example.org). Default: none.
#   --provisioning DIR   Grafana's provisioning directory (/etc/grafana/provisioning)
#   --dashboards DIR     where the dashboard JSON goes (/var/lib/grafana/dashboards/storwatch)
#   --systemd-dir DIR    /etc/systemd/system
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }

runbook_base='' influx_url='' policies=''
prov=/etc/grafana/provisioning
dash=/var/lib/grafana/dashboards/storwatch
systemd_dir=/etc/systemd/system
while [ $# -gt 0 ]; do
  case $1 in
    --runbook-base) runbook_base=${2:-}; shift 2 ;;
    --influx-url) influx_url=${2:-}; shift 2 ;;
    --policies) policies=${2:-}; shift 2 ;;
    --provisioning) prov=${2:-}; shift 2 ;;
    --dashboards) dash=${2:-}; shift 2 ;;
    --systemd-dir) systemd_dir=${2:-}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (--help)" ;;
  esac
done
[ -n "$runbook_base" ] || die "--runbook-base URL is required: where the site publishes the runbooks (e.g. https://wiki.example.org/storwatch/runbooks)"
case $runbook_base in
  http://?* | https://?*) ;;
  file:///*) echo "install.sh: runbook links under $runbook_base: browsers do not follow file:// links from Grafana's pages (they can be copied); publish the runbooks on a web server for the on-call" >&2 ;;
  *) die "--runbook-base $runbook_base: not an http(s) URL (Grafana shows runbook_url as a link), nor file:///path" ;;
esac
case $runbook_base in *'#'* | *'\'* | *'&'*) die "--runbook-base: '#', '\\' and '&' are not supported" ;; esac
runbook_base=${runbook_base%/}

# The files: the source tree's layout, or the package's (see collector/Cargo.toml).
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/../../alerts/storwatch-rules.yaml" ]; then
  top=$(cd "$here/../.." && pwd)
  provisioning_src=$here/provisioning
  dashboards_src=$top/dashboards
  rules_src=$top/alerts/storwatch-rules.yaml
  runbooks_src=$top/alerts/runbooks
else
  share=$(cd "$here/.." && pwd)
  provisioning_src=$here/provisioning
  dashboards_src=$here/dashboards
  rules_src=$here/rules/storwatch-rules.yaml
  runbooks_src=$share/runbooks
fi
for f in "$provisioning_src/datasources/storwatch.yaml" "$provisioning_src/dashboards/storwatch.yaml" \
  "$provisioning_src/alerting/storwatch-policies.yaml" "$rules_src"; do
  [ -f "$f" ] || die "$f missing"
done
ls "$dashboards_src"/*.json >/dev/null 2>&1 || die "no dashboards in $dashboards_src"
case $policies in
  '' | example) ;;
  *) [ -f "$policies" ] || die "--policies $policies: no such file" ;;
esac

# Every runbook a rule links to must exist: the link is only as good as the page behind it.
missing=$(grep -o 'runbook_url: alerts/runbooks/[A-Za-z0-9._-]*' "$rules_src" | sed 's#.*alerts/runbooks/##' |
  while read -r page; do [ -f "$runbooks_src/$page" ] || echo "$page"; done)
[ -z "$missing" ] || die "runbooks missing in $runbooks_src: $missing"

install -d -m 0755 "$prov/datasources" "$prov/dashboards" "$prov/alerting" "$dash"
install -m 0644 "$provisioning_src/datasources/storwatch.yaml" "$prov/datasources/storwatch.yaml"
sed "s#^\( *path: \).*#\1$dash#" "$provisioning_src/dashboards/storwatch.yaml" >"$prov/dashboards/storwatch.yaml.tmp"
chmod 0644 "$prov/dashboards/storwatch.yaml.tmp"
mv "$prov/dashboards/storwatch.yaml.tmp" "$prov/dashboards/storwatch.yaml"
install -m 0644 "$dashboards_src"/*.json "$dash/"
sed "s#^\( *runbook_url: \)alerts/runbooks/#\1$runbook_base/#" "$rules_src" >"$prov/alerting/storwatch-rules.yaml.tmp"
chmod 0644 "$prov/alerting/storwatch-rules.yaml.tmp"
mv "$prov/alerting/storwatch-rules.yaml.tmp" "$prov/alerting/storwatch-rules.yaml"
case $policies in
  '') ;;
  example) install -m 0644 "$provisioning_src/alerting/storwatch-policies.yaml" "$prov/alerting/storwatch-policies.yaml" ;;
  *) install -m 0644 "$policies" "$prov/alerting/storwatch-policies.yaml" ;;
esac
if [ -n "$influx_url" ]; then
  install -d -m 0755 "$systemd_dir/grafana-server.service.d"
  printf '[Service]\nEnvironment=STORWATCH_INFLUX_URL=%s\n' "$influx_url" \
    >"$systemd_dir/grafana-server.service.d/storwatch.conf"
fi

n_dash=$(ls "$dashboards_src"/*.json | wc -l)
n_rules=$(grep -c '^  - uid: ' "$prov/alerting/storwatch-rules.yaml")
echo "installed: datasource, $n_dash dashboards in $dash, $n_rules alert rules (runbooks at $runbook_base/)"
[ -n "$policies" ] || echo "no notification policy installed: route the rules' severity label in Grafana, or rerun with --policies FILE"
[ -n "$influx_url" ] || echo "grafana-server needs STORWATCH_INFLUX_URL in its environment (or rerun with --influx-url URL)"
echo "publish $runbooks_src/*.md at $runbook_base/, then: systemctl daemon-reload && systemctl restart grafana-server"
