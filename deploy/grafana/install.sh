#!/usr/bin/env bash
# Installs storwatch's Grafana side: the datasource, the dashboard provider and the dashboards,
# and the alert rules with their runbook links pointing where the site publishes the runbooks.
# Works from the source tree (deploy/grafana/install.sh) and from the collector package
# (/usr/share/storwatch/grafana/install.sh). Restart grafana-server afterwards.
#
#   install.sh --runbook-base URL [--influx-url URL] [--policies FILE|example]
#              [--datasource influxdb|prometheus|both] [--prometheus-url URL]
#              [--alert-rules grafana|prometheus] [--prometheus-rules DIR]
#              [--provisioning DIR] [--dashboards DIR] [--systemd-dir DIR]
#
#   --runbook-base URL   where the runbooks (alerts/runbooks/*.md, packaged in
#                        /usr/share/storwatch/runbooks/) are published: each rule's runbook_url
#                        becomes URL/<rule>.md. Required: Grafana takes annotations verbatim, so
#                        the link has to be written into the rule file. file:///DIR is accepted
#                        for a single machine. (With --datasource prometheus and no
#                        --prometheus-rules no rule is installed and it is not needed.)
#   --influx-url URL     InfluxDB for the datasource, written as STORWATCH_INFLUX_URL into a
#                        grafana-server drop-in (DIR/grafana-server.service.d/storwatch.conf)
#   --policies FILE      a notification policy / contact point file to install with the rules
#                        (`example`: the shipped storwatch-policies.yaml, which replaces Grafana's
#                        policy tree and mails storage-oncall@example.org). Default: none.
#   --datasource WHICH   influxdb (default): the InfluxDB datasource, its dashboards and the
#                        Grafana-managed alert rules (InfluxQL). prometheus: the Prometheus
#                        datasource (uid storwatch-prometheus) and the PromQL dashboards
#                        ("<title> (Prometheus)") instead; the alerting rules are then
#                        Prometheus's own (alerts/prometheus/storwatch-rules.yml, see
#                        --prometheus-rules), and what an earlier run installed for InfluxDB
#                        (datasource, dashboards, rules) is removed. both: the two side by side.
#                        An explicit --datasource influxdb removes what an earlier run installed
#                        for Prometheus; a run without --datasource leaves it in place.
#   --alert-rules WHICH  the one set of alert rules of the installation (never both: each
#                        condition would fire twice, and Grafana's alert list would show each
#                        alert twice). grafana (the default with InfluxDB): Grafana's own rules
#                        (InfluxQL); with --datasource both the Prometheus datasource is installed
#                        with manageAlerts off, so Grafana does not list Prometheus's rules, and
#                        --prometheus-rules is refused. prometheus (the only choice with
#                        --datasource prometheus): Prometheus's rules, listed in Grafana through
#                        the Prometheus datasource (manageAlerts on); no Grafana rule is installed
#                        and what an earlier run installed of them is removed; --policies is
#                        refused (Prometheus's alerts go through its Alertmanager).
#   --prometheus-url URL Prometheus for its datasource, written as STORWATCH_PROMETHEUS_URL into
#                        a grafana-server drop-in (DIR/grafana-server.service.d/storwatch-prometheus.conf)
#   --prometheus-rules DIR  also writes Prometheus's rule file, DIR/storwatch-rules.yml, with the
#                        runbook links under --runbook-base (a Prometheus on this machine:
#                        /etc/prometheus/storwatch/rules, as deploy/prometheus/prometheus.yml loads it);
#                        reload Prometheus afterwards
#   --provisioning DIR   Grafana's provisioning directory (/etc/grafana/provisioning)
#   --dashboards DIR     where the dashboard JSON goes (/var/lib/grafana/dashboards/storwatch)
#   --systemd-dir DIR    /etc/systemd/system
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }

runbook_base='' influx_url='' policies='' datasource=influxdb datasource_given='' prometheus_url='' prometheus_rules='' alert_rules=''
prov=/etc/grafana/provisioning
dash=/var/lib/grafana/dashboards/storwatch
systemd_dir=/etc/systemd/system
while [ $# -gt 0 ]; do
  case $1 in
    --runbook-base) runbook_base=${2:-}; shift 2 ;;
    --influx-url) influx_url=${2:-}; shift 2 ;;
    --policies) policies=${2:-}; shift 2 ;;
    --datasource) datasource=${2:-}; datasource_given=1; shift 2 ;;
    --prometheus-url) prometheus_url=${2:-}; shift 2 ;;
    --prometheus-rules) prometheus_rules=${2:-}; shift 2 ;;
    --alert-rules) alert_rules=${2:-}; shift 2 ;;
    --provisioning) prov=${2:-}; shift 2 ;;
    --dashboards) dash=${2:-}; shift 2 ;;
    --systemd-dir) systemd_dir=${2:-}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (--help)" ;;
  esac
