//! The firmware's view of the NIC: frame queues, host queues, the datapath's flow
//! contexts and counters. A board implements it over MMIO on the soft core's bus; the
//! testbench over a simulation engine; the tests over a script.

use core::hash::{Hash, Hasher};

use iwnic_proto::ddp::MessageRepr;
use iwnic_proto::host::RecordBuffer;
use iwnic_proto::mpa::RtrTypes;
use iwnic_proto::net::{self, RxDescriptor, TxDescriptor};

use crate::counters::Counters;

/// Largest Ethernet frame (without FCS) the firmware sends or accepts.
pub const MAX_FRAME_LEN: usize = 1518;

/// Largest TCP payload of a segment the firmware sends: what a largest frame holds
/// behind headers with the SYN options (62 bytes).
pub const MAX_TX_PAYLOAD: usize = MAX_FRAME_LEN - 62;

/// One segment to send, as a firmware TX queue slot holds it: the descriptor the
/// datapath builds the frame's headers from, then the payload, word-aligned (on the
/// board, the slot in the soft core's memory; on a little-endian core the descriptor
/// struct is its queue layout, so it is written field by field in place).
#[derive(Debug, Clone)]
#[repr(C, align(4))]
pub struct TxSlot {
    pub descriptor: TxDescriptor,
    pub payload: [u8; MAX_TX_PAYLOAD],
}

impl Default for TxSlot {
    fn default() -> Self {
        TxSlot::ZERO
    }
}

impl TxSlot {
    pub const ZERO: TxSlot = TxSlot {
        descriptor: TxDescriptor::ZERO,
        payload: [0; MAX_TX_PAYLOAD],
    };

    /// The payload the descriptor says it carries (all of the slot's at most).
    pub fn payload(&self) -> &[u8] {
        let len = usize::from(self.descriptor.payload_len).min(MAX_TX_PAYLOAD);
        &self.payload[..len]
    }
}

/// A TCP connection's addresses as seen from this NIC. Word-aligned, addresses first:
/// three words to hash and compare for every frame the firmware takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(4))]
pub struct FourTuple {
    pub local_ip: [u8; 4],
    pub remote_ip: [u8; 4],
    pub local_port: u16,
    pub remote_port: u16,
}

/// Whether `ip` can be a TCP peer of a NIC at `own`: a unicast address that is not ours
/// (RFC 1122 §3.2.1.3, §4.2.3.10), as Linux has it: not 0.0.0.0, loopback 127/8,
/// multicast 224/4 or the limited broadcast. (Linux numbers hosts in the rest of 0/8 and
/// in 240/4, which RFC 1122 reserves.) A subnet's broadcast address would need a
/// netmask, which the firmware is not given.
pub(crate) fn is_peer_address(ip: [u8; 4], own: [u8; 4]) -> bool {
    !matches!(
        ip,
        [0, 0, 0, 0] | [127, ..] | [224..=239, ..] | [255, 255, 255, 255]
    ) && ip != own
}

impl FourTuple {
    /// The connection a received segment belongs to, seen from this NIC.
    pub fn of_received(segment: &RxDescriptor) -> FourTuple {
        FourTuple {
            local_ip: segment.dst_ip,
            remote_ip: segment.src_ip,
            local_port: segment.dst_port,
            remote_port: segment.src_port,
        }
    }

    /// The tuple as three words: the addresses, then both ports.
    pub(crate) fn words(&self) -> [u32; 3] {
        [
            u32::from_le_bytes(self.local_ip),
            u32::from_le_bytes(self.remote_ip),
            u32::from(self.local_port) << 16 | u32::from(self.remote_port),
        ]
    }
}

/// Three words, not twelve bytes and two length prefixes as derived.
impl Hash for FourTuple {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.words().iter().for_each(|&w| state.write_u32(w));
    }
}

/// The hash of the firmware's initial sequence numbers (RFC 6528, seeded with a secret):
/// a multiply per word and a murmur3 finish, so every bit of the tuple reaches every bit
/// of the sequence number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WordHasher(pub u32);

impl Hasher for WordHasher {
    fn write_u32(&mut self, word: u32) {
        self.0 = (self.0 ^ word).wrapping_mul(0x9E37_79B1).rotate_left(13);
    }
    fn write(&mut self, bytes: &[u8]) {
        bytes.iter().for_each(|&b| self.write_u32(u32::from(b)));
    }
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 16;
        h = h.wrapping_mul(0x85EB_CA6B);
        h ^= h >> 13;
        h = h.wrapping_mul(0xC2B2_AE35);
        u64::from(h ^ (h >> 16))
    }
}

