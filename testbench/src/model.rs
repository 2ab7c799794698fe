//! The behavioural model of the datapath: what the HDL does, written to be obviously
//! right rather than fast. It is the reference the Verilated `nic_top` will be held to.
//!
//! - Parse: Ethernet II / IPv4 / TCP with both checksums verified, as `tcp_rx` does
//!   ([`RxDescriptor::parse`]); anything else, or a frame over 1,518 bytes, is dropped
//!   and counted. Flag combinations, zero ports and TCP options are not judged here,
//!   only by the firmware in the frames it gets: a flow's data segment with SYN and FIN
//!   goes whole to the firmware (for its SYN), which ignores it.
//! - Flow table: a 4-tuple goes into its bucket of `SimNicTop`'s table (the same hash, 4
//!   ways each); a write whose tuple finds its bucket full writes the context but fails,
//!   and the flow's frames go to the firmware. Contexts exist for `SimNicTop`'s indices
//!   (below 2^`SIM_INDEX_BITS`): a write beyond them fails with neither context nor ACK.
//!   A tuple keeps its way until it is removed, even when its index is written over by
//!   another tuple (as in `SimNicTop`): its frames then reach that index's flow, or the
//!   firmware once there is none.
//! - Steer: frames of flows not in FPDU mode, frames carrying RST or SYN or without ACK
//!   (whole, their payload undelivered), frames carrying FIN, and every frame of a flow
//!   still expecting its RTR go to the firmware; in-order payload of offloaded flows goes
//!   to MPA receive. A FIN segment's payload is delivered first.
//! - MPA receive: FPDUs delineated per flow across segments ([`Splitter`]), CRC32c checked;
//!   an FPDU must end with its segment, whatever the flow's MSS (the MSS towards the
//!   peer, which bounds only what the flow sends); the ULPDU limit is `nic_top`'s
//!   `MAX_RX_ULPDU_LEN`, the largest ULPDU a received segment can hold. A CRC or length
//!   error stops the flow and is reported to the firmware.
//! - TCP: `snd_una` follows the peer's ACKs; each data segment is acknowledged at once;
//!   a segment below `rcv_nxt` gets an ACK (one without payload too: a keepalive probe),
//!   one above it is dropped with a duplicate ACK;
//!   a flow write may ask for an ACK of the written `rcv_nxt` (the end of a hand-off).
//!   No retransmission of offloaded data yet (a later milestone of the HDL too).
//! - MPA and TCP transmit: one FPDU per segment from each host ULPDU.
//! - Firmware frames leave with their checksums filled in (the firmware runs with
//!   checksum offload, as on the board).

use std::collections::{BTreeMap, HashMap, VecDeque};

use iwnic_firmware::{
    FlowContext, FlowEvent, FlowEventKind, FlowTableFull, FlowWrite, FourTuple, MAX_FRAME_LEN,
};
use iwnic_hdl::flow_table::{self, WAYS};
use iwnic_hdl::nic_top::{MAX_RX_ULPDU_LEN, SIM_INDEX_BITS, SIM_SET_BITS};
use iwnic_proto::fpdu::{fpdu_len, FpduRepr, SplitEvent, Splitter};
use iwnic_proto::net::{self, Checksums, FrameError, RxDescriptor, SegmentOut, TxDescriptor};
use iwnic_proto::smoltcp_wire::TcpControl;

use crate::engine::{DatapathCounters, Engine};

/// A flow in FPDU mode.
struct Flow {
    ctx: FlowContext,
    splitter: Splitter,
    /// The ULPDU being received.
    ulpdu: Vec<u8>,
    /// A CRC or length error stopped it.
    failed: bool,
}

/// The datapath of one NIC, modelled.
pub struct ModelDatapath {
    ip: [u8; 4],
    flows: BTreeMap<u16, Flow>,
    /// The flow table: tuple to index.
    by_tuple: HashMap<FourTuple, u16>,
    to_network: VecDeque<Vec<u8>>,
    to_firmware: VecDeque<Vec<u8>>,
    to_host: VecDeque<(u16, Vec<u8>)>,
    events: VecDeque<FlowEvent>,
    counters: DatapathCounters,
}

