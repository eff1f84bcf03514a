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
ver=$(cargo --version | awk '{print $2}')
major=${ver%%.*}; rest=${ver#*.}; minor=${rest%%.*}
if [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "$minor" -lt 85 ]; }; then
  echo "error: cargo $ver is too old; Rust 1.85 or newer is needed (edition 2024)" >&2
  exit 1
fi
