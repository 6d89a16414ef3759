#!/usr/bin/env python3
"""Verdicts on the dashboard pages shot.js rendered: per dashboard x host, pass or fail with the
reasons, against expectations.yaml (its header says what is checked).

    verdicts.py --expectations FILE --pages PAGES.tsv --shots DIR --repo DIR
                [--influx URL] [--prometheus URL] [--db NAME]

PAGES.tsv: one line per rendered page: name, dashboard kind, uid, host ("-" for none),
scenario ("-"). DIR holds shot.js's NAME.json per page. The dashboards are read from
REPO/dashboards/*.json and REPO/dashboards/prometheus/*.json (their panels' queries say which
measurement, fields or metrics a panel shows). --influx / --prometheus: where to ask whether a
host has the data a panel showing "No data" reads (without them that check is skipped, and said).
Prints one verdict line per page and the reasons under it; exits 1 when a page fails, 2 when
the inputs are unusable.
"""
import argparse
import glob
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

import yaml

# variables a panel may use and still be judged by its measurement/metric alone: the host's, the
# site's (All on a fresh load), the resolution and Grafana's own
JUDGEABLE_VARS = {"host", "site", "rp", "timeFilter", "__interval", "interval", "__rate_interval",
                  "__range", "__range_s", "__interval_ms", "DS_STORWATCH", "__timeFilter"}


def http_json(url, timeout=30):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read().decode())
    except (urllib.error.URLError, TimeoutError, ValueError) as e:
        return {"error": str(e)}


def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))


def load_dashboards(repo):
    out = {}
    for f in sorted(glob.glob(os.path.join(repo, "dashboards", "*.json"))
                    + glob.glob(os.path.join(repo, "dashboards", "prometheus", "*.json"))):
        with open(f) as fh:
            d = json.load(fh)
        out[d.get("uid")] = d
    return out


def variables_in(q):
    return set(m.group(1) or m.group(2) or m.group(3)
               for m in re.finditer(r"\$(\w+)|\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]", q))


IDENT = r'(?:"[^"]+"|[A-Za-z_]\w*)'


def influx_sources(q):
    """(measurements, fields) an InfluxQL query reads: the last part of each FROM name, and the
    quoted identifiers inside function calls of its SELECT lists."""
    measurements, fields = set(), set()
    for m in re.finditer(rf"\bFROM\s+({IDENT}(?:\.{IDENT})*(?:\s*,\s*{IDENT}(?:\.{IDENT})*)*)", q, re.I):
        for name in re.split(r"\s*,\s*", m.group(1)):
            last = re.findall(IDENT, name)[-1].strip('"')
            if "$" not in last:
                measurements.add(last)
    for m in re.finditer(r'\w+\(\s*"([^"]+)"', q):
        fields.add(m.group(1))
    return measurements, fields


def influx_has_data(influx, db, q, host, range_s, cache):
    """Whether the host holds values of the fields of `q`'s measurements in the last range_s:
    (True/False, evidence) or (None, why not judged)."""
    measurements, fields = influx_sources(q)
    if not measurements:
        return None, "no measurement found in the query"
    uses_host = "host" in variables_in(q)
    for m in sorted(measurements):
        sel = ", ".join(f'count("{f}")' for f in sorted(fields)) or "count(*)"
        where = f"time > now() - {range_s}s" + (f" AND \"host\" = '{host}'" if uses_host and host else "")
        iq = f'SELECT {sel} FROM "{m}" WHERE {where}'
        if iq not in cache:
            r = http_json(f"{influx}/query?" + urllib.parse.urlencode({"db": db, "q": iq}))
            if "error" in r:
                return None, f"InfluxDB: {r['error'][:100]}"
            n = 0
            for res in r.get("results", []) if isinstance(r, dict) else []:
                for s in res.get("series", []):
                    for row in s.get("values", []):
                        n += sum(v for v in row[1:] if isinstance(v, (int, float)))
            cache[iq] = n
        if cache[iq] > 0:
            return True, f"{cache[iq]} values of {m}.{'/'.join(sorted(fields)) or '*'}" + (f" for {host}" if uses_host else "")
    return False, ""


