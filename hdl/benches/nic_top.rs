//! Throughput of the NIC datapath top (`SimNicTop`, Verilated) and of its MPA blocks,
//! and how fast RustHDL and Verilator simulate the top.
//!
//! `cargo bench -p iwnic-hdl --bench nic_top`. Every measurement checks what comes out
//! (ULPDUs, FPDUs, frames) against what was sent: a broken datapath panics rather than
//! reporting a number.
//!
//! - **MPA receive**: back-to-back TCP segments of one flow, each full of back-to-back
//!   FPDUs of one size (as many whole FPDUs as fit the 1,460-byte MSS), into `net_rx`;
//!   ULPDUs out of `host_rx`, an ACK per segment out of `net_tx`.
//! - **MPA transmit**: back-to-back ULPDUs into `host_tx`, one data segment per FPDU out
//!   of `net_tx`.
//! - **The MPA blocks alone** (`MpaRxDelineator`, `MpaTxFramer`), including 4,000-byte
//!   FPDUs, which no 1,500-byte-MTU segment carries.
//! - **Simulation speed** of the top on both engines on one short receive workload.
//!
//! Rates are measured from the first beat taken in to the last beat out.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use iwnic_hdl::mpa_rx::MpaRxDelineator;
use iwnic_hdl::mpa_tx::MpaTxFramer;
use iwnic_hdl::nic_top::SimNicTop;
use iwnic_hdl::verilator::VerilatedModel;
use iwnic_proto::fpdu::FpduRepr;
use iwnic_proto::net::{Checksums, SegmentOut};
use iwnic_proto::smoltcp_wire::TcpControl;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rust_hdl::prelude::*;

use iwnic_hdl::verilator::PortValue;

/// One simulator running one block.
trait Engine {
    type Inputs;
    type Outputs;
    /// Applies `inputs`, settles and returns the outputs just before the rising edge.
    fn drive(&mut self, inputs: &Self::Inputs) -> Self::Outputs;
    /// One rising clock edge and the falling edge after it.
    fn tick(&mut self);
}

/// Where the Verilated builds are cached between runs.
fn work_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")))
        .join("bench-verilator")
}

/// Declares a block's ports and derives `Inputs`/`Outputs`, a hand-stepped RustHDL
/// engine and a Verilator engine (which writes only the inputs that changed).
macro_rules! engines {
    (
        $module:ident, $block:ty, verilated as $name:literal,
        inputs { $($input:ident),* $(,)? }
        outputs { $($output:ident),* $(,)? }
    ) => {
        mod $module {
            use super::*;

            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct Inputs { $(pub $input: u64,)* }

            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct Outputs { $(pub $output: u64,)* }

            #[allow(dead_code)]
            pub struct RustHdl(pub $block);

            #[allow(dead_code)]
            impl RustHdl {
                pub fn new(mut uut: $block) -> Self {
                    uut.connect_all();
                    RustHdl(uut)
                }
            }

            fn settle(uut: &mut $block) {
                assert!(
                    simulate(uut, 100),
                    "RustHDL: combinational logic did not settle in 100 delta cycles"
                );
            }

            impl Engine for RustHdl {
                type Inputs = Inputs;
                type Outputs = Outputs;
                fn drive(&mut self, inputs: &Inputs) -> Outputs {
                    $(self.0.$input.next = PortValue::from_port(inputs.$input);)*
                    settle(&mut self.0);
                    Outputs { $($output: self.0.$output.val().to_port(),)* }
                }
                fn tick(&mut self) {
                    self.0.clock.next = true.into();
                    settle(&mut self.0);
                    self.0.clock.next = false.into();
                    settle(&mut self.0);
                }
            }

            #[allow(non_snake_case)]
            struct PortIndices { clock: u32, $($input: u32,)* $($output: u32,)* }

            pub struct Verilated {
                model: VerilatedModel,
                ports: PortIndices,
                applied: Option<Inputs>,
            }

            impl Verilated {
                pub fn new(mut uut: $block) -> Self {
                    uut.connect_all();
                    let verilog = generate_verilog(&uut);
                    let ports = iwnic_hdl::verilator::top_ports(&uut);
                    let model = VerilatedModel::build($name, &verilog, ports, &work_dir())
                        .unwrap_or_else(|e| panic!("building {}: {e}", $name));
                    let ports = PortIndices {
                        clock: model.port("clock"),
                        $($input: model.port(stringify!($input)),)*
                        $($output: model.port(stringify!($output)),)*
                    };
                    Verilated { model, ports, applied: None }
                }
            }

            impl Engine for Verilated {
                type Inputs = Inputs;
                type Outputs = Outputs;
                fn drive(&mut self, inputs: &Inputs) -> Outputs {
                    let old = self.applied;
                    $(
                        if old.map_or(true, |old| old.$input != inputs.$input) {
                            self.model.set(self.ports.$input, inputs.$input);
                        }
                    )*
                    self.applied = Some(*inputs);
                    self.model.eval();
                    Outputs { $($output: self.model.get(self.ports.$output),)* }
                }
                fn tick(&mut self) {
                    self.model.set(self.ports.clock, 1);
                    self.model.eval();
                    self.model.set(self.ports.clock, 0);
                    self.model.eval();
                }
            }
        }
    };
}

