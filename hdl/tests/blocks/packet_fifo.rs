//! The packet FIFO against a software reference: a queue of the beats of committed
//! packets, filled when a packet's last beat is taken (so a beat that shows up before
//! its packet is committed is a beat too many), and the three counters. Whether a packet
//! commits depends only on the packet (its good bit, and its length against the depth),
//! never on timing, so the reference needs no model of the block's pointers; `in_ready`
//! is checked against what the reference holds.

use std::collections::VecDeque;

use iwnic_hdl::packet_fifo::{EcpPacketFifo, PacketFifo, ECP5_ADDR_BITS};
use iwnic_hdl::verilator::lint;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rust_hdl::prelude::*;

use crate::dut::{dut, lockstep, work_dir, Bench, Engine};
use crate::stream::{beats, Beat, Sink, Source};

/// The small FIFO most tests run: 16 beats, so full, roll-back and overflow are common.
const ADDR_BITS: usize = 4;

dut! {
    PacketFifo<ADDR_BITS>, verilated as "packet_fifo_16",
    inputs { reset, in_data, in_keep, in_last, in_good, in_tag, in_valid, out_ready }
    outputs {
        in_ready, out_data, out_keep, out_last, out_tag, out_valid, packets_committed,
        packets_dropped_bad, packets_dropped_full
    }
}

/// A packet as the test sends it.
#[derive(Clone, Debug)]
struct Packet {
    beats: Vec<Beat>,
    good: bool,
    tag: u16,
}

/// An input beat with the sideband driven with it: `good` is the packet's on its last
/// beat and noise before; `tag` is the packet's on its first beat and noise after.
#[derive(Clone, Copy, Debug)]
struct InBeat {
    beat: Beat,
    good: bool,
    tag: u16,
}

/// An output beat as the reference expects it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OutBeat {
    data: u64,
    keep: u8,
    last: bool,
    tag: u16,
}

fn in_beats(packets: &[Packet], rng: &mut StdRng) -> Vec<InBeat> {
    let mut out = vec![];
    for p in packets {
        for (i, beat) in p.beats.iter().enumerate() {
            out.push(InBeat {
                beat: *beat,
                good: if beat.last { p.good } else { rng.gen() },
                tag: if i == 0 { p.tag } else { rng.gen() },
            });
        }
    }
    out
}

/// A packet of `n` beats (n ≥ 1), its last beat holding 0..=8 bytes (0 only for a
/// one-beat packet, as `stream::beats` makes them).
fn packet(n: usize, good: bool, rng: &mut StdRng) -> Packet {
    let len = if n == 1 {
        rng.gen_range(0..=8)
    } else {
        rng.gen_range((n - 1) * 8 + 1..=n * 8)
    };
    let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
    let beats = beats(&bytes, rng);
    assert_eq!(beats.len(), n);
    Packet {
        beats,
        good,
        tag: rng.gen(),
    }
}

/// Random packets of 1..=`max_beats` beats, about a fifth of them longer than 16, and
/// about a quarter bad.
fn random_packets(count: usize, max_beats: usize, rng: &mut StdRng) -> Vec<Packet> {
    (0..count)
        .map(|_| {
            let n = if rng.gen_bool(0.65) {
                rng.gen_range(1..=16.min(max_beats))
            } else {
                rng.gen_range(1..=max_beats)
            };
            let good = rng.gen_bool(0.75);
            packet(n, good, rng)
        })
        .collect()
}

/// One run of input: its packets, and whether a reset cuts it short after that many
/// cycles (the reference then forgets everything, as the block does).
struct Segment {
    packets: Vec<Packet>,
    reset_after: Option<u64>,
}

