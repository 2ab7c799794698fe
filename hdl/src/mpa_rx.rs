//! MPA receive delineation (RFC 5044 §4, §7.2): one connection's in-order TCP payload
//! in, ULPDUs out, every FPDU's CRC32c checked.
//!
//! ```text
//! | ULPDU_Length (2, big-endian) | ULPDU | PAD (0..3 zeros) | CRC32c (4, LSB first) |
//! ```
//!
//! The behavioural model is `ModelDatapath::deliver` in the testbench, and the reference
//! `iwnic_proto::fpdu::Splitter`: FPDUs are delineated from ULPDU_Length; the CRC covers
//! the length, the ULPDU and the PAD; a CRC mismatch, a ULPDU longer than the limit
//! (`max_ulpdu_len`; in `nic_top` the constant `MAX_RX_ULPDU_LEN`, the largest ULPDU a
//! received segment can hold), or an FPDU that does not end with its TCP segment fails
//! the flow for good.
//!
//! **Why 32-bit words, not 1–8-byte CRC widths and not a realigner**: every segment
//! begins at byte 0 of a beat (as `tcp_rx` delivers it) and must begin and end at FPDU
//! boundaries (spec/mpa.md), and every FPDU is a multiple of 4 bytes. So on a flow that
//! has not failed, every FPDU starts at byte 0 or byte 4 of a beat, and its length
//! field, its body words and its CRC field are whole aligned 32-bit words. Each beat is
//! two words, each a *header* (length + 2 ULPDU/PAD bytes), a *body* word (ULPDU/PAD)
//! or a *CRC* word, and the CRC needs only the 4- and 8-byte matrices
//! (`StepWidths::Words`: the high word alone is shifted down first). A segment that
//! breaks this — one that ends inside an FPDU, including inside a word — is exactly
//! the "FPDU not ending with its segment" error, so the flow stops there, and no FPDU
//! state ever has to survive a segment boundary: what does survive is the failed flag.
//! (Markers would break the word structure; iwnic never negotiates them.)
//!
//! **Output** (`ulpdu_*`): one packet per ULPDU, realigned to byte 0 of a beat, `keep`
//! 0xFF on every beat but the last; a zero-length ULPDU is one beat with `keep` = 0.
//! The ULPDU leaves cut-through; its last beat waits for the CRC word and carries
//! `ulpdu_good` (CRC matched). A ULPDU cut short by an error ends with a last beat with
//! `ulpdu_good` low (its bytes so far, or an empty beat), so the buffer that follows
//! drops it. `ulpdu_good` is low on beats that are not last.
//!
//! **Errors**: `crc_error` (an FPDU's CRC mismatched) and `length_error` (ULPDU_Length
//! above `max_ulpdu_len`, or an FPDU not ending with its segment — a partial word, or a
//! segment's last beat inside an FPDU) latch until `reset`, the model's `CrcError` and
//! `LengthError`. A beat that is not full before a segment's last breaks the input's
//! contract and is a length error too. From the error on, input is taken and dropped. Where the reference
//! would stop first decides the kind: a CRC error in the beat wins over what follows it.
//!
//! **Realignment**: a ULPDU starts at byte 2 (FPDU at word 0) or byte 6 (word 1), fixed
//! for the ULPDU, so each output beat is two bytes of the current input beat over six of
//! the previous one, or six over two: a two-way choice, not a barrel shifter.
//!
//! **An input register and three stages**: the input register holds the beat as it
//! came (so the source's clock-to-out, a block RAM's in `nic_top`, is not in series
//! with the decode); stage 0 registers it with what can be read from it
//! alone (its words' `keep`, both candidate ULPDU_Lengths, their body-word counts and
//! their compares with the limit), so no length compare is in series with what follows.
//! Stage 1 decodes the word roles, runs the CRC register, realigns the
//! ULPDU and decides which output beats the input beat owes, assuming its CRC words
//! match; it compares word 0 against the CRC register. Stage 2, a cycle later,
//! compares word 1 against the CRC after word 0, applies the CRC verdicts (a bad word 0
//! ends the flow before word 1; a bad CRC word makes its ULPDU's last beat bad) and
//! the errors' order, and pushes into the output queue. Stage 1 does not stop at an
//! error it cannot see yet: once the flow has failed its state no longer matters, and
//! stage 2 drops the beats that follow. `busy` (a register) is high while a beat is in
//! the input register, the skid, stage 0, stage 2 or the queue, so a user that waits
//! for it low after a segment's last beat has all of the segment's ULPDUs out and its
//! errors latched.
//!
//! **Throughput**: one beat per cycle in, sustained, whenever the output is ready;
//! the output queue has no bubbles of its own. A beat finishes at most two output
//! beats: a ULPDU of 9+ bytes whose length is 1 or 2 mod 8 and whose FPDU starts at
//! byte 0 of a beat ends in the input beat that also holds its CRC, with its last full
//! beat and its 1–2-byte final beat both due (and a segment that ends inside an FPDU
//! owes a full beat and a closing bad one). Such an FPDU is exactly `m + 1` beats long
//! for `m + 1` output beats, and its header beat finished none, so over each FPDU no
//! more beats leave than arrive; a four-place output queue (a ring: pushes go to its
//! tail, the output reads its head) absorbs the difference. Stage 2 pushes when at
//! most two places are taken *before* this cycle's dequeue, and holds its beat
//! (stalling stage 1) otherwise: back to back with the output ready the queue holds 0–2
//! beats, so it never holds, and the pushes do not wait on `ulpdu_ready`, which only
//! moves the head. A stall reaches stage 0 and the input register in the same cycle,
//! but not the input: a *skid* register takes the beat that arrives while the input
//! register holds on, the input register takes the skid's beat before the next input
//! beat, and `in_ready` is a register (not both hold a beat). So neither
//! `ulpdu_ready` nor the back-pressure it starts runs through this block into the
//! source's or the sink's logic (in `nic_top` both were critical paths).
//! `tests/blocks/mpa_rx.rs` checks the exact cycle count back to back.
//! Latency: a ULPDU beat leaves four cycles after the input beat that completes it;
//! the last beat waits for the CRC word. Synchronous active-high `reset`.
//!
//! **Size and speed** (LFE5U-25F-6, out of context, `iwnic synth --block mpa_rx`):
//! 2,462 LUT4, 1,110 FF, 137.3 MHz, i.e. 8.8 Gb/s at 8 bytes a cycle (the boards' ports
//! are 1 Gb/s); before the input register, the raw skid, the registered `busy` and the
//! stage-2 choice of the held beat it was 2,801 LUT4, 610 FF, 125.4 MHz, and in one
//! stage 3,119 LUT4, 421 FF, 82.7 MHz. What took it to 125.4 MHz:
//! the second stage (the CRC compares and error gating off the data path), the word
//! roles decoded from registered "0, 1, 2 words left" flags instead of 16-bit
//! comparisons, length errors gating only the pushes, and the CRC register holding the
//! initial value between FPDUs, so the CRC loop has no choice of start value in it.
//! The three CRC updates run side by side so that decoding the word roles is not in
//! series with an XOR matrix (with one shared step whose width was chosen by the roles
//! it was 4,764 LUT4 at 51.1 MHz). Then (147.3 MHz standing alone): the failed state
//! in one flip-flop, the CRC loop choosing between one update and restarts, the
//! stage-0 both-words share in two 32-input halves. The last round worked on its
//! paths inside `nic_top`, where placement is tighter: each word's last `keep` and
//! "longer than 8" decoded in stage 0, the length limit and the queue's room
//! registered, `busy` worked out from the registers rather than from their inputs,
//! the skid's data loading whenever it is empty. Standing alone that measures a little
//! lower (137.3 MHz: from `any_failed` into `in_ready_q`, 4 logic levels, 7.3 ns).

use rust_hdl::prelude::*;

use crate::crc32c::{Crc32cStep, StepWidths, CRC32C_INIT};

