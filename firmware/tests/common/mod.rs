//! Fixtures of the firmware tests: a scripted `Hal` (frames, commands, records, flows and
//! time all in the test's hands), a scripted TCP peer, and MPA frame builders.
#![allow(dead_code)] // each test file uses its own part of the fixtures

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use iwnic_firmware::{
    Config, Counters, Firmware, FlowContext, FlowEvent, FlowEventKind, FlowTableFull, FlowWrite,
    FourTuple, Hal, Nic, TxSlot,
};
use iwnic_proto::ddp::{Body, MessageRepr};
use iwnic_proto::fpdu::FpduRepr;
use iwnic_proto::host::{
    Command, CommandRecord, Completion, Endpoint, EventKind, Record, RecordBuffer, MAX_RECORD_LEN,
};
use iwnic_proto::mpa::{FrameKind, FrameRepr, RtrTypes, V2Block};
use iwnic_proto::net::{Checksums, RxDescriptor, SegmentOut, TcpFrameRepr, DEFAULT_TTL};
use iwnic_proto::smoltcp_wire::{EthernetAddress, Ipv4Address, TcpControl, TcpRepr, TcpSeqNumber};
use smoltcp::time::Instant;

pub const NIC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const NIC_IP: [u8; 4] = [10, 0, 0, 1];
pub const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
pub const PEER_IP: [u8; 4] = [10, 0, 0, 2];
pub const PORT: u16 = 4791;

pub type Fw = Firmware<64, 8>;

pub fn config() -> Config {
    Config {
        mac: NIC_MAC,
        ip: NIC_IP,
        next_hop_mac: PEER_MAC,
        ..Config::default()
    }
}

/// The NIC around the firmware, as a script drives it: input queues the script fills,
/// and (through `Deref`) the [`ScriptedNic`] the firmware acts on.
#[derive(Default)]
pub struct ScriptedHal {
    /// The firmware RX queue: frames with the descriptor the datapath wrote.
    pub rx: VecDeque<(RxDescriptor, Vec<u8>)>,
    /// Frames the datapath's parser dropped before the queue (malformed, not TCP, a
    /// checksum wrong).
    pub parser_drops: usize,
    pub commands: VecDeque<Vec<u8>>,
    /// The head command, in a record slot as the firmware reads it in place.
    command_slot: Box<RecordBuffer>,
    command_len: Option<usize>,
    pub nic: ScriptedNic,
}

impl ScriptedHal {
    /// A NIC whose host queue takes `host_room` records before the host drains it.
    pub fn with_host_room(host_room: usize) -> ScriptedHal {
        let mut hal = ScriptedHal::default();
        hal.nic.host_room = host_room;
        hal
    }

    /// A frame from the network that the datapath steers to the firmware: its parser
    /// writes the descriptor, or drops the frame.
    pub fn receive(&mut self, frame: Vec<u8>) {
        match RxDescriptor::of_frame(&frame) {
            Ok(descriptor) => self.rx.push_back((descriptor, frame)),
            Err(_) => self.parser_drops += 1,
        }
    }

    /// A frame from the network as the datapath treats a flow that expects its RTR: an
    /// RTR it takes ([`FlowContext::take_rtr`]) is acknowledged and reported; any other
    /// frame is steered to the firmware as [`ScriptedHal::receive`] has it.
    pub fn arrive(&mut self, frame: Vec<u8>) {
        if let Ok((descriptor, payload)) = RxDescriptor::parse(&frame) {
            let tuple = FourTuple::of_received(&descriptor);
            let unsteered = &self.nic.unsteered;
            let flow = (self.nic.flows.iter_mut())
                .find(|(index, f)| f.tuple == tuple && !unsteered.contains(index))
                .map(|(_, f)| f);
            if let Some(flow) = flow {
                if let Some(rtr) = flow.take_rtr(&descriptor, payload) {
                    let (index, ack) = (flow.index, datapath_ack(flow));
                    self.nic.tx.push(ack);
                    let kind = FlowEventKind::RtrTaken(rtr);
                    self.nic.flow_events.push_back(FlowEvent { index, kind });
                    return;
                }
            }
        }
        self.receive(frame)
    }
}

