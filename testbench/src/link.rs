//! The wire between two NICs: a latency, and seeded faults (drop, duplicate, reorder,
//! corrupt), with every frame that arrives written to a pcap of both directions.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use iwnic_proto::smoltcp_wire::{IpAddress, Ipv4Packet, TcpPacket};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::pcap::PcapRecorder;

/// Which way a frame travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Direction {
    AToB,
    BToA,
}

/// The wire's behaviour. Probabilities are per frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    pub latency: Duration,
    pub drop: f64,
    pub duplicate: f64,
    /// Probability that a frame is held back by up to `reorder_delay` more, so frames
    /// behind it overtake it.
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Probability that one payload byte of a frame with TCP payload is flipped and the
    /// TCP checksum recomputed, as a faulty device before checksum generation would: only
    /// the MPA CRC can catch it.
    pub corrupt: f64,
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            latency: Duration::from_micros(5),
            drop: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(50),
            corrupt: 0.0,
            seed: 1,
        }
    }
}

/// What the wire did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
}

/// Frames in flight, ordered by arrival time, then by the order they were sent.
pub struct Link {
    config: LinkConfig,
    /// The drop, duplicate and reorder draws, taken for every frame.
    rng: StdRng,
    /// The corruption draws, taken only for frames with TCP payload. A stream of their own
    /// makes which payload frame is hit depend on the seed and the payload frames alone
    /// (on a link that drops nothing: a dropped frame takes no corruption draw), not on
    /// how many bare ACKs (a matter of timing) went before it.
    corrupt_rng: StdRng,
    in_flight: BTreeMap<(u64, u64), (Direction, Vec<u8>)>,
    sent_order: u64,
    pcap: Option<PcapRecorder>,
    stats: LinkStats,
}

impl Link {
    pub fn new(config: LinkConfig, pcap: Option<PcapRecorder>) -> Link {
        Link {
            rng: StdRng::seed_from_u64(config.seed),
            corrupt_rng: StdRng::seed_from_u64(!config.seed),
            config,
            in_flight: BTreeMap::new(),
            sent_order: 0,
            pcap,
            stats: LinkStats::default(),
        }
    }

    /// Put `frame` on the wire at `now_ns`.
    pub fn send(&mut self, now_ns: u64, direction: Direction, mut frame: Vec<u8>) {
        self.stats.sent += 1;
        let c = self.config;
        if self.rng.random_bool(c.drop) {
            self.stats.dropped += 1;
            return;
        }
        if c.corrupt > 0.0 && corrupt_payload(&mut frame, c.corrupt, &mut self.corrupt_rng) {
            self.stats.corrupted += 1;
        }
        let copies = if self.rng.random_bool(c.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut delay = c.latency.as_nanos() as u64;
            if c.reorder > 0.0 && self.rng.random_bool(c.reorder) {
                self.stats.reordered += 1;
                delay += self.rng.random_range(0..=c.reorder_delay.as_nanos() as u64);
            }
            self.sent_order += 1;
            self.in_flight.insert(
                (now_ns + delay, self.sent_order),
                (direction, frame.clone()),
            );
        }
    }

    /// Frames that have arrived by `now_ns`, in arrival order; each is written to the pcap.
    pub fn arrived(&mut self, now_ns: u64) -> Vec<(Direction, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(entry) = self.in_flight.first_entry() {
            let (at, _) = *entry.key();
            if at > now_ns {
                break;
            }
            let (direction, frame) = entry.remove();
            if let Some(pcap) = &mut self.pcap {
                // A failing capture must not stop the simulation; the report says how many
                // frames the file holds.
                let _ = pcap.record(Duration::from_nanos(at), &frame);
            }
            self.stats.delivered += 1;
            out.push((direction, frame));
        }
        out
    }

    pub fn idle(&self) -> bool {
        self.in_flight.is_empty()
    }

    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Close the capture; its path and frame count.
    pub fn finish(self) -> Option<(PathBuf, usize)> {
        let pcap = self.pcap?;
        let frames = pcap.frames();
        pcap.finish().ok().map(|path| (path, frames))
    }
}

