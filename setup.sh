#!/usr/bin/env bash
# tiersim set-up. Two commands do everything on a fresh Debian machine:
#   ./setup.sh demo    install what is missing, build, and predict Qwen3-14B on an RTX 4090 under a DisTorch split
#   ./setup.sh test    install what is missing, build, and run every test
#   ./setup.sh fuzz [SECONDS]   install clang, build the libFuzzer harnesses (build-fuzz/) and run each
#                      for SECONDS (default 60); findings go to tests/fuzz/regressions/ (exit 1)
# Options: --sanitize (test with AddressSanitizer + UndefinedBehaviorSanitizer, in build-sanitize/).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(cmake ninja-build g++ pkg-config libyaml-cpp-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libre2-dev parallel)
# libFuzzer and the sanitizer runtimes for clang come in libclang-rt-14-dev on Debian 12.
FUZZ_PACKAGES=(clang libclang-rt-14-dev)

install_missing() {  # install_missing [EXTRA PACKAGES...]
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

build() {  # build DIR [cmake args...]
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
}

case "${1:-}" in
  demo)
    install_missing
    build build
    echo
    ./build/bin/sim --trace traces/qwen.trace --policy ratio --split "cuda:0,75%;cpu,25%"
    ;;
  test)
    install_missing
    if [ "${2:-}" = "--sanitize" ]; then
      # -O1 -g1: line tables for the sanitizers' reports at half the compile time of RelWithDebInfo's -O2 -g
      # (one TU each under ASan + UBSan with g++ 12 on 2 cores: sim/cli/main.cpp 133 -> 73 s, sim/replay/step_plan.cpp
      # 14.1 -> 6.3 s, tests/managed/managed_memory_test.cpp 23.5 -> 12.5 s; session 30). Asserts stay off as before.
      build build-sanitize -DTIERSIM_SANITIZE=ON -DTIERSIM_BUILD_CALIB=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
      ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)"
    else
      build build
      ctest --test-dir build --output-on-failure -j "$(nproc)"
    fi
    ;;
  fuzz)
    install_missing "${FUZZ_PACKAGES[@]}"
    CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIERSIM_FUZZ=ON \
      -DTIERSIM_BUILD_TESTS=OFF -DTIERSIM_BUILD_CALIB=OFF >/dev/null
    cmake --build build-fuzz -j "$(nproc)" --target tiersim_fuzzers
    FUZZ_BUILD=build-fuzz FUZZ_JOBS="$(nproc)" tests/fuzz/run_fuzzers.sh "${2:-60}"
    ;;
  *)
    echo "usage: ./setup.sh demo | ./setup.sh test [--sanitize] | ./setup.sh fuzz [SECONDS]" >&2
    exit 2
    ;;
esac
