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

/// Where stage 1 of the framer is within an FPDU.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum FramerPhase {
    /// Taking output beats from stage 0: each is the two bytes held back from the
    /// previous input beat (or the header) followed by the low six bytes of the current
    /// one.
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
/// **Timing**: three stages. Stage 0 builds the output beat an input beat makes (the
/// header or the two bytes held back, then the beat's bytes masked by its `keep`) with
/// its share of the CRC; stage 1 adds the CRC state's share and registers the beat,
/// with both fields it can end with registered beside it (after one more word, or as
/// the state stands); the output register picks one and puts it into its place. So the CRC loop (state, its matrix, the choice of
/// update) ends at registers, not in the output's data selection (in `nic_top` that
/// path was the critical one). A beat leaves three cycles after it is taken; stages 1
/// and 2 advance together. `ulpdu_ready` is combinational from `fpdu_ready` (a few
/// gates, as in a plain pipeline register). Synchronous active-high `reset`.
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
    /// part is a multiple of 4), so two matrices suffice. The update is linear,
    /// `S·state ⊕ D·data`: the data's share of each update is computed in stage 0
    /// (`crc_data_*`, registered in `s0_crc_*`), where the whole output beat is known,
    /// so the loop in stage 1 runs only the state's share (`crc_step`, `crc_step_low`).
    crc_step: Crc32cStep,
    crc_step_low: Crc32cStep,
    /// The both-words share in halves, word 0's and word 1's (32-input matrices, not
    /// one of 64 inputs: the loop's XOR takes two terms as readily as one).
    crc_data_both_w0: Crc32cStep,
    crc_data_both_w1: Crc32cStep,
    crc_data_low: Crc32cStep,
    crc_data_tail: Crc32cStep,
    crc_init: Constant<Bits<32>>,
    crc_zero: Constant<Bits<32>>,
    keep_none: Constant<Bits<8>>,
    keep_low_word: Constant<Bits<8>>,
    keep_all: Constant<Bits<8>>,
    /// Stage 0 takes an input beat this cycle (it is empty or stage 1 takes its beat).
    s0_load: Signal<Local, Bit>,
    /// `ulpdu_data` with the bytes outside `ulpdu_keep` zeroed: they become PAD.
    in_kept: Signal<Local, Bits<64>>,
    /// The two FPDU bytes before the input beat's bytes: the header on a ULPDU's first
    /// beat, else the top two bytes of the beat before; and the output beat they make.
    in_lead: Signal<Local, Bits<16>>,
    in_joined: Signal<Local, Bits<64>>,
    /// The next input beat starts a ULPDU; the top two bytes of the last input beat.
    in_first: DFF<Bit>,
    in_carry: DFF<Bits<16>>,
    /// Stage 0: the output beat the input beat makes, the two bytes it leaves over,
    /// and what stage 1 needs of its `keep`.
    s0_valid: DFF<Bit>,
    s0_joined: DFF<Bits<64>>,
    s0_carry: DFF<Bits<16>>,
    s0_last: DFF<Bit>,
    /// The beat holds 3 or more / 7 or more bytes (`keep` bits 2 and 6).
    s0_three: DFF<Bit>,
    s0_seven: DFF<Bit>,
    s0_crc_both_w0: DFF<Bits<32>>,
    s0_crc_both_w1: DFF<Bits<32>>,
    s0_crc_low: DFF<Bits<32>>,
    /// The share of the left-over bytes in a tail beat (if this beat is a ULPDU's last).
    s0_crc_tail: DFF<Bits<32>>,
    /// The output register takes a new beat (or empties) this cycle.
    load: Signal<Local, Bit>,
    /// Stage 1 takes the stage-0 beat this cycle.
    take: Signal<Local, Bit>,
    /// The CRC register after this cycle's output beat (all 8 bytes).
    crc_after_both: Signal<Local, Bits<32>>,
    /// The CRC register after one more word: the low word of a last beat of 0-2 bytes,
    /// or the tail's left-over bytes and PAD (`word_share`: that word's data share).
    word_share: Signal<Local, Bits<32>>,
    crc_after_word: Signal<Local, Bits<32>>,
    phase: DFF<FramerPhase>,
    carry: DFF<Bits<16>>,
    /// In the tail: ULPDU bytes are left over (the last beat held 7 or 8 bytes), and
    /// their share of the CRC.
    tail_has_data: DFF<Bit>,
    tail_crc: DFF<Bits<32>>,
    /// The raw CRC32c register over the FPDU so far.
    crc_state: DFF<Bits<32>>,
    /// Stage 1: the output beat without its CRC field, and where the field goes: the
    /// high word, after one more covered word (`s1_field_after_word`), or the low word
    /// of a 4-byte last beat, when the FPDU's covered bytes ended with the beat before
    /// (`s1_field_now`). Both candidates are registered and the output register picks,
    /// so the CRC register's update is not in series with a choice of field.
    s1_data: DFF<Bits<64>>,
    s1_keep: DFF<Bits<8>>,
    s1_last: DFF<Bit>,
    s1_valid: DFF<Bit>,
    s1_field_after_word: DFF<Bits<32>>,
    s1_field_now: DFF<Bits<32>>,
    s1_crc_high: DFF<Bit>,
    s1_crc_low: DFF<Bit>,
    /// The output register.
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
            crc_step_low: Crc32cStep::new(StepWidths::Words),
            crc_data_both_w0: Crc32cStep::new(StepWidths::Words),
            crc_data_both_w1: Crc32cStep::new(StepWidths::Words),
            crc_data_low: Crc32cStep::new(StepWidths::Words),
            crc_data_tail: Crc32cStep::new(StepWidths::Words),
            crc_init: Constant::new(u64::from(CRC32C_INIT).into()),
            crc_zero: Constant::new(0_u64.into()),
            keep_none: Constant::new(0x00.into()),
            keep_low_word: Constant::new(0x0F.into()),
            keep_all: Constant::new(0xFF.into()),
            s0_load: Default::default(),
            in_kept: Default::default(),
            in_lead: Default::default(),
            in_joined: Default::default(),
            in_first: Default::default(),
            in_carry: Default::default(),
            s0_valid: Default::default(),
            s0_joined: Default::default(),
            s0_carry: Default::default(),
            s0_last: Default::default(),
            s0_three: Default::default(),
            s0_seven: Default::default(),
            s0_crc_both_w0: Default::default(),
            s0_crc_both_w1: Default::default(),
            s0_crc_low: Default::default(),
            s0_crc_tail: Default::default(),
            load: Default::default(),
            take: Default::default(),
            crc_after_both: Default::default(),
            word_share: Default::default(),
            crc_after_word: Default::default(),
            phase: Default::default(),
            carry: Default::default(),
            tail_has_data: Default::default(),
            tail_crc: Default::default(),
            crc_state: Default::default(),
            s1_data: Default::default(),
            s1_keep: Default::default(),
            s1_last: Default::default(),
            s1_valid: Default::default(),
            s1_field_after_word: Default::default(),
            s1_field_now: Default::default(),
            s1_crc_high: Default::default(),
            s1_crc_low: Default::default(),
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
            in_first,
            in_carry,
            s0_valid,
            s0_joined,
            s0_carry,
            s0_last,
            s0_three,
            s0_seven,
            s0_crc_both_w0,
            s0_crc_both_w1,
            s0_crc_low,
            s0_crc_tail,
            phase,
            carry,
            tail_has_data,
            tail_crc,
            crc_state,
            s1_data,
            s1_keep,
            s1_last,
            s1_valid,
            s1_field_after_word,
            s1_field_now,
            s1_crc_high,
            s1_crc_low,
            out_data,
            out_keep,
            out_last,
            out_valid
        );
        self.load.next = !self.out_valid.q.val() | self.fpdu_ready.val();
        self.take.next =
            self.s0_valid.q.val() & self.load.val() & (self.phase.q.val() != FramerPhase::Tail);
        self.s0_load.next = !self.s0_valid.q.val() | self.take.val();
        self.ulpdu_ready.next = self.s0_load.val() & !self.reset.val();

        // Stage 0: the input beat masked, and its bytes' share of the CRC.
        match self.ulpdu_keep.val().index() {
            1 => self.in_kept.next = bit_cast::<64, 8>(self.ulpdu_data.val().get_bits::<8>(0)),
            3 => self.in_kept.next = bit_cast::<64, 16>(self.ulpdu_data.val().get_bits::<16>(0)),
            7 => self.in_kept.next = bit_cast::<64, 24>(self.ulpdu_data.val().get_bits::<24>(0)),
            15 => self.in_kept.next = bit_cast::<64, 32>(self.ulpdu_data.val().get_bits::<32>(0)),
            31 => self.in_kept.next = bit_cast::<64, 40>(self.ulpdu_data.val().get_bits::<40>(0)),
            63 => self.in_kept.next = bit_cast::<64, 48>(self.ulpdu_data.val().get_bits::<48>(0)),
            127 => self.in_kept.next = bit_cast::<64, 56>(self.ulpdu_data.val().get_bits::<56>(0)),
            255 => self.in_kept.next = self.ulpdu_data.val(),
            _ => self.in_kept.next = 0_u64.into(),
        }
        if self.in_first.q.val() {
            // ULPDU_Length is big-endian: its high byte is FPDU byte 0 (bits 7:0).
            self.in_lead.next = (self.ulpdu_len.val() << 8) | (self.ulpdu_len.val() >> 8);
        } else {
            self.in_lead.next = self.in_carry.q.val();
        }
        self.in_joined.next = (self.in_kept.val() << 16) | bit_cast::<64, 16>(self.in_lead.val());
        self.crc_data_both_w0.state.next = self.crc_zero.val();
        self.crc_data_both_w0.data.next =
            bit_cast::<64, 32>(self.in_joined.val().get_bits::<32>(0));
        self.crc_data_both_w0.keep.next = self.keep_all.val();
        self.crc_data_both_w1.state.next = self.crc_zero.val();
        self.crc_data_both_w1.data.next = (self.in_joined.val() >> 32) << 32;
        self.crc_data_both_w1.keep.next = self.keep_all.val();
        self.crc_data_low.state.next = self.crc_zero.val();
        self.crc_data_low.data.next = self.in_joined.val();
        self.crc_data_low.keep.next = self.keep_low_word.val();
        // A tail beat covers the left-over bytes and PAD: one word.
        self.crc_data_tail.state.next = self.crc_zero.val();
        self.crc_data_tail.data.next = self.in_kept.val() >> 48;
        self.crc_data_tail.keep.next = self.keep_low_word.val();
        if self.s0_load.val() {
            self.s0_valid.d.next = self.ulpdu_valid.val();
            self.s0_joined.d.next = self.in_joined.val();
            self.s0_carry.d.next = self.in_kept.val().get_bits::<16>(48);
            self.s0_last.d.next = self.ulpdu_last.val();
            self.s0_three.d.next = self.ulpdu_keep.val().get_bit(2);
            self.s0_seven.d.next = self.ulpdu_keep.val().get_bit(6);
            self.s0_crc_both_w0.d.next = self.crc_data_both_w0.next_state.val();
            self.s0_crc_both_w1.d.next = self.crc_data_both_w1.next_state.val();
            self.s0_crc_low.d.next = self.crc_data_low.next_state.val();
            self.s0_crc_tail.d.next = self.crc_data_tail.next_state.val();
            if self.ulpdu_valid.val() {
                self.in_first.d.next = self.ulpdu_last.val();
                self.in_carry.d.next = self.in_kept.val().get_bits::<16>(48);
            }
        }

        // Stage 1: the output beat. The CRC covers what it covers: the state's share
        // here, the data's from stage 0 (in the tail, from the ULPDU's last beat).
        self.crc_step.state.next = self.crc_state.q.val();
        self.crc_step.data.next = 0_u64.into();
        self.crc_step.keep.next = self.keep_all.val();
        self.crc_step_low.state.next = self.crc_state.q.val();
        self.crc_step_low.data.next = 0_u64.into();
        self.crc_step_low.keep.next = self.keep_low_word.val();
        self.crc_after_both.next = self.crc_step.next_state.val()
            ^ self.s0_crc_both_w0.q.val()
            ^ self.s0_crc_both_w1.q.val();
        // The one word before a field in the high word: in the tail, the left-over bytes
        // and PAD; else a last beat of 0..2 bytes, which with the 2 lead bytes and PAD
        // fills the low word (the CRC then fits in the high word of the same beat).
        if self.phase.q.val() == FramerPhase::Tail {
            self.word_share.next = self.tail_crc.q.val();
        } else {
            self.word_share.next = self.s0_crc_low.q.val();
        }
        self.crc_after_word.next = self.crc_step_low.next_state.val() ^ self.word_share.val();

        // Stage 1 (and the output register after it) advance when the output can take
        // a beat.
        if self.load.val() {
            self.s1_valid.d.next = false;
            self.s1_field_after_word.d.next = !self.crc_after_word.val();
            self.s1_field_now.d.next = !self.crc_state.q.val();
            self.s1_crc_high.d.next = false;
            self.s1_crc_low.d.next = false;
        }
        if self.take.val() {
            self.s1_valid.d.next = true;
            self.s1_data.d.next = self.s0_joined.q.val();
            self.s1_keep.d.next = self.keep_all.val();
            self.s1_last.d.next = false;
            self.carry.d.next = self.s0_carry.q.val();
            self.tail_crc.d.next = self.s0_crc_tail.q.val();
            // (A taken beat is never in the tail phase, and a beat whose CRC follows
            // its low word ends the FPDU just below: the register takes the both-words
            // update or the initial value, so the loop has no wider choice than that.)
            self.crc_state.d.next = self.crc_after_both.val();
            self.phase.d.next = FramerPhase::Body;
            if self.s0_last.q.val() {
                if self.s0_three.q.val() {
                    // 3..8 bytes: this beat is all covered bytes; the CRC (after 1-2
                    // leftover bytes and PAD when the beat held 7 or 8) goes next.
                    self.tail_has_data.d.next = self.s0_seven.q.val();
                    self.phase.d.next = FramerPhase::Tail;
                } else {
                    self.s1_data.d.next =
                        bit_cast::<64, 32>(self.s0_joined.q.val().get_bits::<32>(0));
                    self.s1_crc_high.d.next = true;
                    self.s1_last.d.next = true;
                    self.crc_state.d.next = self.crc_init.val();
                    self.phase.d.next = FramerPhase::Body;
                }
            }
        }
        if (self.phase.q.val() == FramerPhase::Tail) & self.load.val() {
            self.s1_valid.d.next = true;
            self.s1_last.d.next = true;
            if self.tail_has_data.q.val() {
                self.s1_data.d.next = bit_cast::<64, 16>(self.carry.q.val());
                self.s1_crc_high.d.next = true;
                self.s1_keep.d.next = self.keep_all.val();
            } else {
                self.s1_data.d.next = 0_u64.into();
                self.s1_crc_low.d.next = true;
                self.s1_keep.d.next = self.keep_low_word.val();
            }
            self.crc_state.d.next = self.crc_init.val();
            self.phase.d.next = FramerPhase::Body;
        }
        if self.load.val() {
            self.out_valid.d.next = self.s1_valid.q.val();
            self.out_data.d.next = self.s1_data.q.val();
            if self.s1_crc_high.q.val() {
                self.out_data.d.next = self.s1_data.q.val()
                    | (bit_cast::<64, 32>(self.s1_field_after_word.q.val()) << 32);
            }
            if self.s1_crc_low.q.val() {
                self.out_data.d.next = bit_cast::<64, 32>(self.s1_field_now.q.val());
            }
            self.out_keep.d.next = self.s1_keep.q.val();
            self.out_last.d.next = self.s1_last.q.val();
        }
        if self.reset.val() {
            self.s0_valid.d.next = false;
            self.in_first.d.next = true;
            self.phase.d.next = FramerPhase::Body;
            self.crc_state.d.next = self.crc_init.val();
            self.s1_valid.d.next = false;
            self.out_valid.d.next = false;
        }
        self.fpdu_data.next = self.out_data.q.val();
        self.fpdu_keep.next = self.out_keep.q.val();
        self.fpdu_last.next = self.out_last.q.val();
        self.fpdu_valid.next = self.out_valid.q.val();
    }
}
