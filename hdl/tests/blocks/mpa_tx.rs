//! The MPA transmit framer against `iwnic_proto::fpdu::FpduRepr::emit` and the spec's
//! FPDUs.

use std::collections::VecDeque;

use iwnic_hdl::mpa_tx::MpaTxFramer;
use iwnic_proto::fpdu::FpduRepr;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::dut::{dut, lockstep, Bench, Timing};
use crate::stream::{beats, kept_bytes, Beat, Sink, Source};

dut! {
    MpaTxFramer, verilated as "mpa_tx",
    inputs { reset, ulpdu_data, ulpdu_keep, ulpdu_last, ulpdu_len, ulpdu_valid, fpdu_ready }
    outputs { ulpdu_ready, fpdu_data, fpdu_keep, fpdu_last, fpdu_valid }
}

/// An input beat and the `ulpdu_len` driven with it: the ULPDU's length on its first
/// beat, noise on the others (the framer must ignore it there).
struct UlpduBeat {
    beat: Beat,
    len: u16,
}

/// The beats an FPDU must leave the framer as: 8 bytes each, the last 4 or 8.
fn expected_beats(ulpdu: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let repr = FpduRepr { ulpdu };
    let mut fpdu = vec![0; repr.buffer_len()];
    repr.emit(&mut fpdu).unwrap();
    let count = fpdu.len().div_ceil(8);
    fpdu.chunks(8)
        .enumerate()
        .map(|(i, chunk)| (chunk.to_vec(), i + 1 == count))
        .collect()
}

/// Feeds ULPDUs and checks every output beat against the reference FPDUs.
struct FramerBench {
    reset_cycles: u32,
    source: Source<UlpduBeat>,
    sink: Sink,
    expected: VecDeque<(Vec<u8>, bool)>,
    /// Cycles with `fpdu_valid` low between the first and the last output beat.
    output_bubbles: u64,
    output_started: bool,
}

impl FramerBench {
    fn new(ulpdus: &[Vec<u8>], idle_probability: f64, stall_probability: f64, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut input = vec![];
        for ulpdu in ulpdus {
            for (i, beat) in beats(ulpdu, &mut rng).into_iter().enumerate() {
                let len = if i == 0 {
                    ulpdu.len() as u16
                } else {
                    rng.gen()
                };
                input.push(UlpduBeat { beat, len });
            }
        }
        FramerBench {
            reset_cycles: 2,
            source: Source::new(input, idle_probability, seed + 1),
            sink: Sink::new(stall_probability, seed + 2),
            expected: ulpdus.iter().flat_map(|u| expected_beats(u)).collect(),
            output_bubbles: 0,
            output_started: false,
        }
    }
}

impl Bench<Inputs, Outputs> for FramerBench {
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
        let fpdu_ready = u64::from(self.sink.ready());
        Some(match self.source.offer() {
            Some(UlpduBeat { beat, len }) => Inputs {
                reset: 0,
                ulpdu_data: beat.data,
                ulpdu_keep: beat.keep.into(),
                ulpdu_last: beat.last.into(),
                ulpdu_len: (*len).into(),
                ulpdu_valid: 1,
                fpdu_ready,
            },
            None => Inputs {
                fpdu_ready,
                ..Default::default()
            },
        })
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        if inputs.reset == 1 {
            assert_eq!(outputs.ulpdu_ready, 0, "ulpdu_ready during reset");
            return;
        }
        self.source.handshake(outputs.ulpdu_ready == 1);
        if outputs.fpdu_valid == 0 {
            self.output_bubbles += u64::from(self.output_started);
            return;
        }
        self.output_started = true;
        if inputs.fpdu_ready == 1 {
            let (bytes, last) = self.expected.pop_front().expect("an FPDU beat too many");
            let beat = Beat {
                data: outputs.fpdu_data,
                keep: outputs.fpdu_keep as u8,
                last: outputs.fpdu_last == 1,
            };
            assert_eq!(
                (kept_bytes(&beat), beat.last),
                (bytes, last),
                "FPDU beat {beat:x?}"
            );
        }
    }
}

fn run(
    ulpdus: &[Vec<u8>],
    idle_probability: f64,
    stall_probability: f64,
    seed: u64,
) -> (Timing, FramerBench) {
    let mut bench = FramerBench::new(ulpdus, idle_probability, stall_probability, seed);
    let timing = lockstep(
        &mut RustHdl::new(MpaTxFramer::default()),
        &mut Verilated::new(MpaTxFramer::default()),
        &mut bench,
    );
    assert!(bench.source.is_empty() && bench.expected.is_empty());
    (timing, bench)
}

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

/// spec/mpa.md: the RTR as a zero-length RDMA Write, and a Send carrying "hello".
#[test]
fn mpa_tx_spec_fpdus() {
    let rtr = hex("00 0E  C1 40  00 00 00 00  00 00 00 00 00 00 00 00  A3 05 72 AB");
    let hello = hex(
        "00 17  41 43  00 00 00 00  00 00 00 00  00 00 00 01  00 00 00 00  68 65 6C 6C 6F  \
         00 00 00  B9 90 B1 0C",
    );
    let ulpdus = vec![rtr[2..16].to_vec(), hello[2..25].to_vec()];
    // The reference framer produces the spec's bytes, so checking against it checks
    // against the spec.
    for (ulpdu, fpdu) in ulpdus.iter().zip([&rtr, &hello]) {
        let expected: Vec<u8> = expected_beats(ulpdu)
            .into_iter()
            .flat_map(|(b, _)| b)
            .collect();
        assert_eq!(&expected, fpdu);
    }
    run(&ulpdus, 0.0, 0.0, 10);
    run(&ulpdus, 0.5, 0.5, 11);
}

/// Every length from 0 to 40 covers each way a ULPDU can end within a beat (0..8 bytes
/// in the last beat, with and without a body) several times over.
#[test]
fn mpa_tx_every_short_length_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0x5157);
    let ulpdus: Vec<Vec<u8>> = (0..=40)
        .map(|len| (0..len).map(|_| rng.gen()).collect())
        .collect();
    run(&ulpdus, 0.3, 0.3, 12);
}

#[test]
fn mpa_tx_random_ulpdus_up_to_4000_bytes_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0x4000);
    let ulpdus: Vec<Vec<u8>> = (0..24)
        .map(|_| {
            let len = rng.gen_range(0..=4000);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect();
    let (timing, _) = run(&ulpdus, 0.2, 0.2, 13);
    timing.report("mpa_tx, 24 random ULPDUs of 0-4000 bytes, 20% idle, 20% stall");
}

/// With input always waiting and the output always ready, the output carries a beat on
/// every cycle from the first to the last, across FPDU boundaries.
#[test]
fn mpa_tx_output_has_no_bubbles_back_to_back() {
    let ulpdus: Vec<Vec<u8>> = (0..=40)
        .chain([1000, 1001, 1002, 1003])
        .map(|len| vec![0x5A; len])
        .collect();
    let output_beats: usize = ulpdus.iter().map(|u| expected_beats(u).len()).sum();
    let input_beats: usize = ulpdus.iter().map(|u| u.len().div_ceil(8).max(1)).sum();
    let (timing, bench) = run(&ulpdus, 0.0, 0.0, 14);
    assert_eq!(bench.output_bubbles, 0);
    // Two reset cycles, three for the first beat to pass stages 0 and 1 into the output
    // register.
    assert_eq!(timing.cycles, 2 + 3 + output_beats as u64);
    println!(
        "mpa_tx back to back: {} ULPDU beats in, {output_beats} FPDU beats out in {} cycles",
        input_beats, timing.cycles
    );
}
