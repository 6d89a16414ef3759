// storwatch: cq_1h_agent of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "agent" in storwatch/rp_1m -> 1h windows -> "agent" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_agent", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "agent")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["cycle_cpu_us", "report_cpu_us", "process_cpu_us", "lines"], fn: mean),
        data |> rollup(fields: ["cycle_cpu_max_us", "rss_kb", "spool_bytes"], fn: max),
        data |> rollup(fields: ["samples", "source_errors"], fn: sum),
        data |> rollup(fields: ["devices", "interfaces", "dropped_lines", "uptime_s"], fn: last),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
