//! One driver, two simulators: every block test runs its vectors on the block's RustHDL
//! model (stepped by hand, not the threaded `Simulation`) and on a Verilated build of
//! the block's exported Verilog, in lock step, and requires their ports to agree on
//! every cycle.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use iwnic_hdl::verilator::VerilatedModel;
use rust_hdl::prelude::*;

pub use iwnic_hdl::verilator::PortValue;

/// One simulator running one block: drive inputs, read the settled outputs, clock.
pub trait Engine {
    type Inputs;
    type Outputs;
    /// Applies `inputs`, lets combinational logic settle and returns the outputs as
    /// they are just before the next rising edge.
    fn drive(&mut self, inputs: &Self::Inputs) -> Self::Outputs;
    /// One rising clock edge (and the falling edge after it).
    fn tick(&mut self);
}

/// Where Verilated builds are cached between test runs.
pub fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("verilator")
}

/// Builds each named model once per test process (tests run in parallel threads and
/// would otherwise compile the same model into the same folder at once).
pub fn verilated<B: Block>(name: &str, uut: &B) -> VerilatedModel {
    static BUILDING: OnceLock<Mutex<()>> = OnceLock::new();
    let verilog = generate_verilog(uut);
    let ports = iwnic_hdl::verilator::top_ports(uut);
    // A test that failed while holding the lock poisons it; the next build is still sound.
    let _one_build_at_a_time = BUILDING
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    VerilatedModel::build(name, &verilog, ports, &work_dir()).unwrap_or_else(|e| panic!("{e}"))
}

/// Settles a hand-stepped RustHDL block.
pub fn settle<B: Block>(uut: &mut B) {
    assert!(
        simulate(uut, 100),
        "RustHDL: combinational logic did not settle in 100 delta cycles"
    );
}

/// Declares a block's test ports once and derives, for that block: `Inputs` and
/// `Outputs` structs, the hand-stepped RustHDL engine `RustHdl` and the Verilator
/// engine `Verilated`. Every block has a `clock` input, toggled by `tick`.
macro_rules! dut {
    (
        $block:ty, verilated as $name:literal,
        inputs { $($input:ident),* $(,)? }
        outputs { $($output:ident),* $(,)? }
    ) => {
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Inputs { $(pub $input: u64,)* }

        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Outputs { $(pub $output: u64,)* }

        pub struct RustHdl(pub $block);

        impl RustHdl {
            pub fn new(mut uut: $block) -> Self {
                rust_hdl::prelude::Block::connect_all(&mut uut);
                RustHdl(uut)
            }
        }

        impl $crate::dut::Engine for RustHdl {
            type Inputs = Inputs;
            type Outputs = Outputs;
            fn drive(&mut self, inputs: &Inputs) -> Outputs {
                use $crate::dut::PortValue;
                $(self.0.$input.next = PortValue::from_port(inputs.$input);)*
                $crate::dut::settle(&mut self.0);
                Outputs { $($output: self.0.$output.val().to_port(),)* }
            }
            fn tick(&mut self) {
                self.0.clock.next = true.into();
                $crate::dut::settle(&mut self.0);
                self.0.clock.next = false.into();
                $crate::dut::settle(&mut self.0);
            }
        }

        /// Port indices of the verilated model, looked up once by name.
        #[allow(non_snake_case)]
        struct PortIndices { clock: u32, $($input: u32,)* $($output: u32,)* }

        pub struct Verilated {
            model: iwnic_hdl::verilator::VerilatedModel,
            ports: PortIndices,
        }

        impl Verilated {
            pub fn new(mut uut: $block) -> Self {
                rust_hdl::prelude::Block::connect_all(&mut uut);
                let model = $crate::dut::verilated($name, &uut);
                let ports = PortIndices {
                    clock: model.port("clock"),
                    $($input: model.port(stringify!($input)),)*
                    $($output: model.port(stringify!($output)),)*
                };
                Verilated { model, ports }
            }
        }

        impl $crate::dut::Engine for Verilated {
            type Inputs = Inputs;
            type Outputs = Outputs;
            fn drive(&mut self, inputs: &Inputs) -> Outputs {
                $(self.model.set(self.ports.$input, inputs.$input);)*
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
    };
}
pub(crate) use dut;

/// A test's side of the lock step: it chooses each cycle's inputs and sees what the
/// block answered in that cycle.
pub trait Bench<I, O> {
    /// This cycle's inputs, or `None` when the test is done. Inputs must not depend on
    /// this cycle's outputs (a valid never waits for a ready), so they are chosen first.
    fn inputs(&mut self) -> Option<I>;
    /// The settled outputs of the cycle driven with `inputs`: where handshakes complete.
    fn outputs(&mut self, inputs: &I, outputs: &O);
}

/// Runs two engines of one block in lock step under `bench`: each cycle both get the
/// same inputs, must settle to identical outputs, and are clocked. Returns the cycle
/// count and the time each engine spent.
pub fn lockstep<I, O, A, B>(a: &mut A, b: &mut B, bench: &mut impl Bench<I, O>) -> Timing
where
    O: PartialEq + std::fmt::Debug,
    A: Engine<Inputs = I, Outputs = O>,
    B: Engine<Inputs = I, Outputs = O>,
{
    let mut timing = Timing::default();
    while let Some(inputs) = bench.inputs() {
        let start = std::time::Instant::now();
        let out_a = a.drive(&inputs);
        a.tick();
        let middle = std::time::Instant::now();
        let out_b = b.drive(&inputs);
        b.tick();
        timing.first += middle - start;
        timing.second += middle.elapsed();
        assert_eq!(
            out_a, out_b,
            "the engines disagree at cycle {}",
            timing.cycles
        );
        bench.outputs(&inputs, &out_a);
        timing.cycles += 1;
    }
    timing
}

#[derive(Debug, Default)]
pub struct Timing {
    pub cycles: u64,
    pub first: Duration,
    pub second: Duration,
}

impl Timing {
    pub fn report(&self, what: &str) {
        let rate = |d: Duration| self.cycles as f64 / d.as_secs_f64();
        println!(
            "{what}: {} cycles; RustHDL {:.0} cycles/s, Verilator {:.0} cycles/s",
            self.cycles,
            rate(self.first),
            rate(self.second)
        );
    }
}
