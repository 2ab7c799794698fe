//! `nic_top` on a directed scenario, RustHDL and Verilator in lock step: a flow written
//! through the register window, FPDUs received (delivered, acknowledged), a ULPDU sent,
//! a frame of an unknown flow to the firmware, a corrupted FPDU (event, flow failed),
//! the context read back and removed; frames to the firmware behind their RX descriptors
//! (FIN after payload, after a failed FPDU, RST); the firmware's segments from their TX
//! descriptors (SYN options, payloads, padding; back to back, beside the datapath's
//! frames, malformed packets dropped); a flow's RTR taken by the datapath (each of the
//! three RTR FPDUs: ACK, event, context rewritten) and its near misses sent to the
//! firmware unchanged. The testbench's conformance suite
//! holds the top to the behavioural model on random sequences; this is the block's own
//! check.

use std::collections::VecDeque;

use iwnic_hdl::nic_top::SimNicTop;
use iwnic_proto::ddp::MessageRepr;
use iwnic_proto::fpdu::FpduRepr;
use iwnic_proto::mpa::RtrTypes;
use iwnic_proto::net::{
    Checksums, RxDescriptor, SegmentOut, TxDescriptor, TX_DESCRIPTOR_LEN, TX_SYN_OPTIONS,
};
use iwnic_proto::smoltcp_wire::TcpControl;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::dut::{dut, lockstep, Bench, Timing};
use crate::stream::{beats, kept_bytes, Beat, Sink};

dut! {
    SimNicTop, verilated as "nic_top",
    inputs {
        reset, local_ip,
        net_rx_data, net_rx_keep, net_rx_last, net_rx_valid, net_tx_ready,
        fw_rx_ready, fw_tx_data, fw_tx_keep, fw_tx_last, fw_tx_valid,
        ctx_op, ctx_valid, ctx_index, ctx_local_ip, ctx_local_port, ctx_remote_ip,
        ctx_remote_port, ctx_local_mac, ctx_remote_mac, ctx_snd_una, ctx_snd_nxt,
        ctx_rcv_nxt, ctx_peer_window, ctx_peer_window_shift, ctx_local_window_shift,
        ctx_mss, ctx_crc, ctx_rtr_expected,
        event_ready,
        host_tx_data, host_tx_keep, host_tx_last, host_tx_valid, host_tx_index,
        host_tx_len, host_rx_ready,
    }
    outputs {
        net_rx_ready, net_tx_data, net_tx_keep, net_tx_last, net_tx_valid,
        fw_rx_data, fw_rx_keep, fw_rx_last, fw_rx_valid, fw_tx_ready,
        ctx_ready, ctx_done, ctx_status,
        rd_local_ip, rd_local_port, rd_remote_ip, rd_remote_port, rd_local_mac,
        rd_remote_mac, rd_snd_una, rd_snd_nxt, rd_rcv_nxt, rd_peer_window, rd_mss,
        rd_rtr_expected,
        event_valid, event_index, event_crc, event_rtr,
        host_tx_ready, host_rx_data, host_rx_keep, host_rx_last, host_rx_valid,
        host_rx_index,
        cnt_frames_in, cnt_frames_out, cnt_to_firmware, cnt_acks_sent, cnt_fpdus_in,
        cnt_fpdus_out, cnt_crc_errors, cnt_host_refused, cnt_not_for_us, cnt_fw_tx_dropped,
        cnt_rtr_taken,
        tick,
    }
}

const LOCAL_IP: [u8; 4] = [10, 0, 0, 2];
const REMOTE_IP: [u8; 4] = [10, 0, 0, 1];
const LOCAL_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0B];
const REMOTE_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0A];
const LOCAL_PORT: u16 = 4791;
const REMOTE_PORT: u16 = 50_000;
const INDEX: u16 = 5;
const MSS: u16 = 1460;

fn mac(bytes: [u8; 6]) -> u64 {
    bytes.iter().fold(0, |acc, b| acc << 8 | u64::from(*b))
}

/// A context as the register window takes it.
#[derive(Clone, Copy)]
struct Context {
    snd_una: u32,
    snd_nxt: u32,
    rcv_nxt: u32,
    rtr_expected: bool,
}

enum Op {
    /// `ctx_op` 0/1/2/3 at `INDEX`.
    Command(u64, Context),
    Frame(Vec<u8>),
    Ulpdu(u16, Vec<u8>),
    /// Packets for `fw_tx`, queued back to back; the ops after go on meanwhile (the run
    /// ends only when they are all taken).
    Firmware(Vec<Vec<u8>>),
    /// Let the datapath finish: cycles counted once the firmware's packets are all taken.
    Idle(u32),
}

/// What came out.
#[derive(Default)]
struct Seen {
    to_network: Vec<Vec<u8>>,
    /// Firmware queue packets: an RX descriptor and a frame each (`to_firmware`).
    to_firmware: Vec<Vec<u8>>,
    to_host: Vec<(u16, Vec<u8>)>,
    /// Events: index, `event_crc`, `event_rtr`.
    events: Vec<(u16, bool, u64)>,
    /// Command results: status, and (snd_nxt, rcv_nxt) of a read.
    commands: Vec<(bool, u32, u32)>,
    /// Command results: `rd_snd_una` and `rd_rtr_expected` of a read.
    reads: Vec<(u32, bool)>,
    counters: Outputs,
}

struct Scenario {
    ops: VecDeque<Op>,
    reset_cycles: u32,
    net: VecDeque<Beat>,
    host: VecDeque<(Beat, u16, u16)>,
    fw: VecDeque<Beat>,
    /// `fw_tx_valid` idles between beats with this probability.
    fw_idle_probability: f64,
    fw_offering: bool,
    fw_rng: StdRng,
    command: Option<(u64, Context)>,
    command_taken: bool,
    idle: u32,
    rng: StdRng,
    seen: Seen,
    net_frame: Vec<u8>,
    fw_frame: Vec<u8>,
    host_ulpdu: Vec<u8>,
    cycles: u64,
    /// Cycles since the end of reset.
    since_reset: u64,
    /// Drops the output readies at random.
    sink: Sink,
}

