//! The block RAMs against a software memory: random reads and writes (never a read of
//! the word a write lands on, which is undefined) and random output-register enables,
//! on both simulators in lock step.

use std::collections::HashMap;

use iwnic_hdl::block_ram::{OutputRegisteredRam, WriteRegisteredRam};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rust_hdl::prelude::Bits;

use crate::dut::{lockstep, Bench};

mod output_registered {
    use super::*;
    crate::dut::dut! {
        OutputRegisteredRam<Bits<40>, 5>, verilated as "output_registered_ram",
        inputs { read_address, read_enable, output_enable, write_address, write_data, write_enable }
        outputs { read_data }
    }
}

mod registered {
    use super::*;
    crate::dut::dut! {
        WriteRegisteredRam<Bits<40>, 5>, verilated as "write_registered_ram",
        inputs { read_address, read_enable, output_enable, write_address, write_data, write_enable }
        outputs { read_data, writing }
    }
}

/// One cycle's operation on the RAM.
#[derive(Clone, Copy, Default)]
struct Op {
    read: Option<u64>,
    write: Option<(u64, u64)>,
    /// The output register loads.
    output_enable: bool,
}

/// Random operations and the reference: a write presented at cycle `t` lands at the
/// edge ending cycle `t + latency`; a read at cycle `t` returns, from cycle `t + 1` on,
/// the word as it was before that edge's write into the read latch, and the output
/// register shows the latch from the first cycle after an `output_enable` edge.
struct RamBench {
    ops: Vec<Op>,
    cycle: usize,
    write_latency: usize,
    /// The read latch.
    latch: Option<u64>,
    memory: HashMap<u64, u64>,
    /// Writes presented and not landed yet: (landing cycle, address, data).
    in_flight: Vec<(usize, u64, u64)>,
    expected: Option<u64>,
    reads_checked: usize,
}

impl RamBench {
    fn new(write_latency: usize, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut ops: Vec<Op> = Vec::new();
        for t in 0..4000_usize {
            let mut op = Op {
                output_enable: rng.gen_bool(0.7),
                ..Op::default()
            };
            if rng.gen_bool(0.6) {
                op.write = Some((rng.gen_range(0..32), rng.gen::<u64>() & 0xFF_FFFF_FFFF));
            }
            // The write landing in this cycle, if any, is the one presented
            // `write_latency` cycles ago.
            let landing = match t.checked_sub(write_latency) {
                Some(presented) if presented < t => ops[presented].write,
                Some(_) => op.write,
                None => None,
            };
            if rng.gen_bool(0.7) {
                let address = rng.gen_range(0..32);
                if landing.is_none_or(|(a, _)| a != address) {
                    op.read = Some(address);
                }
            }
            ops.push(op);
        }
        RamBench {
            ops,
            cycle: 0,
            write_latency,
            latch: None,
            memory: HashMap::new(),
            in_flight: Vec::new(),
            expected: None,
            reads_checked: 0,
        }
    }

    fn inputs_of(op: &Op) -> [u64; 6] {
        let (write_address, write_data) = op.write.unwrap_or_default();
        [
            op.read.unwrap_or_default(),
            u64::from(op.read.is_some()),
            u64::from(op.output_enable),
            write_address,
            write_data,
            u64::from(op.write.is_some()),
        ]
    }

    /// Checks this cycle's `read_data` and runs the reference through the edge.
    fn step(&mut self, read_data: u64) {
        if let Some(expected) = self.expected {
            assert_eq!(read_data, expected, "cycle {}", self.cycle);
            self.reads_checked += 1;
        }
        let op = self.ops[self.cycle];
        let word = op
            .read
            .map(|address| self.memory.get(&address).copied().unwrap_or_default());
        if op.output_enable {
            self.expected = self.latch;
        }
        if word.is_some() {
            self.latch = word;
        }
        if let Some((address, data)) = op.write {
            self.in_flight
                .push((self.cycle + self.write_latency, address, data));
        }
        let now = self.cycle;
        for &(_, address, data) in self.in_flight.iter().filter(|(at, ..)| *at == now) {
            self.memory.insert(address, data);
        }
        self.in_flight.retain(|(at, ..)| *at != now);
        self.cycle += 1;
    }
}

impl Bench<output_registered::Inputs, output_registered::Outputs> for RamBench {
    fn inputs(&mut self) -> Option<output_registered::Inputs> {
        let [read_address, read_enable, output_enable, write_address, write_data, write_enable] =
            Self::inputs_of(self.ops.get(self.cycle)?);
        Some(output_registered::Inputs {
            read_address,
            read_enable,
            output_enable,
            write_address,
            write_data,
            write_enable,
        })
    }
    fn outputs(&mut self, _: &output_registered::Inputs, outputs: &output_registered::Outputs) {
        self.step(outputs.read_data);
    }
}

impl Bench<registered::Inputs, registered::Outputs> for RamBench {
    fn inputs(&mut self) -> Option<registered::Inputs> {
        let [read_address, read_enable, output_enable, write_address, write_data, write_enable] =
            Self::inputs_of(self.ops.get(self.cycle)?);
        Some(registered::Inputs {
            read_address,
            read_enable,
            output_enable,
            write_address,
            write_data,
            write_enable,
        })
    }
    fn outputs(&mut self, _: &registered::Inputs, outputs: &registered::Outputs) {
        let landing = self.cycle >= 1 && self.ops[self.cycle - 1].write.is_some();
        assert_eq!(
            outputs.writing,
            u64::from(landing),
            "writing at cycle {}",
            self.cycle
        );
        self.step(outputs.read_data);
    }
}

#[test]
fn output_registered_ram_reads_through_its_two_stages() {
    let mut bench = RamBench::new(0, 0xB7A3);
    lockstep(
        &mut output_registered::RustHdl::new(OutputRegisteredRam::default()),
        &mut output_registered::Verilated::new(OutputRegisteredRam::default()),
        &mut bench,
    );
    assert!(bench.reads_checked > 2000);
}

#[test]
fn write_registered_ram_lands_writes_a_cycle_later() {
    let mut bench = RamBench::new(1, 0xB7A2);
    lockstep(
        &mut registered::RustHdl::new(WriteRegisteredRam::default()),
        &mut registered::Verilated::new(WriteRegisteredRam::default()),
        &mut bench,
    );
    assert!(bench.reads_checked > 2000);
}

/// A read of the word a write lands on panics in the model (undefined on the board).
#[test]
#[should_panic(expected = "read while it is written")]
fn write_registered_ram_refuses_a_colliding_read() {
    use crate::dut::Engine;
    let mut ram = registered::RustHdl::new(WriteRegisteredRam::default());
    let write = registered::Inputs {
        write_address: 3,
        write_data: 7,
        write_enable: 1,
        ..Default::default()
    };
    ram.drive(&write);
    ram.tick();
    ram.drive(&registered::Inputs {
        read_address: 3,
        read_enable: 1,
        ..Default::default()
    });
    ram.tick();
}
