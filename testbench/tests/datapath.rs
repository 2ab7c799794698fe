//! Conformance of `nic_top` to the behavioural model (`ModelDatapath`), on Verilator and
//! on RustHDL's simulator.
//!
//! A test is a sequence of operations on the datapath's ports — flow contexts written,
//! read and removed, frames from the network and from the firmware, ULPDUs from the host —
//! applied one at a time to the model and to each HDL engine; after each one the HDL runs
//! until every input has been taken and its ports have been quiet for [`QUIET`] cycles.
//! Then everything that came out is compared with what the model put out for that
//! operation: frames to the network (exact bytes, in order), frames to the firmware,
//! ULPDUs to the host with their connection index, flow events, the answer to a context
//! command (a read's context, whether a write's tuple went into the flow table), and
//! the counters. The two HDL engines must also agree with each other exactly, down to
//! the cycle each network frame finished on.
//!
//! - [`scripted_sequence_on_verilator`]: a hand-written sequence covering each case the
//!   model distinguishes; [`short_scripted_sequence_on_both_engines`]: the same cases in
//!   fewer operations, on RustHDL too (its simulator is slow), cycle for cycle.
//! - [`random_sequences_on_verilator`]: many seeded random sequences, against the model.
//! - [`random_sequence_on_both_engines`]: a short random sequence on RustHDL (slow) and
//!   Verilator, against the model and each other.
//!
//! A random failure is shrunk (operations removed while it still fails) and the shortest
//! failing sequence is printed. Run with `-- --nocapture` to see each engine's speed.
//! `IWNIC_DATAPATH_CASES` and `IWNIC_DATAPATH_SEED` change the random runs.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Instant;

use iwnic_firmware::{
    FlowContext, FlowEvent, FlowEventKind, FlowTableFull, FlowWrite, FourTuple, MAX_FRAME_LEN,
};
use iwnic_hdl::nic_top::MAX_RX_ULPDU_LEN;
use iwnic_proto::ddp::MessageRepr;
use iwnic_proto::fpdu::{fpdu_len, max_ulpdu_len, FpduRepr};
use iwnic_proto::mpa::RtrTypes;
use iwnic_proto::net::{self, Checksums, RxDescriptor, SegmentOut, TcpSegment, TxDescriptor};
use iwnic_proto::smoltcp_wire::TcpControl;
use iwnic_testbench::engine::{firmware_tx_packet, DatapathCounters, Engine};
use iwnic_testbench::hdl_engine::{HdlEngine, PortSim, RustHdl, Verilated};
use iwnic_testbench::link::refill_tcp_checksum;
use iwnic_testbench::model::{flow_table_bucket, ModelDatapath};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const NIC_IP: [u8; 4] = [10, 0, 0, 1];
const NIC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
/// Cycles of silence at every port after which an operation counts as finished.
const QUIET: u64 = 256;
/// Most cycles one operation may take.
const OP_LIMIT: u64 = 200_000;

/// One operation on the datapath's ports.
#[derive(Clone, PartialEq, Eq)]
enum Op {
    Write(FlowContext, FlowWrite),
    Read(u16),
    Remove(u16),
    Net(Vec<u8>),
    /// Frames arriving back to back: the HDL takes the next while it still delivers the
    /// last, the model one after the other.
    NetBurst(Vec<Vec<u8>>),
    Firmware(Vec<u8>),
    Host(u16, Vec<u8>),
}

/// Frames shown as their length and a summary of their TCP header.
fn frame_summary(frame: &[u8]) -> String {
    use iwnic_proto::net::TcpSegment;
    match TcpSegment::parse(frame, Checksums::Offloaded) {
        Ok(s) => format!(
            "{} B {}.{}.{}.{}:{} > {}.{}.{}.{}:{} {:?} seq {:#x} ack {:?} win {} payload {}",
            frame.len(),
            s.src_ip[0],
            s.src_ip[1],
            s.src_ip[2],
            s.src_ip[3],
            s.src_port,
            s.dst_ip[0],
            s.dst_ip[1],
            s.dst_ip[2],
            s.dst_ip[3],
            s.dst_port,
            s.control,
            s.seq,
            s.ack.map(|a| format!("{a:#x}")),
            s.window,
            s.payload.len()
        ),
        Err(e) => format!("{} B ({e:?})", frame.len()),
    }
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Write(ctx, write) => write!(f, "write_flow({ctx:?}, {write:?})"),
            Op::Read(index) => write!(f, "read_flow({index})"),
            Op::Remove(index) => write!(f, "remove_flow({index})"),
            Op::Net(frame) => write!(f, "net_receive({})", frame_summary(frame)),
            Op::NetBurst(frames) => {
                let frames: Vec<String> = frames.iter().map(|fr| frame_summary(fr)).collect();
                write!(f, "net_receive back to back({frames:?})")
            }
            Op::Firmware(packet) => write!(f, "firmware_transmit({})", segment_summary(packet)),
            Op::Host(index, ulpdu) => write!(f, "host_transmit({index}, {} B)", ulpdu.len()),
        }
    }
}

/// What came out of an engine after one operation.
#[derive(Clone, Default, PartialEq, Eq)]
struct Outcome {
    net: Vec<Vec<u8>>,
    firmware: Vec<Vec<u8>>,
    host: Vec<(u16, Vec<u8>)>,
    events: Vec<FlowEvent>,
    answer: Answer,
    counters: DatapathCounters,
}

/// What a context command answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Answer {
    #[default]
    Nothing,
    Read(Option<FlowContext>),
    Written(Result<(), FlowTableFull>),
}

impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let net: Vec<String> = self.net.iter().map(|fr| frame_summary(fr)).collect();
        let fw: Vec<String> = self.firmware.iter().map(|p| firmware_summary(p)).collect();
        let host: Vec<(u16, usize)> = self.host.iter().map(|(i, u)| (*i, u.len())).collect();
        f.debug_struct("Outcome")
            .field("net", &net)
            .field("firmware", &fw)
            .field("host (index, len)", &host)
            .field("events", &self.events)
            .field("answer", &self.answer)
            .field("counters", &self.counters)
            .finish()
    }
}

fn apply(engine: &mut impl Engine, op: &Op) -> Answer {
    match op {
        Op::Write(ctx, write) => return Answer::Written(engine.write_flow(ctx, *write)),
        Op::Read(index) => return Answer::Read(engine.read_flow(*index)),
        Op::Remove(index) => engine.remove_flow(*index),
        Op::Net(frame) => engine.net_receive(frame),
        Op::NetBurst(frames) => frames.iter().for_each(|frame| engine.net_receive(frame)),
        Op::Firmware(frame) => engine.firmware_transmit(frame),
        Op::Host(index, ulpdu) => engine.host_transmit(*index, ulpdu),
    }
    Answer::Nothing
}

fn drain(engine: &mut impl Engine, answer: Answer) -> Outcome {
    let mut out = Outcome {
        answer,
        ..Outcome::default()
    };
    while let Some(frame) = engine.net_transmit() {
        out.net.push(frame);
    }
    while let Some(frame) = engine.firmware_receive() {
        out.firmware.push(frame);
    }
    while let Some(ulpdu) = engine.host_receive() {
        out.host.push(ulpdu);
    }
    while let Some(event) = engine.flow_event() {
        out.events.push(event);
    }
    out.counters = engine.counters();
    out
}

fn model_step(model: &mut ModelDatapath, op: &Op) -> Outcome {
    let answer = apply(model, op);
    drain(model, answer)
}

fn run_model(ops: &[Op]) -> Vec<Outcome> {
    let mut model = ModelDatapath::new(NIC_IP);
    ops.iter().map(|op| model_step(&mut model, op)).collect()
}

/// One HDL engine's run of a sequence: its outcomes, the cycles each operation took,
/// the cycle each network frame finished on.
struct HdlRun {
    outcomes: Vec<Outcome>,
    op_cycles: Vec<u64>,
    net_tx_cycles: Vec<u64>,
    cycles: u64,
    secs: f64,
    /// The longest silence at the ports within an operation.
    max_gap: u64,
}

impl HdlRun {
    fn rate(&self) -> f64 {
        self.cycles as f64 / self.secs
    }
}

fn run_hdl<P: PortSim>(mut engine: HdlEngine<P>, ops: &[Op]) -> HdlRun {
    let mut run = HdlRun {
        outcomes: vec![],
        op_cycles: vec![],
        net_tx_cycles: vec![],
        cycles: 0,
        secs: 0.0,
        max_gap: 0,
    };
    for op in ops {
        let start = engine.cycles();
        let answer = apply(&mut engine, op);
        engine.run_until_idle(QUIET, OP_LIMIT);
        run.op_cycles.push(engine.cycles() - start);
        run.outcomes.push(drain(&mut engine, answer));
    }
    run.net_tx_cycles = engine.net_tx_cycles().to_vec();
    run.cycles = engine.cycles();
    run.secs = engine.busy().as_secs_f64();
    run.max_gap = engine.max_gap();
    run
}