/// Drives segments of packets through the FIFO, each after two reset cycles, and checks
/// every cycle against the reference.
struct FifoBench {
    depth: usize,
    idle_probability: f64,
    stall_probability: f64,
    rng: StdRng,
    segments: VecDeque<Segment>,
    reset_cycles: u32,
    /// Cycles left in the current segment before its reset, if it has one.
    cut_in: Option<u64>,
    source: Source<InBeat>,
    sink: Sink,
    /// The reference: beats of committed packets not yet out, in order.
    expected: VecDeque<OutBeat>,
    /// The packet being taken: its beats so far and its tag.
    current: Vec<OutBeat>,
    committed: u64,
    dropped_bad: u64,
    dropped_full: u64,
    /// Cycles after the input and the reference ran dry, in which nothing may come out.
    drain: u32,
    cycle: u64,
    /// Statistics: cycles with a beat offered and not taken, beats out, the cycle of the
    /// last beat out, and the most beats the reference held.
    input_stalls: u64,
    beats_out: u64,
    last_out_cycle: u64,
    max_held: usize,
}

impl FifoBench {
    fn new(
        depth: usize,
        segments: Vec<Segment>,
        idle_probability: f64,
        stall_probability: f64,
        seed: u64,
    ) -> Self {
        FifoBench {
            depth,
            idle_probability,
            stall_probability,
            rng: StdRng::seed_from_u64(seed),
            segments: segments.into(),
            reset_cycles: 0,
            cut_in: None,
            source: Source::new([], 0.0, 0),
            sink: Sink::new(stall_probability, seed + 1),
            expected: VecDeque::new(),
            current: vec![],
            committed: 0,
            dropped_bad: 0,
            dropped_full: 0,
            drain: 4,
            cycle: 0,
            input_stalls: 0,
            beats_out: 0,
            last_out_cycle: 0,
            max_held: 0,
        }
    }

    /// Starts the next segment with a reset, or returns false when there is none.
    fn next_segment(&mut self) -> bool {
        let Some(segment) = self.segments.pop_front() else {
            return false;
        };
        let items = in_beats(&segment.packets, &mut self.rng);
        let seed = self.rng.gen();
        self.source = Source::new(items, self.idle_probability, seed);
        self.sink = Sink::new(self.stall_probability, seed + 1);
        self.cut_in = segment.reset_after;
        self.reset_cycles = 2;
        self.expected.clear();
        self.current.clear();
        self.committed = 0;
        self.dropped_bad = 0;
        self.dropped_full = 0;
        self.drain = 4;
        true
    }

    /// Beats the block holds by the reference: committed and not out, plus the current
    /// packet's while it still fits.
    fn held(&self) -> usize {
        let current = if self.current.len() > self.depth {
            0
        } else {
            self.current.len()
        };
        self.expected.len() + current
    }
}

impl Bench<Inputs, Outputs> for FifoBench {
    fn inputs(&mut self) -> Option<Inputs> {
        self.cycle += 1;
        assert!(self.cycle < 1_000_000, "no progress: the FIFO is stuck");
        if self.cut_in == Some(0) && !self.next_segment() {
            return None;
        }
        if let Some(cut) = self.cut_in.as_mut() {
            *cut = cut.saturating_sub(1);
        }
        if self.reset_cycles == 0 && self.source.is_empty() && self.expected.is_empty() {
            if self.drain > 0 {
                self.drain -= 1;
            } else if !self.next_segment() {
                return None;
            }
        }
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            return Some(Inputs {
                reset: 1,
                in_data: self.rng.gen(),
                in_valid: self.rng.gen_range(0..=1),
                out_ready: self.rng.gen_range(0..=1),
                ..Default::default()
            });
        }
        let out_ready = u64::from(self.sink.ready());
        Some(match self.source.offer() {
            Some(b) => Inputs {
                reset: 0,
                in_data: b.beat.data,
                in_keep: b.beat.keep.into(),
                in_last: b.beat.last.into(),
                in_good: b.good.into(),
                in_tag: b.tag.into(),
                in_valid: 1,
                out_ready,
            },
            None => Inputs {
                in_data: self.rng.gen(),
                in_good: self.rng.gen_range(0..=1),
                out_ready,
                ..Default::default()
            },
        })
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        if inputs.reset == 1 {
            assert_eq!(outputs.in_ready, 0, "in_ready during reset");
            assert_eq!(outputs.out_valid, 0, "out_valid during reset");
            return;
        }
        let cycle = self.cycle;
        assert_eq!(
            (
                outputs.packets_committed,
                outputs.packets_dropped_bad,
                outputs.packets_dropped_full
            ),
            (self.committed, self.dropped_bad, self.dropped_full),
            "counters at cycle {cycle}"
        );
        // `in_ready` low only with the RAM full (the output stage holds up to 3 more);
        // always high once the packet has filled the FIFO by itself (it will be dropped).
        let held = self.held();
        self.max_held = self.max_held.max(held);
        assert!(held <= self.depth + 3, "{held} beats held at cycle {cycle}");
        if outputs.in_ready == 0 {
            assert!(
                held >= self.depth,
                "in_ready low with {held} held at {cycle}"
            );
        }
        if self.current.len() >= self.depth {
            assert_eq!(outputs.in_ready, 1, "in_ready low in a too long packet");
        }