/// Delineates the FPDUs of one connection's TCP payload (see the module documentation).
///
/// **Input** (`in_*`): one TCP segment's payload per packet, starting at byte 0 of a
/// beat, `keep` contiguous low bytes, 0xFF on every beat but the last; an empty segment
/// is one beat with `keep` = 0. `max_ulpdu_len` is the ULPDU limit (`nic_top` drives
/// it with a constant), held steady from the cycle before the flow's first beat is
/// offered (a register here takes it, so its compares do not wait on the route from the
/// source).
#[derive(Clone, Debug, LogicBlock)]
pub struct MpaRxDelineator {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub max_ulpdu_len: Signal<In, Bits<16>>,
    pub in_data: Signal<In, Bits<64>>,
    pub in_keep: Signal<In, Bits<8>>,
    pub in_last: Signal<In, Bit>,
    pub in_valid: Signal<In, Bit>,
    pub in_ready: Signal<Out, Bit>,
    pub ulpdu_data: Signal<Out, Bits<64>>,
    pub ulpdu_keep: Signal<Out, Bits<8>>,
    pub ulpdu_last: Signal<Out, Bit>,
    /// On the last beat: the FPDU's CRC matched (else drop the ULPDU).
    pub ulpdu_good: Signal<Out, Bit>,
    pub ulpdu_valid: Signal<Out, Bit>,
    pub ulpdu_ready: Signal<In, Bit>,
    /// Latched: an FPDU's CRC32c did not match.
    pub crc_error: Signal<Out, Bit>,
    /// Latched: ULPDU_Length above `max_ulpdu_len`, or an FPDU not ending with its
    /// segment.
    pub length_error: Signal<Out, Bit>,
    /// A beat is still on its way (in the skid, stage 0, stage 2 or the output queue):
    /// the ULPDUs and errors of the input so far are not all out yet.
    pub busy: Signal<Out, Bit>,
    /// The three CRC updates a beat can need, computed side by side so that decoding
    /// the word roles (from ULPDU_Length) is not in series with the XOR matrices: both
    /// words of one FPDU, the low word alone, and the high word alone starting an FPDU.
    /// The update is linear, `S·state ⊕ D·data`, so the data's share is computed in
    /// stage 0 (`crc_data_*`, registered in `s0_crc_*`) and only the state's share runs
    /// on the loop (`crc_both`, `crc_low`: data tied to zero); the high word starting
    /// an FPDU starts from the initial value, so all of it is stage 0's.
    crc_both: Crc32cStep,
    crc_low: Crc32cStep,
    /// (The both-words share in two halves, word 0's and word 1's, each a 32-input
    /// matrix: the loop's XOR takes the two as readily as one, and stage 0 is not a
    /// 64-input tree deep.)
    crc_data_both_w0: Crc32cStep,
    crc_data_both_w1: Crc32cStep,
    s0_both_w1: DFF<Bits<32>>,
    crc_data_low: Crc32cStep,
    crc_data_high: Crc32cStep,
    s0_crc_both: Signal<Local, Bits<32>>,
    s0_crc_low: Signal<Local, Bits<32>>,
    s0_crc_high: Signal<Local, Bits<32>>,
    /// The CRC register after both words / the low word of the stage-1 beat.
    crc_after_both: Signal<Local, Bits<32>>,
    crc_after_low: Signal<Local, Bits<32>>,
    crc_zero: Constant<Bits<32>>,
    data_zero: Constant<Bits<64>>,
    /// After word 0 / word 1 the next word is a CRC word (found by comparing lengths
    /// and counts, not by the subtractions that update `words_left`).
    crc_next1: Signal<Local, Bit>,
    crc_next2: Signal<Local, Bit>,
    crc_init: Constant<Bits<32>>,
    keep_none: Constant<Bits<8>>,
    keep_low_word: Constant<Bits<8>>,
    keep_all: Constant<Bits<8>>,
    /// The head of the output queue leaves this cycle.
    dequeue: Signal<Local, Bit>,
    failed: Signal<Local, Bit>,
    /// Stage 0: the input beat, registered with what can be decoded from it alone (its
    /// words' `keep`, its two possible ULPDU_Lengths compared and converted), so stage
    /// 1 starts from registers and no length compare is in series with the word
    /// roles, the CRC selection and the data selects. It loads when empty or when
    /// stage 1 takes its beat.
    s0_load: Signal<Local, Bit>,
    s0_valid: DFF<Bit>,
    /// Stage 0's registers, packed (271 bits; and `s0_both_w1`): the fields below are
    /// read from it.
    s0_word: DFF<Bits<271>>,
    /// The input beat decoded (what stage 0 would register).
    in_word: Signal<Local, Bits<271>>,
    in_w0_valid: Signal<Local, Bit>,
    in_w1_valid: Signal<Local, Bit>,
    in_partial: Signal<Local, Bit>,
    in_body0_less1: Signal<Local, Bits<16>>,
    in_body1: Signal<Local, Bits<16>>,
    in_len0_body0: Signal<Local, Bit>,
    in_len0_body1: Signal<Local, Bit>,
    in_len0_body2: Signal<Local, Bit>,
    in_len0_body3: Signal<Local, Bit>,
    in_len1_body0: Signal<Local, Bit>,
    in_len1_body1: Signal<Local, Bit>,
    in_len1_body2: Signal<Local, Bit>,
    /// `max_ulpdu_len`, registered.
    max_len: DFF<Bits<16>>,
    in_len0_over: Signal<Local, Bit>,
    in_len1_over: Signal<Local, Bit>,
    in_len0_zero: Signal<Local, Bit>,
    in_len1_zero: Signal<Local, Bit>,
    /// `keep` of the last output beat of a ULPDU of `in_len0` / `in_len1` bytes: all
    /// ones shifted right by `-len mod 8` (none for an empty ULPDU).
    in_keep0_shift: Signal<Local, Bits<3>>,
    in_keep1_shift: Signal<Local, Bits<3>>,
    in_keep0: Signal<Local, Bits<8>>,
    in_keep1: Signal<Local, Bits<8>>,
    in_len0_gt8: Signal<Local, Bit>,
    in_len1_gt8: Signal<Local, Bit>,
    in_take: Signal<Local, Bit>,
    /// The input register: the beat as it arrived, decoded from here into stage 0, so
    /// nothing of the source's clock-to-out (a block RAM's, in `nic_top`) is in series
    /// with the decode's carry chains and XOR matrices.
    in_q_data: DFF<Bits<64>>,
    in_q_keep: DFF<Bits<8>>,
    in_q_last: DFF<Bit>,
    in_q_valid: DFF<Bit>,
    /// The input register is empty or its beat goes into stage 0 this cycle.
    in_q_free: Signal<Local, Bit>,
    /// The skid: the beat that arrived while the input register could not move on
    /// (raw, the input register takes it next). It makes `in_ready` a register, high
    /// unless both hold a beat, so the back-pressure from the output stops here rather
    /// than running on into the source's logic.
    skid_data: DFF<Bits<64>>,
    skid_keep: DFF<Bits<8>>,
    skid_last: DFF<Bit>,
    skid_valid: DFF<Bit>,
    in_ready_q: DFF<Bit>,
    busy_q: DFF<Bit>,
    s0_data: Signal<Local, Bits<64>>,
    s0_last: Signal<Local, Bit>,
    /// ULPDU_Length of the input register's beat if word 0 / word 1 is a header.
    in_len0: Signal<Local, Bits<16>>,
    in_len1: Signal<Local, Bits<16>>,
    /// That length is above `max_ulpdu_len`.
    len0_over: Signal<Local, Bit>,
    len1_over: Signal<Local, Bit>,
    /// The `keep` of the last output beat of a ULPDU of that length.
    keep0: Signal<Local, Bits<8>>,
    keep1: Signal<Local, Bits<8>>,
    /// That length is above 8 (the ULPDU takes more than one output beat).
    len0_gt8: Signal<Local, Bit>,
    len1_gt8: Signal<Local, Bit>,
    /// The stage-0 beat is taken and processed this cycle (taken beats of a failed flow
    /// are dropped).
    take: Signal<Local, Bit>,
    w0_valid: Signal<Local, Bit>,
    w1_valid: Signal<Local, Bit>,
    /// The beat ends inside a word, or is short and not a segment's last.
    partial: Signal<Local, Bit>,
    /// ULPDU_Length of the stage-0 beat if word 0 / word 1 is a header.
    len0: Signal<Local, Bits<16>>,
    len1: Signal<Local, Bits<16>>,
    /// Body words between a header with that length and its CRC word:
    /// `ceil((2 + len) / 4) - 1 = floor((len + 1) / 4)`.
    body0: Signal<Local, Bits<16>>,
    body1: Signal<Local, Bits<16>>,
    /// `body0` of the input register's beat, and `body0 - 1` of the stage-0 beat (the count
    /// after word 1 when word 0 is a header): no subtraction follows another in stage 1.
    in_body0: Signal<Local, Bits<16>>,
    body0_less1: Signal<Local, Bits<16>>,
    /// `words_left - 1`, `words_left - 2`, side by side.
    words_left_less1: Signal<Local, Bits<16>>,
    words_left_less2: Signal<Local, Bits<16>>,
    /// What word 0 is (if valid): header, body or CRC word.
    w0_hdr: Signal<Local, Bit>,
    w0_crc: Signal<Local, Bit>,
    w0_body: Signal<Local, Bit>,
    /// The state after word 0: body words left before the CRC word.
    left1: Signal<Local, Bits<16>>,
    w1_hdr: Signal<Local, Bit>,
    w1_crc: Signal<Local, Bit>,
    /// The state after word 1.
    left2: Signal<Local, Bits<16>>,
    /// Inside an FPDU after this beat.
    in_after: Signal<Local, Bit>,
    crc_ok0: Signal<Local, Bit>,
    too_long0: Signal<Local, Bit>,
    too_long1: Signal<Local, Bit>,
    /// The segment ends inside an FPDU (or the beat is `partial`).
    unended: Signal<Local, Bit>,
    /// A header is in this beat (an FPDU, and its ULPDU packet, starts).
    hdr_here: Signal<Local, Bit>,
    hdr_at_w1: Signal<Local, Bit>,
    hdr_len: Signal<Local, Bits<16>>,
    /// `hdr_len` is above 8.
    hdr_gt8: Signal<Local, Bit>,
    /// The `keep` of the last output beat of a ULPDU of `hdr_len` bytes.
    hdr_keep: Signal<Local, Bits<8>>,
    /// The last covered word of the FPDU is word 0 / word 1 of this beat: all of its
    /// ULPDU has arrived.
    complete0: Signal<Local, Bit>,
    complete1: Signal<Local, Bit>,
    data_complete: Signal<Local, Bit>,
    /// A full output beat that is not the ULPDU's last.
    full_emit: Signal<Local, Bit>,
    realigned: Signal<Local, Bits<64>>,
    shift6_now: Signal<Local, Bit>,
    shifted: Signal<Local, Bits<64>>,
    /// The ULPDU's last output beat, when `data_complete`.
    final_data: Signal<Local, Bits<64>>,
    final_keep_now: Signal<Local, Bits<8>>,
    /// This beat owes a ULPDU's last beat: its CRC is here, or the segment ended.
    final_out: Signal<Local, Bit>,
    final_out_keep: Signal<Local, Bits<8>>,
    final_out_tag: Signal<Local, Bits<10>>,
    /// This beat owes a beat that goes first: the held last beat of the previous
    /// ULPDU (its CRC is word 0), or a full beat of the current one.
    first_out: Signal<Local, Bit>,
    first_out_data: Signal<Local, Bits<64>>,
    first_out_tag: Signal<Local, Bits<10>>,
    /// Stage 2: the beat stage 1 finished last cycle (if `s2_valid`), as the output
    /// beats it owes (`first_out`, then `final_out`, their tags assuming the CRCs
    /// match) and what decides whether they go: word 0 is a CRC word (`s2_w0_check`)
    /// and matched (`s2_ok0`); word 1 is a CRC word (`s2_w1_check`), to compare with
    /// the CRC after word 0; the beat ends the flow on a length error.
    s2_valid: DFF<Bit>,
    s2_first: DFF<Bit>,
    s2_first_data: DFF<Bits<64>>,
    s2_first_tag: DFF<Bits<10>>,
    s2_final: DFF<Bit>,
    /// The `final_out` beat's data: this beat's `final_data`, or (`s2_final_from_fin`:
    /// an empty beat ending the segment after the data was complete) the held
    /// `fin_data`, which no beat changes before stage 2 reads it. The choice is made
    /// here, not in stage 1, so stage 1's word-role decode does not select 64 bits.
    s2_final_data: DFF<Bits<64>>,
    s2_final_from_fin: DFF<Bit>,
    s2_final_tag: DFF<Bits<10>>,
    push_final_data: Signal<Local, Bits<64>>,
    s2_w0_check: DFF<Bit>,
    s2_ok0: DFF<Bit>,
    s2_w1_check: DFF<Bit>,
    s2_crc_after_w0: DFF<Bits<32>>,
    s2_word1: DFF<Bits<32>>,
    s2_length_error: DFF<Bit>,
    /// The queue has two free places before this cycle's dequeue (so the pushes never
    /// wait on `ulpdu_ready`): a register, set from the count's next value, so stage
    /// 0's and the input register's 370-odd enables wait on flip-flops only.
    room: DFF<Bit>,
    /// Stage 2 moves on this cycle (its beat goes into the queue, or is dropped).
    s2_advance: Signal<Local, Bit>,
    /// Its beat goes into the queue now: the flow has not failed before it.
    s2_live: Signal<Local, Bit>,
    crc_bad0: Signal<Local, Bit>,
    crc_ok1: Signal<Local, Bit>,
    crc_bad1: Signal<Local, Bit>,
    push_first: Signal<Local, Bit>,
    push_final: Signal<Local, Bit>,
    push_first_tag: Signal<Local, Bits<10>>,
    push_final_tag: Signal<Local, Bits<10>>,
    /// Inside an FPDU: header seen, not yet its CRC word.
    in_fpdu: DFF<Bit>,
    /// Body words left before the CRC word.
    words_left: DFF<Bits<16>>,
    /// `words_left` is 0, 1, 2: kept beside it so that the word roles are decoded from
    /// registers, not from comparisons in series with them.
    left_is0: DFF<Bit>,
    left_is1: DFF<Bit>,
    left_is2: DFF<Bit>,
    /// Header lengths by the body words they give: `body = 0` is `len < 3`, `body = 1`
    /// is `3 <= len < 7`, and so on.
    len0_body0: Signal<Local, Bit>,
    len0_body1: Signal<Local, Bit>,
    len0_body2: Signal<Local, Bit>,
    len0_body3: Signal<Local, Bit>,
    len1_body0: Signal<Local, Bit>,
    len1_body1: Signal<Local, Bit>,
    len1_body2: Signal<Local, Bit>,
    /// `left1` / `left2` is 0, 1, 2.
    left1_is0: Signal<Local, Bit>,
    left1_is1: Signal<Local, Bit>,
    left1_is2: Signal<Local, Bit>,
    left2_is0: Signal<Local, Bit>,
    left2_is1: Signal<Local, Bit>,
    left2_is2: Signal<Local, Bit>,
    /// The raw CRC32c register over the FPDU so far; between FPDUs, `CRC32C_INIT`.
    crc_state: DFF<Bits<32>>,
    /// ULPDU bytes not yet sent.
    out_left: DFF<Bits<16>>,
    /// `out_left > 8`, kept beside it (from compares on the lengths and on `out_left`
    /// a cycle ahead), so no 16-bit compare is in series with the data selection.
    out_left_gt8: DFF<Bit>,
    /// The ULPDU starts at byte 6 of a beat (else byte 2).
    offset6: DFF<Bit>,
    /// The `keep` of the current ULPDU's last beat.
    final_keep: DFF<Bits<8>>,
    /// The previous input beat.
    prev: DFF<Bits<64>>,
    /// A ULPDU's last beat, held for its CRC word: the `final_data` of the last beat
    /// with a word in it (the beat that completed the ULPDU, when the next word is its
    /// CRC), so it loads without waiting for the word-role decode.
    fin_data: DFF<Bits<64>>,
    fin_keep: DFF<Bits<8>>,
    crc_failed: DFF<Bit>,
    length_failed: DFF<Bit>,
    /// Either of the two (one flip-flop: `failed` gates the stages' advance, on the
    /// paths into every stage-1 enable).
    any_failed: DFF<Bit>,
    /// The output queue: four places in a ring, each data and a tag of
    /// `{good, last, keep[7:0]}` (bits 9, 8, 7:0), `queue_count` of them from
    /// `queue_head` on.
    queue0_data: DFF<Bits<64>>,
    queue0_tag: DFF<Bits<10>>,
    queue1_data: DFF<Bits<64>>,
    queue1_tag: DFF<Bits<10>>,
    queue2_data: DFF<Bits<64>>,
    queue2_tag: DFF<Bits<10>>,
    queue3_data: DFF<Bits<64>>,
    queue3_tag: DFF<Bits<10>>,
    queue_head: DFF<Bits<2>>,
    queue_tail: DFF<Bits<2>>,
    queue_count: DFF<Bits<3>>,
    /// What goes into the tail place (the first beat if stage 2 owes one, else the
    /// final beat), and whether the tail place is free (the queue is not full).
    tail_data: Signal<Local, Bits<64>>,
    tail_tag: Signal<Local, Bits<10>>,
    tail_free: Signal<Local, Bit>,
    /// The beat at the head.
    head_tag: Signal<Local, Bits<10>>,
}

