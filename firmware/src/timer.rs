//! One timer per connection in a hashed timing wheel with intrusive lists: arming,
//! re-arming and cancelling are O(1), and `poll` visits only the wheel slots that time
//! crossed, so 65,536 connections cost nothing while their timers sleep.

/// Wheel slots, one per millisecond: a revolution is about a second; later deadlines wait
/// in their slot for later revolutions.
const SLOTS: usize = 1024;
const NIL: u32 = u32::MAX;

/// `a` is at or before `b` on the wrapping millisecond clock.
fn not_after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// The time `poll` was given, as the milliseconds the timers run on and the RFC 6528
/// 4 µs clock. Milliseconds advance by the step since the last poll: riscv32 has no
/// 64-bit divide, and dividing the full microsecond count costs two library calls per
/// poll, where a step under 2^32 µs costs one 32-bit `divu`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// The last time given, µs; negative until the first poll (a full division then).
    micros: i64,
    /// The time given before the last resync, µs.
    resynced_from: i64,
    /// `micros / 1000` (truncated, as `Instant::total_millis`) and `micros % 1000`.
    millis: u32,
    sub_millis: u32,
}

impl Clock {
    pub(crate) const NEW: Clock = Clock {
        micros: -1,
        resynced_from: -1,
        millis: 0,
        sub_millis: 0,
    };

    /// Set the time; `true` when the clock was set anew (see [`Clock::resync`]), which
    /// the timers may have to follow.
    pub(crate) fn set(&mut self, micros: i64) -> bool {
        // Time going backwards wraps to a step beyond the range (a resync).
        let step = (micros as u64).wrapping_sub(self.micros as u64);
        if self.micros >= 0 && step < u64::from(u32::MAX - 1000) {
            let sub = self.sub_millis + step as u32;
            // Most polls of a busy core stay within their millisecond: no division.
            if sub >= 1000 {
                self.millis = self.millis.wrapping_add(sub / 1000);
                self.sub_millis = sub % 1000;
            } else {
                self.sub_millis = sub;
            }
            self.micros = micros;
            false
        } else {
            self.resync(micros);
            true
        }
    }

    /// The first poll, time going backwards or a jump of over an hour: a full division,
    /// kept out of line so the every-poll path above saves no registers for it.
    #[cold]
    #[inline(never)]
    fn resync(&mut self, micros: i64) {
        self.resynced_from = self.micros;
        self.millis = (micros / 1000) as u32;
        self.sub_millis = if micros >= 0 {
            (micros % 1000) as u32
        } else {
            0
        };
        self.micros = micros;
    }

    /// How far the last resync moved the millisecond clock, in full (negative: time
    /// went backwards), where its 32 bits tell it only up to 2^31 ms either way.
    pub(crate) fn resync_step_ms(&self) -> i64 {
        self.micros / 1000 - self.resynced_from / 1000
    }

    pub(crate) fn millis(&self) -> u32 {
        self.millis
    }

    /// The RFC 6528 ISN clock: one tick every 4 µs.
    pub(crate) fn isn_ticks(&self) -> u32 {
        (self.micros as u64 >> 2) as u32
    }
}

/// One timer: its wheel slot's list links, its deadline and the slot it is linked in
/// (or [`NOT_ARMED`]). Sixteen bytes, so an entry's address is a shift of its index.
#[derive(Debug, Clone, Copy)]
struct Entry {
    next: u32,
    prev: u32,
    deadline: u32,
    slot: u16,
}

/// `slot` of a timer that is not armed.
const NOT_ARMED: u16 = u16::MAX;
const _: () = assert!(SLOTS < NOT_ARMED as usize);

/// Timers of `N` connections, in milliseconds.
///
/// The cursor first, within a load's reach of the struct whatever `N`; the entries,
/// touched by every arm, before the 4 KB of slot heads.
#[repr(C)]
pub(crate) struct TimerWheel<const N: usize> {
    /// The next tick whose slot has not been swept.
    cursor: u32,
    entries: [Entry; N],
    heads: [u32; SLOTS],
}

