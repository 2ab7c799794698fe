//! A passive open driven entirely in memory, `no_std`: a NIC whose queues are small
//! fixed buffers and a scripted initiator. It is the on-target proof that the state
//! machine runs on the soft core's ISA, and the workload of the setup benchmark.

use iwnic_proto::host::{
    Command, CommandRecord, Endpoint, EventKind, Record, RecordBuffer, MAX_RECORD_LEN,
};
use iwnic_proto::mpa::{FrameKind, FrameRepr, RtrTypes, V2Block};
use iwnic_proto::net::{Checksums, RxDescriptor, TcpFrameRepr, DEFAULT_TTL};
use iwnic_proto::WordAligned;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, Ipv4Address, TcpControl, TcpRepr, TcpSeqNumber};

use crate::{
    Config, Counters, Firmware, FlowContext, FlowEvent, FlowEventKind, FlowTableFull, FlowWrite,
    FourTuple, Hal, Nic, TxSlot,
};

/// Largest frame of the scenario: an MPA frame with a little private data, plus headers.
const FRAME: usize = 160;

/// Connection indices the NIC's flow contexts cover: every entry of [`MemoryFirmware`].
const FLOWS: usize = 16;

/// The most connections [`passive_setups`] sets up side by side.
pub const MAX_SIDE_BY_SIDE: usize = 8;

/// The firmware the scenarios run on the in-memory NIC (the on-target checks and the
/// benchmark): an entry for each flow context, a negotiation buffer for each setup side
/// by side. One instance type for all of them, so how the compiler inlines the measured
/// code does not change with the checks linked beside it (it did, by 25 to 900
/// instructions a setup).
pub type MemoryFirmware = Firmware<FLOWS, MAX_SIDE_BY_SIDE>;

const NIC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const NIC_IP: [u8; 4] = [10, 0, 0, 1];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const PEER_IP: [u8; 4] = [10, 0, 0, 2];
const PORT: u16 = 4791;

/// The scenario's NIC configuration, with received checksums checked by the datapath
/// alone or by the firmware too.
pub fn config(checksums: Checksums) -> Config {
    Config {
        mac: NIC_MAC,
        ip: NIC_IP,
        next_hop_mac: PEER_MAC,
        checksums,
        ..Config::default()
    }
}

/// What a queue slot is: a byte array, or a word-aligned one (frames and records).
trait Slot: AsRef<[u8]> + AsMut<[u8]> {
    const EMPTY: Self;
}

impl<const SIZE: usize> Slot for [u8; SIZE] {
    const EMPTY: Self = [0; SIZE];
}

impl<const SIZE: usize> Slot for WordAligned<SIZE> {
    const EMPTY: Self = WordAligned::ZERO;
}

/// A firmware RX queue slot: the descriptor the datapath wrote, then the frame.
struct RxSlot {
    descriptor: RxDescriptor,
    frame: WordAligned<FRAME>,
}

impl AsRef<[u8]> for RxSlot {
    fn as_ref(&self) -> &[u8] {
        &self.frame.0
    }
}

impl AsMut<[u8]> for RxSlot {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.frame.0
    }
}

impl Slot for RxSlot {
    const EMPTY: Self = RxSlot {
        descriptor: RxDescriptor::ZERO,
        frame: WordAligned::ZERO,
    };
}

/// A firmware TX queue slot in a [`Ring`], as a string: its payload (the descriptor
/// rides beside it).
struct QueuedTxSlot(TxSlot);

impl AsRef<[u8]> for QueuedTxSlot {
    fn as_ref(&self) -> &[u8] {
        &self.0.payload
    }
}

impl AsMut<[u8]> for QueuedTxSlot {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0.payload
    }
}

impl Slot for QueuedTxSlot {
    const EMPTY: Self = QueuedTxSlot(TxSlot::ZERO);
}

/// A FIFO of byte strings in place, as a hardware queue holds them: each is written once
/// into its slot and read there (or copied once out, on the scripted peer's side), never
/// moved whole.
///
/// The indices first, as a queue's registers: within a load's reach of the ring.
#[repr(C)]
struct Ring<const SLOTS: usize, S: Slot> {
    head: usize,
    count: usize,
    len: [usize; SLOTS],
    data: [S; SLOTS],
    /// Where a string is written while the ring is full, to be dropped.
    spare: S,
}