fn verilated() -> HdlEngine<Verilated> {
    HdlEngine::verilated(NIC_IP).unwrap_or_else(|e| panic!("{e}"))
}

fn rust_hdl() -> HdlEngine<RustHdl> {
    HdlEngine::rust_hdl(NIC_IP)
}

/// The first operation after which `hdl` differs from `model`, described.
fn first_difference(ops: &[Op], model: &[Outcome], hdl: &[Outcome]) -> Option<(usize, String)> {
    let i = model.iter().zip(hdl).position(|(m, h)| m != h)?;
    let (m, h) = (&model[i], &hdl[i]);
    let mut text = format!("after operation {i}: {:?}\n", ops[i]);
    if m.net != h.net {
        text += &format!("  net frames: model {:?}\n", summaries(&m.net));
        text += &format!("              hdl   {:?}\n", summaries(&h.net));
        for (k, (a, b)) in m.net.iter().zip(&h.net).enumerate() {
            if a != b {
                text += &format!(
                    "  frame {k}: first differing byte {:?}\n",
                    first_byte_diff(a, b)
                );
            }
        }
    }
    if m.firmware != h.firmware {
        let packets = |v: &[Vec<u8>]| v.iter().map(|p| firmware_summary(p)).collect::<Vec<_>>();
        text += &format!("  firmware packets: model {:?}\n", packets(&m.firmware));
        text += &format!("                    hdl   {:?}\n", packets(&h.firmware));
    }
    if m.host != h.host {
        let lens = |v: &[(u16, Vec<u8>)]| v.iter().map(|(i, u)| (*i, u.len())).collect::<Vec<_>>();
        text += &format!("  host ULPDUs (index, len): model {:?}\n", lens(&m.host));
        text += &format!("                            hdl   {:?}\n", lens(&h.host));
    }
    if m.events != h.events {
        text += &format!(
            "  events: model {:?}\n          hdl   {:?}\n",
            m.events, h.events
        );
    }
    if m.answer != h.answer {
        text += &format!(
            "  answer: model {:?}\n          hdl   {:?}\n",
            m.answer, h.answer
        );
    }
    if m.counters != h.counters {
        text += &format!(
            "  counters: model {:?}\n            hdl   {:?}\n",
            m.counters, h.counters
        );
    }
    Some((i, text))
}

/// A firmware TX packet: the frame its descriptor and payload make.
fn segment_summary(packet: &[u8]) -> String {
    let Some((descriptor, payload)) = TxDescriptor::split_packet(packet) else {
        return format!("{} B, shorter than a descriptor", packet.len());
    };
    let mut frame = vec![0u8; 1600];
    match descriptor.frame(payload, &mut frame, Checksums::Offloaded) {
        Ok(len) => frame_summary(&frame[..len]),
        Err(e) => format!("a descriptor that builds no frame ({e:?})"),
    }
}

/// A firmware RX packet: its frame, and its descriptor if it is not the one the frame's
/// parse gives.
fn firmware_summary(packet: &[u8]) -> String {
    use iwnic_proto::net::RxDescriptor;
    let Some((descriptor, frame)) = RxDescriptor::split_packet(packet) else {
        return format!("{} B, shorter than a descriptor", packet.len());
    };
    match RxDescriptor::of_frame(frame) {
        Ok(parsed) if parsed == descriptor => frame_summary(frame),
        _ => format!("{} with descriptor {descriptor:?}", frame_summary(frame)),
    }
}

fn summaries(frames: &[Vec<u8>]) -> Vec<String> {
    frames.iter().map(|f| frame_summary(f)).collect()
}

fn first_byte_diff(a: &[u8], b: &[u8]) -> Option<(usize, Option<u8>, Option<u8>)> {
    (0..a.len().max(b.len()))
        .find(|&i| a.get(i) != b.get(i))
        .map(|i| (i, a.get(i).copied(), b.get(i).copied()))
}

fn check_against_model(what: &str, ops: &[Op], model: &[Outcome], hdl: &HdlRun) {
    if let Some((i, text)) = first_difference(ops, model, &hdl.outcomes) {
        eprintln!("{what} disagrees with the model {text}");
        fail_with_shortest(what, &ops[..=i]);
    }
}

