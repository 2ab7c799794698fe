//! The RTR compares (`rtr_match`) on both simulators in lock step against a reference
//! written here from `iwnic-proto`'s RTR FPDUs: every beat of every FPDU equal (all
//! four quarters; random bytes past its end), a flipped bit in each of its bytes not
//! equal, random
//! beats, beats past the longest FPDU; every payload length up to 64 and a few above;
//! lint.

use iwnic_hdl::rtr_match::{RtrBeatMatch, RtrLength};
use iwnic_hdl::verilator::lint;
use iwnic_proto::ddp::MessageRepr;
use iwnic_proto::mpa::RtrTypes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rust_hdl::prelude::*;

use crate::dut::{dut, lockstep, work_dir, Bench};

/// Both compares side by side, with the clock the test harness drives (unused: the
/// blocks are combinational).
#[derive(LogicBlock, Default)]
pub struct RtrMatchHarness {
    pub clock: Signal<In, Clock>,
    pub beat: Signal<In, Bits<8>>,
    pub data: Signal<In, Bits<64>>,
    pub len: Signal<In, Bits<16>>,
    pub equal: Signal<Out, Bits<12>>,
    pub len_equal: Signal<Out, Bits<3>>,
    beat_match: RtrBeatMatch,
    length: RtrLength,
}

impl Logic for RtrMatchHarness {
    #[hdl_gen]
    fn update(&mut self) {
        self.beat_match.beat.next = self.beat.val();
        self.beat_match.data.next = self.data.val();
        self.length.len.next = self.len.val();
        self.equal.next = self.beat_match.equal.val();
        self.len_equal.next = self.length.equal.val();
    }
}

dut! {
    RtrMatchHarness, verilated as "rtr_match",
    inputs { beat, data, len }
    outputs { equal, len_equal }
}

/// The FPDUs in the order of the match bits: Send, Write, Read.
fn fpdus() -> [&'static [u8]; 3] {
    RtrTypes::EACH.map(|t| MessageRepr::rtr_fpdu(t).unwrap())
}

/// The reference: bit `4t + q` when each of the bytes `2q`, `2q + 1` of `data` that lies
/// inside FPDU `t` at beat `beat` is that FPDU's byte.
fn expected_equal(beat: usize, data: u64) -> u64 {
    let bytes = data.to_le_bytes();
    let mut equal = 0;
    for (t, fpdu) in fpdus().iter().enumerate() {
        for q in 0..4 {
            let same =
                (2 * q..2 * q + 2).all(|i| fpdu.get(8 * beat + i).is_none_or(|b| *b == bytes[i]));
            equal |= u64::from(same) << (4 * t + q);
        }
    }
    equal
}

/// Type `t`'s beat matches: all four quarters.
fn type_equal(equal: u64, t: usize) -> bool {
    equal >> (4 * t) & 0xF == 0xF
}

fn expected_len_equal(len: usize) -> u64 {
    fpdus()
        .iter()
        .enumerate()
        .fold(0, |acc, (t, fpdu)| acc | u64::from(fpdu.len() == len) << t)
}

struct MatchBench {
    vectors: std::vec::IntoIter<Inputs>,
    /// Vectors with each type's bit set, and clear, as the reference has them.
    equal_seen: [usize; 3],
    unequal_seen: [usize; 3],
}

impl Bench<Inputs, Outputs> for MatchBench {
    fn inputs(&mut self) -> Option<Inputs> {
        self.vectors.next()
    }

    fn outputs(&mut self, inputs: &Inputs, out: &Outputs) {
        let equal = expected_equal(inputs.beat as usize, inputs.data);
        assert_eq!(out.equal, equal, "{inputs:x?}");
        assert_eq!(
            out.len_equal,
            expected_len_equal(inputs.len as usize),
            "{inputs:x?}"
        );
        for t in 0..3 {
            if type_equal(equal, t) {
                self.equal_seen[t] += 1;
            } else {
                self.unequal_seen[t] += 1;
            }
        }
    }
}

