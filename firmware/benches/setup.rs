//! Cost of one passive connection setup in the firmware (SYN to ESTABLISHED, MPA v2 with
//! the Write RTR, accept from the host), and the table's memory per connection.
//!
//! `cargo bench -p iwnic-firmware --bench setup` prints nanoseconds per setup (median of
//! five rounds) for checksums done in firmware and in the datapath. Host instructions per
//! setup: `scripts/bench-firmware.sh` runs this binary under callgrind, counting only
//! `Firmware::poll`; RISC-V instructions: `scripts/riscv-firmware.sh` (QEMU, `minstret`).
//! `IWNIC_BENCH_CONNECTIONS` sets the setups per round (default 20,000).

use std::time::Instant;

use iwnic_firmware::selftest::passive_open::{config, listen, passive_setup, MemoryNic};
use iwnic_firmware::{Firmware, CONNECTION_ENTRY_BYTES};
use iwnic_proto::net::Checksums;

type Fw = Firmware<1024, 16>;

fn round(checksums: Checksums, connections: u32) -> f64 {
    let mut fw: Box<Fw> = Box::new(Fw::new(config(checksums)));
    let mut nic = MemoryNic::default();
    listen(&mut fw, &mut nic).expect("listen");
    let mut spent = std::time::Duration::ZERO;
    for k in 0..connections {
        let port = 1024 + (k % 60_000) as u16;
        passive_setup(&mut fw, &mut nic, port, |fw, nic| {
            let start = Instant::now();
            fw.poll(nic, smoltcp::time::Instant::from_millis(0));
            spent += start.elapsed();
        })
        .expect("setup");
    }
    spent.as_nanos() as f64 / f64::from(connections)
}

fn main() {
    let connections: u32 = std::env::var("IWNIC_BENCH_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    println!("firmware passive setup, {connections} connections per round, firmware poll only");
    for (checksums, label) in [
        (Checksums::Offloaded, "checksums in the datapath"),
        (
            Checksums::Software,
            "received checksums checked in firmware too",
        ),
    ] {
        let mut rounds: Vec<f64> = (0..5).map(|_| round(checksums, connections)).collect();
        rounds.sort_by(f64::total_cmp);
        let median = rounds[2];
        println!(
            "  {label:44} {median:8.0} ns per setup (rounds {:.0}..{:.0}), {:.0} setups/s",
            rounds[0],
            rounds[4],
            1e9 / median
        );
    }
    const N: usize = 65_536;
    let bytes = std::mem::size_of::<Firmware<N, 64>>();
    println!("  connection entry           {CONNECTION_ENTRY_BYTES:8} bytes");
    println!(
        "  per connection, all tables {:8} bytes (Firmware<65536, 64>: {bytes} bytes)",
        bytes / N
    );
}
