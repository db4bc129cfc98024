#!/usr/bin/env bash
# Installs the Debian packages opscope builds and tests with, skipping those already present.
# Idempotent. Needs root for apt-get; when not root, prints the exact command to run and exits 1.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config
  libunwind-dev libdw-dev libsqlite3-dev nlohmann-json3-dev libfmt-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  sqlite3        # tests read capture.db back with the sqlite3 CLI, as users do
  python3-numpy  # tests read capture.db back with Python's sqlite3 + NumPy, as the README shows
  libopenblas-dev  # bench only: bench_gemm measures the device matmul side by side with a tuned BLAS
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

cmd=(apt-get install -y --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root:  ${cmd[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when the install cannot find a package.
if ! "${cmd[@]}"; then
  apt-get update
  "${cmd[@]}"
fi
