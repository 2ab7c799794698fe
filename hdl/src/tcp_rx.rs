//! Receive parser: Ethernet II / IPv4 / TCP frames in, TCP payload out, realigned to
//! start at byte 0 of a beat, with the segment's header fields as sideband.
//!
//! **Checks** (in the order `iwnic_proto::net::TcpFrameRepr::parse` makes them, so a
//! frame with several faults is counted where the software reference would put it):
//! frame longer than [`MAX_FRAME_LEN`] (oversized, checked first: it is this block's own
//! limit); shorter than an Ethernet header (malformed); EtherType not IPv4 (not TCP);
//! IPv4 lengths — IHL < 5, header or total length beyond the frame or the header beyond
//! the total length (malformed); version not 4 or a fragment (not TCP); IPv4 header
//! checksum (bad checksum); protocol not TCP (not TCP); TCP data offset < 5 or beyond the
//! segment (malformed); TCP checksum over the pseudo-header and the segment (bad
//! checksum). Ethernet padding past the IPv4 total length is ignored; IPv4 and TCP
//! options are skipped by length. Flag combinations, zero ports and option contents are
//! left to the firmware, which sees the header fields.
//!
//! **Why the verdict comes last**: the TCP checksum, truncation and the frame length are
//! known only at the end of the frame, and holding every payload for them would cost a
//! frame buffer here and a frame of latency. So the payload leaves cut-through and the
//! *last* beat of each output packet carries `payload_good`; the frame buffer that
//! follows (with the flow lookup) commits a packet or drops it on that bit. Everything
//! known before the payload starts — EtherType, version, fragment, protocol, IPv4 header
//! checksum, header lengths — gates the output, so a frame failing those never appears
//! on it. A frame that passes them appears, and ends with `payload_good` low if it then
//! fails. Every frame is counted exactly once: in `frames_accepted` or one drop counter.
//!
//! **Output packets**: one per accepted frame (and per late-failed frame). A segment
//! without payload (a pure ACK, a SYN) is one beat with `payload_keep` = 0. The `seg_*`
//! fields are valid with every beat of the packet (they are registers that the next
//! frame changes only once this packet's last beat has been read). `payload_keep` is
//! 0xFF on every beat but the last; so must `frame_keep` be (the parser counts beats,
//! and bytes only in the last).
//!
//! **Realignment**: the Ethernet header is 14 bytes and IPv4 and TCP headers are
//! multiples of 4, so a payload starts at byte 2 or byte 6 of a beat: each output beat is
//! the top 6 (or 2) bytes of one input beat and the low 2 (or 6) of the next, a two-way
//! choice rather than an 8-way barrel shifter. The TCP header is located the same way.
//!
//! **Checksums**: both are ones'-complement sums of 16-bit words, which is byte-order
//! independent (RFC 1071 §2(B)), so each beat's four little-endian lanes are added as
//! they stand, without swapping, into one 24-bit sum per lane and checksum
//! ([`ChecksumLane`]); the four lanes are added up a cycle later and folded once
//! ([`SumCheck`]); a correct header or segment folds to 0xFFFF. The pseudo-header's
//! addresses are the IPv4 header's own lanes, added to the TCP sum as they pass, and so
//! is its protocol (the high byte of bytes 22-23); its TCP length goes in place of
//! bytes 24-25.
//!
//! **Pipeline and throughput**: one beat per cycle, with no idle cycle between frames.
//! Everything a beat decides is a compare of the beat's index with a register set from
//! the header beats before (where the TCP header, the payload windows and the IPv4
//! packet end); the header checks that gate the payload are registered flags. The
//! verdict takes two stages after the last beat: *closing* latches the frame's length,
//! its last payload beat and its checks other than the checksums, registers the lane
//! totals and starts the per-frame state over (the next frame's first beat, which adds
//! to no sum and sets no field, may be taken in the same cycle); *deciding* checks the
//! totals and writes the packet's last beat, and registers the verdict, which is
//! counted in the cycle after. So the last beat (`payload_last` with `payload_good`)
//! or the `frame_unseen` pulse appears in the third cycle after the one that took the
//! frame's last beat, and the counters move in the fourth; the next frame's payload
//! cannot reach the output before then. All stages advance together when the output
//! register can take a beat (`frame_ready` is low while it is full and not read).
//! Synchronous active-high `reset`.
//!
//! **Timing** (`cargo run --release -- synth --block tcp_rx`,
//! LFE5U-25F-6, out of context): 1,698 LUT4, 1,061 FF, 0 DP16KD, 139.2 MHz post-route
//! (was 2,017 LUT4, 722 FF, 53.2 MHz); critical path: a checksum lane into the
//! verdict's total, 7.2 ns.

use rust_hdl::prelude::*;

/// Longest frame accepted, without FCS (1500-byte IPv4 packet + Ethernet header).
/// (`#[hdl_gen]` cannot read Rust constants: `update` writes 1518 and 1518 - 14 = 1504.)
pub const MAX_FRAME_LEN: u64 = 1518;

/// What became of a frame, in the reference parser's order of checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum FrameVerdict {
    Accepted,
    Oversized,
    Malformed,
    NotTcp,
    BadChecksum,
}

