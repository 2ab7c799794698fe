//! Which connection-table entries are free, and which live entry holds a 4-tuple.
//!
//! A chained hash over the entry numbers themselves: `heads[bucket]` is the first entry
//! of a bucket's chain and `links[entry]` the next one. A free entry is in no chain, so
//! the same link word threads the free list. Eight bytes an entry, against about 28 for
//! `heapless::IndexMap`, which stores every tuple a second time beside its hash; the
//! tuple is compared where the connection keeps it.

use crate::hal::FourTuple;

/// No entry: the end of a chain or of the free list.
const NIL: u32 = u32::MAX;

/// The scalars first: they stay within a load's reach of the struct whatever `N`.
#[repr(C)]
pub(crate) struct EntryIndex<const N: usize> {
    /// The free list is a queue: an entry given back is taken again only after every
    /// other free one, so a slot's handle generations come round as slowly as they can
    /// (taken back first, one connection at a time would reuse one slot, and a handle
    /// the host still holds would name a stranger after 32,768 connections).
    free_head: u32,
    free_tail: u32,
    /// Keys the bucket hash with a secret, so which tuples share a chain is not public.
    seed: u32,
    heads: [u32; N],
    links: [u32; N],
}

impl<const N: usize> EntryIndex<N> {
    /// Every entry free (the free list in entry order); buckets `N`, a power of two.
    pub const fn new(seed: u32) -> Self {
        const {
            assert!(
                N.is_power_of_two(),
                "the table holds a power of two entries"
            );
            assert!(N <= NIL as usize, "entries are numbered by u32");
        }
        let mut links = [NIL; N];
        let mut i = 0;
        while i + 1 < N {
            links[i] = (i + 1) as u32;
            i += 1;
        }
        EntryIndex {
            heads: [NIL; N],
            links,
            free_head: 0,
            free_tail: N as u32 - 1,
            seed,
        }
    }

    /// A multiply per word, each product's high half folded into its low half, and the
    /// bucket from the top bits of a last multiply. Without the folds a product's bit
    /// depends only on the bits below it, and tuples that differ only in the top bytes
    /// of two words (the last octet of the peer's address and the high byte of our
    /// port) would share a few buckets.
    #[inline]
    fn bucket(&self, tuple: &FourTuple) -> usize {
        const GOLDEN: u32 = 0x9E37_79B1;
        let h = tuple.words().iter().fold(self.seed, |h, &w| {
            let h = (h ^ w).wrapping_mul(GOLDEN);
            h ^ h >> 16
        });
        h.wrapping_mul(GOLDEN)
            .checked_shr(u32::BITS - N.trailing_zeros())
            .unwrap_or(0) as usize
    }

    /// The live entry whose tuple `holds` says is `tuple`.
    #[inline]
    pub fn find(&self, tuple: &FourTuple, holds: impl Fn(usize) -> bool) -> Option<usize> {
        let mut i = self.heads[self.bucket(tuple)];
        while let Some(&next) = self.links.get(i as usize) {
            if holds(i as usize) {
                return Some(i as usize);
            }
            i = next;
        }
        None
    }

    /// Take a free entry for `tuple`; `None` when every entry is live.
    pub fn take(&mut self, tuple: &FourTuple) -> Option<usize> {
        let i = self.free_head;
        let free_next = *self.links.get(i as usize)?;
        self.free_head = free_next;
        if free_next == NIL {
            self.free_tail = NIL;
        }
        let head = &mut self.heads[self.bucket(tuple)];
        self.links[i as usize] = *head;
        *head = i;
        Some(i as usize)
    }