impl std::ops::Deref for ScriptedHal {
    type Target = ScriptedNic;
    fn deref(&self) -> &ScriptedNic {
        &self.nic
    }
}

impl std::ops::DerefMut for ScriptedHal {
    fn deref_mut(&mut self) -> &mut ScriptedNic {
        &mut self.nic
    }
}

/// What the firmware does to the scripted NIC, recorded for the script to check.
#[derive(Default)]
pub struct ScriptedNic {
    /// Frames that left for the network: the firmware's, and the ACKs the datapath sends
    /// on a flow write that asks for one.
    pub tx: Vec<Vec<u8>>,
    pub records: Vec<Vec<u8>>,
    /// Room in the host queue (records the firmware may push before the host drains).
    pub host_room: usize,
    pub flows: BTreeMap<u16, FlowContext>,
    /// The flow table has no room for another tuple (its bucket is full of others): a
    /// write of a flow whose tuple it does not hold writes the context, and fails.
    pub flow_table_full: bool,
    /// Flows written while the table had no room for their tuple: the datapath does not
    /// steer their frames to them.
    pub unsteered: BTreeSet<u16>,
    pub flow_writes: Vec<FlowContext>,
    pub flow_removes: Vec<u16>,
    pub flow_events: VecDeque<FlowEvent>,
    pub counters: Counters,
    /// Where the firmware writes its next segment and record.
    pub tx_slot: Box<TxSlot>,
    pub record_buffer: Box<RecordBuffer>,
}

impl Hal for ScriptedHal {
    type Nic = ScriptedNic;
    fn nic(&mut self) -> &mut ScriptedNic {
        &mut self.nic
    }
    fn next_frame(&mut self) -> (Option<(&RxDescriptor, &[u8])>, &mut ScriptedNic) {
        let head = self.rx.front().map(|(d, frame)| (d, frame.as_slice()));
        (head, &mut self.nic)
    }
    fn pop_frame(&mut self) {
        self.rx.pop_front();
    }
    fn next_command(&mut self) -> (Option<(&RecordBuffer, usize)>, &mut ScriptedNic) {
        if self.command_len.is_none() {
            if let Some(record) = self.commands.pop_front() {
                let len = record.len().min(MAX_RECORD_LEN);
                self.command_slot.0[..len].copy_from_slice(&record[..len]);
                self.command_len = Some(len);
            }
        }
        let command = self.command_len.map(|len| (&*self.command_slot, len));
        (command, &mut self.nic)
    }
    fn pop_command(&mut self) {
        self.command_len = None;
    }
}

impl Nic for ScriptedNic {
    fn transmit_slot(&mut self) -> &mut TxSlot {
        &mut self.tx_slot
    }
    fn transmit_segment(&mut self) {
        // The frame the datapath builds from the descriptor, its checksums filled.
        let slot = &self.tx_slot;
        let mut frame = vec![0; iwnic_firmware::MAX_FRAME_LEN];
        let len = slot
            .descriptor
            .frame(slot.payload(), &mut frame, Checksums::Software)
            .expect("the firmware describes segments the datapath can build");
        frame.truncate(len);
        self.tx.push(frame);
    }
    fn host_space(&self) -> usize {
        self.host_room.saturating_sub(self.records.len())
    }
    fn record_buffer(&mut self) -> &mut RecordBuffer {
        &mut self.record_buffer
    }
    fn push_record(&mut self, len: usize) {
        assert!(
            self.host_space() > 0,
            "the firmware pushed a record into a full host queue"
        );
        self.records.push(self.record_buffer.0[..len].to_vec());
    }
    fn write_flow(&mut self, flow: &FlowContext, write: FlowWrite) -> Result<(), FlowTableFull> {
        let held = (self.flows.iter())
            .any(|(index, f)| f.tuple == flow.tuple && !self.unsteered.contains(index));
        let installed = match held || !self.flow_table_full {
            true => Ok(()),
            false => Err(FlowTableFull),
        };
        if installed.is_err() {
            self.unsteered.insert(flow.index);
        }
        self.flows.insert(flow.index, *flow);
        self.flow_writes.push(*flow);
        if write == FlowWrite::InstallAndAcknowledge {
            self.tx.push(datapath_ack(flow));
        }
        installed
    }
    fn read_flow(&mut self, index: u16) -> Option<FlowContext> {
        self.flows.get(&index).copied()
    }
    fn remove_flow(&mut self, index: u16) {
        self.flows.remove(&index);
        self.unsteered.remove(&index);
        self.flow_removes.push(index);
    }
    fn receive_flow_event(&mut self) -> Option<FlowEvent> {
        self.flow_events.pop_front()
    }
    fn publish_counters(&mut self, counters: &Counters) {
        self.counters = *counters;
    }
}

