#!/usr/bin/env bash
# Runs every iwnic test on a Debian 12 machine, installing what the tests need first
# (scripts/setup.sh: verilator, tshark, qemu, the YoWASP ECP5 tools, the RISC-V toolchain).
#
#   1. formatting and clippy (warnings are errors)
#   2. cargo test --workspace: unit, integration and property tests, the Wireshark checks
#   3. scripts/riscv-firmware.sh: the firmware built for riscv32imac, self-tests under QEMU
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

step() { printf '\n==== %s\n' "$*"; }

step "setup (installs only what is missing)"
scripts/setup.sh
. .tools/env.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test --workspace"
cargo test --workspace --locked

step "firmware on riscv32imac under QEMU"
scripts/riscv-firmware.sh

printf '\n==== all iwnic tests passed\n'