impl Scenario {
    fn new(ops: Vec<Op>, stall_probability: f64, fw_idle_probability: f64) -> Scenario {
        Scenario {
            sink: Sink::new(stall_probability, 11),
            ops: ops.into(),
            reset_cycles: 2,
            net: VecDeque::new(),
            host: VecDeque::new(),
            fw: VecDeque::new(),
            fw_idle_probability,
            fw_offering: false,
            fw_rng: StdRng::seed_from_u64(13),
            command: None,
            command_taken: false,
            idle: 0,
            rng: StdRng::seed_from_u64(7),
            seen: Seen::default(),
            net_frame: vec![],
            fw_frame: vec![],
            host_ulpdu: vec![],
            cycles: 0,
            since_reset: 0,
        }
    }

    fn busy(&self) -> bool {
        self.command.is_some() || !self.net.is_empty() || !self.host.is_empty() || self.idle > 0
    }
}

impl Bench<Inputs, Outputs> for Scenario {
    fn inputs(&mut self) -> Option<Inputs> {
        self.cycles += 1;
        assert!(self.cycles < 200_000, "the scenario does not finish");
        let mut inputs = Inputs {
            local_ip: u64::from(u32::from_be_bytes(LOCAL_IP)),
            net_tx_ready: u64::from(self.sink.ready()),
            fw_rx_ready: u64::from(self.sink.ready()),
            event_ready: u64::from(self.sink.ready()),
            host_rx_ready: u64::from(self.sink.ready()),
            ..Inputs::default()
        };
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            inputs.reset = 1;
            return Some(inputs);
        }
        while !self.busy() {
            let Some(op) = self.ops.pop_front() else {
                if self.fw.is_empty() {
                    return None;
                }
                break;
            };
            match op {
                Op::Command(op, ctx) => {
                    self.command = Some((op, ctx));
                    self.command_taken = false;
                }
                Op::Frame(frame) => self.net.extend(beats(&frame, &mut self.rng)),
                Op::Ulpdu(index, ulpdu) => {
                    let len = ulpdu.len() as u16;
                    self.host.extend(
                        beats(&ulpdu, &mut self.rng)
                            .into_iter()
                            .map(|beat| (beat, index, len)),
                    )
                }
                Op::Firmware(packets) => {
                    for packet in packets {
                        self.fw.extend(beats(&packet, &mut self.rng));
                    }
                }
                Op::Idle(cycles) => self.idle = cycles,
            }
        }
        if self.fw.is_empty() {
            self.idle = self.idle.saturating_sub(1);
        }
        if let Some(beat) = self.net.front() {
            inputs.net_rx_data = beat.data;
            inputs.net_rx_keep = u64::from(beat.keep);
            inputs.net_rx_last = u64::from(beat.last);
            inputs.net_rx_valid = 1;
        }
        if !self.fw_offering && !self.fw.is_empty() {
            self.fw_offering = !self.fw_rng.gen_bool(self.fw_idle_probability);
        }
        if let (Some(beat), true) = (self.fw.front(), self.fw_offering) {
            inputs.fw_tx_data = beat.data;
            inputs.fw_tx_keep = u64::from(beat.keep);
            inputs.fw_tx_last = u64::from(beat.last);
            inputs.fw_tx_valid = 1;
        }
        if let Some((beat, index, len)) = self.host.front() {
            inputs.host_tx_data = beat.data;
            inputs.host_tx_keep = u64::from(beat.keep);
            inputs.host_tx_last = u64::from(beat.last);
            inputs.host_tx_valid = 1;
            inputs.host_tx_index = u64::from(*index);
            inputs.host_tx_len = u64::from(*len);
        }
        if let (Some((op, ctx)), false) = (self.command, self.command_taken) {
            inputs.ctx_op = op;
            inputs.ctx_valid = 1;
            inputs.ctx_index = u64::from(INDEX);
            inputs.ctx_local_ip = u64::from(u32::from_be_bytes(LOCAL_IP));
            inputs.ctx_local_port = u64::from(LOCAL_PORT);
            inputs.ctx_remote_ip = u64::from(u32::from_be_bytes(REMOTE_IP));
            inputs.ctx_remote_port = u64::from(REMOTE_PORT);
            inputs.ctx_local_mac = mac(LOCAL_MAC);
            inputs.ctx_remote_mac = mac(REMOTE_MAC);
            inputs.ctx_snd_una = u64::from(ctx.snd_una);
            inputs.ctx_snd_nxt = u64::from(ctx.snd_nxt);
            inputs.ctx_rcv_nxt = u64::from(ctx.rcv_nxt);
            inputs.ctx_peer_window = 65_535;
            inputs.ctx_mss = u64::from(MSS);
            inputs.ctx_crc = 1;
            inputs.ctx_rtr_expected = u64::from(ctx.rtr_expected);
        }
        Some(inputs)
    }

    fn outputs(&mut self, inputs: &Inputs, out: &Outputs) {
        if inputs.reset == 1 {
            return;
        }
        if inputs.net_rx_valid == 1 && out.net_rx_ready == 1 {
            self.net.pop_front();
        }
        if inputs.host_tx_valid == 1 && out.host_tx_ready == 1 {
            self.host.pop_front();
        }
        if inputs.fw_tx_valid == 1 && out.fw_tx_ready == 1 {
            self.fw.pop_front();
            self.fw_offering = false;
        }
        if inputs.ctx_valid == 1 && out.ctx_ready == 1 {
            self.command_taken = true;
        }
        if out.ctx_done == 1 {
            assert!(self.command_taken, "ctx_done without a command");
            self.seen.commands.push((
                out.ctx_status == 1,
                out.rd_snd_nxt as u32,
                out.rd_rcv_nxt as u32,
            ));
            self.seen
                .reads
                .push((out.rd_snd_una as u32, out.rd_rtr_expected == 1));
            self.command = None;
            self.command_taken = false;
        }
        let beat = |data: u64, keep: u64, last: u64| Beat {
            data,
            keep: keep as u8,
            last: last == 1,
        };
        if out.net_tx_valid == 1 && inputs.net_tx_ready == 1 {
            let b = beat(out.net_tx_data, out.net_tx_keep, out.net_tx_last);
            self.net_frame.extend(kept_bytes(&b));
            if b.last {
                self.seen
                    .to_network
                    .push(std::mem::take(&mut self.net_frame));
            }
        }
        if out.fw_rx_valid == 1 && inputs.fw_rx_ready == 1 {
            let b = beat(out.fw_rx_data, out.fw_rx_keep, out.fw_rx_last);
            // Whole beats but the last: the descriptor is four beats, and the frame
            // starts on a beat of its own.
            assert!(
                b.last || b.keep == 0xFF,
                "a short beat inside a firmware packet"
            );
            self.fw_frame.extend(kept_bytes(&b));
            if b.last {
                self.seen
                    .to_firmware
                    .push(std::mem::take(&mut self.fw_frame));
            }
        }
        if out.host_rx_valid == 1 && inputs.host_rx_ready == 1 {
            let b = beat(out.host_rx_data, out.host_rx_keep, out.host_rx_last);
            self.host_ulpdu.extend(kept_bytes(&b));
            if b.last {
                let ulpdu = std::mem::take(&mut self.host_ulpdu);
                self.seen.to_host.push((out.host_rx_index as u16, ulpdu));
            }
        }
        if out.event_valid == 1 && inputs.event_ready == 1 {
            self.seen
                .events
                .push((out.event_index as u16, out.event_crc == 1, out.event_rtr));
        }
        assert_eq!(
            out.tick, self.since_reset,
            "tick counts the cycles since reset"
        );
        self.since_reset += 1;
        self.seen.counters = *out;
    }
}