/// Shrinks a sequence that fails on Verilator and panics with the shortest one found.
fn fail_with_shortest(what: &str, ops: &[Op]) -> ! {
    let minimal = shrink(ops.to_vec());
    let why = fails_on_verilator(&minimal).unwrap_or_else(|| "(passes on Verilator)".into());
    panic!(
        "{what} disagrees with the model. Shortest sequence found failing on Verilator \
         ({} operations):\n{}\n{why}",
        minimal.len(),
        minimal
            .iter()
            .enumerate()
            .map(|(k, op)| format!("  {k}: {op:?}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

/// Both engines against the model (each one's first difference shown), then against
/// each other.
fn check_both(ops: &[Op], model: &[Outcome], verilator: &HdlRun, rust_hdl: &HdlRun) {
    let on_verilator = first_difference(ops, model, &verilator.outcomes);
    let on_rust_hdl = first_difference(ops, model, &rust_hdl.outcomes);
    if on_verilator.is_some() || on_rust_hdl.is_some() {
        for (what, diff) in [("Verilator", &on_verilator), ("RustHDL", &on_rust_hdl)] {
            match diff {
                Some((_, text)) => eprintln!("{what} disagrees with the model {text}"),
                None => eprintln!("{what} agrees with the model"),
            }
        }
        if let Some((i, _)) = on_verilator {
            fail_with_shortest("Verilator", &ops[..=i]);
        }
        let (_, text) = on_rust_hdl.unwrap();
        panic!("RustHDL disagrees with the model {text}");
    }
    check_engines_agree(ops, verilator, rust_hdl);
}

/// Verilator and RustHDL must agree exactly, cycle for cycle.
fn check_engines_agree(ops: &[Op], verilator: &HdlRun, rust_hdl: &HdlRun) {
    if let Some((_, text)) = first_difference(ops, &verilator.outcomes, &rust_hdl.outcomes) {
        panic!("Verilator (as 'model') and RustHDL (as 'hdl') disagree {text}");
    }
    if let Some(i) = (0..ops.len()).find(|&i| verilator.op_cycles[i] != rust_hdl.op_cycles[i]) {
        panic!(
            "operation {i} ({:?}) took {} cycles on Verilator, {} on RustHDL",
            ops[i], verilator.op_cycles[i], rust_hdl.op_cycles[i]
        );
    }
    assert_eq!(
        verilator.net_tx_cycles, rust_hdl.net_tx_cycles,
        "network frames finished on different cycles (Verilator left, RustHDL right)"
    );
    assert_eq!(verilator.cycles, rust_hdl.cycles);
}

fn report(what: &str, run: &HdlRun) {
    println!(
        "{what}: {} cycles in {:.2} s of simulation: {:.0} cycles/s; longest silence \
         within an operation {} cycles (quiet period {QUIET})",
        run.cycles,
        run.secs,
        run.rate(),
        run.max_gap
    );
}

// ---------------------------------------------------------------------------------------
// Building frames.

fn context(index: u16, remote_ip: [u8; 4], remote_port: u16, isn: u32, irs: u32) -> FlowContext {
    FlowContext {
        index,
        tuple: FourTuple {
            local_ip: NIC_IP,
            local_port: 20_000,
            remote_ip,
            remote_port,
        },
        local_mac: NIC_MAC,
        remote_mac: PEER_MAC,
        snd_una: isn,
        snd_nxt: isn,
        rcv_nxt: irs,
        peer_window: 29_200,
        peer_window_shift: 7,
        local_window_shift: 7,
        mss: 1460,
        crc: true,
        rtr_expected: false,
    }
}

/// A frame from the peer of `ctx`.
fn peer_frame(
    ctx: &FlowContext,
    control: TcpControl,
    seq: u32,
    ack: Option<u32>,
    window: u16,
    payload: &[u8],
) -> Vec<u8> {
    let segment = SegmentOut {
        src_mac: ctx.remote_mac,
        dst_mac: ctx.local_mac,
        src_ip: ctx.tuple.remote_ip,
        dst_ip: ctx.tuple.local_ip,
        src_port: ctx.tuple.remote_port,
        dst_port: ctx.tuple.local_port,
        control,
        seq,
        ack,
        window,
        syn_options: (control == TcpControl::Syn).then_some((1460, Some(7))),
    };
    let mut frame = vec![0u8; segment.buffer_len(payload.len())];
    segment
        .emit(payload, &mut frame, Checksums::Software)
        .unwrap();
    frame
}

/// A segment of the firmware for `ctx` as it queues it: descriptor, then payload.
fn firmware_segment(ctx: &FlowContext, control: TcpControl, payload: &[u8]) -> Vec<u8> {
    let segment = SegmentOut {
        src_mac: ctx.local_mac,
        dst_mac: ctx.remote_mac,
        src_ip: ctx.tuple.local_ip,
        dst_ip: ctx.tuple.remote_ip,
        src_port: ctx.tuple.local_port,
        dst_port: ctx.tuple.remote_port,
        control,
        seq: ctx.snd_nxt,
        ack: (control != TcpControl::Syn).then_some(ctx.rcv_nxt),
        window: 4096,
        // Every other flow's SYN without the window scale option (the builders' layout
        // for a SYN-ACK to a SYN that offered none).
        syn_options: (control == TcpControl::Syn)
            .then_some((1460, ctx.index.is_multiple_of(2).then_some(7))),
    };
    firmware_tx_packet(
        &TxDescriptor::of_segment(&segment, payload.len() as u16),
        payload,
    )
}

fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; fpdu_len(ulpdu.len())];
    FpduRepr { ulpdu }.emit(&mut out).unwrap();
    out
}

fn fpdus(ulpdus: &[Vec<u8>]) -> Vec<u8> {
    ulpdus.iter().flat_map(|u| fpdu(u)).collect()
}

fn ulpdu(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

/// A sequence built with the model alongside, so each frame can be made from the state
/// the datapath has reached (sequence numbers to send at, ACKs to give).
struct Script {
    model: ModelDatapath,
    ops: Vec<Op>,
    expected: Vec<Outcome>,
}

impl Script {
    fn new() -> Self {
        Script {
            model: ModelDatapath::new(NIC_IP),
            ops: vec![],
            expected: vec![],
        }
    }

    fn push(&mut self, op: Op) -> &Outcome {
        let outcome = model_step(&mut self.model, &op);
        self.ops.push(op);
        self.expected.push(outcome);
        self.expected.last().unwrap()
    }

    /// The flow as the model has it now.
    fn flow(&mut self, index: u16) -> FlowContext {
        self.model
            .read_flow(index)
            .expect("no such flow in the model")
    }

    /// In-order data carrying `ulpdus` as FPDUs, acknowledging everything sent.
    fn data(&mut self, index: u16, ulpdus: &[Vec<u8>], control: TcpControl) -> Vec<u8> {
        let ctx = self.flow(index);
        let frame = peer_frame(
            &ctx,
            control,
            ctx.rcv_nxt,
            Some(ctx.snd_nxt),
            29_200,
            &fpdus(ulpdus),
        );
        self.push(Op::Net(frame.clone()));
        frame
    }
}

// ---------------------------------------------------------------------------------------
// The scripted sequence.

fn scripted() -> Script {
    let mut s = Script::new();
    let peer = [10, 0, 0, 2];
    let (a, b, c) = (5u16, 300u16, 2047u16);

    // Flow A: the peer's RTR first goes to the firmware, which then hands the flow over.
    let mut ctx_a = context(a, peer, 40_001, 0x1000_0000, 0x2000_0000);
    ctx_a.rtr_expected = true;
    s.push(Op::Write(ctx_a, FlowWrite::Install));
    s.push(Op::Read(a));
    s.data(a, &[ulpdu(14, 1)], TcpControl::Psh);
    assert_eq!(s.expected.last().unwrap().firmware.len(), 1);
    s.push(Op::Host(a, ulpdu(16, 2))); // refused: still expecting the RTR
                                       // The firmware answers with its own RTR in an FPDU, then writes the flow over.
    s.push(Op::Firmware(firmware_segment(
        &ctx_a,
        TcpControl::Psh,
        &fpdu(&ulpdu(14, 3)),
    )));
    ctx_a.rtr_expected = false;
    ctx_a.rcv_nxt = ctx_a.rcv_nxt.wrapping_add(fpdu_len(14) as u32);
    ctx_a.snd_nxt = ctx_a.snd_nxt.wrapping_add(fpdu_len(14) as u32);
    // With the ACK of the peer's RTR, which the datapath sends.
    s.push(Op::Write(ctx_a, FlowWrite::InstallAndAcknowledge));
    s.push(Op::Read(a));

    // Flow D: the peer's RTR as iwnic sends it, which the datapath takes: acknowledged
    // and reported, nothing to the firmware or the host; the flow carries data at once.
    let d = 6u16;
    let mut ctx_d = context(d, peer, 40_004, 0x3000_0000, 0x4000_0000);
    ctx_d.rtr_expected = true;
    s.push(Op::Write(ctx_d, FlowWrite::Install));
    let rtr = MessageRepr::rtr_fpdu(RtrTypes::READ).unwrap();
    let frame = peer_frame(
        &ctx_d,
        TcpControl::Psh,
        ctx_d.rcv_nxt,
        Some(ctx_d.snd_nxt),
        29_200,
        rtr,
    );
    let taken = s.push(Op::Net(frame));
    let kind = FlowEventKind::RtrTaken(RtrTypes::READ);
    assert_eq!(taken.events, [FlowEvent { index: d, kind }]);
    assert!(taken.firmware.is_empty() && taken.host.is_empty());
    assert_eq!(taken.net.len(), 1, "the RTR's ACK");
    assert!(!s.flow(d).rtr_expected);
    s.push(Op::Read(d));
    s.data(d, &[ulpdu(50, 11)], TcpControl::Psh);

    // Flow E fails (a bad CRC) and is replaced right after, with no frame between:
    // removed and written again, then written over by another tuple. The failure stays
    // with the flow it happened to; each new flow's data is delivered.
    let e = 7u16;
    let ctx_e = context(e, [10, 0, 0, 4], 40_005, 0x7000_0000, 0x8000_0000);
    s.push(Op::Write(ctx_e, FlowWrite::Install));
    let mut bad = fpdus(&[ulpdu(30, 80)]);
    bad[fpdu_len(30) - 1] ^= 0x01;
    let frame = peer_frame(
        &ctx_e,
        TcpControl::Psh,
        ctx_e.rcv_nxt,
        Some(ctx_e.snd_nxt),
        29_200,
        &bad,
    );
    assert_eq!(s.push(Op::Net(frame)).events.len(), 1, "the CRC error");
    s.push(Op::Remove(e));
    s.push(Op::Write(ctx_e, FlowWrite::Install));
    s.data(e, &[ulpdu(20, 81)], TcpControl::Psh);
    assert_eq!(
        s.expected.last().unwrap().host.len(),
        1,
        "a new flow, not failed"
    );
    let fe = s.flow(e);
    let frame = peer_frame(
        &fe,
        TcpControl::Psh,
        fe.rcv_nxt,
        Some(fe.snd_nxt),
        29_200,
        &bad,
    );
    assert_eq!(s.push(Op::Net(frame)).events.len(), 1, "the CRC error");
    let ctx_e2 = context(e, [10, 0, 0, 4], 40_006, 0x7100_0000, 0x8100_0000);
    s.push(Op::Write(ctx_e2, FlowWrite::Install));
    s.data(e, &[ulpdu(20, 82)], TcpControl::Psh);
    assert_eq!(
        s.expected.last().unwrap().host.len(),
        1,
        "another tuple, not failed"
    );

    // Flow B: sequence numbers about to wrap; flow C: a small MSS.
    let ctx_b = context(b, [10, 0, 0, 3], 40_002, 0xFFFF_FF00, 0xFFFF_FFF0);
    s.push(Op::Write(ctx_b, FlowWrite::Install));
    let mut ctx_c = context(c, [192, 168, 1, 7], 40_003, 7, 0x7FFF_FFFF);
    ctx_c.mss = 536;
    ctx_c.local_mac = [0x02, 0xAB, 0xCD, 0xEF, 0x01, 0x23];
    ctx_c.remote_mac = [0x06, 0x54, 0x32, 0x10, 0xFE, 0xDC];
    s.push(Op::Write(ctx_c, FlowWrite::Install));

    // In-order data: one FPDU, then three, then one filling the MSS.
    s.data(a, &[ulpdu(100, 4)], TcpControl::Psh);
    let three = s.data(
        a,
        &[ulpdu(1, 5), ulpdu(0, 6), ulpdu(333, 7)],
        TcpControl::None,
    );
    s.data(
        a,
        &[ulpdu(max_ulpdu_len(1460).unwrap(), 8)],
        TcpControl::Psh,
    );
    s.data(b, &[ulpdu(7, 9), ulpdu(8, 10)], TcpControl::Psh); // wraps rcv_nxt
    s.data(b, &[ulpdu(200, 11)], TcpControl::Psh);
    s.data(
        c,
        &[ulpdu(max_ulpdu_len(536).unwrap(), 12)],
        TcpControl::Psh,
    );

    // Host ULPDUs: 0 to 1400 bytes, to known and unknown flows, too long for the MSS.
    for (i, len) in [0usize, 1, 2, 3, 4, 7, 8, 9, 64, 100, 1000, 1400]
        .into_iter()
        .enumerate()
    {
        s.push(Op::Host(a, ulpdu(len, 20 + i as u8)));
    }
    s.push(Op::Host(a, ulpdu(max_ulpdu_len(1460).unwrap(), 40)));
    s.push(Op::Host(a, ulpdu(max_ulpdu_len(1460).unwrap() + 1, 41))); // refused
    s.push(Op::Host(b, ulpdu(300, 42))); // wraps snd_nxt
    s.push(Op::Host(c, ulpdu(600, 43))); // refused: MSS 536
    s.push(Op::Host(c, ulpdu(500, 44)));
    s.push(Op::Host(1000, ulpdu(10, 45))); // refused: no flow
    s.push(Op::Read(a));
    s.push(Op::Read(b));

    // Pure ACKs: partly, then fully, then one beyond snd_nxt, then an old one.
    let fa = s.flow(a);
    let half = fa
        .snd_una
        .wrapping_add(fa.snd_nxt.wrapping_sub(fa.snd_una) / 2);
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::None,
        fa.rcv_nxt,
        Some(half),
        1000,
        &[],
    )));
    s.push(Op::Read(a));
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::None,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        2000,
        &[],
    )));
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::None,
        fa.rcv_nxt,
        Some(fa.snd_nxt.wrapping_add(10)),
        3000,
        &[],
    )));
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::None,
        fa.rcv_nxt,
        Some(fa.snd_una),
        4000,
        &[],
    )));
    let fb = s.flow(b);
    s.push(Op::Net(peer_frame(
        &fb,
        TcpControl::None,
        fb.rcv_nxt,
        Some(fb.snd_nxt),
        65535,
        &[],
    )));
    s.push(Op::Read(a));
    s.push(Op::Read(b));

    // A duplicate, a segment partly below rcv_nxt, one out of order.
    s.push(Op::Net(three));
    let fa = s.flow(a);
    let payload = fpdus(&[ulpdu(20, 50)]);
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::Psh,
        fa.rcv_nxt.wrapping_sub(4),
        Some(fa.snd_nxt),
        29_200,
        &payload,
    )));
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::Psh,
        fa.rcv_nxt.wrapping_add(1000),
        Some(fa.snd_nxt),
        29_200,
        &payload,
    )));
    s.data(a, &[ulpdu(20, 51)], TcpControl::Psh); // still in order
    s.push(Op::Read(a));

    // Frames the parser drops, and slow-path frames.
    let fa = s.flow(a);
    let good = peer_frame(
        &fa,
        TcpControl::Psh,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        29_200,
        &fpdu(&ulpdu(30, 52)),
    );
    let mut bad_ip = good.clone();
    bad_ip[24] ^= 0x5A; // IPv4 header checksum
    s.push(Op::Net(bad_ip));
    let mut bad_tcp = good.clone();
    bad_tcp[14 + 20 + 16] ^= 0x01; // TCP checksum
    s.push(Op::Net(bad_tcp));
    let mut bad_payload = good.clone();
    let last = bad_payload.len() - 1;
    bad_payload[last] ^= 0x80; // covered by the TCP checksum
    s.push(Op::Net(bad_payload));
    let mut other = fa;
    other.tuple.local_ip = [10, 0, 0, 9];
    s.push(Op::Net(peer_frame(
        &other,
        TcpControl::Psh,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        29_200,
        &fpdu(&ulpdu(30, 53)),
    )));
    let mut udp = good.clone();
    udp[14 + 9] = 17; // not TCP (checksum now wrong too)
    s.push(Op::Net(udp));
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    s.push(Op::Net(arp));
    s.push(Op::Net(good[..40].to_vec())); // truncated
    let unknown = context(9, [10, 0, 0, 4], 50_000, 0, 0x4444_0000);
    s.push(Op::Net(peer_frame(
        &unknown,
        TcpControl::Syn,
        0x4444_0000,
        None,
        64_240,
        &[],
    )));
    s.push(Op::Net(peer_frame(
        &unknown,
        TcpControl::None,
        0x4444_0001,
        Some(1),
        64_240,
        &ulpdu(10, 54),
    )));
    s.push(Op::Net(good)); // in order after all that
    s.push(Op::Firmware(firmware_segment(
        &unknown,
        TcpControl::Syn,
        &[],
    )));
    s.push(Op::Firmware(firmware_segment(&fa, TcpControl::None, &[])));
    s.push(Op::Firmware(firmware_segment(
        &fa,
        TcpControl::Psh,
        &ulpdu(77, 55),
    )));
    // Shorter than a descriptor: dropped and counted, and the next one still goes.
    s.push(Op::Firmware(vec![0x5A; 24]));
    s.push(Op::Firmware(firmware_segment(&fa, TcpControl::None, &[])));

    // A corrupted FPDU CRC on B stops B; later data is acknowledged but not delivered.
    let fb = s.flow(b);
    let mut payload = fpdus(&[ulpdu(40, 60), ulpdu(41, 61)]);
    let crc_byte = fpdu_len(40) - 1;
    payload[crc_byte] ^= 0x10;
    s.push(Op::Net(peer_frame(
        &fb,
        TcpControl::Psh,
        fb.rcv_nxt,
        Some(fb.snd_nxt),
        29_200,
        &payload,
    )));
    s.data(b, &[ulpdu(10, 62)], TcpControl::Psh);
    s.push(Op::Host(b, ulpdu(10, 63)));
    s.push(Op::Read(b));

    // An FPDU running past its segment on C.
    let fc = s.flow(c);
    let whole = fpdus(&[ulpdu(8, 64), ulpdu(100, 65)]);
    s.push(Op::Net(peer_frame(
        &fc,
        TcpControl::Psh,
        fc.rcv_nxt,
        Some(fc.snd_nxt),
        29_200,
        &whole[..fpdu_len(8) + 50],
    )));
    s.data(c, &[ulpdu(10, 66)], TcpControl::Psh);
    s.push(Op::Read(c));
    // In-order FPDUs behind SYN, or without ACK: the firmware's, whole (RFC 5961's
    // challenge ACK, RFC 9293's drop), nothing delivered, rcv_nxt where it was.
    let fc = s.flow(c);
    for (control, ack) in [
        (TcpControl::Syn, Some(fc.snd_nxt)),
        (TcpControl::Psh, None),
        (TcpControl::Fin, None),
    ] {
        let frame = peer_frame(&fc, control, fc.rcv_nxt, ack, 29_200, &fpdu(&ulpdu(6, 67)));
        let outcome = s.push(Op::Net(frame));
        assert_eq!(
            (
                outcome.firmware.len(),
                outcome.host.len(),
                outcome.net.len()
            ),
            (1, 0, 0),
            "{control:?} with ACK {ack:?}: {outcome:?}"
        );
    }
    assert_eq!(s.flow(c).rcv_nxt, fc.rcv_nxt);
    s.data(c, &[ulpdu(10, 68)], TcpControl::Psh);

    // FIN with payload on A, then RST on A, then A removed.
    s.data(a, &[ulpdu(64, 70), ulpdu(3, 71)], TcpControl::Fin);
    let fa = s.flow(a);
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::Rst,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        0,
        &[],
    )));
    s.push(Op::Read(a));
    s.push(Op::Remove(a));
    s.push(Op::Read(a));
    s.push(Op::Remove(a));
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::Psh,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        29_200,
        &fpdu(&ulpdu(5, 72)),
    )));
    s.push(Op::Host(a, ulpdu(5, 73)));

    // A written again at the same index (a new connection on the same tuple).
    let ctx_a2 = context(a, peer, 40_001, 0x5555_0000, 0x6666_0000);
    s.push(Op::Write(ctx_a2, FlowWrite::Install));
    s.data(a, &[ulpdu(12, 74)], TcpControl::Psh);
    s.push(Op::Host(a, ulpdu(12, 75)));
    s.push(Op::Read(a));
    s.push(Op::Read(b));
    s.push(Op::Read(c));
    s.push(Op::Read(1));
    s
}

