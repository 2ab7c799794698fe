//! Transmit checksum insertion against a reference written like the testbench model's
//! `fill_checksums` (smoltcp's `fill_checksum` on the IPv4 header and the TCP segment),
//! on frames from `SegmentOut::emit` and `TcpFrameRepr::emit_with` with offloaded
//! checksums, garbage in the checksum fields, and frames that must pass unchanged or be
//! dropped.

use std::collections::VecDeque;

use iwnic_hdl::tx_checksum::{TxChecksum, MAX_FRAME_LEN};
use iwnic_proto::net::{Checksums, SegmentOut, TcpFrameRepr};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smoltcp::wire::{
    EthernetAddress, IpAddress, Ipv4Address, Ipv4Packet, TcpControl, TcpPacket, TcpRepr,
    TcpSeqNumber,
};

use iwnic_hdl::verilator::lint;
use rust_hdl::prelude::*;

use crate::dut::{dut, lockstep, work_dir, Bench, Engine, Timing};
use crate::stream::{beats, kept_bytes, Beat, Sink, Source};

dut! {
    TxChecksum, verilated as "tx_checksum",
    inputs { reset, in_data, in_keep, in_last, in_valid, out_ready }
    outputs {
        in_ready, out_data, out_keep, out_last, out_valid,
        frames_filled, frames_passed, frames_dropped,
    }
}

const IP: usize = 14;
const TCP: usize = 34;

/// Frame counts by outcome, in the order of the block's counter ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    filled: u64,
    passed: u64,
    dropped: u64,
}

/// The frame the block must send for `frame`, or `None` if it drops it.
fn reference(frame: &[u8], counts: &mut Counts) -> Option<Vec<u8>> {
    if frame.len() > MAX_FRAME_LEN as usize {
        counts.dropped += 1;
        return None;
    }
    let mut out = frame.to_vec();
    let total = |f: &[u8]| usize::from(u16::from_be_bytes([f[IP + 2], f[IP + 3]]));
    let fills = frame.len() >= TCP
        && frame[12..14] == [0x08, 0x00]
        && frame[IP] == 0x45
        && frame[IP + 9] == 6
        && total(frame) >= 40
        && IP + total(frame) <= frame.len();
    if !fills {
        counts.passed += 1;
        return Some(out);
    }
    counts.filled += 1;
    // As the model's `fill_checksums` does it.
    let mut ip = Ipv4Packet::new_checked(&mut out[IP..]).unwrap();
    ip.fill_checksum();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let header = usize::from(ip.header_len());
    let total_len = usize::from(ip.total_len());
    let mut tcp = TcpPacket::new_unchecked(&mut ip.into_inner()[header..total_len]);
    tcp.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
    // smoltcp's own parse verifies both.
    let ip = Ipv4Packet::new_checked(&out[IP..]).unwrap();
    assert!(ip.verify_checksum());
    let tcp = TcpPacket::new_checked(&out[TCP..IP + total_len]).unwrap();
    assert!(tcp.verify_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst)));
    Some(out)
}

/// Wraps an engine and checks, every cycle, that `in_ready` is the same whatever
/// `in_valid` is (it must not depend on it combinationally).
struct ReadyProbe<E>(E);

impl<E: Engine<Inputs = Inputs, Outputs = Outputs>> Engine for ReadyProbe<E> {
    type Inputs = Inputs;
    type Outputs = Outputs;
    fn drive(&mut self, inputs: &Inputs) -> Outputs {
        let flipped = Inputs {
            in_valid: inputs.in_valid ^ 1,
            ..*inputs
        };
        let probe = self.0.drive(&flipped).in_ready;
        let outputs = self.0.drive(inputs);
        assert_eq!(probe, outputs.in_ready, "in_ready follows in_valid");
        outputs
    }
    fn tick(&mut self) {
        self.0.tick();
    }
}

