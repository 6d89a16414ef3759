#!/usr/bin/env bash
# Checks storwatch's Grafana side on a real Grafana, as a site would install and look at it.
# Opt-in: scripts/test.sh never runs it (it needs a Grafana server binary; see docs/deploy.md,
# "Grafana versions verified").
#
#   scripts/grafana-check.sh --grafana PATH [--homepath DIR] [--bin DIR] [--fill SECONDS]
#                            [--hosts-per-scenario N] [--dir DIR] [--keep]
#
#   --grafana PATH    the Grafana server binary: `grafana` (run as `grafana server`) or, before
#                     Grafana 10, `grafana-server`
#   --homepath DIR    Grafana's home: the directory holding conf/defaults.ini and public/
#                     (/usr/share/grafana for the packages, the top of a source tree). Default:
#                     the binary's directory or its parent, whichever holds conf/defaults.ini
#   --bin DIR         storwatch binaries already built (storwatch-agent, -collector, -sim);
#                     default: the quickstart builds the release ones
#   --fill SECONDS    how long the fleet reports before the dashboards are queried (default 120)
#   --hosts-per-scenario N   the quickstart fleet's size (default 1: one host per scenario)
#   --dir DIR         scratch directory (default: a new one under ${TMPDIR:-/tmp}); removed at
#                     the end unless --keep
#   --keep            keep the scratch directory (Grafana's log, database, the fleet's data)
#
# What it does, everything on 127.0.0.1:
#  1. the quickstart fleet (scripts/quickstart.sh with QUICKSTART_DIR in the scratch directory):
#     InfluxDB set up by deploy/influxdb/setup.sh, the collector, an agent per simulated host;
#  2. deploy/grafana/install.sh --policies example into a scratch Grafana home (provisioning,
#     dashboards, the grafana-server drop-in whose STORWATCH_INFLUX_URL Grafana is given);
#  3. Grafana with its data, logs and plugins in the scratch directory, no outgoing calls
#     (update checks, usage reports, plugin preinstall and news off), admin password random;
#  4. over Grafana's HTTP API: /api/health; the datasource storwatch-influxdb and its health;
#     every dashboards/*.json provisioned in the folder storwatch; every alert rule of
#     alerts/storwatch-rules.yaml provisioned and, once each group has been evaluated twice, its
#     health (none `error`) from Grafana's own evaluation; the contact point and the
#     notification policy; every panel and annotation query sent through /api/ds/query with the
#     dashboard's variables expanded as Grafana's frontend does on a fresh load (each "All" to
#     its allValue or the regex of all values, single-value variables to their first value);
#     no error in Grafana's log from provisioning;
#  5. when dashboards/prometheus/ exists: the same for the Prometheus dashboards on a second
#     Grafana (install.sh --datasource prometheus) against the Prometheus that
#     `scripts/quickstart.sh start --prometheus` runs; skipped with a message otherwise.
# Prints a summary table; exits 1 when a check fails, 2 when the check cannot run (no binary, no
# Grafana home, no python3 with yaml, the fleet or Grafana does not start).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

die() { echo "grafana-check: $*" >&2; exit 2; }
say() { echo "grafana-check: $*"; }

grafana='' homepath='' bin='' fill=120 per_scenario=1 scratch='' keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --grafana) grafana=${2:-}; shift 2 ;;
    --homepath) homepath=${2:-}; shift 2 ;;
    --bin) bin=${2:-}; shift 2 ;;
    --fill) fill=${2:-}; shift 2 ;;
    --hosts-per-scenario) per_scenario=${2:-}; shift 2 ;;
    --dir) scratch=${2:-}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (--help)" ;;
  esac
done

# ---------------------------------------------------------------- prerequisites

