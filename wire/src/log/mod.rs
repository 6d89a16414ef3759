//! The segment log shared by the agent's spool and the collector's queue.