impl<const N: usize> TimerWheel<N> {
    pub(crate) const fn new() -> Self {
        TimerWheel {
            entries: [Entry {
                next: NIL,
                prev: NIL,
                deadline: 0,
                slot: NOT_ARMED,
            }; N],
            heads: [NIL; SLOTS],
            cursor: 0,
        }
    }

    /// Start the clock at `now` (before any timer is armed).
    pub(crate) fn start(&mut self, now: u32) {
        self.cursor = now;
    }

    /// Restart the clock at `now` with the timers armed, after time stepped where the
    /// sweep cannot follow it (backwards, or further ahead than the wrapping clock
    /// tells), each timer's deadline `moved`. Every armed timer is linked again. Cold:
    /// a pass over every timer and slot.
    #[cold]
    #[inline(never)]
    pub(crate) fn restart(&mut self, now: u32, moved: impl Fn(u32) -> u32) {
        self.cursor = now;
        self.heads = [NIL; SLOTS];
        for i in 0..N {
            let Entry { deadline, slot, .. } = self.entries[i];
            if slot == NOT_ARMED {
                continue;
            }
            let deadline = moved(deadline);
            let tick = if not_after(deadline, now) {
                now
            } else {
                deadline
            };
            self.link_at(i, deadline, tick);
        }
    }

    /// When timer `i` is due, if it is armed.
    pub(crate) fn deadline(&self, i: usize) -> Option<u32> {
        let e = self.entries[i];
        (e.slot != NOT_ARMED).then_some(e.deadline)
    }

    /// Arm (or re-arm) timer `i` for `deadline`. A timer re-armed for later while linked
    /// in a slot the sweep reaches first keeps its place, only its deadline changes: a
    /// connection's timer mostly moves later as its setup goes on, and the sweep moves
    /// it on when it finds it there not yet due (measured: −31 instructions a setup).
    pub(crate) fn arm(&mut self, i: usize, deadline: u32) {
        // A deadline the sweep has passed goes in the slot swept next.
        let tick = if not_after(deadline, self.cursor) {
            self.cursor
        } else {
            deadline
        };
        let entry = &mut self.entries[i];
        if entry.slot != NOT_ARMED {
            // The first tick from the cursor on whose slot is the timer's.
            let visit = self
                .cursor
                .wrapping_add(u32::from(entry.slot).wrapping_sub(self.cursor) % SLOTS as u32);
            if not_after(visit, tick) {
                entry.deadline = deadline;
                return;
            }
            self.disarm(i);
        }
        self.link_at(i, deadline, tick);
    }

    /// Link the unarmed timer `i`, due at `deadline`, in the slot of `tick`.
    fn link_at(&mut self, i: usize, deadline: u32, tick: u32) {
        let slot = tick as usize % SLOTS;
        let head = self.heads[slot];
        self.entries[i] = Entry {
            next: head,
            prev: NIL,
            deadline,
            slot: slot as u16,
        };
        if let Some(old) = self.link(head) {
            self.entries[old].prev = i as u32;
        }
        self.heads[slot] = i as u32;
    }

    pub(crate) fn disarm(&mut self, i: usize) {
        let Entry {
            prev, next, slot, ..
        } = self.entries[i];
        if slot == NOT_ARMED {
            return;
        }
        self.entries[i].slot = NOT_ARMED;
        match self.link(prev) {
            Some(p) => self.entries[p].next = next,
            None => self.heads[usize::from(slot)] = next,
        }
        if let Some(n) = self.link(next) {
            self.entries[n].prev = prev;
        }
    }

    fn link(&self, v: u32) -> Option<usize> {
        (v != NIL).then_some(v as usize)
    }

