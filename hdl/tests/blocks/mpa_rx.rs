//! MPA receive delineation against `iwnic_proto::fpdu::Splitter`, used as the
//! testbench's model uses it (`ModelDatapath::deliver`): segments pushed in order, an
//! FPDU left open at a segment's end is a length error, and the first error ends the
//! flow.

use std::collections::VecDeque;

use iwnic_hdl::mpa_rx::MpaRxDelineator;
use iwnic_proto::fpdu::{FpduRepr, SplitEvent, Splitter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::dut::{dut, lockstep, Bench, Timing};
use crate::stream::{beats, kept_bytes, Beat, Sink, Source};

dut! {
    MpaRxDelineator, verilated as "mpa_rx",
    inputs { reset, max_ulpdu_len, in_data, in_keep, in_last, in_valid, ulpdu_ready }
    outputs {
        in_ready, ulpdu_data, ulpdu_keep, ulpdu_last, ulpdu_good, ulpdu_valid,
        crc_error, length_error, busy
    }
}

/// What the model makes of a flow's segments.
#[derive(Debug, Default, PartialEq, Eq)]
struct Expected {
    /// ULPDUs delivered (a good CRC), in order.
    ulpdus: Vec<Vec<u8>>,
    /// The ULPDU bytes the splitter handed out for an FPDU that never ended.
    unfinished: Option<Vec<u8>>,
    crc_error: bool,
    length_error: bool,
}

fn reference(segments: &[Vec<u8>], max_ulpdu_len: u16) -> Expected {
    let mut splitter = Splitter::new(max_ulpdu_len);
    let mut expected = Expected::default();
    let mut current: Option<Vec<u8>> = None;
    for segment in segments {
        let result = splitter.push(segment, |event| match event {
            SplitEvent::Start { .. } => current = Some(vec![]),
            SplitEvent::Data(bytes) => current.as_mut().unwrap().extend_from_slice(bytes),
            SplitEvent::End => expected.ulpdus.push(current.take().unwrap()),
        });
        match result {
            Err(iwnic_proto::Error::BadCrc { .. }) => expected.crc_error = true,
            Err(_) => expected.length_error = true,
            Ok(()) if !splitter.at_boundary() => expected.length_error = true,
            Ok(()) => {}
        }
        if expected.crc_error || expected.length_error {
            break;
        }
    }
    expected.unfinished = current;
    expected
}

fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let repr = FpduRepr { ulpdu };
    let mut bytes = vec![0; repr.buffer_len()];
    repr.emit(&mut bytes).unwrap();
    bytes
}

fn random_ulpdu(rng: &mut StdRng, max_len: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=max_len);
    (0..len).map(|_| rng.gen()).collect()
}

/// FPDUs packed into segments of 1 to 3 whole FPDUs, as the spec requires, with an
/// empty segment (a pure ACK) now and then.
fn segments_of(fpdus: &[Vec<u8>], rng: &mut StdRng) -> Vec<Vec<u8>> {
    let mut segments = vec![];
    let mut rest = fpdus;
    while !rest.is_empty() {
        if rng.gen_bool(0.1) {
            segments.push(vec![]);
        }
        let take = rng.gen_range(1..=3).min(rest.len());
        segments.push(rest[..take].concat());
        rest = &rest[take..];
    }
    segments
}

/// What came out of the block for one flow (between resets).
#[derive(Debug, Default)]
struct Outcome {
    input_beats: u64,
    good: Vec<Vec<u8>>,
    bad: Vec<Vec<u8>>,
    /// A packet arrived after a bad one.
    packet_after_bad: bool,
    /// `(crc_error, length_error)` at the end of the flow.
    errors: (bool, bool),
    /// Cycles after the last input beat until `busy` fell.
    drain_cycles: u64,
}

/// Feeds flows, each after a reset, and collects each flow's output packets.
struct DelineatorBench {
    reset_cycles: u32,
    max_ulpdu_len: u16,
    idle_probability: f64,
    source: Source<Beat>,
    /// The flows after the current one, as beats.
    next_flows: VecDeque<Vec<Beat>>,
    seed: u64,
    sink: Sink,
    /// Cycles run so far once a flow's input is all taken, with the output always
    /// ready: the flow ends when `busy` has fallen (after two, so that `busy` has seen
    /// the last beat taken).
    drain_cycles: u32,
    /// `busy` in the last cycle.
    busy: bool,
    packet: Vec<u8>,
    current: Outcome,
    outcomes: Vec<Outcome>,
}

