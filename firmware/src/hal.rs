//! The firmware's view of the NIC: frame queues, host queues, the datapath's flow
//! contexts and counters. A board implements it over MMIO on the soft core's bus; the
//! testbench over a simulation engine; the tests over a script.

use crate::counters::Counters;

/// Largest Ethernet frame (without FCS) the firmware sends or accepts.
pub const MAX_FRAME_LEN: usize = 1518;

/// A TCP connection's addresses as seen from this NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FourTuple {
    pub local_ip: [u8; 4],
    pub local_port: u16,
    pub remote_ip: [u8; 4],
    pub remote_port: u16,
}

/// What the datapath needs to carry a connection in FPDU mode, written by the firmware at
/// the hand-off and read back at close. Sequence numbers are those of the exact byte where
/// FPDU mode begins (`snd_nxt`, `rcv_nxt`); `snd_una` lets the firmware see when the bytes
/// it sent itself (MPA reply, RTR) are acknowledged.
///
/// What the firmware relies on the datapath for, per flow in FPDU mode:
/// - frames with FIN or RST, and every frame while `rtr_expected`, go to the firmware RX
///   queue; a FIN segment's in-order payload is delivered first and `rcv_nxt` advanced;
/// - a segment with data the flow already received is answered with an ACK of `rcv_nxt`
///   (the peer's firmware may be retransmitting its RTR because our ACK was lost);
/// - `snd_una` follows the peer's ACKs.
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
    /// Steer every frame of this flow to the firmware until the peer's RTR has arrived.
    pub rtr_expected: bool,
}

/// Why the datapath stopped carrying a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowEventKind {
    /// An FPDU failed its CRC32c.
    CrcError,
    /// An FPDU's ULPDU_Length ran beyond its segment.
    LengthError,
}

/// A datapath report about one flow; the datapath stops delivering its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowEvent {
    pub index: u16,
    pub kind: FlowEventKind,
}

/// Everything the firmware does to the NIC goes through this trait; time is not here:
/// it is passed to [`crate::Firmware::poll`].
pub trait Hal {
    /// Copy the next frame of the firmware RX queue into `buf`; its length, or `None`.
    fn receive_frame(&mut self, buf: &mut [u8; MAX_FRAME_LEN]) -> Option<usize>;
    /// Queue a frame on the firmware TX queue. A full queue drops it (TCP retransmits).
    fn transmit_frame(&mut self, frame: &[u8]);
    /// Copy the next host command record into `buf`; its length, or `None`.
    fn receive_command(
        &mut self,
        buf: &mut [u8; iwnic_proto::host::MAX_RECORD_LEN],
    ) -> Option<usize>;
    /// Records (completions, events) the host queue can take now. The firmware takes no
    /// input that could produce a record unless there is room, so none is ever lost.
    fn host_space(&self) -> usize;
    /// Queue a completion or event record to the host.
    fn push_record(&mut self, record: &[u8]);
    /// Install or update a flow in the datapath.
    fn write_flow(&mut self, flow: &FlowContext);
    /// The datapath's current view of a flow (sequence numbers advance in FPDU mode).
    fn read_flow(&mut self, index: u16) -> Option<FlowContext>;
    /// Remove a flow from the datapath; its frames reach the firmware again.
    fn remove_flow(&mut self, index: u16);
    /// The next datapath report about a flow.
    fn receive_flow_event(&mut self) -> Option<FlowEvent>;
    /// Expose the firmware's counters in the register window.
    fn publish_counters(&mut self, counters: &Counters);
}