/// The script reaches every counter the model has.
fn assert_covers_counters(script: &Script) {
    let c = script.expected.last().unwrap().counters;
    for (name, value) in [
        ("bad_checksum", c.bad_checksum),
        ("not_for_us", c.not_for_us),
        ("to_firmware", c.to_firmware),
        ("out_of_order", c.out_of_order),
        ("duplicates", c.duplicates),
        ("acks_sent", c.acks_sent),
        ("fpdus_in", c.fpdus_in),
        ("fpdus_out", c.fpdus_out),
        ("crc_errors", c.crc_errors),
        ("length_errors", c.length_errors),
        ("host_ulpdus_refused", c.host_ulpdus_refused),
        ("firmware_segments_dropped", c.firmware_segments_dropped),
    ] {
        assert!(value > 0, "the script never moves {name}");
    }
}

/// The cases of [`scripted`] in few operations, for RustHDL's simulator (a few hundred
/// cycles per second in a debug build): a flow expecting its RTR and its hand-over,
/// in-order data of one and of several FPDUs, host ULPDUs (one refused), a pure ACK, a
/// duplicate, a segment out of order, a bad checksum, a frame for another address, a SYN
/// for no flow, a firmware frame, a bad FPDU CRC, an FPDU past its segment, FIN with
/// payload, RST, read and remove.
fn scripted_short() -> Script {
    let mut s = Script::new();
    let (a, b) = (5u16, 2047u16);
    let mut ctx_a = context(a, [10, 0, 0, 2], 40_001, 0xFFFF_FFF0, 0x2000_0000);
    ctx_a.rtr_expected = true;
    s.push(Op::Write(ctx_a, FlowWrite::Install));
    s.data(a, &[ulpdu(14, 1)], TcpControl::Psh);
    ctx_a.rtr_expected = false;
    ctx_a.rcv_nxt = ctx_a.rcv_nxt.wrapping_add(fpdu_len(14) as u32);
    s.push(Op::Write(ctx_a, FlowWrite::Install));
    let mut ctx_b = context(b, [192, 168, 1, 7], 40_003, 7, 0x7FFF_FFFF);
    ctx_b.mss = 536;
    s.push(Op::Write(ctx_b, FlowWrite::Install));
    let three = s.data(
        a,
        &[ulpdu(1, 5), ulpdu(0, 6), ulpdu(333, 7)],
        TcpControl::None,
    );
    s.push(Op::Host(a, ulpdu(1400, 8)));
    s.push(Op::Host(b, ulpdu(600, 9))); // refused: MSS 536
    s.push(Op::Host(a, ulpdu(0, 10)));
    s.push(Op::Read(a)); // snd_nxt has wrapped, snd_una not yet
    let fa = s.flow(a);
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::None,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        1000,
        &[],
    )));
    s.push(Op::Net(three)); // duplicate
    let payload = fpdus(&[ulpdu(20, 11)]);
    let ahead = peer_frame(
        &fa,
        TcpControl::Psh,
        fa.rcv_nxt.wrapping_add(100),
        Some(fa.snd_nxt),
        29_200,
        &payload,
    );
    s.push(Op::Net(ahead));
    let mut bad = peer_frame(
        &fa,
        TcpControl::Psh,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        29_200,
        &payload,
    );
    bad[14 + 20 + 16] ^= 0x01;
    s.push(Op::Net(bad));
    let mut other = fa;
    other.tuple.local_ip = [10, 0, 0, 9];
    s.push(Op::Net(peer_frame(
        &other,
        TcpControl::Psh,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        29_200,
        &payload,
    )));
    let unknown = context(9, [10, 0, 0, 4], 50_000, 0, 0x4444_0000);
    s.push(Op::Net(peer_frame(
        &unknown,
        TcpControl::Syn,
        0x4444_0000,
        None,
        64_240,
        &[],
    )));
    // Shorter than a descriptor: dropped and counted.
    s.push(Op::Firmware(vec![0x5A; 24]));
    s.push(Op::Firmware(firmware_segment(
        &unknown,
        TcpControl::Syn,
        &[],
    )));
    let fb = s.flow(b);
    let mut payload = fpdus(&[ulpdu(40, 12)]);
    payload[fpdu_len(40) - 1] ^= 0x10;
    s.push(Op::Net(peer_frame(
        &fb,
        TcpControl::Psh,
        fb.rcv_nxt,
        Some(fb.snd_nxt),
        29_200,
        &payload,
    )));
    let whole = fpdu(&ulpdu(100, 13));
    s.push(Op::Net(peer_frame(
        &fa,
        TcpControl::Psh,
        fa.rcv_nxt,
        Some(fa.snd_nxt),
        29_200,
        &whole[..60],
    )));
    s.push(Op::Read(a));
    let mut ctx_c = context(300, [10, 0, 0, 3], 40_002, 0x100, 0x200);
    ctx_c.mss = 1460;
    s.push(Op::Write(ctx_c, FlowWrite::Install));
    s.data(300, &[ulpdu(64, 14), ulpdu(3, 15)], TcpControl::Fin);
    let fc = s.flow(300);
    s.push(Op::Net(peer_frame(
        &fc,
        TcpControl::Rst,
        fc.rcv_nxt,
        Some(fc.snd_nxt),
        0,
        &[],
    )));
    s.push(Op::Remove(300));
    s.push(Op::Read(300));
    s
}

