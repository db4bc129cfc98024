#!/usr/bin/env bash
# Installs the Debian packages opscope builds and tests with, skipping those already present, then (when
# node and npm are on PATH) the Chrome DevTools trace engine the trace tests load traces in, into
# <repo>/.cache/trace-consumers. Idempotent. Needs root for apt-get; when not root and packages are missing,
# prints the exact command to run and exits 1.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  cmake ninja-build g++ make pkg-config
  libunwind-dev libdw-dev libsqlite3-dev nlohmann-json3-dev libfmt-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  clang libclang-rt-14-dev  # the sanitizer builds and the libFuzzer targets compile with clang (2-3x faster under ASan than g++)
  ccache         # compiler cache: a rebuild of unchanged sources, in this clone or another, is served from it
  sqlite3        # tests read capture.db back with the sqlite3 CLI, as users do
  valgrind       # tests check memcheck's leak report against valgrind's on the same program
  heaptrack      # bench only: memcheck's cost per malloc+free is measured side by side with heaptrack's
  python3-numpy  # tests read capture.db back with Python's sqlite3 + NumPy, as docs/capture.md shows
  libre2-dev     # op lists are regexes from the environment: RE2 matches them in linear time (never hangs)
  libxxhash-dev  # capture deduplicates tensor data by XXH3 hashes (14-16 GB/s here)
  zlib1g-dev     # OP_TRACE_GZIP=1 writes trace.json.gz (about 10x smaller), read back by trace-check and the report
  libopenblas-dev  # the CPU reference multiplies in float64 through OpenBLAS; the benches compare against it
  libopenmpi-dev openmpi-bin  # libmlucl's collectives run on Open MPI; the tests and demos start ranks with mpirun
  chromium       # tests render report.html in real headless Chromium (--dump-dom, --screenshot)
  fonts-dejavu-core fonts-liberation  # fonts for Chromium's screenshots of the report (the page asks for Arial, Helvetica)
  python3-torch libtorch-dev  # torch_mlu, the PyTorch front end (PrivateUse1 device), and its examples and tests
  python3-dev  # torch_mlu reads the program's Python frames (its source lines) through Python's C API headers
  python3-torchvision  # examples/torch_resnet and the tests: real model families (ResNet, MobileNet, VGG) on the MLU
  pybind11-dev  # torch_mlu's torch.distributed backend "mlucl": a c10d ProcessGroup bound to Python as PyTorch binds its own (same pybind11 ABI as Debian's libtorch_python)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
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
fi

# The Chrome DevTools trace engine (npm, pinned: its API is marked unstable), which the trace tests load
# traces in through tools/trace-check/devtools_check.mjs. Skipped without node and npm.
trace_engine=@paulirish/trace_engine
trace_engine_version=0.0.65
consumers="$repo/.cache/trace-consumers"
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  installed=$(node -e 'try { console.log(require(process.argv[1]).version) } catch { }' \
    "$consumers/node_modules/$trace_engine/package.json" 2>/dev/null || true)
  if [ "$installed" != "$trace_engine_version" ]; then
    echo "install-deps: installing $trace_engine@$trace_engine_version into $consumers"
    mkdir -p "$consumers"
    if ! npm install --prefix "$consumers" --save-exact --no-audit --no-fund --loglevel=error \
      "$trace_engine@$trace_engine_version"; then
      echo "install-deps: npm could not install $trace_engine@$trace_engine_version into $consumers" >&2
      echo "install-deps: the DevTools trace tests need it; check the network or npm's registry settings" >&2
      exit 1
    fi
  fi
else
  echo "install-deps: node or npm not found; skipping $trace_engine (the DevTools trace tests need it)" >&2
fi
