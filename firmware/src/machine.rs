//! The firmware proper: the connection table and the loop that feeds it host commands,
//! frames, datapath reports and time. Handling per input lives in `commands.rs` and
//! `segments.rs`; timers are here.

use core::hash::{Hash, Hasher};
use heapless::Deque;
use iwnic_proto::errno::{ECONNRESET, ETIMEDOUT};
use iwnic_proto::host::{Completion, Endpoint, Event, EventKind, RecordBuffer, MAX_RECORD_LEN};
use iwnic_proto::mpa::MAX_FRAME_LEN as MPA_MAX_FRAME_LEN;
use iwnic_proto::mpa::{FrameRepr, RtrTypes};
use iwnic_proto::net::{SegmentOut, TxDescriptor};
use smoltcp::time::Instant;
use smoltcp::wire::TcpControl;

use crate::config::Config;
use crate::counters::Counters;
use crate::hal::{
    FlowContext, FlowEvent, FlowTableFull, FlowWrite, FourTuple, Hal, Nic, WordHasher,
    MAX_FRAME_LEN,
};
use crate::log::fw_debug;
use crate::negotiation::Negotiation;
use crate::table::EntryIndex;
use crate::timer::{Clock, TimerWheel};

/// Listeners one NIC holds: one bit each in a 16-bit mask of the open ones.
pub const MAX_LISTENERS: usize = 16;
const _: () = assert!(MAX_LISTENERS <= u16::BITS as usize);

/// Handles are `generation << 16 | slot` for connections and listeners alike; a
/// connection's generations are odd and a listener's even, so a handle of one kind never
/// names an object of the other (a host that mixes them up gets -EINVAL). A generation
/// grows by two when a handle dies.
pub(crate) const fn next_generation(generation: u16) -> u16 {
    match generation.wrapping_add(2) {
        0 => 2,
        next => next,
    }
}
const FIRST_CONNECTION_GENERATION: u16 = 1;
pub(crate) const FIRST_LISTENER_GENERATION: u16 = 2;
/// Records one input (a command, a frame, a report, a timer) can produce at most; input is
/// taken only while the host queue has this much room. Three: a disconnect of an
/// accepted connection still waiting for its RTR completes, then raises ESTABLISHED and
/// CLOSE ([`Owed::Established`]).
pub(crate) const RECORDS_PER_INPUT: usize = 3;

/// How often the invalid-segment ACK stamps are aged ([`Machine::age_stamps`]): 2^30 ms,
/// 12.4 days.
const STAMP_AGEING_PERIOD_MS: u32 = 1 << 30;
const NO_BUFFER: u16 = u16::MAX;
const NO_LISTENER: u8 = u8::MAX;
/// The peer did not offer window scaling (RFC 7323: then neither side scales).
pub(crate) const NO_WINDOW_SCALING: u8 = u8::MAX;
/// The largest window scale shift (RFC 7323 §2.3).
pub(crate) const MAX_WINDOW_SHIFT: u8 = 14;

/// Where a connection is. Passive: SynReceived → AwaitRequest → AwaitAccept → (AwaitRtr)
/// → Established. Active: SynSent → AwaitReply → (AwaitRtrAck) → Established. Close:
/// FinWait1/FinWait2/Closing/TimeWait (we closed first) or LastAck (the peer did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Free,
    SynSent,
    SynReceived,
    /// Handshake done; collecting the MPA request under the request timer.
    AwaitRequest,
    /// CONNECT_REQUEST raised; waiting for the host's accept or reject, whose reply
    /// acknowledges the request unless the delayed ACK went first.
    AwaitAccept,
    /// Reply sent in peer-to-peer mode; waiting for the initiator's RTR.
    AwaitRtr,
    /// Request sent; collecting the reply under the reply timer.
    AwaitReply,
    /// RTR sent; waiting for its acknowledgement before FPDU mode.
    AwaitRtrAck,
    /// FPDU mode: the datapath carries the connection.
    Established,
    FinWait1,
    FinWait2,
    Closing,
    TimeWait,
    LastAck,
}

/// What the host is still owed about a connection when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owed {
    /// Nothing: the host never heard of it, or let it go.
    Nothing,
    /// No event, but the host holds the handle of a raised request: if the connection
    /// dies before the host answers, its accept or reject fails with -ECONNRESET. The
    /// kernel's iw_cm has no CLOSE for an id in CONN_RECV (its providers never send one).
    Answer,
    /// Exactly one CONNECT_REPLY (contract rule 4).
    ConnectReply,
    /// ESTABLISHED, then CLOSE: an accepted connection waiting for the initiator's RTR.
    /// Its accept completed when the reply went out, as the kernel's providers return
    /// from accept, so no host thread waits on the network; one that dies before the
    /// RTR raises ESTABLISHED and then CLOSE with the failure (rule 5: never CLOSE
    /// alone), as siw does for a connection lost while accepting.
    Established,
    /// CLOSE, last and exactly once (rule 6).
    Close,
}

/// One connection: [`CONNECTION_ENTRY_BYTES`] (72), held under the design's 128 at compile
/// time; with the index and the timers, 65,536 connections take 6.4 MB.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Conn {
    pub state: State,
    pub owed: Owed,
    /// Bumped whenever the host's handle to this entry dies.
    pub generation: u16,
    pub listener: u8,
    pub retries: u8,
    /// The peer's window scale shift; [`NO_WINDOW_SCALING`] when its SYN had none.
    pub peer_window_shift: u8,
    /// The flow context is installed in the datapath.
    pub in_datapath: bool,
    pub buffer: u16,
    pub peer_window: u16,
    pub peer_mss: u16,
    pub tuple: FourTuple,
    pub remote_mac: [u8; 6],
    pub snd_una: u32,
    pub snd_nxt: u32,
    pub rcv_nxt: u32,
    /// Current retransmission timeout, ms: `rto_base` doubled on every retry.
    pub rto: u16,
    /// The timeout a new transmission starts from, ms: the configured initial one until
    /// the handshake gives a round-trip sample ([`Machine::time_handshake`]).
    pub rto_base: u16,
    /// End of the state's own timer (MPA timeouts, the delayed ACK of the request,
    /// TIME_WAIT, FIN_WAIT_2), ms.
    pub phase_deadline: u32,
    /// When the last ACK answering an invalid segment went, ms (see
    /// [`Config::invalid_ack_interval`]).
    pub invalid_acked_at: u32,
    pub neg: Negotiation,
}

impl Conn {
    /// The datapath's sequence numbers are this connection's current ones: it is in FPDU
    /// mode. While the RTR is expected every segment but an RTR the datapath takes comes
    /// to the firmware and the context keeps the numbers written at accept; the
    /// firmware's are current then. (Once the datapath took the RTR, its report reaches
    /// the firmware before any frame received after it: see `take_frames`.)
    pub(crate) fn datapath_numbers_current(&self) -> bool {
        self.in_datapath && self.state != State::AwaitRtr
    }

    const FREE: Conn = Conn {
        state: State::Free,
        owed: Owed::Nothing,
        generation: FIRST_CONNECTION_GENERATION,
        listener: NO_LISTENER,
        retries: 0,
        peer_window_shift: NO_WINDOW_SCALING,
        in_datapath: false,
        buffer: NO_BUFFER,
        peer_window: 0,
        peer_mss: 536,
        tuple: FourTuple {
            local_ip: [0; 4],
            local_port: 0,
            remote_ip: [0; 4],
            remote_port: 0,
        },
        remote_mac: [0; 6],
        snd_una: 0,
        snd_nxt: 0,
        rcv_nxt: 0,
        rto: 0,
        rto_base: 0,
        phase_deadline: 0,
        invalid_acked_at: 0,
        neg: Negotiation {
            revision: 0,
            enhanced: false,
            peer_to_peer: false,
            rtr: RtrTypes::NONE,
            peer_ird: 0,
            peer_ord: 0,
            ird: 0,
            ord: 0,
            read_response_due: false,
        },
    };
}