[ -n "$grafana" ] || die "--grafana PATH is required: the Grafana server binary to check (--help)"
[ -x "$grafana" ] || die "--grafana $grafana: not an executable file"
grafana=$(cd "$(dirname "$grafana")" && pwd)/$(basename "$grafana")
if [ -z "$homepath" ]; then
  for d in "$(dirname "$grafana")" "$(dirname "$(dirname "$grafana")")"; do
    [ -f "$d/conf/defaults.ini" ] && { homepath=$d; break; }
  done
  [ -n "$homepath" ] || die "no conf/defaults.ini beside $grafana or in its parent: give --homepath DIR (Grafana's home, holding conf/ and public/)"
fi
[ -f "$homepath/conf/defaults.ini" ] || die "--homepath $homepath: no conf/defaults.ini there"
[ -d "$homepath/public" ] || die "--homepath $homepath: no public/ there (Grafana reads its core plugins' plugin.json from it)"
case $fill in '' | *[!0-9]*) die "--fill wants seconds" ;; esac
case $per_scenario in '' | *[!0-9]* | 0) die "--hosts-per-scenario wants a number >= 1" ;; esac
for c in curl python3; do command -v "$c" >/dev/null || die "$c is needed"; done
python3 -c 'import yaml' 2>/dev/null || die "python3 cannot import yaml (apt-get install python3-yaml)"
if [ -n "$bin" ]; then
  bin=$(cd "$bin" && pwd)
  for b in storwatch-agent storwatch-collector storwatch-sim; do
    [ -x "$bin/$b" ] || die "--bin $bin: no $b there"
  done
fi

# `grafana server` since Grafana 9.2 (the `grafana` binary), `grafana-server` before and beside it
case $(basename "$grafana") in
  grafana-server*) gf=("$grafana") ;;
  *) gf=("$grafana" server) ;;
esac
version=$("$grafana" -v 2>&1 | head -1) || die "$grafana -v failed: $version"
say "Grafana: $version ($grafana, home $homepath)"

if [ -z "$scratch" ]; then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/storwatch-grafana-check.XXXXXX")
else
  mkdir -p "$scratch"
  scratch=$(cd "$scratch" && pwd)
fi
qs=$scratch/quickstart
grafana_pid=''

stop_grafana() {
  [ -n "$grafana_pid" ] || return 0
  kill -TERM "$grafana_pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$grafana_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$grafana_pid" 2>/dev/null || true
  wait "$grafana_pid" 2>/dev/null || true
  grafana_pid=''
}
cleanup() {
  local rc=$?
  stop_grafana
  [ -d "$qs" ] && QUICKSTART_DIR=$qs scripts/quickstart.sh stop >/dev/null 2>&1 || true
  if [ "$keep" = 1 ] || [ "$rc" != 0 ]; then
    echo "grafana-check: logs and data kept in $scratch"
  else
    rm -rf "$scratch"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p=$1
  while port_taken "$p"; do p=$((p + 1)); done
  echo "$p"
}

# ---------------------------------------------------------------- the fleet

