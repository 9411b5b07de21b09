//! Owned by the parser work (in progress).
