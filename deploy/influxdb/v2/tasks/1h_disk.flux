// storwatch: cq_1h_disk of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "disk" in storwatch/rp_1m -> 1h windows -> "disk" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_disk", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "disk")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["r_per_s", "w_per_s", "d_per_s", "f_per_s", "rkb_per_s", "wkb_per_s", "dkb_per_s", "rrqm_per_s", "wrqm_per_s", "drqm_per_s", "rrqm_pct", "wrqm_pct", "r_await_ms", "w_await_ms", "d_await_ms", "f_await_ms", "await_ms", "rareq_sz_kb", "wareq_sz_kb", "dareq_sz_kb", "aqu_sz", "util_pct", "svctm_ms"], fn: mean),
        data |> rollup(fields: ["aqu_sz_max", "util_max_pct", "util_p95_pct", "in_flight", "util_pct_10s_max", "await_ms_10s_max", "r_await_ms_10s_max", "w_await_ms_10s_max", "aqu_sz_10s_max", "rkb_per_s_10s_max", "wkb_per_s_10s_max"], fn: max),
        data |> rollup(fields: ["saturated_s", "interval_s", "resets"], fn: sum),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
