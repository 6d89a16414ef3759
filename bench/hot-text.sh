#!/usr/bin/env bash
# Makes agent/link/hot-text.ld: the functions the release agent runs, hottest first, for the
# linker to lay out together (agent/build.rs; docs/performance.md, "The agent's code in memory").
#
#   bench/hot-text.sh [--warmup 75] [--steady 240] [--out agent/link/hot-text.ld]
#
# The release agent (STORWATCH_AGENT_BIN, or built here) runs under valgrind's callgrind with
# every monitor on, on the 200-disk host of the shared harness (../shared/bench, ticked by
# bench/run-agent-bench.sh running the read floor beside it), with the fake smartctl and storcli64
# of --drives-steady (a drive round every 60 s, a controller round every 60 s), and with both of
# a site's outputs: its reports sent with the HTTP output and spool to a storwatch-collector
# (STORWATCH_COLLECTOR_BIN, or built here; its own output unreachable: it only queues), and
# `/metrics` served and scraped every 10 s. The profile is cut
# in two: startup and the first rounds (--warmup s), then the steady state (--steady s). The list
# holds the steady state's functions by instructions, most first, then those only startup ran
# (the agent profiled is linked without a list: STORWATCH_NO_HOT_TEXT, below);
# each is the symbol's name, its hash matched by `*` where its path is one function's and a
# ThinLTO `.llvm.` suffix by `*` (below), so that the list outlives small edits; after the code changes much, make it again (a name
# that no longer exists is skipped by the linker).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
warmup=75
steady=240
out=$repo/agent/link/hot-text.ld
while [ $# -gt 0 ]; do
  case $1 in
    --warmup) warmup=$2; shift 2 ;;
    --steady) steady=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "needs valgrind (callgrind)" >&2; exit 1; }