engines! {
    top, SimNicTop, verilated as "bench_nic_top",
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
        fw_rx_keep, fw_rx_last, fw_rx_valid,
        ctx_ready, ctx_done, ctx_status,
        event_valid, event_index, event_crc,
        host_tx_ready, host_rx_data, host_rx_keep, host_rx_last, host_rx_valid,
        host_rx_index,
        cnt_frames_in, cnt_frames_out, cnt_acks_sent, cnt_fpdus_in, cnt_fpdus_out,
        cnt_crc_errors, cnt_length_errors, cnt_host_refused, cnt_out_of_order,
        cnt_duplicates, cnt_to_firmware,
    }
}

engines! {
    rx, MpaRxDelineator, verilated as "bench_mpa_rx",
    inputs { reset, max_ulpdu_len, in_data, in_keep, in_last, in_valid, ulpdu_ready }
    outputs {
        in_ready, ulpdu_data, ulpdu_keep, ulpdu_last, ulpdu_good, ulpdu_valid,
        crc_error, length_error,
    }
}

engines! {
    tx, MpaTxFramer, verilated as "bench_mpa_tx",
    inputs { reset, ulpdu_data, ulpdu_keep, ulpdu_last, ulpdu_len, ulpdu_valid, fpdu_ready }
    outputs { ulpdu_ready, fpdu_data, fpdu_keep, fpdu_last, fpdu_valid }
}

const LOCAL_IP: [u8; 4] = [10, 0, 0, 2];
const REMOTE_IP: [u8; 4] = [10, 0, 0, 1];
const LOCAL_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0B];
const REMOTE_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0A];
const LOCAL_PORT: u16 = 4791;
const REMOTE_PORT: u16 = 50_000;
const INDEX: u16 = 5;
const MSS: usize = 1460;
const ISS: u32 = 1_000;
const IRS: u32 = 7_000;
/// FPDU sizes measured; `MSS` is the largest a segment carries.
const FPDU_SIZES: [usize; 4] = [64, 256, 1024, MSS];
/// Segments (receive) or ULPDUs (transmit) per top measurement.
const SEGMENTS: usize = 200;
/// Segments of the simulation-speed workload.
const SPEED_SEGMENTS: usize = 20;
/// Runs of the speed workload on Verilator (one is too short to time).
const SPEED_REPEATS: u64 = 20;
/// Cycles after the last expected output during which nothing more may come out.
const QUIET_CYCLES: u64 = 200;

/// One stream beat: byte `i` in bits `8i+7:8i`, `keep` contiguous low bytes.
#[derive(Clone, Copy, Debug)]
struct Beat {
    data: u64,
    keep: u8,
    last: bool,
}

/// `packet` as beats; bytes outside `keep` are random. An empty packet is one beat with
/// `keep` 0.
fn beats(packet: &[u8], rng: &mut StdRng) -> Vec<Beat> {
    if packet.is_empty() {
        return vec![Beat {
            data: rng.gen(),
            keep: 0,
            last: true,
        }];
    }
    let count = packet.len().div_ceil(8);
    packet
        .chunks(8)
        .enumerate()
        .map(|(index, chunk)| {
            let mut bytes: [u8; 8] = rng.gen();
            bytes[..chunk.len()].copy_from_slice(chunk);
            Beat {
                data: u64::from_le_bytes(bytes),
                keep: (((1u16 << chunk.len()) - 1) & 0xFF) as u8,
                last: index + 1 == count,
            }
        })
        .collect()
}