/// What the datapath needs to carry a connection in FPDU mode, written by the firmware at
/// the hand-off and read back at close. Sequence numbers are those of the exact byte where
/// FPDU mode begins (`snd_nxt`, `rcv_nxt`); `snd_una` lets the firmware see when the bytes
/// it sent itself (MPA reply, RTR) are acknowledged.
///
/// What the firmware relies on the datapath for, per flow in FPDU mode:
/// - while `rtr_expected`, a segment that is the peer's RTR byte for byte as iwnic sends
///   it ([`FlowContext::take_rtr`]) is taken by the datapath: it acknowledges it,
///   moves `rcv_nxt` past it, clears `rtr_expected` and reports
///   [`FlowEventKind::RtrTaken`]; every other frame of the flow goes to the firmware RX
///   queue until then;
/// - frames with FIN, RST or SYN or without ACK go to the firmware RX queue; a FIN
///   segment's in-order payload is delivered first and `rcv_nxt` advanced (not one with
///   RST or SYN or without ACK: the firmware takes those whole, RFC 9293 §3.10.7.4,
///   RFC 5961); a FIN segment with payload out of order (beyond `rcv_nxt`, or only
///   partly below it) is dropped with a duplicate ACK like any segment out of order, and
///   the peer sends it again;
/// - a segment with data the flow already received is answered with an ACK of `rcv_nxt`
///   (the peer's firmware may be retransmitting its RTR because our ACK was lost);
/// - `snd_una` follows the peer's ACKs;
/// - a write with [`FlowWrite::InstallAndAcknowledge`] is followed by an ACK of the
///   written `rcv_nxt` at its `snd_nxt` (sent even when the 4-tuple found no room in the
///   flow table; a connection index beyond the datapath's contexts gets neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowContext {
    /// Connection index: the tag of this flow's ULPDUs on the host streams.
    pub index: u16,
    pub tuple: FourTuple,
    pub local_mac: [u8; 6],
    pub remote_mac: [u8; 6],
    pub snd_una: u32,
    pub snd_nxt: u32,
    pub rcv_nxt: u32,
    /// Peer's receive window, unscaled, and its window scale shift.
    pub peer_window: u16,
    pub peer_window_shift: u8,
    /// Our window scale shift (the datapath scales the window it advertises).
    pub local_window_shift: u8,
    /// Largest TCP payload per segment towards the peer.
    pub mss: u16,
    /// FPDU CRC32c checked and generated (always on in iwnic).
    pub crc: bool,
    /// The peer's RTR has not arrived: the datapath takes it if it comes as iwnic sends
    /// it, and steers every other frame of the flow to the firmware.
    pub rtr_expected: bool,
}

impl FlowContext {
    /// What the datapath does with a segment of this flow that may be the peer's RTR
    /// (`segment` its parsed header, `payload` its TCP payload): it takes it, and this
    /// returns its type, when the flow expects its RTR, the segment carries ACK and none
    /// of RST, SYN and FIN, starts at `rcv_nxt`, acknowledges everything up to `snd_nxt`
    /// (the MPA reply), and its payload is exactly one RTR FPDU as
    /// [`MessageRepr::rtr_fpdu`] has it. The context is then left as the datapath leaves
    /// it: `rcv_nxt` past the RTR, `snd_una` at the ACK, the peer's window, RTR no longer
    /// expected. The datapath acknowledges the RTR and reports
    /// [`FlowEventKind::RtrTaken`]. `None`, and the context untouched, otherwise.
    ///
    /// Why the datapath: judging the RTR in the firmware cost a setup about 475 of its
    /// 3,300 instructions (the frame's path, the compare, the flow rewritten); the
    /// datapath compares the payload as it is written to its buffer. It takes any of
    /// the three types and the firmware checks it against the agreed one. Any other
    /// bytes (another stack's RTR, an RTR split or followed by data) go to the firmware,
    /// which judges them in full. The reference of `nic_top`'s behaviour.
    pub fn take_rtr(&mut self, segment: &RxDescriptor, payload: &[u8]) -> Option<RtrTypes> {
        let flags = segment.flags & (net::ACK | net::RST | net::SYN | net::FIN);
        if !self.rtr_expected
            || flags != net::ACK
            || segment.seq != self.rcv_nxt
            || segment.ack != self.snd_nxt
        {
            return None;
        }
        let rtr = RtrTypes::EACH
            .into_iter()
            .find(|&rtr| MessageRepr::rtr_fpdu(rtr) == Some(payload))?;
        self.rtr_expected = false;
        self.rcv_nxt = self.rcv_nxt.wrapping_add(payload.len() as u32);
        self.snd_una = segment.ack;
        self.peer_window = segment.window;
        Some(rtr)
    }
}