/// The ACK the datapath sends for a flow in FPDU mode: `rcv_nxt` at `snd_nxt`, the
/// largest window (`hdl/src/nic_top.rs`, `testbench::model`).
pub fn datapath_ack(flow: &FlowContext) -> Vec<u8> {
    let ack = SegmentOut {
        src_mac: flow.local_mac,
        dst_mac: flow.remote_mac,
        src_ip: flow.tuple.local_ip,
        dst_ip: flow.tuple.remote_ip,
        src_port: flow.tuple.local_port,
        dst_port: flow.tuple.remote_port,
        control: TcpControl::None,
        seq: flow.snd_nxt,
        ack: Some(flow.rcv_nxt),
        window: u16::MAX,
        syn_options: None,
    };
    let mut frame = vec![0u8; ack.buffer_len(0)];
    let len = ack
        .emit(&[], &mut frame, Checksums::Software)
        .expect("an ACK fits its buffer");
    frame.truncate(len);
    frame
}

/// A TCP segment the firmware sent, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seg {
    pub src_port: u16,
    pub dst_port: u16,
    pub control: TcpControl,
    pub seq: u32,
    pub ack: Option<u32>,
    pub window: u16,
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub payload: Vec<u8>,
}

impl Seg {
    pub fn decode(frame: &[u8]) -> Seg {
        let f = TcpFrameRepr::parse(frame).expect("the firmware sends valid TCP frames");
        assert_eq!(
            (f.src_mac.0, f.src_ip.octets()),
            (NIC_MAC, NIC_IP),
            "sent from the NIC's addresses"
        );
        Seg {
            src_port: f.tcp.src_port,
            dst_port: f.tcp.dst_port,
            control: f.tcp.control,
            seq: f.tcp.seq_number.0 as u32,
            ack: f.tcp.ack_number.map(|a| a.0 as u32),
            window: f.tcp.window_len,
            mss: f.tcp.max_seg_size,
            window_scale: f.tcp.window_scale,
            payload: f.tcp.payload.to_vec(),
        }
    }

    /// Sequence space the segment takes.
    pub fn len(&self) -> u32 {
        self.payload.len() as u32
            + u32::from(matches!(self.control, TcpControl::Syn | TcpControl::Fin))
    }

    /// `control` with the payload kind in a short form for matching: "SYN", "SYN-ACK",
    /// "ACK", "DATA", "FIN", "RST".
    pub fn kind(&self) -> &'static str {
        match (self.control, self.ack.is_some(), self.payload.is_empty()) {
            (TcpControl::Syn, false, _) => "SYN",
            (TcpControl::Syn, true, _) => "SYN-ACK",
            (TcpControl::Fin, _, _) => "FIN",
            (TcpControl::Rst, _, _) => "RST",
            (_, _, true) => "ACK",
            (_, _, false) => "DATA",
        }
    }
}

/// An event the firmware raised, decoded and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ev {
    pub seq: u32,
    pub kind: EventKind,
    pub conn: u32,
    pub listener: u32,
    pub status: i32,
    pub ird: u16,
    pub ord: u16,
    pub rtr: RtrTypes,
    pub private_data: Vec<u8>,
    pub local: Endpoint,
    pub remote: Endpoint,
}