/// The bytes of a beat that `keep` selects (contiguous low bytes).
fn kept_bytes(data: u64, keep: u64) -> Vec<u8> {
    let keep = keep as u8;
    let count = keep.trailing_ones() as usize;
    assert_eq!(
        keep.count_ones() as usize,
        count,
        "keep {keep:#04x} is not contiguous"
    );
    data.to_le_bytes()[..count].to_vec()
}

fn mac(bytes: [u8; 6]) -> u64 {
    bytes.iter().fold(0, |acc, b| acc << 8 | u64::from(*b))
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

fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let repr = FpduRepr { ulpdu };
    let mut out = vec![0; repr.buffer_len()];
    repr.emit(&mut out).unwrap();
    out
}

/// The ULPDU length whose FPDU is `fpdu_size` bytes (a multiple of 4: no PAD).
fn ulpdu_len(fpdu_size: usize) -> usize {
    assert_eq!(fpdu_size % 4, 0);
    fpdu_size - 6
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.gen()).collect()
}

/// A workload for the top and what must come out of it.
#[derive(Default)]
struct TopWork {
    net_in: Vec<Vec<u8>>,
    host_in: Vec<Vec<u8>>,
    host_out: Vec<Vec<u8>>,
    net_out: Vec<Vec<u8>>,
    /// Payload bytes of the measured stream: ULPDUs, FPDUs, frames (wire).
    ulpdu_bytes: usize,
    fpdu_bytes: usize,
    wire_bytes: usize,
    /// Input beats of the measured stream (one a cycle at best).
    in_beats: usize,
}

/// `segments` back-to-back segments of FPDUs of `fpdu_size`, as many as fit the MSS.
fn receive_work(fpdu_size: usize, segments: usize, rng: &mut StdRng) -> TopWork {
    let per_segment = MSS / fpdu_size;
    assert!(per_segment >= 1);
    let mut work = TopWork::default();
    let mut seq = IRS;
    for _ in 0..segments {
        let mut payload = vec![];
        for _ in 0..per_segment {
            let ulpdu = random_bytes(rng, ulpdu_len(fpdu_size));
            payload.extend(fpdu(&ulpdu));
            work.ulpdu_bytes += ulpdu.len();
            work.host_out.push(ulpdu);
        }
        let frame = segment(true, TcpControl::Psh, seq, ISS, &payload);
        seq = seq.wrapping_add(payload.len() as u32);
        work.fpdu_bytes += payload.len();
        work.wire_bytes += frame.len();
        work.in_beats += frame.len().div_ceil(8);
        work.net_in.push(frame);
        work.net_out
            .push(segment(false, TcpControl::None, ISS, seq, &[]));
    }
    work
}

/// `count` back-to-back ULPDUs whose FPDUs are `fpdu_size` bytes.
fn transmit_work(fpdu_size: usize, count: usize, rng: &mut StdRng) -> TopWork {
    let mut work = TopWork::default();
    let mut seq = ISS;
    for _ in 0..count {
        let ulpdu = random_bytes(rng, ulpdu_len(fpdu_size));
        let f = fpdu(&ulpdu);
        let frame = segment(false, TcpControl::Psh, seq, IRS, &f);
        seq = seq.wrapping_add(f.len() as u32);
        work.ulpdu_bytes += ulpdu.len();
        work.fpdu_bytes += f.len();
        work.wire_bytes += frame.len();
        work.in_beats += ulpdu.len().div_ceil(8);
        work.host_in.push(ulpdu);
        work.net_out.push(frame);
    }
    work
}

/// What a run of the top measured.
struct TopRun {
    /// Every cycle simulated (reset, flow-table clear, context write, workload, quiet).
    cycles: u64,
    wall: Duration,
    /// First input beat taken to last output beat (ULPDU on `host_rx` for receive, frame
    /// on `net_tx` for transmit), inclusive.
    window: u64,
    /// Cycles in the window in which an input beat waited and was not taken.
    in_stalls: u64,
    /// Cycles in the window in which no beat left on the measured output.
    out_idle: u64,
}