/// Bytes of one connection-table entry. The 4-tuple index and the timer wheel add their
/// own per-connection bytes: `size_of::<Firmware<N, B>>() / N` is the whole cost.
pub const CONNECTION_ENTRY_BYTES: usize = core::mem::size_of::<Conn>();
// The design target: an entry of at most 128 bytes.
const _: () = assert!(CONNECTION_ENTRY_BYTES <= 128);

/// Stream bytes of a connection in MPA negotiation: what it sent and has not seen
/// acknowledged (`tx`, starting at sequence number `tx_seq`), and what it has received
/// of the peer's MPA frame or RTR (`rx`). Shared by a pool, held only while negotiating.
///
/// `tx` starts on a word boundary, as a segment's payload does in a [`crate::TxSlot`],
/// so sending the bytes copies them a word at a time.
#[repr(C, align(4))]
pub(crate) struct NegotiationBuffer {
    pub tx_seq: u32,
    pub tx: [u8; TX_CAPACITY],
    /// Next free buffer while on the free list.
    next_free: u16,
    /// The connection that took it last (it holds it while its `buffer` names this one).
    owner: u16,
    pub tx_len: u16,
    pub rx_len: u16,
    pub rx: [u8; MPA_MAX_FRAME_LEN],
}

const _: () = assert!(core::mem::offset_of!(NegotiationBuffer, tx) % 4 == 0);

/// Room for an MPA frame and the RTR FPDU that may follow it before either is acknowledged.
pub(crate) const TX_CAPACITY: usize = MPA_MAX_FRAME_LEN + 64;
// The longest RTR (a zero-length Read Request) fits where `send_rtr` stages it.
const _: () = assert!(
    iwnic_proto::fpdu::fpdu_len(
        iwnic_proto::ddp::UNTAGGED_HEADER_LEN + iwnic_proto::ddp::READ_REQUEST_BODY_LEN
    ) <= TX_CAPACITY
);

impl NegotiationBuffer {
    const EMPTY: NegotiationBuffer = NegotiationBuffer {
        next_free: NO_BUFFER,
        owner: 0,
        tx_seq: 0,
        tx_len: 0,
        rx_len: 0,
        tx: [0; TX_CAPACITY],
        rx: [0; MPA_MAX_FRAME_LEN],
    };

    pub fn tx(&self) -> &[u8] {
        &self.tx[..usize::from(self.tx_len)]
    }
    pub fn rx(&self) -> &[u8] {
        &self.rx[..usize::from(self.rx_len)]
    }
    /// Make `frame` the bytes to send from sequence number `seq`.
    #[inline(never)]
    pub fn stage(&mut self, seq: u32, frame: &FrameRepr) -> Result<usize, ()> {
        let len = frame.emit(&mut self.tx).map_err(|_| ())?;
        self.tx_seq = seq;
        self.tx_len = len as u16;
        Ok(len)
    }
    /// Sequence number just past the unacknowledged bytes.
    pub fn tx_end(&self) -> u32 {
        self.tx_seq.wrapping_add(u32::from(self.tx_len))
    }

    /// Whether an acknowledgement up to `snd_una` covers every byte staged here.
    pub fn acknowledged_by(&self, snd_una: u32) -> bool {
        (snd_una.wrapping_sub(self.tx_end()) as i32) >= 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Listener {
    pub local: ListenAddr,
    pub backlog: u32,
    /// CONNECT_REQUESTs raised and neither delivered to the application (the host's
    /// `Delivered`) nor answered: what the backlog bounds (rule 10).
    pub pending: u32,
    /// SYNs received whose MPA request is not complete.
    pub half_open: u32,
    pub generation: u16,
}

/// Where a listener listens (address 0.0.0.0: every address of the NIC). Word-aligned,
/// so a SYN's search compares a word and a halfword, not eight bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(4))]
pub(crate) struct ListenAddr {
    pub ip: [u8; 4],
    pub port: u16,
}

/// The connection state machine of one NIC: `N` connections (a power of two, for the
/// 4-tuple index), `B` negotiation buffers (connections negotiating MPA at once).
///
/// It owns every byte it works in: the tables and the negotiation buffers, so a poll
/// clears no large buffers on the stack. Frames and commands are read in place in the
/// Hal's input queues; frames and records it sends are built in place in its output
/// queues.
pub struct Firmware<const N: usize, const B: usize> {
    machine: Machine<N, B>,
}

/// The tables and the logic behind [`Firmware`]'s public face.
///
/// In declaration order (measured: 3,942 → 3,917 instructions a setup against the
/// compiler's order): the scalars every input touches, the configuration and counters,
/// then the connection table, its index and the listeners, the timer wheel, negotiation
/// buffers and published counters last. On riscv32 a load reaches 2 KB past its base
/// register; a field beyond costs an address computed into a register of its own, in
/// every function using it.
#[repr(C)]
pub(crate) struct Machine<const N: usize, const B: usize> {
    pub(crate) now_ms: u32,
    clock: Clock,
    pub(crate) live: usize,
    pub(crate) event_seq: u32,
    pub(crate) buffers_free: usize,
    pub(crate) free_buffer_head: u16,
    /// Bit `slot` set while `listeners[slot]` is open: a SYN's search visits only those.
    pub(crate) listening: u16,
    /// Where the search for a free listener slot starts: slots are taken in turn, so a
    /// slot's generations come round only after every slot's have.
    pub(crate) next_listener_slot: u8,
    pub(crate) next_port: u16,
    started: bool,
    /// When the invalid-segment ACK stamps were last aged ([`Machine::age_stamps`]).
    stamps_aged_at: u32,
    published_at: u32,
    /// The configuration's timeouts in milliseconds, the unit of the timers.
    pub(crate) timeouts: Timeouts,
    pub(crate) config: Config,
    pub(crate) counters: Counters,
    pub(crate) conns: [Conn; N],
    /// Free entries, and the live one of each 4-tuple.
    pub(crate) entries: EntryIndex<N>,
    pub(crate) listener_generations: [u16; MAX_LISTENERS],
    pub(crate) listeners: [Option<Listener>; MAX_LISTENERS],
    pub(crate) timers: TimerWheel<N>,
    pub(crate) buffers: [NegotiationBuffer; B],
    /// Datapath reports taken while the host queue had no room for the records they
    /// raise, oldest first, handled before any later report or frame. The datapath holds
    /// a second report until the first is read, and every flow's receive waits with it,
    /// so the firmware does not leave them there ([`Machine::hold_reports`]). `B` holds
    /// an RTR taken for every connection negotiating at once; past that the datapath
    /// waits as before, and nothing is lost.
    held_reports: Deque<FlowEvent, B>,
    /// `held_reports` is not empty: one load on the path of every report.
    holding_reports: bool,
    published: Counters,
}

/// [`Config`]'s durations in milliseconds, converted once (a 64-bit division each).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub mpa_request: u32,
    pub mpa_reply: u32,
    pub request_ack_delay: u32,
    pub rto_initial: u16,
    pub rto_min: u16,
    pub rto_max: u16,
    pub time_wait: u32,
    pub fin_wait_2: u32,
    pub invalid_ack: u32,
}

impl Timeouts {
    pub(crate) const fn of(config: &Config) -> Timeouts {
        // Deadlines are compared on a wrapping u32 clock: half its range at most.
        const fn ms(d: smoltcp::time::Duration) -> u32 {
            let ms = d.total_millis();
            if ms > (u32::MAX / 2) as u64 {
                u32::MAX / 2
            } else {
                ms as u32
            }
        }
        // RFC 1122 §4.2.3.2: a delayed ACK MUST leave within 0.5 s.
        let request_ack_delay = ms(config.request_ack_delay);
        let request_ack_delay = if request_ack_delay < 500 {
            request_ack_delay
        } else {
            499
        };
        // Retransmission timeouts are kept in 16 bits: at most 65.535 s (RFC 6298 §2.5
        // allows a ceiling of 60 s or more), the floor and the first within it.
        const fn rto_ms(d: smoltcp::time::Duration) -> u16 {
            let ms = ms(d);
            if ms > u16::MAX as u32 {
                u16::MAX
            } else {
                ms as u16
            }
        }
        const fn within(ms: u16, floor: u16, ceiling: u16) -> u16 {
            if ms > ceiling {
                ceiling
            } else if ms < floor {
                floor
            } else {
                ms
            }
        }
        // A ceiling of 0 would make every timeout 0 ms: retries spent in one poll.
        let rto_max = match rto_ms(config.rto_max) {
            0 => 1,
            ms => ms,
        };
        let rto_min = within(rto_ms(config.rto_min), 1, rto_max);
        Timeouts {
            mpa_request: ms(config.mpa_request_timeout),
            mpa_reply: ms(config.mpa_reply_timeout),
            request_ack_delay,
            rto_initial: within(rto_ms(config.rto_initial), 1, rto_max),
            rto_min,
            rto_max,
            time_wait: ms(config.time_wait),
            fin_wait_2: ms(config.fin_wait_2_timeout),
            invalid_ack: ms(config.invalid_ack_interval),
        }
    }
}

/// Where the payload of a segment comes from.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'p> {
    Bytes(&'p [u8]),
    /// The connection's buffered stream bytes, from `skip` on.
    Buffered {
        skip: usize,
    },
}

impl Payload<'_> {
    pub(crate) const NONE: Payload<'static> = Payload::Bytes(&[]);
}