/// A record the firmware pushed to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Done(Completion),
    Event(Ev),
}

impl Out {
    pub fn decode(bytes: &[u8]) -> Out {
        match Record::parse(bytes).expect("the firmware pushes valid records") {
            Record::Completion(c) => Out::Done(c),
            Record::Event(e) => Out::Event(Ev {
                seq: e.seq,
                kind: e.kind,
                conn: e.conn,
                listener: e.listener,
                status: e.status,
                ird: e.ird,
                ord: e.ord,
                rtr: e.rtr,
                private_data: e.private_data.to_vec(),
                local: e.local,
                remote: e.remote,
            }),
            Record::Command(_) => panic!("the firmware pushed a command"),
        }
    }

    /// "DONE(status)" or "KIND(status)", for matching sequences.
    pub fn brief(&self) -> String {
        match self {
            Out::Done(c) => format!("DONE({})", c.status),
            Out::Event(e) => format!("{:?}({})", e.kind, e.status),
        }
    }
}

/// The firmware, its scripted NIC and the clock.
pub struct Bench<const N: usize = 64, const B: usize = 8> {
    pub fw: Box<Firmware<N, B>>,
    pub hal: ScriptedHal,
    pub now_ms: i64,
    next_tag: u32,
}

impl Default for Bench {
    fn default() -> Self {
        Bench::with(config())
    }
}

impl Bench {
    pub fn with(config: Config) -> Bench {
        Bench::sized(config)
    }
}

impl<const N: usize, const B: usize> Bench<N, B> {
    /// A bench whose firmware has `N` entries and `B` negotiation buffers.
    pub fn sized(config: Config) -> Self {
        Bench {
            fw: Box::new(Firmware::new(config)),
            hal: ScriptedHal::with_host_room(64),
            now_ms: 1_000,
            next_tag: 1,
        }
    }

    pub fn poll(&mut self) {
        self.fw
            .poll(&mut self.hal, Instant::from_millis(self.now_ms));
    }

    /// Let `ms` pass, polling every millisecond as a soft core would.
    pub fn advance(&mut self, ms: i64) {
        for _ in 0..ms {
            self.now_ms += 1;
            self.poll();
        }
    }

    /// Queue a command, poll, and return its tag.
    pub fn command(&mut self, command: Command) -> u32 {
        let tag = self.next_tag;
        self.next_tag += 1;
        let record = CommandRecord { tag, command };
        let mut buf = vec![0u8; record.buffer_len()];
        record.emit(&mut buf).unwrap();
        self.hal.commands.push_back(buf);
        self.poll();
        tag
    }

    /// Deliver a frame with the descriptor given, past the datapath's parser, and poll.
    pub fn deliver_described(&mut self, descriptor: RxDescriptor, frame: Vec<u8>) {
        self.hal.rx.push_back((descriptor, frame));
        self.poll();
    }

    /// Deliver a frame through the datapath's parser and poll.
    pub fn deliver(&mut self, frame: Vec<u8>) {
        self.hal.receive(frame);
        self.poll();
    }

    /// Deliver a frame through the datapath, which takes an RTR as iwnic sends it
    /// ([`ScriptedHal::arrive`]), and poll.
    pub fn arrive(&mut self, frame: Vec<u8>) {
        self.hal.arrive(frame);
        self.poll();
    }

    /// Frames sent since the last call, decoded.
    pub fn sent(&mut self) -> Vec<Seg> {
        self.hal.tx.drain(..).map(|f| Seg::decode(&f)).collect()
    }

    /// Records pushed since the last call, decoded; checks event sequence numbers run on.
    pub fn out(&mut self) -> Vec<Out> {
        self.hal
            .records
            .drain(..)
            .map(|r| Out::decode(&r))
            .collect()
    }