impl DelineatorBench {
    /// Flows given as the beats of their segments.
    fn new(
        flows: Vec<Vec<Beat>>,
        max_ulpdu_len: u16,
        idle_probability: f64,
        stall_probability: f64,
        seed: u64,
    ) -> Self {
        let mut next_flows = VecDeque::from(flows);
        let first = next_flows.pop_front().unwrap();
        DelineatorBench {
            reset_cycles: 2,
            max_ulpdu_len,
            idle_probability,
            current: Outcome {
                input_beats: first.len() as u64,
                ..Default::default()
            },
            source: Source::new(first, idle_probability, seed + 1),
            next_flows,
            seed,
            sink: Sink::new(stall_probability, seed + 2),
            drain_cycles: 0,
            busy: false,
            packet: vec![],
            outcomes: vec![],
        }
    }
}

impl Bench<Inputs, Outputs> for DelineatorBench {
    fn inputs(&mut self) -> Option<Inputs> {
        let max_ulpdu_len = self.max_ulpdu_len.into();
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            return Some(Inputs {
                reset: 1,
                max_ulpdu_len,
                ..Default::default()
            });
        }
        if self.source.is_empty() {
            if self.drain_cycles >= 2 && !self.busy {
                assert!(self.packet.is_empty(), "a packet left open");
                self.current.drain_cycles = self.drain_cycles.into();
                self.outcomes.push(std::mem::take(&mut self.current));
                let next = self.next_flows.pop_front()?;
                self.seed += 3;
                self.current.input_beats = next.len() as u64;
                self.source = Source::new(next, self.idle_probability, self.seed);
                self.reset_cycles = 2;
                self.drain_cycles = 0;
                return self.inputs();
            }
            self.drain_cycles += 1;
            assert!(
                self.drain_cycles < 64,
                "busy stays high with the output ready"
            );
            return Some(Inputs {
                max_ulpdu_len,
                ulpdu_ready: 1,
                ..Default::default()
            });
        }
        let ulpdu_ready = u64::from(self.sink.ready());
        Some(match self.source.offer() {
            Some(beat) => Inputs {
                reset: 0,
                max_ulpdu_len,
                in_data: beat.data,
                in_keep: beat.keep.into(),
                in_last: beat.last.into(),
                in_valid: 1,
                ulpdu_ready,
            },
            None => Inputs {
                max_ulpdu_len,
                ulpdu_ready,
                ..Default::default()
            },
        })
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        if inputs.reset == 1 {
            assert_eq!(outputs.in_ready, 0, "in_ready during reset");
            return;
        }
        let errors = (outputs.crc_error == 1, outputs.length_error == 1);
        let (was_crc, was_length) = self.current.errors;
        assert!(
            (errors.0 || !was_crc) && (errors.1 || !was_length),
            "an error cleared without a reset"
        );
        self.current.errors = errors;
        self.busy = outputs.busy == 1;
        self.source.handshake(outputs.in_ready == 1);
        if outputs.ulpdu_valid == 0 || inputs.ulpdu_ready == 0 {
            return;
        }
        let beat = Beat {
            data: outputs.ulpdu_data,
            keep: outputs.ulpdu_keep as u8,
            last: outputs.ulpdu_last == 1,
        };
        if !beat.last {
            assert_eq!(beat.keep, 0xFF, "a partial beat before the last: {beat:x?}");
            assert_eq!(outputs.ulpdu_good, 0, "good on a beat that is not last");
        }
        self.packet.extend(kept_bytes(&beat));
        if beat.last {
            self.current.packet_after_bad |= !self.current.bad.is_empty();
            let packet = std::mem::take(&mut self.packet);
            if outputs.ulpdu_good == 1 {
                self.current.good.push(packet);
            } else {
                self.current.bad.push(packet);
            }
        }
    }
}

/// Checks one flow's outcome against the model: the delivered ULPDUs, the latched
/// errors, and a ULPDU cut short ending as bad.
fn check(outcome: &Outcome, expected: &Expected) {
    assert_eq!(
        outcome.good.len(),
        expected.ulpdus.len(),
        "delivered ULPDUs"
    );
    for (i, (got, want)) in outcome.good.iter().zip(&expected.ulpdus).enumerate() {
        assert!(
            got == want,
            "ULPDU {i}: {} bytes, want {}",
            got.len(),
            want.len()
        );
    }
    assert_eq!(
        outcome.errors,
        (expected.crc_error, expected.length_error),
        "(crc_error, length_error)"
    );
    assert!(!outcome.packet_after_bad, "a packet after a bad one");
    assert!(outcome.bad.len() <= 1, "{} bad packets", outcome.bad.len());
    if let Some(bad) = outcome.bad.first() {
        let unfinished = expected
            .unfinished
            .as_ref()
            .expect("a bad packet, no open FPDU");
        assert!(
            unfinished.starts_with(bad),
            "the bad packet is not a prefix"
        );
    }
    if expected.crc_error {
        // The whole ULPDU arrived before its CRC: it ends as bad, complete.
        assert_eq!(outcome.bad.first(), expected.unfinished.as_ref());
    }
}