/// Where an event's private data comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrivateData<'p> {
    None,
    /// The application's private data of an MPA frame judged where it arrived.
    Bytes(&'p [u8]),
    /// The MPA frame collected in the connection's negotiation buffer.
    OfReceivedFrame,
}

/// Write `segment` with `payload` into the Nic's transmit slot and queue it: the
/// datapath builds the headers from the descriptor. Inlined into each sender, so the
/// segment is never built on the stack to be read back.
#[inline(always)]
fn transmit<H: Nic>(counters: &mut Counters, nic: &mut H, segment: &SegmentOut, payload: &[u8]) {
    // Payloads are at most one MPA frame and an RTR, so every segment fits.
    let slot = nic.transmit_slot();
    if payload.len() > slot.payload.len() {
        return;
    }
    // The descriptor first: the segment's fields die before the copy's call rather than
    // wait out the call in saved registers.
    slot.descriptor = TxDescriptor::of_segment(segment, payload.len() as u16);
    slot.payload[..payload.len()].copy_from_slice(payload);
    nic.transmit_segment();
    counters.frames_sent += 1;
    if segment.control == TcpControl::Rst {
        counters.resets_sent += 1;
    }
}

/// Write `completion` into a host queue slot. Out of line, so the slot is known to be
/// word-aligned and each field is one store (inlined, the compiler loses the slot's
/// alignment on the way from the queue and stores bytes).
#[inline(never)]
fn emit_completion(out: &mut RecordBuffer, completion: Completion) -> Option<usize> {
    completion.emit(&mut out.0).ok()
}

/// [`transmit`] `payload` in pieces of at most `mss` bytes, `segment`'s control on the
/// last. Cold and out of line: MPA frames fit any common MSS, and a loop around the
/// inlined [`transmit`] costs every sender registers.
#[cold]
#[inline(never)]
fn transmit_in_pieces<H: Nic>(
    counters: &mut Counters,
    nic: &mut H,
    mut segment: SegmentOut,
    mut payload: &[u8],
    mss: usize,
) {
    while payload.len() > mss {
        let (piece, rest) = payload.split_at(mss);
        let leading = SegmentOut {
            control: TcpControl::None,
            ..segment
        };
        transmit(counters, nic, &leading, piece);
        segment.seq = segment.seq.wrapping_add(mss as u32);
        payload = rest;
    }
    transmit(counters, nic, &segment, payload);
}

/// What a host handle names.
pub(crate) enum Lookup {
    Live(usize),
    /// A connection that existed and is gone.
    Gone,
    Unknown,
}

impl<const N: usize, const B: usize> Firmware<N, B> {
    /// A firmware with empty tables. `const`, so a board can place it in a `static`.
    pub const fn new(config: Config) -> Self {
        Firmware {
            machine: Machine::new(config),
        }
    }

    pub fn config(&self) -> &Config {
        &self.machine.config
    }

    pub fn counters(&self) -> &Counters {
        &self.machine.counters
    }

    /// Connections in the table (any state but free).
    pub fn connections(&self) -> usize {
        self.machine.live
    }

    /// Listeners open.
    pub fn listener_count(&self) -> usize {
        self.machine.listening.count_ones() as usize
    }

    /// Negotiation buffers in use.
    pub fn buffers_in_use(&self) -> usize {
        B - self.machine.buffers_free
    }

    /// The state of the connection a host handle names, if it is alive.
    pub fn state(&self, handle: u32) -> Option<State> {
        match self.machine.lookup(handle) {
            Lookup::Live(i) => Some(self.machine.conns[i].state),
            _ => None,
        }
    }

    /// Run everything that is due: host commands, datapath reports, received frames and
    /// timers, in that order, as long as the host queue has room for what they produce.
    /// The first poll starts the firmware's clock.
    pub fn poll<H: Hal>(&mut self, hal: &mut H, now: Instant) {
        let m = &mut self.machine;
        m.set_time(now);
        // Each queue is looked at here, cheaply, and drained out of line only when it
        // holds something: a loop's constants are set up before its first test.
        if hal.next_command().0.is_some() {
            m.take_commands(hal);
        }
        // The frames' drain takes the datapath's reports too (see `take_frames`).
        if hal.next_frame().0.is_some() {
            m.take_frames(hal);
        } else if hal.nic().host_space() >= RECORDS_PER_INPUT {
            if let Some(report) = m.next_report(hal.nic()) {
                m.take_flow_events(hal.nic(), report);
            }
        } else {
            m.hold_reports(hal.nic());
        }
        if m.timers.may_expire(m.now_ms) {
            m.run_timers(hal.nic());
        }
        // Counters reach the register window once per millisecond at most: fresh enough
        // for anyone reading them, and no copy on every poll of a busy millisecond.
        if m.now_ms != m.published_at && m.counters != m.published {
            let nic = hal.nic();
            nic.publish_counters(&m.counters);
            m.published = m.counters;
            m.published_at = m.now_ms;
        }
    }
}

/// The input queues' drains, each out of line: a loop's constants are set up before its
/// first test, so inlined into `poll` every poll paid for all four loops, empty or not.
impl<const N: usize, const B: usize> Machine<N, B> {
    #[inline(never)]
    fn take_commands<H: Hal>(&mut self, hal: &mut H) {
        while hal.nic().host_space() >= RECORDS_PER_INPUT {
            let (Some((record, len)), nic) = hal.next_command() else {
                break;
            };
            self.on_command(nic, &record.0[..len.min(MAX_RECORD_LEN)]);
            hal.pop_command();
        }
    }