# wants_prometheus: the Prometheus dashboards exist and the tools to check them do
prom_skip=''
if [ ! -d dashboards/prometheus ] || ! ls dashboards/prometheus/*.json >/dev/null 2>&1; then
  prom_skip="no dashboards/prometheus/*.json in this tree"
elif ! grep -q -- '--prometheus' scripts/quickstart.sh; then
  prom_skip="scripts/quickstart.sh has no --prometheus (it starts the Prometheus these dashboards read)"
elif ! grep -q -- '--datasource' deploy/grafana/install.sh; then
  prom_skip="deploy/grafana/install.sh has no --datasource prometheus"
fi
qs_args=(start --hosts-per-scenario "$per_scenario")
[ -n "$prom_skip" ] || qs_args+=(--prometheus)

say "starting the quickstart fleet in $qs"
env QUICKSTART_DIR="$qs" ${bin:+QUICKSTART_BIN="$bin"} scripts/quickstart.sh "${qs_args[@]}" \
  >"$scratch/quickstart-start.log" 2>&1 ||
  { tail -30 "$scratch/quickstart-start.log" >&2; die "scripts/quickstart.sh start failed"; }
[ -f "$qs/ports.env" ] || die "the quickstart wrote no $qs/ports.env"
# shellcheck disable=SC1091
. "$qs/ports.env"
[ -n "${INFLUX_PORT:-}" ] || die "no INFLUX_PORT in $qs/ports.env"
fleet_started=$SECONDS

# ---------------------------------------------------------------- Grafana

# install_grafana_side NAME ARGS...: install.sh into $scratch/NAME (provisioning, dashboards,
# systemd drop-in) with ARGS added
install_grafana_side() {
  local home=$scratch/$1; shift
  mkdir -p "$home"
  # the runbook pages are not served here: Grafana only shows the links
  deploy/grafana/install.sh --runbook-base http://127.0.0.1/storwatch-runbooks \
    --provisioning "$home/provisioning" --dashboards "$home/dashboards" \
    --systemd-dir "$home/systemd" "$@" >"$home/install.log" 2>&1 ||
    { cat "$home/install.log" >&2; die "deploy/grafana/install.sh failed"; }
  # the directories a Grafana package ships empty, so that Grafana has nothing to complain of
  mkdir -p "$home/provisioning/plugins" "$home/provisioning/notifiers" "$home/provisioning/alerting" \
    "$home/provisioning/access-control" "$home/data" "$home/logs" "$home/plugins"
  sed 's/^/  /' "$home/install.log"
}

# dropin_env HOME VAR: the value the installed grafana-server drop-ins give VAR (install.sh
# writes storwatch.conf for InfluxDB and storwatch-prometheus.conf for Prometheus: either may be
# missing), empty when none does
dropin_env() {
  local f
  for f in "$1"/systemd/grafana-server.service.d/*.conf; do
    [ -f "$f" ] || continue
    sed -n "s/^Environment=$2=//p" "$f"
  done | tail -1
}

# start_grafana HOME: Grafana on a free port with HOME's provisioning; sets grafana_url
start_grafana() {
  local home=$1 port
  port=$(free_port 13000)
  admin_password=$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')
  cat >"$home/grafana.ini" <<INI
[paths]
data = $home/data
logs = $home/logs
plugins = $home/plugins
provisioning = $home/provisioning
[server]
http_addr = 127.0.0.1
http_port = $port
[security]
admin_user = admin
admin_password = $admin_password
[analytics]
reporting_enabled = false
check_for_updates = false
check_for_plugin_updates = false
feedback_links_enabled = false
[news]
news_feed_enabled = false
[plugins]
preinstall_disabled = true
[snapshots]
external_enabled = false
[log]
mode = file
level = info
[unified_alerting]
enabled = true
INI
  local influx_env prom_env
  influx_env=$(dropin_env "$home" STORWATCH_INFLUX_URL)
  prom_env=$(dropin_env "$home" STORWATCH_PROMETHEUS_URL)
  env ${influx_env:+STORWATCH_INFLUX_URL="$influx_env"} ${prom_env:+STORWATCH_PROMETHEUS_URL="$prom_env"} \
    "${gf[@]}" --homepath "$homepath" --config "$home/grafana.ini" >"$home/grafana.out" 2>&1 &
  grafana_pid=$!
  grafana_url=http://127.0.0.1:$port
  grafana_started=$(date -u +%s)
  # the first start migrates a new database: a minute on a slow machine
  for _ in $(seq 1 600); do
    curl -sf "$grafana_url/api/health" >/dev/null 2>&1 && break
    kill -0 "$grafana_pid" 2>/dev/null || { tail -30 "$home/grafana.out" >&2; die "Grafana exited (log: $home/logs/grafana.log)"; }
    sleep 0.5
  done
  curl -sf "$grafana_url/api/health" >/dev/null || die "Grafana does not answer on $grafana_url (log: $home/logs/grafana.log)"
  say "Grafana answers on $grafana_url"
}

wait_fill() {
  local left=$((fill - (SECONDS - fleet_started)))
  if [ "$left" -gt 0 ]; then
    say "letting the fleet report for $left s more (--fill $fill)"
    sleep "$left"
  fi
}

# The checks, over Grafana's HTTP API as the admin user. Arguments: GRAFANA_URL ADMIN_PASSWORD
# HOME STARTED(epoch s) DS_TYPE DS_UID DS_URL RULES_YAML|- POLICIES_YAML|- DASHBOARD.json...
IFS= read -r -d '' checker <<'PY' || true
import base64, datetime, json, re, sys, time, urllib.error, urllib.parse, urllib.request
import yaml

(url, password, home, started, ds_type, ds_uid, ds_url, rules_file, policies_file,
 *dashboard_files) = sys.argv[1:]
started = int(started)
auth = "Basic " + base64.b64encode(f"admin:{password}".encode()).decode()
rows = []   # (check, result, detail)
failed = False


def record(check, ok, detail=""):
    global failed
    rows.append((check, "ok" if ok else "FAIL", detail))
    if not ok:
        failed = True


def api(method, path, body=None, timeout=60):
    """(HTTP status, decoded JSON or text) of Grafana's answer."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Authorization": auth, "Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, TimeoutError) as e:
        return 0, str(e)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


# ---- health and datasource
st, health = api("GET", "/api/health")
record("/api/health", st == 200 and isinstance(health, dict) and health.get("database") == "ok",
       f"version {health.get('version')} commit {health.get('commit')}" if isinstance(health, dict) else str(health)[:200])

st, ds = api("GET", f"/api/datasources/uid/{ds_uid}")
ok = st == 200 and isinstance(ds, dict) and ds.get("type") == ds_type and ds.get("url") == ds_url
record(f"datasource {ds_uid} provisioned", ok,
       f"type {ds.get('type')}, url {ds.get('url')}" if isinstance(ds, dict) else f"HTTP {st}: {str(ds)[:200]}")
st, h = api("GET", f"/api/datasources/uid/{ds_uid}/health")
if st == 404 and isinstance(ds, dict) and ds.get("id") is not None:
    st, h = api("GET", f"/api/datasources/{ds['id']}/health")
record(f"datasource {ds_uid} health", st == 200 and isinstance(h, dict) and h.get("status") == "OK",
       (h.get("message", "") if isinstance(h, dict) else str(h))[:200])

# ---- dashboards
dashboards = []
for f in dashboard_files:
    with open(f) as fh:
        dashboards.append((f, json.load(fh)))
st, found = api("GET", "/api/search?type=dash-db&limit=5000")
found_uids = {d.get("uid"): d for d in found} if isinstance(found, list) else {}
for f, d in dashboards:
    uid = d["uid"]
    st, got = api("GET", f"/api/dashboards/uid/{uid}")
    meta = got.get("meta", {}) if isinstance(got, dict) else {}
    ok = (st == 200 and uid in found_uids and meta.get("provisioned") is True
          and meta.get("folderTitle") == "storwatch"
          and got["dashboard"].get("title") == d["title"])
    record(f"dashboard {uid}", ok,
           f"folder {meta.get('folderTitle')}, provisioned {meta.get('provisioned')}" if st == 200
           else f"HTTP {st}: {str(got)[:200]}")


# ---- panel and annotation queries, variables expanded as the frontend does on a fresh load
def frames_rows(result):
    """(non-null values outside the time fields, the values of a metadata query) of a
    /api/ds/query result. A metadata query's values are its field `value` (SHOW TAG VALUES
    answers key, value), else its first field, as the InfluxDB datasource's frontend takes them."""
    n, meta = 0, None
    for fr in result.get("frames") or []:
        fields = fr.get("schema", {}).get("fields", [])
        values = fr.get("data", {}).get("values", [])
        for i, fl in enumerate(fields):
            if i < len(values) and fl.get("type") != "time":
                n += sum(v is not None for v in values[i])
        if meta is None and values:
            names = [fl.get("name") for fl in fields]
            k = names.index("value") if "value" in names else 0
            meta = [str(v) for v in values[k] if v is not None] if k < len(values) else []
    return n, meta or []


def ds_query(q, time_from, time_to, interval_ms, result_format="time_series"):
    target = {"refId": "A", "datasource": {"type": ds_type, "uid": ds_uid},
              "intervalMs": interval_ms, "maxDataPoints": 1000}
    if ds_type == "influxdb":
        target.update(query=q, rawQuery=True, resultFormat=result_format)
    else:
        target.update(expr=q, range=True, instant=False)
    st, r = api("POST", "/api/ds/query", {"from": time_from, "to": time_to, "queries": [target]})
    res = r.get("results", {}).get("A", {}) if isinstance(r, dict) else {}
    err = res.get("error") or (r.get("message") if isinstance(r, dict) and st != 200 else None)
    if st != 200 or err:
        return None, f"HTTP {st}: {err or str(r)[:300]}"
    return res, None


def regex_escape(v):
    return re.sub(r"([\\/^$*+?.()|\[\]{}])", r"\\\1", v)


def fmt(values, is_all, all_value, form):
    """A variable's text in a query, as Grafana's InfluxDB / Prometheus datasources write it."""
    if is_all and all_value is not None:
        return all_value
    if form == "raw":
        return ",".join(values)
    if form == "csv":
        return ",".join(values)
    if form == "pipe":
        return "|".join(values)
    # the datasources' default for multi-value (and All) variables: a regex alternation
    if len(values) == 1 and not is_all:
        return regex_escape(values[0]) if ds_type == "influxdb" else values[0]
    esc = [regex_escape(v) for v in values]
    return "(" + "|".join(esc) + ")"


VAR = re.compile(r"\$(\w+)|\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)\]\]")


def expand(q, variables):
    def sub(m):
        name = m.group(1) or m.group(2) or m.group(4)
        if name not in variables:
            return m.group(0)  # $timeFilter, $__interval …: Grafana's backend expands them
        values, is_all, all_value, multi = variables[name]
        form = m.group(3) or ("regex" if multi or is_all else "raw")
        if not multi and not is_all and form == "regex":
            form = "raw"
        return fmt(values, is_all, all_value, form)
    return VAR.sub(sub, q)


def label_values(q):
    """label_values(...) of a Prometheus variable, through the datasource's resource API."""
    m = re.fullmatch(r"\s*label_values\(\s*(?:(.+?)\s*,\s*)?(\w+)\s*\)\s*", q)
    if not m:
        return None, f"variable query not understood: {q}"
    params = [("match[]", m.group(1))] if m.group(1) else []
    path = (f"/api/datasources/uid/{ds_uid}/resources/api/v1/label/{m.group(2)}/values"
            + ("?" + urllib.parse.urlencode(params) if params else ""))
    st, r = api("GET", path)
    if st != 200 or not isinstance(r, dict):
        return None, f"HTTP {st}: {str(r)[:300]}"
    return r.get("data", []), None


def sort_values(values, sort):
    if sort in (1, 2):
        values = sorted(values)
    elif sort in (3, 4):
        def num(v):
            m = re.search(r"-?\d+(\.\d+)?", v)
            return float(m.group(0)) if m else float("inf")
        values = sorted(values, key=num)
    elif sort in (5, 6):
        values = sorted(values, key=str.lower)
    if sort in (2, 4, 6):
        values.reverse()
    return values


def resolve(d, time_from, time_to, override=None):
    """The dashboard's variables as a fresh load resolves them, in order: (variables, the values
    each query variable lists, findings).
    `override` = (name, value) picks that value of a single-value variable instead of its first."""
    variables, listed, findings = {}, {}, []
    for v in d.get("templating", {}).get("list", []):
        name = v["name"]
        if v["type"] == "datasource":
            variables[name] = ([ds_uid], False, None, False)
            continue
        if v["type"] in ("custom", "constant", "textbox", "interval"):
            cur = v.get("current", {}).get("value", v.get("query", ""))
            variables[name] = (cur if isinstance(cur, list) else [cur], False, None, False)
            continue
        if v["type"] != "query":
            continue
        q = v.get("query")
        q = expand(q if isinstance(q, str) else (q or {}).get("query", ""), variables)
        if ds_type == "influxdb":
            res, err = ds_query(q, time_from, time_to, 10000, "table")
            values = frames_rows(res)[1] if res is not None else []
        else:
            values, err = label_values(q)
            values = values or []
        if v.get("regex"):
            rx = re.compile(v["regex"].strip("/"))
            values = [(m.group(1) if m.groups() else m.group(0)) for x in values if (m := rx.search(x))]
        values = sort_values(list(dict.fromkeys(values)), v.get("sort", 0))
        findings.append((name, err, len(values)))
        listed[name] = values
        include_all, multi = bool(v.get("includeAll")), bool(v.get("multi"))
        if include_all:
            variables[name] = (values, True, v.get("allValue"), multi)
        elif override and override[0] == name:
            variables[name] = ([override[1]], False, None, multi)
        else:
            variables[name] = (values[:1], False, None, multi)
    return variables, listed, findings


# Each dashboard is loaded once per value of its first single-value variable (the host of the
# node dashboards): a panel has data when it shows something for some host, and fails when
# Grafana answers an error for any.
n_panels = n_panel_data = n_ann = n_ann_data = n_loads = 0
empty = []
for f, d in dashboards:
    uid = d["uid"]
    t = d.get("time", {})
    time_from, time_to = t.get("from", "now-6h"), t.get("to", "now")
    variables, listed, findings = resolve(d, time_from, time_to)
    for name, err, n in findings:
        record(f"{uid}: variable ${name}", err is None, err or f"{n} values on a fresh load")
    single = next((v["name"] for v in d.get("templating", {}).get("list", [])
                   if v["type"] == "query" and not v.get("includeAll") and not v.get("multi")), None)
    loads = [variables]
    if single:
        loads = []
        for value in listed[single][:100]:
            vars_v, _, findings_v = resolve(d, time_from, time_to, (single, value))
            for name, err, n in findings_v:
                if err:
                    record(f"{uid}: variable ${name} with ${single}={value}", False, err)
            loads.append(vars_v)
        loads = loads or [variables]
    n_loads += len(loads)
    queries = []
    for a in d.get("annotations", {}).get("list", []):
        q = a.get("query") if ds_type == "influxdb" else a.get("expr")
        if isinstance(q, str) and a.get("datasource", {}).get("type") == ds_type:
            queries.append((f"annotation {a.get('name')!r}", q, "table", 10000, False))
    stack = list(d.get("panels", []))
    while stack:
        p = stack.pop(0)
        stack.extend(p.get("panels", []))
        interval = p.get("interval") or "10s"
        m = re.fullmatch(r"(\d+)(ms|s|m|h)", interval.replace(">", ""))
        interval_ms = int(m.group(1)) * {"ms": 1, "s": 1000, "m": 60000, "h": 3600000}[m.group(2)] if m else 10000
        for tg in p.get("targets", []):
            q = tg.get("query") if ds_type == "influxdb" else tg.get("expr")
            if not isinstance(q, str):
                continue
            queries.append((f"panel {p.get('title')!r} {tg.get('refId')}", q,
                            tg.get("resultFormat", "time_series"), interval_ms, True))
    for what, q, rf, interval_ms, panel in queries:
        errors, with_data = {}, []
        for variables in loads:
            res, err = ds_query(expand(q, variables), time_from, time_to, interval_ms, rf)
            if err:
                errors.setdefault(err, expand(q, variables))
            elif frames_rows(res)[0] > 0:
                with_data.append(variables)
        if panel:
            n_panels += 1
            n_panel_data += bool(with_data)
            if not with_data and not errors:
                empty.append(f"{uid}: {what}")
        else:
            n_ann += 1
            n_ann_data += bool(with_data)
        for err, text in errors.items():
            record(f"{uid}: {what}", False, f"{err} -- query: {text}")
record(f"{len(dashboards)} dashboards: {n_panels} panel queries through /api/ds/query",
       n_panels > 0, f"{n_panel_data} with data, {n_panels - n_panel_data} empty "
       f"({n_loads} dashboard loads: one per value of a single-value variable such as $host)")
record(f"{len(dashboards)} dashboards: {n_ann} annotation queries", True, f"{n_ann_data} with data")
# the empty ones are named, not failed: a fleet of a few minutes has no event of every kind
for e in empty:
    rows.append(("panel query without data", "note", e))

# ---- alert rules
if rules_file != "-":
    with open(rules_file) as fh:
        rules_yaml = yaml.safe_load(fh)
    groups = rules_yaml.get("groups", [])
    want = {r["uid"]: (g["name"], r["title"]) for g in groups for r in g.get("rules", [])}

    def seconds(s):
        m = re.fullmatch(r"(\d+)([smh])", str(s))
        return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)] if m else 60
    longest = max([seconds(g.get("interval", "1m")) for g in groups] or [60])

    st, listed = api("GET", "/api/v1/provisioning/alert-rules")
    if st == 200 and isinstance(listed, list):
        got = {r.get("uid"): r for r in listed}
    else:  # before the list endpoint (Grafana 9.x): one by one
        got = {}
        for uid in want:
            st, r = api("GET", f"/api/v1/provisioning/alert-rules/{uid}")
            if st == 200 and isinstance(r, dict):
                got[uid] = r
    missing = sorted(set(want) - set(got))
    not_file = sorted(u for u in want if u in got and got[u].get("provenance") not in ("file", None))
    record(f"{len(want)} alert rules provisioned", not missing and not not_file,
           f"{len(want) - len(missing)} of {len(want)}" + (f"; missing {missing}" if missing else "")
           + (f"; provenance not file: {not_file}" if not_file else ""))

    # Grafana's own evaluation: wait until every rule has been evaluated twice since the start
    deadline = time.time() + 2 * longest + 90
    states = {}
    while True:
        st, r = api("GET", "/api/prometheus/grafana/api/v1/rules")
        states = {}
        if st == 200 and isinstance(r, dict):
            for g in r.get("data", {}).get("groups", []):
                for rule in g.get("rules", []):
                    states[(g.get("name"), rule.get("name"))] = rule
        def evaluated(rule):
            le = re.sub(r"\.\d+", "", rule.get("lastEvaluation", "")).replace("Z", "+00:00")
            try:
                t = datetime.datetime.fromisoformat(le).timestamp()
            except ValueError:
                return False
            return t >= started + longest
        pending = [k for k in want.values() if k not in states or not evaluated(states[k])]
        if not pending or time.time() > deadline:
            break
        time.sleep(5)
    by_health = {}
    for uid, key in sorted(want.items()):
        rule = states.get(key)
        h = rule.get("health", "?") if rule else "absent"
        by_health.setdefault(h, []).append(uid)
        if h in ("error", "absent", "?"):
            err = rule.get("lastError", "") if rule else "not in /api/prometheus/grafana/api/v1/rules"
            record(f"rule {uid}: health {h}", False, str(err)[:300])
    by_state = {}
    for key in want.values():
        rule = states.get(key)
        by_state.setdefault(rule.get("state", "?") if rule else "absent", []).append(key[1])
    record(f"{len(want)} alert rules evaluated by Grafana", "error" not in by_health and "absent" not in by_health
           and not pending,
           "health " + ", ".join(f"{k} {len(v)}" for k, v in sorted(by_health.items()))
           + "; state " + ", ".join(f"{k} {len(v)}" for k, v in sorted(by_state.items()))
           + (f"; not evaluated twice in time: {len(pending)}" if pending else ""))
    for h in ("nodata",):
        if h in by_health:
            rows.append((f"rules with health {h}", "note", " ".join(by_health[h])))
    if "firing" in by_state:
        rows.append(("rules firing", "note", "; ".join(by_state["firing"])))

if policies_file != "-":
    with open(policies_file) as fh:
        pol = yaml.safe_load(fh)
    want_receiver = pol["policies"][0]["receiver"]
    st, tree = api("GET", "/api/v1/provisioning/policies")
    ok = st == 200 and isinstance(tree, dict) and tree.get("receiver") == want_receiver
    record("notification policy provisioned", ok,
           f"root receiver {tree.get('receiver')}, {len(tree.get('routes') or [])} routes, provenance {tree.get('provenance')}"
           if isinstance(tree, dict) else f"HTTP {st}: {str(tree)[:200]}")
    st, cps = api("GET", "/api/v1/provisioning/contact-points")
    names = {c.get("name") for c in cps} if isinstance(cps, list) else set()
    record(f"contact point {want_receiver}", want_receiver in names, f"HTTP {st}")

# ---- Grafana's log: errors from provisioning fail the check, the others are listed
errors, other = [], []
try:
    with open(f"{home}/logs/grafana.log", errors="replace") as fh:
        for line in fh:
            if re.search(r"\b(level=error|lvl=eror|level=crit|lvl=crit)\b", line):
                (errors if re.search(r"provisioning|dashboard|alerting\.rule|ngalert.*(rule|schedule)", line)
                 else other).append(line.strip())
except OSError as e:
    errors.append(f"cannot read Grafana's log: {e}")
record("Grafana log: no provisioning or rule error", not errors,
       f"{len(errors)} error lines" + (": " + errors[0][:300] if errors else ""))
if other:
    rows.append(("Grafana log: other error lines", "note", f"{len(other)}: " + other[0][:300]))

w = max(len(r[0]) for r in rows)
print()
for check, result, detail in rows:
    print(f"{check:<{w}}  {result:<4}  {detail}")
sys.exit(1 if failed else 0)
PY

status=0

# --- InfluxDB dashboards and the alert rules
install_grafana_side influxql --influx-url "http://127.0.0.1:$INFLUX_PORT" --policies example
[ "$(dropin_env "$scratch/influxql" STORWATCH_INFLUX_URL)" = "http://127.0.0.1:$INFLUX_PORT" ] ||
  die "install.sh --influx-url wrote no STORWATCH_INFLUX_URL drop-in"
start_grafana "$scratch/influxql"
wait_fill
python3 -c "$checker" "$grafana_url" "$admin_password" "$scratch/influxql" "$grafana_started" influxdb \
  storwatch-influxdb "http://127.0.0.1:$INFLUX_PORT" alerts/storwatch-rules.yaml \
  deploy/grafana/provisioning/alerting/storwatch-policies.yaml dashboards/*.json || status=1
stop_grafana

# --- Prometheus dashboards
if [ -n "$prom_skip" ]; then
  say "Prometheus dashboards skipped: $prom_skip"
else
  . "$qs/ports.env"
  [ -n "${PROMETHEUS_PORT:-}" ] || die "quickstart --prometheus wrote no PROMETHEUS_PORT in $qs/ports.env"
  prom_url=http://127.0.0.1:$PROMETHEUS_PORT
  install_grafana_side prometheus --datasource prometheus --prometheus-url "$prom_url"
  [ "$(dropin_env "$scratch/prometheus" STORWATCH_PROMETHEUS_URL)" = "$prom_url" ] ||
    die "install.sh --prometheus-url wrote no STORWATCH_PROMETHEUS_URL drop-in"
  start_grafana "$scratch/prometheus"
  python3 -c "$checker" "$grafana_url" "$admin_password" "$scratch/prometheus" "$grafana_started" prometheus \
    storwatch-prometheus "$prom_url" - - dashboards/prometheus/*.json || status=1
  stop_grafana
fi

if [ "$status" = 0 ]; then say "all checks passed ($version)"; else say "FAILED ($version)"; fi
exit "$status"