        if inputs.in_valid == 1 && outputs.in_ready == 0 {
            self.input_stalls += 1;
        }
        if inputs.in_valid == 1 && outputs.in_ready == 1 {
            let tag = match self.current.first() {
                Some(first) => first.tag,
                None => inputs.in_tag as u16,
            };
            self.current.push(OutBeat {
                data: inputs.in_data,
                keep: inputs.in_keep as u8,
                last: inputs.in_last == 1,
                tag,
            });
            if inputs.in_last == 1 {
                if self.current.len() > self.depth {
                    self.dropped_full += 1;
                } else if inputs.in_good == 1 {
                    self.committed += 1;
                    self.expected.extend(self.current.iter().copied());
                } else {
                    self.dropped_bad += 1;
                }
                self.current.clear();
            }
        }
        self.source.handshake(outputs.in_ready == 1);

        if outputs.out_valid == 1 && inputs.out_ready == 1 {
            let got = OutBeat {
                data: outputs.out_data,
                keep: outputs.out_keep as u8,
                last: outputs.out_last == 1,
                tag: outputs.out_tag as u16,
            };
            let want = self
                .expected
                .pop_front()
                .unwrap_or_else(|| panic!("a beat too many at cycle {cycle}: {got:x?}"));
            assert_eq!(got, want, "output beat at cycle {cycle}");
            self.beats_out += 1;
            self.last_out_cycle = cycle;
        }
    }
}

/// Runs `bench` on both engines of a FIFO and checks that everything came out.
fn run<R, V>(mut rust_hdl: R, mut verilated: V, mut bench: FifoBench) -> FifoBench
where
    R: Engine<Inputs = Inputs, Outputs = Outputs>,
    V: Engine<Inputs = Inputs, Outputs = Outputs>,
{
    assert!(bench.next_segment());
    lockstep(&mut rust_hdl, &mut verilated, &mut bench);
    assert!(bench.source.is_empty() && bench.expected.is_empty());
    assert!(bench.current.is_empty(), "a packet left half sent");
    bench
}

fn run16(segments: Vec<Segment>, idle: f64, stall: f64, seed: u64) -> FifoBench {
    run(
        RustHdl::new(PacketFifo::<ADDR_BITS>::default()),
        Verilated::new(PacketFifo::<ADDR_BITS>::default()),
        FifoBench::new(1 << ADDR_BITS, segments, idle, stall, seed),
    )
}

fn whole(packets: Vec<Packet>) -> Vec<Segment> {
    vec![Segment {
        packets,
        reset_after: None,
    }]
}

