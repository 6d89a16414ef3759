// storwatch: cq_1m_disk of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "disk" in storwatch/raw -> 1m windows -> "disk" in storwatch/rp_1m, every 1m over the last 5m.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1m_disk", every: 1m, offset: 0s}

data = from(bucket: "storwatch/raw")
    |> range(start: -5m)
    |> filter(fn: (r) => r._measurement == "disk")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1m, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["r_per_s", "w_per_s", "d_per_s", "f_per_s", "rkb_per_s", "wkb_per_s", "dkb_per_s", "rrqm_per_s", "wrqm_per_s", "drqm_per_s", "rrqm_pct", "wrqm_pct", "r_await_ms", "w_await_ms", "d_await_ms", "f_await_ms", "await_ms", "rareq_sz_kb", "wareq_sz_kb", "dareq_sz_kb", "aqu_sz", "util_pct", "svctm_ms"], fn: mean),
        data |> rollup(fields: ["aqu_sz_max", "util_max_pct", "util_p95_pct", "in_flight"], fn: max),
        data |> rollup(fields: ["saturated_s", "interval_s", "resets"], fn: sum),
        data |> rollup(fields: ["util_pct"], fn: max) |> map(fn: (r) => ({r with _field: "util_pct_10s_max"})),
        data |> rollup(fields: ["await_ms"], fn: max) |> map(fn: (r) => ({r with _field: "await_ms_10s_max"})),
        data |> rollup(fields: ["r_await_ms"], fn: max) |> map(fn: (r) => ({r with _field: "r_await_ms_10s_max"})),
        data |> rollup(fields: ["w_await_ms"], fn: max) |> map(fn: (r) => ({r with _field: "w_await_ms_10s_max"})),
        data |> rollup(fields: ["aqu_sz"], fn: max) |> map(fn: (r) => ({r with _field: "aqu_sz_10s_max"})),
        data |> rollup(fields: ["rkb_per_s"], fn: max) |> map(fn: (r) => ({r with _field: "rkb_per_s_10s_max"})),
        data |> rollup(fields: ["wkb_per_s"], fn: max) |> map(fn: (r) => ({r with _field: "wkb_per_s_10s_max"})),
    ],
)
    |> to(bucket: "storwatch/rp_1m")
