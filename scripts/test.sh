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
# Seed 003's lab mounts a small ext4 image: it needs mkfs.ext4 and filefrag (e2fsprogs).
if ! command -v mkfs.ext4 >/dev/null 2>&1 || ! command -v filefrag >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs
  fi
fi
cargo build --release --bin extentdb
cargo test --workspace --release -- --test-threads=2