#[test]
fn scripted_sequence_on_verilator() {
    let script = scripted();
    assert_covers_counters(&script);
    let verilator = run_hdl(verilated(), &script.ops);
    report("Verilator, scripted sequence", &verilator);
    check_against_model("Verilator", &script.ops, &script.expected, &verilator);
}

#[test]
fn short_scripted_sequence_on_both_engines() {
    let script = scripted_short();
    assert_covers_counters(&script);
    let verilator = run_hdl(verilated(), &script.ops);
    report("Verilator, short scripted sequence", &verilator);
    let rust_hdl = run_hdl(rust_hdl(), &script.ops);
    report("RustHDL, short scripted sequence", &rust_hdl);
    check_both(&script.ops, &script.expected, &verilator, &rust_hdl);
}

// ---------------------------------------------------------------------------------------
// The firmware's contract at its edges (`iwnic_firmware::FlowContext`, `Nic`): each case
// asserts the clause on the model's outcome, then holds Verilator to the model.

/// Runs `script` on Verilator against the model.
fn check_script_on_verilator(what: &str, script: &Script) {
    let run = run_hdl(verilated(), &script.ops);
    check_against_model(what, &script.ops, &script.expected, &run);
}

/// "A connection index beyond the datapath's contexts gets neither" the context nor the
/// ACK of `FlowWrite::InstallAndAcknowledge` (`Nic::write_flow`): `nic_top` (2,048
/// contexts in the simulation build) answers with its status low, which the engines
/// give as `FlowTableFull`; reads find nothing there and the flow's frames go to the
/// firmware.
#[test]
fn an_index_beyond_the_contexts_gets_no_context_and_no_ack() {
    let mut s = Script::new();
    let ctx = context(2048, [10, 0, 0, 2], 40_010, 0x1000, 0x2000);
    let written = s.push(Op::Write(ctx, FlowWrite::InstallAndAcknowledge));
    assert!(written.net.is_empty(), "no ACK: {written:?}");
    assert_eq!(written.answer, Answer::Written(Err(FlowTableFull)));
    let read = s.push(Op::Read(2048));
    assert_eq!(read.answer, Answer::Read(None));
    let data = peer_frame(
        &ctx,
        TcpControl::Psh,
        0x2000,
        Some(0x1000),
        29_200,
        &fpdu(&ulpdu(10, 1)),
    );
    let steered = s.push(Op::Net(data));
    assert_eq!(
        (steered.firmware.len(), steered.host.len()),
        (1, 0),
        "{steered:?}"
    );
    s.push(Op::Host(2048, ulpdu(10, 2)));
    check_script_on_verilator("Verilator, an index beyond the contexts", &s);
}

/// `Nic::remove_flow`: "its frames reach the firmware again". An index written over by
/// another tuple (no remove between) and then removed leaves no flow there: a frame of
/// the first tuple, which the flow table still maps to that index, goes to the firmware
/// as any frame of no flow does.
#[test]
fn a_frame_of_a_tuple_written_over_and_removed_reaches_the_firmware() {
    let mut s = Script::new();
    let first = context(5, [10, 0, 0, 2], 40_011, 0x1000, 0x2000);
    let second = context(5, [10, 0, 0, 3], 40_012, 0x3000, 0x4000);
    s.push(Op::Write(first, FlowWrite::Install));
    s.push(Op::Write(second, FlowWrite::Install));
    s.push(Op::Remove(5));
    let data = peer_frame(
        &first,
        TcpControl::Psh,
        0x2000,
        Some(0x1000),
        29_200,
        &fpdu(&ulpdu(10, 3)),
    );
    let steered = s.push(Op::Net(data));
    assert_eq!(steered.firmware.len(), 1, "{steered:?}");
    assert_eq!(steered.counters.to_firmware, 1);
    check_script_on_verilator("Verilator, a tuple written over and removed", &s);
}

