//! Transmit checksum insertion, store and forward: every frame sent to the network
//! passes through here, and IPv4/TCP frames leave with both checksums filled in.
//!
//! **Why**: the firmware leaves checksums to the NIC and the datapath builds its frames
//! with zero checksums (`Checksums::Offloaded`), so one block on the way out fills them
//! for all. The TCP checksum covers the whole segment but sits in the frame's 7th beat,
//! so a frame can leave only once all of it has been seen: whole frames are buffered.
//!
//! **Which frames are filled**: Ethernet II with EtherType 0x0800, IPv4 version 4 with
//! IHL = 5, protocol 6, total length at least 40 and within the frame
//! (14 + total_len <= frame length). For those, the IPv4 header checksum (bytes 24-25)
//! is written over bytes 14..34 and the TCP checksum (bytes 50-51) over the
//! pseudo-header (addresses, protocol 6, TCP length = total_len - 20) and the segment
//! bytes [34, 14 + total_len), an odd last byte padded with zero; both fields count as
//! zero whatever they held. Ethernet padding past 14 + total_len is neither summed nor
//! changed. This is what `fill_checksums` of the testbench model (smoltcp's
//! `fill_checksum` on the IPv4 header and the TCP segment) produces for such frames.
//! Every other frame (other EtherTypes, IPv4 options, other protocols, lengths that do
//! not fit) leaves byte for byte as it came (`frames_passed`). A frame longer than
//! [`MAX_FRAME_LEN`] bytes is taken and dropped (`frames_dropped`). Each frame is counted
//! once, in the cycle its last beat is taken.
//!
//! **Checksums**: ones'-complement sums are byte-order independent (RFC 1071 §2(B)), so
//! each beat's four little-endian 16-bit lanes are added as they stand into 32-bit
//! accumulators (as in `tcp_rx`), and the folded, complemented sum is written back as a
//! little-endian lane. The IHL is fixed at 5, so the IPv4 header and the pseudo-header
//! addresses sit in fixed lanes; only the segment's end is compared per lane. Every
//! beat but a frame's last is full, so beat `b` starts at byte 8b and everything
//! positional is decided from beat indices, not byte counts:
//! - which lanes of a beat count, into registered flags when the beat before it is
//!   taken, from the beat index and from where the segment's last byte lies (its beat
//!   and position, registered a cycle after the total length arrives in beat 2);
//! - whether the segment ends within the frame (`14 + total_len <= frame length`),
//!   from two such flags and the last beat's `keep`;
//! - whether the frame fits 1518 bytes: only its 190th beat can overrun.
//!
//! A beat's lanes are added up in pairs in one cycle (one carry chain behind the lane
//! masks) and the pairs join the accumulators in the next, so the masks are never in
//! series with more than one adder; the last beat's lane pairs are
//! queued beside the rest and added when the frame is popped, and its checksum fields
//! are summed and folded over the three cycles after (one adder each), ready in the
//! cycle beat 3 can first be read. The
//! pseudo-header's protocol is byte 23 of the frame and its length a lane registered from
//! beat 2, summed in place of the IPv4 checksum field's lane, so the accumulators add
//! two terms to their sum and nothing else.
//!
//! **Timing** (`cargo run --release -- synth --block tx_checksum`,
//! LFE5U-25F-6, out of context): see the README's figures. It was 108.3 MHz with the
//! ring read straight into the output register (block RAM's 5.8 ns clock-to-out and
//! the route to the output register in one cycle); 55.6 MHz with the lane compares and
//! the pseudo-header in the sums' path, and 90.2 MHz with a combinational `in_ready`,
//! byte-count compares and six-term sums.
//!
//! **Buffer**: one RAM of 512 × 72 bits (data and keep of a beat; two DP16KD at
//! 512 × 36 on an ECP5) used as a ring. A frame is written from the ring's write pointer; on its last
//! beat its beat count and raw sums go into a two-entry queue, or the write pointer
//! rewinds to the frame's start if it is dropped. A frame of more than 190 beats (over
//! 1518 bytes) is not written past beat 190 and its further beats are taken and
//! discarded, so an oversized frame never blocks the input. The reader takes frames from
//! the queue and reads their beats in order, replacing lane 0 of beat 3 and lane 1 of
//! beat 6 when the frame is filled. A beat goes through the RAM's read latch, its
//! output register and the output register, each holding while the one after it
//! stalls; which field a beat takes is chosen when it is read and travels with it.
//!
//! **Interface**: 64-bit beats, byte 0 in bits 7:0, `keep` contiguous low bytes (only the
//! last beat partial), one frame per packet; keep is stored and sent as it came.
//! `in_ready` is a register (gated by `reset`), set from the cycle before: it is low
//! during `reset`, after a cycle in which 511 or more beats awaited output in the ring,
//! and after a cycle at whose end two complete frames were queued for output (or would
//! be, if the last beat taken then commits); it is high regardless of those while an
//! oversized frame's excess beats are discarded. A frame whose middle beats are not
//! full breaks the interface: it leaves with wrong checksums (never a hang or a lost
//! frame). The output is registered.
//!
//! **Latency**: a frame's first beat is on `out_*` 5 cycles after the cycle its last
//! beat was taken (queued, popped, read into the RAM's latch, its output register,
//! the output register).
//! **Throughput**: one beat per cycle in and out. Within a frame the output has no
//! bubbles while `out_ready` is high. Across frames the output runs back to back when
//! the next frame was complete by the time the previous one's last beat is read, as it
//! is for a stream of frames no longer than the ones before them; a back-to-back run of
//! N frames of B beats each, with the output always ready, has its last output beat
//! (N + 1)·B + 3 cycles after the first input beat (the input never stalls). The input
//! stalls only when the output falls behind (the two-entry queue or the ring full).
//!
//! Synchronous active-high `reset`: empties the ring and the queue, drops the frame being
//! received (the input must start a new frame after it) and the one being sent, and
//! clears the counters. Block RAM has no reset and needs none.