fn vectors(rng: &mut StdRng) -> Vec<Inputs> {
    let mut vectors = vec![];
    let mut lens = (0..=64u64).chain([65, 100, 1460, 0xFFFF]);
    let mut next_len = |rng: &mut StdRng| lens.next().unwrap_or_else(|| rng.gen::<u16>().into());
    for fpdu in fpdus() {
        for beat in 0..fpdu.len().div_ceil(8) {
            // The FPDU's bytes at this beat, random bytes past its end.
            let mut bytes: [u8; 8] = rng.gen();
            let inside = fpdu.len().min(8 * beat + 8) - 8 * beat;
            bytes[..inside].copy_from_slice(&fpdu[8 * beat..8 * beat + inside]);
            let data = u64::from_le_bytes(bytes);
            vectors.push(Inputs {
                beat: beat as u64,
                data,
                len: next_len(rng),
            });
            for byte in 0..inside {
                let bit = rng.gen_range(0..8);
                vectors.push(Inputs {
                    beat: beat as u64,
                    data: data ^ 1 << (8 * byte + bit),
                    len: next_len(rng),
                });
            }
        }
    }
    // Random beats, beats past every FPDU, the last beat index.
    for beat in (0..10).chain([255]) {
        for _ in 0..8 {
            vectors.push(Inputs {
                beat,
                data: rng.gen(),
                len: next_len(rng),
            });
        }
    }
    vectors.extend((0..=64).map(|len| Inputs {
        beat: 0,
        data: 0,
        len,
    }));
    vectors
}

#[test]
fn rtr_match_on_every_beat_of_every_rtr() {
    let mut rng = StdRng::seed_from_u64(31);
    let vectors = vectors(&mut rng);
    let count = vectors.len();
    let mut bench = MatchBench {
        vectors: vectors.into_iter(),
        equal_seen: [0; 3],
        unequal_seen: [0; 3],
    };
    let mut rusthdl = RustHdl::new(RtrMatchHarness::default());
    let mut verilated = Verilated::new(RtrMatchHarness::default());
    let timing = lockstep(&mut rusthdl, &mut verilated, &mut bench);
    assert_eq!(timing.cycles as usize, count);
    // Each FPDU's own beats are equal, and each flipped bit unequal, for its type.
    for (t, fpdu) in fpdus().iter().enumerate() {
        assert!(bench.equal_seen[t] >= fpdu.len().div_ceil(8), "type {t}");
        assert!(bench.unequal_seen[t] >= fpdu.len(), "type {t}");
    }
}

/// The FPDUs' own beats give their own bit, and a flipped bit in any of their bytes
/// clears it, on the RustHDL model (the lock-step test holds Verilator to it).
#[test]
fn rtr_match_sees_every_byte() {
    let mut uut = RtrBeatMatch::default();
    uut.connect_all();
    for (t, fpdu) in fpdus().iter().enumerate() {
        for beat in 0..fpdu.len().div_ceil(8) {
            let mut bytes = [0u8; 8];
            let inside = fpdu.len().min(8 * beat + 8) - 8 * beat;
            bytes[..inside].copy_from_slice(&fpdu[8 * beat..8 * beat + inside]);
            let data = u64::from_le_bytes(bytes);
            uut.beat.next = (beat as u64).into();
            uut.data.next = data.into();
            crate::dut::settle(&mut uut);
            assert!(
                type_equal(uut.equal.val().to_u64(), t),
                "type {t} beat {beat}"
            );
            for bit in 0..8 * inside {
                uut.data.next = (data ^ 1 << bit).into();
                crate::dut::settle(&mut uut);
                assert!(
                    !type_equal(uut.equal.val().to_u64(), t),
                    "type {t} beat {beat} bit {bit}"
                );
            }
        }
    }
}

#[test]
fn rtr_match_lints_clean() {
    for (name, verilog) in [
        ("lint-rtr_beat_match", {
            let mut uut = RtrBeatMatch::default();
            uut.connect_all();
            generate_verilog(&uut)
        }),
        ("lint-rtr_length", {
            let mut uut = RtrLength::default();
            uut.connect_all();
            generate_verilog(&uut)
        }),
    ] {
        lint(&verilog, &work_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