impl<const SLOTS: usize, S: Slot> Default for Ring<SLOTS, S> {
    fn default() -> Self {
        Ring {
            data: [const { S::EMPTY }; SLOTS],
            len: [0; SLOTS],
            spare: S::EMPTY,
            head: 0,
            count: 0,
        }
    }
}

impl<const SLOTS: usize, S: Slot> Ring<SLOTS, S> {
    /// Where the next string is written before [`Ring::commit`] queues it.
    fn next_slot(&mut self) -> &mut S {
        if self.count == SLOTS {
            return &mut self.spare;
        }
        &mut self.data[(self.head + self.count) % SLOTS]
    }

    /// Queue the first `len` bytes of [`Ring::next_slot`]; `false` (and nothing queued)
    /// when full or too long.
    fn commit(&mut self, len: usize) -> bool {
        if self.count == SLOTS || len > self.spare.as_ref().len() {
            return false;
        }
        self.len[(self.head + self.count) % SLOTS] = len;
        self.count += 1;
        true
    }

    /// Queue a copy of `bytes`; `false` (and nothing queued) when full or too long.
    fn push(&mut self, bytes: &[u8]) -> bool {
        match self.next_slot().as_mut().get_mut(..bytes.len()) {
            Some(slot) => slot.copy_from_slice(bytes),
            None => return false,
        }
        self.commit(bytes.len())
    }

    /// The oldest entry where it lies: its slot and length.
    fn head(&self) -> Option<(&S, usize)> {
        (self.count > 0).then(|| (&self.data[self.head], self.len[self.head]))
    }

    /// Drop the oldest entry.
    fn pop(&mut self) {
        if self.count > 0 {
            self.head = (self.head + 1) % SLOTS;
            self.count -= 1;
        }
    }

    /// The oldest entry, copied into `out` and dropped; its length.
    fn pop_into(&mut self, out: &mut [u8]) -> Option<usize> {
        let (slot, len) = self.head()?;
        out.get_mut(..len)?
            .copy_from_slice(slot.as_ref().get(..len)?);
        self.pop();
        Some(len)
    }

    fn room(&self) -> usize {
        SLOTS - self.count
    }
}

/// A NIC made of fixed in-memory queues and a small flow table. The queues hold what
/// [`MAX_SIDE_BY_SIDE`] setups queue at once: two frames each (the ACK and the request),
/// a record each (CONNECT_REQUEST, the accept's completion, ESTABLISHED) and room for
/// the records one more input may push.
#[derive(Default)]
pub struct MemoryNic {
    rx: Ring<{ 2 * MAX_SIDE_BY_SIDE }, RxSlot>,
    commands: Ring<MAX_SIDE_BY_SIDE, RecordBuffer>,
    out: MemoryOut,
}

/// The part of [`MemoryNic`] the firmware acts on: output queues and flow contexts.
#[derive(Default)]
pub struct MemoryOut {
    tx: Ring<MAX_SIDE_BY_SIDE, QueuedTxSlot>,
    records: Ring<{ 2 * MAX_SIDE_BY_SIDE }, RecordBuffer>,
    /// The datapath's contexts by connection index, as its block RAM holds them.
    flows: [Option<FlowContext>; FLOWS],
    /// ACKs the datapath was asked to send with a flow write, and those it sent for an
    /// RTR it took (it builds them, not the firmware: the peer here does not need them,
    /// so they are only counted).
    acks_on_write: usize,
    acks_taking_rtr: usize,
    /// The datapath's reports (an RTR taken for each setup side by side), in order:
    /// `events[taken..queued]` are waiting.
    events: [Option<FlowEvent>; MAX_SIDE_BY_SIDE],
    events_queued: usize,
    events_taken: usize,
}

impl MemoryNic {
    /// A frame from the network as the datapath handles it (outside the measured polls,
    /// as it is not the firmware's work): an RTR it takes is acknowledged and reported,
    /// every other frame goes to the firmware RX queue behind its descriptor.
    fn receive(&mut self, frame: &[u8]) -> Result<(), &'static str> {
        let (descriptor, payload) =
            RxDescriptor::parse(frame).map_err(|_| "the datapath drops the frame")?;
        let tuple = FourTuple::of_received(&descriptor);
        let flow = self
            .out
            .flows
            .iter_mut()
            .flatten()
            .find(|f| f.tuple == tuple);
        if let Some((index, rtr)) =
            flow.and_then(|f| Some((f.index, f.take_rtr(&descriptor, payload)?)))
        {
            self.out.acks_taking_rtr += 1;
            let out = &mut self.out;
            let slot = out
                .events
                .get_mut(out.events_queued)
                .ok_or("reports full")?;
            *slot = Some(FlowEvent {
                index,
                kind: FlowEventKind::RtrTaken(rtr),
            });
            out.events_queued += 1;
            return Ok(());
        }
        self.rx.next_slot().descriptor = descriptor;
        expect(self.rx.push(frame), "the NIC's RX queue is full")
    }
}