done
influx=0 prom=0
case $datasource in
  influxdb) influx=1 ;;
  prometheus) prom=1 ;;
  both) influx=1 prom=1 ;;
  *) die "--datasource $datasource: influxdb, prometheus or both" ;;
esac
[ "$influx" = 1 ] || [ -z "$influx_url" ] || die "--influx-url with --datasource prometheus: no InfluxDB datasource is installed (--datasource both?)"
case $alert_rules in
  '') if [ "$influx" = 1 ]; then alert_rules=grafana; else alert_rules=prometheus; fi ;;
  grafana) [ "$influx" = 1 ] || die "--alert-rules grafana with --datasource prometheus: Grafana's rules are InfluxQL and need the InfluxDB datasource (--datasource both)" ;;
  prometheus) ;;
  *) die "--alert-rules $alert_rules: grafana or prometheus" ;;
esac
# grafana_rules: Grafana's own rules are installed; otherwise Prometheus's are the installation's
grafana_rules=0
[ "$alert_rules" = prometheus ] || grafana_rules=1
[ "$grafana_rules" = 1 ] || [ -z "$policies" ] || die "--policies with --alert-rules prometheus (or --datasource prometheus): no Grafana alert rule is installed; Prometheus's alerts go through its Alertmanager"
[ "$grafana_rules" = 0 ] || [ -z "$prometheus_rules" ] || die "--prometheus-rules with Grafana's rules (--alert-rules grafana, the default with InfluxDB): Prometheus would evaluate the same conditions and every alert would fire twice; give --alert-rules prometheus to use Prometheus's rules instead"
[ "$prom" = 1 ] || [ -z "$prometheus_url" ] || die "--prometheus-url without --datasource prometheus or both"
case $prometheus_url in '' | http://?* | https://?*) ;; *) die "--prometheus-url $prometheus_url: not an http(s) URL" ;; esac
# the runbook links are written into every rule file installed
if [ "$grafana_rules" = 1 ] || [ -n "$prometheus_rules" ]; then
  [ -n "$runbook_base" ] || die "--runbook-base URL is required: where the site publishes the runbooks (e.g. https://wiki.example.org/storwatch/runbooks)"
fi
if [ -n "$runbook_base" ]; then
  case $runbook_base in
    http://?* | https://?*) ;;
    file:///*) echo "install.sh: runbook links under $runbook_base: browsers do not follow file:// links from Grafana's pages (they can be copied); publish the runbooks on a web server for the on-call" >&2 ;;
    *) die "--runbook-base $runbook_base: not an http(s) URL (Grafana shows runbook_url as a link), nor file:///path" ;;
  esac
  case $runbook_base in *'#'* | *'\'* | *'&'*) die "--runbook-base: '#', '\\' and '&' are not supported" ;; esac
  runbook_base=${runbook_base%/}
fi

# The files: the source tree's layout, or the package's (see collector/Cargo.toml).
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/../../alerts/storwatch-rules.yaml" ]; then
  top=$(cd "$here/../.." && pwd)
  provisioning_src=$here/provisioning
  dashboards_src=$top/dashboards
  prom_dashboards_src=$top/dashboards/prometheus
  rules_src=$top/alerts/storwatch-rules.yaml
  prom_rules_src=$top/alerts/prometheus/storwatch-rules.yml
  prom_config_src=$top/deploy/prometheus/prometheus.yml
  runbooks_src=$top/alerts/runbooks
else
  share=$(cd "$here/.." && pwd)
  provisioning_src=$here/provisioning
  dashboards_src=$here/dashboards
  prom_dashboards_src=$here/dashboards/prometheus
  rules_src=$here/rules/storwatch-rules.yaml
  prom_rules_src=$share/prometheus/storwatch-rules.yml
  prom_config_src=$share/prometheus/prometheus.yml
  runbooks_src=$share/runbooks
fi
need=("$provisioning_src/dashboards/storwatch.yaml")
[ "$influx" = 0 ] || need+=("$provisioning_src/datasources/storwatch.yaml")
[ "$grafana_rules" = 0 ] || need+=("$provisioning_src/alerting/storwatch-policies.yaml" "$rules_src")
[ "$prom" = 0 ] || need+=("$provisioning_src/datasources/storwatch-prometheus.yaml")
[ -z "$prometheus_rules" ] || need+=("$prom_rules_src")
for f in "${need[@]}"; do
  [ -f "$f" ] || die "$f missing"