/// One 16-bit lane of the beat (lane `position` of four) and its running shares of the
/// IPv4 header sum and the TCP sum. A beat only adds: whether (and which bytes of) the
/// lane counts was decided when the beat before it was taken. Lanes are placed by their
/// 16-bit word index in the frame, `4 * beat + position` (a concatenation, not an
/// adder).
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct ChecksumLane {
    pub clock: Signal<In, Clock>,
    /// The lane as it stands in the beat (little-endian).
    pub data: Signal<In, Bits<16>>,
    pub position: Signal<In, Bits<2>>,
    /// The index of the beat after this one (saturating).
    pub next_beat: Signal<In, Bits<8>>,
    /// Word index of the TCP header (`tcp_start / 2`), read from beat 4 on.
    pub tcp_word: Signal<In, Bits<10>>,
    /// `payload_end / 2` and `payload_end`'s low bit: an odd last byte counts alone.
    pub end_word: Signal<In, Bits<10>>,
    pub end_odd: Signal<In, Bit>,
    /// The pseudo-header's TCP length as a little-endian lane, added in place of
    /// bytes 24-25 (the IPv4 header checksum, which the TCP sum does not cover).
    pub length: Signal<In, Bits<16>>,
    /// A beat is taken this cycle.
    pub take: Signal<In, Bit>,
    /// The beat taken is a frame's last (or reset): the next one is beat 0.
    pub restart: Signal<In, Bit>,
    /// Start the sums over (wins over `take`).
    pub clear: Signal<In, Bit>,
    pub ip_sum: Signal<Out, Bits<24>>,
    pub tcp_sum: Signal<Out, Bits<24>>,
    word: Signal<Local, Bits<10>>,
    in_segment: Signal<Local, Bit>,
    tcp_whole: Signal<Local, Bit>,
    ip_add: Signal<Local, Bits<24>>,
    tcp_add: Signal<Local, Bits<16>>,
    /// This beat's lane counts for the IPv4 header; its low and high bytes count for
    /// TCP; the pseudo-header length goes in instead. (Beat 0 counts nowhere.)
    ip_in: DFF<Bit>,
    tcp_low_in: DFF<Bit>,
    tcp_high_in: DFF<Bit>,
    length_in: DFF<Bit>,
    /// 24 bits hold a 1,518-byte frame's share of one lane (190 x 0xFFFF); sums of
    /// longer frames may wrap, but those are oversized whatever they sum to.
    ip_acc: DFF<Bits<24>>,
    tcp_acc: DFF<Bits<24>>,
}

impl Logic for ChecksumLane {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            ip_in,
            tcp_low_in,
            tcp_high_in,
            length_in,
            ip_acc,
            tcp_acc
        );
        self.word.next =
            (bit_cast::<10, 8>(self.next_beat.val()) << 2) | bit_cast::<10, 2>(self.position.val());
        // IPv4 header: [14, tcp_start). Beats 1 to 3 (bytes 14-31) belong to it whenever
        // its IHL is valid (at least 5, so the TCP header starts at byte 34 or later);
        // with a smaller one the frame is malformed whatever it sums to. So the bounds
        // are read from beat 4 on, well after the beats that set them.
        if self.take.val() {
            self.ip_in.d.next = (self.word.val() >= 7)
                & ((self.next_beat.val() < 4) | (self.word.val() < self.tcp_word.val()));
        }
        // TCP: [tcp_start, payload_end), an odd last byte padded with zero, and the
        // pseudo-header: the addresses (bytes 26-33), the protocol (byte 23, in the high
        // byte of its lane: 0x0600 when the frame is TCP, and nothing else is checked)
        // and the TCP length.
        self.in_segment.next =
            (self.next_beat.val() >= 4) & (self.word.val() >= self.tcp_word.val());
        self.tcp_whole.next = (self.in_segment.val() & (self.word.val() < self.end_word.val()))
            | ((self.word.val() >= 13) & (self.word.val() < 17));
        if self.take.val() {
            self.tcp_low_in.d.next = self.tcp_whole.val()
                | (self.in_segment.val()
                    & (self.word.val() == self.end_word.val())
                    & self.end_odd.val());
            self.tcp_high_in.d.next = self.tcp_whole.val() | (self.word.val() == 11);
            self.length_in.d.next = self.word.val() == 12;
        }
        if self.restart.val() {
            self.ip_in.d.next = false;
            self.tcp_low_in.d.next = false;
            self.tcp_high_in.d.next = false;
            self.length_in.d.next = false;
        }

        self.ip_add.next = 0.into();
        if self.ip_in.q.val() {
            self.ip_add.next = bit_cast::<24, 16>(self.data.val());
        }
        self.tcp_add.next = 0.into();
        if self.tcp_low_in.q.val() {
            self.tcp_add.next = self.data.val() & 0x00FF;
        }
        if self.tcp_high_in.q.val() {
            self.tcp_add.next = self.tcp_add.val() | (self.data.val() & 0xFF00);
        }
        if self.length_in.q.val() {
            self.tcp_add.next = self.length.val();
        }
        if self.take.val() {
            self.ip_acc.d.next = self.ip_acc.q.val() + self.ip_add.val();
            self.tcp_acc.d.next = self.tcp_acc.q.val() + bit_cast::<24, 16>(self.tcp_add.val());
        }
        if self.clear.val() {
            self.ip_acc.d.next = 0.into();
            self.tcp_acc.d.next = 0.into();
        }
        self.ip_sum.next = self.ip_acc.q.val();
        self.tcp_sum.next = self.tcp_acc.q.val();
    }
}

/// Whether four lane sums add up, in ones'-complement, to 0xFFFF (a correct checksum).
/// The total is registered (a cycle of latency, taken when `advance` is high) and
/// checked in the next cycle without an adder: it folds to 0xFFFF exactly when its low
/// 16 bits and its high bits add up to 0xFFFF (they are at most 0x3FF, so the fold
/// carries nowhere else, and a nonzero total folds to 0 never), that is when the low
/// bits are the high bits' complement.
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct SumCheck {
    pub clock: Signal<In, Clock>,
    pub advance: Signal<In, Bit>,
    pub lane_0: Signal<In, Bits<24>>,
    pub lane_1: Signal<In, Bits<24>>,
    pub lane_2: Signal<In, Bits<24>>,
    pub lane_3: Signal<In, Bits<24>>,
    /// The total registered at the last `advance` folds to 0xFFFF.
    pub ok: Signal<Out, Bit>,
    /// A 1,518-byte frame's words sum to below 2^26.
    total: DFF<Bits<26>>,
    high_complement: Signal<Local, Bits<16>>,
}