/// Random packets of 1..=40 beats into 16 beats of storage, under each pair of stall
/// probabilities: commits, bad roll-backs, waits on a full FIFO and overflow drops all
/// happen, and every counter matches.
#[test]
fn packet_fifo_random_packets_under_random_stalls() {
    let cases = [
        (0.0, 0.0),
        (0.3, 0.3),
        (0.6, 0.1),
        (0.1, 0.7),
        (0.0, 0.5),
        (0.8, 0.0),
    ];
    for (i, (idle, stall)) in cases.into_iter().enumerate() {
        let seed = 0xF1F0 + i as u64;
        let mut rng = StdRng::seed_from_u64(seed);
        let packets = random_packets(150, 40, &mut rng);
        let bench = run16(whole(packets), idle, stall, seed);
        println!(
            "packet_fifo_16 idle {idle} stall {stall}: {} cycles, {} committed, {} bad, \
             {} too long, {} input stalls, at most {} held",
            bench.cycle,
            bench.committed,
            bench.dropped_bad,
            bench.dropped_full,
            bench.input_stalls,
            bench.max_held
        );
        assert!(bench.committed > 40 && bench.dropped_bad > 10 && bench.dropped_full > 10);
        if stall >= 0.5 {
            assert!(bench.input_stalls > 50, "the full FIFO was not exercised");
        }
    }
}

/// Lengths at the edge: a packet of exactly 16 beats fits (and waits for the reader if
/// committed beats are ahead of it), one of 17 is dropped on its 17th beat, longer ones
/// too, whatever their good bit; short packets around them are unharmed.
#[test]
fn packet_fifo_packets_at_and_over_the_depth() {
    let mut rng = StdRng::seed_from_u64(0x1617);
    let mut packets = vec![];
    for n in [16, 1, 17, 2, 16, 16, 33, 15, 40, 16, 100, 3, 17, 16] {
        for good in [true, false, true] {
            packets.push(packet(n, good, &mut rng));
        }
    }
    for (idle, stall) in [(0.0, 0.0), (0.0, 0.8), (0.5, 0.5), (0.2, 0.95)] {
        let bench = run16(whole(packets.clone()), idle, stall, 0x1617);
        // Nine lengths fit (each sent good, bad, good), five do not.
        assert_eq!(bench.committed, 9 * 2, "idle {idle} stall {stall}");
        assert_eq!(bench.dropped_bad, 9);
        assert_eq!(bench.dropped_full, 5 * 3);
    }
}

/// Reset in the middle: the FIFO is cut off with packets committed, half written and
/// half read, at several points; after the reset it behaves as new (counters from zero,
/// nothing of the old packets comes out).
#[test]
fn packet_fifo_reset_in_the_middle() {
    let mut rng = StdRng::seed_from_u64(0x7E5E7);
    let mut segments = vec![];
    for cut in [5, 17, 40, 61, 90, 133] {
        segments.push(Segment {
            packets: random_packets(30, 40, &mut rng),
            reset_after: Some(cut),
        });
    }
    segments.push(Segment {
        packets: random_packets(40, 40, &mut rng),
        reset_after: None,
    });
    let bench = run16(segments, 0.2, 0.4, 0x7E5E7);
    assert!(bench.committed > 5);
}

/// Back to back, no stalls: packets of L beats each, N beats in all, go through in
/// exactly N + L + 3 cycles from the first beat offered to the last beat out (the last
/// packet's first beat leaves 4 cycles after its last beat went in), the input never
/// waits and the output has no bubbles.
#[test]
fn packet_fifo_back_to_back_throughput() {
    for (count, len) in [(60, 1), (12, 8), (10, 15), (7, 3)] {
        let mut rng = StdRng::seed_from_u64(0xB2B);
        let packets: Vec<Packet> = (0..count).map(|_| packet(len, true, &mut rng)).collect();
        let n = (count * len) as u64;
        let bench = run16(whole(packets), 0.0, 0.0, 0xB2B);
        // Cycles 1 and 2 are the reset; the first beat is offered in cycle 3.
        let cycles = bench.last_out_cycle - 2;
        println!("packet_fifo_16 back to back: {count} packets of {len} beats in {cycles} cycles");
        assert_eq!(bench.input_stalls, 0, "{count} × {len}");
        assert_eq!(bench.beats_out, n);
        assert_eq!(cycles, n + len as u64 + 3, "{count} × {len}");
    }
}

