//! `/proc/net/dev`: per-interface byte, packet, error and drop counters.

use super::Rows;

/// One interface row of `/proc/net/dev`; the 16 counters in kernel column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetDev<'a> {
    /// Interface name (may be 15 characters, or glued to the first counter on old kernels).
    pub iface: &'a str,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errs: u64,
    /// Received packets dropped.
    pub rx_drop: u64,
    /// Receive FIFO overruns.
    pub rx_fifo: u64,
    /// Receive frame alignment errors.
    pub rx_frame: u64,
    /// Compressed packets received.
    pub rx_compressed: u64,
    /// Multicast packets received.
    pub rx_multicast: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
    /// Transmit errors.
    pub tx_errs: u64,
    /// Transmit packets dropped.
    pub tx_drop: u64,
    /// Transmit FIFO errors.
    pub tx_fifo: u64,
    /// Collisions.
    pub tx_colls: u64,
    /// Carrier errors.
    pub tx_carrier: u64,
    /// Compressed packets transmitted.
    pub tx_compressed: u64,
}

/// Parses the whole file (two header lines, then one row per interface). Never panics.
pub fn parse(text: &str) -> Rows<NetDev<'_>> {
    let _ = text;
    unimplemented!("netdev::parse")
}