    /// Whether [`TimerWheel::next_expired`] may find a timer: time moved past the
    /// swept slots, or the current slot (where past deadlines are put) holds one.
    pub(crate) fn may_expire(&self, now: u32) -> bool {
        self.cursor != now || self.heads[now as usize % SLOTS] != NIL
    }

    /// The next timer due at `now`, disarmed; `None` when every due timer was returned.
    pub(crate) fn next_expired(&mut self, now: u32) -> Option<usize> {
        if !not_after(self.cursor, now) {
            return None;
        }
        // After a long gap one revolution sweeps every slot.
        if now.wrapping_sub(self.cursor) >= SLOTS as u32 {
            self.cursor = now.wrapping_sub(SLOTS as u32 - 1);
        }
        loop {
            let slot = self.cursor as usize % SLOTS;
            let mut at = self.link(self.heads[slot]);
            while let Some(i) = at {
                let Entry { next, deadline, .. } = self.entries[i];
                if not_after(deadline, now) {
                    self.disarm(i);
                    return Some(i);
                }
                // Re-armed for later while linked here: on to its deadline's slot (a
                // deadline in this slot is due in a later revolution and stays).
                if deadline as usize % SLOTS != slot {
                    self.disarm(i);
                    self.link_at(i, deadline, deadline);
                }
                at = self.link(next);
            }
            if self.cursor == now {
                return None;
            }
            self.cursor = self.cursor.wrapping_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    proptest::proptest! {
        /// The clock's milliseconds are always those of the full division, whatever
        /// the sequence of times: small steps, jumps, time going backwards, negatives.
        #[test]
        fn clock_matches_the_full_division(
            times in proptest::collection::vec(
                proptest::prop_oneof![
                    0i64..5_000,
                    0i64..(1 << 40),
                    -(1i64 << 40)..(1 << 40),
                    (i64::MAX - (1 << 33))..i64::MAX,
                ],
                1..40,
            ),
            steps in proptest::collection::vec(0i64..3_000, 1..40),
        ) {
            let mut clock = Clock::NEW;
            for (&base, &step) in times.iter().zip(steps.iter().cycle()) {
                for t in [base, base.saturating_add(step)] {
                    clock.set(t);
                    let now = smoltcp::time::Instant::from_micros(t);
                    proptest::prop_assert_eq!(clock.millis(), now.total_millis() as u32);
                    proptest::prop_assert_eq!(clock.isn_ticks(), (now.total_micros() as u64 >> 2) as u32);
                }
            }
        }
    }

    /// Every timer due at `now`, sorted; each found while `may_expire` said one might be
    /// (the poll looks at the wheel only then).
    fn drain<const N: usize>(w: &mut TimerWheel<N>, now: u32) -> Vec<usize> {
        let mut v = Vec::new();
        loop {
            let may_expire = w.may_expire(now);
            let Some(i) = w.next_expired(now) else { break };
            assert!(may_expire, "timer {i} due at {now} behind may_expire");
            v.push(i);
        }
        v.sort();
        v
    }

    proptest::proptest! {
        /// Arms, disarms and polls in any order, time moving by small steps and by
        /// jumps past a turn of the wheel, polls cut short (as when the host queue fills):
        /// every timer a poll takes is due and armed, and a poll that runs to the end
        /// leaves none due behind, asking `may_expire` first as the firmware's poll does.
        #[test]
        fn may_expire_never_hides_a_due_timer(
            ops in proptest::collection::vec(
                (0usize..4, 0u32..4, proptest::prop_oneof![0u32..3, 900u32..3_000]),
                1..200,
            ),
        ) {
            let mut w = TimerWheel::<4>::new();
            let mut now = 7;
            w.start(now);
            let mut armed: [Option<u32>; 4] = [None; 4];
            for (i, op, value) in ops {
                match op {
                    0 => {
                        // Deadlines before now too: they are put in the current slot.
                        let deadline = (now + value).wrapping_sub(5);
                        w.arm(i, deadline);
                        armed[i] = Some(deadline);
                    }
                    1 => {
                        w.disarm(i);
                        armed[i] = None;
                    }
                    _ => now += value,
                }
                // Op 3 polls for at most one timer; the others poll to the end.
                let limit = if op == 3 { 1 } else { usize::MAX };
                let mut taken = 0;
                while taken < limit && w.may_expire(now) {
                    let Some(t) = w.next_expired(now) else { break };
                    let deadline = armed[t].take();
                    proptest::prop_assert!(deadline.is_some_and(|d| not_after(d, now)));
                    taken += 1;
                }
                if limit == usize::MAX {
                    let due = (0..4).filter(|&t| armed[t].is_some_and(|d| not_after(d, now)));
                    proptest::prop_assert_eq!(due.count(), 0);
                }
            }
        }
    }

    #[test]
    fn timers_fire_once_at_their_deadline() {
        let mut w = TimerWheel::<8>::new();
        w.start(100);
        w.arm(0, 105);
        w.arm(1, 105 + SLOTS as u32); // same slot, next revolution
        w.arm(2, 3000);
        assert_eq!(drain(&mut w, 104), [] as [usize; 0]);
        assert_eq!(drain(&mut w, 105), [0]);
        assert_eq!(drain(&mut w, 105), [] as [usize; 0]);
        assert_eq!(drain(&mut w, 105 + SLOTS as u32), [1]);
        assert_eq!(w.deadline(2), Some(3000));
        assert_eq!(drain(&mut w, 10_000), [2]);
        assert_eq!(w.deadline(2), None);
    }

    #[test]
    fn rearm_and_disarm_unlink_anywhere_in_a_slot() {
        let mut w = TimerWheel::<8>::new();
        w.start(0);
        for i in 0..5 {
            w.arm(i, 50); // one slot, list of five
        }
        w.disarm(2); // middle
        w.disarm(4); // head
        w.arm(0, 70); // tail moves
        assert_eq!(drain(&mut w, 60), [1, 3]);
        assert_eq!(drain(&mut w, 70), [0]);
    }

    #[test]
    fn a_timer_rearmed_later_fires_at_its_new_deadline_only() {
        let mut w = TimerWheel::<4>::new();
        w.start(0);
        w.arm(0, 10);
        w.arm(0, 40); // stays in slot 10
        w.arm(1, 20);
        w.arm(1, 10 + 2 * SLOTS as u32); // stays in slot 20, two turns later
        assert_eq!(drain(&mut w, 30), [] as [usize; 0]);
        assert_eq!(w.deadline(0), Some(40));
        assert_eq!(drain(&mut w, 40), [0]);
        assert_eq!(drain(&mut w, 9 + 2 * SLOTS as u32), [] as [usize; 0]);
        assert_eq!(drain(&mut w, 10 + 2 * SLOTS as u32), [1]);
        // Earlier than where it is linked: moved at once.
        let now = 10 + 2 * SLOTS as u32;
        w.arm(2, now + 500);
        w.arm(2, now + 100);
        assert_eq!(drain(&mut w, now + 99), [] as [usize; 0]);
        assert_eq!(drain(&mut w, now + 100), [2]);
    }

    #[test]
    fn a_past_deadline_fires_on_the_next_poll() {
        let mut w = TimerWheel::<4>::new();
        w.start(0);
        assert_eq!(drain(&mut w, 500), [] as [usize; 0]);
        w.arm(3, 10);
        assert_eq!(drain(&mut w, 501), [3]);
    }

    #[test]
    fn the_clock_may_wrap() {
        let mut w = TimerWheel::<4>::new();
        w.start(u32::MAX - 5);
        w.arm(1, 4); // 10 ms later, across the wrap
        assert_eq!(drain(&mut w, u32::MAX), [] as [usize; 0]);
        assert_eq!(drain(&mut w, 4), [1]);
    }
}