fn top_inputs() -> top::Inputs {
    top::Inputs {
        local_ip: u64::from(u32::from_be_bytes(LOCAL_IP)),
        net_tx_ready: 1,
        fw_rx_ready: 1,
        event_ready: 1,
        host_rx_ready: 1,
        ..Default::default()
    }
}

/// Resets the top, writes the flow's context, runs `work` with every ready high and a
/// beat offered whenever one waits, and checks every output.
fn run_top<E>(engine: &mut E, work: &TopWork, receive: bool, seed: u64) -> TopRun
where
    E: Engine<Inputs = top::Inputs, Outputs = top::Outputs>,
{
    let mut rng = StdRng::seed_from_u64(seed);
    let base = top_inputs();
    let start = Instant::now();
    let mut cycle = 0u64;
    let step = |engine: &mut E, inputs: &top::Inputs, cycle: &mut u64| {
        let out = engine.drive(inputs);
        engine.tick();
        *cycle += 1;
        out
    };
    for _ in 0..2 {
        step(engine, &top::Inputs { reset: 1, ..base }, &mut cycle);
    }
    // Write the context; the window takes it once the flow table has cleared.
    let command = top::Inputs {
        ctx_op: 0,
        ctx_valid: 1,
        ctx_index: u64::from(INDEX),
        ctx_local_ip: u64::from(u32::from_be_bytes(LOCAL_IP)),
        ctx_local_port: u64::from(LOCAL_PORT),
        ctx_remote_ip: u64::from(u32::from_be_bytes(REMOTE_IP)),
        ctx_remote_port: u64::from(REMOTE_PORT),
        ctx_local_mac: mac(LOCAL_MAC),
        ctx_remote_mac: mac(REMOTE_MAC),
        ctx_snd_una: u64::from(ISS),
        ctx_snd_nxt: u64::from(ISS),
        ctx_rcv_nxt: u64::from(IRS),
        ctx_peer_window: 65_535,
        ctx_mss: MSS as u64,
        ctx_crc: 1,
        ctx_rtr_expected: 0,
        ..base
    };
    let mut taken = false;
    loop {
        let out = step(engine, if taken { &base } else { &command }, &mut cycle);
        taken |= out.ctx_ready == 1;
        if out.ctx_done == 1 {
            assert!(taken, "ctx_done before the command was taken");
            assert_eq!(out.ctx_status, 1, "the flow did not go into the flow table");
            break;
        }
        assert!(cycle < 20_000, "the context write never finished");
    }

    let mut net: VecDeque<Beat> = work
        .net_in
        .iter()
        .flat_map(|f| beats(f, &mut rng))
        .collect();
    let mut host: VecDeque<(Beat, u64)> = work
        .host_in
        .iter()
        .flat_map(|u| {
            let len = u.len() as u64;
            beats(u, &mut rng).into_iter().map(move |b| (b, len))
        })
        .collect();
    let mut host_out: VecDeque<&Vec<u8>> = work.host_out.iter().collect();
    let mut net_out: VecDeque<&Vec<u8>> = work.net_out.iter().collect();
    let (mut host_bytes, mut net_bytes) = (vec![], vec![]);
    let (mut delivered, mut sent) = (0usize, 0usize);
    let mut first_in = None;
    let mut last_out = 0;
    let mut done_at = None;
    let (mut in_stalls, mut out_idle) = (0u64, 0u64);
    let mut out_idle_since_last = 0u64;
    let limit = cycle + 200 * (work.in_beats as u64 + 1000);
    loop {
        let mut inputs = base;
        if let Some(b) = net.front() {
            inputs.net_rx_data = b.data;
            inputs.net_rx_keep = u64::from(b.keep);
            inputs.net_rx_last = u64::from(b.last);
            inputs.net_rx_valid = 1;
        }
        if let Some((b, len)) = host.front() {
            inputs.host_tx_data = b.data;
            inputs.host_tx_keep = u64::from(b.keep);
            inputs.host_tx_last = u64::from(b.last);
            inputs.host_tx_valid = 1;
            inputs.host_tx_index = u64::from(INDEX);
            inputs.host_tx_len = *len;
        }
        let now = cycle;
        let out = step(engine, &inputs, &mut cycle);
        if (inputs.net_rx_valid == 1 && out.net_rx_ready == 0)
            || (inputs.host_tx_valid == 1 && out.host_tx_ready == 0)
        {
            in_stalls += u64::from(first_in.is_some());
        }
        let measured_valid = if receive {
            out.host_rx_valid
        } else {
            out.net_tx_valid
        };
        if first_in.is_some() && measured_valid == 0 {
            out_idle_since_last += 1;
        }
        if inputs.net_rx_valid == 1 && out.net_rx_ready == 1 {
            net.pop_front();
            first_in.get_or_insert(now);
        }
        if inputs.host_tx_valid == 1 && out.host_tx_ready == 1 {
            host.pop_front();
            first_in.get_or_insert(now);
        }
        if out.host_rx_valid == 1 {
            host_bytes.extend(kept_bytes(out.host_rx_data, out.host_rx_keep));
            if out.host_rx_last == 1 {
                let ulpdu = std::mem::take(&mut host_bytes);
                assert_eq!(
                    out.host_rx_index,
                    u64::from(INDEX),
                    "ULPDU of another index"
                );
                let expected = host_out.pop_front().unwrap_or_else(|| {
                    panic!("an unexpected ULPDU ({} bytes) at cycle {now}", ulpdu.len())
                });
                assert!(
                    &ulpdu == expected,
                    "ULPDU {delivered} ({} bytes) differs from the one sent ({} bytes) at \
                     cycle {now}",
                    ulpdu.len(),
                    expected.len()
                );
                delivered += 1;
                if receive {
                    last_out = now;
                    out_idle += std::mem::take(&mut out_idle_since_last);
                }
            }
        }
        if out.net_tx_valid == 1 {
            net_bytes.extend(kept_bytes(out.net_tx_data, out.net_tx_keep));
            if out.net_tx_last == 1 {
                let frame = std::mem::take(&mut net_bytes);
                let expected = net_out.pop_front().unwrap_or_else(|| {
                    panic!("an unexpected frame ({} bytes) at cycle {now}", frame.len())
                });
                assert!(
                    &frame == expected,
                    "frame {sent} out differs at cycle {now}:\n  got      {frame:02x?}\n  \
                     expected {expected:02x?}"
                );
                sent += 1;
                if !receive {
                    last_out = now;
                    out_idle += std::mem::take(&mut out_idle_since_last);
                }
            }
        }
        assert_eq!(
            out.fw_rx_valid, 0,
            "a frame went to the firmware at cycle {now}"
        );
        assert_eq!(
            out.event_valid, 0,
            "an event (crc {}) at cycle {now}",
            out.event_crc
        );
        let finished = net.is_empty() && host.is_empty() && host_out.is_empty();
        if finished && net_out.is_empty() {
            let at = *done_at.get_or_insert(cycle);
            if cycle >= at + QUIET_CYCLES {
                break;
            }
        }
        assert!(
            cycle < limit,
            "the workload does not finish: {} net beats and {} host beats left, {} ULPDUs \
             and {} frames still expected (counters {out:?})",
            net.len(),
            host.len(),
            host_out.len(),
            net_out.len()
        );
    }
    assert!(host_bytes.is_empty() && net_bytes.is_empty());
    TopRun {
        cycles: cycle,
        wall: start.elapsed(),
        window: last_out - first_in.expect("nothing was taken") + 1,
        in_stalls,
        out_idle,
    }
}