/// A rewrite of a flow (same tuple) is carried from its new context, as a fresh write
/// of that context is, here one with another MSS (towards the peer: the receive side
/// does not depend on it, so both deliver a ULPDU above what that MSS would send).
#[test]
fn a_rewritten_flow_receives_as_a_fresh_one() {
    let outcome = |rewrite: bool| {
        let mut s = Script::new();
        let mut ctx = context(5, [10, 0, 0, 2], 40_013, 0x1000, 0x2000);
        if rewrite {
            s.push(Op::Write(ctx, FlowWrite::Install));
        }
        ctx.mss = 536;
        s.push(Op::Write(ctx, FlowWrite::Install));
        s.data(5, &[ulpdu(600, 4)], TcpControl::Psh);
        s
    };
    let (fresh, rewritten) = (outcome(false), outcome(true));
    let last = |s: &Script| s.expected.last().unwrap().clone();
    assert_eq!(
        (last(&rewritten).host, last(&rewritten).events),
        (last(&fresh).host, last(&fresh).events),
        "the rewritten flow, then a fresh one"
    );
    check_script_on_verilator("Verilator, a rewritten flow", &rewritten);
}

/// A keepalive probe (no payload, `rcv_nxt` - 1, as Linux and a Chelsio NIC send one on an
/// idle connection) is not an acceptable segment (RFC 9293 §3.10.7.4): the datapath
/// answers it with an ACK of `rcv_nxt`, or the peer's keepalive would give up on an idle
/// connection. A bare ACK at `rcv_nxt` gets none; nothing reaches the firmware.
#[test]
fn a_keepalive_probe_is_acknowledged() {
    let mut s = Script::new();
    let ctx = context(6, [10, 0, 0, 2], 40_014, 0x1000, 0x2000);
    s.push(Op::Write(ctx, FlowWrite::Install));
    let probe = peer_frame(&ctx, TcpControl::None, 0x1FFF, Some(0x1000), 29_200, &[]);
    let probed = s.push(Op::Net(probe));
    assert_eq!(probed.net.len(), 1, "{probed:?}");
    let ack = TcpSegment::parse(&probed.net[0], Checksums::Software).unwrap();
    assert_eq!(
        (ack.seq, ack.ack, ack.payload),
        (0x1000, Some(0x2000), &[][..])
    );
    assert_eq!((probed.firmware.len(), probed.counters.duplicates), (0, 1));
    let bare = peer_frame(&ctx, TcpControl::None, 0x2000, Some(0x1000), 29_200, &[]);
    let quiet = s.push(Op::Net(bare));
    assert!(
        quiet.net.is_empty() && quiet.firmware.is_empty(),
        "{quiet:?}"
    );
    check_script_on_verilator("Verilator, a keepalive probe", &s);
}

/// `FlowEventKind::LengthError`: "an FPDU's ULPDU_Length ran beyond its segment"
/// (spec/mpa.md: "ULPDU_Length beyond the segment" ends the stream). The context's MSS is
/// the largest segment *towards the peer* (the firmware writes the peer's MSS, at most
/// ours, and 536 when the peer's SYN carried none), while the peer sizes its FPDUs by the
/// MSS we advertised: an FPDU that fits its segment is the peer's to send.
#[test]
fn an_fpdu_that_fits_its_segment_is_delivered_whatever_the_mss_towards_the_peer() {
    let (s, frame_len) = delivered_to_a_flow_of_mss_536(40_014, 1000, 5);
    assert!(frame_len <= MAX_FRAME_LEN);
    check_script_on_verilator("Verilator, an FPDU above the MSS towards the peer", &s);
}

/// The receive side's ULPDU limit (`nic_top::MAX_RX_ULPDU_LEN`, which the model uses too)
/// is the largest ULPDU that a frame the parser passes can hold: one FPDU of it fills a
/// frame of `MAX_FRAME_LEN` bytes (the next ULPDU length needs 4 bytes more), and it is
/// delivered, whatever the MSS towards the peer.
#[test]
fn the_largest_fpdu_a_frame_can_carry_is_delivered() {
    let max = usize::from(MAX_RX_ULPDU_LEN);
    let (s, frame_len) = delivered_to_a_flow_of_mss_536(40_015, max, 6);
    assert_eq!(frame_len, MAX_FRAME_LEN);
    let headers = frame_len - fpdu_len(max);
    assert!(headers + fpdu_len(max + 1) > MAX_FRAME_LEN);
    check_script_on_verilator("Verilator, the largest FPDU a frame can carry", &s);
}

/// A flow whose MSS towards the peer is 536 receives one FPDU of a `len`-byte ULPDU from
/// `port`; the model delivers it and reports nothing. The script, and the frame's length.
fn delivered_to_a_flow_of_mss_536(port: u16, len: usize, salt: u8) -> (Script, usize) {
    let mut s = Script::new();
    let mut ctx = context(5, [10, 0, 0, 2], port, 0x1000, 0x2000);
    ctx.mss = 536;
    s.push(Op::Write(ctx, FlowWrite::Install));
    let frame_len = s.data(5, &[ulpdu(len, salt)], TcpControl::Psh).len();
    let delivered = s.expected.last().unwrap();
    assert_eq!(
        (delivered.host.len(), delivered.events.len()),
        (1, 0),
        "{delivered:?}"
    );
    (s, frame_len)
}

// ---------------------------------------------------------------------------------------
// Random sequences.

/// A flow the generator may install: fixed index and tuple, so no index ever holds two
/// tuples and no tuple two indices.
struct GenFlow {
    ctx: FlowContext,
    installed: bool,
    last_data: Option<Vec<u8>>,
}

/// A remote port, the first from `start` on, that puts `tuple` into `bucket` of the flow
/// table.
fn port_into_bucket(tuple: FourTuple, bucket: usize, start: u16) -> u16 {
    (0..=u16::MAX)
        .map(|k| start.wrapping_add(k))
        .find(|&port| {
            let tuple = FourTuple {
                remote_port: port,
                ..tuple
            };
            flow_table_bucket(&tuple) == bucket
        })
        .expect("a port's bits reach every bucket")
}

/// Random operations, each made from the model's current state.
struct Generator {
    rng: StdRng,
    script: Script,
    flows: Vec<GenFlow>,
}

impl Generator {
    fn new(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut flows = vec![];
        let mut used = vec![];
        for n in 0..5u16 {
            let index = loop {
                let index = rng.random_range(0..2048u16);
                if !used.contains(&index) {
                    used.push(index);
                    break index;
                }
            };
            let remote_ip = [10, 0, rng.random_range(0..2), 2 + n as u8];
            // Sequence numbers anywhere, or up to 1,500 bytes short of wrapping.
            let mut seq = || match rng.random_bool(0.3) {
                true => 0u32.wrapping_sub(rng.random_range(1..1500)),
                false => rng.random(),
            };
            let (isn, irs) = (seq(), seq());
            let mut ctx = context(index, remote_ip, 40_000 + n, isn, irs);
            ctx.mss = [1460, 1460, 536, 128, 1000][rng.random_range(0..5)];
            ctx.local_window_shift = rng.random_range(0..15);
            ctx.peer_window_shift = rng.random_range(0..15);
            ctx.remote_mac[5] = rng.random();
            flows.push(GenFlow {
                ctx,
                installed: false,
                last_data: None,
            });
        }
        // A third of the sequences crowd all five tuples into one bucket of the flow
        // table, which has four ways, and start with four of them written: the fifth's
        // write finds it full until one is removed.
        let crowded = rng.random_bool(0.3);
        if crowded {
            let bucket = flow_table_bucket(&flows[0].ctx.tuple);
            for flow in &mut flows[1..] {
                let tuple = flow.ctx.tuple;
                flow.ctx.tuple.remote_port = port_into_bucket(tuple, bucket, rng.random());
            }
        }
        let mut generator = Generator {
            rng,
            script: Script::new(),
            flows,
        };
        if crowded {
            for flow in &mut generator.flows[1..] {
                generator
                    .script
                    .push(Op::Write(flow.ctx, FlowWrite::Install));
                flow.installed = true;
            }
        }
        generator
    }

    fn pick(&mut self) -> usize {
        let installed: Vec<usize> = (0..self.flows.len())
            .filter(|&i| self.flows[i].installed)
            .collect();
        if !installed.is_empty() && self.rng.random_bool(0.9) {
            installed[self.rng.random_range(0..installed.len())]
        } else {
            self.rng.random_range(0..self.flows.len())
        }
    }

    /// The flow's context: the model's if installed, else its template.
    fn ctx(&mut self, f: usize) -> FlowContext {
        let index = self.flows[f].ctx.index;
        self.script
            .model
            .read_flow(index)
            .unwrap_or(self.flows[f].ctx)
    }