    /// The datapath's reports from `first` on, which the caller took: the queue cannot
    /// be looked at without taking its head. Out of line, as the other drains: inlined,
    /// its loop's constants were set up on every poll (+25 a setup).
    #[inline(never)]
    fn take_flow_events<H: Nic>(&mut self, nic: &mut H, first: FlowEvent) {
        let mut report = first;
        loop {
            self.on_flow_event(nic, report);
            if nic.host_space() < RECORDS_PER_INPUT {
                self.hold_reports(nic);
                break;
            }
            let Some(next) = self.next_report(nic) else {
                break;
            };
            report = next;
        }
    }

    /// Before each frame, the datapath's reports: it raises one (an RTR taken) before it
    /// queues the frames after it, so a frame never finds its connection a step behind.
    #[inline(never)]
    fn take_frames<H: Hal>(&mut self, hal: &mut H) {
        loop {
            if hal.nic().host_space() < RECORDS_PER_INPUT {
                self.hold_reports(hal.nic());
                break;
            }
            if let Some(report) = self.next_report(hal.nic()) {
                self.on_flow_event(hal.nic(), report);
                continue;
            }
            let (Some((descriptor, frame)), nic) = hal.next_frame() else {
                break;
            };
            self.counters.frames_received += 1;
            self.on_frame(nic, descriptor, &frame[..frame.len().min(MAX_FRAME_LEN)]);
            hal.pop_frame();
        }
    }

    /// The next datapath report: a held one first.
    #[inline(always)]
    fn next_report<H: Nic>(&mut self, nic: &mut H) -> Option<FlowEvent> {
        if self.holding_reports {
            self.next_held_report(nic)
        } else {
            nic.receive_flow_event()
        }
    }

    #[cold]
    #[inline(never)]
    fn next_held_report<H: Nic>(&mut self, nic: &mut H) -> Option<FlowEvent> {
        let report = self.held_reports.pop_front();
        self.holding_reports = !self.held_reports.is_empty();
        report.or_else(|| nic.receive_flow_event())
    }

    /// Take the datapath's reports while the host queue has no room for their records,
    /// and keep them for when it has (see `held_reports`).
    #[cold]
    #[inline(never)]
    fn hold_reports<H: Nic>(&mut self, nic: &mut H) {
        while !self.held_reports.is_full() {
            let Some(report) = nic.receive_flow_event() else {
                break;
            };
            // Never refused: there is room.
            let _ = self.held_reports.push_back(report);
            self.holding_reports = true;
        }
    }

    #[inline(never)]
    fn run_timers<H: Nic>(&mut self, nic: &mut H) {
        if self.now_ms.wrapping_sub(self.stamps_aged_at) >= STAMP_AGEING_PERIOD_MS {
            self.age_stamps();
        }
        while nic.host_space() >= RECORDS_PER_INPUT {
            let Some(i) = self.timers.next_expired(self.now_ms) else {
                break;
            };
            self.on_timer(nic, i);
        }
    }
}

impl<const N: usize, const B: usize> Machine<N, B> {
    const fn new(config: Config) -> Self {
        assert!(
            B < NO_BUFFER as usize,
            "negotiation buffers are indexed by u16"
        );
        // RFC 7323 §2.3: a shift above 14 is taken as 14, by the peer and here.
        let config = Config {
            window_shift: if config.window_shift > MAX_WINDOW_SHIFT {
                MAX_WINDOW_SHIFT
            } else {
                config.window_shift
            },
            ..config
        };
        let mut buffers = [NegotiationBuffer::EMPTY; B];
        let mut b = 0;
        while b + 1 < B {
            buffers[b].next_free = (b + 1) as u16;
            b += 1;
        }
        Machine {
            config,
            conns: [Conn::FREE; N],
            // The sequence numbers' secret, inverted: the two hashes do not share a key.
            entries: EntryIndex::new(!config.isn_secret),
            live: 0,
            timers: TimerWheel::new(),
            buffers,
            held_reports: Deque::new(),
            holding_reports: false,
            free_buffer_head: if B > 0 { 0 } else { NO_BUFFER },
            buffers_free: B,
            listeners: [None; MAX_LISTENERS],
            listening: 0,
            listener_generations: [FIRST_LISTENER_GENERATION; MAX_LISTENERS],
            next_listener_slot: 0,
            event_seq: 0,
            next_port: 0,
            counters: Counters::ZERO,
            published: Counters::ZERO,
            published_at: u32::MAX,
            started: false,
            stamps_aged_at: 0,
            clock: Clock::NEW,
            now_ms: 0,
            timeouts: Timeouts::of(&config),
        }
    }

    fn set_time(&mut self, now: Instant) {
        let resynced = self.clock.set(now.total_micros());
        self.now_ms = self.clock.millis();
        if resynced {
            self.clock_resynced();
        }
    }

    /// The invalid-segment ACK stamps (`Conn::invalid_acked_at`) are millisecond times
    /// on the 32-bit clock: left alone for 2^32 ms (49.7 days) a stamp would read as new
    /// again and hold back an ACK. So every [`STAMP_AGEING_PERIOD_MS`] the stamps older
    /// than the interval are brought forward to just that age, which changes no verdict
    /// and keeps every stamp well within 2^32 ms of now. Out of line: it runs twice a
    /// month, and from `run_timers` only, which time moving forward calls.
    #[cold]
    #[inline(never)]
    fn age_stamps(&mut self) {
        let (now, interval) = (self.now_ms, self.timeouts.invalid_ack);
        for c in self.conns.iter_mut().filter(|c| c.state != State::Free) {
            if now.wrapping_sub(c.invalid_acked_at) >= interval {
                c.invalid_acked_at = now.wrapping_sub(interval);
            }
        }
        self.stamps_aged_at = now;
    }

    /// The clock was set anew: the first poll starts the timers. Time going backwards,
    /// or forwards by 2^31 ms (24.9 days) or more between two polls, moves them with it:
    /// the wheel's sweep follows time only forwards, and by less than half its wrapping
    /// clock (a timer armed after a step back waited for time to come back to the
    /// sweep; after such a gap no timer ran until the clock had gone round again).
    /// Deadlines stay where they are, so a timer fires when time reaches its deadline
    /// and never before; one that fell due in a gap is due now, and one the step put
    /// further ahead than the clock tells is kept at the furthest it can. So are the
    /// phase deadlines the states compare with; the interval between invalid-segment
    /// ACKs starts afresh. Cold: a pass over every connection.
    #[cold]
    #[inline(never)]
    fn clock_resynced(&mut self) {
        let now = self.now_ms;
        if !self.started {
            self.started = true;
            self.stamps_aged_at = now;
            return self.timers.start(now);
        }
        let step = self.clock.resync_step_ms();
        if (0..1 << 31).contains(&step) {
            return;
        }
        let before = now.wrapping_sub(step as u32);
        let moved = |t: u32| {
            let left = i64::from(t.wrapping_sub(before) as i32) - step;
            now.wrapping_add(left.clamp(0, i64::from(i32::MAX)) as u32)
        };
        let invalid_acked_at = now.wrapping_sub(self.timeouts.invalid_ack);
        for c in self.conns.iter_mut().filter(|c| c.state != State::Free) {
            c.phase_deadline = moved(c.phase_deadline);
            c.invalid_acked_at = invalid_acked_at;
        }
        self.stamps_aged_at = now;
        self.timers.restart(now, moved);
    }

    // ---- table ----------------------------------------------------------------------

    pub(crate) fn handle(&self, i: usize) -> u32 {
        u32::from(self.conns[i].generation) << 16 | i as u32
    }

    /// The live connection of `tuple`.
    pub(crate) fn find(&self, tuple: &FourTuple) -> Option<usize> {
        self.entries.find(tuple, |i| self.conns[i].tuple == *tuple)
    }