    pub fn listen(&mut self, port: u16, backlog: u32) -> u32 {
        let tag = self.command(Command::Listen {
            local: Endpoint::v4([0; 4], port),
            backlog,
        });
        match self.out().as_slice() {
            [Out::Done(c)] if c.tag == tag && c.status == 0 => c.handle,
            other => panic!("listen: {other:?}"),
        }
    }
}

/// Checks the contract's event rules over one run.
#[derive(Default)]
pub struct RuleChecker {
    /// Per connection handle: the events seen, in order.
    pub traces: BTreeMap<u32, Vec<(EventKind, i32)>>,
    last_seq: u32,
}

impl RuleChecker {
    pub fn see(&mut self, out: &Out) {
        let Out::Event(e) = out else { return };
        assert_eq!(e.seq, self.last_seq + 1, "events numbered without gaps");
        self.last_seq = e.seq;
        let trace = self.traces.entry(e.conn).or_default();
        if let Some(&(last, status)) = trace.last() {
            assert_ne!(
                last,
                EventKind::Close,
                "CLOSE is last: {trace:?} then {:?}",
                e.kind
            );
            assert!(
                !(last == EventKind::ConnectReply && status != 0),
                "nothing after a failed CONNECT_REPLY: {trace:?} then {:?}",
                e.kind
            );
        }
        match e.kind {
            EventKind::ConnectReply => {
                assert!(
                    trace.iter().all(|(k, _)| *k != EventKind::ConnectReply),
                    "one CONNECT_REPLY: {trace:?}"
                );
                assert!(trace.is_empty(), "CONNECT_REPLY first: {trace:?}");
            }
            EventKind::ConnectRequest => {
                assert!(trace.is_empty(), "CONNECT_REQUEST first: {trace:?}")
            }
            EventKind::Established => {
                assert_eq!(
                    trace.as_slice(),
                    [(EventKind::ConnectRequest, 0)],
                    "ESTABLISHED after the request"
                )
            }
            // Rules 4 and 5: the end of a connection follows its setup (the passive
            // side's ESTABLISHED, the active side's good CONNECT_REPLY), and the peer's
            // FIN is told once.
            EventKind::Disconnect | EventKind::Close => assert!(
                matches!(
                    trace.last(),
                    Some((EventKind::Established | EventKind::Disconnect, _))
                        | Some((EventKind::ConnectReply, 0))
                ) && !(e.kind == EventKind::Disconnect
                    && trace.iter().any(|(k, _)| *k == EventKind::Disconnect)),
                "{:?} after {trace:?}",
                e.kind
            ),
        }
        trace.push((e.kind, e.status));
    }
}

/// `sent` is one challenge ACK (RFC 5961) at the numbers `peer` expects: its
/// `rcv_nxt`, acknowledging its `snd_nxt`.
pub fn assert_challenge_ack(sent: &[Seg], peer: &Peer) {
    assert_eq!(kinds(sent), ["ACK"], "a challenge ACK");
    assert_eq!(
        (sent[0].seq, sent[0].ack),
        (peer.rcv_nxt, Some(peer.snd_nxt)),
        "the challenge ACK's numbers"
    );
}

/// Kinds of a batch of segments, for matching.
/// Each segment's kind and the port it went to.
pub fn kinds_and_ports(segs: &[Seg]) -> Vec<(&'static str, u16)> {
    segs.iter().map(|s| (s.kind(), s.dst_port)).collect()
}

pub fn kinds(segs: &[Seg]) -> Vec<&'static str> {
    segs.iter().map(Seg::kind).collect()
}

/// Brief forms of a batch of records.
pub fn briefs(out: &[Out]) -> Vec<String> {
    out.iter().map(Out::brief).collect()
}

pub fn event(out: &Out) -> &Ev {
    match out {
        Out::Event(e) => e,
        other => panic!("not an event: {other:?}"),
    }
}

pub fn done(out: &Out) -> &Completion {
    match out {
        Out::Done(c) => c,
        other => panic!("not a completion: {other:?}"),
    }
}

