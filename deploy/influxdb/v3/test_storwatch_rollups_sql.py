#!/usr/bin/env python3
"""The InfluxDB 3 plugin's SQL, run by Apache DataFusion — the query engine inside InfluxDB 3 —
on tables shaped as InfluxDB 3 stores them (a `time` column, tags as Dictionary(Int32, Utf8),
one nullable column per field). An hour of 10 s disk reports with one burst, an MD array
that degrades for 20 s and a worker node's jobs (one 10 s I/O stall, jobs coming and going) go
through the 1 min level, the lines it writes become the 1 min tables,
and those go through the 1 h level, as the two triggers chain on a server.

    python3 deploy/influxdb/v3/test_storwatch_rollups_sql.py
    (needs the `datafusion` Python package; scripts/test.sh installs it; also run by
    cargo test -p storwatch-dashboards-tests --test it rollups_v2_v3::)

Not a server: the engine's Python runtime (query/write_to_db/LineBuilder) is a stand-in, and the
DataFusion here is the PyPI release, not necessarily the version a given InfluxDB 3 embeds.
"""
import pathlib
import sys
import unittest
from datetime import datetime, timedelta, timezone

import datafusion
import pyarrow as pa

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_storwatch_rollups import Engine, load_plugin  # noqa: E402 (and the LineBuilder stand-in)
H0 = datetime(2026, 1, 1, 11, 0, tzinfo=timezone.utc)  # the hour under test
BURST = H0 + timedelta(minutes=17, seconds=30)  # the 10 s report at 100 %
MEASUREMENTS = ("disk", "md", "jobs")


def table(rows, tags, fields):
    """An InfluxDB 3 table from dicts: `time` (datetime), tags, fields {name: arrow type}."""
    cols = {"time": pa.array([r["time"].replace(tzinfo=None) for r in rows], pa.timestamp("ns"))}
    for t in tags:
        cols[t] = pa.array([r.get(t) for r in rows], pa.string()).dictionary_encode()
        cols[t] = cols[t].cast(pa.dictionary(pa.int32(), pa.string()))
    for f, typ in fields.items():
        cols[f] = pa.array([r.get(f) for r in rows], typ)
    return pa.table(cols)


def table_of_lines(lines, measurement):
    """What the target database holds after the plugin's writes to one measurement."""
    lines = [l for l in lines if l.measurement == measurement]
    tags = sorted({k for l in lines for k in l.tags})
    kinds = {}
    for l in lines:
        for f, (kind, _) in l.fields.items():
            kinds[f] = kind
    rows = []
    for l in lines:
        r = {"time": datetime.fromtimestamp(l.ns / 1e9, timezone.utc)}
        r.update(l.tags)
        r.update({f: v for f, (_, v) in l.fields.items()})
        rows.append(r)
    arrow = {"i64": pa.int64(), "f64": pa.float64(), "str": pa.string(), "bool": pa.bool_()}
    return table(rows, tags, {f: arrow[k] for f, k in kinds.items()})


class DataFusionEngine(Engine):
    """influxdb3_local over DataFusion: the trigger's database is the registered tables."""

    def __init__(self, tables):
        super().__init__()
        config = datafusion.SessionConfig().with_information_schema(True)
        self.ctx = datafusion.SessionContext(config)
        for name, t in tables.items():
            self.ctx.register_record_batches(name, [t.to_batches()])

    def query(self, sql, args=None):
        # InfluxDB 3 lists its tables under the schema `iox`; DataFusion's default is `public`
        sql = sql.replace("table_schema = 'iox'", "table_schema = 'public'")
        return self.ctx.sql(sql).to_arrow_table().to_pylist()


