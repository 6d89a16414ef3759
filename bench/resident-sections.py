#!/usr/bin/env python3
"""Which parts of a running program's own file are resident: kB by ELF section.

    bench/resident-sections.py PID [--functions N]

Reads /proc/PID/maps for the mappings of the process's executable and /proc/PID/pagemap (root:
bit 63 of each page's entry is "present") for which of their pages are in memory, and gives each
present page to the section its file offset falls in (`readelf -S`). A page of a private mapping
that was written (relocations: `.data.rel.ro`, the GOT) is counted where its file offset is, as
smaps counts it in the file's Rss. Pages past every section (headers, padding) are "other".
With /proc/kpageflags readable, a second column gives how much of each section's resident part
is in a large folio of the page cache (a compound page: a fault may map such a folio's pages
together, where fault-around alone maps at most its 64 KiB window). With --functions N, the N
functions of `.text` (the code outside the hot section) with the most resident pages, each page
given to the function at its first byte (`nm`, demangled).
"""
import bisect
import os
import re
import struct
import subprocess
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")


def sections(binary):
    """(name, file offset, size) of each section with bytes in the file."""
    out = subprocess.run(["readelf", "-S", "-W", binary], check=True, capture_output=True,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m and m.group(2) != "NOBITS" and m.group(1) != "NULL":
            rows.append((m.group(1), int(m.group(4), 16), int(m.group(5), 16)))
    return rows


def symbols(binary):
    """(address, name) of each function, by address."""
    out = subprocess.run(["nm", "-n", "-C", "--defined-only", binary], check=True,
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split(" ", 2)
        if len(f) == 3 and f[1] in "tTwW":
            rows.append((int(f[0], 16), f[2]))
    return rows


def section_addresses(binary):
    """name -> (address, file offset) of each section."""
    out = subprocess.run(["readelf", "-S", "-W", binary], check=True, capture_output=True,
                         text=True).stdout
    at = {}
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            at[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
    return at


def main():
    pid = sys.argv[1]
    functions = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--functions" else 0
    binary = os.readlink("/proc/%s/exe" % pid)
    secs = sections(binary)
    kb = {}
    folio_kb = {}
    text_pages = []
    try:
        flags = open("/proc/kpageflags", "rb")
    except OSError:
        flags = None
    with open("/proc/%s/pagemap" % pid, "rb") as pm:
        for line in open("/proc/%s/maps" % pid):
            f = line.split()
            if len(f) < 6 or f[5] != binary:
                continue
            start, end = (int(x, 16) for x in f[0].split("-"))
            offset = int(f[2], 16)
            pm.seek(start // PAGE * 8)
            entries = pm.read((end - start) // PAGE * 8)
            for i in range(len(entries) // 8):
                (e,) = struct.unpack_from("<Q", entries, i * 8)
                if not e >> 63:
                    continue
                at = offset + i * PAGE
                # a page may hold the end of one section and the start of the next: the first
                # section it holds bytes of takes it
                name = next((n for n, o, s in secs if o < at + PAGE and at < o + s), "other")
                kb[name] = kb.get(name, 0) + PAGE // 1024
                if name == ".text":
                    text_pages.append(at)
                pfn = e & ((1 << 55) - 1)
                if flags is not None and pfn:
                    flags.seek(pfn * 8)
                    (kf,) = struct.unpack("<Q", flags.read(8))
                    # KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL
                    if kf >> 15 & 1 or kf >> 16 & 1:
                        folio_kb[name] = folio_kb.get(name, 0) + PAGE // 1024
    for name, k in sorted(kb.items(), key=lambda x: -x[1]):
        big = "   of which in large folios %7d kB" % folio_kb.get(name, 0) if flags else ""
        print("%-24s %7d kB%s" % (name, k, big))
    print("%-24s %7d kB" % ("in all", sum(kb.values())))
    if functions and text_pages:
        addr, off = section_addresses(binary)[".text"]
        syms = symbols(binary)
        keys = [a for a, _ in syms]
        pages = {}
        for at in text_pages:
            i = bisect.bisect_right(keys, at - off + addr) - 1
            name = syms[i][1] if i >= 0 else "?"
            pages[name] = pages.get(name, 0) + 1
        print("resident pages of .text by function (%d pages):" % len(text_pages))
        for name, n in sorted(pages.items(), key=lambda x: -x[1])[:functions]:
            print("%5d  %s" % (n, name[:150]))


if __name__ == "__main__":
    main()