/// What a flow write asks of the datapath.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowWrite {
    /// Install or update the flow.
    Install,
    /// Install or update it, then send an ACK of its `rcv_nxt` at its `snd_nxt`, as the
    /// datapath acknowledges the flow's data (window 65535 unscaled, like all its ACKs,
    /// whatever [`crate::Config::window`] says): the ACK that ends the hand-off (of the
    /// responder's RTR, or the initiator's reply), without the firmware building it.
    InstallAndAcknowledge,
}

/// The datapath could not carry a flow: its 4-tuple's flow-table bucket holds other
/// tuples in every way (the table is a hash of fixed buckets, so this can happen well
/// before it is full).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowTableFull;

/// Why the datapath stopped carrying a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowEventKind {
    /// An FPDU failed its CRC32c.
    CrcError,
    /// An FPDU's ULPDU_Length ran beyond its segment.
    LengthError,
    /// The datapath took the peer's RTR, an FPDU of this type (see
    /// [`FlowContext::take_rtr`]): it acknowledged it and carries the flow in FPDU
    /// mode from the byte after it.
    RtrTaken(RtrTypes),
}

/// A datapath report about one flow. After an MPA error the datapath stops delivering
/// the flow's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowEvent {
    pub index: u16,
    pub kind: FlowEventKind,
}

/// Everything the firmware reaches the NIC through: its two input queues (frames from
/// the datapath, commands from the host), read in place, and the [`Nic`] it acts on.
/// Time is not here: it is passed to [`crate::Firmware::poll`].
///
/// An input stays at the head of its queue while the firmware handles it and is popped
/// after, so nothing is copied on the way in (on the board the queues are memory the soft
/// core reads; the firmware touches only the bytes it looks at). The head comes with the
/// rest of the NIC beside it, since handling an input acts on the NIC while reading it.
pub trait Hal {
    /// The NIC without its input queues.
    type Nic: Nic;
    fn nic(&mut self) -> &mut Self::Nic;
    /// The frame at the head of the firmware RX queue, in place, after the descriptor
    /// the datapath's parser wrote ahead of it, and the NIC. The firmware reads at most
    /// [`MAX_FRAME_LEN`] bytes of the frame.
    fn next_frame(&mut self) -> (Option<(&RxDescriptor, &[u8])>, &mut Self::Nic);
    /// Free the head frame's slot.
    fn pop_frame(&mut self);
    /// The host command at the head of its queue, in place (its slot and length), and
    /// the NIC.
    fn next_command(&mut self) -> (Option<(&RecordBuffer, usize)>, &mut Self::Nic);
    /// Free the head command's slot.
    fn pop_command(&mut self);
}

/// What the firmware does to the NIC: build frames and host records in place in its
/// output queues, install and read the datapath's flow contexts, take the datapath's
/// reports, publish counters.
pub trait Nic {
    /// Where the next segment for the firmware TX queue is written: the firmware fills
    /// it in place (on the board, the queue's free slot in the soft core's memory), so
    /// nothing is copied on its way out; the datapath builds the frame.
    fn transmit_slot(&mut self) -> &mut TxSlot;
    /// Queue the segment of [`Nic::transmit_slot`] on the firmware TX queue. A full
    /// queue drops it (TCP retransmits).
    fn transmit_segment(&mut self);
    /// Records (completions, events) the host queue can take now. The firmware takes no
    /// input that could produce a record unless there is room, so none is ever lost.
    fn host_space(&self) -> usize;
    /// Where the next record for the host queue is built, in place as a segment is in
    /// [`Nic::transmit_slot`]: [`iwnic_proto::host::MAX_RECORD_LEN`] bytes on a word
    /// boundary, as the queue's slots are.
    fn record_buffer(&mut self) -> &mut RecordBuffer;
    /// Queue the first `len` bytes of [`Nic::record_buffer`], a completion or an event,
    /// to the host.
    fn push_record(&mut self, len: usize);
    /// Install or update a flow in the datapath, and acknowledge as `write` says (the ACK
    /// goes either way). [`FlowTableFull`] when the flow's 4-tuple found its flow-table
    /// bucket full of other tuples: the context is written (read and remove it as any
    /// other), but the datapath does not steer the flow's frames to it. Updating a flow
    /// whose tuple is in the table never fails.
    fn write_flow(&mut self, flow: &FlowContext, write: FlowWrite) -> Result<(), FlowTableFull>;
    /// The datapath's current view of a flow (sequence numbers advance in FPDU mode).
    fn read_flow(&mut self, index: u16) -> Option<FlowContext>;
    /// Remove a flow from the datapath; its frames reach the firmware again.
    fn remove_flow(&mut self, index: u16);
    /// The next datapath report about a flow.
    fn receive_flow_event(&mut self) -> Option<FlowEvent>;
    /// Expose the firmware's counters in the register window.
    fn publish_counters(&mut self, counters: &Counters);
}