impl Hal for MemoryNic {
    type Nic = MemoryOut;
    fn nic(&mut self) -> &mut MemoryOut {
        &mut self.out
    }
    fn next_frame(&mut self) -> (Option<(&RxDescriptor, &[u8])>, &mut MemoryOut) {
        let frame = self
            .rx
            .head()
            .and_then(|(slot, len)| Some((&slot.descriptor, slot.frame.0.get(..len)?)));
        (frame, &mut self.out)
    }
    fn pop_frame(&mut self) {
        self.rx.pop();
    }
    fn next_command(&mut self) -> (Option<(&RecordBuffer, usize)>, &mut MemoryOut) {
        (self.commands.head(), &mut self.out)
    }
    fn pop_command(&mut self) {
        self.commands.pop();
    }
}

impl Nic for MemoryOut {
    fn transmit_slot(&mut self) -> &mut TxSlot {
        &mut self.tx.next_slot().0
    }
    fn transmit_segment(&mut self) {
        // A full queue drops the segment, like the hardware TX queue.
        let len = self.tx.next_slot().0.payload().len();
        self.tx.commit(len);
    }
    fn host_space(&self) -> usize {
        self.records.room()
    }
    fn record_buffer(&mut self) -> &mut RecordBuffer {
        self.records.next_slot()
    }
    fn push_record(&mut self, len: usize) {
        self.records.commit(len);
    }
    fn write_flow(&mut self, flow: &FlowContext, write: FlowWrite) -> Result<(), FlowTableFull> {
        // An index beyond the bench's contexts has no room, as a full bucket has none.
        let slot = self
            .flows
            .get_mut(usize::from(flow.index))
            .ok_or(FlowTableFull)?;
        *slot = Some(*flow);
        self.acks_on_write += usize::from(write == FlowWrite::InstallAndAcknowledge);
        Ok(())
    }
    fn read_flow(&mut self, index: u16) -> Option<FlowContext> {
        *self.flows.get(usize::from(index))?
    }
    fn remove_flow(&mut self, index: u16) {
        if let Some(slot) = self.flows.get_mut(usize::from(index)) {
            *slot = None;
        }
    }
    fn receive_flow_event(&mut self) -> Option<FlowEvent> {
        if self.events_taken == self.events_queued {
            return None;
        }
        let event = self.events[self.events_taken];
        self.events_taken += 1;
        if self.events_taken == self.events_queued {
            (self.events_taken, self.events_queued) = (0, 0);
        }
        event
    }
    fn publish_counters(&mut self, _: &Counters) {}
}

/// The initiator's side of one connection.
struct Initiator {
    port: u16,
    snd_nxt: u32,
    rcv_nxt: u32,
    /// What the NIC's last segment acknowledged.
    acked: u32,
}

