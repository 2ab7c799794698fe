//! Stream stimulus: packets cut into 64-bit beats, a source that idles at random and a
//! sink that stalls at random, both seeded, both obeying the valid/ready rules (a
//! source never withdraws or changes an offered beat).

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One stream beat: byte `i` in bits `8i+7:8i`, `keep` = contiguous low bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beat {
    pub data: u64,
    pub keep: u8,
    pub last: bool,
}

/// `packet` as beats. Bytes outside `keep` are random, so a block that fails to ignore
/// them shows it. An empty packet is one beat with `keep` = 0.
pub fn beats(packet: &[u8], rng: &mut StdRng) -> Vec<Beat> {
    if packet.is_empty() {
        return vec![Beat {
            data: rng.gen(),
            keep: 0,
            last: true,
        }];
    }
    let count = packet.len().div_ceil(8);
    packet
        .chunks(8)
        .enumerate()
        .map(|(index, chunk)| {
            let mut bytes: [u8; 8] = rng.gen();
            bytes[..chunk.len()].copy_from_slice(chunk);
            Beat {
                data: u64::from_le_bytes(bytes),
                keep: (((1u16 << chunk.len()) - 1) & 0xFF) as u8,
                last: index + 1 == count,
            }
        })
        .collect()
}

/// The bytes of `beat` that `keep` selects.
pub fn kept_bytes(beat: &Beat) -> Vec<u8> {
    let count = beat.keep.trailing_ones() as usize;
    assert_eq!(
        beat.keep.count_ones() as usize,
        count,
        "keep {:#04x} is not contiguous",
        beat.keep
    );
    beat.data.to_le_bytes()[..count].to_vec()
}

/// Offers queued items, idling at random between them.
pub struct Source<T> {
    queue: VecDeque<T>,
    offering: bool,
    idle_probability: f64,
    rng: StdRng,
}

impl<T> Source<T> {
    pub fn new(items: impl IntoIterator<Item = T>, idle_probability: f64, seed: u64) -> Self {
        Source {
            queue: items.into_iter().collect(),
            offering: false,
            idle_probability,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The item offered this cycle (`valid`), if any. Once offered, an item stays
    /// offered until taken.
    pub fn offer(&mut self) -> Option<&T> {
        if !self.offering && !self.queue.is_empty() {
            self.offering = !self.rng.gen_bool(self.idle_probability);
        }
        self.queue.front().filter(|_| self.offering)
    }

    /// Ends the cycle: the offered item is gone if the block was ready.
    pub fn handshake(&mut self, ready: bool) {
        if self.offering && ready {
            self.queue.pop_front();
            self.offering = false;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Drops `ready` at random.
pub struct Sink {
    stall_probability: f64,
    rng: StdRng,
}

impl Sink {
    pub fn new(stall_probability: f64, seed: u64) -> Self {
        Sink {
            stall_probability,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// This cycle's `ready`.
    pub fn ready(&mut self) -> bool {
        !self.rng.gen_bool(self.stall_probability)
    }
}
