//! Owned by the value-semantics work (in progress).