    pub(crate) fn lookup(&self, handle: u32) -> Lookup {
        let (i, generation) = ((handle & 0xFFFF) as usize, (handle >> 16) as u16);
        let Some(c) = self.conns.get(i) else {
            return Lookup::Unknown;
        };
        if generation % 2 != FIRST_CONNECTION_GENERATION % 2 {
            // A listener's handle, or none at all.
            Lookup::Unknown
        } else if c.generation == generation && c.owed != Owed::Nothing {
            Lookup::Live(i)
        } else if c.generation != generation {
            // Generations grow when a handle dies: this one is of an earlier connection
            // (all 32,767 other odd generations are: one ahead cannot have been given).
            Lookup::Gone
        } else {
            Lookup::Unknown
        }
    }

    /// A fresh entry for `tuple` in `state`, or `None` when the table is full.
    pub(crate) fn alloc(
        &mut self,
        tuple: FourTuple,
        remote_mac: [u8; 6],
        state: State,
    ) -> Option<usize> {
        let Some(i) = self.entries.take(&tuple) else {
            self.counters.table_full += 1;
            return None;
        };
        let generation = self.conns[i].generation;
        self.conns[i] = Conn {
            state,
            generation,
            tuple,
            remote_mac,
            rto: self.timeouts.rto_initial,
            rto_base: self.timeouts.rto_initial,
            // The first ACK to an invalid segment may go at once.
            invalid_acked_at: self.now_ms.wrapping_sub(self.timeouts.invalid_ack),
            ..Conn::FREE
        };
        self.live += 1;
        Some(i)
    }

    /// Return an entry to the free list; the host is owed nothing more by then.
    pub(crate) fn free(&mut self, i: usize) {
        if self.conns[i].state == State::Free {
            return;
        }
        self.detach(i);
        self.release_buffer(i);
        self.leave_listener(i);
        self.timers.disarm(i);
        self.entries.give_back(i, &self.conns[i].tuple);
        let generation = self.conns[i].generation;
        self.conns[i] = Conn {
            generation,
            ..Conn::FREE
        };
        self.live -= 1;
        self.counters.connections_closed += 1;
    }

    /// The host's handle dies: nothing more is owed and commands on it find it gone.
    pub(crate) fn detach(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.owed != Owed::Nothing {
            c.owed = Owed::Nothing;
            c.generation = next_generation(c.generation);
        }
    }

    /// Drop the connection's claims on its listener's counts. Inlined: see
    /// [`Machine::send_staged`].
    #[inline(always)]
    pub(crate) fn leave_listener(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let state = c.state;
        if let Some(Some(l)) = self.listeners.get_mut(usize::from(c.listener)) {
            match state {
                State::SynReceived | State::AwaitRequest => {
                    l.half_open = l.half_open.saturating_sub(1)
                }
                State::AwaitAccept => l.pending = l.pending.saturating_sub(1),
                _ => {}
            }
        }
        c.listener = NO_LISTENER;
    }

    pub(crate) fn take_buffer<H: Nic>(&mut self, nic: &mut H, i: usize) -> Option<usize> {
        if self.conns[i].buffer != NO_BUFFER {
            return Some(usize::from(self.conns[i].buffer));
        }
        match self.pop_free_buffer(i) {
            Some(b) => Some(b),
            None => self.take_reclaimed_buffer(nic, i),
        }
    }

    /// A buffer for the host's accept, reject or connect, which must not be held up by
    /// the network: with every buffer held, the connection whose MPA request has been
    /// arriving the longest, in pieces, is reset and gives its own; failing that, one
    /// that is closing (a refusal, or a reply the host then disconnected, not yet
    /// acknowledged); both counted. Without it eight peers trickling a byte of a request
    /// each held the pool for the 5 s request timer, or eight refused peers that never
    /// acknowledge their reject held it for the FIN's whole retransmission span; every
    /// accept of a request that did arrive failed with -ENOBUFS, and every reject reset
    /// its peer instead of sending it the reply with R=1.
    /// Always inlined, the eviction out of line (measured: +28 instructions a setup with
    /// this out of line, +4 inlined).
    #[inline(always)]
    pub(crate) fn take_buffer_for_host<H: Nic>(&mut self, nic: &mut H, i: usize) -> Option<usize> {
        match self.take_buffer(nic, i) {
            Some(b) => Some(b),
            None => self.take_evicted_buffer(nic, i),
        }
    }

    /// Reset the connection holding a buffer for the request it has been receiving the
    /// longest (its request timer ends first), else one holding a buffer while it closes,
    /// and give its buffer to `i`; `None` if no buffer is held by either.
    #[cold]
    #[inline(never)]
    fn take_evicted_buffer<H: Nic>(&mut self, nic: &mut H, i: usize) -> Option<usize> {
        let (mut slowest, mut closing): (Option<usize>, Option<usize>) = (None, None);
        for b in 0..self.buffers.len() {
            let Some(owner) = self.holder(b) else {
                continue;
            };
            let c = &self.conns[owner];
            match c.state {
                State::AwaitRequest => {
                    let sooner = |s: usize| {
                        (c.phase_deadline.wrapping_sub(self.conns[s].phase_deadline) as i32) < 0
                    };
                    if slowest.is_none_or(sooner) {
                        slowest = Some(owner);
                    }
                }
                State::FinWait1
                | State::FinWait2
                | State::Closing
                | State::TimeWait
                | State::LastAck => {
                    closing.get_or_insert(owner);
                }
                _ => {}
            }
        }
        let evicted = match (slowest, closing) {
            (Some(request), _) => {
                self.counters.requests_evicted += 1;
                request
            }
            (None, Some(closing)) => {
                self.counters.closings_evicted += 1;
                closing
            }
            (None, None) => return None,
        };
        self.abort(nic, evicted, -ECONNRESET);
        self.pop_free_buffer(i)
    }

    /// The connection holding buffer `b`: its last taker, while its `buffer` still names
    /// `b` (a buffer on the free list names a taker that let it go).
    fn holder(&self, b: usize) -> Option<usize> {
        let owner = usize::from(self.buffers.get(b)?.owner);
        (usize::from(self.conns.get(owner)?.buffer) == b).then_some(owner)
    }

    /// The free list's head, given to connection `i`.
    #[inline(always)]
    fn pop_free_buffer(&mut self, i: usize) -> Option<usize> {
        let b = self.free_buffer_head;
        let buf = self.buffers.get_mut(usize::from(b))?;
        self.free_buffer_head = buf.next_free;
        self.buffers_free -= 1;
        (buf.tx_len, buf.rx_len, buf.tx_seq, buf.next_free) = (0, 0, 0, NO_BUFFER);
        buf.owner = i as u16;
        self.conns[i].buffer = b;
        Some(usize::from(b))
    }

    /// Every buffer is taken: those of connections in FPDU mode whose bytes the
    /// datapath has seen acknowledged go back to the pool, and `i` takes one of them.
    /// Such a connection (an accept without peer-to-peer, its reply not yet acknowledged
    /// when the flow was handed over) looks only when its retransmission timer fires, an
    /// RTO later, so without this a burst of accepts would find the pool held by replies
    /// long acknowledged. Cold: a flow read per buffer, out of line.
    #[cold]
    #[inline(never)]
    fn take_reclaimed_buffer<H: Nic>(&mut self, nic: &mut H, i: usize) -> Option<usize> {
        for b in 0..self.buffers.len() {
            let Some(owner) = self.holder(b) else {
                continue;
            };
            if !self.conns[owner].datapath_numbers_current() {
                continue;
            }
            if self.release_acknowledged_buffer(nic, owner).is_none() {
                self.counters.buffers_reclaimed += 1;
                self.timers.disarm(owner);
            }
        }
        let taken = self.pop_free_buffer(i);
        self.counters.buffers_exhausted += u32::from(taken.is_none());
        taken
    }

