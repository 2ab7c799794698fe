//! TCP transmit: a segment descriptor and its payload in, an Ethernet II / IPv4 / TCP
//! frame out, checksums left zero for the block after this one to fill.
//!
//! ```text
//! beat 0  dst_mac[0..6]  src_mac[0..2]
//! beat 1  src_mac[2..6]  08 00 (IPv4)  45 00 (IHL 5, DSCP/ECN 0)
//! beat 2  total_len      00 00 (ident) 40 00 (DF)  40 (TTL 64) 06 (TCP)
//! beat 3  00 00 (IPv4 checksum)  src_ip  dst_ip[0..2]
//! beat 4  dst_ip[2..4]  src_port  dst_port  seq[0..2]
//! beat 5  seq[2..4]  ack  50 (data offset 5; 70 with options)  flags
//! beat 6  window  00 00 (TCP checksum)  00 00 (urgent)  payload[0..2]
//! beat 7+ payload[2..] ... zero padding to 60 bytes
//!
//! with the SYN options (`desc_syn_options`), 8 bytes more and the payload again at byte 6:
//! beat 6  window  00 00 (TCP checksum)  00 00 (urgent)  02 04 (MSS, length 4)
//! beat 7  mss  03 03 (window scale, length 3)  shift  00 (end of list)  payload[0..2]
//!         (with `desc_no_window_scale`: mss  00 00 00 00 (end of list, padding))
//! beat 8+ payload[2..]
//! ```
//!
//! The frame is byte for byte what `iwnic_proto::net::SegmentOut::emit(payload, ..,
//! Checksums::Offloaded)` writes (IPv4 without options, identification 0, DF, TTL 64; a
//! 20-byte TCP header, or 28 with the MSS and window scale options of a SYN, urgent 0),
//! with the TCP flags byte and the acknowledgment field taken as given (`emit` writes the
//! field zero for a segment without ACK): the firmware (which owns the connection state)
//! decides ACK/PSH/SYN/FIN/RST and this block never interprets them.
//!
//! **Why a descriptor**: the fields of a data segment are known before its payload is
//! (the MPA framer's FPDU is being built while the header goes out), so the header
//! leaves first and the payload streams through cut-through. `desc_payload_len` makes
//! the IPv4 total length; the payload's own `keep`/`last` place the end of the frame, so
//! a wrong length corrupts only that field. The checksums are left to the next block
//! because the TCP checksum covers the payload, which has not arrived yet.
//!
//! **Realignment**: the headers are 54 bytes, 6 beats and 6 bytes, so payload byte `k`
//! is frame byte `54 + k`. Output beat 6 is the header's last 6 bytes and payload bytes
//! 0..2; every later beat is the 6 bytes held back from the previous payload beat and
//! the low 2 of the current one: a fixed two-way join, no barrel shifter. The frame ends
//! one beat after the last payload beat when that beat holds more than 2 bytes. With the
//! options the headers are 62 bytes, which leaves the payload at byte 6 of a beat too:
//! beat 6 is a whole header beat, and the options' last 6 bytes are held back as if from
//! a payload beat, so beat 7 on is the same join.
//!
//! **Input** (`desc_*`): one descriptor per frame, held while `desc_valid` until
//! `desc_ready`. `desc_syn_options` high adds the MSS (`desc_mss`) and window scale
//! (`desc_window_shift`) options, the window scale left out (end of list and padding in
//! its 4 bytes) with `desc_no_window_scale`; with `desc_syn_options` low those three are
//! not used. **Payload**
//! (`payload_*`): when `desc_payload_len` > 0, exactly one packet for that descriptor,
//! starting at byte 0 of a beat (byte `i` in bits `8i+7:8i`), `payload_keep` 0xFF on
//! every beat but the last, whose `keep` is contiguous low bytes. When
//! `desc_payload_len` is 0 no payload packet is taken. Payload bytes outside
//! `payload_keep` are ignored (padding is always zero).
//!
//! **Output** (`frame_*`): one frame per descriptor, at least 60 bytes (short frames
//! padded with zeros), `frame_keep` 0xFF on every beat but the last. Bytes outside
//! `frame_keep` are zero.
//!
//! **Throughput and latency**: one output beat per cycle; with a descriptor and payload
//! waiting and `frame_ready` high, the output has no idle cycle within a frame *or
//! between frames*. The descriptor registers are free as soon as output beat 6 has been
//! built, and `desc_ready` rises the cycle after, so the next descriptor is taken while
//! the current frame's payload still streams and its beat 0 follows the current frame's
//! last beat directly. From an idle block, the first beat is on `frame_valid` two cycles
//! after the cycle its descriptor is taken (one to register the descriptor, one for the
//! output register). A frame of `L` payload bytes is `max(8, ceil((54 + L) / 8))` beats,
//! `ceil((62 + L) / 8)` with the options. (With `desc_syn_options` tied low the options'
//! registers load constants and synthesis removes them and the logic behind them:
//! `nic_top`'s datapath builder has none of their flip-flops.)
//!
//! **Timing**: the output is registered. `desc_ready` is a register output (gated by
//! `reset`); `payload_ready` is combinational from `frame_ready` and registers (one gate,
//! as in a plain pipeline register); neither depends on its own valid. Synchronous
//! active-high `reset` clears the frame in progress, a descriptor held, the output
//! register and `frames_built`.
//!
//! **Counter**: `frames_built` counts frames whose last beat has left (`frame_valid`,
//! `frame_ready` and `frame_last` in one cycle); it wraps.