/// A segment of the flow, from the peer (`inbound`) or from us.
fn segment(inbound: bool, control: TcpControl, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
    let (src, dst) = if inbound {
        (
            (REMOTE_MAC, REMOTE_IP, REMOTE_PORT),
            (LOCAL_MAC, LOCAL_IP, LOCAL_PORT),
        )
    } else {
        (
            (LOCAL_MAC, LOCAL_IP, LOCAL_PORT),
            (REMOTE_MAC, REMOTE_IP, REMOTE_PORT),
        )
    };
    let seg = SegmentOut {
        src_mac: src.0,
        dst_mac: dst.0,
        src_ip: src.1,
        dst_ip: dst.1,
        src_port: src.2,
        dst_port: dst.2,
        control,
        seq,
        ack: Some(ack),
        window: u16::MAX,
        syn_options: None,
    };
    let mut frame = vec![0; seg.buffer_len(payload.len())];
    let len = seg.emit(payload, &mut frame, Checksums::Software).unwrap();
    frame.truncate(len);
    frame
}

/// The packet the firmware queue carries for `frame`: its RX descriptor, then the frame.
fn to_firmware(frame: &[u8]) -> Vec<u8> {
    let mut packet = RxDescriptor::of_frame(frame).unwrap().to_bytes().to_vec();
    packet.extend_from_slice(frame);
    packet
}

fn fpdus(ulpdus: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![];
    for ulpdu in ulpdus {
        let repr = FpduRepr { ulpdu };
        let mut fpdu = vec![0; repr.buffer_len()];
        repr.emit(&mut fpdu).unwrap();
        out.extend(fpdu);
    }
    out
}

fn run(ops: Vec<Op>) -> Seen {
    run_stalled(ops, 0.0)
}

/// `ops` with every output's `ready` dropped with `stall_probability`.
fn run_stalled(ops: Vec<Op>, stall_probability: f64) -> Seen {
    run_with(ops, stall_probability, 0.0)
}

/// `ops` with every output's `ready` dropped with `stall_probability` and `fw_tx_valid`
/// idling between beats with `fw_idle_probability`.
fn run_with(ops: Vec<Op>, stall_probability: f64, fw_idle_probability: f64) -> Seen {
    let mut rusthdl = RustHdl::new(SimNicTop::default());
    let mut verilated = Verilated::new(SimNicTop::default());
    let mut scenario = Scenario::new(ops, stall_probability, fw_idle_probability);
    let timing: Timing = lockstep(&mut rusthdl, &mut verilated, &mut scenario);
    timing.report("nic_top scenario");
    scenario.seen
}

#[test]
fn a_flow_end_to_end() {
    const ISS: u32 = 1_000;
    const IRS: u32 = 7_000;
    let ctx = Context {
        snd_una: ISS,
        snd_nxt: ISS,
        rcv_nxt: IRS,
        rtr_expected: false,
    };
    let first: Vec<u8> = (0..100u8).collect();
    let second: Vec<u8> = (0..13u8).map(|b| b ^ 0x5A).collect();
    let data = fpdus(&[&first, &second]);
    let sent: Vec<u8> = (0..37u8).collect();
    let sent_fpdu = fpdus(&[&sent]);
    let mut corrupt = fpdus(&[&second]);
    corrupt[5] ^= 1;
    let unknown_syn = segment_with_port(1234);
    let rcv_after = IRS + data.len() as u32;
    let seen = run(vec![
        Op::Command(0, ctx),
        Op::Frame(segment(true, TcpControl::Psh, IRS, ISS, &data)),
        Op::Idle(100),
        Op::Ulpdu(INDEX, sent.clone()),
        Op::Idle(100),
        Op::Ulpdu(INDEX + 1, sent.clone()),
        Op::Idle(100),
        Op::Frame(unknown_syn.clone()),
        Op::Idle(100),
        Op::Frame(segment(true, TcpControl::Psh, rcv_after, ISS, &corrupt)),
        Op::Idle(100),
        Op::Command(1, ctx),
        Op::Command(2, ctx),
        Op::Command(1, ctx),
        Op::Idle(20),
    ]);
    let rcv_failed = rcv_after + corrupt.len() as u32;
    let snd_after = ISS + sent_fpdu.len() as u32;
    assert_eq!(seen.to_host, vec![(INDEX, first), (INDEX, second)]);
    assert_eq!(
        seen.to_network,
        vec![
            segment(false, TcpControl::None, ISS, rcv_after, &[]),
            segment(false, TcpControl::Psh, ISS, rcv_after, &sent_fpdu),
            segment(false, TcpControl::None, snd_after, rcv_failed, &[]),
        ]
    );
    assert_eq!(seen.to_firmware, vec![to_firmware(&unknown_syn)]);
    assert_eq!(seen.events, vec![(INDEX, true, 0)]);
    assert_eq!(
        seen.commands,
        vec![
            (true, 0, 0),
            (true, snd_after, rcv_failed),
            (true, snd_after, rcv_failed),
            (false, snd_after, rcv_failed),
        ]
    );
    let c = seen.counters;
    assert_eq!(
        (
            c.cnt_frames_in,
            c.cnt_frames_out,
            c.cnt_to_firmware,
            c.cnt_acks_sent
        ),
        (3, 3, 1, 2)
    );
    assert_eq!(
        (
            c.cnt_fpdus_in,
            c.cnt_fpdus_out,
            c.cnt_crc_errors,
            c.cnt_host_refused
        ),
        (2, 1, 1, 1)
    );
}

