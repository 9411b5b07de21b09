#!/usr/bin/env bash
# Runs every test of extentdb. The tests need only the Rust toolchain (present on every
# machine of this project's kind) and crates from crates.io, which cargo fetches itself.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
cargo build --release --bin extentdb
cargo test --workspace --release -- --test-threads=2
