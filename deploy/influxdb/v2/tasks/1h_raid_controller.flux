// storwatch: cq_1h_raid_controller of deploy/influxdb/setup.influxql as an InfluxDB 2.x task.
// "raid_controller" in storwatch/rp_1m -> 1h windows -> "raid_controller" in storwatch/rp_1h, every 1h over the last 2h.
// Generated from contract/*.yaml by `cargo xtask gen`: edit the contract, not this file.
option task = {name: "storwatch_1h_raid_controller", every: 1h, offset: 1m}

data = from(bucket: "storwatch/rp_1m")
    |> range(start: -2h)
    |> filter(fn: (r) => r._measurement == "raid_controller")

// One aggregate over the fields named; the window's start is the row's time, as in
// InfluxQL, and every tag is kept (to() writes the string columns as tags: GROUP BY *).
rollup = (tables=<-, fields, fn) =>
    tables
        |> filter(fn: (r) => contains(value: r._field, set: fields))
        |> aggregateWindow(every: 1h, fn: fn, timeSrc: "_start", createEmpty: false)

union(
    tables: [
        data |> rollup(fields: ["status", "ok", "vds", "pds", "bbu_present", "bbu_state", "bbu_ok", "read_ok", "read_error"], fn: last),
        data |> rollup(fields: ["vds_degraded", "vds_offline", "pds_failed", "roc_temperature_c", "last_read_age_s"], fn: max),
    ],
)
    |> to(bucket: "storwatch/rp_1h")