/// `ctx_op` 3 writes the context as 0 does, then sends one ACK of its `rcv_nxt` at its
/// `snd_nxt` (the firmware's hand-off after the RTR); the flow then carries data. A
/// rewrite with 3 acknowledges the sequence numbers the command carries.
#[test]
fn a_write_with_ack_installs_the_flow_and_acknowledges() {
    const ISS: u32 = 5_000;
    const IRS: u32 = 9_000;
    let ctx = Context {
        snd_una: ISS,
        snd_nxt: ISS,
        rcv_nxt: IRS,
        rtr_expected: false,
    };
    let data = fpdus(&[b"after the hand-off"]);
    let rcv_after = IRS + data.len() as u32;
    let seen = run(vec![
        Op::Command(3, ctx),
        Op::Idle(50),
        Op::Frame(segment(true, TcpControl::Psh, IRS, ISS, &data)),
        Op::Idle(100),
        Op::Command(
            3,
            Context {
                rcv_nxt: rcv_after,
                ..ctx
            },
        ),
        Op::Idle(50),
        Op::Command(1, ctx),
        Op::Idle(20),
    ]);
    assert_eq!(
        seen.to_network,
        vec![
            segment(false, TcpControl::None, ISS, IRS, &[]),
            segment(false, TcpControl::None, ISS, rcv_after, &[]),
            segment(false, TcpControl::None, ISS, rcv_after, &[]),
        ]
    );
    assert_eq!(seen.to_host, vec![(INDEX, b"after the hand-off".to_vec())]);
    assert!(seen.to_firmware.is_empty());
    assert_eq!(
        seen.commands,
        vec![(true, 0, 0), (true, 0, 0), (true, ISS, rcv_after)]
    );
    let c = seen.counters;
    assert_eq!((c.cnt_frames_out, c.cnt_acks_sent), (3, 3));
}

/// A SYN from the peer's address on another port: no flow.
fn segment_with_port(port: u16) -> Vec<u8> {
    let seg = SegmentOut {
        src_mac: REMOTE_MAC,
        dst_mac: LOCAL_MAC,
        src_ip: REMOTE_IP,
        dst_ip: LOCAL_IP,
        src_port: port,
        dst_port: LOCAL_PORT,
        control: TcpControl::Syn,
        seq: 1,
        ack: None,
        window: u16::MAX,
        syn_options: Some((1460, Some(7))),
    };
    let mut frame = vec![0; seg.buffer_len(0)];
    let len = seg.emit(&[], &mut frame, Checksums::Software).unwrap();
    frame.truncate(len);
    frame
}

