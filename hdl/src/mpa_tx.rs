//! MPA transmit framing (RFC 5044 §4): ULPDU stream in, FPDU stream out.
//!
//! ```text
//! | ULPDU_Length (2, big-endian) | ULPDU | PAD (0..3 zeros) | CRC32c (4, LSB first) |
//! ```
//!
//! PAD makes `2 + len + PAD` a multiple of 4; the CRC covers the length, the ULPDU and
//! the PAD. Markers are not supported (iwnic never negotiates them).

use rust_hdl::prelude::*;

use crate::crc32c::{Crc32cStep, StepWidths, CRC32C_INIT};

/// Where the framer is within an FPDU.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum FramerPhase {
    /// Waiting for the first beat of a ULPDU; its `ulpdu_len` becomes the header.
    Start,
    /// Inside a ULPDU: each output beat is the two bytes held back from the previous
    /// beat (or the header) followed by the low six bytes of the current one.
    Body,
    /// The ULPDU has ended and one more beat is owed: the CRC, after any ULPDU bytes
    /// that did not fit and their PAD.
    Tail,
}

/// Frames each ULPDU on its input stream as one FPDU on its output stream, 8 bytes per
/// cycle.
///
/// **Input** (`ulpdu_*`): one ULPDU per packet, 64-bit beats, byte 0 in bits 7:0;
/// `ulpdu_keep` is contiguous low bytes and only the last beat may be partial. A
/// zero-length ULPDU is one beat with `ulpdu_keep` = 0 and `ulpdu_last`. Bytes outside
/// `ulpdu_keep` are ignored (they never reach the wire: PAD is always zero).
///
/// **Length as sideband**: the header comes first on the wire, before the framer has
/// seen the ULPDU, so `ulpdu_len` must be valid with the first beat of each ULPDU (it
/// is sampled when that beat is taken and ignored on later beats). The alternative —
/// buffering a whole ULPDU to count it — would cost a 64 KiB buffer and a packet of
/// latency; every producer in the NIC knows the length up front. The framer does not
/// check `ulpdu_len` against the bytes that follow; PAD and the CRC's position come
/// from the stream's own `keep` and `last`, so a wrong length only corrupts the header.
///
/// **Output** (`fpdu_*`): one FPDU per packet, beginning at the start of a beat. Its
/// `keep` is 0xFF on every beat but the last, which is 0x0F or 0xFF because an FPDU is
/// a multiple of 4 bytes.
///
/// **Throughput**: one beat in and one beat out per cycle. An FPDU is one beat longer
/// than its ULPDU when the ULPDU's last beat holds 3 or more bytes; the input then
/// stalls for that one cycle while the CRC beat goes out. The output stream has no
/// bubbles: with input waiting and `fpdu_ready` high it carries a beat every cycle,
/// back to back across FPDUs, so the output link runs at 8 bytes/cycle.
///
/// **Timing**: the output is registered; `ulpdu_ready` is combinational from
/// `fpdu_ready` (one gate, as in a plain pipeline register). The longest path is the
/// 8-byte CRC matrix into the CRC register. Synchronous active-high `reset`.
#[derive(Clone, Debug, LogicBlock)]
pub struct MpaTxFramer {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub ulpdu_data: Signal<In, Bits<64>>,
    pub ulpdu_keep: Signal<In, Bits<8>>,
    pub ulpdu_last: Signal<In, Bit>,
    pub ulpdu_len: Signal<In, Bits<16>>,
    pub ulpdu_valid: Signal<In, Bit>,
    pub ulpdu_ready: Signal<Out, Bit>,
    pub fpdu_data: Signal<Out, Bits<64>>,
    pub fpdu_keep: Signal<Out, Bits<8>>,
    pub fpdu_last: Signal<Out, Bit>,
    pub fpdu_valid: Signal<Out, Bit>,
    pub fpdu_ready: Signal<In, Bit>,
    /// Every beat the FPDU covers is 0, 4 or 8 bytes (it starts on a beat and its covered
    /// part is a multiple of 4), so two matrices suffice.
    crc_step: Crc32cStep,
    crc_init: Constant<Bits<32>>,
    keep_none: Constant<Bits<8>>,
    keep_low_word: Constant<Bits<8>>,
    keep_all: Constant<Bits<8>>,
    /// The output register takes a new beat (or empties) this cycle.
    load: Signal<Local, Bit>,
    /// An input beat is taken this cycle.
    take: Signal<Local, Bit>,
    /// `ulpdu_data` with the bytes outside `ulpdu_keep` zeroed: they become PAD.
    kept: Signal<Local, Bits<64>>,
    /// The two FPDU bytes just before this input beat's bytes: the header on the first
    /// beat, else the top two bytes of the previous beat.
    lead: Signal<Local, Bits<16>>,
    /// The output beat built from `lead` and `kept`.
    joined: Signal<Local, Bits<64>>,
    /// The CRC field if the FPDU ends with this cycle's output beat.
    crc_field: Signal<Local, Bits<32>>,
    phase: DFF<FramerPhase>,
    carry: DFF<Bits<16>>,
    /// In the tail: ULPDU bytes are left over (the last beat held 7 or 8 bytes).
    tail_has_data: DFF<Bit>,
    /// The raw CRC32c register over the FPDU so far.
    crc_state: DFF<Bits<32>>,
    out_data: DFF<Bits<64>>,
    out_keep: DFF<Bits<8>>,
    out_last: DFF<Bit>,
    out_valid: DFF<Bit>,
}

