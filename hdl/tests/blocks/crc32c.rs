//! The CRC32c stream block against `iwnic_proto::crc32c` and the spec's vectors.

use std::collections::VecDeque;

use iwnic_hdl::crc32c::Crc32c;
use iwnic_proto::crc32c::crc32c;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::dut::{dut, lockstep, Bench, Timing};
use crate::stream::{beats, Beat, Sink, Source};

dut! {
    Crc32c, verilated as "crc32c",
    inputs { reset, in_data, in_keep, in_last, in_valid, crc_ready }
    outputs { in_ready, crc, crc_valid }
}

/// Feeds packets, takes one CRC per packet and checks each against the reference.
struct CrcBench {
    reset_cycles: u32,
    source: Source<Beat>,
    sink: Sink,
    expected: VecDeque<u32>,
    beats: usize,
}

impl CrcBench {
    fn new(packets: &[Vec<u8>], idle_probability: f64, stall_probability: f64, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let all_beats: Vec<Beat> = packets.iter().flat_map(|p| beats(p, &mut rng)).collect();
        CrcBench {
            reset_cycles: 2,
            beats: all_beats.len(),
            source: Source::new(all_beats, idle_probability, seed + 1),
            sink: Sink::new(stall_probability, seed + 2),
            expected: packets.iter().map(|p| crc32c(p)).collect(),
        }
    }
}

impl Bench<Inputs, Outputs> for CrcBench {
    fn inputs(&mut self) -> Option<Inputs> {
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            return Some(Inputs {
                reset: 1,
                ..Default::default()
            });
        }
        if self.expected.is_empty() {
            return None;
        }
        let crc_ready = u64::from(self.sink.ready());
        Some(match self.source.offer() {
            Some(beat) => Inputs {
                reset: 0,
                in_data: beat.data,
                in_keep: beat.keep.into(),
                in_last: beat.last.into(),
                in_valid: 1,
                crc_ready,
            },
            None => Inputs {
                crc_ready,
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
        if outputs.crc_valid == 1 && inputs.crc_ready == 1 {
            let expected = self.expected.pop_front().expect("a CRC nobody asked for");
            assert_eq!(
                outputs.crc as u32, expected,
                "CRC32c {:#010x} should be {expected:#010x}",
                outputs.crc
            );
        }
    }
}

fn run(
    packets: &[Vec<u8>],
    idle_probability: f64,
    stall_probability: f64,
    seed: u64,
) -> (Timing, usize) {
    let mut bench = CrcBench::new(packets, idle_probability, stall_probability, seed);
    let beats = bench.beats;
    let timing = lockstep(
        &mut RustHdl::new(Crc32c::default()),
        &mut Verilated::new(Crc32c::default()),
        &mut bench,
    );
    assert!(bench.source.is_empty() && bench.expected.is_empty());
    (timing, beats)
}

#[test]
fn crc32c_spec_vectors() {
    let packets = vec![
        b"123456789".to_vec(),
        vec![0x00; 32],
        vec![0xFF; 32],
        (0x00..=0x1F).collect(),
        vec![],
    ];
    // The reference itself, on the values spec/mpa.md gives.
    let spec = [
        0xE306_9283,
        0x8A91_36AA,
        0x62A8_AB43,
        0x46DD_794E,
        0x0000_0000,
    ];
    for (packet, crc) in packets.iter().zip(spec) {
        assert_eq!(crc32c(packet), crc);
    }
    run(&packets, 0.0, 0.0, 1);
    run(&packets, 0.5, 0.5, 2);
}

#[test]
fn crc32c_random_packets_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0xC3C3);
    let packets: Vec<Vec<u8>> = (0..300)
        .map(|_| {
            let len = rng.gen_range(0..=100);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect();
    let (timing, _) = run(&packets, 0.3, 0.3, 3);
    timing.report("crc32c, 300 random packets, 30% idle, 30% stall");
}

#[test]
fn crc32c_takes_a_beat_every_cycle() {
    let packets: Vec<Vec<u8>> = (0..=40).map(|len| vec![0xA5; len]).collect();
    let (timing, beats) = run(&packets, 0.0, 0.0, 4);
    // Two reset cycles, one beat per cycle, one cycle for the last CRC to leave.
    assert_eq!(timing.cycles, 2 + beats as u64 + 1);
}