    pub(crate) fn buffer(&self, i: usize) -> Option<&NegotiationBuffer> {
        self.buffers.get(usize::from(self.conns[i].buffer))
    }

    pub(crate) fn buffer_mut(&mut self, i: usize) -> Option<&mut NegotiationBuffer> {
        self.buffers.get_mut(usize::from(self.conns[i].buffer))
    }

    pub(crate) fn release_buffer(&mut self, i: usize) {
        let b = core::mem::replace(&mut self.conns[i].buffer, NO_BUFFER);
        if let Some(buf) = self.buffers.get_mut(usize::from(b)) {
            buf.next_free = self.free_buffer_head;
            self.free_buffer_head = b;
            self.buffers_free += 1;
        }
    }

    // ---- time -----------------------------------------------------------------------

    /// The millisecond `ms` from now.
    pub(crate) fn after(&self, ms: u32) -> u32 {
        self.now_ms.wrapping_add(ms)
    }

    /// Arm the connection's timer for the earlier of its retransmission timeout (when
    /// `retransmitting`) and its phase deadline (when `phase`). Always inlined: its
    /// callers pass constant flags, and a copy specialised to them is barely larger than
    /// the call (measured: −12 instructions a setup, +110 bytes of code).
    #[inline(always)]
    pub(crate) fn arm(&mut self, i: usize, retransmitting: bool, phase: bool) {
        let c = &self.conns[i];
        let rto = self.now_ms.wrapping_add(u32::from(c.rto));
        let at = match (retransmitting, phase) {
            (true, true) if (c.phase_deadline.wrapping_sub(rto) as i32) < 0 => c.phase_deadline,
            (true, _) => rto,
            (false, true) => c.phase_deadline,
            (false, false) => return self.timers.disarm(i),
        };
        self.timers.arm(i, at);
    }

    /// Restart retransmission from the connection's base timeout.
    pub(crate) fn reset_backoff(&mut self, i: usize) {
        let c = &mut self.conns[i];
        c.retries = 0;
        c.rto = c.rto_base;
    }

    /// Set the connection's base timeout from its handshake, which has just completed
    /// (RFC 6298): its one round-trip sample R gives SRTT + 4·RTTVAR = 3R (§2.2), at
    /// least `rto_min` and at most `rto_initial` (and `rto_max`). A retransmitted SYN or
    /// SYN-ACK gives no sample (Karn, §3) and the base stays `rto_initial`. The sample
    /// only ever shortens the timeout: R is timed to when the firmware took the ACK, and
    /// while the host queue has no room it takes no frame, so a host that stalls would
    /// stretch every later timeout past the MPA timers. The SYN or SYN-ACK went out one RTO
    /// before its retransmission is due, so the timer gives R without a send time in the
    /// entry. (A SYN-ACK sent again for the peer's repeated SYN does not move the timer:
    /// R is then measured from the first, too long, never too short.) Without a sample
    /// every later timeout started at `rto_initial` (1 s), and a lossy link gave the MPA
    /// request and reply four tries inside the 10 s reply timer where Linux, measuring,
    /// gets six.
    ///
    /// RFC 6298 §5.7 asks for 3 s after a retransmitted handshake, against a path slower
    /// than the 1 s initial timeout. Linux measures that handshake all the same (the
    /// timestamp option names the SYN answered; iwnic sends no timestamps), and with 3 s
    /// a lost SYN left the MPA request two tries inside the responder's 5 s request
    /// timer: 20 % loss then failed up to 4 setups of 64 and a lossy-link test ran past
    /// its 20 s patience.
    pub(crate) fn time_handshake(&mut self, i: usize) {
        let t = self.timeouts;
        let c = &self.conns[i];
        let rto = match (c.retries, self.timers.deadline(i)) {
            (0, Some(due)) => {
                let sent = due.wrapping_sub(u32::from(c.rto));
                let rtt = self.now_ms.wrapping_sub(sent).min(u32::from(u16::MAX));
                (3 * rtt)
                    .min(u32::from(t.rto_initial))
                    .max(u32::from(t.rto_min))
                    .min(u32::from(t.rto_max)) as u16
            }
            _ => t.rto_initial,
        };
        let c = &mut self.conns[i];
        c.rto_base = rto;
        c.rto = rto;
    }

    /// Count a retransmission and double the timeout; `false` when retries ran out.
    pub(crate) fn back_off(&mut self, i: usize, limit: u8) -> bool {
        let max = self.timeouts.rto_max;
        let c = &mut self.conns[i];
        if c.retries >= limit {
            return false;
        }
        c.retries += 1;
        c.rto = c.rto.saturating_mul(2).min(max);
        self.counters.retransmissions += 1;
        true
    }

    pub(crate) fn phase_due(&self, i: usize) -> bool {
        (self.now_ms.wrapping_sub(self.conns[i].phase_deadline) as i32) >= 0
    }

    /// RFC 6528 initial sequence number: the 4 µs clock plus a keyed hash of the 4-tuple.
    pub(crate) fn isn(&self, t: &FourTuple) -> u32 {
        let mut h = WordHasher(self.config.isn_secret);
        t.hash(&mut h);
        self.clock.isn_ticks().wrapping_add(h.finish() as u32)
    }

    // ---- output ---------------------------------------------------------------------

    /// Send a segment of connection `i`: `control`, sequence number `seq`, acknowledging
    /// `rcv_nxt` (except on an active SYN), with `payload`; as several when the payload
    /// exceeds the peer's MSS (RFC 9293 §3.7.1), `control` on the last.
    ///
    /// Hinted inline: LLVM then writes the SYN-ACK's and the reply's descriptors in
    /// their senders, whose fields it has in registers (measured: −45 instructions a
    /// setup, +1 KB of code).
    #[inline]
    pub(crate) fn send<H: Nic>(
        &mut self,
        nic: &mut H,
        i: usize,
        control: TcpControl,
        seq: u32,
        payload: Payload,
    ) {
        // Field by field, so the payload can come from a negotiation buffer while the
        // counters change.
        let Machine {
            conns,
            buffers,
            counters,
            config,
            ..
        } = self;
        let c = &conns[i];
        // Only stream bytes (an MPA frame, up to 532, and the RTR after it) can exceed
        // the send MSS: control segments carry none, a TERM fits the smallest taken.
        let (payload, mss): (&[u8], usize) = match payload {
            Payload::Bytes(bytes) => (bytes, usize::MAX),
            Payload::Buffered { skip } => (
                buffers
                    .get(usize::from(c.buffer))
                    .and_then(|b| b.tx().get(skip..))
                    .unwrap_or(&[]),
                usize::from(c.peer_mss.min(config.mss)),
            ),
        };
        let syn = control == TcpControl::Syn;
        let segment = SegmentOut {
            src_mac: config.mac,
            dst_mac: c.remote_mac,
            src_ip: c.tuple.local_ip,
            dst_ip: c.tuple.remote_ip,
            src_port: c.tuple.local_port,
            dst_port: c.tuple.remote_port,
            control,
            seq,
            ack: (!(syn && c.state == State::SynSent)).then_some(c.rcv_nxt),
            window: config.window,
            // Our SYN offers window scaling; a SYN-ACK answers with it only if the
            // peer's SYN did (RFC 7323 §2.2).
            syn_options: syn.then_some((
                config.mss,
                (c.state == State::SynSent || c.peer_window_shift != NO_WINDOW_SCALING)
                    .then_some(config.window_shift),
            )),
        };
        if payload.len() > mss {
            return transmit_in_pieces(counters, nic, segment, payload, mss);
        }
        transmit(counters, nic, &segment, payload);
    }

