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
    rng: StdRng,
    in_flight: BTreeMap<(u64, u64), (Direction, Vec<u8>)>,
    sent_order: u64,
    pcap: Option<PcapRecorder>,
    stats: LinkStats,
}

impl Link {
    pub fn new(config: LinkConfig, pcap: Option<PcapRecorder>) -> Link {
        Link {
            rng: StdRng::seed_from_u64(config.seed),
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
        if c.corrupt > 0.0
            && self.rng.random_bool(c.corrupt)
            && corrupt_payload(&mut frame, &mut self.rng)
        {
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

/// Flip one byte of the TCP payload and recompute the TCP checksum; `false` if the frame
/// has no TCP payload.
fn corrupt_payload(frame: &mut [u8], rng: &mut StdRng) -> bool {
    let Some(ip_bytes) = frame.get_mut(14..) else {
        return false;
    };
    let Ok(ip) = Ipv4Packet::new_checked(&mut *ip_bytes) else {
        return false;
    };
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let (header, total) = (usize::from(ip.header_len()), usize::from(ip.total_len()));
    let Some(tcp_bytes) = ip_bytes.get_mut(header..total) else {
        return false;
    };
    let Ok(mut tcp) = TcpPacket::new_checked(tcp_bytes) else {
        return false;
    };
    let payload = tcp.payload_mut();
    if payload.is_empty() {
        return false;
    }
    let at = rng.random_range(0..payload.len());
    payload[at] ^= 1 << rng.random_range(0..8);
    tcp.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
    true
}
