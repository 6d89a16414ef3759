#!/usr/bin/env python3
"""Two storwatch-agent binaries side by side on the same live hosts: do they write the same lines?

    scripts/compare-agents.py OLD_AGENT NEW_AGENT [--sim SIM] [--seconds 60] [--harness DIR]
                              [--report-interval 10] [--scenarios a,b,…]

For a change that must not change what the agent reports (a refactor, a faster read path), run the
binary from before and the one from after at the same time on the same trees:

* the shared bench harness's 200-disk storage server (`../shared/bench/mkhost.py`, ticked once a
  second at x.500 s), with every collector on;
* every scenario of the host simulator (`storwatch-sim fleet`, also stepped at x.500 s), with the
  simulator's `dmsetup` and `zpool` stand-ins first on PATH.

`--harness ""` leaves the bench host out (where the shared harness is not at hand);
`--report-interval` shortens the reports for a quick run (the default is the agent's 10 s);
`--scenarios` runs only those simulator scenarios (default: every one).

Both agents sample on the same whole seconds, so they read the same states. Their reports are
compared line for line, timestamps included, after the first report (each started mid-interval).
Left out, because they measure the agent's own run rather than the host: its CPU, RSS and uptime
(`agent` line), the counts of its `agent_source` lines (a `zpool` that is not installed fails on
the monitor's own thread, as often as that thread's timing allows), and `status_age_s` (seconds
since the zpool thread last answered). Values derived from the agent's own monotonic clock — the
MD and zpool ETAs and the rebuild risk computed from them — start from each process's start
instant, milliseconds apart, so floats are equal when they agree to 1 part in 10^3.
Exits 1 and prints a unified diff when anything else differs.
"""

import argparse
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SELF_FIELDS = re.compile(
    r"([a-z]+_cpu_us|cycle_cpu_max_us|rss_kb|uptime_s)=[^,\s]+,?"
)
AGE = re.compile(r"status_age_s=[^,\s]+,?")
COUNTS = re.compile(r" errors=\d+i,errors_total=\d+i$")
FIELD = re.compile(r"(?<=[ ,])([a-z_0-9]+)=(-?[0-9.]+(?:e-?[0-9]+)?)(?=[, ]|$)")


def close(a, b):
    """The same line, or the same but for floats that agree to 1 part in 10^3."""
    if a == b:
        return True
    fa, fb = FIELD.findall(a), FIELD.findall(b)
    if FIELD.sub("", a) != FIELD.sub("", b) or [k for k, _ in fa] != [k for k, _ in fb]:
        return False
    for (_, x), (_, y) in zip(fa, fb):
        try:
            x, y = float(x), float(y)
        except ValueError:  # a number-like tag value (version=0.1.0): compared as text
            if x != y:
                return False
            continue
        if abs(x - y) > 1e-3 * max(abs(x), abs(y)):
            return False
    return True


def normalise(text):
    """Report lines keyed by timestamp, with what measures the agent's own run left out."""
    by_ts = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        head, _, ts = line.rpartition(" ")
        if line.startswith("agent,"):
            head = SELF_FIELDS.sub("", head).rstrip(",")
        elif line.startswith("agent_source,"):
            head = COUNTS.sub(" errors=…", head)
        head = AGE.sub("", head).rstrip(",")
        by_ts.setdefault(ts, []).append(head + " " + ts)
    return by_ts


def compare(name, old_file, new_file):
    old = normalise(Path(old_file).read_text())
    new = normalise(Path(new_file).read_text())
    common = sorted(set(old) & set(new))[1:]  # the first common report may be partial
    if not common:
        print(f"{name}: no common report to compare (old {len(old)}, new {len(new)} reports)")
        return False
    diff = []
    lines = 0
    bad = 0
    for ts in common:
        lines += len(old[ts])
        if len(old[ts]) == len(new[ts]) and all(map(close, old[ts], new[ts])):
            continue
        bad += 1
        diff += difflib.unified_diff(
            old[ts], new[ts], f"old {name} @{ts}", f"new {name} @{ts}", lineterm="", n=0
        )
    if diff:
        print(f"{name}: DIFFERENT in {bad} of {len(common)} reports")
        print("\n".join(diff[:200]))
        return False
    print(f"{name}: identical, {len(common)} reports, {lines} lines")
    return True