/// The ECP5 build (512 beats) in lock step too: packets up to 600 beats, so some are too
/// long for it.
mod ecp {
    use iwnic_hdl::packet_fifo::EcpPacketFifo;

    use crate::dut::dut;

    dut! {
        EcpPacketFifo, verilated as "packet_fifo_512",
        inputs { reset, in_data, in_keep, in_last, in_good, in_tag, in_valid, out_ready }
        outputs {
            in_ready, out_data, out_keep, out_last, out_tag, out_valid, packets_committed,
            packets_dropped_bad, packets_dropped_full
        }
    }
}

/// An engine of the 512-beat FIFO seen through the 16-beat FIFO's port structs.
struct Ecp<E>(E);

impl<E: Engine<Inputs = ecp::Inputs, Outputs = ecp::Outputs>> Engine for Ecp<E> {
    type Inputs = Inputs;
    type Outputs = Outputs;
    fn drive(&mut self, i: &Inputs) -> Outputs {
        let o = self.0.drive(&ecp::Inputs {
            reset: i.reset,
            in_data: i.in_data,
            in_keep: i.in_keep,
            in_last: i.in_last,
            in_good: i.in_good,
            in_tag: i.in_tag,
            in_valid: i.in_valid,
            out_ready: i.out_ready,
        });
        Outputs {
            in_ready: o.in_ready,
            out_data: o.out_data,
            out_keep: o.out_keep,
            out_last: o.out_last,
            out_tag: o.out_tag,
            out_valid: o.out_valid,
            packets_committed: o.packets_committed,
            packets_dropped_bad: o.packets_dropped_bad,
            packets_dropped_full: o.packets_dropped_full,
        }
    }
    fn tick(&mut self) {
        self.0.tick();
    }
}

#[test]
fn packet_fifo_512_random_packets_under_random_stalls() {
    let depth = 1 << ECP5_ADDR_BITS;
    let mut rng = StdRng::seed_from_u64(0x512);
    let mut packets: Vec<Packet> = (0..60)
        .map(|_| {
            let n = rng.gen_range(1..=200);
            let good = rng.gen_bool(0.8);
            packet(n, good, &mut rng)
        })
        .collect();
    for (at, n) in [(10, 512), (20, 513), (30, 600), (40, 512)] {
        let p = packet(n, true, &mut rng);
        packets.insert(at, p);
    }
    let bench = run(
        Ecp(ecp::RustHdl::new(EcpPacketFifo::default())),
        Ecp(ecp::Verilated::new(EcpPacketFifo::default())),
        FifoBench::new(depth, whole(packets), 0.2, 0.6, 0x512),
    );
    println!(
        "packet_fifo_512: {} cycles, {} committed, {} bad, {} too long, {} input stalls, \
         at most {} held",
        bench.cycle,
        bench.committed,
        bench.dropped_bad,
        bench.dropped_full,
        bench.input_stalls,
        bench.max_held
    );
    assert_eq!(bench.dropped_full, 2);
    assert!(bench.input_stalls > 100);
}

fn verilog_of<B: Block>(mut uut: B) -> String {
    uut.connect_all();
    generate_verilog(&uut)
}

/// `verilator --lint-only -Wall` with the shared waivers only, as `lint.rs` does for
/// the other blocks (kept here so this block's tests live in one file).
#[test]
fn packet_fifo_lints_clean() {
    lint(
        &verilog_of(EcpPacketFifo::default()),
        &work_dir().join("lint-packet_fifo"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    lint(
        &verilog_of(PacketFifo::<ADDR_BITS>::default()),
        &work_dir().join("lint-packet_fifo_16"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