use rust_hdl::prelude::*;

/// Where the builder is within a frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum TxPhase {
    /// Header beats 0..5 (0..6 with the options), each built from the descriptor
    /// registers once they hold a descriptor.
    Header,
    /// Beat 6 without the options: the header's last 6 bytes and the first 2 payload
    /// bytes (zeros without payload).
    Join,
    /// Payload beats: 6 held bytes (the first, with the options: their last 6) and 2 new
    /// ones each.
    Body,
    /// One more beat is owed after the last payload beat: its held bytes and/or padding.
    Tail,
}

/// Builds one frame per descriptor on `desc_*` with the payload on `payload_*`; see the
/// module documentation for the interface.
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct SegmentBuilder {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub desc_src_mac: Signal<In, Bits<48>>,
    pub desc_dst_mac: Signal<In, Bits<48>>,
    pub desc_src_ip: Signal<In, Bits<32>>,
    pub desc_dst_ip: Signal<In, Bits<32>>,
    pub desc_src_port: Signal<In, Bits<16>>,
    pub desc_dst_port: Signal<In, Bits<16>>,
    pub desc_seq: Signal<In, Bits<32>>,
    pub desc_ack: Signal<In, Bits<32>>,
    pub desc_flags: Signal<In, Bits<8>>,
    pub desc_window: Signal<In, Bits<16>>,
    pub desc_syn_options: Signal<In, Bit>,
    pub desc_mss: Signal<In, Bits<16>>,
    pub desc_window_shift: Signal<In, Bits<8>>,
    /// With `desc_syn_options`: the window scale option left out (end of list and
    /// padding in its 4 bytes).
    pub desc_no_window_scale: Signal<In, Bit>,
    pub desc_payload_len: Signal<In, Bits<16>>,
    pub desc_valid: Signal<In, Bit>,
    pub desc_ready: Signal<Out, Bit>,
    pub payload_data: Signal<In, Bits<64>>,
    pub payload_keep: Signal<In, Bits<8>>,
    pub payload_last: Signal<In, Bit>,
    pub payload_valid: Signal<In, Bit>,
    pub payload_ready: Signal<Out, Bit>,
    pub frame_data: Signal<Out, Bits<64>>,
    pub frame_keep: Signal<Out, Bits<8>>,
    pub frame_last: Signal<Out, Bit>,
    pub frame_valid: Signal<Out, Bit>,
    pub frame_ready: Signal<In, Bit>,
    pub frames_built: Signal<Out, Bits<32>>,
    /// The output register takes a new beat (or empties) this cycle.
    load: Signal<Local, Bit>,
    /// A descriptor is taken this cycle.
    take_desc: Signal<Local, Bit>,
    /// A payload beat is taken this cycle.
    take_payload: Signal<Local, Bit>,
    /// The payload beat's `keep` as a byte mask.
    kept_mask: Signal<Local, Bits<64>>,
    /// `payload_data` with the bytes outside `payload_keep` zeroed.
    kept: Signal<Local, Bits<64>>,
    /// Header beat `index` as a big-endian number (wire byte 0 in bits 63:56).
    header_be: Signal<Local, Bits<64>>,
    /// `header_be` in beat order (wire byte 0 in bits 7:0).
    header_beat: Signal<Local, Bits<64>>,
    /// The options' last 6 bytes (MSS, window scale, end of list), in beat order.
    options_tail: Signal<Local, Bits<48>>,
    phase: DFF<TxPhase>,
    /// `phase` takes payload beats: Join with a payload, or Body. A register of its own,
    /// set beside `phase` at each of its moves, so `payload_ready` and the handshake that
    /// loads `carry`'s 48 bits start at one flip-flop, not at a decode of the phase and
    /// `has_payload`.
    takes_payload: DFF<Bit>,
    /// The header beat built next (0..6).
    index: DFF<Bits<3>>,
    /// The descriptor registers hold a descriptor whose header is not yet fully built.
    desc_full: DFF<Bit>,
    src_mac: DFF<Bits<48>>,
    dst_mac: DFF<Bits<48>>,
    src_ip: DFF<Bits<32>>,
    dst_ip: DFF<Bits<32>>,
    src_port: DFF<Bits<16>>,
    dst_port: DFF<Bits<16>>,
    seq: DFF<Bits<32>>,
    ack: DFF<Bits<32>>,
    flags: DFF<Bits<8>>,
    window: DFF<Bits<16>>,
    /// The MSS and window scale options follow the TCP header, and their values.
    syn_options: DFF<Bit>,
    mss: DFF<Bits<16>>,
    window_shift: DFF<Bits<8>>,
    no_window_scale: DFF<Bit>,
    /// IPv4 total length: 40 + payload length, 48 + with the options.
    total_len: DFF<Bits<16>>,
    has_payload: DFF<Bit>,
    /// Payload bytes 2..8 of the previous payload beat, in beat order.
    carry: DFF<Bits<48>>,
    /// `frame_keep` of the tail beat.
    tail_keep: DFF<Bits<8>>,
    built: DFF<Bits<32>>,
    out_data: DFF<Bits<64>>,
    out_keep: DFF<Bits<8>>,
    out_last: DFF<Bit>,
    out_valid: DFF<Bit>,
}