/// Runs flows (each a list of segments, each after a reset) through both engines and
/// checks each against the model.
fn run_flows(
    flows: &[Vec<Vec<u8>>],
    max_ulpdu_len: u16,
    idle_probability: f64,
    stall_probability: f64,
    seed: u64,
) -> (Timing, Vec<Outcome>, Vec<Expected>) {
    let expected: Vec<Expected> = flows
        .iter()
        .map(|segments| reference(segments, max_ulpdu_len))
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut bench = DelineatorBench::new(
        flows
            .iter()
            .map(|segments| flow_beats(segments, &mut rng))
            .collect(),
        max_ulpdu_len,
        idle_probability,
        stall_probability,
        seed,
    );
    let timing = lockstep(
        &mut RustHdl::new(MpaRxDelineator::default()),
        &mut Verilated::new(MpaRxDelineator::default()),
        &mut bench,
    );
    assert_eq!(bench.outcomes.len(), flows.len());
    for (outcome, expected) in bench.outcomes.iter().zip(&expected) {
        check(outcome, expected);
    }
    (timing, bench.outcomes, expected)
}

/// A flow's segments as beats, each segment from byte 0 of a beat.
fn flow_beats(segments: &[Vec<u8>], rng: &mut StdRng) -> Vec<Beat> {
    segments.iter().flat_map(|s| beats(s, rng)).collect()
}

/// [`run_flows`] for one flow.
fn run(
    segments: &[Vec<u8>],
    max_ulpdu_len: u16,
    idle_probability: f64,
    stall_probability: f64,
    seed: u64,
) -> (Timing, Outcome, Expected) {
    let flows = [segments.to_vec()];
    let (timing, mut outcomes, mut expected) = run_flows(
        &flows,
        max_ulpdu_len,
        idle_probability,
        stall_probability,
        seed,
    );
    (timing, outcomes.remove(0), expected.remove(0))
}

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

fn spec_fpdus() -> (Vec<u8>, Vec<u8>) {
    let rtr = hex("00 0E  C1 40  00 00 00 00  00 00 00 00 00 00 00 00  A3 05 72 AB");
    let hello = hex(
        "00 17  41 43  00 00 00 00  00 00 00 00  00 00 00 01  00 00 00 00  68 65 6C 6C 6F  \
         00 00 00  B9 90 B1 0C",
    );
    (rtr, hello)
}

/// spec/mpa.md: the RTR and the "hello" Send, alone, back to back in one segment in
/// both orders (the RTR is 20 bytes, so what follows it starts at byte 4 of a beat).
#[test]
fn mpa_rx_spec_fpdus() {
    let (rtr, hello) = spec_fpdus();
    let segments = vec![
        rtr.clone(),
        hello.clone(),
        [rtr.clone(), hello.clone()].concat(),
        [hello.clone(), rtr.clone(), hello.clone()].concat(),
    ];
    let (_, outcome, _) = run(&segments, u16::MAX, 0.0, 0.0, 20);
    assert_eq!(outcome.good.len(), 7);
    assert_eq!(outcome.good[1][18..], *b"hello");
    run(&segments, u16::MAX, 0.5, 0.5, 21);
}

/// Every ULPDU length from 0 to 40, each at both FPDU alignments (byte 0 and byte 4 of
/// a beat), several FPDUs back to back per segment, under stalls.
#[test]
fn mpa_rx_every_short_length_both_alignments_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0x5158);
    let mut fpdus = vec![];
    for len in 0..=40 {
        let ulpdu: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        // A 20-byte FPDU first moves the next to the other half of the beat.
        fpdus.push(fpdu(&ulpdu));
        fpdus.push(fpdu(&[0xA5; 14]));
        fpdus.push(fpdu(&ulpdu));
    }
    let segments = segments_of(&fpdus, &mut rng);
    run(&segments, u16::MAX, 0.3, 0.3, 22);
}

