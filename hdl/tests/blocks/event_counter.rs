//! The event counter: random event trains with resets among them, on both simulators
//! in lock step against a reference count two edges behind; lint.

use iwnic_hdl::event_counter::EventCounter;
use iwnic_hdl::verilator::lint;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::dut::{dut, lockstep, work_dir, Bench};

dut! {
    EventCounter, verilated as "event_counter",
    inputs { reset, increment }
    outputs { count }
}

/// Drives events with probability `density` and a reset now and then; the count seen in
/// a cycle covers the events up to two cycles before it.
struct CounterBench {
    rng: StdRng,
    cycles_left: u32,
    density: f64,
    /// The event driven in the last cycle (in the pulse register now).
    pending: u32,
    /// Events driven two or more cycles ago: what `count` must show.
    settled: u32,
    events: u64,
    resets: u64,
}

impl CounterBench {
    fn new(cycles: u32, density: f64, seed: u64) -> Self {
        CounterBench {
            rng: StdRng::seed_from_u64(seed),
            cycles_left: cycles,
            density,
            pending: 0,
            settled: 0,
            events: 0,
            resets: 0,
        }
    }
}

impl Bench<Inputs, Outputs> for CounterBench {
    fn inputs(&mut self) -> Option<Inputs> {
        self.cycles_left = self.cycles_left.checked_sub(1)?;
        let reset = self.rng.gen_bool(0.005);
        Some(Inputs {
            reset: reset.into(),
            // An event in a reset cycle is not counted: drive some to prove it.
            increment: self.rng.gen_bool(self.density).into(),
        })
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        assert_eq!(outputs.count, u64::from(self.settled), "count");
        if inputs.reset == 1 {
            self.resets += 1;
            self.pending = 0;
            self.settled = 0;
            return;
        }
        self.settled = self.settled.wrapping_add(self.pending);
        self.pending = inputs.increment as u32;
        self.events += inputs.increment;
    }
}

#[test]
fn event_counter_counts_every_event_two_edges_later() {
    for (seed, density) in [(1, 0.5), (2, 0.05), (3, 0.95), (4, 1.0)] {
        let mut bench = CounterBench::new(3_000, density, seed);
        lockstep(
            &mut RustHdl::new(EventCounter::default()),
            &mut Verilated::new(EventCounter::default()),
            &mut bench,
        );
        assert!(
            bench.events > 0 && bench.resets > 0,
            "the run exercised nothing"
        );
    }
}

/// `verilator --lint-only -Wall` with the shared waivers only.
#[test]
fn event_counter_lints_clean() {
    let mut uut = EventCounter::default();
    rust_hdl::prelude::Block::connect_all(&mut uut);
    lint(
        &rust_hdl::prelude::generate_verilog(&uut),
        &work_dir().join("lint-event_counter"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
