#!/usr/bin/env bash
# Install what running aarch64 IREE programs on this x86-64 host needs (correctness only: qemu-user is ~400x
# slower than native, so nothing it runs is ever timed): qemu-user-static and the arm64 C/C++ runtime libraries
# (Debian/Ubuntu packages), and IREE's aarch64 runtime tools (iree-run-module) from the iree-base-runtime wheel,
# unpacked into a cache directory. Best effort: prints what is missing and exits non-zero; tests then skip.
#
#   bash tools/install_qemu_aarch64.sh [CACHE_DIR]      # default: ${ANSOR_QEMU_CACHE:-~/.cache/ansor-mlir/aarch64}
set -uo pipefail
IREE_VERSION=3.13.0
CACHE="${1:-${ANSOR_QEMU_CACHE:-$HOME/.cache/ansor-mlir/aarch64}}"
SYSROOT=/usr/aarch64-linux-gnu

if ! command -v qemu-aarch64-static >/dev/null || [ ! -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ] \
   || [ ! -e "$SYSROOT/lib/libstdc++.so.6" ]; then
  if ! command -v apt-get >/dev/null; then
    echo "install_qemu_aarch64: no apt-get; install qemu-user-static and arm64 libc/libstdc++ by hand" >&2
    exit 1
  fi
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends \
    qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross >/dev/null \
    || { echo "install_qemu_aarch64: apt-get install failed" >&2; exit 1; }
fi

TOOL="$CACHE/iree-base-runtime-$IREE_VERSION/iree/_runtime_libs/iree-run-module"
if [ ! -x "$TOOL" ]; then
  mkdir -p "$CACHE" && rm -rf "$CACHE/download"
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
      --python-version 3.11 "iree-base-runtime==$IREE_VERSION" -d "$CACHE/download" \
    || { echo "install_qemu_aarch64: could not download the aarch64 iree-base-runtime wheel" >&2; exit 1; }
  python3 -m zipfile -e "$CACHE"/download/iree_base_runtime-*.whl "$CACHE/iree-base-runtime-$IREE_VERSION" \
    || { echo "install_qemu_aarch64: could not unpack the wheel" >&2; exit 1; }
  chmod +x "$CACHE/iree-base-runtime-$IREE_VERSION"/iree/_runtime_libs/iree-*
  rm -rf "$CACHE/download"
fi
if ! qemu-aarch64-static -L "$SYSROOT" "$TOOL" --help >/dev/null 2>&1; then
  echo "install_qemu_aarch64: $TOOL does not run under qemu-aarch64-static" >&2
  exit 1
fi
echo "$TOOL"