impl Default for MpaRxDelineator {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            reset: Default::default(),
            max_ulpdu_len: Default::default(),
            in_data: Default::default(),
            in_keep: Default::default(),
            in_last: Default::default(),
            in_valid: Default::default(),
            in_ready: Default::default(),
            ulpdu_data: Default::default(),
            ulpdu_keep: Default::default(),
            ulpdu_last: Default::default(),
            ulpdu_good: Default::default(),
            ulpdu_valid: Default::default(),
            ulpdu_ready: Default::default(),
            crc_error: Default::default(),
            length_error: Default::default(),
            busy: Default::default(),
            crc_both: Crc32cStep::new(StepWidths::Words),
            crc_low: Crc32cStep::new(StepWidths::Words),
            crc_data_both_w0: Crc32cStep::new(StepWidths::Words),
            crc_data_both_w1: Crc32cStep::new(StepWidths::Words),
            s0_both_w1: Default::default(),
            crc_data_low: Crc32cStep::new(StepWidths::Words),
            crc_data_high: Crc32cStep::new(StepWidths::Words),
            s0_crc_both: Default::default(),
            s0_crc_low: Default::default(),
            s0_crc_high: Default::default(),
            crc_after_both: Default::default(),
            crc_after_low: Default::default(),
            crc_zero: Constant::new(0_u64.into()),
            data_zero: Constant::new(0_u64.into()),
            crc_next1: Default::default(),
            crc_next2: Default::default(),
            crc_init: Constant::new(u64::from(CRC32C_INIT).into()),
            keep_none: Constant::new(0x00.into()),
            keep_low_word: Constant::new(0x0F.into()),
            keep_all: Constant::new(0xFF.into()),
            dequeue: Default::default(),
            failed: Default::default(),
            s0_load: Default::default(),
            s0_valid: Default::default(),
            s0_word: Default::default(),
            in_word: Default::default(),
            skid_data: Default::default(),
            skid_keep: Default::default(),
            skid_last: Default::default(),
            skid_valid: Default::default(),
            in_q_free: Default::default(),
            in_take: Default::default(),
            in_q_data: Default::default(),
            in_q_keep: Default::default(),
            in_q_last: Default::default(),
            in_q_valid: Default::default(),
            in_ready_q: Default::default(),
            busy_q: Default::default(),
            in_w0_valid: Default::default(),
            in_w1_valid: Default::default(),
            in_partial: Default::default(),
            in_body0_less1: Default::default(),
            in_body1: Default::default(),
            in_len0_body0: Default::default(),
            in_len0_body1: Default::default(),
            in_len0_body2: Default::default(),
            in_len0_body3: Default::default(),
            in_len1_body0: Default::default(),
            in_len1_body1: Default::default(),
            in_len1_body2: Default::default(),
            max_len: Default::default(),
            in_len0_over: Default::default(),
            in_len1_over: Default::default(),
            in_len0_zero: Default::default(),
            in_len1_zero: Default::default(),
            in_keep0_shift: Default::default(),
            in_keep1_shift: Default::default(),
            in_keep0: Default::default(),
            in_keep1: Default::default(),
            in_len0_gt8: Default::default(),
            in_len1_gt8: Default::default(),
            s0_data: Default::default(),
            s0_last: Default::default(),
            in_len0: Default::default(),
            in_len1: Default::default(),
            len0_over: Default::default(),
            len1_over: Default::default(),
            keep0: Default::default(),
            keep1: Default::default(),
            len0_gt8: Default::default(),
            len1_gt8: Default::default(),
            take: Default::default(),
            w0_valid: Default::default(),
            w1_valid: Default::default(),
            partial: Default::default(),
            len0: Default::default(),
            len1: Default::default(),
            body0: Default::default(),
            body1: Default::default(),
            in_body0: Default::default(),
            body0_less1: Default::default(),
            words_left_less1: Default::default(),
            words_left_less2: Default::default(),
            w0_hdr: Default::default(),
            w0_crc: Default::default(),
            w0_body: Default::default(),
            left1: Default::default(),
            w1_hdr: Default::default(),
            w1_crc: Default::default(),
            left2: Default::default(),
            in_after: Default::default(),
            crc_ok0: Default::default(),
            too_long0: Default::default(),
            too_long1: Default::default(),
            unended: Default::default(),
            hdr_here: Default::default(),
            hdr_at_w1: Default::default(),
            hdr_len: Default::default(),
            hdr_gt8: Default::default(),
            hdr_keep: Default::default(),
            complete0: Default::default(),
            complete1: Default::default(),
            data_complete: Default::default(),
            full_emit: Default::default(),
            realigned: Default::default(),
            shift6_now: Default::default(),
            shifted: Default::default(),
            final_data: Default::default(),
            final_keep_now: Default::default(),
            final_out: Default::default(),
            final_out_keep: Default::default(),
            final_out_tag: Default::default(),
            first_out: Default::default(),
            first_out_data: Default::default(),
            first_out_tag: Default::default(),
            s2_valid: Default::default(),
            s2_first: Default::default(),
            s2_first_data: Default::default(),
            s2_first_tag: Default::default(),
            s2_final: Default::default(),
            s2_final_data: Default::default(),
            s2_final_from_fin: Default::default(),
            push_final_data: Default::default(),
            s2_final_tag: Default::default(),
            s2_w0_check: Default::default(),
            s2_ok0: Default::default(),
            s2_w1_check: Default::default(),
            s2_crc_after_w0: Default::default(),
            s2_word1: Default::default(),
            s2_length_error: Default::default(),
            room: Default::default(),
            s2_advance: Default::default(),
            s2_live: Default::default(),
            crc_bad0: Default::default(),
            crc_ok1: Default::default(),
            crc_bad1: Default::default(),
            push_first: Default::default(),
            push_final: Default::default(),
            push_first_tag: Default::default(),
            push_final_tag: Default::default(),
            in_fpdu: Default::default(),
            words_left: Default::default(),
            left_is0: Default::default(),
            left_is1: Default::default(),
            left_is2: Default::default(),
            len0_body0: Default::default(),
            len0_body1: Default::default(),
            len0_body2: Default::default(),
            len0_body3: Default::default(),
            len1_body0: Default::default(),
            len1_body1: Default::default(),
            len1_body2: Default::default(),
            left1_is0: Default::default(),
            left1_is1: Default::default(),
            left1_is2: Default::default(),
            left2_is0: Default::default(),
            left2_is1: Default::default(),
            left2_is2: Default::default(),
            crc_state: Default::default(),
            out_left: Default::default(),
            out_left_gt8: Default::default(),
            offset6: Default::default(),
            final_keep: Default::default(),
            prev: Default::default(),
            fin_data: Default::default(),
            fin_keep: Default::default(),
            crc_failed: Default::default(),
            length_failed: Default::default(),
            any_failed: Default::default(),
            queue0_data: Default::default(),
            queue0_tag: Default::default(),
            queue1_data: Default::default(),
            queue1_tag: Default::default(),
            queue2_data: Default::default(),
            queue2_tag: Default::default(),
            queue3_data: Default::default(),
            queue3_tag: Default::default(),
            queue_head: Default::default(),
            queue_tail: Default::default(),
            queue_count: Default::default(),
            tail_data: Default::default(),
            tail_tag: Default::default(),
            tail_free: Default::default(),
            head_tag: Default::default(),
        }
    }
}