    /// ULPDU lengths whose FPDUs fill at most `room` bytes, each at most `max`.
    fn ulpdus(&mut self, room: usize, max: usize) -> Vec<Vec<u8>> {
        let mut out = vec![];
        let count = self.rng.random_range(1..=4);
        let mut left = room;
        for _ in 0..count {
            if left < fpdu_len(0) {
                break;
            }
            let biggest = max.min(max_ulpdu_len(left).unwrap_or(0));
            let len = match self.rng.random_range(0..4) {
                0 => biggest,
                1 => self.rng.random_range(0..=biggest.min(16)),
                _ => self.rng.random_range(0..=biggest),
            };
            left -= fpdu_len(len);
            out.push(ulpdu(len, self.rng.random()));
        }
        out
    }

    /// Up to four operations; the network frames among the first of them arrive back to
    /// back (one operation, with the model's outcomes of each joined).
    fn burst(&mut self) {
        let start = self.script.ops.len();
        for _ in 0..self.rng.random_range(2..=4) {
            self.step();
            if !matches!(self.script.ops.last(), Some(Op::Net(_))) {
                break;
            }
        }
        let end = start
            + self.script.ops[start..]
                .iter()
                .take_while(|op| matches!(op, Op::Net(_)))
                .count();
        if end - start < 2 {
            return;
        }
        let rest_ops = self.script.ops.split_off(end);
        let rest_expected = self.script.expected.split_off(end);
        let frames = self
            .script
            .ops
            .drain(start..)
            .map(|op| match op {
                Op::Net(frame) => frame,
                _ => unreachable!("only network frames are joined"),
            })
            .collect();
        let mut joined = Outcome::default();
        for outcome in self.script.expected.drain(start..) {
            joined.net.extend(outcome.net);
            joined.firmware.extend(outcome.firmware);
            joined.host.extend(outcome.host);
            joined.events.extend(outcome.events);
            joined.counters = outcome.counters;
        }
        self.script.ops.push(Op::NetBurst(frames));
        self.script.expected.push(joined);
        self.script.ops.extend(rest_ops);
        self.script.expected.extend(rest_expected);
    }

    fn step(&mut self) {
        let f = self.pick();
        let ctx = self.ctx(f);
        let index = ctx.index;
        let installed = self.flows[f].installed;
        let mss = usize::from(ctx.mss);
        let max = max_ulpdu_len(mss).unwrap_or(0);
        let mut roll = self.rng.random_range(0..100);
        // A flow that expects its RTR gets one (or a near miss) more often than others.
        if ctx.rtr_expected && self.rng.random_bool(0.25) {
            roll = 32;
        }
        // A segment of the peer's at `rcv_nxt`, acknowledging all we sent.
        let in_order = |control, payload: &[u8]| {
            peer_frame(
                &ctx,
                control,
                ctx.rcv_nxt,
                Some(ctx.snd_nxt),
                29_200,
                payload,
            )
        };
        let op = match roll {
            0..=7 => {
                // Install, or rewrite as the firmware does: the RTR arrived, or bytes it
                // consumed, with the sequence numbers the datapath reached.
                let mut new = ctx;
                let mut write = FlowWrite::Install;
                if installed {
                    new.rtr_expected = false;
                    if self.rng.random_bool(0.3) {
                        new.rcv_nxt = new.rcv_nxt.wrapping_add(self.rng.random_range(0..64));
                    }
                    // The hand-off after the RTR: the datapath acknowledges it.
                    if self.rng.random_bool(0.5) {
                        write = FlowWrite::InstallAndAcknowledge;
                    }
                } else {
                    new.rtr_expected = self.rng.random_bool(0.4);
                    // The initiator's hand-off: a first write with the reply's ACK.
                    if !new.rtr_expected && self.rng.random_bool(0.3) {
                        write = FlowWrite::InstallAndAcknowledge;
                    }
                }
                self.flows[f].installed = true;
                self.flows[f].last_data = None;
                Op::Write(new, write)
            }
            32..=37 => {
                // The peer's RTR as iwnic sends it (the datapath takes it when the flow
                // expects one), or a near miss the firmware gets.
                let rtr = RtrTypes::EACH[self.rng.random_range(0..3)];
                let mut payload = MessageRepr::rtr_fpdu(rtr).unwrap().to_vec();
                let mut control = [TcpControl::Psh, TcpControl::None][self.rng.random_range(0..2)];
                let (mut seq, mut ack) = (ctx.rcv_nxt, ctx.snd_nxt);
                match self.rng.random_range(0..10) {
                    0 => {
                        let at = self.rng.random_range(0..payload.len());
                        payload[at] ^= 1 << self.rng.random_range(0..8);
                    }
                    1 => payload.extend(fpdus(&self.ulpdus(mss - payload.len(), max))),
                    2 => payload.truncate(self.rng.random_range(1..payload.len())),
                    3 => ack = ack.wrapping_sub(self.rng.random_range(1..100)),
                    4 => seq = seq.wrapping_add(self.rng.random_range(1..100)),
                    5 => control = TcpControl::Fin,
                    _ => {}
                }
                Op::Net(peer_frame(
                    &ctx,
                    control,
                    seq,
                    Some(ack),
                    self.rng.random(),
                    &payload,
                ))
            }
            8..=31 => {
                let ulpdus = self.ulpdus(mss, max);
                let control = [TcpControl::Psh, TcpControl::None][self.rng.random_range(0..2)];
                let frame = peer_frame(
                    &ctx,
                    control,
                    ctx.rcv_nxt,
                    Some(ctx.snd_nxt),
                    self.rng.random(),
                    &fpdus(&ulpdus),
                );
                self.flows[f].last_data = Some(frame.clone());
                Op::Net(frame)
            }
            38..=42 => match self.flows[f].last_data.clone() {
                Some(frame) => Op::Net(frame),
                None => {
                    let back = self.rng.random_range(1..2000);
                    let payload = fpdus(&self.ulpdus(mss, max));
                    Op::Net(peer_frame(
                        &ctx,
                        TcpControl::Psh,
                        ctx.rcv_nxt.wrapping_sub(back),
                        Some(ctx.snd_nxt),
                        29_200,
                        &payload,
                    ))
                }
            },
            43..=46 => {
                let ahead = self.rng.random_range(1..100_000);
                let payload = fpdus(&self.ulpdus(mss, max));
                Op::Net(peer_frame(
                    &ctx,
                    TcpControl::Psh,
                    ctx.rcv_nxt.wrapping_add(ahead),
                    Some(ctx.snd_nxt),
                    29_200,
                    &payload,
                ))
            }
            47..=53 => {
                let inflight = ctx.snd_nxt.wrapping_sub(ctx.snd_una);
                let ack = match self.rng.random_range(0..4) {
                    0 => ctx.snd_nxt,
                    1 => ctx
                        .snd_una
                        .wrapping_add(self.rng.random_range(0..=inflight)),
                    2 => ctx.snd_nxt.wrapping_add(self.rng.random_range(1..1000)),
                    _ => self.rng.random(),
                };
                Op::Net(peer_frame(
                    &ctx,
                    TcpControl::None,
                    ctx.rcv_nxt,
                    Some(ack),
                    self.rng.random(),
                    &[],
                ))
            }
            54..=69 => {
                let index = if self.rng.random_bool(0.9) {
                    index
                } else {
                    self.rng.random_range(0..2048)
                };
                let len = match self.rng.random_range(0..5) {
                    0 => max,
                    1 => max + 1,
                    2 => self.rng.random_range(0..16),
                    _ => self.rng.random_range(0..=1500),
                };
                Op::Host(index, ulpdu(len, self.rng.random()))
            }
            70..=73 => {
                let ulpdus = self.ulpdus(mss, max);
                let mut payload = fpdus(&ulpdus);
                if !payload.is_empty() {
                    let at = self.rng.random_range(0..payload.len());
                    payload[at] ^= 1 << self.rng.random_range(0..8);
                }
                Op::Net(in_order(TcpControl::Psh, &payload))
            }
            74..=76 => {
                let payload = fpdus(&self.ulpdus(mss, max));
                let cut = self.rng.random_range(0..payload.len().max(1));
                Op::Net(in_order(TcpControl::Psh, &payload[..cut]))
            }
            77..=78 => Op::Net(peer_frame(
                &ctx,
                TcpControl::Rst,
                ctx.rcv_nxt,
                Some(ctx.snd_nxt),
                0,
                &[],
            )),
            79..=81 => {
                let payload = if self.rng.random_bool(0.7) {
                    fpdus(&self.ulpdus(mss, max))
                } else {
                    vec![]
                };
                Op::Net(in_order(TcpControl::Fin, &payload))
            }
            82..=86 => {
                // The TCP header, in a frame without IPv4 options.
                const TCP: usize = 14 + 20;
                let mut frame = peer_frame(&ctx, TcpControl::Syn, ctx.rcv_nxt, None, 64_240, &[]);
                match self.rng.random_range(0..9) {
                    0 => frame[24] ^= 0x40,
                    1 => frame[TCP + 17] ^= 0x02,
                    2 => frame[14 + 19] ^= 0x01, // another destination address
                    3 => frame[14 + 9] = 17,
                    4 => frame.truncate(self.rng.random_range(0..54)),
                    // Headers the parser hands on and the firmware refuses, checksums
                    // good: a zero port; a flow's data with SYN, or SYN and RST, added to
                    // its FIN; a flow's data behind an option of length 0.
                    5 => {
                        let port = TCP + 2 * self.rng.random_range(0..2);
                        frame[port..port + 2].fill(0);
                        assert!(refill_tcp_checksum(&mut frame));
                    }
                    6 => {
                        frame = in_order(TcpControl::Fin, &fpdus(&self.ulpdus(mss, max)));
                        frame[TCP + 13] |= [0x02, 0x06][self.rng.random_range(0..2)];
                        assert!(refill_tcp_checksum(&mut frame));
                    }
                    7 => {
                        // Room for the SYN's options (8 bytes) but now and then: the frame
                        // may then be one the parser drops as oversized.
                        let room = if self.rng.random_bool(0.8) {
                            mss - 8
                        } else {
                            mss
                        };
                        frame = in_order(TcpControl::Syn, &fpdus(&self.ulpdus(room, max)));
                        frame[TCP + 20 + 1] = 0; // the MSS option's length
                        assert!(refill_tcp_checksum(&mut frame));
                    }
                    _ => {}
                }
                Op::Net(frame)
            }
            87..=90 => {
                let payload = if self.rng.random_bool(0.5) {
                    ulpdu(self.rng.random_range(0..600), 9)
                } else {
                    vec![]
                };
                let control = [
                    TcpControl::Syn,
                    TcpControl::None,
                    TcpControl::Psh,
                    TcpControl::Fin,
                ][self.rng.random_range(0..4)];
                let mut packet = firmware_segment(
                    &ctx,
                    control,
                    if control == TcpControl::Syn {
                        &[]
                    } else {
                        &payload
                    },
                );
                // Now and then cut short of its descriptor's five beats: dropped and
                // counted. (33 to 39 bytes end on the fifth beat, which `nic_top` takes
                // as a whole descriptor: its own block tests cover those.)
                if self.rng.random_bool(0.2) {
                    packet.truncate(self.rng.random_range(1..=32));
                }
                Op::Firmware(packet)
            }
            91..=95 => Op::Read(if self.rng.random_bool(0.9) {
                index
            } else {
                self.rng.random_range(0..2048)
            }),
            _ => {
                self.flows[f].installed = false;
                Op::Remove(index)
            }
        };
        self.script.push(op);
    }
}