impl Logic for SumCheck {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, total);
        if self.advance.val() {
            self.total.d.next = bit_cast::<26, 24>(self.lane_0.val())
                + bit_cast::<26, 24>(self.lane_1.val())
                + bit_cast::<26, 24>(self.lane_2.val())
                + bit_cast::<26, 24>(self.lane_3.val());
        }
        self.high_complement.next = !bit_cast::<16, 10>(self.total.q.val().get_bits::<10>(16));
        self.ok.next = self.total.q.val().get_bits::<16>(0) == self.high_complement.val();
    }
}

/// Parses the frames on `frame_*` and sends their TCP payloads on `payload_*`; see the
/// module documentation for the checks and the interface.
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct TcpRxParser {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub frame_data: Signal<In, Bits<64>>,
    pub frame_keep: Signal<In, Bits<8>>,
    pub frame_last: Signal<In, Bit>,
    pub frame_valid: Signal<In, Bit>,
    pub frame_ready: Signal<Out, Bit>,
    pub payload_data: Signal<Out, Bits<64>>,
    pub payload_keep: Signal<Out, Bits<8>>,
    pub payload_last: Signal<Out, Bit>,
    /// On the last beat: the frame passed every check (else drop the packet).
    pub payload_good: Signal<Out, Bit>,
    pub payload_valid: Signal<Out, Bit>,
    pub payload_ready: Signal<In, Bit>,
    /// IPv4 addresses as big-endian numbers (10.0.0.1 is 0x0A000001).
    pub seg_src_ip: Signal<Out, Bits<32>>,
    pub seg_dst_ip: Signal<Out, Bits<32>>,
    pub seg_src_port: Signal<Out, Bits<16>>,
    pub seg_dst_port: Signal<Out, Bits<16>>,
    pub seg_seq: Signal<Out, Bits<32>>,
    /// The acknowledgment field; meaningful when the ACK flag is set.
    pub seg_ack: Signal<Out, Bits<32>>,
    /// The low five TCP flags as in the header: ACK 0x10, PSH 0x08, RST 0x04, SYN 0x02,
    /// FIN 0x01.
    pub seg_flags: Signal<Out, Bits<5>>,
    pub seg_window: Signal<Out, Bits<16>>,
    pub seg_payload_len: Signal<Out, Bits<16>>,
    pub frames_accepted: Signal<Out, Bits<32>>,
    pub dropped_oversized: Signal<Out, Bits<32>>,
    pub dropped_malformed: Signal<Out, Bits<32>>,
    pub dropped_not_tcp: Signal<Out, Bits<32>>,
    pub dropped_bad_checksum: Signal<Out, Bits<32>>,
    /// High for the one cycle in which a frame is counted as dropped without any packet
    /// of it on the output (it failed a check decided before its payload): a follower
    /// that buffers the raw frame learns its fate here, or from the packet's last beat.
    pub frame_unseen: Signal<Out, Bit>,
    lane_0: ChecksumLane,
    lane_1: ChecksumLane,
    lane_2: ChecksumLane,
    lane_3: ChecksumLane,
    ip_check: SumCheck,
    tcp_check: SumCheck,
    /// The pipeline moves this cycle: the output register takes a new beat or empties.
    /// Beats, the closing stage and the verdict all advance together on it.
    load: Signal<Local, Bit>,
    /// A frame beat is taken this cycle.
    take: Signal<Local, Bit>,
    /// It is the frame's last (or reset): the next beat is a frame's first.
    restart: Signal<Local, Bit>,
    /// Bytes in this frame beat (8 but on the last).
    beat_bytes: Signal<Local, Bits<16>>,
    /// The frame's length if this beat is its last.
    frame_end: Signal<Local, Bits<16>>,
    /// Bytes 16-17 of the frame (the IPv4 total length) as a number, on beat 2.
    beat_total_len: Signal<Local, Bits<16>>,
    /// The TCP header realigned to byte 0 (valid on its first two beats).
    segment_window: Signal<Local, Bits<64>>,
    /// On the beat with the TCP data offset (byte 12 of the header): the offset, and
    /// whether the payload starts at byte 6 of its beat (else 2). The TCP header starts
    /// at byte 2 or 6 and the offset counts words of 4 bytes, so that is an XOR.
    beat_data_offset: Signal<Local, Bits<4>>,
    beat_payload_at_6: Signal<Local, Bit>,
    /// `payload_end` plus 7 minus the payload's offset in its beat (2 or 6): eight times
    /// the beat whose payload window is the last.
    last_window_end: Signal<Local, Bits<17>>,
    /// The 8 payload bytes ending with the low bytes of this beat.
    payload_window: Signal<Local, Bits<64>>,
    /// The frame passes every check that is decided before its payload.
    header_ok: Signal<Local, Bit>,
    /// The TCP length as a little-endian lane.
    tcp_length_lane: Signal<Local, Bits<16>>,
    /// The closing stage runs: the frame before has ended, its last payload beat and
    /// its non-checksum checks are latched, and its per-frame state starts over.
    close: Signal<Local, Bit>,
    /// The verdict stage runs: the checksums are folded and the frame is counted.
    decide: Signal<Local, Bit>,
    /// The frame passed every check (the verdict stage's output bits need no more).
    accepted: Signal<Local, Bit>,
    /// The counted frame's verdict, in the reference's order, from the copies below.
    verdict: Signal<Local, FrameVerdict>,
    /// Beats of this frame before this one, and the index of the beat after it (kept
    /// apart so that no compare waits for an adder); saturate at 255 (the frame is
    /// oversized long before).
    beat: DFF<Bits<8>>,
    beat_after: DFF<Bits<8>>,
    /// Beats 0 to 4 one-hot (bit k: `beat == k`; none from beat 5 on), shifted on each
    /// beat taken: the header fields' enables test one flip-flop.
    early_beat: DFF<Bits<5>>,
    /// The previous frame beat.
    carry: DFF<Bits<64>>,
    /// Bytes 12-13 as a little-endian lane (IPv4 is 0x0008).
    ethertype: DFF<Bits<16>>,
    version_ihl: DFF<Bits<8>>,
    /// Bytes 20-21 as a little-endian lane: flags and fragment offset.
    fragment: DFF<Bits<16>>,
    protocol: DFF<Bits<8>>,
    total_len: DFF<Bits<16>>,
    /// Frame offsets of the TCP header and of the end of the IPv4 packet.
    tcp_start: DFF<Bits<8>>,
    /// `tcp_start + 8`: the payload's first window ends one beat after its start, and
    /// this way its beat takes a single adder once the data offset is known. Its beat,
    /// `window_base / 8`, completes the TCP header's first 8-byte window. (0xFF after
    /// reset: beat 31 matches no beat before beat 1 sets it.)
    window_base: DFF<Bits<8>>,
    /// (17 bits: `payload_end` does not wrap, so the frame is compared with it as is.)
    payload_end: DFF<Bits<17>>,
    /// The IPv4 payload's length (`total_len - 4 * IHL`).
    tcp_len: DFF<Bits<16>>,
    /// The beat that completes the TCP header's second 8-byte window, set from the IHL
    /// on beat 1 (255 after reset: no beat matches before).
    tcp_window_2: DFF<Bits<8>>,
    /// The beat with the TCP data offset, at least two beats before the payload's
    /// first window completes: time to set the payload bounds and, from them, each
    /// beat's decision a beat ahead.
    offset_beat: DFF<Bits<8>>,
    /// The beat taken now is `window_base / 8`, `tcp_window_2`, `offset_beat`: each
    /// compared a beat ahead (with `beat_after`), so the fields' enables wait on no
    /// compare. (Beat 2's flags are compared before beat 1 sets the bounds, against
    /// the previous frame's. Only `window_base` can be at beat 2, when byte 14's low
    /// nibble, the IHL, is 0: a frame that is not IPv4 (ARP, IPv6) or is malformed, so
    /// it sends no packet, and the next frame sets its fields again at its own beat
    /// before its packet starts.)
    at_window_base: DFF<Bit>,
    at_tcp_window_2: DFF<Bit>,
    at_offset_beat: DFF<Bit>,
    data_offset: DFF<Bits<4>>,
    /// The payload's offset in its beat is 6 (else 2).
    payload_at_6: DFF<Bit>,
    /// The beats whose payload windows are the first (255 until the TCP header is seen)
    /// and the last.
    first_window: DFF<Bits<8>>,
    last_window: DFF<Bits<8>>,
    /// This beat completes a payload window: one to send, or the last one, to hold.
    window_out: DFF<Bit>,
    window_last: DFF<Bit>,
    /// The TCP data offset is at least 5 and within the IPv4 payload (from the header's
    /// second window until the frame ends).
    segment_fits: DFF<Bit>,
    /// The IPv4 header's fields pass (a cycle behind them: read only by payload beats,
    /// several beats later).
    ip_fields_ok: DFF<Bit>,
    /// The IPv4 header checksum, for payload beats (`ip_check` two beats on).
    ip_sum_ok: DFF<Bit>,
    src_ip: DFF<Bits<32>>,
    dst_ip: DFF<Bits<32>>,
    src_port: DFF<Bits<16>>,
    dst_port: DFF<Bits<16>>,
    seq: DFF<Bits<32>>,
    ack: DFF<Bits<32>>,
    flags: DFF<Bits<5>>,
    window: DFF<Bits<16>>,
    payload_len: DFF<Bits<16>>,
    /// The last payload beat, when it was complete before the frame ended.
    held: DFF<Bits<64>>,
    held_valid: DFF<Bit>,
    /// A beat of this frame's payload has gone out: its packet must be ended.
    out_started: DFF<Bit>,
    /// The frame just ended, for the closing stage, then for the verdict stage.
    closing: DFF<Bit>,
    deciding: DFF<Bit>,
    /// Latched by the closing stage for the verdict stage: the frame's length, its last
    /// payload beat, whether its packet has started, and its verdict but for the
    /// checksums — from the checks before the IPv4 header sum and from those between
    /// that and the TCP sum.
    frame_len: DFF<Bits<16>>,
    last_data: DFF<Bits<64>>,
    last_keep: DFF<Bits<8>>,
    last_started: DFF<Bit>,
    ip_verdict: DFF<FrameVerdict>,
    tcp_verdict: DFF<FrameVerdict>,
    /// The frame the verdict stage decided on, to count: what decides its verdict,
    /// copied as the stage saw it, so the verdict's priority order is worked out in
    /// the counting cycle and not behind the checksum folds.
    counting: DFF<Bit>,
    counted_ip: DFF<FrameVerdict>,
    counted_tcp: DFF<FrameVerdict>,
    counted_ip_sum_ok: DFF<Bit>,
    counted_tcp_sum_ok: DFF<Bit>,
    unseen: DFF<Bit>,
    out_data: DFF<Bits<64>>,
    out_keep: DFF<Bits<8>>,
    out_last: DFF<Bit>,
    out_good: DFF<Bit>,
    out_valid: DFF<Bit>,
    accepted_count: DFF<Bits<32>>,
    oversized_count: DFF<Bits<32>>,
    malformed_count: DFF<Bits<32>>,
    not_tcp_count: DFF<Bits<32>>,
    bad_checksum_count: DFF<Bits<32>>,
}

