#!/usr/bin/env bash
# Runs the demo workloads from a build directory and says where their results are.
set -euo pipefail
build=${1:-build}
echo "== examples/device_query: the simulated MLUs and a copy round trip"
"$build/bin/device_query"
echo
echo "== examples/mnist_train: a short training of the MNIST network on the simulated MLU"
"$build/bin/mnist_train" --steps 100 --batch-size 64 --test-size 2000
echo
echo "== examples/llama_train: a short training of a tiny Llama-style model on Shakespeare, characters as tokens"
"$build/bin/llama_train" --steps 50
echo
echo "demo done: the programs are in $build/bin, the libraries in $build/lib."