done
[ "$influx" = 0 ] || ls "$dashboards_src"/*.json >/dev/null 2>&1 || die "no dashboards in $dashboards_src"
[ "$prom" = 0 ] || ls "$prom_dashboards_src"/*.json >/dev/null 2>&1 || die "no Prometheus dashboards in $prom_dashboards_src"
case $policies in
  '' | example) ;;
  *) [ -f "$policies" ] || die "--policies $policies: no such file" ;;
esac

# Every runbook a rule links to must exist: the link is only as good as the page behind it.
rule_files=()
[ "$grafana_rules" = 0 ] || rule_files+=("$rules_src")
[ -z "$prometheus_rules" ] || rule_files+=("$prom_rules_src")
for f in "${rule_files[@]}"; do
  missing=$(grep -o 'runbook_url: alerts/runbooks/[A-Za-z0-9._-]*' "$f" | sed 's#.*alerts/runbooks/##' |
    while read -r page; do [ -f "$runbooks_src/$page" ] || echo "$page"; done)
  [ -z "$missing" ] || die "runbooks missing in $runbooks_src: $missing"
done

# with_links SRC DEST: SRC with each runbook_url under the site's base, renamed into place
with_links() {
  sed "s#^\( *runbook_url: \)alerts/runbooks/#\1$runbook_base/#" "$1" >"$2.tmp"
  chmod 0644 "$2.tmp"
  mv "$2.tmp" "$2"
}

# A Prometheus dashboard is installed as <name>-prometheus.json beside the InfluxDB <name>.json.
prom_name() { local n=${1##*/}; echo "${n%.json}-prometheus.json"; }

install -d -m 0755 "$prov/datasources" "$prov/dashboards" "$dash"
sed "s#^\( *path: \).*#\1$dash#" "$provisioning_src/dashboards/storwatch.yaml" >"$prov/dashboards/storwatch.yaml.tmp"
chmod 0644 "$prov/dashboards/storwatch.yaml.tmp"
mv "$prov/dashboards/storwatch.yaml.tmp" "$prov/dashboards/storwatch.yaml"
removed=()
if [ "$grafana_rules" = 1 ]; then
  install -d -m 0755 "$prov/alerting"
  with_links "$rules_src" "$prov/alerting/storwatch-rules.yaml"
  case $policies in
    '') ;;
    example) install -m 0644 "$provisioning_src/alerting/storwatch-policies.yaml" "$prov/alerting/storwatch-policies.yaml" ;;
    *) install -m 0644 "$policies" "$prov/alerting/storwatch-policies.yaml" ;;
  esac
elif [ -f "$prov/alerting/storwatch-rules.yaml" ]; then
  # Prometheus's rules are the installation's now: Grafana's go (a policy file stays)
  rm -f "$prov/alerting/storwatch-rules.yaml"
  removed+=("$prov/alerting/storwatch-rules.yaml")
fi
if [ "$influx" = 1 ]; then
  install -m 0644 "$provisioning_src/datasources/storwatch.yaml" "$prov/datasources/storwatch.yaml"
  install -m 0644 "$dashboards_src"/*.json "$dash/"
  if [ -n "$influx_url" ]; then
    install -d -m 0755 "$systemd_dir/grafana-server.service.d"
    printf '[Service]\nEnvironment=STORWATCH_INFLUX_URL=%s\n' "$influx_url" \
      >"$systemd_dir/grafana-server.service.d/storwatch.conf"
  fi
else
  # what an earlier install put there for InfluxDB goes (its rules went above: Grafana
  # refuses to start on rules naming a datasource it does not have; the drop-in and a policy
  # file are left alone)
  for f in "$prov/datasources/storwatch.yaml"; do
    [ ! -f "$f" ] || { rm -f "$f"; removed+=("$f"); }
  done
  for f in "$dashboards_src"/*.json; do
    [ -f "$f" ] && [ -f "$dash/${f##*/}" ] || continue
    rm -f "$dash/${f##*/}"
    removed+=("$dash/${f##*/}")
  done