#[test]
fn nic_top_lints_clean() {
    use rust_hdl::prelude::*;
    for (name, verilog) in [
        ("lint-nic_top-ecp5", {
            let mut uut = iwnic_hdl::nic_top::EcpNicTop::default();
            uut.connect_all();
            generate_verilog(&uut)
        }),
        ("lint-nic_top-sim", {
            let mut uut = SimNicTop::default();
            uut.connect_all();
            generate_verilog(&uut)
        }),
    ] {
        let waived: Vec<&str> = iwnic_hdl::verilator::WAIVERS
            .iter()
            .chain(iwnic_hdl::nic_top::TOP_WAIVERS)
            .map(|(code, _)| *code)
            .collect();
        iwnic_hdl::verilator::lint_waiving(&verilog, &crate::dut::work_dir().join(name), &waived)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// Frames back to back: the next one arrives while the controller works on the last, and
/// each must still be steered with its own header fields.
#[test]
fn back_to_back_segments() {
    back_to_back(0.0);
}

/// The same with every output stalling: the host and firmware queues fill and the
/// transmit path waits, and nothing may be lost or reordered.
#[test]
fn back_to_back_segments_with_stalled_outputs() {
    back_to_back(0.6);
}

fn back_to_back(stall_probability: f64) {
    const ISS: u32 = 50;
    const IRS: u32 = u32::MAX - 300; // the receive sequence wraps on the way
    let ctx = Context {
        snd_una: ISS,
        snd_nxt: ISS,
        rcv_nxt: IRS,
        rtr_expected: false,
    };
    let ulpdus: Vec<Vec<u8>> = (0..6u8)
        .map(|i| {
            (0..(40 + 97 * usize::from(i)))
                .map(|b| b as u8 ^ i)
                .collect()
        })
        .collect();
    let mut ops = vec![Op::Command(0, ctx)];
    let mut expected_frames = vec![];
    let mut expected_firmware = vec![];
    let mut seq = IRS;
    for pair in ulpdus.chunks(2) {
        let payload = fpdus(&[&pair[0], &pair[1]]);
        ops.push(Op::Frame(segment(
            true,
            TcpControl::Psh,
            seq,
            ISS,
            &payload,
        )));
        let syn = segment_with_port(2000u16.wrapping_add(seq as u16));
        ops.push(Op::Frame(syn.clone()));
        expected_firmware.push(to_firmware(&syn));
        seq = seq.wrapping_add(payload.len() as u32);
        expected_frames.push(segment(false, TcpControl::None, ISS, seq, &[]));
    }
    ops.push(Op::Idle(2_000));
    // Then ULPDUs back to back the other way.
    let mut snd = ISS;
    for ulpdu in ulpdus.iter().take(3) {
        ops.push(Op::Ulpdu(INDEX, ulpdu.clone()));
        let fpdu = fpdus(&[ulpdu]);
        expected_frames.push(segment(false, TcpControl::Psh, snd, seq, &fpdu));
        snd = snd.wrapping_add(fpdu.len() as u32);
    }
    ops.push(Op::Idle(2_000));
    let seen = run_stalled(ops, stall_probability);
    let delivered: Vec<(u16, Vec<u8>)> = ulpdus.into_iter().map(|u| (INDEX, u)).collect();
    assert_eq!(seen.to_host, delivered);
    assert_eq!(seen.to_network, expected_frames);
    assert_eq!(seen.to_firmware, expected_firmware);
}

/// Frames of a flow to the firmware, each behind its own descriptor: a FIN after its
/// delivered payload (the next frame, a SYN of no flow, arrives back to back and is
/// looked up while the FIN's payload is replayed, so the controller's header fields have
/// moved on when the FIN goes to the firmware), a FIN after a corrupted FPDU (after the
/// event), and an RST.
#[test]
fn frames_to_the_firmware_carry_their_own_descriptors() {
    frames_to_the_firmware(0.0);
}

#[test]
fn frames_to_the_firmware_with_stalled_outputs() {
    frames_to_the_firmware(0.6);
}

fn frames_to_the_firmware(stall_probability: f64) {
    const ISS: u32 = 3_000;
    const IRS: u32 = 0xFFFF_FF00;
    let ctx = Context {
        snd_una: ISS,
        snd_nxt: ISS,
        rcv_nxt: IRS,
        rtr_expected: false,
    };
    let ulpdu: Vec<u8> = (0..200u8).collect();
    let data = fpdus(&[&ulpdu]);
    let fin = segment(true, TcpControl::Fin, IRS, ISS, &data);
    let syn = segment_with_port(4321);
    let rcv_after = IRS.wrapping_add(data.len() as u32);
    let mut corrupt = fpdus(&[b"corrupted"]);
    corrupt[7] ^= 0x40;
    let failed_fin = segment(true, TcpControl::Fin, rcv_after, ISS, &corrupt);
    let rcv_failed = rcv_after.wrapping_add(corrupt.len() as u32);
    let rst = segment(true, TcpControl::Rst, rcv_failed, ISS, &[]);
    let seen = run_stalled(
        vec![
            Op::Command(0, ctx),
            Op::Frame(fin.clone()),
            Op::Frame(syn.clone()),
            Op::Idle(300),
            Op::Frame(failed_fin.clone()),
            Op::Idle(300),
            Op::Frame(rst.clone()),
            Op::Idle(300),
        ],
        stall_probability,
    );
    assert_eq!(
        seen.to_firmware,
        vec![
            to_firmware(&fin),
            to_firmware(&syn),
            to_firmware(&failed_fin),
            to_firmware(&rst),
        ]
    );
    assert_eq!(seen.to_host, vec![(INDEX, ulpdu)]);
    assert_eq!(seen.events, vec![(INDEX, true, 0)]);
    assert_eq!(
        seen.to_network,
        vec![
            segment(false, TcpControl::None, ISS, rcv_after, &[]),
            segment(false, TcpControl::None, ISS, rcv_failed, &[]),
        ]
    );
    assert_eq!(seen.counters.cnt_to_firmware, 4);
}

/// The firmware's port in the tests below, apart from the flow's, so their frames can
/// be told from the datapath's.
const FW_PORT: u16 = 7_000;

/// A segment the firmware sends (to the peer, from `FW_PORT`).
fn fw_segment(
    control: TcpControl,
    seq: u32,
    ack: Option<u32>,
    syn_options: Option<(u16, Option<u8>)>,
) -> SegmentOut {
    SegmentOut {
        src_mac: LOCAL_MAC,
        dst_mac: REMOTE_MAC,
        src_ip: LOCAL_IP,
        dst_ip: REMOTE_IP,
        src_port: FW_PORT,
        dst_port: REMOTE_PORT,
        control,
        seq,
        ack,
        window: 0x1234,
        syn_options,
    }
}

/// The `fw_tx` packet for `descriptor` and `payload`: its 40 bytes, then the payload.
fn fw_packet(descriptor: &TxDescriptor, payload: &[u8]) -> Vec<u8> {
    let mut packet = descriptor.to_bytes().to_vec();
    packet.extend_from_slice(payload);
    packet
}

/// What leaves `net_tx` for `descriptor` and `payload`: `TxDescriptor::frame`, with
/// the IPv4 and TCP checksums filled in.
fn fw_frame(descriptor: &TxDescriptor, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0; 1600];
    let len = descriptor
        .frame(payload, &mut frame, Checksums::Software)
        .unwrap();
    frame.truncate(len);
    frame
}

/// The firmware's segments of a connection's life, and descriptors of random fields:
/// (packet, frame) pairs. SYN, SYN-ACK (with options), the handshake's bare ACK (padded
/// to 60 bytes), payloads of every length around the join and full size, a SYN-ACK
/// with payload, FIN, RST.
fn fw_segments(seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cases: Vec<(TxDescriptor, Vec<u8>)> = vec![];
    let mut add = |segment: SegmentOut, payload: Vec<u8>| {
        cases.push((
            TxDescriptor::of_segment(&segment, payload.len() as u16),
            payload,
        ))
    };
    add(
        fw_segment(TcpControl::Syn, 100, None, Some((1460, Some(7)))),
        vec![],
    );
    add(
        fw_segment(TcpControl::Syn, 100, Some(900), Some((536, None))),
        vec![],
    );
    add(fw_segment(TcpControl::None, 101, Some(901), None), vec![]);
    for len in [1, 2, 3, 5, 6, 7, 8, 9, 10, 100, 1460] {
        let payload: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        add(fw_segment(TcpControl::Psh, 101, Some(901), None), payload);
    }
    add(
        fw_segment(TcpControl::Syn, 100, Some(900), Some((9000, Some(14)))),
        b"early".to_vec(),
    );
    add(fw_segment(TcpControl::Fin, 2000, Some(901), None), vec![]);
    add(fw_segment(TcpControl::Rst, 2001, None, None), vec![]);
    // Any fields: random bytes, flags that `frame` takes (one of SYN, FIN, RST at most,
    // with PSH and the stray bits 0x60 too, which it drops), the acknowledgment field
    // whatever ACK says, the options bit either way.
    for _ in 0..8 {
        let mut bytes = [0u8; TX_DESCRIPTOR_LEN];
        rng.fill(&mut bytes[..]);
        let payload: Vec<u8> = (0..rng.gen_range(0..80)).map(|_| rng.gen()).collect();
        let control = [0, 0x01, 0x02, 0x04][rng.gen_range(0..4)];
        bytes[34] = (bytes[34] & (TX_SYN_OPTIONS | 0x78)) | control;
        bytes[38..40].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        cases.push((TxDescriptor::from_bytes(&bytes), payload));
    }
    cases
        .iter()
        .map(|(d, payload)| (fw_packet(d, payload), fw_frame(d, payload)))
        .collect()
}

/// `seen` is `expected`, frame by frame (the first that differs shown, not all of them).
fn assert_frames(seen: &[Vec<u8>], expected: &[Vec<u8>]) {
    for (i, (seen, expected)) in seen.iter().zip(expected).enumerate() {
        assert_eq!(seen, expected, "frame {i}");
    }
    assert_eq!(seen.len(), expected.len(), "frames");
}

/// The firmware's segments back to back on `fw_tx`, each out of `net_tx` as
/// `TxDescriptor::frame` gives it with checksums filled.
#[test]
fn firmware_segments_from_tx_descriptors() {
    firmware_segments(0.0, 0.0);
}

/// The same with `fw_tx_valid` idling and the outputs stalling.
#[test]
fn firmware_segments_from_tx_descriptors_with_stalls() {
    firmware_segments(0.6, 0.3);
}

fn firmware_segments(stall_probability: f64, fw_idle_probability: f64) {
    let cases = fw_segments(21);
    let (packets, frames): (Vec<_>, Vec<_>) = cases.into_iter().unzip();
    let count = frames.len() as u64;
    let seen = run_with(
        vec![Op::Firmware(packets), Op::Idle(500)],
        stall_probability,
        fw_idle_probability,
    );
    assert_frames(&seen.to_network, &frames);
    assert_eq!(seen.counters.cnt_frames_out, count);
    assert_eq!(seen.counters.cnt_fw_tx_dropped, 0);
}

/// The firmware's segments while the datapath acknowledges received FPDUs and sends
/// the host's: both builders' frames reach the wire whole, each source's in its order.
#[test]
fn firmware_and_datapath_frames_share_the_wire() {
    firmware_and_datapath(0.0, 0.0);
    firmware_and_datapath(0.5, 0.2);
}

fn firmware_and_datapath(stall_probability: f64, fw_idle_probability: f64) {
    const ISS: u32 = 10_000;
    const IRS: u32 = 20_000;
    let ctx = Context {
        snd_una: ISS,
        snd_nxt: ISS,
        rcv_nxt: IRS,
        rtr_expected: false,
    };
    let cases = fw_segments(22);
    let (packets, fw_frames): (Vec<_>, Vec<_>) = cases.into_iter().unzip();
    let mut ops = vec![Op::Command(0, ctx), Op::Firmware(packets)];
    let mut datapath_frames = vec![];
    let mut rcv = IRS;
    for i in 0..4u8 {
        let ulpdu: Vec<u8> = (0..300).map(|b| b as u8 ^ i).collect();
        let payload = fpdus(&[&ulpdu]);
        ops.push(Op::Frame(segment(
            true,
            TcpControl::Psh,
            rcv,
            ISS,
            &payload,
        )));
        rcv += payload.len() as u32;
        datapath_frames.push(segment(false, TcpControl::None, ISS, rcv, &[]));
    }
    let mut snd = ISS;
    for i in 0..3u8 {
        let ulpdu: Vec<u8> = (0..(64 + 400 * usize::from(i))).map(|b| b as u8).collect();
        ops.push(Op::Ulpdu(INDEX, ulpdu.clone()));
        let fpdu = fpdus(&[&ulpdu]);
        datapath_frames.push(segment(false, TcpControl::Psh, snd, rcv, &fpdu));
        snd += fpdu.len() as u32;
    }
    ops.push(Op::Idle(3_000));
    let seen = run_with(ops, stall_probability, fw_idle_probability);
    // Which builder each frame came from, in wire order: they take turns (whole frames).
    let sources: String = seen
        .to_network
        .iter()
        .map(|frame| if fw_frames.contains(frame) { 'F' } else { 'D' })
        .collect();
    assert!(
        sources.contains("FDF"),
        "the builders took no turns: {sources}"
    );
    let (fw_out, datapath_out): (Vec<_>, Vec<_>) = seen
        .to_network
        .into_iter()
        .partition(|frame| fw_frames.contains(frame));
    assert_frames(&datapath_out, &datapath_frames);
    assert_frames(&fw_out, &fw_frames);
}

/// Malformed packets on `fw_tx`: ones that end before a whole descriptor are dropped,
/// one that ends with its descriptor goes without payload whatever its length says, a
/// payload under a length of 0 is dropped; the good packets around them go out, and the
/// drops are counted.
#[test]
fn malformed_firmware_packets_do_not_hold_up_the_next() {
    malformed_firmware_packets(0.0, 0.0);
    malformed_firmware_packets(0.6, 0.3);
}

fn malformed_firmware_packets(stall_probability: f64, fw_idle_probability: f64) {
    let good = fw_segment(TcpControl::Psh, 5, Some(6), None);
    let payload: Vec<u8> = (0..77).collect();
    let good_descriptor = TxDescriptor::of_segment(&good, payload.len() as u16);
    let good_packet = fw_packet(&good_descriptor, &payload);
    let good_frame = fw_frame(&good_descriptor, &payload);
    // Says 300 bytes follow; none do.
    let no_payload = TxDescriptor::of_segment(&good, 300);
    // Says none follow; 50 do.
    let zero_len = TxDescriptor::of_segment(&fw_segment(TcpControl::None, 9, Some(6), None), 0);
    let dropped_payload = vec![0xA5; 50];
    let seen = run_with(
        vec![
            Op::Firmware(vec![
                good_descriptor.to_bytes()[..24].to_vec(),
                good_packet.clone(),
                good_descriptor.to_bytes()[..8].to_vec(),
                vec![],
                good_descriptor.to_bytes()[..32].to_vec(),
                good_packet.clone(),
                no_payload.to_bytes().to_vec(),
                fw_packet(&zero_len, &dropped_payload),
                good_descriptor.to_bytes()[..39].to_vec(),
                good_packet.clone(),
            ]),
            Op::Idle(500),
        ],
        stall_probability,
        fw_idle_probability,
    );
    // A packet that ends with its descriptor goes without payload, whatever its payload
    // length said. The 39-byte packet is five beats, the last short of the payload
    // length's high byte (not looked at: the packet ends there).
    let without_payload = |d: &TxDescriptor| {
        fw_frame(
            &TxDescriptor {
                payload_len: 0,
                ..*d
            },
            &[],
        )
    };
    assert_frames(
        &seen.to_network,
        &[
            good_frame.clone(),
            good_frame.clone(),
            without_payload(&no_payload),
            fw_frame(&zero_len, &[]),
            without_payload(&good_descriptor),
            good_frame,
        ],
    );
    assert_eq!(seen.counters.cnt_fw_tx_dropped, 5);
    assert_eq!(seen.counters.cnt_frames_out, 6);
}

/// The responder's RTR FPDUs iwnic sends (`iwnic-proto`'s constants), each with the kind
/// `event_rtr` reports when the datapath takes it.
fn rtr_fpdus() -> [(&'static [u8], u64); 3] {
    [
        (RtrTypes::SEND, 1),
        (RtrTypes::WRITE, 2),
        (RtrTypes::READ, 3),
    ]
    .map(|(rtr, kind)| (MessageRepr::rtr_fpdu(rtr).unwrap(), kind))
}

/// What `ctx_done` shows: the command's status, and the `rd_*` outputs, which keep the
/// last read's context until the next read.
#[derive(Default)]
struct Commands {
    last_read: (u32, u32, u32, bool),
    commands: Vec<(bool, u32, u32)>,
    reads: Vec<(u32, bool)>,
}

impl Commands {
    fn write(&mut self) {
        let (snd_una, snd_nxt, rcv_nxt, rtr_expected) = self.last_read;
        self.commands.push((true, snd_nxt, rcv_nxt));
        self.reads.push((snd_una, rtr_expected));
    }

    fn read(&mut self, snd_una: u32, snd_nxt: u32, rcv_nxt: u32, rtr_expected: bool) {
        self.last_read = (snd_una, snd_nxt, rcv_nxt, rtr_expected);
        self.write();
    }
}

/// A flow expecting its RTR takes each of the three RTR FPDUs on the datapath: the
/// segment is acknowledged (`rcv_nxt` past it, at `snd_nxt`), its flow's event says
/// which RTR it was, nothing goes to the firmware or the host, the context has RTR
/// expected cleared, `rcv_nxt` advanced and `snd_una` at the ACK, and FPDUs after it are
/// delivered (the last one back to back behind the RTR, so its context is read right
/// after the RTR's write).
#[test]
fn the_datapath_takes_each_rtr() {
    the_datapath_takes_rtrs(0.0);
}

#[test]
fn the_datapath_takes_each_rtr_with_stalled_outputs() {
    the_datapath_takes_rtrs(0.6);
}

fn the_datapath_takes_rtrs(stall_probability: f64) {
    let mut ops = vec![];
    let mut network = vec![];
    let mut host = vec![];
    let mut events = vec![];
    let mut commands = Commands::default();
    for (i, (rtr, kind)) in rtr_fpdus().into_iter().enumerate() {
        let iss = 10_000 * (i as u32 + 1);
        // The first flow's receive sequence wraps inside the RTR.
        let irs = 0xFFFF_FFF0 - 0x1000 * i as u32;
        let ctx = Context {
            snd_una: iss - 300,
            snd_nxt: iss,
            rcv_nxt: irs,
            rtr_expected: true,
        };
        // The Write's RTR without PSH.
        let control = if i == 1 {
            TcpControl::None
        } else {
            TcpControl::Psh
        };
        let rcv_rtr = irs.wrapping_add(rtr.len() as u32);
        let ulpdu: Vec<u8> = (0..30 + 17 * i as u8).map(|b| b ^ kind as u8).collect();
        let data = fpdus(&[&ulpdu]);
        let rcv_data = rcv_rtr.wrapping_add(data.len() as u32);
        ops.push(Op::Command(0, ctx));
        commands.write();
        ops.push(Op::Frame(segment(true, control, irs, iss, rtr)));
        if i < 2 {
            ops.push(Op::Idle(100));
            ops.push(Op::Command(1, ctx));
            commands.read(iss, iss, rcv_rtr, false);
            ops.push(Op::Frame(segment(
                true,
                TcpControl::Psh,
                rcv_rtr,
                iss,
                &data,
            )));
            ops.push(Op::Idle(300));
        } else {
            ops.push(Op::Frame(segment(
                true,
                TcpControl::Psh,
                rcv_rtr,
                iss,
                &data,
            )));
            ops.push(Op::Idle(300));
            ops.push(Op::Command(1, ctx));
            commands.read(iss, iss, rcv_data, false);
        }
        network.push(segment(false, TcpControl::None, iss, rcv_rtr, &[]));
        network.push(segment(false, TcpControl::None, iss, rcv_data, &[]));
        host.push((INDEX, ulpdu));
        events.push((INDEX, false, kind));
    }
    ops.push(Op::Idle(20));
    let seen = run_stalled(ops, stall_probability);
    assert_eq!(seen.to_network, network);
    assert_eq!(seen.to_host, host);
    assert!(seen.to_firmware.is_empty());
    assert_eq!(seen.events, events);
    assert_eq!(seen.commands, commands.commands);
    assert_eq!(seen.reads, commands.reads);
    let c = seen.counters;
    assert_eq!(
        (
            c.cnt_rtr_taken,
            c.cnt_to_firmware,
            c.cnt_acks_sent,
            c.cnt_fpdus_in,
            c.cnt_crc_errors
        ),
        (3, 0, 6, 3, 0)
    );
}

/// Segments of a flow expecting its RTR that are not exactly one of the RTR FPDUs in
/// order at `snd_nxt` go to the firmware unchanged, behind their RX descriptors, and
/// leave the context as it was: a flipped bit in the first or the last byte, an RTR with
/// bytes after it (the Write's padded to the Send's length, the Send followed by an
/// FPDU), an RTR split in two segments, an ACK below or past `snd_nxt`, FIN, RST, a
/// segment out of order or a duplicate. Then the RTR itself is taken (so the context
/// was left as it was), and an RTR FPDU on the flow, which no longer expects one, is an
/// FPDU like any other: delivered.
#[test]
fn near_misses_of_an_rtr_go_to_the_firmware() {
    near_misses(0.0);
}

#[test]
fn near_misses_of_an_rtr_go_to_the_firmware_with_stalled_outputs() {
    near_misses(0.6);
}

fn near_misses(stall_probability: f64) {
    const ISS: u32 = 4_000;
    const IRS: u32 = 70_000;
    let ctx = Context {
        snd_una: ISS,
        snd_nxt: ISS,
        rcv_nxt: IRS,
        rtr_expected: true,
    };
    let [(send, _), (write, write_kind), (read, _)] = rtr_fpdus();
    let flipped = |fpdu: &[u8], at: usize, bit: u8| {
        let mut fpdu = fpdu.to_vec();
        fpdu[at] ^= bit;
        fpdu
    };
    let mut write_padded = write.to_vec();
    write_padded.extend([0; 4]);
    assert_eq!(write_padded.len(), send.len());
    let mut send_and_data = send.to_vec();
    send_and_data.extend(fpdus(&[b"data"]));
    let psh =
        |seq: u32, ack: u32, payload: &[u8]| segment(true, TcpControl::Psh, seq, ack, payload);
    let misses = vec![
        psh(IRS, ISS, &flipped(send, 0, 0x01)),
        psh(IRS, ISS, &flipped(send, send.len() - 1, 0x80)),
        psh(IRS, ISS, &flipped(write, 0, 0x40)),
        psh(IRS, ISS, &flipped(write, write.len() - 1, 0x01)),
        psh(IRS, ISS, &flipped(read, 0, 0x80)),
        psh(IRS, ISS, &flipped(read, 25, 0x10)),
        psh(IRS, ISS, &flipped(read, read.len() - 1, 0x02)),
        psh(IRS, ISS, &write_padded),
        psh(IRS, ISS, &send_and_data),
        segment(true, TcpControl::None, IRS, ISS, &read[..16]),
        psh(IRS + 16, ISS, &read[16..]),
        psh(IRS, ISS - 1, send),
        psh(IRS, ISS + 1, write),
        segment(true, TcpControl::Fin, IRS, ISS, send),
        segment(true, TcpControl::Rst, IRS, ISS, write),
        psh(IRS + 1, ISS, read),
        psh(IRS - send.len() as u32, ISS, send),
    ];
    let rcv_rtr = IRS + write.len() as u32;
    let rcv_after = rcv_rtr + send.len() as u32;
    let mut ops = vec![Op::Command(0, ctx)];
    ops.extend(misses.iter().cloned().map(Op::Frame));
    // The RTR back to back behind them: it waits in the held queue, and takes its
    // match bits from there.
    ops.extend([
        Op::Frame(psh(IRS, ISS, write)),
        Op::Idle(800),
        Op::Command(1, ctx),
        Op::Frame(psh(rcv_rtr, ISS, send)),
        Op::Idle(200),
        Op::Command(1, ctx),
        Op::Idle(20),
    ]);
    let seen = run_stalled(ops, stall_probability);
    let expected_firmware: Vec<Vec<u8>> = misses.iter().map(|f| to_firmware(f)).collect();
    assert_eq!(seen.to_firmware, expected_firmware);
    assert_eq!(
        seen.to_network,
        vec![
            segment(false, TcpControl::None, ISS, rcv_rtr, &[]),
            segment(false, TcpControl::None, ISS, rcv_after, &[]),
        ]
    );
    // The Send's ULPDU: its DDP and RDMAP headers.
    let ulpdu_len = usize::from(u16::from_be_bytes([send[0], send[1]]));
    assert_eq!(seen.to_host, vec![(INDEX, send[2..2 + ulpdu_len].to_vec())]);
    assert_eq!(seen.events, vec![(INDEX, false, write_kind)]);
    let mut commands = Commands::default();
    commands.write();
    commands.read(ISS, ISS, rcv_rtr, false);
    commands.read(ISS, ISS, rcv_after, false);
    assert_eq!(seen.commands, commands.commands);
    assert_eq!(seen.reads, commands.reads);
    let c = seen.counters;
    assert_eq!(
        (
            c.cnt_rtr_taken,
            c.cnt_to_firmware,
            c.cnt_acks_sent,
            c.cnt_fpdus_in
        ),
        (1, misses.len() as u64, 2, 1)
    );
}
