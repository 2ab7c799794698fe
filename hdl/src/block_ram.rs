//! Simple dual-port block RAMs (one two-stage read port, one write port, one clock)
//! whose Verilog maps to ECP5 block RAM with its output register and without
//! collision logic.
//!
//! `rust_hdl`'s `RAM` promises that a read of the word written in the same cycle returns
//! the old word. ECP5's DP16KD does not promise that across its two ports, so yosys
//! emulates it: it registers the write, compares addresses and puts a multiplexer behind
//! the memory's output, on the path that is already the slowest of a block RAM (its
//! clock-to-out). On the flow table that logic was 400 LUT4 and a logic level on the
//! critical path. These RAMs drop the promise instead: the memory carries yosys's
//! `no_rw_check` attribute, so a read of a word being written is *undefined* in
//! hardware, and the RustHDL model panics when a design does it. Every block test runs
//! the RustHDL model, so a design that collides fails its tests rather than misbehaving
//! on the board. Verilator's model (the same Verilog) returns the old word.
//!
//! [`OutputRegisteredRam`] reads through the block RAM's own output register. A
//! DP16KD's read data leaves 5.8 ns after the clock without it and 1.0 ns with it
//! (nextpnr's ECP5 timing, speed 6), so a RAM read into anything but a flip-flop beside
//! the RAM cannot make 125 MHz without it, and even plain flip-flops made only 115 MHz
//! where sixteen RAMs fed 450 of them (the flow table). Yosys does not map a register
//! after a memory into the DP16KD, so for synthesis (Verilog macro `IWNIC_ECP5`, which
//! `synth` defines) this RAM's Verilog instantiates DP16KD tiles itself, in the
//! 512 × 36 pseudo dual-port mode that yosys itself picks for these RAMs, with
//! `REGMODE` "OUTREG". Every simulator runs the behavioural Verilog of the other
//! branch, whose registers are the tiles'.
//!
//! [`WriteRegisteredRam`] is that memory with its write port behind flip-flops too: for
//! RAMs whose writes are chosen by wide logic (`nic_top`'s contexts, the flow table's
//! ways), that logic and the route to the RAM's inputs each get a cycle. The tests of
//! both run random traffic on both simulators against a software memory.

use rust_hdl::prelude::*;
use std::collections::BTreeMap;

/// Depth up to which [`OutputRegisteredRam`] instantiates DP16KD tiles (512 × 36 each,
/// two groups of them for 1,024 words) for ECP5; deeper RAMs (the simulation builds) are
/// left to yosys's inference, with the output register in the fabric.
pub const TILED_ADDRESS_BITS: usize = 10;

/// 2^`N` words of `D` with a two-stage read, the stages of a DP16KD with its output
/// register: at a rising edge with `read_enable` high the RAM's read latch takes the
/// word at `read_address`; at a rising edge with `output_enable` high `read_data` (the
/// output register) takes the latch as it was before that edge. With both high every
/// cycle a read shows two edges after its address. A read of the word being written is
/// undefined (see the module docs), and the model panics on it.
#[derive(LogicBlock, Default)]
pub struct OutputRegisteredRam<D: Synth, const N: usize> {
    pub clock: Signal<In, Clock>,
    pub read_address: Signal<In, Bits<N>>,
    pub read_enable: Signal<In, Bit>,
    pub output_enable: Signal<In, Bit>,
    pub read_data: Signal<Out, D>,
    pub write_address: Signal<In, Bits<N>>,
    pub write_data: Signal<In, D>,
    pub write_enable: Signal<In, Bit>,
    _words: BTreeMap<Bits<N>, D>,
    _latch: D,
}

