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
//! fields are valid with every beat of the packet (they are registers that change only
//! between packets). `payload_keep` is 0xFF on every beat but the last.
//!
//! **Realignment**: the Ethernet header is 14 bytes and IPv4 and TCP headers are
//! multiples of 4, so a payload starts at byte 2 or byte 6 of a beat: each output beat is
//! the top 6 (or 2) bytes of one input beat and the low 2 (or 6) of the next, a two-way
//! choice rather than an 8-way barrel shifter. The TCP header is located the same way.
//!
//! **Checksums**: both are ones'-complement sums of 16-bit words, which is byte-order
//! independent (RFC 1071 §2(B)), so each beat's four little-endian lanes are added as
//! they stand into 32-bit accumulators without swapping, and folded once at the end; a
//! correct header or segment folds to 0xFFFF. The pseudo-header's addresses are the
//! IPv4 header's own lanes, added to the TCP sum as they pass.
//!
//! **Throughput**: one beat per cycle, plus one cycle per frame for the verdict and the
//! last payload beat (a minimum-size frame of 8 beats takes 9 cycles). `frame_ready`
//! also waits for the output register. Synchronous active-high `reset`.

use rust_hdl::prelude::*;

/// Longest frame accepted, without FCS (1500-byte IPv4 packet + Ethernet header).
/// (`#[hdl_gen]` cannot read Rust constants: `update` writes 1518 and 1518 - 14 = 1504.)
pub const MAX_FRAME_LEN: u64 = 1518;

/// Where the parser is within a frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum RxPhase {
    /// Taking the beats of a frame.
    Frame,
    /// The frame has ended: count its verdict and send the last payload beat.
    Finish,
}

