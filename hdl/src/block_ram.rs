//! A simple dual-port block RAM (one registered read port, one write port, one clock)
//! whose Verilog lets yosys map it to ECP5 block RAM without collision logic.
//!
//! `rust_hdl`'s `RAM` promises that a read of the word written in the same cycle returns
//! the old word. ECP5's DP16KD does not promise that across its two ports, so yosys
//! emulates it: it registers the write, compares addresses and puts a multiplexer behind
//! the memory's output, on the path that is already the slowest of a block RAM (its
//! clock-to-out). On the flow table that logic was 400 LUT4 and a logic level on the
//! critical path.
//!
//! [`BlockRam`] drops the promise instead: the memory carries yosys's `no_rw_check`
//! attribute, so a read of a word being written is *undefined* in hardware, and the
//! RustHDL model panics when a design does it. Every block test runs the RustHDL model,
//! so a design that collides fails its tests rather than misbehaving on the board.
//! Verilator's model (the same Verilog) returns the old word, as the RustHDL one would.
//!
//! [`WriteRegisteredRam`] is the same memory with its write port behind flip-flops: for
//! RAMs whose writes are chosen by wide logic (`nic_top`'s contexts), that logic and
//! the route to the RAM's inputs each get a cycle. Its tests and `BlockRam`'s run
//! random traffic on both simulators against a software memory.

use rust_hdl::prelude::*;
use std::collections::BTreeMap;

/// 2^`N` words of `D`; see the module docs. The read is registered: at a rising edge
/// with `read_enable` high, `read_data` takes the word at `read_address`, and holds it
/// otherwise (the read port's clock enable).
#[derive(LogicBlock, Default)]
pub struct BlockRam<D: Synth, const N: usize> {
    pub clock: Signal<In, Clock>,
    pub read_address: Signal<In, Bits<N>>,
    pub read_enable: Signal<In, Bit>,
    pub read_data: Signal<Out, D>,
    pub write_address: Signal<In, Bits<N>>,
    pub write_data: Signal<In, D>,
    pub write_enable: Signal<In, Bit>,
    _words: BTreeMap<Bits<N>, D>,
}

impl<D: Synth, const N: usize> Logic for BlockRam<D, N> {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            let (read, write) = (self.read_address.val(), self.write_address.val());
            let (reading, writing) = (self.read_enable.val(), self.write_enable.val());
            // A model that returned either word here would hide a board-only bug.
            assert!(
                !(reading && writing && read == write),
                "BlockRam: address {read:?} read while it is written (undefined in hardware)"
            );
            if reading {
                self.read_data.next = self._words.get(&read).copied().unwrap_or_default();
            }
            if writing {
                self._words.insert(write, self.write_data.val());
            }
        }
    }

    fn connect(&mut self) {
        self.read_data.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Custom(format!(
            "\
(* no_rw_check *) reg [{top}:0] mem [0:{last}];

always @(posedge clock) begin
    if (read_enable) begin
        read_data <= mem[read_address];
    end
    if (write_enable) begin
        mem[write_address] <= write_data;
    end
end
",
            top = D::BITS - 1,
            last = (1_usize << N) - 1,
        ))
    }
}

/// A [`BlockRam`] whose write port is registered: a write presented in one cycle lands
/// at the end of the next. The write's address, data and enable then come straight
/// from flip-flops beside the RAM, so the logic that chooses a write has a whole cycle
/// and the routing to the block RAM's inputs another. A read of the word being written
/// (by the registered write, `writing`) is undefined, as in [`BlockRam`].
#[derive(LogicBlock, Default)]
pub struct WriteRegisteredRam<D: Synth, const N: usize> {
    pub clock: Signal<In, Clock>,
    pub read_address: Signal<In, Bits<N>>,
    pub read_enable: Signal<In, Bit>,
    pub read_data: Signal<Out, D>,
    pub write_address: Signal<In, Bits<N>>,
    pub write_data: Signal<In, D>,
    pub write_enable: Signal<In, Bit>,
    /// The write registered at the last edge, landing at the next.
    pub writing: Signal<Out, Bit>,
    ram: BlockRam<D, N>,
    write_address_q: DFF<Bits<N>>,
    write_data_q: DFF<D>,
    write_enable_q: DFF<Bit>,
}

impl<D: Synth, const N: usize> Logic for WriteRegisteredRam<D, N> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, write_address_q, write_data_q, write_enable_q);
        self.ram.clock.next = self.clock.val();
        self.ram.read_address.next = self.read_address.val();
        self.ram.read_enable.next = self.read_enable.val();
        self.read_data.next = self.ram.read_data.val();
        self.write_address_q.d.next = self.write_address.val();
        self.write_data_q.d.next = self.write_data.val();
        self.write_enable_q.d.next = self.write_enable.val();
        self.ram.write_address.next = self.write_address_q.q.val();
        self.ram.write_data.next = self.write_data_q.q.val();
        self.ram.write_enable.next = self.write_enable_q.q.val();
        self.writing.next = self.write_enable_q.q.val();
    }
}