def top_level_alternatives(expr):
    """The operands of an expression's top-level `or`s (a union: any of them answering is data)."""
    out, depth, cur, i = [], 0, "", 0
    while i < len(expr):
        c = expr[i]
        depth += c in "({[" and 1 or c in ")}]" and -1 or 0
        if depth == 0 and re.match(r"\sor\s", expr[i:i + 4]):
            out.append(cur)
            cur, i = "", i + 4
            continue
        cur += c
        i += 1
    return out + [cur]


def prom_has_data(prom, expr, host, range_s, cache, now):
    """Whether the host has series of the metrics `expr` reads, with its literal label matchers:
    every metric of one operand of a top-level `or` (a ratio or a join answers only when all its
    metrics do: the node's report count that divides the jobs' I/O is no data of its own)."""
    uses_host = "host" in variables_in(expr)
    found_any = False
    for alt in top_level_alternatives(expr):
        evidence = []
        for m in re.finditer(r"\b(storwatch_[a-z0-9_]+)(\{[^}]*\})?", alt):
            metric, sel = m.group(1), m.group(2) or ""
            matchers = []
            for mm in re.finditer(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', sel):
                if "$" in mm.group(3):
                    continue
                matchers.append(f'{mm.group(1)}{mm.group(2)}"{mm.group(3)}"')
            if uses_host and host:
                matchers.append(f'host="{host}"')
            found_any = True
            match = metric + "{" + ",".join(matchers) + "}"
            if match not in cache:
                r = http_json(f"{prom}/api/v1/series?" + urllib.parse.urlencode(
                    {"match[]": match, "start": now - range_s, "end": now}))
                if "error" in r:
                    return None, f"Prometheus: {str(r['error'])[:100]}"
                cache[match] = len(r.get("data", []))
            if cache[match] == 0:
                evidence = []
                break
            evidence.append(f"{cache[match]} series of {match}")
        if evidence:
            return True, ", ".join(evidence)
    return (False, "") if found_any else (None, "no storwatch_ metric found in the query")


def panel_queries(panel):
    for t in panel.get("targets", []):
        q = t.get("query") if isinstance(t.get("query"), str) else t.get("expr")
        if isinstance(q, str) and q.strip():
            yield q


def rx(pattern):
    return re.compile(pattern, re.I)


def judge_alert_list(shot, repo):
    """The alert list of an installation with both datasources: one set of rules. Grafana's
    own are in the folder storwatch; Prometheus's (alerts/prometheus/storwatch-rules.yml: alert
    names that are the Grafana uids, in a namespace that is the rule file's path) must not be
    listed beside them."""
    fails = []
    text = shot.get("page_text", "")
    with open(os.path.join(repo, "alerts/prometheus/storwatch-rules.yml")) as fh:
        prom = yaml.safe_load(fh)
    names = [r["alert"] for g in prom.get("groups", []) for r in g.get("rules", []) if "alert" in r]
    listed = [n for n in names if n in text]
    if listed:
        fails.append(f"{len(listed)} of Prometheus's {len(names)} alerting rules listed beside "
                     f"Grafana's (e.g. {listed[0]}): every alert twice")
    if "storwatch-rules.yml" in text:
        fails.append("a rule group under a path on disk (Prometheus's storwatch-rules.yml) is listed")
    if "storwatch" not in text:
        fails.append("the folder storwatch (Grafana's rules) is not listed")
    for e in shot.get("page_errors", []):
        fails.append(f"page error: {e[:200]}")
    return fails, []


def judge(page, shot, exp, dash_def, args, caches, now):
    """The reasons a page fails, and its notes."""
    fails, notes = [], []
    kind, host, scenario = page["kind"], page["host"], page["scenario"]
    kexp = exp["dashboards"][kind]
    sexp = (exp.get("scenarios", {}).get(scenario) or {}).get(kind) or {} if scenario else {}
    panels = [p for p in shot.get("panels", [])]
    by_title = {}
    for p in panels:
        by_title.setdefault(p["title"], p)
    if not panels:
        fails.append("no panel rendered")
    for e in shot.get("page_errors", []):
        fails.append(f"page error: {e[:200]}")

    defs = {p.get("title"): p for p in walk(dash_def.get("panels", []))} if dash_def else {}
    no_data_ok = [rx(x) for x in kexp.get("no_data_ok", [])]
    must_show = [rx(x) for x in list(kexp.get("data", [])) + list(sexp.get("data", []))]

    def empty_is_good(title, msg, d):
        """Why an empty panel's message is the good news it says: the panel is listed under
        `empty_is_good` with the reason, shows its own configured message (never Grafana's
        "No data"), and this host's scenario does not list it under `data`."""
        if d is None or any(r.search(title) for r in must_show):
            return None
        configured = ((d.get("fieldConfig") or {}).get("defaults") or {}).get("noValue")
        headers_only = msg == "a table without rows"
        if not configured or (msg.strip() != configured.strip() and not headers_only):
            return None
        for e in kexp.get("empty_is_good", []):
            if rx(e["panel"]).search(title):
                return e["why"] + (f" (its headers show without a row, not {configured!r})" if headers_only else "")
        return None
    for p in panels:
        title = p["title"]
        if p.get("state") == "error":
            err = (p.get("error") or "") + " " + " ".join(p.get("query_errors", []))
            fails.append(f"panel {title!r}: error: {err.strip()[:240]}")
        elif p.get("query_errors"):
            fails.append(f"panel {title!r}: query error: {' '.join(p['query_errors'])[:240]}")
        tab = p.get("table") or {}
        headers_only = p.get("state") == "data" and tab.get("columns") and tab.get("rows") == 0
        if p.get("state") != "message" and not headers_only:
            continue
        # a table with its headers and no row (a PromQL table whose instant queries all came back
        # empty) is as empty as "No data", and judged the same way
        msg = p.get("message", "") if not headers_only else "a table without rows"
        if p.get("query_values", 0) > 0:
            fails.append(f"panel {title!r} shows {msg!r} though its queries answered "
                         f"{p['query_values']} values")
            continue
        if any(r.search(title) for r in no_data_ok):
            continue
        d = defs.get(title)
        says = empty_is_good(title, msg, d)
        if says:
            notes.append(f"panel {title!r} says {msg!r}: {says}")
            continue
        if d is None:
            notes.append(f"panel {title!r} shows {msg!r} (not found in the dashboard file: not judged)")
            continue
        verdict, why = None, ""
        is_prom = dash_def.get("uid", "").endswith("-prom")
        for q in panel_queries(d):
            extra = variables_in(q) - JUDGEABLE_VARS
            if extra:
                why = f"filters on ${', $'.join(sorted(extra))}"
                continue
            if is_prom:
                if not args.prometheus:
                    why = "no --prometheus"
                    continue
                v, w = prom_has_data(args.prometheus, q, host, exp["time_range_s"], caches["prom"], now)
            else:
                if not args.influx:
                    why = "no --influx"
                    continue
                v, w = influx_has_data(args.influx, args.db, q, host, exp["time_range_s"], caches["influx"])
            if v:
                verdict, why = True, w
                break
            if v is False:
                verdict = False
            elif w:
                why = w
        if verdict:
            fails.append(f"panel {title!r} shows {msg!r} where the host has the data ({why})")
        elif verdict is None:
            notes.append(f"panel {title!r} shows {msg!r} (not judged: {why or 'no query'})")

    def shows_data(pattern):
        r = rx(pattern)
        hits = [p for p in panels if r.search(p["title"])]
        if not hits:
            return f"no panel titled /{pattern}/"
        bad = [p for p in hits if p.get("state") != "data" or (p.get("table") or {}).get("rows") == 0]
        if len(bad) == len(hits):
            p = bad[0]
            return (f"panel {p['title']!r}: {p.get('message') or p.get('error') or p.get('state')}"
                    + (" (a table without rows)" if p.get("state") == "data" else ""))
        return None

    for pattern in list(kexp.get("data", [])) + list(sexp.get("data", [])):
        why = shows_data(pattern)
        if why:
            fails.append(f"must show data: {why}")

    for t in kexp.get("tables", []):
        r = rx(t["panel"])
        hits = [p for p in panels if r.search(p["title"])]
        if not hits:
            if not t.get("optional"):
                fails.append(f"table /{t['panel']}/ not on the page")
            continue
        for p in hits:
            tab = p.get("table")
            if tab is None:
                if p.get("state") == "data":
                    fails.append(f"panel {p['title']!r}: no table rendered")
                continue
            if tab.get("rows") == 0:
                continue  # no row: no value out of view (whether it should be empty is judged above)
            cols = tab.get("columns", [])
            visible = [c["name"] for c in cols if c.get("visible")]
            for want in t.get("columns", []):
                if not any(rx(want).search(n) for n in visible):
                    hidden = [c["name"] for c in cols if rx(want).search(c["name"])]
                    where = (f"cut off or scrolled out at {shot.get('width')} px: {', '.join(hidden)}"
                             if hidden else "no such column among the rendered ones"
                             + (f" ({(tab.get('colcount') or 0) - len(cols)} columns never rendered, beyond the right edge)"
                                if (tab.get("colcount") or 0) > len(cols) else ""))
                    fails.append(f"table {p['title']!r}: column /{want}/ not in view ({where}); in view: {', '.join(visible) or 'none'}")

    incident = list(sexp.get("incident", [])) + (list(kexp.get("incident", [])) if not host else [])
    if incident:
        fold_text = " | ".join(p.get("fold_text", "") for p in panels)
        for want in incident:
            if not rx(want).search(fold_text):
                anywhere = rx(want).search(" | ".join(p.get("text", "") for p in panels))
                fails.append(f"incident: /{want}/ not in the first {exp['fold_px']} px"
                             + (" (it is further down the page or cut off)" if anywhere else " (nowhere on the page)"))
    return fails, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expectations", required=True)
    ap.add_argument("--pages", required=True)
    ap.add_argument("--shots", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--influx")
    ap.add_argument("--prometheus")
    ap.add_argument("--db", default="storwatch")
    args = ap.parse_args()
    with open(args.expectations) as fh:
        exp = yaml.safe_load(fh)
    exp.setdefault("fold_px", 1200)
    exp.setdefault("time_range_s", 21600)
    dashboards = load_dashboards(args.repo)
    pages = []
    with open(args.pages) as fh:
        for line in fh:
            if not line.strip() or line.startswith("#"):
                continue
            name, kind, uid, host, scenario = line.rstrip("\n").split("\t")
            pages.append({"name": name, "kind": kind, "uid": uid,
                          "host": None if host == "-" else host,
                          "scenario": None if scenario == "-" else scenario})
    if not pages:
        print("verdicts.py: no pages", file=sys.stderr)
        return 2
    import time
    now = int(time.time())
    caches = {"influx": {}, "prom": {}}
    n_fail = 0
    for page in pages:
        f = os.path.join(args.shots, page["name"] + ".json")
        label = (f"{page['uid']} x {page['host'] or '(defaults)'}" + (f" [{page['scenario']}]" if page["scenario"] else "")
                 if page["kind"] != "alert-list" else f"alert list ({page['uid']})")
        try:
            with open(f) as fh:
                shot = json.load(fh)
        except (OSError, ValueError) as e:
            print(f"FAIL  {label}\n      not rendered: {e}")
            n_fail += 1
            continue
        if page["kind"] == "alert-list":
            fails, notes = judge_alert_list(shot, args.repo)
        else:
            fails, notes = judge(page, shot, exp, dashboards.get(page["uid"]), args, caches, now)
        print(f"{'FAIL' if fails else 'pass'}  {label}  ({page['name']}.png)")
        for r in fails:
            print(f"      - {r}")
        for r in notes:
            print(f"      note: {r}")
        n_fail += bool(fails)
    print(f"\n{len(pages) - n_fail} of {len(pages)} pages pass, {n_fail} fail")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
