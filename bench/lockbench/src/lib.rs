//! See benches/lock.rs.