impl Initiator {
    /// Send a segment to the NIC.
    fn send(
        &mut self,
        nic: &mut MemoryNic,
        control: TcpControl,
        payload: &[u8],
    ) -> Result<(), &'static str> {
        let syn = control == TcpControl::Syn;
        let repr = TcpFrameRepr {
            src_mac: EthernetAddress(PEER_MAC),
            dst_mac: EthernetAddress(NIC_MAC),
            src_ip: Ipv4Address::from(PEER_IP),
            dst_ip: Ipv4Address::from(NIC_IP),
            ttl: DEFAULT_TTL,
            tcp: TcpRepr {
                src_port: self.port,
                dst_port: PORT,
                control,
                seq_number: TcpSeqNumber(self.snd_nxt as i32),
                ack_number: (!syn).then_some(TcpSeqNumber(self.rcv_nxt as i32)),
                window_len: 65535,
                window_scale: syn.then_some(7),
                max_seg_size: syn.then_some(1460),
                sack_permitted: false,
                sack_ranges: [None; 3],
                timestamp: None,
                payload,
            },
        };
        // With its checksums, as on the wire: the datapath checks them.
        let mut frame = [0u8; FRAME];
        let len = repr.emit(&mut frame).map_err(|_| "emit")?;
        self.snd_nxt = self
            .snd_nxt
            .wrapping_add(payload.len() as u32 + u32::from(syn));
        nic.receive(&frame[..len])
    }

    /// Take the NIC's next frame to us; its TCP control.
    fn receive(&mut self, nic: &mut MemoryNic) -> Result<TcpControl, &'static str> {
        // The frame the datapath builds from the NIC's descriptor, checksums filled.
        let (slot, _) = nic.out.tx.head().ok_or("the NIC sent nothing")?;
        let mut frame = [0u8; FRAME];
        let len = slot
            .0
            .descriptor
            .frame(slot.0.payload(), &mut frame, Checksums::Software)
            .map_err(|_| "the NIC sent a bad descriptor, or one too long for here")?;
        nic.out.tx.pop();
        let f = TcpFrameRepr::parse(&frame[..len]).map_err(|_| "the NIC sent a bad frame")?;
        if f.tcp.dst_port != self.port {
            return Err("frame for another port");
        }
        let syn_fin = matches!(f.tcp.control, TcpControl::Syn | TcpControl::Fin);
        self.rcv_nxt = (f.tcp.seq_number.0 as u32)
            .wrapping_add(f.tcp.payload.len() as u32 + u32::from(syn_fin));
        self.acked = f.tcp.ack_number.map_or(0, |a| a.0 as u32);
        Ok(f.tcp.control)
    }
}

fn command(nic: &mut MemoryNic, tag: u32, command: Command) -> Result<(), &'static str> {
    let record = CommandRecord { tag, command };
    let mut bytes = [0u8; MAX_RECORD_LEN];
    let len = record.emit(&mut bytes).map_err(|_| "emit record")?;
    expect(nic.commands.push(&bytes[..len]), "command queue full")
}

/// The next record pushed to the host, as (kind, status, handle): kind 0 for a completion.
fn record(nic: &mut MemoryNic) -> Result<(u8, i32, u32), &'static str> {
    let mut bytes = [0u8; MAX_RECORD_LEN];
    let len = nic.out.records.pop_into(&mut bytes).ok_or("no record")?;
    match Record::parse(&bytes[..len]).map_err(|_| "bad record")? {
        Record::Completion(c) => Ok((0, c.status, c.handle)),
        Record::Event(e) => Ok((e.kind as u8, e.status, e.conn)),
        Record::Command(_) => Err("a command came back"),
    }
}

fn expect(ok: bool, why: &'static str) -> Result<(), &'static str> {
    if ok {
        Ok(())
    } else {
        Err(why)
    }
}

/// Open a listener on the scenario's port.
pub fn listen<const N: usize, const B: usize>(
    fw: &mut Firmware<N, B>,
    nic: &mut MemoryNic,
) -> Result<(), &'static str> {
    command(
        nic,
        1,
        Command::Listen {
            local: Endpoint::v4([0; 4], PORT),
            backlog: 0,
        },
    )?;
    fw.poll(nic, Instant::from_millis(0));
    expect(
        record(nic)?
            == (
                0,
                0,
                u32::from(crate::machine::FIRST_LISTENER_GENERATION) << 16,
            ),
        "listen completes with the first listener",
    )
}

/// One passive connection from SYN to ESTABLISHED, MPA v2 offering the Write and Read
/// RTRs, the Write RTR chosen (which the datapath takes), from initiator port `port`;
/// then released. `poll` runs the firmware (the benchmark measures just that). Checks
/// every frame and record on the way.
pub fn passive_setup<const N: usize, const B: usize>(
    fw: &mut Firmware<N, B>,
    nic: &mut MemoryNic,
    port: u16,
    poll: impl FnMut(&mut Firmware<N, B>, &mut MemoryNic),
) -> Result<(), &'static str> {
    passive_setups(fw, nic, port, 1, poll)
}

