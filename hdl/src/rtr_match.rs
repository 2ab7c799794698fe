//! The responder's RTR FPDU recognised on the datapath: compares of a received payload
//! with the three constant RTR FPDUs iwnic sends (`MessageRepr::rtr_fpdu` of a
//! zero-length Send, RDMA Write and RDMA Read Request), so that `nic_top` can take the
//! RTR of a flow expecting one without the firmware (which otherwise reads the frame,
//! compares its payload and rewrites the flow: ~475 RISC-V instructions a setup).
//!
//! `#[hdl_gen]` has no `let`, no helper functions and no arrays, so these compares are
//! blocks of their own with a hand-written [`Logic`] impl, as `nic_top::IndexRange` is:
//! `update` computes them in Rust for RustHDL's simulator and `hdl` writes the Verilog,
//! both from the same constants, taken from `iwnic-proto` (the bytes are never typed
//! here). Type `t` of `RtrTypes::EACH` (0 Send, 1 Write, 2 Read) is bit `t` of
//! [`RtrLength`]'s output and bits `4t..4t + 4` of [`RtrBeatMatch`]'s.

use iwnic_proto::ddp::MessageRepr;
use iwnic_proto::mpa::RtrTypes;
use rust_hdl::prelude::*;

/// The RTR FPDUs, byte for byte, in the order of the match bits.
pub fn rtr_fpdus() -> [&'static [u8]; 3] {
    RtrTypes::EACH.map(|rtr| MessageRepr::rtr_fpdu(rtr).expect("one RTR type is an RTR FPDU"))
}

/// What beat `beat` (bytes `8 * beat ..`) of a payload must hold to match `fpdu`: the
/// mask of the bytes that lie inside it and their value (byte 0 in bits 7:0), or `None`
/// for a beat past its end (don't care).
pub fn beat_pattern(fpdu: &[u8], beat: usize) -> Option<(u64, u64)> {
    let bytes = fpdu.get(8 * beat..)?;
    if bytes.is_empty() {
        return None;
    }
    Some(
        bytes
            .iter()
            .take(8)
            .enumerate()
            .fold((0, 0), |(mask, value), (i, byte)| {
                (mask | 0xFF << (8 * i), value | u64::from(*byte) << (8 * i))
            }),
    )
}

/// The beats of the longest RTR FPDU: beats from this index on are don't-care for all.
fn beats() -> usize {
    rtr_fpdus()
        .iter()
        .map(|f| f.len().div_ceil(8))
        .max()
        .unwrap_or(0)
}

/// Quarters of a beat compared apart (16 bits each): see [`RtrBeatMatch`].
pub const QUARTERS: usize = 4;

/// One payload beat against the RTR FPDUs, a quarter of the beat at a time: `equal`
/// bit `4t + q` is high when the beat's bytes `2q` and `2q + 1` (payload byte offsets
/// `8 * beat + 2q ..`) equal FPDU `t`'s bytes there, for those of them that lie inside
/// it (below its length); bytes past its end and beats past it are don't-care
/// (`nic_top` compares the payload length apart, [`RtrLength`]). The beat is FPDU `t`'s
/// at `beat` when its four bits are all high; `nic_top` registers the twelve bits and
/// ANDs the quarters and the frame's beats the cycle after, so a 16-bit compare, not a
/// 64-bit one, is what stands between the parser's output register and them.
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct RtrBeatMatch {
    /// The beat's index in its payload (beat 0 holds payload bytes 0 to 7).
    pub beat: Signal<In, Bits<8>>,
    pub data: Signal<In, Bits<64>>,
    pub equal: Signal<Out, Bits<12>>,
}

/// [`beat_pattern`] restricted to quarter `quarter` (bits `16q..16q + 16`).
fn quarter_pattern(fpdu: &[u8], beat: usize, quarter: usize) -> Option<(u64, u64)> {
    let (mask, value) = beat_pattern(fpdu, beat)?;
    let quarter_mask = 0xFFFF << (16 * quarter);
    Some((mask & quarter_mask, value & quarter_mask))
}

impl Logic for RtrBeatMatch {
    fn update(&mut self) {
        let beat = self.beat.val().index();
        let data = self.data.val().to_u64();
        let mut equal = 0u64;
        for (t, fpdu) in rtr_fpdus().iter().enumerate() {
            for q in 0..QUARTERS {
                let matches = match quarter_pattern(fpdu, beat, q) {
                    Some((mask, value)) => data & mask == value,
                    None => true,
                };
                equal |= u64::from(matches) << (QUARTERS * t + q);
            }
        }
        self.equal.next = equal.into();
    }

    fn connect(&mut self) {
        self.equal.connect();
    }

    fn hdl(&self) -> Verilog {
        let fpdus = rtr_fpdus();
        let mut cases = String::new();
        for beat in 0..beats() {
            // Highest bit first, as Verilog's concatenation has it.
            let bits: Vec<String> = fpdus
                .iter()
                .rev()
                .flat_map(|fpdu| {
                    (0..QUARTERS)
                        .rev()
                        .map(move |q| match quarter_pattern(fpdu, beat, q) {
                            Some((mask, value)) => {
                                format!("((data & 64'h{mask:016x}) == 64'h{value:016x})")
                            }
                            None => "1'b1".to_owned(),
                        })
                })
                .collect();
            cases += &format!(
                "        8'd{beat}: equal = {{\n            {}\n        }};\n",
                bits.join(",\n            ")
            );
        }
        Verilog::Custom(format!(
            "always @(*) begin\n    case (beat)\n{cases}        default: equal = 12'hfff;\n    \
             endcase\nend\n"
        ))
    }
}

/// A payload length against the RTR FPDUs' lengths: `equal` bit `t` is high when `len`
/// is FPDU `t`'s length (24, 20 and 52 bytes; the three differ, so at most one is set).
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct RtrLength {
    pub len: Signal<In, Bits<16>>,
    pub equal: Signal<Out, Bits<3>>,
}

impl Logic for RtrLength {
    fn update(&mut self) {
        let len = self.len.val().index();
        let equal = rtr_fpdus().iter().enumerate().fold(0u64, |acc, (t, fpdu)| {
            acc | u64::from(fpdu.len() == len) << t
        });
        self.equal.next = equal.into();
    }

    fn connect(&mut self) {
        self.equal.connect();
    }

    fn hdl(&self) -> Verilog {
        let bits: Vec<String> = rtr_fpdus()
            .iter()
            .rev()
            .map(|fpdu| format!("(len == 16'd{})", fpdu.len()))
            .collect();
        Verilog::Custom(format!(
            "always @(*) begin\n    equal = {{{}}};\nend\n",
            bits.join(", ")
        ))
    }
}
