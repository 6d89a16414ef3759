#!/usr/bin/env python3
"""The InfluxDB 3 plugin's own logic, with a stand-in for the Processing Engine's runtime (no
server: none runs here). Checks the window it picks, the SQL it sends per rollup (one aggregate per
continuous-query field, every tag column grouped on, fields the table lacks left out), and the lines
it writes (target database, tags, field types, window-start timestamp).

    python3 deploy/influxdb/v3/test_storwatch_rollups.py     (also run by
    cargo test -p storwatch-dashboards-tests --test it rollups_v2_v3::)

What the stand-in cannot check is that InfluxDB 3's SQL engine accepts the SQL; see docs/deploy.md.
"""
import builtins
import importlib.util
import pathlib
import unittest
from datetime import datetime

HERE = pathlib.Path(__file__).resolve().parent


class Line:
    """Records what the plugin builds, like the engine's LineBuilder."""

    def __init__(self, measurement):
        self.measurement, self.tags, self.fields, self.ns = measurement, {}, {}, None

    def tag(self, k, v):
        self.tags[k] = v
        return self

    def _field(kind):
        def set_field(self, k, v):
            self.fields[k] = (kind, v)
            return self

        return set_field

    int64_field = _field("i64")
    float64_field = _field("f64")
    string_field = _field("str")
    bool_field = _field("bool")

    def time_ns(self, ns):
        self.ns = ns
        return self


class Engine:
    """influxdb3_local: answers the schema query and the rollup query of the `disk` table."""

    def __init__(self):
        self.queries, self.writes, self.errors = [], [], []

    def query(self, sql, args=None):
        self.queries.append(sql)
        if "information_schema.columns" in sql:
            if "'disk'" not in sql:
                return []
            return [
                {"column_name": "time", "data_type": "Timestamp(Nanosecond, None)"},
                {"column_name": "host", "data_type": "Dictionary(Int32, Utf8)"},
                {"column_name": "device", "data_type": "Dictionary(Int32, Utf8)"},
                {"column_name": "util_pct", "data_type": "Float64"},
                {"column_name": "util_max_pct", "data_type": "Float64"},
                {"column_name": "saturated_s", "data_type": "Float64"},
                {"column_name": "in_flight", "data_type": "Int64"},
                # only in the 1 min rollup, which the 1 h level reads
                {"column_name": "util_pct_10s_max", "data_type": "Float64"},
            ]
        return [
            {
                "window_start": 1_767_268_620_000_000_000,
                "host": "ds01",
                "device": None,
                "util_pct": 20.8,
                "util_max_pct": 100.0,
                "util_pct_10s_max": 100.0,
                "saturated_s": 10.0,
                "in_flight": 2,
            }
        ]

    def write_to_db(self, db, line):
        self.writes.append((db, line))

    def info(self, msg):
        pass

    def error(self, msg):
        self.errors.append(msg)


def load_plugin():
    builtins.LineBuilder = Line
    spec = importlib.util.spec_from_file_location("storwatch_rollups", HERE / "storwatch_rollups.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PluginTest(unittest.TestCase):
    def setUp(self):
        self.plugin = load_plugin()
        self.engine = Engine()

    def disk_query(self):
        return next(q for q in self.engine.queries if q.startswith("SELECT date_bin"))

    def test_one_minute_level(self):
        self.plugin.process_scheduled_call(self.engine, datetime(2026, 1, 1, 12, 0, 30), {"level": "1m"})
        self.assertEqual(self.engine.errors, [])
        sql = self.disk_query()
        # the last five whole minutes, one-minute windows
        self.assertIn("WHERE time >= '2026-01-01T11:55:00Z' AND time < '2026-01-01T12:00:00Z'", sql)
        self.assertIn("date_bin(INTERVAL '60 seconds', time) AS window_start", sql)
        # every tag grouped on; the continuous query's aggregates of the fields the table has
        self.assertTrue(sql.endswith('GROUP BY window_start, "host", "device"'), sql)
        for part in [
            'avg("util_pct") AS "util_pct"',
            'max("util_max_pct") AS "util_max_pct"',
            'max("util_pct") AS "util_pct_10s_max"',
            'sum("saturated_s") AS "saturated_s"',
            'max("in_flight") AS "in_flight"',
        ]:
            self.assertIn(part, sql)
        self.assertNotIn("await_ms", sql)  # not in this table: left out, not an error
        # only the 1 min rollups ran: one schema query per 1 min continuous query
        schema = [q for q in self.engine.queries if "information_schema" in q]
        self.assertEqual(len(schema), sum(1 for r in self.plugin.ROLLUPS if r[0] == "1m"))
        [(db, line)] = self.engine.writes
        self.assertEqual(db, "storwatch/rp_1m")
        self.assertEqual(line.measurement, "disk")
        self.assertEqual(line.tags, {"host": "ds01"})  # a null tag is no tag
        self.assertEqual(line.fields["util_max_pct"], ("f64", 100.0))
        self.assertEqual(line.fields["util_pct_10s_max"], ("f64", 100.0))
        self.assertEqual(line.fields["in_flight"], ("i64", 2))
        self.assertEqual(line.ns, 1_767_268_620_000_000_000)

    def test_one_hour_level_and_backfill(self):
        self.plugin.process_scheduled_call(
            self.engine,
            datetime(2026, 1, 1, 12, 0, 5),
            {"level": "1h", "end": "2026-01-01T09:30:00Z", "window": "1h"},
        )
        sql = self.disk_query()
        self.assertIn("WHERE time >= '2026-01-01T08:00:00Z' AND time < '2026-01-01T09:00:00Z'", sql)
        self.assertIn("INTERVAL '3600 seconds'", sql)
        self.assertIn('max("util_pct_10s_max") AS "util_pct_10s_max"', sql)
        self.assertEqual(self.engine.writes[0][0], "storwatch/rp_1h")

    def test_last_skips_nulls(self):
        self.assertEqual(
            self.plugin._sql_aggregate("last", "state"),
            'last_value("state" ORDER BY time) FILTER (WHERE "state" IS NOT NULL)',
        )

    def test_bad_level_is_logged(self):
        self.plugin.process_scheduled_call(self.engine, datetime(2026, 1, 1), {"level": "5m"})
        self.assertEqual(len(self.engine.errors), 1)
        self.assertEqual(self.engine.queries, [])


if __name__ == "__main__":
    unittest.main()
