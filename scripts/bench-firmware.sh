#!/usr/bin/env bash
# Firmware connection-setup benchmark, three ways:
#   1. nanoseconds per passive setup on this host (cargo bench, median of five rounds);
#   2. host instructions per setup: the same binary under callgrind, counting only
#      Firmware::poll (repeatable whatever else the machine does);
#   3. RISC-V instructions per setup on the target build under QEMU (minstret, -icount).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

scripts/setup.sh >/dev/null

echo "== nanoseconds (host)"
cargo bench -q -p iwnic-firmware --bench setup

echo "== host instructions (callgrind, Firmware::poll only)"
bench=$(cargo bench -p iwnic-firmware --bench setup --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n1)
connections=1000
out=$(mktemp)
# One run per regime of the bench (IWNIC_BENCH_REGIME: that regime's round, once; it
# prints the regime's label).
for regime in 0 1 2; do
    label=$(IWNIC_BENCH_REGIME=$regime IWNIC_BENCH_CONNECTIONS=$connections valgrind \
        --tool=callgrind --callgrind-out-file="$out" --toggle-collect='*Firmware*poll*' \
        "$bench" 2>/dev/null)
    total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    echo "  $label: $((total / connections)) host instructions per setup and release ($connections connections)"
done
rm -f "$out"

echo "== RISC-V instructions (QEMU, minstret)"
scripts/riscv-firmware.sh | grep -E '^bench|sections'
