//! The skid buffer: beats out exactly as they went in, under random stalls on both
//! sides; full throughput; `in_ready` independent of `out_ready` within a cycle.

use std::collections::VecDeque;

use iwnic_hdl::skid_buffer::SkidBuffer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::dut::{dut, lockstep, Bench, Engine, Timing};
use crate::stream::{beats, Beat, Sink, Source};

dut! {
    SkidBuffer, verilated as "skid_buffer",
    inputs { reset, in_data, in_keep, in_last, in_valid, out_ready }
    outputs { in_ready, out_data, out_keep, out_last, out_valid }
}

struct SkidBench {
    reset_cycles: u32,
    source: Source<Beat>,
    sink: Sink,
    expected: VecDeque<Beat>,
    /// Cycles with `out_valid` low between the first and the last output beat.
    output_bubbles: u64,
    output_started: bool,
}

impl SkidBench {
    fn new(packets: &[Vec<u8>], idle_probability: f64, stall_probability: f64, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let input: Vec<Beat> = packets.iter().flat_map(|p| beats(p, &mut rng)).collect();
        SkidBench {
            reset_cycles: 2,
            expected: input.iter().copied().collect(),
            source: Source::new(input, idle_probability, seed + 1),
            sink: Sink::new(stall_probability, seed + 2),
            output_bubbles: 0,
            output_started: false,
        }
    }
}

impl Bench<Inputs, Outputs> for SkidBench {
    fn inputs(&mut self) -> Option<Inputs> {
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            // A beat offered during reset must be neither taken nor passed on.
            return Some(Inputs {
                reset: 1,
                in_valid: 1,
                out_ready: 1,
                ..Default::default()
            });
        }
        if self.expected.is_empty() {
            return None;
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
        if inputs.reset == 1 {
            assert_eq!(outputs.in_ready, 0, "in_ready during reset");
            return;
        }
        self.source.handshake(outputs.in_ready == 1);
        if outputs.out_valid == 0 {
            self.output_bubbles += u64::from(self.output_started);
            return;
        }
        self.output_started = true;
        if inputs.out_ready == 1 {
            let expected = self.expected.pop_front().expect("a beat too many");
            let beat = Beat {
                data: outputs.out_data,
                keep: outputs.out_keep as u8,
                last: outputs.out_last == 1,
            };
            assert_eq!(beat, expected);
        }
    }
}

fn random_packets(count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let len = rng.gen_range(0..=200);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect()
}

fn run(
    packets: &[Vec<u8>],
    idle_probability: f64,
    stall_probability: f64,
    seed: u64,
) -> (Timing, SkidBench) {
    let mut bench = SkidBench::new(packets, idle_probability, stall_probability, seed);
    let timing = lockstep(
        &mut RustHdl::new(SkidBuffer::default()),
        &mut Verilated::new(SkidBuffer::default()),
        &mut bench,
    );
    assert!(bench.source.is_empty() && bench.expected.is_empty());
    (timing, bench)
}

#[test]
fn skid_buffer_passes_beats_in_order_under_random_stalls() {
    let packets = random_packets(60, 0x5c1d);
    for (seed, (idle, stall)) in [(0.0, 0.5), (0.5, 0.0), (0.3, 0.3), (0.1, 0.8)]
        .into_iter()
        .enumerate()
    {
        run(&packets, idle, stall, 20 + seed as u64);
    }
}

/// Input always offered, output always ready: one beat per cycle, one cycle of latency.
#[test]
fn skid_buffer_has_full_throughput() {
    let packets = random_packets(20, 0x7470);
    let total_beats: usize = packets.iter().map(|p| p.len().div_ceil(8).max(1)).sum();
    let (timing, bench) = run(&packets, 0.0, 0.0, 30);
    assert_eq!(bench.output_bubbles, 0);
    assert_eq!(timing.cycles, 2 + 1 + total_beats as u64);
}

/// The point of the block: within a cycle, `in_ready` does not follow `out_ready` (and
/// the outputs do not follow the inputs), on either simulator, in every state the
/// stream passes through.
#[test]
fn skid_buffer_outputs_depend_on_registers_only() {
    fn check(engine: &mut impl Engine<Inputs = Inputs, Outputs = Outputs>) {
        let mut rng = StdRng::seed_from_u64(0x0e9);
        let reset = Inputs {
            reset: 1,
            ..Default::default()
        };
        engine.drive(&reset);
        engine.tick();
        for _ in 0..2000 {
            let inputs = Inputs {
                reset: 0,
                in_data: rng.gen(),
                in_keep: rng.gen::<u8>().into(),
                in_last: rng.gen_range(0..2),
                in_valid: rng.gen_range(0..2),
                out_ready: rng.gen_range(0..2),
            };
            let other = Inputs {
                in_data: rng.gen(),
                in_keep: rng.gen::<u8>().into(),
                in_last: 1 - inputs.in_last,
                in_valid: 1 - inputs.in_valid,
                out_ready: 1 - inputs.out_ready,
                ..inputs
            };
            let seen = engine.drive(&other);
            assert_eq!(engine.drive(&inputs), seen);
            engine.tick();
        }
    }
    check(&mut RustHdl::new(SkidBuffer::default()));
    check(&mut Verilated::new(SkidBuffer::default()));
}
