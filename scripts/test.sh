#!/usr/bin/env bash
# Runs every iwnic test on a Debian 12 machine, installing what the tests need first
# (scripts/setup.sh: verilator, tshark, qemu, the YoWASP ECP5 tools, the RISC-V toolchain).
#
#   1. formatting and clippy (warnings are errors)
#   2. cargo test --workspace: unit, integration and property tests, the Wireshark checks
#   3. the host-driver contract suite and the sim scenario again, unchanged, on the
#      Verilated nic_top, and a short part of it on RustHDL's simulator
#   4. scripts/riscv-firmware.sh: the firmware built for riscv32imac, self-tests under QEMU
#   5. the firmware's setup benchmark, briefly: it checks every setup it times, and a bench
#      nothing runs breaks unseen (this one did); its figures are printed, not judged
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

step "the contract suite and the sim scenario on the Verilated nic_top"
IWNIC_ENGINE=verilator cargo test -p iwnic-testbench --locked \
    --test setup --test teardown --test states --test c_example --test sim_scenario

step "a connection's life on nic_top in RustHDL's simulator"
IWNIC_ENGINE=rusthdl cargo test -p iwnic-testbench --locked --test setup \
    accept_from_the_handler_then_data_both_ways_and_a_graceful_close

step "firmware on riscv32imac under QEMU"
scripts/riscv-firmware.sh

step "the firmware setup benchmark, 200 setups a round (figures not judged)"
IWNIC_BENCH_CONNECTIONS=200 cargo bench -p iwnic-firmware --locked --bench setup

printf '\n==== all iwnic tests passed\n'