/// The tuple's bucket in `SimNicTop`'s flow table.
pub fn flow_table_bucket(tuple: &FourTuple) -> usize {
    let packed = flow_table::pack(
        u32::from_be_bytes(tuple.local_ip),
        tuple.local_port,
        u32::from_be_bytes(tuple.remote_ip),
        tuple.remote_port,
    );
    flow_table::hash(packed, SIM_SET_BITS)
}

fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

impl ModelDatapath {
    pub fn new(ip: [u8; 4]) -> ModelDatapath {
        ModelDatapath {
            ip,
            flows: BTreeMap::new(),
            by_tuple: HashMap::new(),
            to_network: VecDeque::new(),
            to_firmware: VecDeque::new(),
            to_host: VecDeque::new(),
            events: VecDeque::new(),
            counters: DatapathCounters::default(),
        }
    }

    /// Map `tuple` to `index` in the flow table: its way when the table holds it, else a
    /// free way of its bucket.
    fn insert_tuple(&mut self, tuple: FourTuple, index: u16) -> Result<(), FlowTableFull> {
        if !self.by_tuple.contains_key(&tuple) {
            let bucket = flow_table_bucket(&tuple);
            let fill = (self.by_tuple.keys())
                .filter(|held| flow_table_bucket(held) == bucket)
                .count();
            if fill == WAYS {
                self.counters.flow_table_full += 1;
                return Err(FlowTableFull);
            }
        }
        self.by_tuple.insert(tuple, index);
        Ok(())
    }

    fn send(&mut self, frame: Vec<u8>) {
        self.counters.frames_out += 1;
        self.to_network.push_back(frame);
    }

    /// Queue a frame the parser accepted for the firmware, behind its descriptor.
    fn steer_to_firmware(&mut self, frame: &[u8]) {
        let Ok(descriptor) = RxDescriptor::of_frame(frame) else {
            return; // not reached: the frame parsed with its checksums checked
        };
        self.counters.to_firmware += 1;
        let mut packet = descriptor.to_bytes().to_vec();
        packet.extend_from_slice(frame);
        self.to_firmware.push_back(packet);
    }

    /// A segment of flow `index` from its current sequence numbers.
    fn segment(ctx: &FlowContext, control: TcpControl) -> SegmentOut {
        SegmentOut {
            src_mac: ctx.local_mac,
            dst_mac: ctx.remote_mac,
            src_ip: ctx.tuple.local_ip,
            dst_ip: ctx.tuple.remote_ip,
            src_port: ctx.tuple.local_port,
            dst_port: ctx.tuple.remote_port,
            control,
            seq: ctx.snd_nxt,
            ack: Some(ctx.rcv_nxt),
            window: u16::MAX,
            syn_options: None,
        }
    }

    fn ack(&mut self, index: u16) {
        let Some(flow) = self.flows.get(&index) else {
            return;
        };
        let ack = Self::segment(&flow.ctx, TcpControl::None);
        let mut frame = vec![0u8; ack.buffer_len(0)];
        if ack.emit(&[], &mut frame, Checksums::Software).is_ok() {
            self.counters.acks_sent += 1;
            self.send(frame);
        }
    }

    /// In-order payload of flow `index` through MPA receive.
    fn deliver(&mut self, index: u16, payload: &[u8]) {
        let Some(flow) = self.flows.get_mut(&index) else {
            return;
        };
        flow.ctx.rcv_nxt = flow.ctx.rcv_nxt.wrapping_add(payload.len() as u32);
        if flow.failed {
            return;
        }
        let (ulpdu, to_host, counters) = (&mut flow.ulpdu, &mut self.to_host, &mut self.counters);
        let result = flow.splitter.push(payload, |event| match event {
            SplitEvent::Start { .. } => ulpdu.clear(),
            SplitEvent::Data(bytes) => ulpdu.extend_from_slice(bytes),
            SplitEvent::End => {
                counters.fpdus_in += 1;
                to_host.push_back((index, std::mem::take(ulpdu)));
            }
        });
        // FPDUs start and end with segments (spec/mpa.md): one left open is a length error.
        let kind = match result {
            Err(iwnic_proto::Error::BadCrc { .. }) => {
                self.counters.crc_errors += 1;
                FlowEventKind::CrcError
            }
            Ok(()) if flow.splitter.at_boundary() => return,
            _ => {
                self.counters.length_errors += 1;
                FlowEventKind::LengthError
            }
        };
        flow.failed = true;
        self.events.push_back(FlowEvent { index, kind });
    }
}