/// Feeds frames; checks every output frame against the reference, the counters, and
/// that no frame has a bubble. Optionally resets the block at a given cycle and then
/// feeds a second batch.
struct TxBench {
    reset_cycles: u32,
    source: Source<Beat>,
    sink: Sink,
    expected: VecDeque<Vec<u8>>,
    expected_counts: Counts,
    /// The reset in the middle: at this cycle, then the frames fed after it.
    reset_at: Option<u64>,
    after_reset: Vec<Vec<u8>>,
    idle_probability: f64,
    seed: u64,
    cycle: u64,
    packet: Vec<u8>,
    /// A non-last beat was taken last cycle: this cycle must offer the next one.
    mid_frame: bool,
    drain_cycles: u32,
    last_outputs: Outputs,
    /// Cycles (counted from the end of reset) of the first input beat taken, the last
    /// output beat taken, and the count of cycles with `in_ready` low after reset.
    first_in: Option<u64>,
    last_out: Option<u64>,
    ready_low: u64,
    frames_out: usize,
    seen_after_reset: usize,
}

impl TxBench {
    fn new(frames: &[Vec<u8>], idle_probability: f64, stall_probability: f64, seed: u64) -> Self {
        let mut bench = TxBench {
            reset_cycles: 2,
            source: Source::new(vec![], 0.0, 0),
            sink: Sink::new(stall_probability, seed + 2),
            expected: VecDeque::new(),
            expected_counts: Counts::default(),
            reset_at: None,
            after_reset: vec![],
            idle_probability,
            seed,
            cycle: 0,
            packet: vec![],
            mid_frame: false,
            drain_cycles: 4,
            last_outputs: Outputs::default(),
            first_in: None,
            last_out: None,
            ready_low: 0,
            frames_out: 0,
            seen_after_reset: 0,
        };
        bench.load(frames);
        bench
    }

    fn load(&mut self, frames: &[Vec<u8>]) {
        let mut rng = StdRng::seed_from_u64(self.seed);
        self.expected_counts = Counts::default();
        self.expected = frames
            .iter()
            .filter_map(|f| reference(f, &mut self.expected_counts))
            .collect();
        self.source = Source::new(
            frames.iter().flat_map(|f| beats(f, &mut rng)),
            self.idle_probability,
            self.seed + 1,
        );
        self.packet.clear();
        self.mid_frame = false;
    }

    fn counts(&self) -> Counts {
        let o = &self.last_outputs;
        Counts {
            filled: o.frames_filled,
            passed: o.frames_passed,
            dropped: o.frames_dropped,
        }
    }
}

impl Bench<Inputs, Outputs> for TxBench {
    fn inputs(&mut self) -> Option<Inputs> {
        self.cycle += 1;
        if self.reset_at == Some(self.cycle) {
            self.reset_at = None;
            self.reset_cycles = 2;
            let frames = std::mem::take(&mut self.after_reset);
            self.seed += 10;
            self.load(&frames);
            self.seen_after_reset = self.frames_out;
        }
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            return Some(Inputs {
                reset: 1,
                ..Default::default()
            });
        }
        if self.source.is_empty() && self.expected.is_empty() && self.reset_at.is_none() {
            if self.drain_cycles == 0 {
                return None;
            }
            self.drain_cycles -= 1;
        }
        let out_ready = u64::from(self.sink.ready());
        Some(match self.source.offer() {
            Some(beat) => Inputs {
                reset: 0,
                in_data: beat.data,
                in_keep: beat.keep.into(),
                in_last: beat.last.into(),
                in_valid: 1,
                out_ready,
            },
            None => Inputs {
                out_ready,
                ..Default::default()
            },
        })
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        self.last_outputs = *outputs;
        if inputs.reset == 1 {
            assert_eq!(outputs.in_ready, 0, "in_ready during reset");
            self.first_in = None;
            self.last_out = None;
            self.ready_low = 0;
            self.cycle = 0;
            return;
        }
        if self.mid_frame {
            assert_eq!(outputs.out_valid, 1, "a bubble within a frame");
        }
        if outputs.in_ready == 0 && !self.source.is_empty() {
            self.ready_low += 1;
        }
        if inputs.in_valid == 1 && outputs.in_ready == 1 && self.first_in.is_none() {
            self.first_in = Some(self.cycle);
        }
        self.source.handshake(outputs.in_ready == 1);
        if outputs.out_valid == 0 || inputs.out_ready == 0 {
            return;
        }
        self.last_out = Some(self.cycle);
        let beat = Beat {
            data: outputs.out_data,
            keep: outputs.out_keep as u8,
            last: outputs.out_last == 1,
        };
        if !beat.last {
            assert_eq!(beat.keep, 0xFF, "a partial beat before the last");
        }
        self.mid_frame = !beat.last;
        self.packet.extend(kept_bytes(&beat));
        if beat.last {
            let frame = std::mem::take(&mut self.packet);
            let expected = self.expected.pop_front().expect("a frame too many");
            assert_eq!(frame, expected, "output frame {}", self.frames_out);
            self.frames_out += 1;
        }
    }
}