fn random_ops(seed: u64, len: usize) -> (Vec<Op>, Vec<Outcome>) {
    let mut generator = Generator::new(seed);
    while generator.script.ops.len() < len {
        if generator.rng.random_bool(0.2) {
            generator.burst();
        } else {
            generator.step();
        }
    }
    (generator.script.ops, generator.script.expected)
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether `ops` on Verilator differs from the model (a panic counts).
fn fails_on_verilator(ops: &[Op]) -> Option<String> {
    let model = run_model(ops);
    let ops_owned = ops.to_vec();
    let run = std::panic::catch_unwind(move || run_hdl(verilated(), &ops_owned));
    match run {
        Err(panic) => Some(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into()),
        ),
        Ok(run) => first_difference(ops, &model, &run.outcomes).map(|(_, text)| text),
    }
}

/// Removes operations while the sequence still fails on Verilator.
fn shrink(mut ops: Vec<Op>) -> Vec<Op> {
    let mut chunk = ops.len() / 2;
    while chunk >= 1 {
        let mut start = 0;
        while start < ops.len() {
            let mut candidate = ops.clone();
            candidate.drain(start..(start + chunk).min(ops.len()));
            if !candidate.is_empty() && fails_on_verilator(&candidate).is_some() {
                ops = candidate;
            } else {
                start += chunk;
            }
        }
        chunk /= 2;
    }
    ops
}

#[test]
fn random_sequences_on_verilator() {
    let cases = env_number("IWNIC_DATAPATH_CASES", 40);
    let base = env_number("IWNIC_DATAPATH_SEED", 0x1d_a7a0);
    let (mut cycles, mut secs, mut ops_run) = (0, 0.0, 0);
    let began = Instant::now();
    for case in 0..cases {
        let seed = base + case;
        let (ops, model) = random_ops(seed, 60);
        let run = run_hdl(verilated(), &ops);
        cycles += run.cycles;
        secs += run.secs;
        ops_run += ops.len();
        if let Some((i, text)) = first_difference(&ops, &model, &run.outcomes) {
            eprintln!("seed {seed:#x}: Verilator disagrees with the model {text}");
            fail_with_shortest(&format!("seed {seed:#x}: Verilator"), &ops[..=i]);
        }
    }
    println!(
        "Verilator, {cases} random sequences ({ops_run} operations): {cycles} cycles in \
         {secs:.2} s of simulation: {:.0} cycles/s ({:.1} s in all)",
        cycles as f64 / secs,
        began.elapsed().as_secs_f64()
    );
}

#[test]
fn random_sequence_on_both_engines() {
    let seed = env_number("IWNIC_DATAPATH_SEED", 0x1d_a7a0) ^ 0xB0_7B;
    let (ops, model) = random_ops(seed, 12);
    let verilator = run_hdl(verilated(), &ops);
    report("Verilator, short random sequence", &verilator);
    let rust_hdl = run_hdl(rust_hdl(), &ops);
    report("RustHDL, short random sequence", &rust_hdl);
    check_both(&ops, &model, &verilator, &rust_hdl);
}

/// The generator's sequences are what they claim: every kind of operation occurs, and
/// the model itself finds data, refusals and errors in them.
#[test]
fn random_sequences_cover_the_cases() {
    let mut kinds = BTreeMap::new();
    let mut total = DatapathCounters::default();
    // Frames the parser hands on whose headers the firmware refuses, by why: a zero port,
    // two of SYN, FIN and RST, or (neither) an option smoltcp refuses. The model must
    // treat each as the datapath does.
    let mut refused_headers = BTreeMap::new();
    for seed in 0..20 {
        let (ops, model) = random_ops(seed, 60);
        for op in &ops {
            if let Op::Net(frame) = op {
                if let Ok((d, _)) = RxDescriptor::parse(frame) {
                    let refused = frame.len() <= MAX_FRAME_LEN
                        && TcpSegment::parse(frame, Checksums::Software).is_err();
                    let why = if d.src_port == 0 || d.dst_port == 0 {
                        "zero port"
                    } else if (d.flags & (net::SYN | net::FIN | net::RST)).count_ones() > 1 {
                        "flag combination"
                    } else {
                        "option"
                    };
                    if refused {
                        *refused_headers.entry(why).or_insert(0) += 1;
                    }
                }
            }
            let kind = match op {
                Op::Write(_, FlowWrite::Install) => "write",
                Op::Write(_, FlowWrite::InstallAndAcknowledge) => "write and acknowledge",
                Op::Read(_) => "read",
                Op::Remove(_) => "remove",
                Op::Net(_) => "net",
                Op::NetBurst(_) => "net burst",
                Op::Firmware(_) => "firmware",
                Op::Host(..) => "host",
            };
            *kinds.entry(kind).or_insert(0) += 1;
        }
        let c = model.last().unwrap().counters;
        total.fpdus_in += c.fpdus_in;
        total.fpdus_out += c.fpdus_out;
        total.crc_errors += c.crc_errors;
        total.length_errors += c.length_errors;
        total.duplicates += c.duplicates;
        total.out_of_order += c.out_of_order;
        total.bad_checksum += c.bad_checksum;
        total.not_for_us += c.not_for_us;
        total.host_ulpdus_refused += c.host_ulpdus_refused;
        total.firmware_segments_dropped += c.firmware_segments_dropped;
        total.rtr_taken += c.rtr_taken;
        total.flow_table_full += c.flow_table_full;
    }
    assert_eq!(kinds.len(), 8, "{kinds:?}");
    assert_eq!(
        refused_headers.len(),
        3,
        "headers the firmware refuses, by kind: {refused_headers:?}"
    );
    for (name, value) in [
        ("fpdus_in", total.fpdus_in),
        ("fpdus_out", total.fpdus_out),
        ("crc_errors", total.crc_errors),
        ("length_errors", total.length_errors),
        ("duplicates", total.duplicates),
        ("out_of_order", total.out_of_order),
        ("bad_checksum", total.bad_checksum),
        ("not_for_us", total.not_for_us),
        ("host_ulpdus_refused", total.host_ulpdus_refused),
        ("firmware_segments_dropped", total.firmware_segments_dropped),
        ("rtr_taken", total.rtr_taken),
        ("flow_table_full", total.flow_table_full),
    ] {
        assert!(value > 0, "random sequences never move {name}: {total:?}");
    }
}