impl Engine for ModelDatapath {
    fn step(&mut self, _cycles: u64) {
        // The model does its work as frames arrive; time moves nothing in it.
    }

    fn net_receive(&mut self, frame: &[u8]) {
        self.counters.frames_in += 1;
        // The parser's own limit, checked before anything else.
        if frame.len() > MAX_FRAME_LEN {
            self.counters.not_for_us += 1;
            return;
        }
        // What `tcp_rx` checks and hands on: flag combinations, zero ports and options
        // are the firmware's to judge, in the frames it gets.
        let (seg, payload) = match RxDescriptor::parse(frame) {
            Ok((seg, payload)) if seg.dst_ip == self.ip => (seg, payload),
            Err(FrameError::BadChecksum) => {
                self.counters.bad_checksum += 1;
                return;
            }
            _ => {
                self.counters.not_for_us += 1;
                return;
            }
        };
        let tuple = FourTuple {
            local_ip: seg.dst_ip,
            local_port: seg.dst_port,
            remote_ip: seg.src_ip,
            remote_port: seg.src_port,
        };
        let Some(&index) = self.by_tuple.get(&tuple) else {
            return self.steer_to_firmware(frame);
        };
        // A tuple whose index was written over by another and then removed.
        let Some(flow) = self.flows.get_mut(&index) else {
            return self.steer_to_firmware(frame);
        };
        if let Some(rtr) = flow.ctx.take_rtr(&seg, payload) {
            self.counters.rtr_taken += 1;
            self.ack(index);
            let kind = FlowEventKind::RtrTaken(rtr);
            self.events.push_back(FlowEvent { index, kind });
            return;
        }
        // RST, SYN and segments without ACK are the firmware's, whole (RFC 9293
        // §3.10.7.4, RFC 5961).
        if flow.ctx.rtr_expected
            || seg.flags & (net::RST | net::SYN) != 0
            || seg.flags & net::ACK == 0
        {
            return self.steer_to_firmware(frame);
        }
        let ctx = &mut flow.ctx;
        if seq_diff(seg.ack, ctx.snd_una) > 0 && seq_diff(seg.ack, ctx.snd_nxt) <= 0 {
            ctx.snd_una = seg.ack;
        }
        ctx.peer_window = seg.window;
        let offset = seq_diff(seg.seq, ctx.rcv_nxt);
        // Entirely below `rcv_nxt`: payload the flow has, or none (a keepalive probe at
        // `rcv_nxt` - 1, an old ACK: not acceptable, RFC 9293 §3.10.7.4). Either gets an
        // ACK, or a peer's keepalive gives the connection up; a bare FIN is the
        // firmware's (below).
        let duplicate =
            offset < 0 && seq_diff(seg.seq.wrapping_add(payload.len() as u32), ctx.rcv_nxt) <= 0;
        if duplicate {
            self.counters.duplicates += 1;
        }
        if !payload.is_empty() {
            if offset == 0 {
                self.deliver(index, payload);
            } else if !duplicate {
                self.counters.out_of_order += 1;
                self.ack(index);
                return;
            }
            self.ack(index);
        } else if duplicate && seg.flags & net::FIN == 0 {
            self.ack(index);
        }
        if seg.flags & net::FIN != 0 {
            self.steer_to_firmware(frame);
        }
    }

    fn net_transmit(&mut self) -> Option<Vec<u8>> {
        self.to_network.pop_front()
    }