    /// Return live entry `i`, which holds `tuple`, to the free list.
    pub fn give_back(&mut self, i: usize, tuple: &FourTuple) {
        let bucket = self.bucket(tuple);
        let next = self.links[i];
        // Unlink `i` from its chain: the bucket head or its predecessor points past it.
        // A chain ends in NIL, which no entry is; `i`, live with `tuple`, is found before.
        if self.heads[bucket] == i as u32 {
            self.heads[bucket] = next;
        } else {
            let mut prev = self.heads[bucket];
            loop {
                let Some(&after) = self.links.get(prev as usize) else {
                    debug_assert!(false, "entry {i} is not in the chain of its tuple");
                    break;
                };
                if after == i as u32 {
                    self.links[prev as usize] = next;
                    break;
                }
                prev = after;
            }
        }
        self.links[i] = NIL;
        match self.links.get_mut(self.free_tail as usize) {
            Some(last) => *last = i as u32,
            None => self.free_head = i as u32,
        }
        self.free_tail = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(port: u16) -> FourTuple {
        FourTuple {
            local_ip: [10, 0, 0, 1],
            local_port: 4791,
            remote_ip: [10, 0, 0, 2],
            remote_port: port,
        }
    }

    /// The longest chain when `tuples` fill a table of 65,536 entries.
    fn longest_chain(tuples: impl Iterator<Item = FourTuple>) -> usize {
        let index = std::boxed::Box::new(EntryIndex::<65_536>::new(0x1234_5678));
        let mut per_bucket = std::vec![0usize; 65_536];
        for t in tuples {
            per_bucket[index.bucket(&t)] += 1;
        }
        per_bucket.into_iter().max().unwrap_or(0)
    }

    /// Full tables of tuples that differ in few bits, the way a peer's connections do
    /// (ports, the last octet of an address, servers on ports 256 apart), spread like
    /// random keys: no chain longer than a handful.
    #[test]
    fn related_tuples_spread_over_the_buckets() {
        let of = |local_port: u16, last_octet: u8, remote_port: u16| FourTuple {
            local_ip: [10, 0, 0, 1],
            local_port,
            remote_ip: [10, 0, 1, last_octet],
            remote_port,
        };
        let sets: [(&str, std::vec::Vec<FourTuple>); 3] = [
            (
                "remote ports",
                (0..=u16::MAX).map(|p| of(4791, 2, p)).collect(),
            ),
            (
                "last octet x remote port",
                (0..=255)
                    .flat_map(|o| (0..256).map(move |p| of(4791, o, 40_000 + p)))
                    .collect(),
            ),
            (
                "last octet x local port's high byte",
                (0..=255u16)
                    .flat_map(|hi| (0..=255).map(move |o| of(hi << 8 | 7, o, 40_000)))
                    .collect(),
            ),
        ];
        for (name, tuples) in sets {
            let longest = longest_chain(tuples.into_iter());
            assert!(longest <= 12, "{name}: a chain of {longest}");
        }
    }

    /// Fill all eight entries (chains of several share buckets), find each, give them
    /// back in a scrambled order, and find none; then the free list yields all eight
    /// again, in the order they were given back.
    #[test]
    fn take_find_give_back() {
        let mut index = EntryIndex::<8>::new(7);
        let mut holder = [None; 8];
        for port in 0..8 {
            let i = index.take(&tuple(port)).expect("a free entry");
            assert!(holder[i].is_none());
            holder[i] = Some(tuple(port));
        }
        assert_eq!(index.take(&tuple(100)), None, "all eight are live");
        let find = |index: &EntryIndex<8>, holder: &[Option<FourTuple>; 8], t| {
            index.find(&t, |i| holder[i] == Some(t))
        };
        for port in 0..8 {
            let i = find(&index, &holder, tuple(port)).expect("found");
            assert_eq!(holder[i], Some(tuple(port)));
        }
        assert_eq!(find(&index, &holder, tuple(9)), None);
        let mut given_back = std::vec::Vec::new();
        for port in [3, 0, 7, 5, 1, 6, 2, 4] {
            let i = find(&index, &holder, tuple(port)).unwrap();
            index.give_back(i, &tuple(port));
            holder[i] = None;
            given_back.push(i);
            assert_eq!(find(&index, &holder, tuple(port)), None);
        }
        let taken: std::vec::Vec<usize> = (0..8).filter_map(|p| index.take(&tuple(p))).collect();
        assert_eq!(taken, given_back);
        assert_eq!(index.take(&tuple(100)), None, "all eight are live again");
    }
}