def raw_tables():
    disk, md, jobs = [], [], []
    t = H0
    while t < H0 + timedelta(hours=1):
        burst = t == BURST
        disk.append({
            "time": t, "host": "ds01", "device": "sdq", "kind": "disk",
            "util_pct": 100.0 if burst else 5.0, "util_max_pct": 100.0 if burst else 8.0,
            "saturated_s": 10.0 if burst else 0.0, "interval_s": 10.0,
            "await_ms": 250.0 if burst else 4.0, "in_flight": 2,
        })
        degraded = H0 + timedelta(minutes=40, seconds=10) <= t <= H0 + timedelta(minutes=40, seconds=20)
        md.append({
            "time": t, "host": "ds01", "array": "md127", "level": "raid6",
            # the last report of minute 40 carries no state: last() takes the latest non-null one
            "state": None if t == H0 + timedelta(minutes=40, seconds=50) else ("degraded" if degraded else "clean"),
            "redundancy_left": 1 if degraded else 2, "degraded": 1 if degraded else 0, "stalled": False,
        })
        # 12 jobs, 14 during minute 25's stall (its second report); a job starts in every
        # minute's first report and ends in its last
        stall = t == H0 + timedelta(minutes=25, seconds=10)
        jobs.append({
            "time": t, "host": "wn01",
            "count": 14 if stall else 12, "stalled": 3 if stall else 0, "dropped": 0,
            "started": 1 if t.second == 0 else 0, "ended": 1 if t.second == 50 else 0,
            "cpu_efficiency_pct": 40.0 if stall else 90.0, "io_stall_pct": 80.0 if stall else 2.0,
            "io_full_pct": 0.0, "cpu_s": 100.0,
        })
        t += timedelta(seconds=10)
    return {
        "jobs": table(jobs, ["host"], {
            "count": pa.int64(), "stalled": pa.int64(), "dropped": pa.int64(),
            "started": pa.int64(), "ended": pa.int64(), "cpu_efficiency_pct": pa.float64(),
            "io_stall_pct": pa.float64(), "io_full_pct": pa.float64(), "cpu_s": pa.float64()}),
        "disk": table(disk, ["host", "device", "kind"], {
            "util_pct": pa.float64(), "util_max_pct": pa.float64(), "saturated_s": pa.float64(),
            "interval_s": pa.float64(), "await_ms": pa.float64(), "in_flight": pa.int64()}),
        "md": table(md, ["host", "array", "level"], {
            "state": pa.string(), "redundancy_left": pa.int64(), "degraded": pa.int64(),
            "stalled": pa.bool_()}),
    }


def at(lines, measurement, when):
    found = [l for l in lines if l.measurement == measurement and l.ns == int(when.timestamp()) * 10**9]
    assert len(found) == 1, (measurement, when, len(found))
    return found[0]