fi
if [ "$prom" = 1 ]; then
  # manageAlerts: whether Grafana's alert list shows (and edits) the rules Prometheus
  # evaluates; only when they are the installation's rules, or every alert is listed twice
  manage=true
  [ "$grafana_rules" = 0 ] || manage=false
  sed "s/^\( *manageAlerts: \).*/\1$manage/" "$provisioning_src/datasources/storwatch-prometheus.yaml" \
    >"$prov/datasources/storwatch-prometheus.yaml.tmp"
  chmod 0644 "$prov/datasources/storwatch-prometheus.yaml.tmp"
  mv "$prov/datasources/storwatch-prometheus.yaml.tmp" "$prov/datasources/storwatch-prometheus.yaml"
  for f in "$prom_dashboards_src"/*.json; do
    install -m 0644 "$f" "$dash/$(prom_name "$f")"
  done
  if [ -n "$prometheus_url" ]; then
    install -d -m 0755 "$systemd_dir/grafana-server.service.d"
    printf '[Service]\nEnvironment=STORWATCH_PROMETHEUS_URL=%s\n' "$prometheus_url" \
      >"$systemd_dir/grafana-server.service.d/storwatch-prometheus.conf"
  fi
elif [ -n "$datasource_given" ]; then
  # only when influxdb was asked for: a re-run without --datasource (an upgrade) keeps what an
  # earlier --datasource both installed
  [ ! -f "$prov/datasources/storwatch-prometheus.yaml" ] \
    || { rm -f "$prov/datasources/storwatch-prometheus.yaml"; removed+=("$prov/datasources/storwatch-prometheus.yaml"); }
  for f in "$prom_dashboards_src"/*.json; do
    [ -f "$f" ] && [ -f "$dash/$(prom_name "$f")" ] || continue
    rm -f "$dash/$(prom_name "$f")"
    removed+=("$dash/$(prom_name "$f")")
  done
fi
if [ -n "$prometheus_rules" ]; then
  install -d -m 0755 "$prometheus_rules"
  with_links "$prom_rules_src" "$prometheus_rules/storwatch-rules.yml"
fi

[ ${#removed[@]} -eq 0 ] || echo "removed what an earlier install put there for a datasource or rule set not chosen now: ${removed[*]}"
if [ "$influx" = 1 ]; then
  n_dash=$(ls "$dashboards_src"/*.json | wc -l)
  echo "installed: datasource, $n_dash dashboards in $dash"
  [ -n "$influx_url" ] || echo "grafana-server needs STORWATCH_INFLUX_URL in its environment (or rerun with --influx-url URL)"
fi
if [ "$grafana_rules" = 1 ]; then
  n_rules=$(grep -c '^  - uid: ' "$prov/alerting/storwatch-rules.yaml")
  echo "installed: $n_rules alert rules (runbooks at $runbook_base/), Grafana's own"
  [ -n "$policies" ] || echo "no notification policy installed: route the rules' severity label in Grafana, or rerun with --policies FILE"
fi
if [ "$prom" = 1 ]; then
  n_prom=$(ls "$prom_dashboards_src"/*.json | wc -l)
  echo "installed: Prometheus datasource (uid storwatch-prometheus), manageAlerts $manage, $n_prom Prometheus dashboards in $dash"
  [ -n "$prometheus_url" ] || echo "grafana-server needs STORWATCH_PROMETHEUS_URL in its environment (or rerun with --prometheus-url URL)"
  [ "$grafana_rules" = 0 ] || echo "alert rules: Grafana's; Prometheus must not load alerts/prometheus/storwatch-rules.yml as well, or every alert fires twice (--alert-rules prometheus to use those instead)"
fi
if [ -n "$prometheus_rules" ]; then
  n_alerts=$(grep -c '^  - alert: ' "$prometheus_rules/storwatch-rules.yml" || true)
  echo "installed: Prometheus rule file $prometheus_rules/storwatch-rules.yml ($n_alerts alerting rules, runbooks at $runbook_base/); load it with rule_files: in prometheus.yml (as $prom_config_src does), check it with promtool check rules, then reload Prometheus (SIGHUP)"
elif [ "$grafana_rules" = 0 ]; then
  echo "alert rules: Prometheus's, $prom_rules_src (runbook links relative to the repository: rerun with --prometheus-rules DIR to install them with links under --runbook-base), loaded with rule_files: in prometheus.yml as $prom_config_src does; Grafana lists them under the Prometheus datasource"
fi
if [ "$grafana_rules" = 1 ] || [ -n "$prometheus_rules" ]; then
  echo "publish $runbooks_src/*.md at $runbook_base/, then: systemctl daemon-reload && systemctl restart grafana-server"
else
  echo "then: systemctl daemon-reload && systemctl restart grafana-server"
fi