command -v callgrind_control >/dev/null || { echo "needs callgrind_control" >&2; exit 1; }
command -v nm >/dev/null || { echo "needs nm (binutils)" >&2; exit 1; }
command -v curl >/dev/null || { echo "needs curl" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. "$here/lib.sh"
# The profiled agent is linked without a list: valgrind gives no object to the code of a
# section other than `.text` (the code a list lays out), so a profile of an agent linked with a
# list sees only what the list left out, and the list made from it loses the rest.
agent_bin=$(STORWATCH_NO_HOT_TEXT=1 agent_binary)
if readelf -S -W "$agent_bin" | grep -q '\.text\.storwatch_hot'; then
  echo "$agent_bin is linked with a hot-code list: profile a build without one" >&2
  echo "(STORWATCH_NO_HOT_TEXT=1 cargo build --release -p storwatch-agent)" >&2
  exit 1
fi
collector_bin=${STORWATCH_COLLECTOR_BIN:-}
if [ -z "$collector_bin" ]; then
  cargo build --release -p storwatch-collector --manifest-path "$repo/Cargo.toml" >&2
  collector_bin=$(dirname "$agent_bin")/storwatch-collector
fi
[ -x "$collector_bin" ] || { echo "no collector at $collector_bin (STORWATCH_COLLECTOR_BIN)" >&2; exit 1; }
work=$(mktemp -d /tmp/storwatch-hot-text.XXXXXX)
host=/dev/shm/$(basename "$work")-host
vg=
ticker=
collector=
scraper=
cleanup() {
  [ -z "$vg" ] || kill "$vg" 2>/dev/null || true
  [ -z "$scraper" ] || kill "$scraper" 2>/dev/null || true
  [ -z "$collector" ] || kill "$collector" 2>/dev/null || true
  stop_ticking_host "$work"
  wait 2>/dev/null || true
  remove_dirs "$work" "$host" "/dev/shm/$(basename "$work")-bench-run"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # the EXIT trap runs on these too

# The host, ticked for the whole profile: the read floor alone in the harness's window.
start_ticking_host "$work" "$host" $((warmup + steady + 60))
# Two free ports on 127.0.0.1: the collector's and the agent's /metrics.
read -r cport pport < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
(umask 077; printf 'hot-text-token-0123456789\n' >"$work/agent.token"
  printf 'hot:hot-text-token-0123456789\n' >"$work/collector.tokens")
mkdir -p "$work/queue" "$work/spool"
"$collector_bin" --listen "127.0.0.1:$cport" --queue-dir "$work/queue" \
  --token-file "$work/collector.tokens" --output http://127.0.0.1:9 --db storwatch \
  >"$work/collector.log" 2>&1 &
collector=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$cport/ping" >/dev/null 2>&1 && break
  kill -0 "$collector" 2>/dev/null || { cat "$work/collector.log" >&2; exit 1; }
  sleep 0.1
done
printf '[drive]\nsmartctl = "%s"\ninterval = "60s"\n[hwraid]\nstorcli = "%s"\n[prometheus]\nlisten = "127.0.0.1:%s"\n' \
  "$work/bench/bin/drive/smartctl" "$work/bench/bin/drive/storcli64" "$pport" >"$work/agent.toml"

valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$work/cg.out" \
  "$agent_bin" run --config "$work/agent.toml" --proc-root "$host/proc" --sys-root "$host/sys" \
  --sample-interval 1s --report-interval 10s \
  --output "http://127.0.0.1:$cport/write?db=storwatch" --token-file "$work/agent.token" \
  --spool-dir "$work/spool" >"$work/agent.log" 2>&1 &
vg=$!
# a Prometheus scraping it every 10 s
(while sleep 10; do curl -s -o /dev/null "http://127.0.0.1:$pport/metrics" || true; done) &
scraper=$!
sleep "$warmup"
callgrind_control -d "$vg" >/dev/null # part 1: startup and the first rounds
sleep "$steady"
callgrind_control -d "$vg" >/dev/null # part 2: the steady state
for _ in $(seq 30); do [ -s "$work/cg.out.2" ] && break; sleep 1; done
kill "$vg"
wait "$vg" 2>/dev/null || true
vg=
[ -s "$work/cg.out.1" ] && [ -s "$work/cg.out.2" ] || { echo "no profile" >&2; cat "$work/agent.log" >&2; exit 1; }
# the reports reached the collector (else the HTTP output's steady state was not profiled)
queued=$(curl -s "http://127.0.0.1:$cport/metrics" | awk '/^storwatch_collector_lines_accepted_total /{print $2}')
[ "${queued:-0}" != 0 ] || { echo "the collector took no line from the agent" >&2; cat "$work/agent.log" >&2; exit 1; }
echo "the collector took $queued lines" >&2

nm --defined-only -S "$agent_bin" >"$work/syms.txt"
mkdir -p "$(dirname "$out")"
python3 - "$work/cg.out.1" "$work/cg.out.2" "$work/syms.txt" "$out" "$agent_bin" "$repo" <<'PY'
import bisect, os, re, sys

startup_file, steady_file, syms_file, out, binary, repo = sys.argv[1:]

def fingerprint(repo):
    """FNV-1a 64 of the code the list is made from, as agent/build.rs computes it."""
    files = []
    for top in ["agent/src", "wire/src", "agent/Cargo.toml", "wire/Cargo.toml", "Cargo.toml",
                "Cargo.lock"]:
        path = os.path.join(repo, top)
        if os.path.isdir(path):
            for d, _, names in os.walk(path):
                for n in names:
                    if n.endswith(".rs"):
                        p = os.path.join(d, n)
                        files.append((os.path.relpath(p, repo), p))
        else:
            files.append((top, path))
    h = 0xcbf29ce484222325
    for name, path in sorted(files):
        try:
            data = open(path, "rb").read()
        except OSError:
            data = b""
        for b in name.encode() + b"\0" + data + b"\0":
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h

binary = binary.rsplit("/", 1)[-1]
# A function's names: identical functions merged by the compiler share one body (and one
# section, named after one of them) under several names, so each body is listed by them all.
aliases = {}
for line in open(syms_file):
    p = line.split()
    if len(p) == 4 and p[2] in "tTwW":
        start, size = int(p[0], 16), int(p[1], 16)
        old = aliases.setdefault(start, (size, []))
        aliases[start] = (max(size, old[0]), old[1] + [p[3]])
syms = sorted((a, size, names[0]) for a, (size, names) in aliases.items())
starts = [s[0] for s in syms]
def costs(path):
    """Instructions a function of the agent's own object ran, by symbol."""
    names, obj, cost, last, call, npos = {}, False, {}, 0, False, 1
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("positions:"):  # `instr line`: the cost is the third column
            npos = len(line.split()) - 1
            continue
        m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?$", line)
        if m:
            kind, i, name = m.groups()
            if name:
                names[i] = name
            if kind == "ob":
                obj = names.get(i, "").rsplit("/", 1)[-1] == binary
            continue
        if line.startswith("calls="):
            call = True
            continue
        if not line or line[0] not in "+-*0":
            continue
        f = line.split()
        tok = f[0]
        if tok.startswith("0x"):
            a = int(tok, 16)
        elif tok[0] in "+-":
            a = last + (1 if tok[0] == "+" else -1) * int(tok[1:], 0)
        elif tok == "*":
            a = last
        else:
            continue
        last = a
        if call:  # the call's own line: its cost is the callee's, inclusive
            call = False
            continue
        if not obj:
            continue
        i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and syms[i][0] <= a < syms[i][0] + syms[i][1]:
            ir = int(f[npos]) if len(f) > npos else 0
            cost[syms[i][2]] = cost.get(syms[i][2], 0) + ir
    return cost

startup, steady = costs(startup_file), costs(steady_file)
if not steady:
    sys.exit("no function of %s in the steady state's profile" % binary)
order = sorted(steady, key=lambda s: -steady[s])
order += sorted((s for s in startup if s not in steady), key=lambda s: -startup[s])
size = {s[2]: s[1] for s in syms}
start_of = {s[2]: s[0] for s in syms}
# A name's hash (`17h<16 hex digits>E`, legacy mangling) follows the crate's build hash, which
# cargo makes from Cargo.lock, the toolchain and the package's build settings, and, for an
# instance of a generic function, the instance's types, closures included, whose names shift
# with any edit of the function that holds them: so a name whose path is one function's is
# written with its hash as `*`. A path that several functions of the binary share (a generic's
# instances, whose legacy names carry the generic's parameters, not its types) is written whole:
# with `*` it would bring every instance, the cold ones between the hot, and an edit that renames
# one instance only leaves that one out of the list.
hashed = re.compile(r"^(.*17h)[0-9a-f]{16}(E)(\.llvm\.\d+)?$")
paths = {}
for _, names in aliases.values():
    for name in names:
        m = hashed.match(name)
        if m:
            paths[m.group(1)] = paths.get(m.group(1), 0) + 1

def pattern(name):
    m = hashed.match(name)
    if m and paths.get(m.group(1)) == 1:
        return m.group(1) + "*E" + ("*" if m.group(3) else "")
    # the compiler's section of a cold function is `.text.unlikely.<name>`
    return re.sub(r"\.llvm\.\d+$", "*", name)

with open(out, "w") as f:
    f.write("/* Made by bench/hot-text.sh: the functions the release agent runs, the steady state's\n")
    f.write("   by instructions, then startup's (%d and %d functions, %d and %d bytes).\n"
            % (len(steady), len(order) - len(steady), sum(size[s] for s in steady),
               sum(size[s] for s in order[len(steady):])))
    f.write("   Laid out ahead of .text by agent/build.rs; the rest is the linker's own layout.\n")
    f.write("   Code: fnv1a64 %s (agent/build.rs, fingerprint). */\n" % fingerprint(repo))
    f.write("SECTIONS\n{\n  .text.storwatch_hot :\n  {\n")
    written = set()
    for s in order:
        for name in sorted(aliases[start_of[s]][1]):
            # the compiler's section of a cold function is `.text.unlikely.<name>`
            name = pattern(name)
            if name not in written:
                written.add(name)
                f.write("    *(.text.%s .text.unlikely.%s)\n" % (name, name))
    f.write("  }\n}\nINSERT BEFORE .text;\n")
print("%s: %d steady-state functions, %d startup-only" % (out, len(steady), len(order) - len(steady)))
PY
