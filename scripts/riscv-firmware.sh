#!/usr/bin/env bash
# Builds iwnic-firmware for riscv32imac-unknown-none-elf and runs its self-tests and the
# setup benchmark (firmware/qemu, package iwnic-firmware-qemu) under QEMU's riscv32 `virt`
# machine, with `-icount shift=0` so `minstret` counts retired instructions exactly.
# Exits non-zero if the build fails, QEMU fails or times out, or the output lacks
# a line `N passed, 0 failed`.
#
# Toolchain: Debian's rustc-web + rust-web-src pair from scripts/setup.sh (rustup cannot add
# targets here), driven by rustup's cargo with RUSTC_BOOTSTRAP=1 for -Zbuild-std. Output goes
# to target/riscv so it never invalidates the host build in target/.
#
# Env: QEMU_TIMEOUT (seconds, default 60).
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$(pwd)

scripts/setup.sh # idempotent; a second run only checks (well under a second)
# shellcheck source=/dev/null
. .tools/env.sh  # RISCV_RUSTC, RISCV_LINKER

TARGET=riscv32imac-unknown-none-elf
TARGET_DIR="$ROOT/target/riscv"
OUT="$TARGET_DIR/$TARGET/firmware"
[ -x "$RISCV_LINKER" ] || { echo "riscv-firmware: no rust-lld at $RISCV_LINKER" >&2; exit 1; }

# Everything below applies to this script's cargo runs only. The linker and the link
# script are set per target, so build scripts and proc macros (host) never see them;
# a global RUSTFLAGS would override the per-target flags, hence unset.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
export RUSTC="$RISCV_RUSTC" RUSTC_BOOTSTRAP=1
export CARGO_TARGET_RISCV32IMAC_UNKNOWN_NONE_ELF_LINKER="$RISCV_LINKER"
export CARGO_TARGET_RISCV32IMAC_UNKNOWN_NONE_ELF_RUSTFLAGS="-C link-arg=-T$ROOT/firmware/qemu/link.x"
# shellcheck disable=SC2054 # the commas are cargo syntax, not array separators
CARGO=(cargo build --profile firmware --target "$TARGET" --target-dir "$TARGET_DIR"
    -Zbuild-std=core,compiler_builtins -Zbuild-std-features=compiler-builtins-mem)

echo "riscv-firmware: building iwnic-firmware ($TARGET, $("$RUSTC" -V))"
"${CARGO[@]}" -p iwnic-firmware --lib
echo "riscv-firmware: building iwnic-firmware with defmt logging"
"${CARGO[@]}" -p iwnic-firmware --lib --features defmt
echo "riscv-firmware: building iwnic-firmware-qemu"
"${CARGO[@]}" -p iwnic-firmware-qemu
ELF="$OUT/iwnic-firmware-qemu"

# Code size. Debian's binutils (x86_64 build) read riscv objects as generic ELF, which is
# all `size` and `nm` need, so no riscv toolchain is required for this.
sections=$(size -A "$ELF" | awk '$1 ~ /^\.(text|rodata|data|bss)$/ { printf " %s %s", $1, $2 }')
echo "riscv-firmware: iwnic-firmware-qemu sections (bytes):$sections"
for crate in iwnic_firmware iwnic_proto; do
    # The code symbols whose names mention the crate, after linking and gc-sections.
    # (With whole-program LTO the rlibs hold bitcode only: the linked size is the one.)
    linked=$(nm -S -C -t d "$ELF" | awk -v c="$crate::" '$3 ~ /^[tTwW]$/ && index($0, c) { t += $2 } END { print t + 0 }')
    echo "riscv-firmware: $crate .text: $linked bytes linked into iwnic-firmware-qemu"
done

echo "riscv-firmware: running $ELF under qemu-system-riscv32 (timeout ${QEMU_TIMEOUT:-60} s)"
LOG="$TARGET_DIR/qemu_smoke.log"
set +e
timeout "${QEMU_TIMEOUT:-60}" qemu-system-riscv32 -machine virt -bios none -nographic \
    -icount shift=0 -kernel "$ELF" </dev/null 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e

if [ "$status" -eq 124 ]; then
    echo "riscv-firmware: FAIL: QEMU timed out after ${QEMU_TIMEOUT:-60} s" >&2
    exit 1
elif [ "$status" -ne 0 ]; then
    echo "riscv-firmware: FAIL: QEMU exited with status $status" >&2
    exit 1
elif ! tr -d '\r' <"$LOG" | grep -qE '^[0-9]+ passed, 0 failed$'; then
    echo "riscv-firmware: FAIL: no 'N passed, 0 failed' line in the output" >&2
    exit 1
fi
echo "riscv-firmware: PASS"