    /// Send a segment without payload from the addresses alone, not from a connection's
    /// state: an RST to a segment nobody takes, a challenge ACK.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_stray<H: Nic>(
        &mut self,
        nic: &mut H,
        tuple: &FourTuple,
        remote_mac: [u8; 6],
        control: TcpControl,
        seq: u32,
        ack: Option<u32>,
        window: u16,
    ) {
        let segment = SegmentOut {
            src_mac: self.config.mac,
            dst_mac: remote_mac,
            src_ip: tuple.local_ip,
            dst_ip: tuple.remote_ip,
            src_port: tuple.local_port,
            dst_port: tuple.remote_port,
            control,
            seq,
            ack,
            window,
            syn_options: None,
        };
        transmit(&mut self.counters, nic, &segment, &[]);
    }

    /// Send RST at `snd_nxt`.
    pub(crate) fn send_rst<H: Nic>(&mut self, nic: &mut H, i: usize) {
        let seq = self.conns[i].snd_nxt;
        self.send(nic, i, TcpControl::Rst, seq, Payload::NONE);
    }

    /// Complete the host command `tag`. Always inlined: an accept's completion, out of
    /// line, paid a call and its saved registers (measured: −16 instructions a setup,
    /// and less code).
    #[inline(always)]
    pub(crate) fn complete<H: Nic>(&mut self, nic: &mut H, tag: u32, status: i32, handle: u32) {
        if status != 0 {
            self.counters.commands_failed += 1;
        }
        let completion = Completion {
            tag,
            status,
            handle,
        };
        if let Some(len) = emit_completion(nic.record_buffer(), completion) {
            nic.push_record(len);
        }
    }

    /// Raise an event about connection `i`, carrying `private_data`. Inlined: see
    /// [`Machine::send_staged`].
    #[inline(always)]
    pub(crate) fn raise<H: Nic>(
        &mut self,
        nic: &mut H,
        i: usize,
        kind: EventKind,
        status: i32,
        private_data: PrivateData<'_>,
    ) {
        if let Some(len) = self.emit_event(nic.record_buffer(), i, kind, status, private_data) {
            nic.push_record(len);
            self.counters.events_raised += 1;
        }
    }

    /// Write the event into a host queue slot; out of line for the slot's alignment, as
    /// [`emit_completion`].
    #[inline(never)]
    fn emit_event(
        &mut self,
        out: &mut RecordBuffer,
        i: usize,
        kind: EventKind,
        status: i32,
        private_data: PrivateData<'_>,
    ) -> Option<usize> {
        let Machine {
            conns,
            buffers,
            listener_generations,
            event_seq,
            config,
            ..
        } = self;
        let c = &conns[i];
        let (ird, ord, listener) = match kind {
            EventKind::ConnectRequest => {
                let generation = listener_generations
                    .get(usize::from(c.listener))
                    .copied()
                    .unwrap_or(0);
                // The initiator's IRD and ORD as far as this device can honour them, so
                // an application may accept with them as they are: its IRD bounds our
                // ORD and its ORD our IRD (RFC 6581 §5; rdma_cm accepts with ord = the
                // event's ird, ird = its ord). A revision-1 request (no negotiation,
                // 0x3FFF) offers the device's limits, crossed the same way.
                (
                    c.neg.peer_ird.min(config.max_ord),
                    c.neg.peer_ord.min(config.max_ird),
                    u32::from(generation) << 16 | u32::from(c.listener),
                )
            }
            _ => (c.neg.ird, c.neg.ord, 0),
        };
        let private_data = match private_data {
            PrivateData::None => &[][..],
            PrivateData::Bytes(bytes) => bytes,
            // The application's part of the MPA frame collected in the negotiation buffer.
            PrivateData::OfReceivedFrame => buffers
                .get(usize::from(c.buffer))
                .and_then(|b| FrameRepr::parse_bytes(b.rx()).ok())
                .map_or(&[][..], |frame| frame.private_data),
        };
        // Peer-to-peer mode's RTR (the one chosen) on the events that end a setup. (Only
        // ever one type by then; a record naming more would be refused, and lost.)
        let named = c.neg.peer_to_peer && c.neg.rtr.count() == 1;
        let rtr = match named && Event::may_name_rtr(kind, status) {
            true => c.neg.rtr,
            false => RtrTypes::NONE,
        };
        *event_seq = event_seq.wrapping_add(1);
        let event = Event {
            seq: *event_seq,
            kind,
            conn: u32::from(c.generation) << 16 | i as u32,
            listener,
            status,
            local: Endpoint::v4(c.tuple.local_ip, c.tuple.local_port),
            remote: Endpoint::v4(c.tuple.remote_ip, c.tuple.remote_port),
            ird,
            ord,
            rtr,
            private_data,
        };
        event.emit(&mut out.0).ok()
    }

    /// Give the host what it is owed for a connection that failed with `status`, then
    /// forget the handle.
    pub(crate) fn settle<H: Nic>(&mut self, nic: &mut H, i: usize, status: i32) {
        match self.conns[i].owed {
            Owed::Nothing | Owed::Answer => {}
            Owed::ConnectReply => {
                self.raise(nic, i, EventKind::ConnectReply, status, PrivateData::None)
            }
            Owed::Established => {
                self.raise(nic, i, EventKind::Established, 0, PrivateData::None);
                self.raise(nic, i, EventKind::Close, status, PrivateData::None);
            }
            Owed::Close => self.raise(nic, i, EventKind::Close, status, PrivateData::None),
        }
        self.detach(i);
    }

    /// Abort: RST if the peer knows the connection, settle with `status`, free.
    pub(crate) fn abort<H: Nic>(&mut self, nic: &mut H, i: usize, status: i32) {
        fw_debug!("connection {=usize} aborted, status {=i32}", i, status);
        self.take_back_flow(nic, i);
        if self.conns[i].state != State::SynSent && self.conns[i].state != State::TimeWait {
            self.send_rst(nic, i);
        }
        self.drop_connection(nic, i, status);
    }

    /// The connection ends without a word to the peer (it reset us, or never answered).
    pub(crate) fn drop_connection<H: Nic>(&mut self, nic: &mut H, i: usize, status: i32) {
        self.take_back_flow(nic, i);
        self.settle(nic, i, status);
        self.free(i);
    }

    /// Hand connection `i` to the datapath at its current sequence numbers. Inlined: see
    /// [`Machine::send_staged`].
    ///
    /// [`FlowTableFull`], counted, when the datapath cannot carry the flow. The firmware
    /// has no path of its own for FPDUs, so the caller ends the connection. The context
    /// is written either way, so the connection counts as in the datapath until it is
    /// taken back.
    #[inline(always)]
    pub(crate) fn install_flow<H: Nic>(
        &mut self,
        nic: &mut H,
        i: usize,
        rtr_expected: bool,
        write: FlowWrite,
    ) -> Result<(), FlowTableFull> {
        let ctx = self.flow_context(i, rtr_expected);
        let installed = nic.write_flow(&ctx, write);
        self.conns[i].in_datapath = true;
        if installed.is_err() {
            self.counters.flow_table_full += 1;
        }
        installed
    }

    /// End FPDU mode for `i`: read the datapath's sequence numbers back and remove the flow.
    pub(crate) fn take_back_flow<H: Nic>(&mut self, nic: &mut H, i: usize) {
        if !self.conns[i].in_datapath {
            return;
        }
        self.conns[i].in_datapath = false;
        let ctx = nic.read_flow(i as u16);
        nic.remove_flow(i as u16);
        // Current once the datapath carries the flow in FPDU mode: that includes an RTR it
        // took whose report the firmware has not seen yet (a host command or a timer may
        // end the connection first).
        if let Some(ctx) = ctx.filter(|ctx| !ctx.rtr_expected) {
            let c = &mut self.conns[i];
            c.snd_una = ctx.snd_una;
            c.snd_nxt = ctx.snd_nxt;
            c.rcv_nxt = ctx.rcv_nxt;
        }
    }

    /// The flow context of connection `i` as it enters FPDU mode.
    pub(crate) fn flow_context(&self, i: usize, rtr_expected: bool) -> FlowContext {
        let c = &self.conns[i];
        let scaling = c.peer_window_shift != NO_WINDOW_SCALING;
        FlowContext {
            index: i as u16,
            tuple: c.tuple,
            local_mac: self.config.mac,
            remote_mac: c.remote_mac,
            snd_una: c.snd_una,
            snd_nxt: c.snd_nxt,
            rcv_nxt: c.rcv_nxt,
            peer_window: c.peer_window,
            peer_window_shift: if scaling { c.peer_window_shift } else { 0 },
            local_window_shift: if scaling { self.config.window_shift } else { 0 },
            mss: c.peer_mss.min(self.config.mss),
            crc: true,
            rtr_expected,
        }
    }

    // ---- timers ---------------------------------------------------------------------

    fn on_timer<H: Nic>(&mut self, nic: &mut H, i: usize) {
        let (syn_retries, data_retries) = (self.config.syn_retries, self.config.data_retries);
        match self.conns[i].state {
            State::Free => {}
            State::SynSent => {
                if self.back_off(i, syn_retries) {
                    let iss = self.conns[i].snd_una;
                    self.send(nic, i, TcpControl::Syn, iss, Payload::NONE);
                    self.arm(i, true, false);
                } else {
                    self.counters.connect_timeouts += 1;
                    self.settle(nic, i, -ETIMEDOUT);
                    self.free(i);
                }
            }
            State::SynReceived => {
                if self.back_off(i, syn_retries) {
                    let iss = self.conns[i].snd_una;
                    self.send(nic, i, TcpControl::Syn, iss, Payload::NONE);
                    self.arm(i, true, false);
                } else {
                    self.counters.handshake_timeouts += 1;
                    self.free(i);
                }
            }
            State::AwaitRequest => {
                self.counters.mpa_request_timeouts += 1;
                self.abort(nic, i, -ETIMEDOUT);
            }
            State::AwaitReply | State::AwaitRtr if self.phase_due(i) => {
                if self.conns[i].state == State::AwaitReply {
                    self.counters.mpa_reply_timeouts += 1;
                }
                self.abort(nic, i, -ETIMEDOUT);
            }
            // The retransmission timer is left running when the peer acknowledges our
            // bytes (the usual ACK rides with the RTR, which ends the phase anyway): if
            // it fires with nothing to send again, only the phase timer is left.
            State::AwaitReply | State::AwaitRtr
                if self.buffer(i).is_some_and(|b| b.tx_len == 0) =>
            {
                self.arm(i, false, true)
            }
            // Our Read RTR is acknowledged and its Read Response did not come within the
            // reply timeout: hand over without it, as to a responder that never answers.
            State::AwaitRtrAck if self.conns[i].snd_una == self.conns[i].snd_nxt => {
                self.conns[i].neg.read_response_due = false;
                self.enter_fpdu_mode_active(nic, i, FlowWrite::Install);
            }
            State::AwaitReply | State::AwaitRtr | State::AwaitRtrAck => {
                if self.back_off(i, data_retries) {
                    self.retransmit_stream(nic, i, TcpControl::Psh);
                    let phase = self.conns[i].state != State::AwaitRtrAck;
                    self.arm(i, true, phase);
                } else {
                    self.counters.retransmit_timeouts += 1;
                    self.abort(nic, i, -ETIMEDOUT);
                }
            }
            State::Established => self.check_handed_off_bytes(nic, i),
            State::FinWait1 | State::Closing | State::LastAck => {
                if self.back_off(i, data_retries) {
                    self.retransmit_stream(nic, i, TcpControl::Fin);
                    self.arm(i, true, false);
                } else {
                    self.counters.retransmit_timeouts += 1;
                    self.abort(nic, i, -ETIMEDOUT);
                }
            }
            State::FinWait2 => {
                self.settle(nic, i, -ETIMEDOUT);
                self.free(i);
            }
            State::TimeWait => self.free(i),
            // The host has not answered within the delay: the request's ACK goes alone.
            State::AwaitAccept => self.send_ack(nic, i),
        }
    }

    /// Send again what the peer has not acknowledged and we hold: the buffered stream
    /// bytes from `snd_una` (MPA frames, the RTR) and, with `control` FIN, the FIN at its
    /// own sequence number `snd_nxt - 1`: riding on the bytes when they end there, alone
    /// otherwise (bytes the datapath sent in FPDU mode and the peer has not acknowledged
    /// lie between them; they are not ours to send again).
    pub(crate) fn retransmit_stream<H: Nic>(&mut self, nic: &mut H, i: usize, control: TcpControl) {
        let (snd_una, snd_nxt) = (self.conns[i].snd_una, self.conns[i].snd_nxt);
        let (skip, len) = match self.buffer(i) {
            Some(b) => {
                let skip = snd_una.wrapping_sub(b.tx_seq) as usize;
                (skip, b.tx().len().saturating_sub(skip))
            }
            None => (0, 0),
        };
        let fin_seq = snd_nxt.wrapping_sub(1);
        let fin = control == TcpControl::Fin && snd_una != snd_nxt;
        let fin_rides = fin && snd_una.wrapping_add(len as u32) == fin_seq;
        if len > 0 {
            let control = if fin_rides {
                TcpControl::Fin
            } else {
                TcpControl::Psh
            };
            self.send(nic, i, control, snd_una, Payload::Buffered { skip });
        }
        if fin && !(fin_rides && len > 0) {
            self.send(nic, i, TcpControl::Fin, fin_seq, Payload::NONE);
        }
    }

    /// In FPDU mode, connection `i`'s buffered bytes (the MPA reply) as the datapath has
    /// them acknowledged: once it has seen all of them acknowledged the buffer goes back
    /// to the pool, and also when it holds no context to tell (a datapath that lost the
    /// flow: nothing could be sent again at its numbers, and holding the buffer to the
    /// close would keep it from other negotiations). Else the context, to send them again.
    fn release_acknowledged_buffer<H: Nic>(
        &mut self,
        nic: &mut H,
        i: usize,
    ) -> Option<FlowContext> {
        let ctx = nic.read_flow(i as u16);
        let acknowledged = match (self.buffer(i), ctx) {
            (Some(buffer), Some(ctx)) => buffer.acknowledged_by(ctx.snd_una),
            _ => true,
        };
        if acknowledged {
            self.release_buffer(i);
            return None;
        }
        ctx
    }

    /// In FPDU mode with bytes of ours (MPA reply) still buffered: free them once the
    /// datapath saw them acknowledged, or send them again.
    fn check_handed_off_bytes<H: Nic>(&mut self, nic: &mut H, i: usize) {
        let Some(tx_end) = self.buffer(i).map(NegotiationBuffer::tx_end) else {
            return;
        };
        if !self.conns[i].in_datapath {
            return;
        }
        let Some(ctx) = self.release_acknowledged_buffer(nic, i) else {
            return;
        };
        if !self.back_off(i, self.config.data_retries) {
            self.counters.retransmit_timeouts += 1;
            return self.abort(nic, i, -ETIMEDOUT);
        }
        self.conns[i].snd_una = ctx.snd_una;
        self.conns[i].rcv_nxt = ctx.rcv_nxt;
        // A retransmission must not move snd_nxt: send from snd_una to the buffer's end.
        let saved = self.conns[i].snd_nxt;
        self.conns[i].snd_nxt = tx_end;
        self.retransmit_stream(nic, i, TcpControl::Psh);
        self.conns[i].snd_nxt = saved;
        self.arm(i, true, false);
    }
}