fn engines() -> (ReadyProbe<RustHdl>, ReadyProbe<Verilated>) {
    (
        ReadyProbe(RustHdl::new(TxChecksum::default())),
        ReadyProbe(Verilated::new(TxChecksum::default())),
    )
}

fn run_bench(bench: &mut TxBench) -> Timing {
    let (mut a, mut b) = engines();
    let timing = lockstep(&mut a, &mut b, bench);
    assert!(bench.source.is_empty() && bench.expected.is_empty());
    assert_eq!(bench.counts(), bench.expected_counts);
    timing
}

fn run(
    frames: &[Vec<u8>],
    idle_probability: f64,
    stall_probability: f64,
    seed: u64,
) -> (Timing, TxBench) {
    let mut bench = TxBench::new(frames, idle_probability, stall_probability, seed);
    let timing = run_bench(&mut bench);
    (timing, bench)
}

/// A frame from `SegmentOut::emit` with offloaded checksums (zero fields, padded to
/// 60 bytes).
fn segment_out(rng: &mut StdRng, payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len).map(|_| rng.gen()).collect();
    let control = [
        TcpControl::None,
        TcpControl::Psh,
        TcpControl::Syn,
        TcpControl::Fin,
        TcpControl::Rst,
    ][rng.gen_range(0..5)];
    let seg = SegmentOut {
        src_mac: rng.gen(),
        dst_mac: rng.gen(),
        src_ip: rng.gen(),
        dst_ip: rng.gen(),
        src_port: rng.gen(),
        dst_port: rng.gen(),
        control,
        seq: rng.gen(),
        ack: rng.gen_bool(0.8).then(|| rng.gen()),
        window: rng.gen(),
        syn_options: (control == TcpControl::Syn)
            .then(|| (rng.gen(), rng.gen::<bool>().then(|| rng.gen_range(0..=14)))),
    };
    let mut frame = vec![0; seg.buffer_len(payload.len())];
    let len = seg
        .emit(&payload, &mut frame, Checksums::Offloaded)
        .unwrap();
    assert_eq!(len, frame.len());
    // The same segment with software checksums is what the block must make of it.
    let mut software = vec![0; len];
    seg.emit(&payload, &mut software, Checksums::Software)
        .unwrap();
    let expected = reference(&frame, &mut Counts::default());
    assert_eq!(expected.is_none(), len > MAX_FRAME_LEN as usize);
    assert!(expected.is_none_or(|out| out == software));
    frame
}

/// A frame from smoltcp's `TcpRepr` (options on SYNs), checksums left zero.
fn smoltcp_frame(rng: &mut StdRng, payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len).map(|_| rng.gen()).collect();
    let control = [
        TcpControl::None,
        TcpControl::Psh,
        TcpControl::Syn,
        TcpControl::Fin,
        TcpControl::Rst,
    ][rng.gen_range(0..5)];
    let syn = control == TcpControl::Syn;
    let repr = TcpFrameRepr {
        src_mac: EthernetAddress(rng.gen()),
        dst_mac: EthernetAddress(rng.gen()),
        src_ip: Ipv4Address::from(rng.gen::<[u8; 4]>()),
        dst_ip: Ipv4Address::from(rng.gen::<[u8; 4]>()),
        ttl: 64,
        tcp: TcpRepr {
            src_port: rng.gen_range(1..=u16::MAX),
            dst_port: rng.gen_range(1..=u16::MAX),
            control,
            seq_number: TcpSeqNumber(rng.gen()),
            ack_number: rng.gen_bool(0.8).then(|| TcpSeqNumber(rng.gen())),
            window_len: rng.gen(),
            window_scale: (syn && rng.gen()).then(|| rng.gen_range(0..=14)),
            max_seg_size: (syn && rng.gen()).then(|| rng.gen()),
            sack_permitted: syn && rng.gen(),
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &payload,
        },
    };
    let mut frame = vec![0; repr.buffer_len()];
    repr.emit_with(&mut frame, Checksums::Offloaded).unwrap();
    let mut software = vec![0; repr.buffer_len()];
    repr.emit(&mut software).unwrap();
    let expected = reference(&frame, &mut Counts::default());
    assert_eq!(expected.is_none(), frame.len() > MAX_FRAME_LEN as usize);
    assert!(expected.is_none_or(|out| out == software));
    frame
}