impl<D: Synth, const N: usize> Logic for OutputRegisteredRam<D, N> {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            let (read, write) = (self.read_address.val(), self.write_address.val());
            let (reading, writing) = (self.read_enable.val(), self.write_enable.val());
            assert!(
                !(reading && writing && read == write),
                "OutputRegisteredRam: address {read:?} read while it is written \
                 (undefined in hardware)"
            );
            if self.output_enable.val() {
                self.read_data.next = self._latch;
            }
            if reading {
                self._latch = self._words.get(&read).copied().unwrap_or_default();
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
        let behavioural = format!(
            "\
(* no_rw_check *) reg [{top}:0] mem [0:{last}];
reg [{top}:0] latch;

always @(posedge clock) begin
    if (read_enable) begin
        latch <= mem[read_address];
    end
    if (output_enable) begin
        read_data <= latch;
    end
    if (write_enable) begin
        mem[write_address] <= write_data;
    end
end
",
            top = D::BITS - 1,
            last = (1_usize << N) - 1,
        );
        if N > TILED_ADDRESS_BITS {
            return Verilog::Custom(behavioural);
        }
        Verilog::Custom(format!(
            "`ifdef IWNIC_ECP5\n{}`else\n{behavioural}`endif\n",
            dp16kd_tiles(D::BITS, N)
        ))
    }
}

