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
            let write = self
                .write_enable
                .val()
                .then(|| (self.write_address.val(), self.write_data.val()));
            self.read_data.next = clock_edge(
                &mut self._words,
                self.read_enable.val(),
                self.read_address.val(),
                write,
                self.read_data.val(),
            );
        }
    }

    fn connect(&mut self) {
        self.read_data.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Custom(verilog::<D, N>(""))
    }
}

/// A [`BlockRam`] whose write port is registered: a write presented in one cycle lands
/// at the end of the next. The write's address, data and enable then come straight
/// from flip-flops beside the RAM, so the logic that chooses a write has a whole cycle
/// and the routing to the block RAM's inputs another. A read of the word being written
/// (by the registered write) is undefined, as in [`BlockRam`], and panics in the model.
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
    _words: BTreeMap<Bits<N>, D>,
    _pending: Option<(Bits<N>, D)>,
}

impl<D: Synth, const N: usize> Logic for WriteRegisteredRam<D, N> {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            let write = self._pending.take();
            self.read_data.next = clock_edge(
                &mut self._words,
                self.read_enable.val(),
                self.read_address.val(),
                write,
                self.read_data.val(),
            );
            self._pending = self
                .write_enable
                .val()
                .then(|| (self.write_address.val(), self.write_data.val()));
        }
        self.writing.next = self._pending.is_some();
    }

    fn connect(&mut self) {
        self.read_data.connect();
        self.writing.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Custom(verilog::<D, N>(&format!(
            "\
reg [{top}:0] write_data_q;
reg [{addr}:0] write_address_q;
reg write_enable_q;
always @(posedge clock) begin
    write_data_q <= write_data;
    write_address_q <= write_address;
    write_enable_q <= write_enable;
end
always @(*) writing = write_enable_q;
",
            top = D::BITS - 1,
            addr = N - 1,
        )))
    }
}

/// One rising edge of the model: the registered read (held when not enabled) and the
/// write, with the check that they do not meet.
fn clock_edge<D: Synth, const N: usize>(
    words: &mut BTreeMap<Bits<N>, D>,
    reading: bool,
    read: Bits<N>,
    write: Option<(Bits<N>, D)>,
    held: D,
) -> D {
    // A model that returned either word here would hide a board-only bug.
    assert!(
        !(reading && write.is_some_and(|(address, _)| address == read)),
        "BlockRam: address {read:?} read while it is written (undefined in hardware)"
    );
    let data = if reading {
        words.get(&read).copied().unwrap_or_default()
    } else {
        held
    };
    if let Some((address, value)) = write {
        words.insert(address, value);
    }
    data
}

/// The memory's Verilog; with `write_register` (Verilog declaring `write_*_q`) the write
/// port takes the registered signals.
fn verilog<D: Synth, const N: usize>(write_register: &str) -> String {
    let suffix = if write_register.is_empty() { "" } else { "_q" };
    format!(
        "\
{write_register}(* no_rw_check *) reg [{top}:0] mem [0:{last}];

always @(posedge clock) begin
    if (read_enable) begin
        read_data <= mem[read_address];
    end
    if (write_enable{suffix}) begin
        mem[write_address{suffix}] <= write_data{suffix};
    end
end
",
        top = D::BITS - 1,
        last = (1_usize << N) - 1,
    )
}