#[test]
fn mpa_rx_random_fpdus_up_to_4000_bytes_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0x4001);
    let fpdus: Vec<Vec<u8>> = (0..16)
        .map(|_| fpdu(&random_ulpdu(&mut rng, 4000)))
        .collect();
    let segments = segments_of(&fpdus, &mut rng);
    let (timing, outcome, _) = run(&segments, 4000, 0.2, 0.2, 23);
    assert_eq!(outcome.good.len(), 16);
    timing.report("mpa_rx, 16 random FPDUs of 0-4000-byte ULPDUs, 20% idle, 20% stall");
}

/// Segments cut at random points, mostly inside FPDUs (inside the length field, inside
/// a word, anywhere): the first cut inside an FPDU is a length error, the ULPDU it cut
/// ends as bad (or never starts), and nothing follows.
#[test]
fn mpa_rx_segments_cut_inside_fpdus_are_length_errors() {
    for seed in 0..10u64 {
        let mut rng = StdRng::seed_from_u64(0xC07 + seed);
        let stream: Vec<u8> = (0..6)
            .flat_map(|_| fpdu(&random_ulpdu(&mut rng, 300)))
            .collect();
        let mut segments = vec![];
        let mut at = 0;
        while at < stream.len() {
            let len = rng.gen_range(1..=200).min(stream.len() - at);
            segments.push(stream[at..at + len].to_vec());
            at += len;
        }
        let (_, _, expected) = run(&segments, u16::MAX, 0.2, 0.2, 24 + seed);
        assert!(expected.length_error || segments.len() == 1, "seed {seed}");
    }
}

/// A beat short of 8 bytes before a segment's last breaks the input's contract (the
/// reference cannot even express it): at any beat and with any `keep`, the flow fails
/// with a length error, no CRC error, and delivers at most the FPDUs before the short
/// beat's own.
#[test]
fn mpa_rx_short_beat_before_the_last_is_a_length_error() {
    let (rtr, hello) = spec_fpdus();
    let segment = [hello.clone(), rtr.clone(), hello.clone(), rtr].concat();
    let expected = reference(std::slice::from_ref(&segment), u16::MAX);
    let mut rng = StdRng::seed_from_u64(0x5407);
    let whole = beats(&segment, &mut rng);
    let mut flows = vec![];
    let mut cases = vec![];
    for short_at in 0..whole.len() - 1 {
        for keep in [0x00, 0x07, 0x0F, 0x7F] {
            let mut flow = whole.clone();
            flow[short_at].keep = keep;
            flows.push(flow);
            cases.push((short_at, keep));
        }
    }
    let mut bench = DelineatorBench::new(flows, u16::MAX, 0.2, 0.2, 0x5408);
    lockstep(
        &mut RustHdl::new(MpaRxDelineator::default()),
        &mut Verilated::new(MpaRxDelineator::default()),
        &mut bench,
    );
    assert_eq!(bench.outcomes.len(), cases.len());
    for (outcome, (short_at, keep)) in bench.outcomes.iter().zip(cases) {
        assert_eq!(
            outcome.errors,
            (false, true),
            "beat {short_at}, keep {keep:#04x}"
        );
        assert!(!outcome.packet_after_bad);
        assert!(outcome.good.len() < expected.ulpdus.len());
        assert_eq!(outcome.good, expected.ulpdus[..outcome.good.len()]);
        let ended_before = [hello.len(), 20, hello.len()]
            .iter()
            .scan(0, |end, len| {
                *end += len;
                Some(*end)
            })
            .filter(|&end| end <= 8 * short_at)
            .count();
        assert!(
            outcome.good.len() >= ended_before,
            "beat {short_at}, keep {keep:#04x}"
        );
    }
}

/// A cut inside the length field: the length straddles segments (and beats).
#[test]
fn mpa_rx_length_field_cut_between_segments() {
    let (rtr, hello) = spec_fpdus();
    for cut in [1, 2, 3, 5, 7] {
        let stream = [rtr.clone(), hello.clone()].concat();
        let at = rtr.len() + cut;
        let segments = vec![stream[..at].to_vec(), stream[at..].to_vec()];
        let (_, outcome, expected) = run(&segments, u16::MAX, 0.0, 0.0, 40 + cut as u64);
        assert!(expected.length_error && !expected.crc_error);
        assert_eq!(outcome.good.len(), 1);
    }
}

