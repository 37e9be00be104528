//! Allocator snapshots as Arrow tables.