use rust_hdl::prelude::*;

use crate::block_ram::OutputRegisteredRam;

/// Longest frame passed on, without FCS (a 1500-byte IPv4 packet and the Ethernet
/// header). (`#[hdl_gen]` cannot read Rust constants: `update` writes 190, the beats of
/// such a frame, and 189, the full beats that fit it.)
pub const MAX_FRAME_LEN: u64 = 1518;

/// Beats of the ring buffer.
pub const RING_BEATS: usize = 512;

/// Fills the IPv4 and TCP checksums of the frames on `in_*` and sends them on `out_*`;
/// see the module documentation.
#[derive(Default, LogicBlock)]
pub struct TxChecksum {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub in_data: Signal<In, Bits<64>>,
    pub in_keep: Signal<In, Bits<8>>,
    pub in_last: Signal<In, Bit>,
    pub in_valid: Signal<In, Bit>,
    pub in_ready: Signal<Out, Bit>,
    pub out_data: Signal<Out, Bits<64>>,
    pub out_keep: Signal<Out, Bits<8>>,
    pub out_last: Signal<Out, Bit>,
    pub out_valid: Signal<Out, Bit>,
    pub out_ready: Signal<In, Bit>,
    /// Frames sent with their checksums filled in.
    pub frames_filled: Signal<Out, Bits<32>>,
    /// Frames sent unchanged.
    pub frames_passed: Signal<Out, Bits<32>>,
    /// Oversized frames taken and dropped.
    pub frames_dropped: Signal<Out, Bits<32>>,
    /// The ring: `{keep, data}` per beat, read through the block RAM's own output
    /// register.
    ring: OutputRegisteredRam<Bits<72>, 9>,
    // ---- write side ----
    /// An input beat is taken this cycle.
    take: Signal<Local, Bit>,
    /// `in_ready`, decided in the cycle before from that cycle's state: the fill level
    /// and queue compares stay off the input's path.
    ready_q: DFF<Bit>,
    /// A frame's last beat may be pushed into the queue this cycle (it is taken; whether
    /// it commits is left out, so the queue's full flag errs on the safe side).
    push_maybe: Signal<Local, Bit>,
    /// The queue is full next cycle (or might be).
    queue_full_next: Signal<Local, Bit>,
    /// The frame's excess beats are being discarded next cycle.
    discard_next: Signal<Local, Bit>,
    /// Beats written but not yet sent (0..=512).
    used: Signal<Local, Bits<10>>,
    wr_next: Signal<Local, Bits<10>>,
    /// Where the segment's last byte lies, from `seg_end` a cycle after it is set: the
    /// index of the beat before its beat (saturated at 255: beat indices stop at 190,
    /// so the per-beat compares are 8 bits wide), and its position within its beat.
    seg_pre_beat: DFF<Bits<8>>,
    seg_pre_full: Signal<Local, Bits<16>>,
    seg_last_pos: DFF<Bits<3>>,
    /// For this beat, decided when the beat before was taken (and only from beat 6 on:
    /// no shorter frame holds a filled segment): the segment's last byte lies in an
    /// earlier beat, or in this one.
    seg_before: DFF<Bit>,
    seg_here: DFF<Bit>,
    /// The segment ends within the frame if this beat is its last (`seg_end` is at most
    /// the frame's length).
    seg_fits: Signal<Local, Bit>,
    /// The next beat lies before the beat holding the segment's last byte, or is it.
    next_before_seg_last: Signal<Local, Bit>,
    next_is_seg_last: Signal<Local, Bit>,
    /// Whether each lane of this beat counts for the IPv4 sum, and its low and high
    /// bytes for the TCP sum: decided when the beat before was taken.
    ip_in_0: DFF<Bit>,
    ip_in_1: DFF<Bit>,
    ip_in_2: DFF<Bit>,
    ip_in_3: DFF<Bit>,
    tcp_low_in_0: DFF<Bit>,
    tcp_low_in_1: DFF<Bit>,
    tcp_low_in_2: DFF<Bit>,
    tcp_low_in_3: DFF<Bit>,
    tcp_high_in_0: DFF<Bit>,
    tcp_high_in_1: DFF<Bit>,
    tcp_high_in_2: DFF<Bit>,
    tcp_high_in_3: DFF<Bit>,
    ip_lane_0: Signal<Local, Bits<17>>,
    ip_lane_1: Signal<Local, Bits<17>>,
    ip_lane_2: Signal<Local, Bits<17>>,
    ip_lane_3: Signal<Local, Bits<17>>,
    tcp_lane_0: Signal<Local, Bits<17>>,
    tcp_lane_1: Signal<Local, Bits<17>>,
    tcp_lane_2: Signal<Local, Bits<17>>,
    tcp_lane_3: Signal<Local, Bits<17>>,
    /// The pseudo-header's TCP length (total_len - 20) as a little-endian lane,
    /// registered from beat 2 (which holds the total length) and summed in place of
    /// lane 0 of beat 3 (the IPv4 checksum field, which the TCP sum does not cover):
    /// `length_in_0`. The pseudo-header's protocol is byte 23 itself (6 in every frame
    /// that is filled), so nothing is added on top of a beat's lanes.
    beat_tcp_len: Signal<Local, Bits<16>>,
    length_lane: DFF<Bits<17>>,
    length_in_0: DFF<Bit>,
    /// The sums including this beat.
    ip_total: Signal<Local, Bits<32>>,
    tcp_total: Signal<Local, Bits<32>>,
    /// This beat's lanes added up in two pairs (lanes 0 + 1, lanes 2 + 3: one 17-bit
    /// carry chain behind the lanes' masks, not a four-term sum); registered, they join
    /// the sums a cycle later.
    ip_beat_lo: Signal<Local, Bits<17>>,
    ip_beat_hi: Signal<Local, Bits<17>>,
    tcp_beat_lo: Signal<Local, Bits<17>>,
    tcp_beat_hi: Signal<Local, Bits<17>>,
    ip_beat_lo_q: DFF<Bits<17>>,
    ip_beat_hi_q: DFF<Bits<17>>,
    tcp_beat_lo_q: DFF<Bits<17>>,
    tcp_beat_hi_q: DFF<Bits<17>>,
    /// On the last beat: the frame is kept (not oversized, every beat written).
    commit: Signal<Local, Bit>,
    /// On the last beat: the frame's checksums are filled.
    fill: Signal<Local, Bit>,
    wr_ptr: DFF<Bits<10>>,
    /// Where the frame being written starts (the write pointer rewinds there on a drop).
    frame_start: DFF<Bits<10>>,
    /// Beats of this frame written so far; stops at 190.
    wr_beat: DFF<Bits<8>>,
    /// `wr_beat` is below 189 / is 189, kept beside it: the commit decision and the
    /// write pointer's select wait on no compare.
    wr_beat_below_189: DFF<Bit>,
    wr_beat_is_189: DFF<Bit>,
    wr_beat_below_190: Signal<Local, Bit>,
    /// Bytes 12-13 as a little-endian lane (IPv4 is 0x0008).
    ethertype: DFF<Bits<16>>,
    version_ihl: DFF<Bits<8>>,
    protocol: DFF<Bits<8>>,
    total_len: DFF<Bits<16>>,
    /// 14 + total_len: where the segment ends.
    seg_end: DFF<Bits<16>>,
    ip_sum: DFF<Bits<32>>,
    tcp_sum: DFF<Bits<32>>,
    // ---- the queue of complete frames: two entries ----
    q0_valid: DFF<Bit>,
    q0_last_beat: DFF<Bits<8>>,
    q0_fill: DFF<Bit>,
    q0_ip: DFF<Bits<32>>,
    q0_tcp: DFF<Bits<32>>,
    /// The last beat's lane pairs, kept apart from the rest of the sums (added when the
    /// frame is popped, with cycles to spare before its checksums are sent).
    q0_ip_last_lo: DFF<Bits<17>>,
    q0_ip_last_hi: DFF<Bits<17>>,
    q0_tcp_last_lo: DFF<Bits<17>>,
    q0_tcp_last_hi: DFF<Bits<17>>,
    q1_valid: DFF<Bit>,
    q1_last_beat: DFF<Bits<8>>,
    q1_fill: DFF<Bit>,
    q1_ip: DFF<Bits<32>>,
    q1_tcp: DFF<Bits<32>>,
    q1_ip_last_lo: DFF<Bits<17>>,
    q1_ip_last_hi: DFF<Bits<17>>,
    q1_tcp_last_lo: DFF<Bits<17>>,
    q1_tcp_last_hi: DFF<Bits<17>>,
    push_sel: DFF<Bit>,
    pop_sel: DFF<Bit>,
    head_valid: Signal<Local, Bit>,
    head_last_beat: Signal<Local, Bits<8>>,
    head_fill: Signal<Local, Bit>,
    head_ip: Signal<Local, Bits<32>>,
    head_tcp: Signal<Local, Bits<32>>,
    head_ip_last_lo: Signal<Local, Bits<17>>,
    head_ip_last_hi: Signal<Local, Bits<17>>,
    head_tcp_last_lo: Signal<Local, Bits<17>>,
    head_tcp_last_hi: Signal<Local, Bits<17>>,
    /// The frame being read: its queued sums and last-beat pairs, taken when it is
    /// popped; the whole sums a cycle later; their folds, the first registered. One
    /// adder a cycle, none behind the pop: the fields are ready in the cycle beat 3
    /// can first be read (4 cycles after the pop).
    cur_ip_queued: DFF<Bits<32>>,
    cur_ip_last_lo: DFF<Bits<17>>,
    cur_ip_last_hi: DFF<Bits<17>>,
    cur_tcp_queued: DFF<Bits<32>>,
    cur_tcp_last_lo: DFF<Bits<17>>,
    cur_tcp_last_hi: DFF<Bits<17>>,
    cur_ip_sum: DFF<Bits<32>>,
    cur_tcp_sum: DFF<Bits<32>>,
    cur_ip_fold: DFF<Bits<32>>,
    cur_ip_fold2: Signal<Local, Bits<16>>,
    cur_tcp_fold: DFF<Bits<32>>,
    cur_tcp_fold2: Signal<Local, Bits<16>>,
    // ---- read side ----
    /// The output register takes a new beat (or empties) this cycle.
    free: Signal<Local, Bit>,
    /// The RAM's output register takes the read latch's beat (or empties) this cycle.
    b_load: Signal<Local, Bit>,
    /// A beat is read from the ring this cycle.
    issue: Signal<Local, Bit>,
    /// The queue's head becomes the frame being read.
    pop: Signal<Local, Bit>,
    pres_next: Signal<Local, Bits<10>>,
    pres_beat_next: Signal<Local, Bits<8>>,
    /// `pres_beat` is the frame's last beat (`cur_last_beat`), kept as a register
    /// beside the two it compares, so the pop decision and its 150-odd enables wait on
    /// no compare.
    pres_last: DFF<Bit>,
    ram_data: Signal<Local, Bits<64>>,
    patched: Signal<Local, Bits<64>>,
    /// Ring position of the next beat to read; beats from here on have not been read.
    pres_ptr: DFF<Bits<10>>,
    /// The frame being read has beats left to read.
    pres_valid: DFF<Bit>,
    /// The index within its frame of the next beat to read.
    pres_beat: DFF<Bits<8>>,
    /// The frame being read: its last beat's index (compared with the beat read next,
    /// into `pres_last`), filled, and its checksum fields as lanes.
    cur_last_beat: DFF<Bits<8>>,
    cur_fill: DFF<Bit>,
    cur_ip_field: DFF<Bits<16>>,
    cur_tcp_field: DFF<Bits<16>>,
    /// The beat in the RAM's read latch (stage A) and in its output register (stage
    /// B): there, last in its frame, and the checksum field to write over its lane 0
    /// (IPv4, beat 3) or lane 1 (TCP, beat 6), chosen when it is read, so the fields
    /// of the next frame can be computed meanwhile.
    a_valid: DFF<Bit>,
    a_last: DFF<Bit>,
    a_patch_ip: DFF<Bit>,
    a_patch_tcp: DFF<Bit>,
    a_field: DFF<Bits<16>>,
    b_valid: DFF<Bit>,
    b_last: DFF<Bit>,
    b_patch_ip: DFF<Bit>,
    b_patch_tcp: DFF<Bit>,
    b_field: DFF<Bits<16>>,
    out_data_q: DFF<Bits<64>>,
    out_keep_q: DFF<Bits<8>>,
    out_last_q: DFF<Bit>,
    out_valid_q: DFF<Bit>,
    filled_count: DFF<Bits<32>>,
    passed_count: DFF<Bits<32>>,
    dropped_count: DFF<Bits<32>>,
}

