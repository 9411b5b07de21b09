#!/usr/bin/env bash
# Runs every test of extentdb. Besides the Rust toolchain (present on every machine of this
# project's kind) and crates from crates.io, which cargo fetches itself, the real-client
# tests (crates/cli/tests/tds_clients.rs) need SQL Server's clients, installed below when
# missing: FreeTDS tsql (Debian), python-tds, pymssql, mssql-python, SQLAlchemy,
# sqlalchemy-pytds and pandas (PyPI), tedious (npm, in
# tests/clients/tedious) and mssql-jdbc (Maven, built into tests/clients/jdbc/target). Each
# step is skipped when its result is already there. XDB_SKIP_CLIENTS=1 skips those tests.
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

# Real SQL Server clients (crates/cli/tests/tds_clients.rs).
PYTHON_TDS_VERSION=1.17.1
PYMSSQL_VERSION=2.4.6
MSSQL_PYTHON_VERSION=1.16.0
# SQLAlchemy's mssql dialect (mssql+pymssql; mssql+pytds from sqlalchemy-pytds) and pandas
# (tests/clients/sqlalchemy_suite.py).
SQLALCHEMY_VERSION=2.0.58
SQLALCHEMY_PYTDS_VERSION=1.0.3
PANDAS_VERSION=2.3.3
warn() { echo "scripts/test.sh: $*; the client tests that need it will fail" >&2; }
apt_updated=
apt_install() {
  [ "$(id -u)" = 0 ] || { warn "not root, cannot apt-get install $*"; return 1; }
  if [ -z "$apt_updated" ]; then apt-get update -qq && apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}
if [ "${XDB_SKIP_CLIENTS:-}" != 1 ]; then
  command -v tsql >/dev/null 2>&1 || apt_install freetds-bin || warn "freetds-bin not installed"
  command -v python3 >/dev/null 2>&1 || apt_install python3 python3-pip || warn "python3 not installed"
  if ! python3 - "$PYTHON_TDS_VERSION" "$PYMSSQL_VERSION" "$MSSQL_PYTHON_VERSION" \
      "$SQLALCHEMY_VERSION" "$SQLALCHEMY_PYTDS_VERSION" "$PANDAS_VERSION" >/dev/null 2>&1 <<'PY'
import sys, importlib.metadata as m
import pytds, pymssql, mssql_python, sqlalchemy, sqlalchemy_pytds, pandas
want = ["python-tds", "pymssql", "mssql-python", "SQLAlchemy", "sqlalchemy-pytds", "pandas"]
sys.exit(any(m.version(p) != v for p, v in zip(want, sys.argv[1:])))
PY
  then
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip || true
    # Debian's own Python refuses pip installs without this (PEP 668); others ignore it.
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check \
      "python-tds==$PYTHON_TDS_VERSION" "pymssql==$PYMSSQL_VERSION" \
      "mssql-python==$MSSQL_PYTHON_VERSION" "SQLAlchemy==$SQLALCHEMY_VERSION" \
      "sqlalchemy-pytds==$SQLALCHEMY_PYTDS_VERSION" "pandas==$PANDAS_VERSION" \
      || warn "pip install python-tds pymssql mssql-python SQLAlchemy sqlalchemy-pytds pandas failed"
  fi
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 \
    || apt_install nodejs npm || warn "node/npm not installed"
  if command -v npm >/dev/null 2>&1; then
    ( cd tests/clients/tedious
      if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
        npm ci --no-audit --no-fund --loglevel=error
      fi ) || warn "npm ci in tests/clients/tedious failed"
  fi
  command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 \
    || apt_install default-jdk-headless maven || warn "java/maven not installed"
  if command -v mvn >/dev/null 2>&1; then
    ( cd tests/clients/jdbc
      jar=target/extentdb-jdbc-tests.jar
      if [ ! -f "$jar" ] || [ -n "$(find pom.xml src -newer "$jar" -print -quit)" ]; then
        mvn -q -B package
      fi ) || warn "the Maven build of tests/clients/jdbc failed"
  fi
fi

cargo build --release --bin extentdb

# The benchmark report's quick mode (bench/report.py, docs/BENCHMARKS.md): every seed
# experiment at small sizes, failing only on a gross regression measured as a ratio against
# a baseline from the same run. It runs before the tests so that cargo's summary stays last.
# Its charts need matplotlib (PyPI). XDB_SKIP_BENCH=1 skips it.
MATPLOTLIB_VERSION=3.11.2
if [ "${XDB_SKIP_BENCH:-}" != 1 ]; then
  if ! python3 -c 'import matplotlib' >/dev/null 2>&1; then
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip || true
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check \
      "matplotlib==$MATPLOTLIB_VERSION" || warn "pip install matplotlib failed"
  fi
  # Its concurrency part builds bench/wire/ with Go 1.25 or later, installed on this project's
  # machines (Debian's golang-go is too old for its go.mod); the modules come from the Go
  # module proxy, pinned by bench/wire/go.sum.
  command -v go >/dev/null 2>&1 || warn "go not found: the report's concurrency part will fail"
  # Its memory part (bench/memory.py) drives the server with python-tds.
  if ! python3 -c 'import pytds' >/dev/null 2>&1; then
    python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip || true
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --disable-pip-version-check \
      "python-tds==$PYTHON_TDS_VERSION" || warn "pip install python-tds failed"
  fi
  # The harness's own tests (its /proc and getrusage CPU readings) before it measures.
  if command -v go >/dev/null 2>&1; then (cd bench/wire && go test .); fi
  python3 bench/report.py --quick
fi

cargo test --workspace --release -- --test-threads=2

# Coverage-guided fuzzing of every TDS decoder (fuzz/), briefly, where a nightly toolchain
# exists; crates/tds/tests/decoder_fuzz.rs runs the same decoders on stable above.
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz \
    || echo "scripts/test.sh: cargo-fuzz could not be installed; fuzzing skipped" >&2
  if command -v cargo-fuzz >/dev/null 2>&1; then
    # A toolchain that cannot build the harness is the machine's problem, not a finding;
    # a crash while fuzzing is a finding and fails the run.
    if ( cd fuzz && cargo +nightly fuzz build decoders ); then
      ( cd fuzz && cargo +nightly fuzz run decoders -- -max_total_time="${XDB_FUZZ_SECONDS:-30}" )
    else
      echo "scripts/test.sh: the fuzz harness did not build on this nightly; fuzzing skipped" >&2
    fi
  fi
else
  echo "scripts/test.sh: no nightly toolchain; cargo-fuzz skipped (decoder_fuzz.rs ran on stable)" >&2
fi