/// The far end of a TCP connection, scripted.
#[derive(Debug, Clone)]
pub struct Peer {
    pub port: u16,
    pub nic_port: u16,
    pub snd_nxt: u32,
    pub rcv_nxt: u32,
    /// What its SYN offers.
    pub window_scale: Option<u8>,
    pub mss: u16,
}

impl Peer {
    pub fn new(port: u16, nic_port: u16, iss: u32) -> Peer {
        Peer {
            port,
            nic_port,
            snd_nxt: iss,
            rcv_nxt: 0,
            window_scale: Some(7),
            mss: 1460,
        }
    }

    fn frame(
        &self,
        control: TcpControl,
        seq: u32,
        ack: Option<u32>,
        payload: &[u8],
        syn: bool,
    ) -> Vec<u8> {
        let repr = TcpFrameRepr {
            src_mac: EthernetAddress(PEER_MAC),
            dst_mac: EthernetAddress(NIC_MAC),
            src_ip: Ipv4Address::from(PEER_IP),
            dst_ip: Ipv4Address::from(NIC_IP),
            ttl: DEFAULT_TTL,
            tcp: TcpRepr {
                src_port: self.port,
                dst_port: self.nic_port,
                control,
                seq_number: TcpSeqNumber(seq as i32),
                ack_number: ack.map(|a| TcpSeqNumber(a as i32)),
                window_len: 65535,
                window_scale: if syn { self.window_scale } else { None },
                max_seg_size: syn.then_some(self.mss),
                sack_permitted: false,
                sack_ranges: [None; 3],
                timestamp: None,
                payload,
            },
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf).unwrap();
        buf
    }

    /// A segment at `snd_nxt` acknowledging `rcv_nxt`; advances `snd_nxt`.
    pub fn seg(&mut self, control: TcpControl, payload: &[u8]) -> Vec<u8> {
        let syn = control == TcpControl::Syn;
        let ack = (!syn || self.rcv_nxt != 0).then_some(self.rcv_nxt);
        let frame = self.frame(control, self.snd_nxt, ack, payload, syn);
        let len =
            payload.len() as u32 + u32::from(matches!(control, TcpControl::Syn | TcpControl::Fin));
        self.snd_nxt = self.snd_nxt.wrapping_add(len);
        frame
    }

    /// The same segment again (a retransmission), without moving `snd_nxt`.
    pub fn again(&self, control: TcpControl, seq: u32, payload: &[u8]) -> Vec<u8> {
        self.frame(
            control,
            seq,
            Some(self.rcv_nxt),
            payload,
            control == TcpControl::Syn,
        )
    }

    /// This peer with its next sequence number at `seq`: what it builds from
    /// `snd_nxt` (an RST, a segment without ACK) starts there.
    pub fn at(&self, seq: u32) -> Peer {
        Peer {
            snd_nxt: seq,
            ..self.clone()
        }
    }

    /// This peer acknowledging `ack`, whatever the NIC sent: what a blind attacker, or a
    /// confused peer, builds.
    pub fn acknowledging(&self, ack: u32) -> Peer {
        Peer {
            rcv_nxt: ack,
            ..self.clone()
        }
    }

    /// A segment at `snd_nxt` without the ACK flag, not moving `snd_nxt`.
    pub fn without_ack(&self, control: TcpControl, payload: &[u8]) -> Vec<u8> {
        self.frame(control, self.snd_nxt, None, payload, false)
    }

    pub fn syn(&mut self) -> Vec<u8> {
        self.seg(TcpControl::Syn, &[])
    }
    pub fn ack(&mut self) -> Vec<u8> {
        self.seg(TcpControl::None, &[])
    }
    pub fn data(&mut self, payload: &[u8]) -> Vec<u8> {
        self.seg(TcpControl::Psh, payload)
    }
    pub fn fin(&mut self) -> Vec<u8> {
        self.seg(TcpControl::Fin, &[])
    }
    pub fn rst(&self) -> Vec<u8> {
        self.frame(TcpControl::Rst, self.snd_nxt, None, &[], false)
    }

