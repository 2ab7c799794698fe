//! An event counter whose count is a cycle behind its event: a 32-bit free-running
//! counter fed by a registered pulse.
//!
//! **Why**: `nic_top` counts what its controller decides (a refused ULPDU, an ACK sent,
//! a duplicate segment). Written as `count += 1` inside the controller's `match`, each
//! counter's 32 flip-flops take the decoded state and the decision's inputs as their
//! enable, and on an ECP5 that decode, the enable's fan-out to 32 flip-flops and the
//! carry chain came out as nic_top's critical path (98.5 MHz, 7 levels, 10.2 ns). Here
//! the event only sets a one-bit register; the sum takes that register in the next
//! cycle, so the decode ends at one flip-flop and the adder starts from one.
//!
//! **Interface**: `increment` high in a cycle counts one; `count` shows it two rising edges
//! later (the pulse register, then the count register). `count` wraps at 2^32.
//! Synchronous active-high `reset` clears both registers (an event in the cycle of
//! `reset` is not counted).

use rust_hdl::prelude::*;

#[derive(Default, LogicBlock)]
pub struct EventCounter {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub increment: Signal<In, Bit>,
    pub count: Signal<Out, Bits<32>>,
    pulse: DFF<Bit>,
    value: DFF<Bits<32>>,
}

impl Logic for EventCounter {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, pulse, value);
        self.pulse.d.next = self.increment.val();
        self.value.d.next = self.value.q.val() + bit_cast::<32, 1>(self.pulse.q.val().into());
        if self.reset.val() {
            self.pulse.d.next = false;
            self.value.d.next = 0.into();
        }
        self.count.next = self.value.q.val();
    }
}