/// Random bytes in both checksum fields (the block must ignore them).
fn garble_checksums(rng: &mut StdRng, frame: &mut [u8]) {
    frame[IP + 10] = rng.gen();
    frame[IP + 11] = rng.gen();
    frame[TCP + 16] = rng.gen();
    frame[TCP + 17] = rng.gen();
}

/// A TCP frame to be filled: either builder, any payload length, often garbage in the
/// checksum fields, sometimes Ethernet padding (garbage) past the IPv4 packet.
fn tcp_frame(rng: &mut StdRng, max_payload: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=max_payload);
    let mut f = if rng.gen() {
        segment_out(rng, len)
    } else {
        smoltcp_frame(rng, len)
    };
    if rng.gen_bool(0.5) {
        garble_checksums(rng, &mut f);
    }
    if rng.gen_bool(0.2) && f.len() < MAX_FRAME_LEN as usize {
        let extra = rng.gen_range(1..=20.min(MAX_FRAME_LEN as usize - f.len()));
        f.extend((0..extra).map(|_| rng.gen::<u8>()));
    }
    f
}

/// A frame the block must pass unchanged (or drop, if oversized).
fn other_frame(rng: &mut StdRng, how: usize) -> Vec<u8> {
    let mut f = tcp_frame(rng, 200);
    match how {
        0 => f[12..14].copy_from_slice(&[0x08, 0x06]), // ARP
        1 => f[12..14].copy_from_slice(&[0x86, 0xDD]), // IPv6
        2 => f[IP + 9] = 17,                           // UDP
        3 => {
            // IHL 6: one word of options, lengths kept consistent.
            f.splice(TCP..TCP, [1u8, 1, 1, 1]);
            f[IP] = 0x46;
            let total = u16::from_be_bytes([f[IP + 2], f[IP + 3]]) + 4;
            f[IP + 2..IP + 4].copy_from_slice(&total.to_be_bytes());
        }
        4 => f[IP] = 0x65, // version 6
        5 => {
            // A total length beyond the frame; sometimes so far that 14 + total wraps
            // a 16-bit sum.
            let grown = if rng.gen_bool(0.5) {
                rng.gen_range(65_522..=u16::MAX)
            } else {
                (f.len() - IP) as u16 + rng.gen_range(1..100)
            };
            f[IP + 2..IP + 4].copy_from_slice(&grown.to_be_bytes());
        }
        6 => f[IP + 2..IP + 4].copy_from_slice(&rng.gen_range(0u16..40).to_be_bytes()),
        7 => f.truncate(rng.gen_range(1..54)), // short
        8 => f = (0..rng.gen_range(1..200)).map(|_| rng.gen()).collect(),
        9 => {
            // Oversized.
            let len = rng.gen_range(MAX_FRAME_LEN as usize + 1..=2100);
            f = tcp_frame(rng, 1460);
            f.resize(len, 0xA5);
        }
        _ => unreachable!(),
    }
    f
}

fn mixed_frames(rng: &mut StdRng, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| {
            if rng.gen_bool(0.7) {
                tcp_frame(rng, 1460)
            } else {
                let how = rng.gen_range(0..10);
                other_frame(rng, how)
            }
        })
        .collect()
}

/// Every payload length 0..=80 from both builders: odd and even segment ends at every
/// position in a beat, 60-byte padded minimum frames, SYNs with options.
#[test]
fn tx_checksum_every_length() {
    let mut rng = StdRng::seed_from_u64(0x7C5);
    let mut frames = vec![];
    for len in 0..=80 {
        frames.push(segment_out(&mut rng, len));
        let mut f = smoltcp_frame(&mut rng, len);
        garble_checksums(&mut rng, &mut f);
        frames.push(f);
    }
    let (_, bench) = run(&frames, 0.0, 0.0, 30);
    assert_eq!(bench.expected_counts.filled, frames.len() as u64);
    run(&frames, 0.3, 0.3, 31);
}