    /// Take in what the NIC sent to this peer.
    pub fn saw(&mut self, seg: &Seg) {
        assert_eq!((seg.src_port, seg.dst_port), (self.nic_port, self.port));
        if seg.control != TcpControl::Rst {
            self.rcv_nxt = seg.seq.wrapping_add(seg.len());
        }
    }

    pub fn saw_all(&mut self, segs: &[Seg]) {
        for s in segs {
            self.saw(s);
        }
    }
}

pub fn mpa(repr: &FrameRepr) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf).unwrap();
    buf
}

pub fn request_v2(rtr: RtrTypes, ird: u16, ord: u16, private_data: &[u8]) -> Vec<u8> {
    mpa(&FrameRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        revision: 2,
        v2: Some(V2Block {
            peer_to_peer: rtr.count() > 0,
            rtr,
            ird,
            ord,
        }),
        private_data,
    })
}

pub fn request_v1(private_data: &[u8]) -> Vec<u8> {
    mpa(&FrameRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        revision: 1,
        v2: None,
        private_data,
    })
}

pub fn reply(kind: FrameKind, v2: Option<V2Block>, private_data: &[u8]) -> Vec<u8> {
    let revision = if v2.is_some() { 2 } else { 1 };
    mpa(&FrameRepr {
        kind,
        markers: false,
        crc: true,
        revision,
        v2,
        private_data,
    })
}

pub fn parse_mpa(bytes: &[u8]) -> FrameRepr<'_> {
    FrameRepr::parse_bytes(bytes).expect("a valid MPA frame")
}

pub fn fpdu(message: &MessageRepr) -> Vec<u8> {
    let mut ulpdu = vec![0u8; message.buffer_len()];
    message.emit(&mut ulpdu).unwrap();
    let repr = FpduRepr { ulpdu: &ulpdu };
    let mut wire = vec![0u8; repr.buffer_len()];
    repr.emit(&mut wire).unwrap();
    wire
}

pub fn rtr(kind: RtrTypes) -> Vec<u8> {
    fpdu(&MessageRepr::rtr(kind).unwrap())
}

/// The LLP error code of a Terminate FPDU.
pub fn terminate_code(payload: &[u8]) -> u8 {
    let fpdu = FpduRepr::parse(payload).expect("a whole FPDU with a good CRC");
    match MessageRepr::parse(fpdu.ulpdu)
        .expect("a DDP/RDMAP message")
        .body
    {
        Body::Terminate(t) => t.code,
        other => panic!("not a Terminate: {other:?}"),
    }
}

/// Bytes the firmware handed over with the one flow, sent again once: the datapath now
/// sees all of them acknowledged, and within `ms` the firmware sends nothing more and
/// gives its negotiation buffer back.
pub fn acknowledged_on_the_datapath_goes_quiet(bench: &mut Bench, ms: i64) {
    let flow = bench.hal.flows.values_mut().next().unwrap();
    flow.snd_una = flow.snd_nxt;
    bench.advance(ms);
    assert!(bench.sent().is_empty());
    assert_eq!(bench.fw.buffers_in_use(), 0);
    assert_eq!(bench.fw.counters().retransmissions, 1);
}

/// The RTR types an initiator offers when it can send either (iwnic, siw): Write and Read.
pub const OFFER: RtrTypes = RtrTypes {
    send: false,
    write: true,
    read: true,
};

/// A new peer from `port` opens a connection to `PORT` and sends a whole v2 request
/// offering [`OFFER`]: the peer, what the NIC sent and what it raised.
pub fn request_from<const N: usize, const B: usize>(
    bench: &mut Bench<N, B>,
    port: u16,
) -> (Peer, Vec<Seg>, Vec<Out>) {
    let mut peer = Peer::new(port, PORT, 5);
    bench.deliver(peer.syn());
    peer.saw_all(&bench.sent());
    bench.deliver(peer.ack());
    bench.deliver(peer.data(&request_v2(OFFER, 16, 16, b"")));
    let (sent, out) = (bench.sent(), bench.out());
    (peer, sent, out)
}

