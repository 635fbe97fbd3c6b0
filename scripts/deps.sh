#!/usr/bin/env bash
# Installs the Debian packages pipetwin builds with, where they are missing.
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is not a Debian package here: when it is present the
# CUDA backend builds too (the program pipetwin-cuda), and without it the build goes on without it.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libyaml-cpp-dev libeigen3-dev libopenmpi-dev openmpi-bin
      nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libboost-dev
      libboost-program-options-dev python3-matplotlib time zlib1g-dev python3-dev pybind11-dev
      python3-yaml clang libclang-rt-dev libopenblas-dev)  # clang: libFuzzer for scripts/fuzz.sh
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