impl Logic for TxChecksum {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            ready_q,
            wr_ptr,
            frame_start,
            wr_beat,
            wr_beat_below_189,
            wr_beat_is_189,
            pres_last,
            ethertype,
            version_ihl,
            protocol,
            total_len,
            seg_end,
            length_lane,
            length_in_0,
            seg_pre_beat,
            seg_last_pos,
            seg_before,
            seg_here,
            ip_in_0,
            ip_in_1,
            ip_in_2,
            ip_in_3,
            tcp_low_in_0,
            tcp_low_in_1,
            tcp_low_in_2,
            tcp_low_in_3,
            tcp_high_in_0,
            tcp_high_in_1,
            tcp_high_in_2,
            tcp_high_in_3,
            ip_sum,
            tcp_sum,
            ip_beat_lo_q,
            ip_beat_hi_q,
            tcp_beat_lo_q,
            tcp_beat_hi_q,
            q0_ip_last_lo,
            q0_ip_last_hi,
            q0_tcp_last_lo,
            q0_tcp_last_hi,
            q1_ip_last_lo,
            q1_ip_last_hi,
            q1_tcp_last_lo,
            q1_tcp_last_hi,
            cur_ip_queued,
            cur_ip_last_lo,
            cur_ip_last_hi,
            cur_tcp_queued,
            cur_tcp_last_lo,
            cur_tcp_last_hi,
            cur_ip_sum,
            cur_tcp_sum,
            cur_ip_fold,
            cur_tcp_fold,
            q0_valid,
            q0_last_beat,
            q0_fill,
            q0_ip,
            q0_tcp,
            q1_valid,
            q1_last_beat,
            q1_fill,
            q1_ip,
            q1_tcp,
            push_sel,
            pop_sel,
            pres_ptr,
            pres_valid,
            pres_beat,
            cur_last_beat,
            cur_fill,
            cur_ip_field,
            cur_tcp_field,
            a_valid,
            a_last,
            a_patch_ip,
            a_patch_tcp,
            a_field,
            b_valid,
            b_last,
            b_patch_ip,
            b_patch_tcp,
            b_field,
            out_data_q,
            out_keep_q,
            out_last_q,
            out_valid_q,
            filled_count,
            passed_count,
            dropped_count
        );
        self.ring.clock.next = self.clock.val();

        // ---- write side ----
        self.used.next = self.wr_ptr.q.val() - self.pres_ptr.q.val();
        self.wr_beat_below_190.next = self.wr_beat_below_189.q.val() | self.wr_beat_is_189.q.val();
        self.wr_next.next = self.wr_ptr.q.val() + 1;
        self.in_ready.next = self.ready_q.q.val() & !self.reset.val();
        self.take.next = self.in_valid.val() & self.in_ready.val();

        // Lanes. IPv4 header: [14, 34) but the checksum field at 24. TCP: the
        // pseudo-header addresses [26, 34) and the segment [34, seg_end) but the checksum
        // field at 50, an odd last byte padded with zero. Which lanes of a beat count is
        // decided when the beat before it is taken (every beat but a frame's last is
        // full, so the next one starts 8 bytes on), keeping the compares off the sums'
        // path. `seg_end` is set by beat 2 and so is known for the lanes from beat 6 on;
        // lanes below byte 54 lie inside the segment of every frame that is filled
        // (total_len >= 40) and the sums of frames not filled are not used.
        self.seg_pre_full.next = (self.seg_end.q.val() - 9) >> 3;
        self.seg_pre_beat.d.next = self.seg_pre_full.val().get_bits::<8>(0);
        if self.seg_pre_full.val() > 255 {
            self.seg_pre_beat.d.next = 255.into();
        }
        self.seg_last_pos.d.next = bit_cast::<3, 16>((self.seg_end.q.val() - 1) & 7);
        self.next_before_seg_last.next = self.wr_beat.q.val() < self.seg_pre_beat.q.val();
        self.next_is_seg_last.next = self.wr_beat.q.val() == self.seg_pre_beat.q.val();
        if self.take.val() {
            self.seg_before.d.next =
                (self.wr_beat.q.val() >= 5) & (self.seg_pre_beat.q.val() < self.wr_beat.q.val());
            self.seg_here.d.next = (self.wr_beat.q.val() >= 5) & self.next_is_seg_last.val();
            // Lane i of beat b is bytes 8b + 2i and 8b + 2i + 1; the beat taken now is
            // beat `wr_beat`, so the next is b = wr_beat + 1.
            self.ip_in_0.d.next = (self.wr_beat.q.val() == 1) | (self.wr_beat.q.val() == 3);
            self.length_in_0.d.next = self.wr_beat.q.val() == 2;
            self.tcp_low_in_0.d.next = (self.wr_beat.q.val() >= 3)
                & ((self.wr_beat.q.val() <= 5)
                    | self.next_before_seg_last.val()
                    | self.next_is_seg_last.val());
            self.tcp_high_in_0.d.next = (self.wr_beat.q.val() >= 3)
                & ((self.wr_beat.q.val() <= 5)
                    | self.next_before_seg_last.val()
                    | (self.next_is_seg_last.val() & (self.seg_last_pos.q.val() >= 1)));
            self.ip_in_1.d.next = (self.wr_beat.q.val() == 1) | (self.wr_beat.q.val() == 2);
            self.tcp_low_in_1.d.next = (self.wr_beat.q.val() >= 2)
                & (self.wr_beat.q.val() != 5)
                & ((self.wr_beat.q.val() <= 5)
                    | self.next_before_seg_last.val()
                    | (self.next_is_seg_last.val() & (self.seg_last_pos.q.val() >= 2)));
            self.tcp_high_in_1.d.next = (self.wr_beat.q.val() >= 2)
                & (self.wr_beat.q.val() != 5)
                & ((self.wr_beat.q.val() <= 5)
                    | self.next_before_seg_last.val()
                    | (self.next_is_seg_last.val() & (self.seg_last_pos.q.val() >= 3)));
            self.ip_in_2.d.next = (self.wr_beat.q.val() == 1) | (self.wr_beat.q.val() == 2);
            self.tcp_low_in_2.d.next = (self.wr_beat.q.val() >= 2)
                & ((self.wr_beat.q.val() <= 5)
                    | self.next_before_seg_last.val()
                    | (self.next_is_seg_last.val() & (self.seg_last_pos.q.val() >= 4)));
            self.tcp_high_in_2.d.next = (self.wr_beat.q.val() >= 2)
                & ((self.wr_beat.q.val() <= 5)
                    | self.next_before_seg_last.val()
                    | (self.next_is_seg_last.val() & (self.seg_last_pos.q.val() >= 5)));
            self.ip_in_3.d.next = self.wr_beat.q.val() <= 2;
            self.tcp_low_in_3.d.next = (self.wr_beat.q.val() >= 2)
                & ((self.wr_beat.q.val() <= 4)
                    | self.next_before_seg_last.val()
                    | (self.next_is_seg_last.val() & (self.seg_last_pos.q.val() >= 6)));
            // (Beat 2's lane 3 holds the protocol in its high byte.)
            self.tcp_high_in_3.d.next = (self.wr_beat.q.val() == 1)
                | ((self.wr_beat.q.val() >= 2)
                    & ((self.wr_beat.q.val() <= 4)
                        | self.next_before_seg_last.val()
                        | (self.next_is_seg_last.val() & (self.seg_last_pos.q.val() >= 7))));
        }
        self.ip_lane_0.next = 0.into();
        if self.ip_in_0.q.val() {
            self.ip_lane_0.next = bit_cast::<17, 16>(self.in_data.val().get_bits::<16>(0));
        }
        self.tcp_lane_0.next = 0.into();
        if self.tcp_low_in_0.q.val() {
            self.tcp_lane_0.next = bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(0));
        }
        if self.tcp_high_in_0.q.val() {
            self.tcp_lane_0.next = self.tcp_lane_0.val()
                | (bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(8)) << 8);
        }
        if self.length_in_0.q.val() {
            self.tcp_lane_0.next = self.length_lane.q.val();
        }
        self.ip_lane_1.next = 0.into();
        if self.ip_in_1.q.val() {
            self.ip_lane_1.next = bit_cast::<17, 16>(self.in_data.val().get_bits::<16>(16));
        }
        self.tcp_lane_1.next = 0.into();
        if self.tcp_low_in_1.q.val() {
            self.tcp_lane_1.next = bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(16));
        }
        if self.tcp_high_in_1.q.val() {
            self.tcp_lane_1.next = self.tcp_lane_1.val()
                | (bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(24)) << 8);
        }
        self.ip_lane_2.next = 0.into();
        if self.ip_in_2.q.val() {
            self.ip_lane_2.next = bit_cast::<17, 16>(self.in_data.val().get_bits::<16>(32));
        }
        self.tcp_lane_2.next = 0.into();
        if self.tcp_low_in_2.q.val() {
            self.tcp_lane_2.next = bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(32));
        }
        if self.tcp_high_in_2.q.val() {
            self.tcp_lane_2.next = self.tcp_lane_2.val()
                | (bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(40)) << 8);
        }
        self.ip_lane_3.next = 0.into();
        if self.ip_in_3.q.val() {
            self.ip_lane_3.next = bit_cast::<17, 16>(self.in_data.val().get_bits::<16>(48));
        }
        self.tcp_lane_3.next = 0.into();
        if self.tcp_low_in_3.q.val() {
            self.tcp_lane_3.next = bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(48));
        }
        if self.tcp_high_in_3.q.val() {
            self.tcp_lane_3.next = self.tcp_lane_3.val()
                | (bit_cast::<17, 8>(self.in_data.val().get_bits::<8>(56)) << 8);
        }
        self.beat_tcp_len.next = ((bit_cast::<16, 8>(self.in_data.val().get_bits::<8>(0)) << 8)
            | bit_cast::<16, 8>(self.in_data.val().get_bits::<8>(8)))
            - 20;
        self.ip_beat_lo.next = self.ip_lane_0.val() + self.ip_lane_1.val();
        self.ip_beat_hi.next = self.ip_lane_2.val() + self.ip_lane_3.val();
        self.tcp_beat_lo.next = self.tcp_lane_0.val() + self.tcp_lane_1.val();
        self.tcp_beat_hi.next = self.tcp_lane_2.val() + self.tcp_lane_3.val();
        self.ip_beat_lo_q.d.next = 0.into();
        self.ip_beat_hi_q.d.next = 0.into();
        self.tcp_beat_lo_q.d.next = 0.into();
        self.tcp_beat_hi_q.d.next = 0.into();
        if self.take.val() {
            self.ip_beat_lo_q.d.next = self.ip_beat_lo.val();
            self.ip_beat_hi_q.d.next = self.ip_beat_hi.val();
            self.tcp_beat_lo_q.d.next = self.tcp_beat_lo.val();
            self.tcp_beat_hi_q.d.next = self.tcp_beat_hi.val();
        }
        // On a frame's last beat, its sums but that beat's lanes.
        self.ip_total.next = self.ip_sum.q.val()
            + bit_cast::<32, 17>(self.ip_beat_lo_q.q.val())
            + bit_cast::<32, 17>(self.ip_beat_hi_q.q.val());
        self.tcp_total.next = self.tcp_sum.q.val()
            + bit_cast::<32, 17>(self.tcp_beat_lo_q.q.val())
            + bit_cast::<32, 17>(self.tcp_beat_hi_q.q.val());
        self.ip_sum.d.next = self.ip_total.val();
        self.tcp_sum.d.next = self.tcp_total.val();
        // Every beat but the last is full, so only the 190th beat can take a frame past
        // 1518 bytes (189 full beats are 1512).
        self.commit.next = self.wr_beat_below_189.q.val()
            | (self.wr_beat_is_189.q.val() & !self.in_keep.val().get_bit(6));
        // Every beat but the last is full: a last beat holds the segment's end when the
        // segment's last byte lies before it, or in it at a position `keep` covers.
        self.seg_fits.next = self.seg_before.q.val()
            | (self.seg_here.q.val()
                & ((self.in_keep.val() >> self.seg_last_pos.q.val()) & 1).any());
        self.fill.next = (self.ethertype.q.val() == 0x0008)
            & (self.version_ihl.q.val() == 0x45)
            & (self.protocol.q.val() == 6)
            & (self.total_len.q.val() >= 40)
            // (Bounded first: `seg_end` is 14 + total_len in 16 bits and wraps above
            // 65,521.)
            & (self.total_len.q.val() <= 1504)
            & self.seg_fits.val();

        self.ring.write_address.next = self.wr_ptr.q.val().get_bits::<9>(0);
        self.ring.write_data.next =
            (bit_cast::<72, 8>(self.in_keep.val()) << 64) | bit_cast::<72, 64>(self.in_data.val());
        self.ring.write_enable.next = false;

        // ---- the queue's head and its checksum fields ----
        if self.pop_sel.q.val() {
            self.head_valid.next = self.q1_valid.q.val();
            self.head_last_beat.next = self.q1_last_beat.q.val();
            self.head_fill.next = self.q1_fill.q.val();
            self.head_ip.next = self.q1_ip.q.val();
            self.head_tcp.next = self.q1_tcp.q.val();
            self.head_ip_last_lo.next = self.q1_ip_last_lo.q.val();
            self.head_ip_last_hi.next = self.q1_ip_last_hi.q.val();
            self.head_tcp_last_lo.next = self.q1_tcp_last_lo.q.val();
            self.head_tcp_last_hi.next = self.q1_tcp_last_hi.q.val();
        } else {
            self.head_valid.next = self.q0_valid.q.val();
            self.head_last_beat.next = self.q0_last_beat.q.val();
            self.head_fill.next = self.q0_fill.q.val();
            self.head_ip.next = self.q0_ip.q.val();
            self.head_tcp.next = self.q0_tcp.q.val();
            self.head_ip_last_lo.next = self.q0_ip_last_lo.q.val();
            self.head_ip_last_hi.next = self.q0_ip_last_hi.q.val();
            self.head_tcp_last_lo.next = self.q0_tcp_last_lo.q.val();
            self.head_tcp_last_hi.next = self.q0_tcp_last_hi.q.val();
        }
        self.cur_ip_sum.d.next = self.cur_ip_queued.q.val()
            + bit_cast::<32, 17>(self.cur_ip_last_lo.q.val())
            + bit_cast::<32, 17>(self.cur_ip_last_hi.q.val());
        self.cur_tcp_sum.d.next = self.cur_tcp_queued.q.val()
            + bit_cast::<32, 17>(self.cur_tcp_last_lo.q.val())
            + bit_cast::<32, 17>(self.cur_tcp_last_hi.q.val());
        self.cur_ip_fold.d.next =
            (self.cur_ip_sum.q.val() & 0xFFFF) + (self.cur_ip_sum.q.val() >> 16);
        self.cur_ip_fold2.next = bit_cast::<16, 32>(
            (self.cur_ip_fold.q.val() & 0xFFFF) + (self.cur_ip_fold.q.val() >> 16),
        );
        self.cur_tcp_fold.d.next =
            (self.cur_tcp_sum.q.val() & 0xFFFF) + (self.cur_tcp_sum.q.val() >> 16);
        self.cur_tcp_fold2.next = bit_cast::<16, 32>(
            (self.cur_tcp_fold.q.val() & 0xFFFF) + (self.cur_tcp_fold.q.val() >> 16),
        );
        self.cur_ip_field.d.next = !self.cur_ip_fold2.val();
        self.cur_tcp_field.d.next = !self.cur_tcp_fold2.val();

        if self.take.val() {
            if self.wr_beat_below_190.val() {
                self.ring.write_enable.next = true;
                self.wr_ptr.d.next = self.wr_next.val();
                self.wr_beat.d.next = self.wr_beat.q.val() + 1;
                self.wr_beat_below_189.d.next = self.wr_beat.q.val() < 188;
                self.wr_beat_is_189.d.next = self.wr_beat.q.val() == 188;
            }
            // Beat 1 holds bytes 8..16, beat 2 bytes 16..24.
            if self.wr_beat.q.val() == 1 {
                self.ethertype.d.next = self.in_data.val().get_bits::<16>(32);
                self.version_ihl.d.next = self.in_data.val().get_bits::<8>(48);
            }
            if self.wr_beat.q.val() == 2 {
                self.total_len.d.next = (bit_cast::<16, 8>(self.in_data.val().get_bits::<8>(0))
                    << 8)
                    | bit_cast::<16, 8>(self.in_data.val().get_bits::<8>(8));
                self.seg_end.d.next = (bit_cast::<16, 8>(self.in_data.val().get_bits::<8>(0)) << 8)
                    + bit_cast::<16, 8>(self.in_data.val().get_bits::<8>(8))
                    + 14;
                self.protocol.d.next = self.in_data.val().get_bits::<8>(56);
                self.length_lane.d.next =
                    (bit_cast::<17, 8>(self.beat_tcp_len.val().get_bits::<8>(0)) << 8)
                        | bit_cast::<17, 8>(self.beat_tcp_len.val().get_bits::<8>(8));
            }
            // The next queue entry, when free, takes every beat's figures, so that on
            // the last beat it holds the frame's: an entry that is not valid holds
            // nothing that matters, and its 150-odd enables stay off the commit
            // decision. (A valid entry is never written: while an oversized frame's
            // excess is discarded, beats are taken with both entries full.)
            if self.push_sel.q.val() & !self.q1_valid.q.val() {
                self.q1_last_beat.d.next = self.wr_beat.q.val();
                self.q1_fill.d.next = self.fill.val();
                self.q1_ip.d.next = self.ip_total.val();
                self.q1_tcp.d.next = self.tcp_total.val();
                self.q1_ip_last_lo.d.next = self.ip_beat_lo.val();
                self.q1_ip_last_hi.d.next = self.ip_beat_hi.val();
                self.q1_tcp_last_lo.d.next = self.tcp_beat_lo.val();
                self.q1_tcp_last_hi.d.next = self.tcp_beat_hi.val();
            }
            if !self.push_sel.q.val() & !self.q0_valid.q.val() {
                self.q0_last_beat.d.next = self.wr_beat.q.val();
                self.q0_fill.d.next = self.fill.val();
                self.q0_ip.d.next = self.ip_total.val();
                self.q0_tcp.d.next = self.tcp_total.val();
                self.q0_ip_last_lo.d.next = self.ip_beat_lo.val();
                self.q0_ip_last_hi.d.next = self.ip_beat_hi.val();
                self.q0_tcp_last_lo.d.next = self.tcp_beat_lo.val();
                self.q0_tcp_last_hi.d.next = self.tcp_beat_hi.val();
            }
            if self.in_last.val() {
                if self.commit.val() {
                    // The last beat was written: the frame is complete in the ring.
                    self.frame_start.d.next = self.wr_next.val();
                    if self.push_sel.q.val() {
                        self.q1_valid.d.next = true;
                    } else {
                        self.q0_valid.d.next = true;
                    }
                    self.push_sel.d.next = !self.push_sel.q.val();
                    if self.fill.val() {
                        self.filled_count.d.next = self.filled_count.q.val() + 1;
                    } else {
                        self.passed_count.d.next = self.passed_count.q.val() + 1;
                    }
                } else {
                    self.wr_ptr.d.next = self.frame_start.q.val();
                    self.dropped_count.d.next = self.dropped_count.q.val() + 1;
                }
            }
        }

        // ---- read side ----
        // Three stages that each hold or move on: the RAM's read latch (A), its output
        // register (B: block RAM's clock-to-out is 5.8 ns without it, 1.0 ns with it)
        // and the output register, where the checksum fields are written in. A beat is
        // read when the frame being read has one left and stage A is free or moves on;
        // the frame's last beat being read pops the next frame, so frames follow back
        // to back. The ring is read only at beats of queued (complete) frames, never
        // where the writer is.
        self.free.next = !self.out_valid_q.q.val() | self.out_ready.val();
        self.b_load.next = !self.b_valid.q.val() | self.free.val();
        self.issue.next = self.pres_valid.q.val() & (!self.a_valid.q.val() | self.b_load.val());
        self.pres_next.next = self.pres_ptr.q.val() + 1;
        self.pres_beat_next.next = self.pres_beat.q.val() + 1;
        self.ring.read_address.next = self.pres_ptr.q.val().get_bits::<9>(0);
        self.ring.read_enable.next = self.issue.val();
        self.ring.output_enable.next = self.b_load.val();
        self.pop.next = false;
        if self.issue.val() {
            self.a_valid.d.next = true;
            self.a_last.d.next = self.pres_last.q.val();
            self.a_patch_ip.d.next = self.cur_fill.q.val() & (self.pres_beat.q.val() == 3);
            self.a_patch_tcp.d.next = self.cur_fill.q.val() & (self.pres_beat.q.val() == 6);
            self.a_field.d.next = self.cur_tcp_field.q.val();
            if self.pres_beat.q.val() == 3 {
                self.a_field.d.next = self.cur_ip_field.q.val();
            }
            self.pres_ptr.d.next = self.pres_next.val();
            self.pres_beat.d.next = self.pres_beat_next.val();
            self.pres_last.d.next = self.pres_beat_next.val() == self.cur_last_beat.q.val();
            if self.pres_last.q.val() {
                self.pop.next = self.head_valid.val();
                self.pres_valid.d.next = self.head_valid.val();
                self.pres_beat.d.next = 0.into();
            }
        } else if self.b_load.val() {
            self.a_valid.d.next = false;
        }
        if !self.pres_valid.q.val() {
            self.pop.next = self.head_valid.val();
            self.pres_valid.d.next = self.head_valid.val();
            self.pres_beat.d.next = 0.into();
        }
        if self.b_load.val() {
            self.b_valid.d.next = self.a_valid.q.val();
            self.b_last.d.next = self.a_last.q.val();
            self.b_patch_ip.d.next = self.a_patch_ip.q.val();
            self.b_patch_tcp.d.next = self.a_patch_tcp.q.val();
            self.b_field.d.next = self.a_field.q.val();
        }
        self.ram_data.next = self.ring.read_data.val().get_bits::<64>(0);
        self.patched.next = self.ram_data.val();
        if self.b_patch_ip.q.val() {
            self.patched.next =
                ((self.ram_data.val() >> 16) << 16) | bit_cast::<64, 16>(self.b_field.q.val());
        }
        if self.b_patch_tcp.q.val() {
            self.patched.next = ((self.ram_data.val() >> 32) << 32)
                | (bit_cast::<64, 16>(self.b_field.q.val()) << 16)
                | bit_cast::<64, 16>(self.ram_data.val().get_bits::<16>(0));
        }
        if self.free.val() {
            self.out_valid_q.d.next = self.b_valid.q.val();
            self.out_data_q.d.next = self.patched.val();
            self.out_keep_q.d.next = self.ring.read_data.val().get_bits::<8>(64);
            self.out_last_q.d.next = self.b_last.q.val();
        }
        if self.pop.val() {
            self.cur_last_beat.d.next = self.head_last_beat.val();
            self.pres_last.d.next = self.head_last_beat.val() == 0;
            self.cur_fill.d.next = self.head_fill.val();
            self.cur_ip_queued.d.next = self.head_ip.val();
            self.cur_ip_last_lo.d.next = self.head_ip_last_lo.val();
            self.cur_ip_last_hi.d.next = self.head_ip_last_hi.val();
            self.cur_tcp_queued.d.next = self.head_tcp.val();
            self.cur_tcp_last_lo.d.next = self.head_tcp_last_lo.val();
            self.cur_tcp_last_hi.d.next = self.head_tcp_last_hi.val();
            if self.pop_sel.q.val() {
                self.q1_valid.d.next = false;
            } else {
                self.q0_valid.d.next = false;
            }
            self.pop_sel.d.next = !self.pop_sel.q.val();
        }

        // Next cycle's `in_ready`. The ring: at most one beat is written per cycle, so
        // 511 or fewer now leaves room for the beat taken then. The queue: its count
        // next cycle from this cycle's pop and possible push. An oversized frame's
        // excess beats are discarded whatever the fill level.
        self.push_maybe.next = self.take.val() & self.in_last.val();
        self.queue_full_next.next = (self.q0_valid.q.val()
            & self.q1_valid.q.val()
            & (!self.pop.val() | self.push_maybe.val()))
            | ((self.q0_valid.q.val() ^ self.q1_valid.q.val())
                & self.push_maybe.val()
                & !self.pop.val());
        self.discard_next.next = !self.push_maybe.val()
            & (!self.wr_beat_below_190.val() | (self.take.val() & self.wr_beat_is_189.q.val()));
        self.ready_q.d.next =
            self.discard_next.val() | ((self.used.val() < 511) & !self.queue_full_next.val());

        // Per-frame state starts over after each frame and on reset.
        if (self.take.val() & self.in_last.val()) | self.reset.val() {
            self.wr_beat.d.next = 0.into();
            self.wr_beat_below_189.d.next = true;
            self.wr_beat_is_189.d.next = false;
            self.ethertype.d.next = 0.into();
            self.version_ihl.d.next = 0.into();
            self.protocol.d.next = 0.into();
            self.total_len.d.next = 0.into();
            self.seg_end.d.next = 0.into();
            self.ip_in_0.d.next = false;
            self.ip_in_1.d.next = false;
            self.ip_in_2.d.next = false;
            self.ip_in_3.d.next = false;
            self.tcp_low_in_0.d.next = false;
            self.tcp_low_in_1.d.next = false;
            self.tcp_low_in_2.d.next = false;
            self.tcp_low_in_3.d.next = false;
            self.tcp_high_in_0.d.next = false;
            self.tcp_high_in_1.d.next = false;
            self.tcp_high_in_2.d.next = false;
            self.tcp_high_in_3.d.next = false;
            self.seg_before.d.next = false;
            self.seg_here.d.next = false;
            self.ip_sum.d.next = 0.into();
            self.tcp_sum.d.next = 0.into();
            self.length_in_0.d.next = false;
            self.ip_beat_lo_q.d.next = 0.into();
            self.ip_beat_hi_q.d.next = 0.into();
            self.tcp_beat_lo_q.d.next = 0.into();
            self.tcp_beat_hi_q.d.next = 0.into();
        }
        if self.reset.val() {
            // Empty after reset: ready as soon as `reset` falls.
            self.ready_q.d.next = true;
            self.wr_ptr.d.next = 0.into();
            self.frame_start.d.next = 0.into();
            self.q0_valid.d.next = false;
            self.q1_valid.d.next = false;
            self.push_sel.d.next = false;
            self.pop_sel.d.next = false;
            self.pres_ptr.d.next = 0.into();
            self.pres_valid.d.next = false;
            self.a_valid.d.next = false;
            self.b_valid.d.next = false;
            self.out_valid_q.d.next = false;
            self.filled_count.d.next = 0.into();
            self.passed_count.d.next = 0.into();
            self.dropped_count.d.next = 0.into();
        }

        self.out_data.next = self.out_data_q.q.val();
        self.out_keep.next = self.out_keep_q.q.val();
        self.out_last.next = self.out_last_q.q.val();
        self.out_valid.next = self.out_valid_q.q.val();
        self.frames_filled.next = self.filled_count.q.val();
        self.frames_passed.next = self.passed_count.q.val();
        self.frames_dropped.next = self.dropped_count.q.val();
    }
}
