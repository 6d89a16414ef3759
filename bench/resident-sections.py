#!/usr/bin/env python3
"""Which parts of a running program's own file are resident: kB by ELF section.

    bench/resident-sections.py PID

Reads /proc/PID/maps for the mappings of the process's executable and /proc/PID/pagemap (root:
bit 63 of each page's entry is "present") for which of their pages are in memory, and gives each
present page to the section its file offset falls in (`readelf -S`). A page of a private mapping
that was written (relocations: `.data.rel.ro`, the GOT) is counted where its file offset is, as
smaps counts it in the file's Rss. Pages past every section (headers, padding) are "other".
"""
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


def main():
    pid = sys.argv[1]
    binary = os.readlink("/proc/%s/exe" % pid)
    secs = sections(binary)
    kb = {}
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
    for name, k in sorted(kb.items(), key=lambda x: -x[1]):
        print("%-24s %7d kB" % (name, k))
    print("%-24s %7d kB" % ("in all", sum(kb.values())))


if __name__ == "__main__":
    main()