    fn firmware_receive(&mut self) -> Option<Vec<u8>> {
        self.to_firmware.pop_front()
    }

    /// The frame `TxDescriptor::frame` builds. A packet the firmware never writes
    /// (shorter than a descriptor, a payload length that disagrees, flags no segment
    /// has) is dropped and counted. `nic_top` agrees on packets of at most four beats
    /// (32 bytes); on the others it builds what their beats give (its own tests cover
    /// those), so the suites hold it to the model only there and on well-formed packets.
    fn firmware_transmit(&mut self, packet: &[u8]) {
        let mut frame = vec![0; MAX_FRAME_LEN];
        let built = TxDescriptor::split_packet(packet).and_then(|(descriptor, payload)| {
            descriptor
                .frame(payload, &mut frame, Checksums::Software)
                .ok()
        });
        match built {
            Some(len) => {
                frame.truncate(len);
                self.send(frame);
            }
            None => self.counters.firmware_segments_dropped += 1,
        }
    }

    fn write_flow(&mut self, ctx: &FlowContext, write: FlowWrite) -> Result<(), FlowTableFull> {
        // No context there: no write, no ACK, as `nic_top`'s status low.
        if usize::from(ctx.index) >> SIM_INDEX_BITS != 0 {
            return Err(FlowTableFull);
        }
        match self.flows.get_mut(&ctx.index) {
            // A rewrite (the RTR arrived) keeps the receive state: its failure (FPDUs end
            // with their segments, so the splitter is at a boundary).
            Some(flow) if flow.ctx.tuple == ctx.tuple => flow.ctx = *ctx,
            _ => {
                self.flows.insert(
                    ctx.index,
                    Flow {
                        ctx: *ctx,
                        // The receive side's ULPDU limit is `nic_top`'s, the same for
                        // every flow: not from the context's MSS, the MSS towards the
                        // peer, which bounds only what the flow sends.
                        splitter: Splitter::new(MAX_RX_ULPDU_LEN),
                        ulpdu: Vec::new(),
                        failed: false,
                    },
                );
            }
        }
        let installed = self.insert_tuple(ctx.tuple, ctx.index);
        if write == FlowWrite::InstallAndAcknowledge {
            self.ack(ctx.index);
        }
        installed
    }

    fn read_flow(&mut self, index: u16) -> Option<FlowContext> {
        self.flows.get(&index).map(|f| f.ctx)
    }

    fn remove_flow(&mut self, index: u16) {
        if let Some(flow) = self.flows.remove(&index) {
            self.by_tuple.remove(&flow.ctx.tuple);
        }
    }

    fn flow_event(&mut self) -> Option<FlowEvent> {
        self.events.pop_front()
    }

    fn host_transmit(&mut self, index: u16, ulpdu: &[u8]) {
        let Some(flow) = self.flows.get_mut(&index) else {
            self.counters.host_ulpdus_refused += 1;
            return;
        };
        let len = fpdu_len(ulpdu.len());
        if flow.ctx.rtr_expected || flow.failed || len > usize::from(flow.ctx.mss) {
            self.counters.host_ulpdus_refused += 1;
            return;
        }
        let mut fpdu = vec![0u8; len];
        if (FpduRepr { ulpdu }).emit(&mut fpdu).is_err() {
            self.counters.host_ulpdus_refused += 1;
            return;
        }
        let segment = Self::segment(&flow.ctx, TcpControl::Psh);
        flow.ctx.snd_nxt = flow.ctx.snd_nxt.wrapping_add(len as u32);
        let mut frame = vec![0u8; segment.buffer_len(len)];
        if segment
            .emit(&fpdu, &mut frame, Checksums::Software)
            .is_err()
        {
            return;
        }
        self.counters.fpdus_out += 1;
        self.send(frame);
    }

    fn host_receive(&mut self) -> Option<(u16, Vec<u8>)> {
        self.to_host.pop_front()
    }

    fn counters(&self) -> DatapathCounters {
        self.counters
    }
}