/// What became of a frame, in the reference parser's order of checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum FrameVerdict {
    Accepted,
    Oversized,
    Malformed,
    NotTcp,
    BadChecksum,
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
    /// The output register takes a new beat (or empties) this cycle.
    load: Signal<Local, Bit>,
    /// A frame beat is taken this cycle.
    take: Signal<Local, Bit>,
    /// Bytes in this frame beat (8 but on the last).
    beat_bytes: Signal<Local, Bits<16>>,
    /// Byte offsets within the frame of the four 16-bit lanes of this beat.
    lane_at_0: Signal<Local, Bits<16>>,
    lane_at_1: Signal<Local, Bits<16>>,
    lane_at_2: Signal<Local, Bits<16>>,
    lane_at_3: Signal<Local, Bits<16>>,
    /// This beat's lanes as they count towards the IPv4 header sum and the TCP sum.
    ip_lane_0: Signal<Local, Bits<32>>,
    ip_lane_1: Signal<Local, Bits<32>>,
    ip_lane_2: Signal<Local, Bits<32>>,
    ip_lane_3: Signal<Local, Bits<32>>,
    tcp_lane_0: Signal<Local, Bits<32>>,
    tcp_lane_1: Signal<Local, Bits<32>>,
    tcp_lane_2: Signal<Local, Bits<32>>,
    tcp_lane_3: Signal<Local, Bits<32>>,
    /// The TCP header realigned to byte 0 (valid on its first two beats).
    segment_window: Signal<Local, Bits<64>>,
    /// The 8 payload bytes ending with the low bytes of this beat.
    payload_window: Signal<Local, Bits<64>>,
    /// Frame offset just past `payload_window`.
    payload_window_end: Signal<Local, Bits<16>>,
    /// The frame passes every check that is decided before its payload.
    header_ok: Signal<Local, Bit>,
    ip_fold: Signal<Local, Bits<32>>,
    ip_sum_ok: Signal<Local, Bit>,
    tcp_len: Signal<Local, Bits<16>>,
    /// The TCP sum with the rest of the pseudo-header.
    tcp_total: Signal<Local, Bits<32>>,
    tcp_fold: Signal<Local, Bits<32>>,
    tcp_sum_ok: Signal<Local, Bit>,
    verdict: Signal<Local, FrameVerdict>,
    phase: DFF<RxPhase>,
    /// Bytes of the frame before this beat; stops counting past `MAX_FRAME_LEN`.
    frame_len: DFF<Bits<16>>,
    /// The previous frame beat.
    carry: DFF<Bits<64>>,
    /// Bytes 12-13 as a little-endian lane (IPv4 is 0x0008).
    ethertype: DFF<Bits<16>>,
    version_ihl: DFF<Bits<8>>,
    /// Bytes 20-21 as a little-endian lane: flags and fragment offset.
    fragment: DFF<Bits<16>>,
    protocol: DFF<Bits<8>>,
    total_len: DFF<Bits<16>>,
    /// Frame offsets of the TCP header, the payload and the end of the IPv4 packet.
    tcp_start: DFF<Bits<16>>,
    payload_start: DFF<Bits<16>>,
    payload_end: DFF<Bits<16>>,
    data_offset: DFF<Bits<4>>,
    ip_sum: DFF<Bits<32>>,
    tcp_sum: DFF<Bits<32>>,
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
            phase,
            frame_len,
            carry,
            ethertype,
            version_ihl,
            fragment,
            protocol,
            total_len,
            tcp_start,
            payload_start,
            payload_end,
            data_offset,
            ip_sum,
            tcp_sum,
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
        self.load.next = !self.out_valid.q.val() | self.payload_ready.val();
        self.frame_ready.next =
            self.load.val() & (self.phase.q.val() == RxPhase::Frame) & !self.reset.val();
        self.take.next = self.frame_valid.val() & self.frame_ready.val();

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

        // Checksum lanes. IPv4 header: [14, tcp_start). TCP: the pseudo-header addresses
        // (bytes 26-33) and [tcp_start, payload_end), where an odd last byte is padded
        // with zero. `tcp_start` holds the largest header until the IHL is seen, so the
        // first lane (bytes 14-15) counts for the IPv4 header.
        self.lane_at_0.next = self.frame_len.q.val();
        self.lane_at_1.next = self.frame_len.q.val() + 2;
        self.lane_at_2.next = self.frame_len.q.val() + 4;
        self.lane_at_3.next = self.frame_len.q.val() + 6;
        self.ip_lane_0.next = 0.into();
        if (self.lane_at_0.val() >= 14) & (self.lane_at_0.val() < self.tcp_start.q.val()) {
            self.ip_lane_0.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(0));
        }
        self.ip_lane_1.next = 0.into();
        if (self.lane_at_1.val() >= 14) & (self.lane_at_1.val() < self.tcp_start.q.val()) {
            self.ip_lane_1.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(16));
        }
        self.ip_lane_2.next = 0.into();
        if (self.lane_at_2.val() >= 14) & (self.lane_at_2.val() < self.tcp_start.q.val()) {
            self.ip_lane_2.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(32));
        }
        self.ip_lane_3.next = 0.into();
        if (self.lane_at_3.val() >= 14) & (self.lane_at_3.val() < self.tcp_start.q.val()) {
            self.ip_lane_3.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(48));
        }
        self.tcp_lane_0.next = 0.into();
        if (self.lane_at_0.val() >= self.tcp_start.q.val())
            & (self.lane_at_0.val() < self.payload_end.q.val())
        {
            self.tcp_lane_0.next = bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(0));
            if self.lane_at_0.val() + 1 < self.payload_end.q.val() {
                self.tcp_lane_0.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(0));
            }
        }
        if self.frame_len.q.val() == 32 {
            self.tcp_lane_0.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(0));
        }
        self.tcp_lane_1.next = 0.into();
        if (self.lane_at_1.val() >= self.tcp_start.q.val())
            & (self.lane_at_1.val() < self.payload_end.q.val())
        {
            self.tcp_lane_1.next = bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(16));
            if self.lane_at_1.val() + 1 < self.payload_end.q.val() {
                self.tcp_lane_1.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(16));
            }
        }
        if self.frame_len.q.val() == 24 {
            self.tcp_lane_1.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(16));
        }
        self.tcp_lane_2.next = 0.into();
        if (self.lane_at_2.val() >= self.tcp_start.q.val())
            & (self.lane_at_2.val() < self.payload_end.q.val())
        {
            self.tcp_lane_2.next = bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(32));
            if self.lane_at_2.val() + 1 < self.payload_end.q.val() {
                self.tcp_lane_2.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(32));
            }
        }
        if self.frame_len.q.val() == 24 {
            self.tcp_lane_2.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(32));
        }
        self.tcp_lane_3.next = 0.into();
        if (self.lane_at_3.val() >= self.tcp_start.q.val())
            & (self.lane_at_3.val() < self.payload_end.q.val())
        {
            self.tcp_lane_3.next = bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(48));
            if self.lane_at_3.val() + 1 < self.payload_end.q.val() {
                self.tcp_lane_3.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(48));
            }
        }
        if self.frame_len.q.val() == 24 {
            self.tcp_lane_3.next = bit_cast::<32, 16>(self.frame_data.val().get_bits::<16>(48));
        }

        // Ones'-complement folds of the sums as they stand (used once the frame is past
        // the part each covers).
        self.ip_fold.next = (self.ip_sum.q.val() & 0xFFFF) + (self.ip_sum.q.val() >> 16);
        self.ip_sum_ok.next =
            ((self.ip_fold.val() & 0xFFFF) + (self.ip_fold.val() >> 16)) == 0xFFFF;
        self.tcp_len.next = self.total_len.q.val() - (self.tcp_start.q.val() - 14);
        // The pseudo-header's protocol (0x0006) and TCP length as little-endian lanes.
        self.tcp_total.next = self.tcp_sum.q.val()
            + 0x0600
            + (bit_cast::<32, 8>(self.tcp_len.val().get_bits::<8>(0)) << 8)
            + bit_cast::<32, 8>(self.tcp_len.val().get_bits::<8>(8));
        self.tcp_fold.next = (self.tcp_total.val() & 0xFFFF) + (self.tcp_total.val() >> 16);
        self.tcp_sum_ok.next =
            ((self.tcp_fold.val() & 0xFFFF) + (self.tcp_fold.val() >> 16)) == 0xFFFF;

        // The TCP header and the payload each start at byte 2 or 6 of a beat.
        if self.tcp_start.q.val().get_bit(2) {
            self.segment_window.next = (self.carry.q.val() >> 48) | (self.frame_data.val() << 16);
        } else {
            self.segment_window.next = (self.carry.q.val() >> 16) | (self.frame_data.val() << 48);
        }
        if self.payload_start.q.val().get_bit(2) {
            self.payload_window.next = (self.carry.q.val() >> 48) | (self.frame_data.val() << 16);
        } else {
            self.payload_window.next = (self.carry.q.val() >> 16) | (self.frame_data.val() << 48);
        }
        self.payload_window_end.next = self.frame_len.q.val() | (self.payload_start.q.val() & 7);
        self.header_ok.next = (self.ethertype.q.val() == 0x0008)
            & (self.version_ihl.q.val().get_bits::<4>(4) == 4)
            & (self.version_ihl.q.val().get_bits::<4>(0) >= 5)
            & ((self.fragment.q.val() & 0xFF3F) == 0)
            & (self.protocol.q.val() == 6)
            & self.ip_sum_ok.val()
            & (self.total_len.q.val() <= 1504) // MAX_FRAME_LEN - 14
            & (self.data_offset.q.val() >= 5)
            & (self.payload_start.q.val() <= self.payload_end.q.val());

        if self.load.val() {
            self.out_valid.d.next = false;
        }
        if self.take.val() {
            self.carry.d.next = self.frame_data.val();
            if self.frame_len.q.val() <= 1518 {
                self.frame_len.d.next = self.frame_len.q.val() + self.beat_bytes.val();
            }
            self.ip_sum.d.next = self.ip_sum.q.val()
                + self.ip_lane_0.val()
                + self.ip_lane_1.val()
                + self.ip_lane_2.val()
                + self.ip_lane_3.val();
            self.tcp_sum.d.next = self.tcp_sum.q.val()
                + self.tcp_lane_0.val()
                + self.tcp_lane_1.val()
                + self.tcp_lane_2.val()
                + self.tcp_lane_3.val();
            if self.frame_len.q.val() == 8 {
                self.ethertype.d.next = self.frame_data.val().get_bits::<16>(32);
                self.version_ihl.d.next = self.frame_data.val().get_bits::<8>(48);
                self.tcp_start.d.next =
                    (bit_cast::<16, 4>(self.frame_data.val().get_bits::<4>(48)) << 2) + 14;
            }
            if self.frame_len.q.val() == 16 {
                self.total_len.d.next = (bit_cast::<16, 8>(self.frame_data.val().get_bits::<8>(0))
                    << 8)
                    | bit_cast::<16, 8>(self.frame_data.val().get_bits::<8>(8));
                self.payload_end.d.next =
                    (bit_cast::<16, 8>(self.frame_data.val().get_bits::<8>(0)) << 8)
                        + bit_cast::<16, 8>(self.frame_data.val().get_bits::<8>(8))
                        + 14;
                self.fragment.d.next = self.frame_data.val().get_bits::<16>(32);
                self.protocol.d.next = self.frame_data.val().get_bits::<8>(56);
            }
            if self.frame_len.q.val() == 24 {
                self.src_ip.d.next = (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(16))
                    << 24)
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(24)) << 16)
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(32)) << 8)
                    | bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(40));
                self.dst_ip.d.next = (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(48))
                    << 24)
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(56)) << 16);
            }
            if self.frame_len.q.val() == 32 {
                self.dst_ip.d.next = self.dst_ip.q.val()
                    | (bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(0)) << 8)
                    | bit_cast::<32, 8>(self.frame_data.val().get_bits::<8>(8));
            }
            // The first two 8-byte windows of the TCP header.
            if self.frame_len.q.val() == (self.tcp_start.q.val() & 0xFFF8) + 8 {
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
            if self.frame_len.q.val() == (self.tcp_start.q.val() & 0xFFF8) + 16 {
                self.ack.d.next = (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(0))
                    << 24)
                    | (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(8)) << 16)
                    | (bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(16)) << 8)
                    | bit_cast::<32, 8>(self.segment_window.val().get_bits::<8>(24));
                self.data_offset.d.next = self.segment_window.val().get_bits::<4>(36);
                self.flags.d.next = self.segment_window.val().get_bits::<5>(40);
                self.window.d.next =
                    (bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(48)) << 8)
                        | bit_cast::<16, 8>(self.segment_window.val().get_bits::<8>(56));
                self.payload_start.d.next = self.tcp_start.q.val()
                    + (bit_cast::<16, 4>(self.segment_window.val().get_bits::<4>(36)) << 2);
                self.payload_len.d.next = self.payload_end.q.val()
                    - self.tcp_start.q.val()
                    - (bit_cast::<16, 4>(self.segment_window.val().get_bits::<4>(36)) << 2);
            }
            // Payload windows: all but the last go out as they complete; the last waits
            // for the verdict.
            if self.payload_window_end.val() >= self.payload_start.q.val() + 8 {
                if self.payload_window_end.val() < self.payload_end.q.val() {
                    if self.header_ok.val() & (self.frame_len.q.val() < 1518) {
                        self.out_data.d.next = self.payload_window.val();
                        self.out_keep.d.next = 0xFF.into();
                        self.out_last.d.next = false;
                        self.out_good.d.next = false;
                        self.out_valid.d.next = true;
                        self.out_started.d.next = true;
                    }
                } else if self.payload_window_end.val() - 8 < self.payload_end.q.val() {
                    self.held.d.next = self.payload_window.val();
                    self.held_valid.d.next = true;
                }
            }
            if self.frame_last.val() {
                self.phase.d.next = RxPhase::Finish;
            }
        }

        // The verdict, in the reference's order of checks.
        self.verdict.next = FrameVerdict::Accepted;
        if !self.tcp_sum_ok.val() {
            self.verdict.next = FrameVerdict::BadChecksum;
        }
        if (self.tcp_len.val() < 20)
            | (self.data_offset.q.val() < 5)
            | ((bit_cast::<16, 4>(self.data_offset.q.val()) << 2) > self.tcp_len.val())
        {
            self.verdict.next = FrameVerdict::Malformed;
        }
        if self.protocol.q.val() != 6 {
            self.verdict.next = FrameVerdict::NotTcp;
        }
        if !self.ip_sum_ok.val() {
            self.verdict.next = FrameVerdict::BadChecksum;
        }
        if (self.version_ihl.q.val().get_bits::<4>(4) != 4)
            | ((self.fragment.q.val() & 0xFF3F) != 0)
        {
            self.verdict.next = FrameVerdict::NotTcp;
        }
        if (self.frame_len.q.val() < 34)
            | (self.version_ihl.q.val().get_bits::<4>(0) < 5)
            | (self.frame_len.q.val() < self.tcp_start.q.val())
            | (self.tcp_start.q.val() - 14 > self.total_len.q.val())
            | (self.frame_len.q.val() - 14 < self.total_len.q.val())
        {
            self.verdict.next = FrameVerdict::Malformed;
        }
        if self.ethertype.q.val() != 0x0008 {
            self.verdict.next = FrameVerdict::NotTcp;
        }
        if self.frame_len.q.val() < 14 {
            self.verdict.next = FrameVerdict::Malformed;
        }
        if self.frame_len.q.val() > 1518 {
            self.verdict.next = FrameVerdict::Oversized;
        }

        self.frame_unseen.next = false;
        if (self.phase.q.val() == RxPhase::Finish) & self.load.val() {
            self.frame_unseen.next =
                !self.out_started.q.val() & (self.verdict.val() != FrameVerdict::Accepted);
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
            if self.out_started.q.val() | (self.verdict.val() == FrameVerdict::Accepted) {
                if self.held_valid.q.val() {
                    self.out_data.d.next = self.held.q.val();
                } else if self.payload_start.q.val().get_bit(2) {
                    self.out_data.d.next = self.carry.q.val() >> 48;
                } else {
                    self.out_data.d.next = self.carry.q.val() >> 16;
                }
                match self.payload_len.q.val().get_bits::<3>(0).index() {
                    1 => self.out_keep.d.next = 0x01.into(),
                    2 => self.out_keep.d.next = 0x03.into(),
                    3 => self.out_keep.d.next = 0x07.into(),
                    4 => self.out_keep.d.next = 0x0F.into(),
                    5 => self.out_keep.d.next = 0x1F.into(),
                    6 => self.out_keep.d.next = 0x3F.into(),
                    7 => self.out_keep.d.next = 0x7F.into(),
                    _ => self.out_keep.d.next = 0xFF.into(),
                }
                if self.payload_len.q.val() == 0 {
                    self.out_keep.d.next = 0x00.into();
                }
                self.out_last.d.next = true;
                self.out_good.d.next = self.verdict.val() == FrameVerdict::Accepted;
                self.out_valid.d.next = true;
            }
            self.phase.d.next = RxPhase::Frame;
        }
        // Per-frame state starts over after the verdict and on reset.
        if ((self.phase.q.val() == RxPhase::Finish) & self.load.val()) | self.reset.val() {
            self.frame_len.d.next = 0.into();
            self.tcp_start.d.next = 74.into();
            self.data_offset.d.next = 0.into();
            self.ip_sum.d.next = 0.into();
            self.tcp_sum.d.next = 0.into();
            self.held_valid.d.next = false;
            self.out_started.d.next = false;
        }
        if self.reset.val() {
            self.phase.d.next = RxPhase::Frame;
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
    }
}