impl Logic for SegmentBuilder {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            phase,
            takes_payload,
            index,
            desc_full,
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window,
            syn_options,
            mss,
            window_shift,
            no_window_scale,
            total_len,
            has_payload,
            carry,
            tail_keep,
            built,
            out_data,
            out_keep,
            out_last,
            out_valid
        );
        self.load.next = !self.out_valid.q.val() | self.frame_ready.val();
        self.desc_ready.next = !self.desc_full.q.val() & !self.reset.val();
        self.take_desc.next = self.desc_valid.val() & self.desc_ready.val();
        self.payload_ready.next = self.load.val() & self.takes_payload.q.val() & !self.reset.val();
        self.take_payload.next = self.payload_valid.val() & self.payload_ready.val();

        // `keep` is a prefix (the input contract above), so masking each byte with its own
        // `keep` bit clears what lies past the end: one gate a bit, where a decode of
        // the eight prefixes put three levels in front of the data registers.
        self.kept_mask.next = 0_u64.into();
        if self.payload_keep.val().get_bit(0) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF_u64;
        }
        if self.payload_keep.val().get_bit(1) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF00_u64;
        }
        if self.payload_keep.val().get_bit(2) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF0000_u64;
        }
        if self.payload_keep.val().get_bit(3) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF000000_u64;
        }
        if self.payload_keep.val().get_bit(4) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF00000000_u64;
        }
        if self.payload_keep.val().get_bit(5) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF0000000000_u64;
        }
        if self.payload_keep.val().get_bit(6) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF000000000000_u64;
        }
        if self.payload_keep.val().get_bit(7) {
            self.kept_mask.next = self.kept_mask.val() | 0xFF00000000000000_u64;
        }
        self.kept.next = self.payload_data.val() & self.kept_mask.val();

        // The header as big-endian numbers, so each field is a plain shift; one byte swap
        // below puts wire byte 0 in bits 7:0.
        match self.index.q.val().index() {
            0 => {
                self.header_be.next = (bit_cast::<64, 48>(self.dst_mac.q.val()) << 16)
                    | bit_cast::<64, 16>(self.src_mac.q.val().get_bits::<16>(32))
            }
            1 => {
                // EtherType 0x0800, version 4 / IHL 5, DSCP/ECN 0.
                self.header_be.next =
                    (bit_cast::<64, 32>(self.src_mac.q.val().get_bits::<32>(0)) << 32) | 0x0800_4500
            }
            2 => {
                // Identification 0, DF, TTL 64, protocol 6.
                self.header_be.next =
                    (bit_cast::<64, 16>(self.total_len.q.val()) << 48) | 0x4000_4006
            }
            3 => {
                // The IPv4 header checksum (zero) first.
                self.header_be.next = (bit_cast::<64, 32>(self.src_ip.q.val()) << 16)
                    | bit_cast::<64, 16>(self.dst_ip.q.val().get_bits::<16>(16))
            }
            4 => {
                self.header_be.next = (bit_cast::<64, 16>(self.dst_ip.q.val().get_bits::<16>(0))
                    << 48)
                    | (bit_cast::<64, 16>(self.src_port.q.val()) << 32)
                    | (bit_cast::<64, 16>(self.dst_port.q.val()) << 16)
                    | bit_cast::<64, 16>(self.seq.q.val().get_bits::<16>(16))
            }
            5 => {
                // Data offset 5 words (7 with the options: 0x70 is 0x50 | 0x20), then the
                // flags byte.
                self.header_be.next = (bit_cast::<64, 16>(self.seq.q.val().get_bits::<16>(0)) << 48)
                    | (bit_cast::<64, 32>(self.ack.q.val()) << 16)
                    | 0x5000
                    | (bit_cast::<64, 1>(self.syn_options.q.val().into()) << 13)
                    | bit_cast::<64, 8>(self.flags.q.val())
            }
            _ => {
                // The window; the TCP checksum and urgent pointer are zero. With the
                // options, their first two bytes (kind 2, length 4) end the beat, where
                // the join puts the payload's first two otherwise.
                self.header_be.next = bit_cast::<64, 16>(self.window.q.val()) << 48;
                if self.syn_options.q.val() {
                    self.header_be.next = self.header_be.val() | 0x0204;
                }
            }
        }
        self.options_tail.next = bit_cast::<48, 8>(self.mss.q.val().get_bits::<8>(8))
            | (bit_cast::<48, 8>(self.mss.q.val().get_bits::<8>(0)) << 8);
        if !self.no_window_scale.q.val() {
            self.options_tail.next = self.options_tail.val()
                | 0x0303_0000
                | (bit_cast::<48, 8>(self.window_shift.q.val()) << 32);
        }
        self.header_beat.next = bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(56))
            | (bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(48)) << 8)
            | (bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(40)) << 16)
            | (bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(32)) << 24)
            | (bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(24)) << 32)
            | (bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(16)) << 40)
            | (bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(8)) << 48)
            | (bit_cast::<64, 8>(self.header_be.val().get_bits::<8>(0)) << 56);

        if self.load.val() {
            self.out_valid.d.next = false;
        }
        if self.out_valid.q.val() & self.out_last.q.val() & self.frame_ready.val() {
            self.built.d.next = self.built.q.val() + 1;
        }
        // The output register's data, keep and last load whenever it moves, with what
        // the phase would put out: a beat that does not go out leaves it not valid, so
        // what it holds then does not matter, and its 70-odd enables wait on `load`
        // alone, not on the payload handshake. (Stalls on the payload input happen
        // only in Join and Body, which put out the payload's beat when it comes.)
        if self.load.val() {
            match self.phase.q.val() {
                TxPhase::Header => {
                    self.out_data.d.next = self.header_beat.val();
                    self.out_keep.d.next = 0xFF_u64.into();
                    self.out_last.d.next = false;
                }
                TxPhase::Join => {
                    self.out_data.d.next = self.header_beat.val();
                    if self.has_payload.q.val() {
                        self.out_data.d.next = self.header_beat.val()
                            | (bit_cast::<64, 16>(self.kept.val().get_bits::<16>(0)) << 48);
                    }
                    self.out_keep.d.next = 0xFF_u64.into();
                    self.out_last.d.next = false;
                }
                TxPhase::Body => {
                    self.out_data.d.next = bit_cast::<64, 48>(self.carry.q.val())
                        | (bit_cast::<64, 16>(self.kept.val().get_bits::<16>(0)) << 48);
                    // 0xFF but on a last beat of 1 byte (0x7F).
                    self.out_keep.d.next = (self.payload_keep.val() << 6) | 0x3F;
                    self.out_last.d.next =
                        self.payload_last.val() & !self.payload_keep.val().get_bit(2);
                }
                TxPhase::Tail => {
                    self.out_data.d.next = bit_cast::<64, 48>(self.carry.q.val());
                    self.out_keep.d.next = self.tail_keep.q.val();
                    self.out_last.d.next = true;
                }
            }
        }
        match self.phase.q.val() {
            TxPhase::Header => {
                if self.load.val() & self.desc_full.q.val() {
                    self.out_valid.d.next = true;
                    self.index.d.next = self.index.q.val() + 1;
                    if (self.index.q.val() == 5) & !self.syn_options.q.val() {
                        self.phase.d.next = TxPhase::Join;
                        self.takes_payload.d.next = self.has_payload.q.val();
                    }
                    // (Both tests take the options flag, so with it tied low this branch
                    // and its registers' inputs are constant and synthesis drops them.)
                    if (self.index.q.val() == 6) & self.syn_options.q.val() {
                        // Beat 6 was the last header beat built from the descriptor; the
                        // options' last 6 bytes are held back as a payload beat's would
                        // be, so the payload joins them in Body, or they end the frame
                        // (62 bytes: no padding).
                        self.carry.d.next = self.options_tail.val();
                        self.tail_keep.d.next = 0x3F_u64.into();
                        self.desc_full.d.next = false;
                        self.index.d.next = 0_u64.into();
                        self.phase.d.next = TxPhase::Tail;
                        self.takes_payload.d.next = self.has_payload.q.val();
                        if self.has_payload.q.val() {
                            self.phase.d.next = TxPhase::Body;
                        }
                    }
                }
            }
            TxPhase::Join => {
                if self.has_payload.q.val() {
                    if self.take_payload.val() {
                        self.out_valid.d.next = true;
                        self.carry.d.next = self.kept.val().get_bits::<48>(16);
                        self.desc_full.d.next = false;
                        self.index.d.next = 0_u64.into();
                        self.phase.d.next = TxPhase::Body;
                        if self.payload_last.val() {
                            // A single payload beat: what it holds past its 2 bytes goes
                            // in beat 7, which is at least 4 bytes (60-byte minimum).
                            self.tail_keep.d.next = (self.payload_keep.val() >> 2) | 0x0F;
                            self.phase.d.next = TxPhase::Tail;
                            self.takes_payload.d.next = false;
                        }
                    }
                } else if self.load.val() {
                    self.out_valid.d.next = true;
                    self.carry.d.next = 0_u64.into();
                    self.tail_keep.d.next = 0x0F_u64.into();
                    self.desc_full.d.next = false;
                    self.index.d.next = 0_u64.into();
                    self.phase.d.next = TxPhase::Tail;
                }
            }
            TxPhase::Body => {
                if self.take_payload.val() {
                    self.out_valid.d.next = true;
                    self.carry.d.next = self.kept.val().get_bits::<48>(16);
                    if self.payload_last.val() {
                        self.takes_payload.d.next = false;
                        if self.payload_keep.val().get_bit(2) {
                            self.tail_keep.d.next = self.payload_keep.val() >> 2;
                            self.phase.d.next = TxPhase::Tail;
                        } else {
                            self.phase.d.next = TxPhase::Header;
                        }
                    }
                }
            }
            TxPhase::Tail => {
                if self.load.val() {
                    self.out_valid.d.next = true;
                    self.phase.d.next = TxPhase::Header;
                }
            }
        }
        if self.take_desc.val() {
            self.desc_full.d.next = true;
            self.src_mac.d.next = self.desc_src_mac.val();
            self.dst_mac.d.next = self.desc_dst_mac.val();
            self.src_ip.d.next = self.desc_src_ip.val();
            self.dst_ip.d.next = self.desc_dst_ip.val();
            self.src_port.d.next = self.desc_src_port.val();
            self.dst_port.d.next = self.desc_dst_port.val();
            self.seq.d.next = self.desc_seq.val();
            self.ack.d.next = self.desc_ack.val();
            self.flags.d.next = self.desc_flags.val();
            self.window.d.next = self.desc_window.val();
            self.syn_options.d.next = self.desc_syn_options.val();
            self.mss.d.next = self.desc_mss.val();
            self.window_shift.d.next = self.desc_window_shift.val();
            self.no_window_scale.d.next = self.desc_no_window_scale.val();
            self.total_len.d.next = self.desc_payload_len.val() + 40;
            if self.desc_syn_options.val() {
                self.total_len.d.next = self.desc_payload_len.val() + 48;
            }
            self.has_payload.d.next = self.desc_payload_len.val().any();
        }
        if self.reset.val() {
            self.phase.d.next = TxPhase::Header;
            self.takes_payload.d.next = false;
            self.index.d.next = 0_u64.into();
            self.desc_full.d.next = false;
            self.out_valid.d.next = false;
            self.built.d.next = 0_u64.into();
        }
        self.frame_data.next = self.out_data.q.val();
        self.frame_keep.next = self.out_keep.q.val();
        self.frame_last.next = self.out_last.q.val();
        self.frame_valid.next = self.out_valid.q.val();
        self.frames_built.next = self.built.q.val();
    }
}