/// Back-to-back FPDUs through `mpa_rx` alone, as many to a segment as the MSS holds (one
/// if none fits); returns the cycles from the first beat in to the last ULPDU beat out.
fn run_mpa_rx(engine: &mut rx::Verilated, fpdu_size: usize, count: usize, seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let per_segment = (MSS / fpdu_size).max(1);
    let ulpdus: Vec<Vec<u8>> = (0..count)
        .map(|_| random_bytes(&mut rng, ulpdu_len(fpdu_size)))
        .collect();
    let mut input: VecDeque<Beat> = VecDeque::new();
    for chunk in ulpdus.chunks(per_segment) {
        let payload: Vec<u8> = chunk.iter().flat_map(|u| fpdu(u)).collect();
        input.extend(beats(&payload, &mut rng));
    }
    let base = rx::Inputs {
        max_ulpdu_len: 0xFFFF,
        ulpdu_ready: 1,
        ..Default::default()
    };
    for _ in 0..2 {
        engine.drive(&rx::Inputs { reset: 1, ..base });
        engine.tick();
    }
    let mut expected: VecDeque<Vec<u8>> = ulpdus.into();
    let mut bytes = vec![];
    let (mut cycle, mut first_in, mut last_out) = (0u64, None, 0u64);
    while !expected.is_empty() {
        let mut inputs = base;
        if let Some(b) = input.front() {
            inputs.in_data = b.data;
            inputs.in_keep = u64::from(b.keep);
            inputs.in_last = u64::from(b.last);
            inputs.in_valid = 1;
        }
        let out = engine.drive(&inputs);
        engine.tick();
        if inputs.in_valid == 1 && out.in_ready == 1 {
            input.pop_front();
            first_in.get_or_insert(cycle);
        }
        assert_eq!(
            (out.crc_error, out.length_error),
            (0, 0),
            "mpa_rx error at cycle {cycle}"
        );
        if out.ulpdu_valid == 1 {
            bytes.extend(kept_bytes(out.ulpdu_data, out.ulpdu_keep));
            if out.ulpdu_last == 1 {
                assert_eq!(out.ulpdu_good, 1, "mpa_rx: a ULPDU not good");
                let ulpdu = std::mem::take(&mut bytes);
                assert!(
                    ulpdu == expected.pop_front().unwrap(),
                    "mpa_rx: ULPDU differs"
                );
                last_out = cycle;
            }
        }
        cycle += 1;
        assert!(cycle < 1_000_000, "mpa_rx does not finish");
    }
    last_out - first_in.unwrap() + 1
}