impl Logic for TcpRxParser {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            beat,
            beat_after,
            early_beat,
            carry,
            ethertype,
            version_ihl,
            fragment,
            protocol,
            total_len,
            tcp_start,
            window_base,
            at_window_base,
            at_tcp_window_2,
            at_offset_beat,
            payload_end,
            tcp_len,
            tcp_window_2,
            offset_beat,
            data_offset,
            payload_at_6,
            first_window,
            last_window,
            window_out,
            window_last,
            segment_fits,
            ip_fields_ok,
            ip_sum_ok,
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window,
            payload_len,
            held,
            held_valid,
            out_started,
            closing,
            deciding,
            frame_len,
            last_data,
            last_keep,
            last_started,
            ip_verdict,
            tcp_verdict,
            counting,
            counted_ip,
            counted_tcp,
            counted_ip_sum_ok,
            counted_tcp_sum_ok,
            unseen,
            out_data,
            out_keep,
            out_last,
            out_good,
            out_valid,
            accepted_count,
            oversized_count,
            malformed_count,
            not_tcp_count,
            bad_checksum_count
        );
        self.lane_0.clock.next = self.clock.val();
        self.lane_1.clock.next = self.clock.val();
        self.lane_2.clock.next = self.clock.val();
        self.lane_3.clock.next = self.clock.val();
        self.ip_check.clock.next = self.clock.val();
        self.tcp_check.clock.next = self.clock.val();

        self.load.next = !self.out_valid.q.val() | self.payload_ready.val();
        self.frame_ready.next = self.load.val() & !self.reset.val();
        self.take.next = self.frame_valid.val() & self.frame_ready.val();
        self.close.next = self.closing.q.val() & self.load.val();
        self.decide.next = self.deciding.q.val() & self.load.val();

        match self.frame_keep.val().index() {
            1 => self.beat_bytes.next = 1.into(),
            3 => self.beat_bytes.next = 2.into(),
            7 => self.beat_bytes.next = 3.into(),
            15 => self.beat_bytes.next = 4.into(),
            31 => self.beat_bytes.next = 5.into(),
            63 => self.beat_bytes.next = 6.into(),
            127 => self.beat_bytes.next = 7.into(),
            255 => self.beat_bytes.next = 8.into(),
            _ => self.beat_bytes.next = 0.into(),
        }
        self.frame_end.next = (bit_cast::<16, 8>(self.beat.q.val()) << 3) + self.beat_bytes.val();
        self.restart.next = (self.take.val() & self.frame_last.val()) | self.reset.val();
        if self.take.val() {
            self.beat.d.next = self.beat_after.q.val();
            self.early_beat.d.next = self.early_beat.q.val() << 1;
            self.at_window_base.d.next = self.beat_after.q.val() == (self.window_base.q.val() >> 3);
            self.at_tcp_window_2.d.next = self.beat_after.q.val() == self.tcp_window_2.q.val();
            self.at_offset_beat.d.next = self.beat_after.q.val() == self.offset_beat.q.val();
            if self.beat_after.q.val() != 255 {
                self.beat_after.d.next = self.beat_after.q.val() + 1;
            }
        }
        if self.restart.val() {
            self.beat.d.next = 0.into();
            self.early_beat.d.next = 1.into();
            self.beat_after.d.next = 1.into();
            self.at_window_base.d.next = false;
            self.at_tcp_window_2.d.next = false;
            self.at_offset_beat.d.next = false;
        }

        // Checksum lanes: each beat adds into per-lane sums; they are added up a cycle
        // later (`ip_check`, `tcp_check`) and folded the cycle after.
        self.tcp_length_lane.next = (self.tcp_len.q.val() << 8) | (self.tcp_len.q.val() >> 8);
        self.lane_0.data.next = self.frame_data.val().get_bits::<16>(0);
        self.lane_1.data.next = self.frame_data.val().get_bits::<16>(16);
        self.lane_2.data.next = self.frame_data.val().get_bits::<16>(32);
        self.lane_3.data.next = self.frame_data.val().get_bits::<16>(48);
        self.lane_0.position.next = 0.into();
        self.lane_1.position.next = 1.into();
        self.lane_2.position.next = 2.into();
        self.lane_3.position.next = 3.into();
        self.lane_0.next_beat.next = self.beat_after.q.val();
        self.lane_1.next_beat.next = self.beat_after.q.val();
        self.lane_2.next_beat.next = self.beat_after.q.val();
        self.lane_3.next_beat.next = self.beat_after.q.val();
        self.lane_0.tcp_word.next = bit_cast::<10, 8>(self.tcp_start.q.val() >> 1);
        self.lane_1.tcp_word.next = bit_cast::<10, 8>(self.tcp_start.q.val() >> 1);
        self.lane_2.tcp_word.next = bit_cast::<10, 8>(self.tcp_start.q.val() >> 1);
        self.lane_3.tcp_word.next = bit_cast::<10, 8>(self.tcp_start.q.val() >> 1);
        self.lane_0.end_word.next = self.payload_end.q.val().get_bits::<10>(1);
        self.lane_1.end_word.next = self.payload_end.q.val().get_bits::<10>(1);
        self.lane_2.end_word.next = self.payload_end.q.val().get_bits::<10>(1);
        self.lane_3.end_word.next = self.payload_end.q.val().get_bits::<10>(1);
        self.lane_0.end_odd.next = self.payload_end.q.val().get_bit(0);
        self.lane_1.end_odd.next = self.payload_end.q.val().get_bit(0);
        self.lane_2.end_odd.next = self.payload_end.q.val().get_bit(0);
        self.lane_3.end_odd.next = self.payload_end.q.val().get_bit(0);
        self.lane_0.length.next = self.tcp_length_lane.val();
        self.lane_1.length.next = self.tcp_length_lane.val();
        self.lane_2.length.next = self.tcp_length_lane.val();
        self.lane_3.length.next = self.tcp_length_lane.val();
        self.lane_0.restart.next = self.restart.val();
        self.lane_1.restart.next = self.restart.val();
        self.lane_2.restart.next = self.restart.val();
        self.lane_3.restart.next = self.restart.val();
        self.lane_0.take.next = self.take.val();
        self.lane_1.take.next = self.take.val();
        self.lane_2.take.next = self.take.val();
        self.lane_3.take.next = self.take.val();
        self.lane_0.clear.next = self.close.val() | self.reset.val();
        self.lane_1.clear.next = self.close.val() | self.reset.val();
        self.lane_2.clear.next = self.close.val() | self.reset.val();
        self.lane_3.clear.next = self.close.val() | self.reset.val();
        self.ip_check.advance.next = self.load.val();
        self.ip_check.lane_0.next = self.lane_0.ip_sum.val();
        self.ip_check.lane_1.next = self.lane_1.ip_sum.val();
        self.ip_check.lane_2.next = self.lane_2.ip_sum.val();
        self.ip_check.lane_3.next = self.lane_3.ip_sum.val();
        self.tcp_check.advance.next = self.load.val();
        self.tcp_check.lane_0.next = self.lane_0.tcp_sum.val();
        self.tcp_check.lane_1.next = self.lane_1.tcp_sum.val();
        self.tcp_check.lane_2.next = self.lane_2.tcp_sum.val();
        self.tcp_check.lane_3.next = self.lane_3.tcp_sum.val();
        if self.load.val() {
            self.ip_sum_ok.d.next = self.ip_check.ok.val();
        }

        // The TCP header and the payload each start at byte 2 or 6 of a beat.
        if self.tcp_start.q.val().get_bit(2) {
            self.segment_window.next = (self.carry.q.val() >> 48) | (self.frame_data.val() << 16);
        } else {
            self.segment_window.next = (self.carry.q.val() >> 16) | (self.frame_data.val() << 48);
        }
        if self.payload_at_6.q.val() {
            self.payload_window.next = (self.carry.q.val() >> 48) | (self.frame_data.val() << 16);
        } else {
            self.payload_window.next = (self.carry.q.val() >> 16) | (self.frame_data.val() << 48);
        }
        self.beat_total_len.next = (bit_cast::<16, 8>(self.frame_data.val().get_bits::<8>(0)) << 8)
            | bit_cast::<16, 8>(self.frame_data.val().get_bits::<8>(8));
        if self.tcp_start.q.val().get_bit(2) {
            self.beat_data_offset.next = self.frame_data.val().get_bits::<4>(20);
        } else {
            self.beat_data_offset.next = self.frame_data.val().get_bits::<4>(52);
        }
        self.beat_payload_at_6.next =
            self.tcp_start.q.val().get_bit(2) ^ self.beat_data_offset.val().get_bit(0);
        if self.beat_payload_at_6.val() {
            self.last_window_end.next = self.payload_end.q.val() + 1;
        } else {
            self.last_window_end.next = self.payload_end.q.val() + 5;
        }
        self.ip_fields_ok.d.next = (self.ethertype.q.val() == 0x0008)
            & (self.version_ihl.q.val().get_bits::<4>(4) == 4)
            & (self.version_ihl.q.val().get_bits::<4>(0) >= 5)
            & ((self.fragment.q.val() & 0xFF3F) == 0)
            & (self.protocol.q.val() == 6)
            & (self.total_len.q.val() <= 1504) // MAX_FRAME_LEN - 14
            & ((bit_cast::<16, 4>(self.version_ihl.q.val().get_bits::<4>(0)) << 2)
                <= self.total_len.q.val());
        self.header_ok.next =
            self.ip_fields_ok.q.val() & self.ip_sum_ok.q.val() & self.segment_fits.q.val();

        if self.load.val() {
            self.out_valid.d.next = false;
            self.closing.d.next = self.take.val() & self.frame_last.val();
            self.deciding.d.next = self.closing.q.val();
            // The output register's data loads whenever it moves, with the payload
            // window or (below) the last beat: a beat that does not go out leaves it
            // not valid, so what it holds then does not matter, and its 70-odd
            // enables stay off the beat's handshake.
            self.out_data.d.next = self.payload_window.val();
            self.out_keep.d.next = 0xFF.into();
            self.out_last.d.next = false;
            self.out_good.d.next = false;
        }
        if self.take.val() {
            self.carry.d.next = self.frame_data.val();
            if self.early_beat.q.val().get_bit(1) {
                self.ethertype.d.next = self.frame_data.val().get_bits::<16>(32);
                self.version_ihl.d.next = self.frame_data.val().get_bits::<8>(48);
                self.tcp_start.d.next =
                    (bit_cast::<8, 4>(self.frame_data.val().get_bits::<4>(48)) << 2) + 14;
                self.window_base.d.next =
                    (bit_cast::<8, 4>(self.frame_data.val().get_bits::<4>(48)) << 2) + 22;
                self.tcp_window_2.d.next =
                    ((bit_cast::<8, 4>(self.frame_data.val().get_bits::<4>(48)) << 2) + 30) >> 3;
                self.offset_beat.d.next =
                    ((bit_cast::<8, 4>(self.frame_data.val().get_bits::<4>(48)) << 2) + 26) >> 3;
            }
            if self.early_beat.q.val().get_bit(2) {
                self.total_len.d.next = self.beat_total_len.val();
                self.payload_end.d.next = bit_cast::<17, 16>(self.beat_total_len.val()) + 14;
                self.tcp_len.d.next = self.beat_total_len.val()
                    - (bit_cast::<16, 4>(self.version_ihl.q.val().get_bits::<4>(0)) << 2);
                self.fragment.d.next = self.frame_data.val().get_bits::<16>(32);
                self.protocol.d.next = self.frame_data.val().get_bits::<8>(56);
            }
            if self.early_beat.q.val().get_bit(3) {
                self.src_ip.d.next = (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(16))
                    << 24)
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(24)) << 16)
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(32)) << 8)
                    | bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(40));
                self.dst_ip.d.next = (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(48))
                    << 24)
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(56)) << 16);
            }
            if self.early_beat.q.val().get_bit(4) {
                self.dst_ip.d.next = self.dst_ip.q.val()
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(0)) << 8)
                    | bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(8));
            }
            if self.at_window_base.q.val() {
                self.src_port.d.next =
                    (bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(0)) << 8)
                        | bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(8));
                self.dst_port.d.next =
                    (bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(16)) << 8)
                        | bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(24));
                self.seq.d.next = (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(32))
                    << 24)
                    | (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(40)) << 16)
                    | (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(48)) << 8)
                    | bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(56));
            }
            if self.at_tcp_window_2.q.val() {
                self.ack.d.next = (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(0))
                    << 24)
                    | (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(8)) << 16)
                    | (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(16)) << 8)
                    | bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(24));
                self.flags.d.next = self.segment_window.val().get_bits::<5>(40);
                self.window.d.next =
                    (bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(48)) << 8)
                        | bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(56));
            }
            if self.at_offset_beat.q.val() {
                self.data_offset.d.next = self.beat_data_offset.val();
                // Bounds for the payload windows.
                self.payload_at_6.d.next = self.beat_payload_at_6.val();
                self.first_window.d.next = (self.window_base.q.val()
                    + (bit_cast::<8, 4>(self.beat_data_offset.val()) << 2))
                    >> 3;
                self.last_window.d.next = bit_cast::<8, 17>(self.last_window_end.val() >> 3);
                self.payload_len.d.next =
                    self.tcp_len.q.val() - (bit_cast::<16, 4>(self.beat_data_offset.val()) << 2);
                self.segment_fits.d.next = (self.beat_data_offset.val() >= 5)
                    & ((bit_cast::<16, 4>(self.beat_data_offset.val()) << 2)
                        <= self.tcp_len.q.val());
            }
            // Payload windows: all but the last go out as they complete; the last waits
            // for the verdict. Which the next beat completes is decided now.
            if self.window_out.q.val() & self.header_ok.val() {
                self.out_valid.d.next = true;
                self.out_started.d.next = true;
            }
            if self.window_last.q.val() {
                self.held.d.next = self.payload_window.val();
                self.held_valid.d.next = true;
            }
            self.window_out.d.next = (self.beat_after.q.val() >= self.first_window.q.val())
                & (self.beat_after.q.val() < self.last_window.q.val());
            self.window_last.d.next = (self.beat_after.q.val() >= self.first_window.q.val())
                & (self.beat_after.q.val() == self.last_window.q.val());
            // The frame ends: the next beat starts the next frame, while the closing and
            // verdict stages finish this one.
            if self.frame_last.val() {
                self.frame_len.d.next = self.frame_end.val();
                self.first_window.d.next = 255.into();
                self.window_out.d.next = false;
                self.window_last.d.next = false;
                self.segment_fits.d.next = false;
            }
        }

        // Closing stage (the cycle after the last beat, or when the pipeline next moves).
        // The next frame's first beat may be taken now: it adds to no sum, sets no field
        // and sends no payload, so this frame's state is still whole.
        if self.close.val() {
            self.held_valid.d.next = false;
            self.out_started.d.next = false;
            self.last_started.d.next = self.out_started.q.val();
            if self.held_valid.q.val() {
                self.last_data.d.next = self.held.q.val();
            } else if self.payload_at_6.q.val() {
                self.last_data.d.next = self.carry.q.val() >> 48;
            } else {
                self.last_data.d.next = self.carry.q.val() >> 16;
            }
            match self.payload_len.q.val().get_bits::<3>(0).index() {
                1 => self.last_keep.d.next = 0x01.into(),
                2 => self.last_keep.d.next = 0x03.into(),
                3 => self.last_keep.d.next = 0x07.into(),
                4 => self.last_keep.d.next = 0x0F.into(),
                5 => self.last_keep.d.next = 0x1F.into(),
                6 => self.last_keep.d.next = 0x3F.into(),
                7 => self.last_keep.d.next = 0x7F.into(),
                _ => self.last_keep.d.next = 0xFF.into(),
            }
            if self.payload_len.q.val() == 0 {
                self.last_keep.d.next = 0x00.into();
            }
            // The checks after the IPv4 header sum and before the TCP sum.
            self.tcp_verdict.d.next = FrameVerdict::Accepted;
            if (self.tcp_len.q.val() < 20)
                | (self.data_offset.q.val() < 5)
                | ((bit_cast::<16, 4>(self.data_offset.q.val()) << 2) > self.tcp_len.q.val())
            {
                self.tcp_verdict.d.next = FrameVerdict::Malformed;
            }
            if self.protocol.q.val() != 6 {
                self.tcp_verdict.d.next = FrameVerdict::NotTcp;
            }
            // The checks before the IPv4 header sum, in the reference's order (a later
            // one wins). A frame too short for a field fails a length check that wins
            // over the checks reading it, so stale fields never decide.
            self.ip_verdict.d.next = FrameVerdict::Accepted;
            if (self.version_ihl.q.val().get_bits::<4>(4) != 4)
                | ((self.fragment.q.val() & 0xFF3F) != 0)
            {
                self.ip_verdict.d.next = FrameVerdict::NotTcp;
            }
            if (self.frame_len.q.val() < 34)
                | (self.version_ihl.q.val().get_bits::<4>(0) < 5)
                | (self.frame_len.q.val() < bit_cast::<16, 8>(self.tcp_start.q.val()))
                | ((bit_cast::<16, 4>(self.version_ihl.q.val().get_bits::<4>(0)) << 2)
                    > self.total_len.q.val())
                | (bit_cast::<17, 16>(self.frame_len.q.val()) < self.payload_end.q.val())
            {
                self.ip_verdict.d.next = FrameVerdict::Malformed;
            }
            if self.ethertype.q.val() != 0x0008 {
                self.ip_verdict.d.next = FrameVerdict::NotTcp;
            }
            if self.frame_len.q.val() < 14 {
                self.ip_verdict.d.next = FrameVerdict::Malformed;
            }
            if self.frame_len.q.val() > 1518 {
                self.ip_verdict.d.next = FrameVerdict::Oversized;
            }
        }

        // Verdict stage: both sums as the closing stage saw them, folded.
        self.accepted.next = self.ip_check.ok.val()
            & self.tcp_check.ok.val()
            & (self.ip_verdict.q.val() == FrameVerdict::Accepted)
            & (self.tcp_verdict.q.val() == FrameVerdict::Accepted);
        // The packet's last beat goes out now (its data and keep are written whether it
        // does or not: a beat not valid is never read); the count and `frame_unseen`
        // follow from registers a cycle later, off this stage's path.
        if self.decide.val() {
            self.out_data.d.next = self.last_data.q.val();
            self.out_keep.d.next = self.last_keep.q.val();
            self.out_last.d.next = true;
            self.out_good.d.next = self.accepted.val();
            self.out_valid.d.next = self.last_started.q.val() | self.accepted.val();
            self.counted_ip.d.next = self.ip_verdict.q.val();
            self.counted_tcp.d.next = self.tcp_verdict.q.val();
            self.counted_ip_sum_ok.d.next = self.ip_check.ok.val();
            self.counted_tcp_sum_ok.d.next = self.tcp_check.ok.val();
        }
        self.counting.d.next = self.decide.val();
        self.unseen.d.next = self.decide.val() & !self.last_started.q.val() & !self.accepted.val();
        self.verdict.next = FrameVerdict::Accepted;
        if !self.counted_tcp_sum_ok.q.val() {
            self.verdict.next = FrameVerdict::BadChecksum;
        }
        if self.counted_tcp.q.val() != FrameVerdict::Accepted {
            self.verdict.next = self.counted_tcp.q.val();
        }
        if !self.counted_ip_sum_ok.q.val() {
            self.verdict.next = FrameVerdict::BadChecksum;
        }
        if self.counted_ip.q.val() != FrameVerdict::Accepted {
            self.verdict.next = self.counted_ip.q.val();
        }
        if self.counting.q.val() {
            match self.verdict.val() {
                FrameVerdict::Accepted => {
                    self.accepted_count.d.next = self.accepted_count.q.val() + 1
                }
                FrameVerdict::Oversized => {
                    self.oversized_count.d.next = self.oversized_count.q.val() + 1
                }
                FrameVerdict::Malformed => {
                    self.malformed_count.d.next = self.malformed_count.q.val() + 1
                }
                FrameVerdict::NotTcp => self.not_tcp_count.d.next = self.not_tcp_count.q.val() + 1,
                FrameVerdict::BadChecksum => {
                    self.bad_checksum_count.d.next = self.bad_checksum_count.q.val() + 1
                }
            }
        }

        if self.reset.val() {
            self.window_base.d.next = 255.into();
            self.tcp_window_2.d.next = 255.into();
            self.offset_beat.d.next = 255.into();
            self.first_window.d.next = 255.into();
            self.window_out.d.next = false;
            self.window_last.d.next = false;
            self.segment_fits.d.next = false;
            self.held_valid.d.next = false;
            self.out_started.d.next = false;
            self.closing.d.next = false;
            self.deciding.d.next = false;
            self.counting.d.next = false;
            self.unseen.d.next = false;
            self.out_valid.d.next = false;
            self.accepted_count.d.next = 0.into();
            self.oversized_count.d.next = 0.into();
            self.malformed_count.d.next = 0.into();
            self.not_tcp_count.d.next = 0.into();
            self.bad_checksum_count.d.next = 0.into();
        }

        self.payload_data.next = self.out_data.q.val();
        self.payload_keep.next = self.out_keep.q.val();
        self.payload_last.next = self.out_last.q.val();
        self.payload_good.next = self.out_good.q.val();
        self.payload_valid.next = self.out_valid.q.val();
        self.seg_src_ip.next = self.src_ip.q.val();
        self.seg_dst_ip.next = self.dst_ip.q.val();
        self.seg_src_port.next = self.src_port.q.val();
        self.seg_dst_port.next = self.dst_port.q.val();
        self.seg_seq.next = self.seq.q.val();
        self.seg_ack.next = self.ack.q.val();
        self.seg_flags.next = self.flags.q.val();
        self.seg_window.next = self.window.q.val();
        self.seg_payload_len.next = self.payload_len.q.val();
        self.frames_accepted.next = self.accepted_count.q.val();
        self.dropped_oversized.next = self.oversized_count.q.val();
        self.dropped_malformed.next = self.malformed_count.q.val();
        self.dropped_not_tcp.next = self.not_tcp_count.q.val();
        self.dropped_bad_checksum.next = self.bad_checksum_count.q.val();
        self.frame_unseen.next = self.unseen.q.val();
    }
}
