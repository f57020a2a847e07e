#!/usr/bin/env bash
# tiersim set-up. Two commands do everything on a fresh Debian machine:
#   ./setup.sh demo    install what is missing, build, and predict Qwen3-14B on an RTX 4090 under a DisTorch split
#   ./setup.sh test    install what is missing, build, and run every test
# Options: --sanitize (test with AddressSanitizer + UndefinedBehaviorSanitizer, in build-sanitize/).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(cmake ninja-build g++ libyaml-cpp-dev libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
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
    ./build/bin/sim --trace traces/qwen.trace --policy ratio
    ;;
  test)
    install_missing
    if [ "${2:-}" = "--sanitize" ]; then
      build build-sanitize -DTIERSIM_SANITIZE=ON -DTIERSIM_BUILD_CALIB=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
      ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)"
    else
      build build
      ctest --test-dir build --output-on-failure -j "$(nproc)"
    fi
    ;;
  *)
    echo "usage: ./setup.sh demo | ./setup.sh test [--sanitize]" >&2
    exit 2
    ;;
esac