/// Back-to-back ULPDUs through `mpa_tx` alone; returns the cycles from the first beat in
/// to the last FPDU beat out.
fn run_mpa_tx(engine: &mut tx::Verilated, fpdu_size: usize, count: usize, seed: u64) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let ulpdus: Vec<Vec<u8>> = (0..count)
        .map(|_| random_bytes(&mut rng, ulpdu_len(fpdu_size)))
        .collect();
    let mut input: VecDeque<(Beat, u64)> = VecDeque::new();
    for u in &ulpdus {
        input.extend(beats(u, &mut rng).into_iter().map(|b| (b, u.len() as u64)));
    }
    let base = tx::Inputs {
        fpdu_ready: 1,
        ..Default::default()
    };
    for _ in 0..2 {
        engine.drive(&tx::Inputs { reset: 1, ..base });
        engine.tick();
    }
    let mut expected: VecDeque<Vec<u8>> = ulpdus.iter().map(|u| fpdu(u)).collect();
    let mut bytes = vec![];
    let (mut cycle, mut first_in, mut last_out) = (0u64, None, 0u64);
    while !expected.is_empty() {
        let mut inputs = base;
        if let Some((b, len)) = input.front() {
            inputs.ulpdu_data = b.data;
            inputs.ulpdu_keep = u64::from(b.keep);
            inputs.ulpdu_last = u64::from(b.last);
            inputs.ulpdu_len = *len;
            inputs.ulpdu_valid = 1;
        }
        let out = engine.drive(&inputs);
        engine.tick();
        if inputs.ulpdu_valid == 1 && out.ulpdu_ready == 1 {
            input.pop_front();
            first_in.get_or_insert(cycle);
        }
        if out.fpdu_valid == 1 {
            bytes.extend(kept_bytes(out.fpdu_data, out.fpdu_keep));
            if out.fpdu_last == 1 {
                let f = std::mem::take(&mut bytes);
                assert!(f == expected.pop_front().unwrap(), "mpa_tx: FPDU differs");
                last_out = cycle;
            }
        }
        cycle += 1;
        assert!(cycle < 1_000_000, "mpa_tx does not finish");
    }
    last_out - first_in.unwrap() + 1
}

fn per_cycle(bytes: usize, cycles: u64) -> String {
    format!("{:.2}", bytes as f64 / cycles as f64)
}