/// DP16KD instances for an [`OutputRegisteredRam`] of `width` × 2^`address_bits`
/// (`address_bits` ≤ [`TILED_ADDRESS_BITS`]), one per 36 bits of the word and per 512
/// words, each in the 36-bit pseudo dual-port mode as yosys's own ECP5 mapping drives
/// it: port A writes (its address bits 0-3 are the four byte enables, the word address is
/// on bits 5-13; data bits 0-17 on DIA, 18-35 on DIB), port B reads (word address on bits
/// 5-13; data 0-17 out on DOA, 18-35 on DOB). `REGMODE` "OUTREG" with `OCE` as the output
/// register's enable, on both ports: the read data leaves on both ports' pins, and
/// nextpnr times the DOA half by `REGMODE_A` (a tile with only `REGMODE_B` set measured
/// 5.61 ns clock-to-out on DOA, 0.97 ns with both).
///
/// A RAM deeper than 512 words is a group of such tiles per 512 words: each group takes
/// the writes to its words, every group reads, and the read address's high bits travel
/// beside the read latch and the output register (flip-flops loaded by the same enables)
/// to pick the group's word behind the output registers: one multiplexer after the
/// tiles' 1.0 ns clock-to-out rather than block RAM cascades in front of it.
fn dp16kd_tiles(width: usize, address_bits: usize) -> String {
    const TILE_ADDRESS_BITS: usize = 9;
    let tiles = width.div_ceil(36);
    let padded = tiles * 36;
    let group_bits = address_bits.saturating_sub(TILE_ADDRESS_BITS);
    let groups = 1_usize << group_bits;
    let write_data = if padded == width {
        "write_data".to_string()
    } else {
        format!("{{{}'d0, write_data}}", padded - width)
    };
    let mut v = format!("wire [{}:0] tile_in = {write_data};\n", padded - 1);
    for group in 0..groups {
        v.push_str(&format!("wire [{}:0] tile_out_{group};\n", padded - 1));
    }
    if group_bits == 0 {
        v.push_str(&format!(
            "always @(*) read_data = tile_out_0[{}:0];\n",
            width - 1
        ));
    } else {
        let choices: String = (0..groups)
            .map(|group| {
                format!(
                    "        {group_bits}'d{group}: read_data = tile_out_{group}[{}:0];\n",
                    width - 1
                )
            })
            .collect();
        v.push_str(&format!(
            "\
reg [{gtop}:0] latch_group;
reg [{gtop}:0] out_group;
always @(posedge clock) begin
    if (read_enable) begin
        latch_group <= read_address[{atop}:{TILE_ADDRESS_BITS}];
    end
    if (output_enable) begin
        out_group <= latch_group;
    end
end
always @(*) begin
    case (out_group)
{choices}    endcase
end
",
            gtop = group_bits - 1,
            atop = address_bits - 1,
        ));
    }
    let address = |port: &str, signal: &str| -> String {
        (5..14)
            .map(|pin| {
                let bit = pin - 5;
                if bit < address_bits.min(TILE_ADDRESS_BITS) {
                    format!(".AD{port}{pin}({signal}[{bit}])")
                } else {
                    format!(".AD{port}{pin}(1'b0)")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    for group in 0..groups {
        let write_enable = if group_bits == 0 {
            "write_enable".to_string()
        } else {
            v.push_str(&format!(
                "wire write_enable_{group} = write_enable & \
                 (write_address[{}:{TILE_ADDRESS_BITS}] == {group_bits}'d{group});\n",
                address_bits - 1
            ));
            format!("write_enable_{group}")
        };
        for tile in 0..tiles {
            let base = tile * 36;
            let pins = |prefix: &str, bus: &str, offset: usize| -> String {
                (0..18)
                    .map(|i| format!(".{prefix}{i}({bus}[{}])", base + offset + i))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            v.push_str(&format!(
                "DP16KD #(.DATA_WIDTH_A(36), .DATA_WIDTH_B(36), .REGMODE_A(\"OUTREG\"), \
                 .REGMODE_B(\"OUTREG\"), .RESETMODE(\"SYNC\"), .ASYNC_RESET_RELEASE(\"SYNC\"), \
                 .CSDECODE_A(\"0b000\"), .CSDECODE_B(\"0b000\"), .WRITEMODE_A(\"NORMAL\"), \
                 .WRITEMODE_B(\"NORMAL\"), .GSR(\"DISABLED\")) tile_{group}_{tile} (\n    \
                 .CLKA(clock), .CEA({write_enable}), .OCEA(output_enable), .WEA(1'b1), \
                 .RSTA(1'b0), .CSA0(1'b0), .CSA1(1'b0), .CSA2(1'b0),\n    \
                 .ADA0({write_enable}), .ADA1({write_enable}), .ADA2({write_enable}), \
                 .ADA3({write_enable}), .ADA4(1'b0), {write_address},\n    {dia},\n    {dib},\n    \
                 .CLKB(clock), .CEB(read_enable), .OCEB(output_enable), .WEB(1'b0), .RSTB(1'b0), \
                 .CSB0(1'b0), .CSB1(1'b0), .CSB2(1'b0),\n    \
                 .ADB0(1'b0), .ADB1(1'b0), .ADB2(1'b0), .ADB3(1'b0), .ADB4(1'b0), {read_address},\n    \
                 {doa},\n    {dob}\n);\n",
                write_address = address("A", "write_address"),
                read_address = address("B", "read_address"),
                dia = pins("DIA", "tile_in", 0),
                dib = pins("DIB", "tile_in", 18),
                doa = pins("DOA", &format!("tile_out_{group}"), 0),
                dob = pins("DOB", &format!("tile_out_{group}"), 18),
            ));
        }
    }
    v
}

/// An [`OutputRegisteredRam`] whose write port is registered too: a write presented in
/// one cycle lands at the end of the next. The write's address, data and enable then
/// come straight from flip-flops beside the RAM, so the logic that chooses a write has
/// a whole cycle and the routing to the block RAM's inputs another. A read of the word
/// being written (by the registered write, `writing`) is undefined.
#[derive(LogicBlock, Default)]
pub struct WriteRegisteredRam<D: Synth, const N: usize> {
    pub clock: Signal<In, Clock>,
    pub read_address: Signal<In, Bits<N>>,
    pub read_enable: Signal<In, Bit>,
    pub output_enable: Signal<In, Bit>,
    pub read_data: Signal<Out, D>,
    pub write_address: Signal<In, Bits<N>>,
    pub write_data: Signal<In, D>,
    pub write_enable: Signal<In, Bit>,
    /// The write registered at the last edge, landing at the next.
    pub writing: Signal<Out, Bit>,
    ram: OutputRegisteredRam<D, N>,
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
        self.ram.output_enable.next = self.output_enable.val();
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