/// The TCP segment of an Ethernet II / IPv4 frame, in place, and its pseudo-header's
/// addresses; `None` if the frame holds none.
fn tcp_segment(frame: &mut [u8]) -> Option<(TcpPacket<&mut [u8]>, IpAddress, IpAddress)> {
    let ip_bytes = frame.get_mut(14..)?;
    let ip = Ipv4Packet::new_checked(&mut *ip_bytes).ok()?;
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let (header, total) = (usize::from(ip.header_len()), usize::from(ip.total_len()));
    let tcp = TcpPacket::new_checked(ip_bytes.get_mut(header..total)?).ok()?;
    Some((tcp, IpAddress::Ipv4(src), IpAddress::Ipv4(dst)))
}

/// Recompute the TCP checksum of a frame whose segment was altered, so that only what
/// was altered is wrong with it; whether the frame holds a TCP segment.
pub fn refill_tcp_checksum(frame: &mut [u8]) -> bool {
    tcp_segment(frame)
        .map(|(mut tcp, src, dst)| tcp.fill_checksum(&src, &dst))
        .is_some()
}

/// With `probability`, flip one bit of the TCP payload and recompute the TCP checksum;
/// whether it did. A frame without TCP payload takes no draw.
fn corrupt_payload(frame: &mut [u8], probability: f64, rng: &mut StdRng) -> bool {
    let Some((mut tcp, src, dst)) = tcp_segment(frame) else {
        return false;
    };
    let payload = tcp.payload_mut();
    if payload.is_empty() || !rng.random_bool(probability) {
        return false;
    }
    let at = rng.random_range(0..payload.len());
    payload[at] ^= 1 << rng.random_range(0..8);
    tcp.fill_checksum(&src, &dst);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Host, Side, TcpConversation};
    use iwnic_proto::net::TcpFrameRepr;

    /// Sends 200 numbered 32-byte segments A to B, each after `acks_before` bare ACKs from
    /// B, through a link that corrupts; which of the numbered segments arrive altered.
    fn corrupted_segments(acks_before: usize) -> Vec<u8> {
        let host = |ip, port| Host {
            mac: [2, 0, 0, 0, 0, ip],
            ip: [10, 0, 0, ip],
            port,
            isn: 1000,
        };
        let mut tcp = TcpConversation::new(host(1, 4000), host(2, 5000));
        let config = LinkConfig {
            corrupt: 0.05,
            seed: 1,
            ..LinkConfig::default()
        };
        let mut link = Link::new(config, None);
        for number in 0..200u8 {
            for _ in 0..acks_before {
                link.send(0, Direction::BToA, tcp.ack(Side::B));
            }
            link.send(0, Direction::AToB, tcp.data(Side::A, &[number; 32]));
        }
        let mut corrupted = Vec::new();
        for (direction, frame) in link.arrived(u64::MAX) {
            let repr = TcpFrameRepr::parse(&frame).expect("the TCP checksum is recomputed");
            let payload = repr.tcp.payload;
            assert_eq!(direction == Direction::AToB, !payload.is_empty());
            // One byte at most is altered: the middle of the sorted bytes is the number.
            let mut sorted = payload.to_vec();
            sorted.sort_unstable();
            let number = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
            let flipped: u32 = payload.iter().map(|b| (b ^ number).count_ones()).sum();
            match flipped {
                0 => {}
                1 => corrupted.push(number),
                _ => panic!("segment {number}: {flipped} bits flipped, not one"),
            }
        }
        assert_eq!(link.stats().corrupted, corrupted.len() as u64);
        corrupted
    }

    #[test]
    fn corruption_flips_one_payload_bit_of_the_same_segments_whatever_acks_go_between() {
        let alone = corrupted_segments(0);
        assert!((3..=20).contains(&alone.len()), "{alone:?} of 200 at 5%");
        assert_eq!(corrupted_segments(1), alone);
        assert_eq!(corrupted_segments(3), alone);
    }
}
