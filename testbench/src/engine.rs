//! The datapath behind one interface, whoever implements it: the behavioural model
//! ([`crate::model`]), and later the Verilated and RustHDL builds of `nic_top`. A NIC is
//! an engine plus its firmware and its host endpoint ([`crate::nic`]).
//!
//! Ports, as DESIGN.md draws them: the network (frames in and out), the firmware port
//! (its RX and TX queues of descriptors with frames and segments, the flow-context
//! register window, datapath reports) and
//! the host port (ULPDUs tagged with a connection index, both ways).

use iwnic_firmware::{FlowContext, FlowEvent, FlowTableFull, FlowWrite};
use iwnic_proto::net::TxDescriptor;

/// A segment as the firmware queues it for [`Engine::firmware_transmit`]: its descriptor's
/// bytes, then the payload.
pub fn firmware_tx_packet(descriptor: &TxDescriptor, payload: &[u8]) -> Vec<u8> {
    let mut packet = descriptor.to_bytes().to_vec();
    packet.extend_from_slice(payload);
    packet
}

/// Datapath counters, read through the register window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatapathCounters {
    pub frames_in: u64,
    pub frames_out: u64,
    /// Dropped by the parser: bad IPv4 or TCP checksum.
    pub bad_checksum: u64,
    /// Dropped by the parser: malformed, not TCP, or not addressed to this NIC.
    pub not_for_us: u64,
    pub to_firmware: u64,
    /// Segments of offloaded flows beyond `rcv_nxt` (dropped, duplicate ACK sent).
    pub out_of_order: u64,
    /// Segments entirely below `rcv_nxt`, with payload or without (a keepalive probe): answered
    /// with an ACK, unless they carry FIN (then they go to the firmware).
    pub duplicates: u64,
    pub acks_sent: u64,
    pub fpdus_in: u64,
    pub fpdus_out: u64,
    pub crc_errors: u64,
    pub length_errors: u64,
    /// RTRs the datapath took itself (`FlowContext::take_rtr`).
    pub rtr_taken: u64,
    /// Flow writes whose tuple found its flow-table bucket full.
    pub flow_table_full: u64,
    /// ULPDUs from the host for no flow in FPDU mode, or too long for one segment.
    pub host_ulpdus_refused: u64,
    /// Firmware TX packets too short for their descriptor, or with payload under a
    /// payload length of 0 (the model: every packet it cannot build a frame from).
    pub firmware_segments_dropped: u64,
}

/// One NIC's datapath.
pub trait Engine: Send {
    /// Let `cycles` clock cycles pass.
    fn step(&mut self, cycles: u64);

    /// A frame arrives from the network.
    fn net_receive(&mut self, frame: &[u8]);
    /// The next frame leaving for the network.
    fn net_transmit(&mut self) -> Option<Vec<u8>>;

    /// The next frame steered to the firmware, behind its `RxDescriptor` (32 bytes).
    fn firmware_receive(&mut self) -> Option<Vec<u8>>;
    /// A segment from the firmware: its `TxDescriptor` (40 bytes) and payload, from
    /// which the datapath builds the frame and fills its checksums.
    fn firmware_transmit(&mut self, packet: &[u8]);
    /// Install or update a flow; with [`FlowWrite::InstallAndAcknowledge`], then send an
    /// ACK of its `rcv_nxt` from it. [`FlowTableFull`] when the flow's tuple found its
    /// flow-table bucket full ([`iwnic_firmware::Nic::write_flow`]).
    fn write_flow(&mut self, flow: &FlowContext, write: FlowWrite) -> Result<(), FlowTableFull>;
    fn read_flow(&mut self, index: u16) -> Option<FlowContext>;
    fn remove_flow(&mut self, index: u16);
    fn flow_event(&mut self) -> Option<FlowEvent>;

    /// A ULPDU from the host for connection `index`. One the datapath cannot send (no
    /// flow in FPDU mode, a failed flow, an FPDU beyond the MSS towards the peer) is
    /// dropped and counted (`host_ulpdus_refused`): `nic_top` decides that when the ULPDU
    /// reaches its controller, after this returns, so there is no answer here.
    fn host_transmit(&mut self, index: u16, ulpdu: &[u8]);
    /// The next ULPDU received for the host.
    fn host_receive(&mut self) -> Option<(u16, Vec<u8>)>;

    fn counters(&self) -> DatapathCounters;
}