class RollupsOnDataFusion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        plugin = load_plugin()
        end = (H0 + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        # the 1 min trigger, backfilling the hour (as a trigger given end and window would)
        raw = DataFusionEngine(raw_tables())
        plugin.process_scheduled_call(raw, H0, {"level": "1m", "end": end, "window": "1h"})
        cls.raw_errors = raw.errors
        cls.minute = [l for db, l in raw.writes if db == "storwatch/rp_1m"]
        cls.minute_dbs = {db for db, _ in raw.writes}
        # the 1 h trigger on what the 1 min level wrote
        rp_1m = DataFusionEngine({m: table_of_lines(cls.minute, m) for m in MEASUREMENTS})
        plugin.process_scheduled_call(rp_1m, H0, {"level": "1h", "end": end, "window": "1h"})
        cls.hour_errors = rp_1m.errors
        cls.hour = [l for db, l in rp_1m.writes if db == "storwatch/rp_1h"]

    def test_no_errors_and_the_right_databases(self):
        self.assertEqual(self.raw_errors, [])
        self.assertEqual(self.hour_errors, [])
        self.assertEqual(self.minute_dbs, {"storwatch/rp_1m"})

    def test_one_minute_keeps_the_burst(self):
        self.assertEqual(len([l for l in self.minute if l.measurement == "disk"]), 60)
        m = at(self.minute, "disk", H0 + timedelta(minutes=17))
        self.assertEqual(m.tags, {"host": "ds01", "device": "sdq", "kind": "disk"})
        self.assertEqual(m.fields["util_max_pct"], ("f64", 100.0))
        self.assertEqual(m.fields["util_pct_10s_max"], ("f64", 100.0))
        self.assertEqual(m.fields["saturated_s"], ("f64", 10.0))
        self.assertEqual(m.fields["interval_s"], ("f64", 60.0))
        self.assertEqual(m.fields["await_ms_10s_max"], ("f64", 250.0))
        self.assertAlmostEqual(m.fields["util_pct"][1], (100 + 5 * 5) / 6)
        self.assertEqual(m.fields["in_flight"], ("i64", 2))
        quiet = at(self.minute, "disk", H0 + timedelta(minutes=16))
        self.assertEqual(quiet.fields["util_max_pct"], ("f64", 8.0))

    def test_one_minute_keeps_states(self):
        m = at(self.minute, "md", H0 + timedelta(minutes=40))
        self.assertEqual(m.fields["state"], ("str", "clean"))  # last non-null of the minute
        self.assertEqual(m.fields["redundancy_left"], ("i64", 1))  # worst
        self.assertEqual(m.fields["degraded"], ("i64", 1))
        self.assertEqual(m.fields["stalled"], ("bool", False))
        self.assertEqual(m.tags, {"host": "ds01", "array": "md127", "level": "raid6"})

    def test_one_hour_keeps_the_burst_and_the_worst_state(self):
        h = at(self.hour, "disk", H0)
        self.assertEqual(h.fields["util_max_pct"], ("f64", 100.0))
        self.assertEqual(h.fields["util_pct_10s_max"], ("f64", 100.0))
        self.assertEqual(h.fields["saturated_s"], ("f64", 10.0))
        self.assertEqual(h.fields["interval_s"], ("f64", 3600.0))
        self.assertAlmostEqual(h.fields["util_pct"][1], ((100 + 25) / 6 + 59 * 5) / 60)
        md = at(self.hour, "md", H0)
        self.assertEqual(md.fields["redundancy_left"], ("i64", 1))
        self.assertEqual(md.fields["state"], ("str", "clean"))

    def test_jobs_keep_the_most_jobs_the_sums_and_the_stall(self):
        m = at(self.minute, "jobs", H0 + timedelta(minutes=25))
        self.assertEqual(m.tags, {"host": "wn01"})
        self.assertEqual(m.fields["count"], ("i64", 14))  # the most at one reading
        self.assertEqual(m.fields["stalled"], ("i64", 3))
        self.assertEqual(m.fields["started"], ("i64", 1))  # summed, still an integer
        self.assertEqual(m.fields["ended"], ("i64", 1))
        self.assertEqual(m.fields["cpu_s"], ("f64", 600.0))
        self.assertEqual(m.fields["io_stall_pct_10s_max"], ("f64", 80.0))
        self.assertAlmostEqual(m.fields["io_stall_pct"][1], (80 + 5 * 2) / 6)
        h = at(self.hour, "jobs", H0)
        self.assertEqual(h.fields["count"], ("i64", 14))
        self.assertEqual(h.fields["stalled"], ("i64", 3))
        self.assertEqual(h.fields["dropped"], ("i64", 0))
        self.assertEqual(h.fields["started"], ("i64", 60))
        self.assertEqual(h.fields["ended"], ("i64", 60))
        self.assertEqual(h.fields["cpu_s"], ("f64", 360 * 100.0))
        self.assertEqual(h.fields["io_stall_pct_10s_max"], ("f64", 80.0))
        # equal 10 s reports: the mean of minute means is the time-weighted mean of the reports
        self.assertAlmostEqual(h.fields["io_stall_pct"][1], (80 + 359 * 2) / 360)
        self.assertAlmostEqual(h.fields["cpu_efficiency_pct"][1], (40 + 359 * 90) / 360)


if __name__ == "__main__":
    unittest.main()
