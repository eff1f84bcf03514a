#!/usr/bin/env bash
# Installs what a fresh Debian/Ubuntu machine lacks to build and test the project.
# Safe to run repeatedly; does nothing when everything is present.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
have_pkg libclang-dev || need+=(libclang-dev)   # bindgen, for the libccp crate (differential tests)
command -v make >/dev/null || need+=(make)      # the libccp crate builds its C code with make
command -v cc >/dev/null || need+=(gcc)          # also aws-lc-sys (datapath/quic's TLS), built with cc: no cmake
command -v ip >/dev/null || need+=(iproute2)
command -v ping >/dev/null || need+=(iputils-ping)   # ccp-emu end-to-end tests (delay, testbed)
command -v iperf3 >/dev/null || need+=(iperf3)       # ccp-emu tests and bench: kernel TCP (cubic) across the emulator
# datapath/bpf: clang compiles the BPF congestion control, libbpf (built by libbpf-sys) needs
# libelf, zlib and pkg-config, bpftool generates vmlinux.h from the kernel's BTF.
command -v clang >/dev/null || need+=(clang)
have_pkg libelf-dev || need+=(libelf-dev)
have_pkg zlib1g-dev || need+=(zlib1g-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
if ! command -v bpftool >/dev/null; then
  # Debian packages bpftool on its own; Ubuntu ships it in linux-tools.
  if apt-cache show bpftool >/dev/null 2>&1; then need+=(bpftool); else need+=(linux-tools-common "linux-tools-$(uname -r)"); fi
fi

if ((${#need[@]})); then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  # Debian 13 / Ubuntu 24.04 package rustup; older releases need it from rustup.rs.
  command -v rustup >/dev/null || { sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"; $sudo apt-get install -y -qq rustup >/dev/null 2>&1 || true; }
  command -v rustup >/dev/null && rustup default stable >/dev/null
fi
if ! command -v cargo >/dev/null; then
  echo "error: no Rust toolchain: install rustup (https://rustup.rs) and run 'rustup default stable'" >&2
  exit 1
fi
# The oldest Rust that builds the workspace: s2n-quic 0.91 (datapath/quic) declares 1.95.
want_minor=95
too_old() {
  local ver major rest minor
  ver=$(cargo --version | awk '{print $2}')
  major=${ver%%.*}; rest=${ver#*.}; minor=${rest%%.*}
  [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt "$want_minor" ]; }
}
if too_old && command -v rustup >/dev/null; then
  echo "updating Rust: $(cargo --version) is older than 1.$want_minor"
  rustup update stable >/dev/null && rustup default stable >/dev/null
fi
if too_old; then
  echo "error: $(cargo --version) is too old; Rust 1.$want_minor or newer is needed (s2n-quic 0.91); run 'rustup update stable'" >&2
  exit 1
fi