#[test]
fn tx_checksum_passes_and_drops_other_frames() {
    let mut rng = StdRng::seed_from_u64(0x0DD);
    let mut frames = vec![];
    for how in 0..10 {
        for _ in 0..5 {
            frames.push(other_frame(&mut rng, how));
            frames.push(tcp_frame(&mut rng, 100));
        }
    }
    // The longest frames: exactly 1518 bytes is filled, 1519 dropped.
    let mut f = segment_out(&mut rng, 1464);
    while f.len() != MAX_FRAME_LEN as usize {
        f = segment_out(&mut rng, 1464); // not a SYN, whose options make it longer
    }
    frames.push(f.clone());
    f.push(0);
    frames.push(f);
    let (_, bench) = run(&frames, 0.2, 0.2, 32);
    let c = bench.expected_counts;
    assert!(c.passed >= 40 && c.dropped == 6 && c.filled >= 50, "{c:?}");
}

#[test]
fn tx_checksum_random_frames_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0x1518);
    let frames = mixed_frames(&mut rng, 80);
    for (i, &(idle, stall)) in [(0.0, 0.0), (0.1, 0.5), (0.5, 0.1), (0.3, 0.3), (0.0, 0.7)]
        .iter()
        .enumerate()
    {
        let (timing, bench) = run(&frames, idle, stall, 40 + i as u64);
        timing.report(&format!(
            "tx_checksum, 80 mixed frames ({:?}), {idle} idle, {stall} stall",
            bench.expected_counts
        ));
    }
}

/// Back to back, output always ready: N frames of B beats each end (N + 1)·B + 3
/// cycles after the first input beat, and the input never stalls.
#[test]
fn tx_checksum_back_to_back_cycle_count() {
    let mut rng = StdRng::seed_from_u64(0xB2B);
    for (payload, beats) in [(6, 8), (10, 8), (200, 32), (1460, 190), (1000, 132)] {
        let n = 12;
        // Frames of exactly `beats` beats (a SYN's options would make some longer).
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|_| loop {
                let f = segment_out(&mut rng, payload);
                if f.len().div_ceil(8) == beats {
                    break f;
                }
            })
            .collect();
        let (_, bench) = run(&frames, 0.0, 0.0, 50);
        let cycles = bench.last_out.unwrap() - bench.first_in.unwrap();
        assert_eq!(
            cycles,
            (n as u64 + 1) * beats as u64 + 3,
            "{beats}-beat frames"
        );
        assert_eq!(bench.ready_low, 0, "the input stalled");
    }
    // Single-beat frames (passed) run back to back too.
    let frames: Vec<Vec<u8>> = (0..20)
        .map(|_| (0..rng.gen_range(1..=8)).map(|_| rng.gen()).collect())
        .collect();
    let (_, bench) = run(&frames, 0.0, 0.0, 51);
    assert_eq!(bench.last_out.unwrap() - bench.first_in.unwrap(), 21 + 3);
    assert_eq!(bench.ready_low, 0);
}

/// The ring and the queue fill when the output stalls for long: the input waits,
/// nothing is lost.
#[test]
fn tx_checksum_stalled_output() {
    let mut rng = StdRng::seed_from_u64(0xF011);
    let frames: Vec<Vec<u8>> = (0..12).map(|_| tcp_frame(&mut rng, 1460)).collect();
    let (_, bench) = run(&frames, 0.0, 0.9, 60);
    assert!(bench.ready_low > 0);
}

/// A reset in the middle of a run (at many different points): the block starts over
/// empty with zero counters, and the frames after it come out right.
#[test]
fn tx_checksum_reset_in_the_middle() {
    let mut rng = StdRng::seed_from_u64(0x4E5);
    for at in [3, 10, 57, 120, 333, 700] {
        let before = mixed_frames(&mut rng, 12);
        let after = mixed_frames(&mut rng, 12);
        let mut bench = TxBench::new(&before, 0.2, 0.2, 70 + at);
        bench.reset_at = Some(at);
        bench.after_reset = after;
        run_bench(&mut bench);
        assert!(bench.frames_out >= bench.seen_after_reset);
    }
}

/// `verilator --lint-only -Wall` with the house waivers only.
#[test]
fn tx_checksum_lints_clean() {
    let mut uut = TxChecksum::default();
    uut.connect_all();
    lint(
        &generate_verilog(&uut),
        &work_dir().join("lint-tx_checksum"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