/// A flipped bit anywhere in an FPDU's covered bytes or CRC field is a CRC error (or,
/// in the length field, whatever the reference makes of the new length).
#[test]
fn mpa_rx_flipped_byte_is_a_crc_error() {
    let mut crc_errors = 0;
    for seed in 0..12u64 {
        let mut rng = StdRng::seed_from_u64(0xF11 + seed);
        let mut fpdus: Vec<Vec<u8>> = (0..5).map(|_| fpdu(&random_ulpdu(&mut rng, 200))).collect();
        let victim = rng.gen_range(0..fpdus.len());
        let at = rng.gen_range(0..fpdus[victim].len());
        fpdus[victim][at] ^= 1 << rng.gen_range(0..8);
        let segments = segments_of(&fpdus, &mut rng);
        let (_, _, expected) = run(&segments, u16::MAX, 0.2, 0.2, 50 + seed);
        crc_errors += usize::from(expected.crc_error);
    }
    assert!(crc_errors >= 9, "only {crc_errors} of 12 runs hit the CRC");
}

/// ULPDUs longer than `max_ulpdu_len` fail the flow as length errors; at the limit
/// they pass.
#[test]
fn mpa_rx_ulpdu_above_the_limit_is_a_length_error() {
    let mut rng = StdRng::seed_from_u64(0x11);
    for (seed, limit) in [(60u64, 0u16), (61, 7), (62, 100)] {
        let fpdus: Vec<Vec<u8>> = [0usize, 1, 7, 8, 99, 100, 101, 3, 200]
            .into_iter()
            .filter(|&len| len <= usize::from(limit))
            .chain([usize::from(limit) + 1, 0])
            .map(|len| fpdu(&vec![0x3C; len]))
            .collect();
        let segments = segments_of(&fpdus, &mut rng);
        let (_, outcome, expected) = run(&segments, limit, 0.1, 0.1, seed);
        assert!(expected.length_error);
        assert_eq!(outcome.good.len(), fpdus.len() - 2);
    }
}

/// With input always waiting and the output always ready, a beat goes in on every
/// cycle, including the FPDUs whose last input beat finishes two output beats
/// (ULPDUs of 9+ bytes, 1 or 2 mod 8, at byte 0 of a beat).
#[test]
fn mpa_rx_takes_a_beat_per_cycle() {
    let mut rng = StdRng::seed_from_u64(0xBEA7);
    let lens: Vec<usize> = (0..=40).chain([1000, 1001, 1002, 1003, 1500]).collect();
    let mut fpdus = vec![];
    for &len in &lens {
        fpdus.push(fpdu(&vec![0x5A; len]));
        fpdus.push(fpdu(&[0xA5; 14]));
    }
    // The worst case: back to back 9- and 10-byte ULPDUs (16-byte FPDUs, all at byte
    // 0), each finishing two output beats in its second input beat.
    fpdus.extend((0..40).map(|i| fpdu(&vec![0xC3; 9 + i % 2])));
    let segments = segments_of(&fpdus, &mut rng);
    let (timing, outcome, _) = run(&segments, u16::MAX, 0.0, 0.0, 70);
    // Two reset cycles, a cycle per input beat, the drain (until `busy` falls).
    assert_eq!(
        timing.cycles,
        2 + outcome.input_beats + outcome.drain_cycles
    );
    assert!(
        outcome.drain_cycles <= 8,
        "drained in {} cycles",
        outcome.drain_cycles
    );
    println!(
        "mpa_rx back to back: {} input beats in {} cycles, then {} to drain",
        outcome.input_beats,
        timing.cycles - outcome.drain_cycles,
        outcome.drain_cycles
    );
}

/// An error holds the flow failed until `reset` (input is taken and dropped, nothing
/// comes out); after the reset the same block delineates a new flow from scratch.
#[test]
fn mpa_rx_errors_latch_until_reset() {
    let mut rng = StdRng::seed_from_u64(0x1A7C);
    let good: Vec<Vec<u8>> = (0..4).map(|_| fpdu(&random_ulpdu(&mut rng, 100))).collect();
    let mut bad_crc = good.clone();
    *bad_crc[1].last_mut().unwrap() ^= 0x80;
    let mut cut = good.concat();
    cut.truncate(good[0].len() + 5);
    let flows = vec![
        [
            segments_of(&bad_crc, &mut rng),
            segments_of(&good, &mut rng),
        ]
        .concat(),
        [vec![cut], segments_of(&good, &mut rng)].concat(),
        segments_of(&good, &mut rng),
    ];
    let (_, outcomes, expected) = run_flows(&flows, u16::MAX, 0.2, 0.2, 80);
    assert!(expected[0].crc_error && expected[1].length_error);
    assert_eq!(
        outcomes.iter().map(|o| o.good.len()).collect::<Vec<_>>(),
        [1, 1, 4]
    );
}