/// Listen on `PORT`; a peer from port 40000 completes the handshake (nothing answers its
/// ACK) and waits to send its MPA request.
pub fn handshake(bench: &mut Bench) -> Peer {
    bench.listen(PORT, 8);
    let mut peer = Peer::new(40000, PORT, 5);
    bench.deliver(peer.syn());
    peer.saw_all(&bench.sent());
    bench.deliver(peer.ack());
    assert!(bench.sent().is_empty());
    peer
}

/// An accept of `conn` with IRD and ORD 8 and no private data.
pub fn accept_command(conn: u32) -> Command<'static> {
    Command::Accept {
        conn,
        ird: 8,
        ord: 8,
        qpn: 1,
        private_data: b"",
    }
}

/// Passive open up to the CONNECT_REQUEST: listen, handshake, the request (its ACK not
/// yet sent). Returns the peer and the event.
pub fn passive_until_request(bench: &mut Bench, request: &[u8]) -> (Peer, Ev) {
    let listener = bench.listen(PORT, 8);
    let mut peer = Peer::new(40000, PORT, 7_000);
    bench.deliver(peer.syn());
    let synack = bench.sent();
    assert_eq!(kinds(&synack), ["SYN-ACK"]);
    assert_eq!(synack[0].ack, Some(7_001));
    peer.saw_all(&synack);
    bench.deliver(peer.ack());
    bench.deliver(peer.data(request));
    // The request's ACK is delayed, to ride on the reply.
    assert_eq!(kinds(&bench.sent()), Vec::<&str>::new());
    let out = bench.out();
    assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
    let ev = event(&out[0]).clone();
    assert_eq!(ev.listener, listener);
    (peer, ev)
}

/// A connect to the peer's `PEER_IP:PORT` from a port the NIC picks.
pub fn connect_to_peer(ird: u16, ord: u16, mpa_v1: bool, private_data: &[u8]) -> Command<'_> {
    Command::Connect {
        local: Endpoint::v4(NIC_IP, 0),
        remote: Endpoint::v4(PEER_IP, PORT),
        ird,
        ord,
        qpn: 1,
        mpa_v1,
        private_data,
    }
}

/// Active open up to the request on the wire: connect, SYN, SYN-ACK, ACK + request.
/// Returns the peer, the connection handle and the request bytes.
pub fn active_until_request(
    bench: &mut Bench,
    mpa_v1: bool,
    private_data: &[u8],
) -> (Peer, u32, Vec<u8>) {
    active_until_request_with(bench, connect_to_peer(16, 16, mpa_v1, private_data))
}

/// [`active_until_request`] with the host's `connect` command.
pub fn active_until_request_with(bench: &mut Bench, connect: Command) -> (Peer, u32, Vec<u8>) {
    let tag = bench.command(connect);
    let out = bench.out();
    assert_eq!(briefs(&out), ["DONE(0)"]);
    let conn = done(&out[0]).handle;
    assert_eq!(done(&out[0]).tag, tag);
    let syn = bench.sent();
    assert_eq!(kinds(&syn), ["SYN"]);
    assert_eq!(syn[0].mss, Some(1460));
    let mut peer = Peer::new(PORT, syn[0].src_port, 90_000);
    peer.saw_all(&syn);
    bench.deliver(peer.syn());
    let segs = bench.sent();
    assert_eq!(kinds(&segs), ["ACK", "DATA"]);
    peer.saw_all(&segs);
    (peer, conn, segs[1].payload.clone())
}

/// Recompute the IPv4 header and TCP checksums after editing addresses.
pub fn fix_checksums(frame: &mut [u8]) {
    use iwnic_proto::smoltcp_wire::{IpAddress, Ipv4Packet, TcpPacket};
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
    ip.fill_checksum();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let total = usize::from(ip.total_len());
    let mut tcp = TcpPacket::new_unchecked(&mut frame[34..14 + total]);
    tcp.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
}