def start(cmd, log, env=None):
    return subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def stop(procs):
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def after_step():
    """Waits until 0.2 s after the trees' step at x.500 s, so that both agents of a pair start, and
    their monitor threads (zpool's first run) read the trees, well inside the same step: a pair
    started across a step read two states, and a monitor that runs once a minute kept the
    difference (the zpool scan fields and the rebuild risk) in every report of a short run."""
    frac = time.time() % 1.0
    time.sleep((0.7 - frac) % 1.0)


def agents(old, new, proc, sys_, out_dir, name, report_s, extra_env=None, config=None):
    env = dict(os.environ)
    env.update(extra_env or {})
    procs = []
    outs = []
    after_step()
    for label, binary in (("old", old), ("new", new)):
        out = out_dir / f"{name}.{label}.lp"
        cmd = [binary, "run", "--proc-root", str(proc), "--sys-root", str(sys_),
               "--sample-interval", "1s", "--report-interval", f"{report_s}s",
               "--host", name, "--output", f"file:{out}"]
        if config:
            cmd[1:1] = ["--config", str(config)]
        log = open(out_dir / f"{name}.{label}.log", "w")
        procs.append(start(cmd, log, env))
        outs.append(out)
    return procs, outs


def wait_fleet(fleet, hosts, timeout=60):
    """Waits until the simulator has written the first state of every host."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fleet.is_dir():
            ready = [d for d in fleet.iterdir()
                     if (d / "host").is_file() and (d / "proc" / "diskstats").is_file()]
            if len(ready) >= hosts:
                time.sleep(1)  # one whole tick written
                return
        time.sleep(0.1)
    sys.exit(f"the simulator did not write {hosts} hosts within {timeout} s (log: {fleet.parent}/sim.log)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--sim", default=None, help="storwatch-sim binary (default: next to NEW)")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--harness", default=str(REPO.parent / "shared" / "bench"),
                    help='the shared bench harness; "" leaves its host out')
    ap.add_argument("--report-interval", type=int, default=10, help="seconds between reports")
    ap.add_argument("--scenarios", default="", help="comma-separated simulator scenarios")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    a = ap.parse_args()
    old, new = os.path.abspath(a.old), os.path.abspath(a.new)
    sim = a.sim or str(Path(new).parent / "storwatch-sim")
    work = Path(tempfile.mkdtemp(prefix="storwatch-compare-"))
    # every collector on, whatever /etc/storwatch/agent.toml says
    config = work / "agent.toml"
    config.write_text("[md]\nenabled = true\n[mpath]\nenabled = true\n[zpool]\nenabled = true\n")
    procs = []
    pairs = []
    try:
        bench = work / "bench"
        if a.harness:
            subprocess.run([sys.executable, f"{a.harness}/mkhost.py", "--root", str(bench),
                            "--quiet"], check=True)
            procs.append(start([sys.executable, f"{a.harness}/mkhost.py", "--root", str(bench),
                                "--tick", "--quiet"], open(work / "ticker.log", "w")))
        fleet = work / "fleet"
        scenarios = a.scenarios.split(",") if a.scenarios else subprocess.run(
            [sim, "--list"], check=True, capture_output=True, text=True).stdout.split("\n")
        scenarios = [s.split()[0] for s in scenarios if s.strip()]
        procs.append(start([sim, "fleet", "--root", str(fleet), "--scenarios", ",".join(scenarios)],
                           open(work / "sim.log", "w")))
        wait_fleet(fleet, len(scenarios))
        if a.harness:
            p, outs = agents(old, new, bench / "proc", bench / "sys", work, "bench-host",
                             a.report_interval, config=config)
            procs += p
            pairs.append(("bench-host", outs))
        for host in sorted(d for d in fleet.iterdir() if d.is_dir()):
            env = {"PATH": f"{host / 'bin'}:{os.environ['PATH']}"}
            p, outs = agents(old, new, host / "proc", host / "sys", work, host.name,
                             a.report_interval, env, config)
            procs += p
            pairs.append((host.name, outs))
        print(f"{len(pairs)} hosts, two agents each, for {a.seconds} s ({work})", flush=True)
        time.sleep(a.seconds + 2)
    finally:
        stop(procs)
    ok = all([compare(name, *outs) for name, outs in pairs])
    if a.keep or not ok:
        print(f"outputs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
