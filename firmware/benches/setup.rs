//! Cost of one passive connection setup in the firmware (SYN to ESTABLISHED, MPA v2 with
//! the Write RTR, accept from the host), and the table's memory per connection.
//!
//! `cargo bench -p iwnic-firmware --bench setup` prints nanoseconds per setup (median of
//! five rounds) in the three regimes the on-target benchmark measures: one setup at a time
//! with checksums in the datapath, the same with received checksums checked in firmware
//! too, and [`MAX_SIDE_BY_SIDE`] setups side by side. Host instructions per setup:
//! `scripts/bench-firmware.sh` runs this binary under callgrind, one regime at a time
//! (`IWNIC_BENCH_REGIME=0|1|2`: that regime once, its label printed), counting only
//! `Firmware::poll`;
//! RISC-V instructions: `scripts/riscv-firmware.sh` (QEMU, `minstret`).
//! `IWNIC_BENCH_CONNECTIONS` sets the setups per round (default 20,000).
//!
//! The firmware and its in-memory NIC are the on-target benchmark's (`MemoryFirmware`):
//! the NIC has a flow context for each of its entries, and no more.

use std::time::Instant;

use iwnic_firmware::selftest::passive_open::{
    config, listen, passive_setups, MemoryFirmware, MemoryNic, MAX_SIDE_BY_SIDE,
};
use iwnic_firmware::{Firmware, CONNECTION_ENTRY_BYTES};
use iwnic_proto::net::Checksums;

/// A way of setting up connections: the checksum mode and how many at a time.
struct Regime {
    checksums: Checksums,
    at_once: usize,
    label: &'static str,
}

const REGIMES: [Regime; 3] = [
    Regime {
        checksums: Checksums::Offloaded,
        at_once: 1,
        label: "checksums in the datapath, 1 at a time",
    },
    Regime {
        checksums: Checksums::Software,
        at_once: 1,
        label: "received checksums checked in firmware too, 1 at a time",
    },
    Regime {
        checksums: Checksums::Offloaded,
        at_once: MAX_SIDE_BY_SIDE,
        label: "checksums in the datapath, 8 side by side",
    },
];

/// Nanoseconds per setup over `connections` setups (rounded down to whole groups).
fn round(regime: &Regime, connections: u32) -> f64 {
    let mut fw = Box::new(MemoryFirmware::new(config(regime.checksums)));
    let mut nic = MemoryNic::default();
    listen(&mut fw, &mut nic).expect("listen");
    let groups = (connections as usize / regime.at_once).max(1);
    let mut spent = std::time::Duration::ZERO;
    for k in 0..groups {
        // Released with an RST, so a port may come again (no TIME_WAIT).
        let first_port = 1024 + ((k * regime.at_once) % 60_000) as u16;
        passive_setups(&mut fw, &mut nic, first_port, regime.at_once, |fw, nic| {
            let start = Instant::now();
            fw.poll(nic, smoltcp::time::Instant::from_millis(0));
            spent += start.elapsed();
        })
        .expect("setup");
    }
    spent.as_nanos() as f64 / (groups * regime.at_once) as f64
}

fn main() {
    let connections: u32 = std::env::var("IWNIC_BENCH_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    if let Some(regime) = std::env::var("IWNIC_BENCH_REGIME")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let regime = REGIMES
            .get(regime)
            .expect("IWNIC_BENCH_REGIME is 0, 1 or 2");
        round(regime, connections);
        println!("{}", regime.label);
        return;
    }
    println!("firmware passive setup, {connections} connections per round, firmware poll only");
    for regime in &REGIMES {
        let mut rounds: Vec<f64> = (0..5).map(|_| round(regime, connections)).collect();
        rounds.sort_by(f64::total_cmp);
        let median = rounds[2];
        println!(
            "  {:56} {median:6.0} ns per setup (rounds {:.0}..{:.0}), {:.0} setups/s",
            regime.label,
            rounds[0],
            rounds[4],
            1e9 / median
        );
    }
    const N: usize = 65_536;
    let bytes = std::mem::size_of::<Firmware<N, 64>>();
    println!(
        "  {:56} {CONNECTION_ENTRY_BYTES:6} bytes",
        "connection entry"
    );
    println!(
        "  {:56} {:6} bytes (Firmware<65536, 64>: {bytes} bytes)",
        "per connection, all tables",
        bytes / N
    );
}
