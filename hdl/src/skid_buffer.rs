//! A skid buffer: a register slice for a stream whose `in_ready` and `out_*` all come
//! straight from registers.
//!
//! **Why**: a valid/ready stream joins blocks combinationally in both directions: a
//! sink's `ready` runs back through every block that passes it on, and a source's
//! `valid` and data run forward into the sink's logic. In `nic_top` the transmit path's
//! ready ran from `tx_checksum`'s ring fill level through the arbiter and the segment
//! builder into `mpa_tx`'s CRC register, one 16-level path across four blocks. A skid
//! buffer cuts a stream into two timing paths, each ending at its registers, at the
//! cost of one cycle of latency and 2 × 73 flip-flops, and without costing throughput.
//!
//! **How**: the output register holds the beat on `out_*`. While the output is empty
//! or taken, it loads the input directly. When the output stalls in the cycle a beat
//! arrives, that beat has already been accepted (`in_ready` was high, decided a cycle
//! earlier) and goes into the skid register; `in_ready` falls while the skid register
//! is full, and the skid beat moves to the output when the output next moves.
//!
//! **Interface**: 64-bit `data`, 8-bit `keep`, `last`, `valid`/`ready`, passed through
//! unchanged and in order. `in_ready` is `!skid_full & !reset`, registers only;
//! `out_valid` and `out_*` are registers. Throughput: one beat per cycle with the output
//! ready; latency one cycle. Synchronous active-high `reset` empties both registers.

use rust_hdl::prelude::*;

#[derive(Default, LogicBlock)]
pub struct SkidBuffer {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub in_data: Signal<In, Bits<64>>,
    pub in_keep: Signal<In, Bits<8>>,
    pub in_last: Signal<In, Bit>,
    pub in_valid: Signal<In, Bit>,
    pub in_ready: Signal<Out, Bit>,
    pub out_data: Signal<Out, Bits<64>>,
    pub out_keep: Signal<Out, Bits<8>>,
    pub out_last: Signal<Out, Bit>,
    pub out_valid: Signal<Out, Bit>,
    pub out_ready: Signal<In, Bit>,
    /// The output register moves: it is empty or its beat is taken.
    load: Signal<Local, Bit>,
    out_data_q: DFF<Bits<64>>,
    out_keep_q: DFF<Bits<8>>,
    out_last_q: DFF<Bit>,
    out_valid_q: DFF<Bit>,
    skid_data: DFF<Bits<64>>,
    skid_keep: DFF<Bits<8>>,
    skid_last: DFF<Bit>,
    skid_full: DFF<Bit>,
}

impl Logic for SkidBuffer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            out_data_q,
            out_keep_q,
            out_last_q,
            out_valid_q,
            skid_data,
            skid_keep,
            skid_last,
            skid_full
        );
        self.in_ready.next = !self.skid_full.q.val() & !self.reset.val();
        self.load.next = !self.out_valid_q.q.val() | self.out_ready.val();
        if self.load.val() {
            if self.skid_full.q.val() {
                // `in_ready` is low: nothing arrives this cycle.
                self.out_data_q.d.next = self.skid_data.q.val();
                self.out_keep_q.d.next = self.skid_keep.q.val();
                self.out_last_q.d.next = self.skid_last.q.val();
                self.out_valid_q.d.next = true;
                self.skid_full.d.next = false;
            } else {
                self.out_data_q.d.next = self.in_data.val();
                self.out_keep_q.d.next = self.in_keep.val();
                self.out_last_q.d.next = self.in_last.val();
                self.out_valid_q.d.next = self.in_valid.val() & self.in_ready.val();
            }
        } else if self.in_valid.val() & self.in_ready.val() {
            self.skid_full.d.next = true;
        }
        // The skid's data loads whenever the skid is empty: what it holds then does
        // not matter, and its enables wait on one flip-flop, not on the handshakes.
        if !self.skid_full.q.val() {
            self.skid_data.d.next = self.in_data.val();
            self.skid_keep.d.next = self.in_keep.val();
            self.skid_last.d.next = self.in_last.val();
        }
        if self.reset.val() {
            self.out_valid_q.d.next = false;
            self.skid_full.d.next = false;
        }
        self.out_data.next = self.out_data_q.q.val();
        self.out_keep.next = self.out_keep_q.q.val();
        self.out_last.next = self.out_last_q.q.val();
        self.out_valid.next = self.out_valid_q.q.val();
    }
}