impl Logic for MpaRxDelineator {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            s0_valid,
            s0_both_w1,
            in_fpdu,
            words_left,
            left_is0,
            left_is1,
            left_is2,
            crc_state,
            out_left,
            out_left_gt8,
            s2_final_from_fin,
            offset6,
            final_keep,
            prev,
            fin_data,
            fin_keep,
            crc_failed,
            length_failed,
            any_failed,
            queue0_data,
            queue0_tag,
            queue1_data,
            queue1_tag,
            queue2_data,
            queue2_tag,
            queue3_data,
            queue3_tag,
            queue_head,
            queue_tail,
            queue_count,
            s2_valid,
            s2_first,
            s2_first_data,
            s2_first_tag,
            s2_final,
            s2_final_data,
            s2_final_tag,
            s2_w0_check,
            s2_ok0,
            s2_w1_check,
            s2_crc_after_w0,
            s2_word1,
            s2_length_error,
            s0_word,
            skid_data,
            skid_keep,
            skid_last,
            skid_valid,
            in_q_data,
            in_q_keep,
            in_q_last,
            in_q_valid,
            in_ready_q,
            busy_q,
            max_len,
            room
        );
        self.dequeue.next = (self.queue_count.q.val() != 0) & self.ulpdu_ready.val();
        self.failed.next = self.any_failed.q.val();
        // Stage 2 pushes at most two beats into the queue; a failed flow drops its
        // beats without waiting for the output. Stage 1 takes the stage-0 beat when
        // stage 2 is free or moves on; stage 0 loads when it is empty or taken.
        self.s2_advance.next = !self.s2_valid.q.val() | self.room.q.val() | self.failed.val();
        self.take.next = self.s0_valid.q.val() & self.s2_advance.val() & !self.failed.val();
        self.s0_load.next = !self.s0_valid.q.val() | self.s2_advance.val();
        self.in_ready.next = self.in_ready_q.q.val() & !self.reset.val();

        // Stage 0: the beat as two words, and each word read as a header.
        // ULPDU_Length is big-endian: its high byte is byte 0 (bits 7:0).
        self.in_len0.next = (bit_cast::<16, 8>(self.in_q_data.q.val().get_bits::<8>(0)) << 8)
            | bit_cast::<16, 8>(self.in_q_data.q.val().get_bits::<8>(8));
        self.in_len1.next = (bit_cast::<16, 8>(self.in_q_data.q.val().get_bits::<8>(32)) << 8)
            | bit_cast::<16, 8>(self.in_q_data.q.val().get_bits::<8>(40));
        self.in_body0.next = self.in_len0.val() >> 2;
        if self.in_len0.val().get_bits::<2>(0) == 3 {
            self.in_body0.next = (self.in_len0.val() >> 2) + 1;
        }
        self.crc_data_both_w0.state.next = self.crc_zero.val();
        self.crc_data_both_w0.data.next =
            bit_cast::<64, 32>(self.in_q_data.q.val().get_bits::<32>(0));
        self.crc_data_both_w0.keep.next = self.keep_all.val();
        self.crc_data_both_w1.state.next = self.crc_zero.val();
        self.crc_data_both_w1.data.next = (self.in_q_data.q.val() >> 32) << 32;
        self.crc_data_both_w1.keep.next = self.keep_all.val();
        self.crc_data_low.state.next = self.crc_zero.val();
        self.crc_data_low.data.next = self.in_q_data.q.val();
        self.crc_data_low.keep.next = self.keep_low_word.val();
        self.crc_data_high.state.next = self.crc_init.val();
        self.crc_data_high.data.next = self.in_q_data.q.val() >> 32;
        self.crc_data_high.keep.next = self.keep_low_word.val();
        self.in_w0_valid.next = self.in_q_keep.q.val().get_bit(3);
        self.in_w1_valid.next = self.in_q_keep.q.val().get_bit(7);
        self.in_partial.next = (self.in_q_keep.q.val() != 0xFF)
            & (!self.in_q_last.q.val()
                | ((self.in_q_keep.q.val() != 0x00) & (self.in_q_keep.q.val() != 0x0F)));
        // `body0 - 1` from the length directly, not from `in_body0`: one carry chain
        // behind the input, not two in series.
        self.in_body0_less1.next = (self.in_len0.val() >> 2) - 1;
        if self.in_len0.val().get_bits::<2>(0) == 3 {
            self.in_body0_less1.next = self.in_len0.val() >> 2;
        }
        self.in_body1.next = self.in_len1.val() >> 2;
        if self.in_len1.val().get_bits::<2>(0) == 3 {
            self.in_body1.next = (self.in_len1.val() >> 2) + 1;
        }
        self.in_len0_body0.next = self.in_len0.val() < 3;
        self.in_len0_body1.next = (self.in_len0.val() > 2) & (self.in_len0.val() < 7);
        self.in_len0_body2.next = (self.in_len0.val() > 6) & (self.in_len0.val() < 11);
        self.in_len0_body3.next = (self.in_len0.val() > 10) & (self.in_len0.val() < 15);
        self.in_len1_body0.next = self.in_len1.val() < 3;
        self.in_len1_body1.next = (self.in_len1.val() > 2) & (self.in_len1.val() < 7);
        self.in_len1_body2.next = (self.in_len1.val() > 6) & (self.in_len1.val() < 11);
        self.max_len.d.next = self.max_ulpdu_len.val();
        self.in_len0_over.next = self.in_len0.val() > self.max_len.q.val();
        self.in_len1_over.next = self.in_len1.val() > self.max_len.q.val();
        self.in_len0_zero.next = self.in_len0.val() == 0;
        self.in_len1_zero.next = self.in_len1.val() == 0;
        // (A 3-bit signal: the negation wraps there, whatever width the Verilog sums in.)
        self.in_keep0_shift.next = !self.in_len0.val().get_bits::<3>(0) + 1;
        self.in_keep1_shift.next = !self.in_len1.val().get_bits::<3>(0) + 1;
        self.in_len0_gt8.next = self.in_len0.val() > 8;
        self.in_len1_gt8.next = self.in_len1.val() > 8;
        self.in_keep0.next = self.keep_all.val() >> self.in_keep0_shift.val();
        if self.in_len0_zero.val() {
            self.in_keep0.next = self.keep_none.val();
        }
        self.in_keep1.next = self.keep_all.val() >> self.in_keep1_shift.val();
        if self.in_len1_zero.val() {
            self.in_keep1.next = self.keep_none.val();
        }
        self.in_word.next = bit_cast::<271, 32>(self.crc_data_both_w0.next_state.val())
            | (bit_cast::<271, 32>(self.crc_data_low.next_state.val()) << 32)
            | (bit_cast::<271, 32>(self.crc_data_high.next_state.val()) << 64)
            | (bit_cast::<271, 64>(self.in_q_data.q.val()) << 96)
            | (bit_cast::<271, 16>(self.in_len0.val()) << 160)
            | (bit_cast::<271, 16>(self.in_len1.val()) << 176)
            | (bit_cast::<271, 16>(self.in_body0.val()) << 192)
            | (bit_cast::<271, 16>(self.in_body0_less1.val()) << 208)
            | (bit_cast::<271, 16>(self.in_body1.val()) << 224)
            | (bit_cast::<271, 1>(self.in_q_last.q.val().into()) << 240)
            | (bit_cast::<271, 1>(self.in_w0_valid.val().into()) << 241)
            | (bit_cast::<271, 1>(self.in_w1_valid.val().into()) << 242)
            | (bit_cast::<271, 1>(self.in_partial.val().into()) << 243)
            | (bit_cast::<271, 1>(self.in_len0_body0.val().into()) << 244)
            | (bit_cast::<271, 1>(self.in_len0_body1.val().into()) << 245)
            | (bit_cast::<271, 1>(self.in_len0_body2.val().into()) << 246)
            | (bit_cast::<271, 1>(self.in_len0_body3.val().into()) << 247)
            | (bit_cast::<271, 1>(self.in_len1_body0.val().into()) << 248)
            | (bit_cast::<271, 1>(self.in_len1_body1.val().into()) << 249)
            | (bit_cast::<271, 1>(self.in_len1_body2.val().into()) << 250)
            | (bit_cast::<271, 1>(self.in_len0_over.val().into()) << 251)
            | (bit_cast::<271, 1>(self.in_len1_over.val().into()) << 252)
            | (bit_cast::<271, 8>(self.in_keep0.val()) << 253)
            | (bit_cast::<271, 8>(self.in_keep1.val()) << 261)
            | (bit_cast::<271, 1>(self.in_len0_gt8.val().into()) << 269)
            | (bit_cast::<271, 1>(self.in_len1_gt8.val().into()) << 270);
        // Stage 0 loads the input register's beat, decoded; the input register then
        // takes the skid's beat if there is one (the skid is the newer), else the
        // input's. An input beat that arrives while the input register holds on goes
        // to the skid (which is empty then: `in_ready` was low with both full).
        self.in_take.next = self.in_valid.val() & self.in_ready.val();
        if self.s0_load.val() {
            self.s0_word.d.next = self.in_word.val();
            self.s0_both_w1.d.next = self.crc_data_both_w1.next_state.val();
            self.s0_valid.d.next = self.in_q_valid.q.val();
        }
        self.in_q_free.next = !self.in_q_valid.q.val() | self.s0_load.val();
        if self.in_q_free.val() {
            if self.skid_valid.q.val() {
                self.in_q_data.d.next = self.skid_data.q.val();
                self.in_q_keep.d.next = self.skid_keep.q.val();
                self.in_q_last.d.next = self.skid_last.q.val();
                self.in_q_valid.d.next = true;
                self.skid_valid.d.next = false;
            } else {
                self.in_q_data.d.next = self.in_data.val();
                self.in_q_keep.d.next = self.in_keep.val();
                self.in_q_last.d.next = self.in_last.val();
                self.in_q_valid.d.next = self.in_take.val();
            }
        }
        if self.in_take.val() & !self.in_q_free.val() {
            self.skid_valid.d.next = true;
        }
        // The skid's data loads whenever the skid is empty (what it holds then does
        // not matter), so its enables wait on one flip-flop, not on the handshakes.
        if !self.skid_valid.q.val() {
            self.skid_data.d.next = self.in_data.val();
            self.skid_keep.d.next = self.in_keep.val();
            self.skid_last.d.next = self.in_last.val();
        }
        self.s0_crc_both.next = self.s0_word.q.val().get_bits::<32>(0) ^ self.s0_both_w1.q.val();
        self.s0_crc_low.next = self.s0_word.q.val().get_bits::<32>(32);
        self.s0_crc_high.next = self.s0_word.q.val().get_bits::<32>(64);
        self.s0_data.next = self.s0_word.q.val().get_bits::<64>(96);
        self.len0.next = self.s0_word.q.val().get_bits::<16>(160);
        self.len1.next = self.s0_word.q.val().get_bits::<16>(176);
        self.body0.next = self.s0_word.q.val().get_bits::<16>(192);
        self.body0_less1.next = self.s0_word.q.val().get_bits::<16>(208);
        self.body1.next = self.s0_word.q.val().get_bits::<16>(224);
        self.s0_last.next = self.s0_word.q.val().get_bit(240);
        self.w0_valid.next = self.s0_word.q.val().get_bit(241);
        self.w1_valid.next = self.s0_word.q.val().get_bit(242);
        self.partial.next = self.s0_word.q.val().get_bit(243);
        self.len0_body0.next = self.s0_word.q.val().get_bit(244);
        self.len0_body1.next = self.s0_word.q.val().get_bit(245);
        self.len0_body2.next = self.s0_word.q.val().get_bit(246);
        self.len0_body3.next = self.s0_word.q.val().get_bit(247);
        self.len1_body0.next = self.s0_word.q.val().get_bit(248);
        self.len1_body1.next = self.s0_word.q.val().get_bit(249);
        self.len1_body2.next = self.s0_word.q.val().get_bit(250);
        self.len0_over.next = self.s0_word.q.val().get_bit(251);
        self.len1_over.next = self.s0_word.q.val().get_bit(252);
        self.keep0.next = self.s0_word.q.val().get_bits::<8>(253);
        self.keep1.next = self.s0_word.q.val().get_bits::<8>(261);
        self.len0_gt8.next = self.s0_word.q.val().get_bit(269);
        self.len1_gt8.next = self.s0_word.q.val().get_bit(270);

        // Stage 1. Word roles, word 0 then word 1.
        self.w0_hdr.next = !self.in_fpdu.q.val();
        self.w0_crc.next = self.in_fpdu.q.val() & self.left_is0.q.val();
        self.w0_body.next = self.in_fpdu.q.val() & !self.left_is0.q.val();
        self.words_left_less1.next = self.words_left.q.val() - 1;
        self.words_left_less2.next = self.words_left.q.val() - 2;
        self.left1.next = self.words_left_less1.val();
        if self.w0_hdr.val() {
            self.left1.next = self.body0.val();
        }
        self.w1_hdr.next = self.w0_crc.val();
        // body0 == 0 exactly when len0 <= 2, body0 == 1 when len0 is 3..=6.
        self.left1_is0.next = self.left_is1.q.val();
        self.left1_is1.next = self.left_is2.q.val();
        self.left1_is2.next = self.words_left.q.val() == 3;
        if self.w0_hdr.val() {
            self.left1_is0.next = self.len0_body0.val();
            self.left1_is1.next = self.len0_body1.val();
            self.left1_is2.next = self.len0_body2.val();
        }
        self.crc_next1.next = self.left1_is0.val();
        self.crc_next2.next = self.left1_is1.val();
        if self.w1_hdr.val() {
            self.crc_next2.next = self.len1_body0.val();
        }
        self.w1_crc.next = !self.w0_crc.val() & self.crc_next1.val();
        self.left2.next = self.words_left_less2.val();
        if self.w0_hdr.val() {
            self.left2.next = self.body0_less1.val();
        }
        self.left2_is0.next = self.left_is2.q.val();
        self.left2_is1.next = self.words_left.q.val() == 3;
        self.left2_is2.next = self.words_left.q.val() == 4;
        if self.w0_hdr.val() {
            self.left2_is0.next = self.len0_body1.val();
            self.left2_is1.next = self.len0_body2.val();
            self.left2_is2.next = self.len0_body3.val();
        }
        if self.w1_hdr.val() {
            self.left2.next = self.body1.val();
            self.left2_is0.next = self.len1_body0.val();
            self.left2_is1.next = self.len1_body1.val();
            self.left2_is2.next = self.len1_body2.val();
        }
        self.in_after.next = self.in_fpdu.q.val();
        if self.w0_valid.val() {
            self.in_after.next = !self.w0_crc.val();
        }
        if self.w1_valid.val() {
            self.in_after.next = !self.w1_crc.val();
        }

        // The CRC over the covered words: both words of one FPDU (8 bytes), or one
        // word (the high word shifted down when it starts an FPDU after a CRC word).
        // Between FPDUs the register holds the initial value, so an FPDU starting at
        // word 0 continues from it like any other beat, with no choice on the loop.
        self.crc_both.state.next = self.crc_state.q.val();
        self.crc_both.data.next = self.data_zero.val();
        self.crc_both.keep.next = self.keep_all.val();
        self.crc_low.state.next = self.crc_state.q.val();
        self.crc_low.data.next = self.data_zero.val();
        self.crc_low.keep.next = self.keep_low_word.val();
        self.crc_after_both.next = self.crc_both.next_state.val() ^ self.s0_crc_both.val();
        self.crc_after_low.next = self.crc_low.next_state.val() ^ self.s0_crc_low.val();
        // The CRC field is sent least significant byte first: it is the word as it
        // stands in a little-endian beat. Word 0 is compared here, with the register;
        // word 1, against the CRC after word 0, in stage 2.
        self.crc_ok0.next = !self.crc_state.q.val() == self.s0_data.val().get_bits::<32>(0);

        // Length errors, in the reference's order: word 0 first, and a word after an
        // error is not looked at. A CRC error found in stage 2 overrides what stage 1
        // made of the words after it: the flow has failed, so stage 1's state no
        // longer matters, and stage 2 drops the beats it still owes.
        self.too_long0.next = self.w0_valid.val() & self.w0_hdr.val() & self.len0_over.val();
        self.too_long1.next =
            self.w1_valid.val() & self.w1_hdr.val() & self.len1_over.val() & !self.too_long0.val();
        self.unended.next = (self.partial.val() | (self.s0_last.val() & self.in_after.val()))
            & !self.too_long0.val()
            & !self.too_long1.val();

        // ULPDU bytes. A length error does not gate the state and data below, only
        // what is pushed (`final_out`, `unended`, and `first_out`, which a length error
        // never meets): the flow stops there, so what stage 1 keeps no longer matters,
        // and the length compares stay off the data selection.
        self.hdr_at_w1.next = !self.w0_hdr.val();
        self.hdr_here.next =
            (self.w0_valid.val() & self.w0_hdr.val()) | (self.w1_valid.val() & self.w1_hdr.val());
        self.hdr_len.next = self.len0.val();
        if self.hdr_at_w1.val() {
            self.hdr_len.next = self.len1.val();
        }
        self.hdr_keep.next = self.keep0.val();
        self.hdr_gt8.next = self.len0_gt8.val();
        if self.hdr_at_w1.val() {
            self.hdr_keep.next = self.keep1.val();
            self.hdr_gt8.next = self.len1_gt8.val();
        }
        self.complete0.next = self.w0_valid.val() & !self.w0_crc.val() & self.crc_next1.val();
        self.complete1.next = self.w1_valid.val() & !self.w1_crc.val() & self.crc_next2.val();
        self.data_complete.next = self.complete0.val() | self.complete1.val();
        self.full_emit.next = self.w0_valid.val()
            & self.w0_body.val()
            & self.out_left_gt8.q.val()
            & (!self.offset6.q.val() | self.w1_valid.val());
        if self.offset6.q.val() {
            self.realigned.next = (self.s0_data.val() << 16) | (self.prev.q.val() >> 48);
        } else {
            self.realigned.next = (self.s0_data.val() << 48) | (self.prev.q.val() >> 16);
        }
        self.shift6_now.next = self.offset6.q.val();
        if self.hdr_here.val() {
            self.shift6_now.next = self.hdr_at_w1.val();
        }
        if self.shift6_now.val() {
            self.shifted.next = self.s0_data.val() >> 48;
        } else {
            self.shifted.next = self.s0_data.val() >> 16;
        }
        self.final_data.next = self.realigned.val();
        if self.hdr_here.val() | self.full_emit.val() {
            self.final_data.next = self.shifted.val();
        }
        self.final_keep_now.next = self.final_keep.q.val();
        if self.hdr_here.val() {
            self.final_keep_now.next = self.hdr_keep.val();
        }

        // The ULPDU's last beat is owed when its CRC word is word 1 of this beat, or
        // when the segment ends inside the FPDU (then it ends the packet as bad: with
        // its bytes if all arrived, else empty). Good if word 1's CRC matches.
        self.final_out.next = (self.complete0.val() & self.w1_valid.val() & !self.too_long0.val())
            | (self.unended.val() & self.in_after.val());
        self.final_out_keep.next = self.keep_none.val();
        if self.data_complete.val() {
            self.final_out_keep.next = self.final_keep_now.val();
        } else if !self.w0_valid.val() & self.w0_crc.val() {
            self.final_out_keep.next = self.fin_keep.q.val();
        }
        if self.complete0.val() & self.w1_valid.val() {
            self.final_out_tag.next = bit_cast::<10, 8>(self.final_out_keep.val()) | 0x300;
        } else {
            self.final_out_tag.next = bit_cast::<10, 8>(self.final_out_keep.val()) | 0x100;
        }
        self.first_out.next = (self.w0_valid.val() & self.w0_crc.val()) | self.full_emit.val();
        self.first_out_data.next = self.realigned.val();
        self.first_out_tag.next = bit_cast::<10, 8>(self.keep_all.val());
        if self.w0_crc.val() {
            // The previous ULPDU's last beat, held for this CRC word: good if it matches.
            self.first_out_data.next = self.fin_data.q.val();
            self.first_out_tag.next = bit_cast::<10, 8>(self.fin_keep.q.val()) | 0x300;
        }

        // Stage 2: the CRC verdicts, in the reference's order (a CRC error in word 0
        // ends the flow before word 1, and beats after an error are dropped), then the
        // pushes into the queue at its tail: the `first_out` beat, then the `final_out`
        // one. `s2_advance` made sure two places are free.
        self.s2_live.next = self.s2_valid.q.val() & self.room.q.val() & !self.failed.val();
        self.crc_bad0.next = self.s2_w0_check.q.val() & !self.s2_ok0.q.val();
        self.crc_ok1.next = !self.s2_crc_after_w0.q.val() == self.s2_word1.q.val();
        self.crc_bad1.next = self.s2_w1_check.q.val() & !self.crc_ok1.val();
        self.push_first.next = self.s2_live.val() & self.s2_first.q.val();
        self.push_final.next = self.s2_live.val() & self.s2_final.q.val() & !self.crc_bad0.val();
        self.push_first_tag.next = self.s2_first_tag.q.val();
        if self.crc_bad0.val() {
            self.push_first_tag.next = self.s2_first_tag.q.val() & 0x1FF;
        }
        self.push_final_tag.next = self.s2_final_tag.q.val();
        if self.crc_bad1.val() {
            self.push_final_tag.next = self.s2_final_tag.q.val() & 0x1FF;
        }
        // The pushes land at the tail: the first beat (or, without one, the final beat)
        // at `queue_tail`, the final beat after it. Both places are written whenever
        // they are free (the tail's unless the queue is full, the next one when there
        // is room), whether or not a beat is pushed: a place beyond the count holds
        // nothing, so only the tail and the count wait on the verdicts, and the 74-bit
        // places load on flags of the queue's own registers.
        self.push_final_data.next = self.s2_final_data.q.val();
        if self.s2_final_from_fin.q.val() {
            self.push_final_data.next = self.fin_data.q.val();
        }
        self.tail_data.next = self.push_final_data.val();
        self.tail_tag.next = self.push_final_tag.val();
        if self.s2_first.q.val() {
            self.tail_data.next = self.s2_first_data.q.val();
            self.tail_tag.next = self.push_first_tag.val();
        }
        self.tail_free.next = !self.queue_count.q.val().get_bit(2);
        match self.queue_tail.q.val().index() {
            0 => {
                if self.tail_free.val() {
                    self.queue0_data.d.next = self.tail_data.val();
                    self.queue0_tag.d.next = self.tail_tag.val();
                }
                if self.room.q.val() {
                    self.queue1_data.d.next = self.push_final_data.val();
                    self.queue1_tag.d.next = self.push_final_tag.val();
                }
            }
            1 => {
                if self.tail_free.val() {
                    self.queue1_data.d.next = self.tail_data.val();
                    self.queue1_tag.d.next = self.tail_tag.val();
                }
                if self.room.q.val() {
                    self.queue2_data.d.next = self.push_final_data.val();
                    self.queue2_tag.d.next = self.push_final_tag.val();
                }
            }
            2 => {
                if self.tail_free.val() {
                    self.queue2_data.d.next = self.tail_data.val();
                    self.queue2_tag.d.next = self.tail_tag.val();
                }
                if self.room.q.val() {
                    self.queue3_data.d.next = self.push_final_data.val();
                    self.queue3_tag.d.next = self.push_final_tag.val();
                }
            }
            _ => {
                if self.tail_free.val() {
                    self.queue3_data.d.next = self.tail_data.val();
                    self.queue3_tag.d.next = self.tail_tag.val();
                }
                if self.room.q.val() {
                    self.queue0_data.d.next = self.push_final_data.val();
                    self.queue0_tag.d.next = self.push_final_tag.val();
                }
            }
        }
        self.queue_tail.d.next = self.queue_tail.q.val()
            + bit_cast::<2, 1>(self.push_first.val().into())
            + bit_cast::<2, 1>(self.push_final.val().into());
        self.queue_count.d.next = self.queue_count.q.val()
            + bit_cast::<3, 1>(self.push_first.val().into())
            + bit_cast::<3, 1>(self.push_final.val().into())
            - bit_cast::<3, 1>(self.dequeue.val().into());
        if self.dequeue.val() {
            self.queue_head.d.next = self.queue_head.q.val() + 1;
        }
        if self.s2_live.val() {
            if self.crc_bad0.val() | self.crc_bad1.val() {
                self.crc_failed.d.next = true;
                self.any_failed.d.next = true;
            } else if self.s2_length_error.q.val() {
                self.length_failed.d.next = true;
                self.any_failed.d.next = true;
            }
        }
        if self.s2_advance.val() {
            self.s2_valid.d.next = false;
        }

        if self.take.val() {
            self.prev.d.next = self.s0_data.val();
            // A beat of word 0 alone that does not end an FPDU there is a segment's
            // last beat ending inside it, or a short beat before a segment's last (both
            // `unended`): the flow fails with it, so the register need not take the
            // low word's update, and the loop chooses between one update and restarts.
            if self.w0_valid.val() {
                self.crc_state.d.next = self.crc_after_both.val();
                if self.w0_crc.val() {
                    self.crc_state.d.next = self.crc_init.val();
                    if self.w1_valid.val() {
                        self.crc_state.d.next = self.s0_crc_high.val();
                    }
                } else if self.w1_valid.val() & self.w1_crc.val() {
                    self.crc_state.d.next = self.crc_init.val();
                }
            }
            if self.w0_valid.val() {
                self.in_fpdu.d.next = !self.w0_crc.val();
                self.words_left.d.next = self.left1.val();
                self.left_is0.d.next = self.left1_is0.val();
                self.left_is1.d.next = self.left1_is1.val();
                self.left_is2.d.next = self.left1_is2.val();
            }
            if self.w1_valid.val() {
                self.in_fpdu.d.next = !self.w1_crc.val();
                self.words_left.d.next = self.left2.val();
                self.left_is0.d.next = self.left2_is0.val();
                self.left_is1.d.next = self.left2_is1.val();
                self.left_is2.d.next = self.left2_is2.val();
            }
            if self.hdr_here.val() {
                self.out_left.d.next = self.hdr_len.val();
                self.out_left_gt8.d.next = self.hdr_gt8.val();
                self.offset6.d.next = self.hdr_at_w1.val();
                self.final_keep.d.next = self.hdr_keep.val();
            }
            if self.full_emit.val() {
                self.out_left.d.next = self.out_left.q.val() - 8;
                self.out_left_gt8.d.next = self.out_left.q.val() > 16;
            }
            if self.w0_valid.val() {
                self.fin_data.d.next = self.final_data.val();
                self.fin_keep.d.next = self.final_keep_now.val();
            }
            self.s2_valid.d.next = true;
            self.s2_first.d.next = self.first_out.val();
            self.s2_first_data.d.next = self.first_out_data.val();
            self.s2_first_tag.d.next = self.first_out_tag.val();
            self.s2_final.d.next = self.final_out.val();
            self.s2_final_data.d.next = self.final_data.val();
            self.s2_final_from_fin.d.next = !self.w0_valid.val() & self.w0_crc.val();
            self.s2_final_tag.d.next = self.final_out_tag.val();
            self.s2_w0_check.d.next = self.w0_valid.val() & self.w0_crc.val();
            self.s2_ok0.d.next = self.crc_ok0.val();
            self.s2_w1_check.d.next =
                self.w1_valid.val() & self.w1_crc.val() & !self.too_long0.val();
            self.s2_crc_after_w0.d.next = self.crc_after_low.val();
            self.s2_word1.d.next = self.s0_data.val().get_bits::<32>(32);
            self.s2_length_error.d.next =
                self.too_long0.val() | self.too_long1.val() | self.unended.val();
        }
        if self.reset.val() {
            self.s0_valid.d.next = false;
            self.skid_valid.d.next = false;
            self.in_q_valid.d.next = false;
            self.in_fpdu.d.next = false;
            self.crc_state.d.next = self.crc_init.val();
            self.crc_failed.d.next = false;
            self.length_failed.d.next = false;
            self.any_failed.d.next = false;
            self.s2_valid.d.next = false;
            self.queue_head.d.next = 0.into();
            self.queue_tail.d.next = 0.into();
            self.queue_count.d.next = 0.into();
        }
        match self.queue_head.q.val().index() {
            0 => {
                self.ulpdu_data.next = self.queue0_data.q.val();
                self.head_tag.next = self.queue0_tag.q.val();
            }
            1 => {
                self.ulpdu_data.next = self.queue1_data.q.val();
                self.head_tag.next = self.queue1_tag.q.val();
            }
            2 => {
                self.ulpdu_data.next = self.queue2_data.q.val();
                self.head_tag.next = self.queue2_tag.q.val();
            }
            _ => {
                self.ulpdu_data.next = self.queue3_data.q.val();
                self.head_tag.next = self.queue3_tag.q.val();
            }
        }
        self.ulpdu_keep.next = self.head_tag.val().get_bits::<8>(0);
        self.ulpdu_last.next = self.head_tag.val().get_bit(8);
        self.ulpdu_good.next = self.head_tag.val().get_bit(9);
        self.ulpdu_valid.next = self.queue_count.q.val() != 0;
        self.crc_error.next = self.crc_failed.q.val();
        self.length_error.next = self.length_failed.q.val();
        // The input may take a beat next cycle unless the input register and the skid
        // will both hold one.
        self.in_ready_q.d.next = !(self.skid_valid.d.val() & self.in_q_valid.d.val());
        // `busy` is a register: next cycle's holdings (a user decides on it with wide
        // fan-out; in `nic_top`, the failed flow's context write). Worked out from this
        // cycle's registers and handshakes rather than read from the registers' inputs,
        // which end in the pushes' CRC verdicts and the input's select chain: a beat
        // arriving, in the skid or in the input register stays inside; stage 0's beat
        // moves on into stage 2 unless the flow has failed (then it is dropped);
        // stage 2's stays, or pushes a beat into the queue, unless the flow has failed;
        // the queue keeps a beat unless its only one leaves.
        self.busy_q.d.next = !self.reset.val()
            & (self.in_take.val()
                | self.skid_valid.q.val()
                | self.in_q_valid.q.val()
                | (self.s0_valid.q.val() & !self.failed.val())
                | (self.s2_valid.q.val()
                    & !self.failed.val()
                    & (!self.room.q.val() | self.s2_first.q.val() | self.s2_final.q.val()))
                | (self.queue_count.q.val() > 1)
                | ((self.queue_count.q.val() == 1) & !self.ulpdu_ready.val()));
        self.busy.next = self.busy_q.q.val();
        self.room.d.next = self.queue_count.d.val() < 3;
    }
}
