#!/usr/bin/env bash
# The README's run command: installs what `iwnic sim` needs if it is missing
# (scripts/setup.sh sim: verilator, zlib1g-dev, tshark), then runs the simulation of two
# NICs on the Verilated nic_top with their firmware and host drivers, writing the link's
# capture to out/sim.pcap and each datapath's waveform to out/sim.fst and out/sim-b.fst.
# Arguments go to `iwnic sim` and override these (`scripts/run.sh --help` lists them).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."
scripts/setup.sh sim
exec cargo run --release -- sim --pcap out/sim.pcap --wave out/sim.fst "$@"