fn rate(cycles: u64, wall: Duration) -> f64 {
    cycles as f64 / wall.as_secs_f64()
}

fn main() {
    // `cargo bench` passes `--bench`; a filter or `--list` from the harness is ignored.
    let build = |what: &str| {
        println!(
            "building the Verilated {what} (cached under {})",
            work_dir().display()
        );
        Instant::now()
    };
    let t = build("nic_top");
    let mut top_v = top::Verilated::new(SimNicTop::default());
    println!("  ... {:.1} s", t.elapsed().as_secs_f64());
    let t = build("mpa_rx and mpa_tx");
    let mut rx_v = rx::Verilated::new(MpaRxDelineator::default());
    let mut tx_v = tx::Verilated::new(MpaTxFramer::default());
    println!("  ... {:.1} s", t.elapsed().as_secs_f64());

    let mut rng = StdRng::seed_from_u64(2026);
    let mut table = vec![];

    // 1. Receive through the top.
    let mut rx_rows = vec![];
    for (i, &size) in FPDU_SIZES.iter().enumerate() {
        println!("measuring: nic_top receive, {size}-byte FPDUs, {SEGMENTS} segments");
        let work = receive_work(size, SEGMENTS, &mut rng);
        let run = run_top(&mut top_v, &work, true, 10 + i as u64);
        rx_rows.push((size, work.host_out.len() / SEGMENTS, work, run));
    }
    table.push(String::new());
    table.push(format!(
        "MPA receive, nic_top (Verilated), {SEGMENTS} back-to-back segments, MSS {MSS}"
    ));
    table.push(format!(
        "  {:>6} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>11}",
        "FPDU B",
        "FPDUs/seg",
        "cycles",
        "ULPDU B/c",
        "FPDU B/c",
        "wire B/c",
        "cyc/seg",
        "beats/seg",
        "stalls/seg",
        "idle/seg"
    ));
    for (size, per, work, run) in &rx_rows {
        table.push(format!(
            "  {:>6} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10.1} {:>11.1} {:>11.1} {:>11.1}",
            size,
            per,
            run.window,
            per_cycle(work.ulpdu_bytes, run.window),
            per_cycle(work.fpdu_bytes, run.window),
            per_cycle(work.wire_bytes, run.window),
            run.window as f64 / SEGMENTS as f64,
            work.in_beats as f64 / SEGMENTS as f64,
            run.in_stalls as f64 / SEGMENTS as f64,
            run.out_idle as f64 / SEGMENTS as f64,
        ));
    }
    table.push(
        "  cycles: first beat in to last ULPDU beat out; beats/seg: net_rx beats a segment \
         (the input bound); stalls/seg: cycles net_rx_valid waited on net_rx_ready; \
         idle/seg: cycles without a host_rx beat"
            .into(),
    );
    table.push(format!(
        "  {:>6} {:>9} (an FPDU never crosses a segment and no segment under a 1,500-byte \
         MTU holds it: see mpa_rx alone)",
        4000, "n/a"
    ));

    // 2. Transmit through the top.
    let mut tx_rows = vec![];
    for (i, &size) in FPDU_SIZES.iter().enumerate() {
        println!("measuring: nic_top transmit, {size}-byte FPDUs, {SEGMENTS} ULPDUs");
        let work = transmit_work(size, SEGMENTS, &mut rng);
        let run = run_top(&mut top_v, &work, false, 20 + i as u64);
        tx_rows.push((size, work, run));
    }
    table.push(String::new());
    table.push(format!(
        "MPA transmit, nic_top (Verilated), {SEGMENTS} back-to-back ULPDUs, one FPDU a segment"
    ));
    table.push(format!(
        "  {:>6} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>11}",
        "FPDU B",
        "ULPDU B",
        "cycles",
        "ULPDU B/c",
        "FPDU B/c",
        "wire B/c",
        "cyc/seg",
        "beats/seg",
        "stalls/seg",
        "idle/seg"
    ));
    for (size, work, run) in &tx_rows {
        table.push(format!(
            "  {:>6} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10.1} {:>11.1} {:>11.1} {:>11.1}",
            size,
            ulpdu_len(*size),
            run.window,
            per_cycle(work.ulpdu_bytes, run.window),
            per_cycle(work.fpdu_bytes, run.window),
            per_cycle(work.wire_bytes, run.window),
            run.window as f64 / SEGMENTS as f64,
            work.wire_bytes.div_ceil(8) as f64 / SEGMENTS as f64,
            run.in_stalls as f64 / SEGMENTS as f64,
            run.out_idle as f64 / SEGMENTS as f64,
        ));
    }

    table.push(
        "  cycles: first beat in to last net_tx beat out; beats/seg: net_tx beats a frame \
         (the output bound); stalls/seg: cycles host_tx_valid waited on host_tx_ready; \
         idle/seg: cycles without a net_tx beat"
            .into(),
    );

    // The MPA blocks alone.
    let block_sizes = [64usize, 256, 1024, 4000];
    let mut block_rows = vec![];
    for (i, &size) in block_sizes.iter().enumerate() {
        let count = (400_000 / size).clamp(200, 4000);
        println!("measuring: mpa_rx and mpa_tx alone, {size}-byte FPDUs, {count} FPDUs");
        let rx_cycles = run_mpa_rx(&mut rx_v, size, count, 30 + i as u64);
        let tx_cycles = run_mpa_tx(&mut tx_v, size, count, 40 + i as u64);
        block_rows.push((size, count, rx_cycles, tx_cycles));
    }
    table.push(String::new());
    table.push("MPA blocks alone (Verilated), back-to-back FPDUs (target 8 B/cycle)".into());
    table.push(format!(
        "  {:>6} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "FPDU B", "FPDUs", "rx cycles", "rx FPDU B/c", "rx ULPDU B/c", "tx cycles", "tx FPDU B/c"
    ));
    for (size, count, rx_cycles, tx_cycles) in &block_rows {
        let fpdu_bytes = size * count;
        let ulpdu_bytes = ulpdu_len(*size) * count;
        table.push(format!(
            "  {:>6} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}",
            size,
            count,
            rx_cycles,
            per_cycle(fpdu_bytes, *rx_cycles),
            per_cycle(ulpdu_bytes, *rx_cycles),
            tx_cycles,
            per_cycle(fpdu_bytes, *tx_cycles),
        ));
    }

    // 3. Simulation speed.
    let speed_size = 1024;
    let work = receive_work(speed_size, SPEED_SEGMENTS, &mut rng);
    println!(
        "measuring: simulation speed, Verilator, {SPEED_SEGMENTS} segments of {speed_size}-byte \
         FPDUs"
    );
    let mut verilated = run_top(&mut top_v, &work, true, 50);
    for _ in 1..SPEED_REPEATS {
        let again = run_top(&mut top_v, &work, true, 50);
        assert_eq!(
            again.cycles, verilated.cycles,
            "a repeat took different cycles"
        );
        verilated.wall += again.wall;
    }
    verilated.cycles *= SPEED_REPEATS;
    println!(
        "measuring: simulation speed, RustHDL (hand-stepped), {SPEED_SEGMENTS} segments of \
         {speed_size}-byte FPDUs"
    );
    let mut rusthdl = top::RustHdl::new(SimNicTop::default());
    let hand = run_top(&mut rusthdl, &work, true, 50);
    assert_eq!(
        verilated.cycles,
        hand.cycles * SPEED_REPEATS,
        "the engines took different cycles"
    );
    let (v_rate, r_rate) = (
        rate(verilated.cycles, verilated.wall),
        rate(hand.cycles, hand.wall),
    );
    table.push(String::new());
    table.push(format!(
        "Simulation speed, SimNicTop, {SPEED_SEGMENTS} segments of {speed_size}-byte FPDUs \
         ({} cycles with reset, flow-table clear and context write; Verilator runs it \
         {SPEED_REPEATS} times)",
        hand.cycles
    ));
    table.push(format!(
        "  Verilator {:>12.0} cycles/s ({:.3} s)",
        v_rate,
        verilated.wall.as_secs_f64()
    ));
    table.push(format!(
        "  RustHDL   {:>12.0} cycles/s ({:.3} s)",
        r_rate,
        hand.wall.as_secs_f64()
    ));
    table.push(format!("  Verilator / RustHDL: {:.0}x", v_rate / r_rate));

    println!();
    for line in table {
        println!("{line}");
    }
}