impl Default for MpaTxFramer {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            reset: Default::default(),
            ulpdu_data: Default::default(),
            ulpdu_keep: Default::default(),
            ulpdu_last: Default::default(),
            ulpdu_len: Default::default(),
            ulpdu_valid: Default::default(),
            ulpdu_ready: Default::default(),
            fpdu_data: Default::default(),
            fpdu_keep: Default::default(),
            fpdu_last: Default::default(),
            fpdu_valid: Default::default(),
            fpdu_ready: Default::default(),
            crc_step: Crc32cStep::new(StepWidths::Words),
            crc_init: Constant::new(u64::from(CRC32C_INIT).into()),
            keep_none: Constant::new(0x00.into()),
            keep_low_word: Constant::new(0x0F.into()),
            keep_all: Constant::new(0xFF.into()),
            load: Default::default(),
            take: Default::default(),
            kept: Default::default(),
            lead: Default::default(),
            joined: Default::default(),
            crc_field: Default::default(),
            phase: Default::default(),
            carry: Default::default(),
            tail_has_data: Default::default(),
            crc_state: Default::default(),
            out_data: Default::default(),
            out_keep: Default::default(),
            out_last: Default::default(),
            out_valid: Default::default(),
        }
    }
}

impl Logic for MpaTxFramer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            phase,
            carry,
            tail_has_data,
            crc_state,
            out_data,
            out_keep,
            out_last,
            out_valid
        );
        self.load.next = !self.out_valid.q.val() | self.fpdu_ready.val();
        self.ulpdu_ready.next =
            self.load.val() & (self.phase.q.val() != FramerPhase::Tail) & !self.reset.val();
        self.take.next = self.ulpdu_valid.val() & self.ulpdu_ready.val();

        match self.ulpdu_keep.val().index() {
            1 => self.kept.next = bit_cast::<64, 8>(self.ulpdu_data.val().get_bits::<8>(0)),
            3 => self.kept.next = bit_cast::<64, 16>(self.ulpdu_data.val().get_bits::<16>(0)),
            7 => self.kept.next = bit_cast::<64, 24>(self.ulpdu_data.val().get_bits::<24>(0)),
            15 => self.kept.next = bit_cast::<64, 32>(self.ulpdu_data.val().get_bits::<32>(0)),
            31 => self.kept.next = bit_cast::<64, 40>(self.ulpdu_data.val().get_bits::<40>(0)),
            63 => self.kept.next = bit_cast::<64, 48>(self.ulpdu_data.val().get_bits::<48>(0)),
            127 => self.kept.next = bit_cast::<64, 56>(self.ulpdu_data.val().get_bits::<56>(0)),
            255 => self.kept.next = self.ulpdu_data.val(),
            _ => self.kept.next = 0_u64.into(),
        }
        if self.phase.q.val() == FramerPhase::Start {
            // ULPDU_Length is big-endian: its high byte is FPDU byte 0 (bits 7:0).
            self.lead.next = (self.ulpdu_len.val() << 8) | (self.ulpdu_len.val() >> 8);
        } else {
            self.lead.next = self.carry.q.val();
        }
        self.joined.next = (self.kept.val() << 16) | bit_cast::<64, 16>(self.lead.val());

        // The CRC covers what this cycle's output beat covers.
        self.crc_step.state.next = self.crc_state.q.val();
        self.crc_step.data.next = self.joined.val();
        self.crc_step.keep.next = self.keep_all.val();
        if self.phase.q.val() == FramerPhase::Tail {
            self.crc_step.data.next = bit_cast::<64, 16>(self.carry.q.val());
            if self.tail_has_data.q.val() {
                self.crc_step.keep.next = self.keep_low_word.val();
            } else {
                self.crc_step.keep.next = self.keep_none.val();
            }
        } else if self.ulpdu_last.val() & !self.ulpdu_keep.val().get_bit(2) {
            // A last beat of 0..2 bytes: with the 2 lead bytes and PAD it fills the low
            // word, and the CRC fits in the high word of the same beat.
            self.crc_step.keep.next = self.keep_low_word.val();
        }
        self.crc_field.next = !self.crc_step.next_state.val();

        if self.load.val() {
            self.out_valid.d.next = false;
        }
        if self.take.val() {
            self.out_valid.d.next = true;
            self.out_data.d.next = self.joined.val();
            self.out_keep.d.next = self.keep_all.val();
            self.out_last.d.next = false;
            self.carry.d.next = self.kept.val().get_bits::<16>(48);
            self.crc_state.d.next = self.crc_step.next_state.val();
            self.phase.d.next = FramerPhase::Body;
            if self.ulpdu_last.val() {
                if self.ulpdu_keep.val().get_bit(2) {
                    // 3..8 bytes: this beat is all covered bytes; the CRC (after 1-2
                    // leftover bytes and PAD when the beat held 7 or 8) goes next.
                    self.tail_has_data.d.next = self.ulpdu_keep.val().get_bit(6);
                    self.phase.d.next = FramerPhase::Tail;
                } else {
                    self.out_data.d.next = (bit_cast::<64, 32>(self.crc_field.val()) << 32)
                        | bit_cast::<64, 32>(self.joined.val().get_bits::<32>(0));
                    self.out_last.d.next = true;
                    self.crc_state.d.next = self.crc_init.val();
                    self.phase.d.next = FramerPhase::Start;
                }
            }
        }
        if (self.phase.q.val() == FramerPhase::Tail) & self.load.val() {
            self.out_valid.d.next = true;
            self.out_last.d.next = true;
            if self.tail_has_data.q.val() {
                self.out_data.d.next = (bit_cast::<64, 32>(self.crc_field.val()) << 32)
                    | bit_cast::<64, 16>(self.carry.q.val());
                self.out_keep.d.next = self.keep_all.val();
            } else {
                self.out_data.d.next = bit_cast::<64, 32>(self.crc_field.val());
                self.out_keep.d.next = self.keep_low_word.val();
            }
            self.crc_state.d.next = self.crc_init.val();
            self.phase.d.next = FramerPhase::Start;
        }
        if self.reset.val() {
            self.phase.d.next = FramerPhase::Start;
            self.crc_state.d.next = self.crc_init.val();
            self.out_valid.d.next = false;
        }
        self.fpdu_data.next = self.out_data.q.val();
        self.fpdu_keep.next = self.out_keep.q.val();
        self.fpdu_last.next = self.out_last.q.val();
        self.fpdu_valid.next = self.out_valid.q.val();
    }
}