/// `count` passive connections (at most [`MAX_SIDE_BY_SIDE`]) from initiator ports
/// `first_port` on, set up side by side as under full load: each step's inputs, one from
/// every initiator, are all queued before one `poll` takes them. Then released.
pub fn passive_setups<const N: usize, const B: usize>(
    fw: &mut Firmware<N, B>,
    nic: &mut MemoryNic,
    first_port: u16,
    count: usize,
    mut poll: impl FnMut(&mut Firmware<N, B>, &mut MemoryNic),
) -> Result<(), &'static str> {
    expect(
        count <= MAX_SIDE_BY_SIDE,
        "more setups than the queues hold",
    )?;
    let mut peers: [Initiator; MAX_SIDE_BY_SIDE] = core::array::from_fn(|k| {
        let port = first_port.wrapping_add(k as u16);
        Initiator {
            port,
            snd_nxt: u32::from(port) << 8,
            rcv_nxt: 0,
            acked: 0,
        }
    });
    let peers = &mut peers[..count];
    let mut conns = [0u32; MAX_SIDE_BY_SIDE];
    let conns = &mut conns[..count];

    for peer in peers.iter_mut() {
        peer.send(nic, TcpControl::Syn, &[])?;
    }
    poll(fw, nic);
    for peer in peers.iter_mut() {
        expect(peer.receive(nic)? == TcpControl::Syn, "SYN-ACK")?;
    }

    let offer = RtrTypes {
        send: false,
        write: true,
        read: true,
    };
    let request = FrameRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        revision: 2,
        v2: Some(V2Block {
            peer_to_peer: true,
            rtr: offer,
            ird: 16,
            ord: 16,
        }),
        private_data: b"iwnic",
    };
    let mut mpa = [0u8; 64];
    let len = request.emit(&mut mpa).map_err(|_| "emit request")?;
    for peer in peers.iter_mut() {
        peer.send(nic, TcpControl::None, &[])?;
        peer.send(nic, TcpControl::Psh, &mpa[..len])?;
    }
    poll(fw, nic);
    expect(
        nic.out.tx.head().is_none(),
        "the request's ACK waits to ride on the reply",
    )?;
    for conn in conns.iter_mut() {
        let (kind, status, handle) = record(nic)?;
        expect(
            (kind, status) == (EventKind::ConnectRequest as u8, 0),
            "CONNECT_REQUEST",
        )?;
        *conn = handle;
    }

    for (tag, &conn) in (2..).zip(conns.iter()) {
        let accept = Command::Accept {
            conn,
            ird: 16,
            ord: 16,
            qpn: 1,
            private_data: b"",
        };
        command(nic, tag, accept)?;
    }
    poll(fw, nic);
    for (peer, &conn) in peers.iter_mut().zip(conns.iter()) {
        expect(peer.receive(nic)? == TcpControl::Psh, "MPA reply")?;
        expect(record(nic)? == (0, 0, conn), "accept completes")?;
        expect(
            peer.acked == peer.snd_nxt,
            "the reply acknowledges the request",
        )?;
        expect(
            nic.out
                .read_flow((conn & 0xFFFF) as u16)
                .is_some_and(|f| f.rtr_expected),
            "flow handed over, RTR expected",
        )?;
    }

    let rtr = iwnic_proto::ddp::MessageRepr::rtr(RtrTypes::WRITE).ok_or("RTR")?;
    let mut ulpdu = [0u8; 64];
    let n = rtr.emit(&mut ulpdu).map_err(|_| "emit RTR")?;
    let mut fpdu = [0u8; 64];
    let n = iwnic_proto::fpdu::FpduRepr { ulpdu: &ulpdu[..n] }
        .emit(&mut fpdu)
        .map_err(|_| "emit FPDU")?;
    let (acks_on_write, acks_taking_rtr) = (nic.out.acks_on_write, nic.out.acks_taking_rtr);
    for peer in peers.iter_mut() {
        peer.send(nic, TcpControl::Psh, &fpdu[..n])?;
    }
    poll(fw, nic);
    expect(
        nic.out.acks_taking_rtr == acks_taking_rtr + count
            && nic.out.acks_on_write == acks_on_write
            && nic.out.tx.head().is_none(),
        "the datapath takes and acknowledges the RTR; the firmware writes and sends nothing",
    )?;
    for &conn in conns.iter() {
        expect(
            record(nic)? == (EventKind::Established as u8, 0, conn),
            "ESTABLISHED",
        )?;
        expect(
            nic.out
                .read_flow((conn & 0xFFFF) as u16)
                .is_some_and(|f| !f.rtr_expected),
            "FPDU mode",
        )?;
    }

    for &conn in conns.iter() {
        command(nic, 3, Command::Release { conn })?;
    }
    fw.poll(nic, Instant::from_millis(0));
    for peer in peers.iter_mut() {
        expect(peer.receive(nic)? == TcpControl::Rst, "release resets")?;
        expect(record(nic)? == (0, 0, 0), "release completes")?;
    }
    expect(fw.connections() == 0, "the table is empty again")
}
