//! The receive parser against `iwnic_proto::net::TcpSegment::parse` on frames emitted by
//! `TcpFrameRepr::emit` (smoltcp), valid and broken in every way the parser checks.

use std::collections::VecDeque;

use iwnic_hdl::tcp_rx::{TcpRxParser, MAX_FRAME_LEN};
use iwnic_proto::net::{Checksums, FrameError, TcpFrameRepr, TcpSegment};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smoltcp::wire::{EthernetAddress, Ipv4Address, Ipv4Packet, TcpControl, TcpRepr, TcpSeqNumber};

use crate::dut::{dut, lockstep, Bench, Timing};
use crate::stream::{beats, kept_bytes, Beat, Sink, Source};

dut! {
    TcpRxParser, verilated as "tcp_rx",
    inputs { reset, frame_data, frame_keep, frame_last, frame_valid, payload_ready }
    outputs {
        frame_ready, payload_data, payload_keep, payload_last, payload_good, payload_valid,
        seg_src_ip, seg_dst_ip, seg_src_port, seg_dst_port, seg_seq, seg_ack, seg_flags,
        seg_window, seg_payload_len,
        frames_accepted, dropped_oversized, dropped_malformed, dropped_not_tcp,
        dropped_bad_checksum, frame_unseen,
    }
}

/// The header fields the parser reports, as the reference sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Segment {
    src_ip: u64,
    dst_ip: u64,
    src_port: u64,
    dst_port: u64,
    seq: u64,
    /// `None` when the ACK flag is clear (the field is then not compared).
    ack: Option<u64>,
    flags: u64,
    window: u64,
    payload: Vec<u8>,
}

impl Segment {
    fn of(reference: &TcpSegment) -> Segment {
        let control = match reference.control {
            TcpControl::None => 0,
            TcpControl::Psh => 0x08,
            TcpControl::Rst => 0x04,
            TcpControl::Syn => 0x02,
            TcpControl::Fin => 0x01,
        };
        Segment {
            src_ip: u32::from_be_bytes(reference.src_ip).into(),
            dst_ip: u32::from_be_bytes(reference.dst_ip).into(),
            src_port: reference.src_port.into(),
            dst_port: reference.dst_port.into(),
            seq: reference.seq.into(),
            ack: reference.ack.map(u64::from),
            flags: control | if reference.ack.is_some() { 0x10 } else { 0 },
            window: reference.window.into(),
            payload: reference.payload.to_vec(),
        }
    }

    fn from_ports(o: &Outputs, payload: Vec<u8>) -> Segment {
        Segment {
            src_ip: o.seg_src_ip,
            dst_ip: o.seg_dst_ip,
            src_port: o.seg_src_port,
            dst_port: o.seg_dst_port,
            seq: o.seg_seq,
            ack: (o.seg_flags & 0x10 != 0).then_some(o.seg_ack),
            flags: o.seg_flags,
            window: o.seg_window,
            payload,
        }
    }
}

/// Frame counts by outcome, in the order of the parser's counter ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    accepted: u64,
    oversized: u64,
    malformed: u64,
    not_tcp: u64,
    bad_checksum: u64,
}

/// The reference's outcome for `frame`, with the parser's own length limit first.
fn expected_outcome(frame: &[u8], counts: &mut Counts) -> Option<Segment> {
    if frame.len() > MAX_FRAME_LEN as usize {
        counts.oversized += 1;
        return None;
    }
    match TcpSegment::parse(frame, Checksums::Software) {
        Ok(segment) => {
            counts.accepted += 1;
            Some(Segment::of(&segment))
        }
        Err(FrameError::Malformed) => {
            counts.malformed += 1;
            None
        }
        Err(FrameError::NotTcp) => {
            counts.not_tcp += 1;
            None
        }
        Err(FrameError::BadChecksum) => {
            counts.bad_checksum += 1;
            None
        }
    }
}

/// Feeds frames; checks each good packet against the reference and the counters at
/// the end. Packets ending with `payload_good` low are collected and thrown away, as
/// the frame buffer after the parser would.
struct RxBench {
    reset_cycles: u32,
    source: Source<Beat>,
    sink: Sink,
    expected: VecDeque<Segment>,
    expected_counts: Counts,
    /// The packet being received and the header fields on its first beat.
    packet: Vec<u8>,
    packet_fields: Option<Outputs>,
    bad_packets: usize,
    /// `frame_unseen` pulses: frames dropped without a packet.
    unseen: usize,
    /// Cycles in which a frame beat was offered and not taken.
    refused: usize,
    /// Cycles to run after the last input beat, for the last verdict to be counted.
    drain_cycles: u32,
    last_outputs: Outputs,
}

impl RxBench {
    fn new(frames: &[Vec<u8>], idle_probability: f64, stall_probability: f64, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut expected_counts = Counts::default();
        let expected = frames
            .iter()
            .filter_map(|f| expected_outcome(f, &mut expected_counts))
            .collect();
        RxBench {
            reset_cycles: 2,
            source: Source::new(
                frames.iter().flat_map(|f| beats(f, &mut rng)),
                idle_probability,
                seed + 1,
            ),
            sink: Sink::new(stall_probability, seed + 2),
            expected,
            expected_counts,
            packet: vec![],
            packet_fields: None,
            bad_packets: 0,
            unseen: 0,
            refused: 0,
            drain_cycles: 4,
            last_outputs: Outputs::default(),
        }
    }

    fn counts(&self) -> Counts {
        let o = &self.last_outputs;
        Counts {
            accepted: o.frames_accepted,
            oversized: o.dropped_oversized,
            malformed: o.dropped_malformed,
            not_tcp: o.dropped_not_tcp,
            bad_checksum: o.dropped_bad_checksum,
        }
    }
}

impl Bench<Inputs, Outputs> for RxBench {
    fn inputs(&mut self) -> Option<Inputs> {
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            return Some(Inputs {
                reset: 1,
                ..Default::default()
            });
        }
        if self.source.is_empty() && self.expected.is_empty() {
            if self.drain_cycles == 0 {
                return None;
            }
            self.drain_cycles -= 1;
        }
        let payload_ready = u64::from(self.sink.ready());
        Some(match self.source.offer() {
            Some(beat) => Inputs {
                reset: 0,
                frame_data: beat.data,
                frame_keep: beat.keep.into(),
                frame_last: beat.last.into(),
                frame_valid: 1,
                payload_ready,
            },
            None => Inputs {
                payload_ready,
                ..Default::default()
            },
        })
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        self.last_outputs = *outputs;
        if inputs.reset == 1 {
            assert_eq!(outputs.frame_ready, 0, "frame_ready during reset");
            return;
        }
        self.source.handshake(outputs.frame_ready == 1);
        self.refused += usize::from(inputs.frame_valid == 1 && outputs.frame_ready == 0);
        self.unseen += outputs.frame_unseen as usize;
        if outputs.payload_valid == 0 || inputs.payload_ready == 0 {
            return;
        }
        let beat = Beat {
            data: outputs.payload_data,
            keep: outputs.payload_keep as u8,
            last: outputs.payload_last == 1,
        };
        if !beat.last {
            assert_eq!(beat.keep, 0xFF, "a partial beat before the last");
        }
        let fields = *self.packet_fields.get_or_insert(*outputs);
        let held = Segment::from_ports(&fields, vec![]) == Segment::from_ports(outputs, vec![]);
        assert!(held, "header fields changed within a packet");
        self.packet.extend(kept_bytes(&beat));
        if beat.last {
            let payload = std::mem::take(&mut self.packet);
            self.packet_fields = None;
            if outputs.payload_good == 0 {
                self.bad_packets += 1;
                return;
            }
            assert_eq!(outputs.seg_payload_len as usize, payload.len());
            let expected = self.expected.pop_front().expect("a good packet too many");
            assert_eq!(Segment::from_ports(&fields, payload), expected);
        }
    }
}

fn run(
    frames: &[Vec<u8>],
    idle_probability: f64,
    stall_probability: f64,
    seed: u64,
) -> (Timing, RxBench) {
    let mut bench = RxBench::new(frames, idle_probability, stall_probability, seed);
    let timing = lockstep(
        &mut RustHdl::new(TcpRxParser::default()),
        &mut Verilated::new(TcpRxParser::default()),
        &mut bench,
    );
    assert!(bench.source.is_empty() && bench.expected.is_empty());
    assert_eq!(bench.counts(), bench.expected_counts);
    // Every frame's fate shows exactly once: a good packet, a bad one, or `frame_unseen`.
    assert_eq!(
        bench.expected_counts.accepted as usize + bench.bad_packets + bench.unseen,
        frames.len()
    );
    (timing, bench)
}

/// A valid frame: random addresses, ports, numbers and flags, TCP options on SYNs,
/// `payload_len` random bytes.
fn frame(rng: &mut StdRng, payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len).map(|_| rng.gen()).collect();
    let control = [
        TcpControl::None,
        TcpControl::Psh,
        TcpControl::Syn,
        TcpControl::Fin,
        TcpControl::Rst,
    ][rng.gen_range(0..5)];
    let syn = control == TcpControl::Syn;
    let repr = TcpFrameRepr {
        src_mac: EthernetAddress(rng.gen()),
        dst_mac: EthernetAddress(rng.gen()),
        src_ip: Ipv4Address::from(rng.gen::<[u8; 4]>()),
        dst_ip: Ipv4Address::from(rng.gen::<[u8; 4]>()),
        ttl: 64,
        tcp: TcpRepr {
            src_port: rng.gen_range(1..=u16::MAX),
            dst_port: rng.gen_range(1..=u16::MAX),
            control,
            seq_number: TcpSeqNumber(rng.gen()),
            ack_number: rng.gen_bool(0.8).then(|| TcpSeqNumber(rng.gen())),
            window_len: rng.gen(),
            window_scale: (syn && rng.gen()).then(|| rng.gen_range(0..=14)),
            max_seg_size: (syn && rng.gen()).then(|| rng.gen()),
            sack_permitted: syn && rng.gen(),
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &payload,
        },
    };
    let mut frame = vec![0; repr.buffer_len()];
    repr.emit(&mut frame).unwrap();
    frame
}

const IP: usize = 14;

/// Recomputes the IPv4 header checksum after an edit.
fn refill_ip_checksum(frame: &mut [u8]) {
    Ipv4Packet::new_unchecked(&mut frame[IP..]).fill_checksum();
}

/// Inserts `words` 4-byte words of IPv4 options (NOPs) and fixes the header.
fn with_ip_options(mut frame: Vec<u8>, words: usize) -> Vec<u8> {
    let header_len = usize::from(frame[IP] & 0x0F) * 4;
    let at = IP + header_len;
    frame.splice(at..at, std::iter::repeat_n(1u8, 4 * words));
    frame[IP] += words as u8;
    let total = u16::from_be_bytes([frame[IP + 2], frame[IP + 3]]) + 4 * words as u16;
    frame[IP + 2..IP + 4].copy_from_slice(&total.to_be_bytes());
    refill_ip_checksum(&mut frame);
    frame
}

fn tcp_start(frame: &[u8]) -> usize {
    IP + usize::from(frame[IP] & 0x0F) * 4
}

/// Ways to break a valid frame, each caught by a different check.
fn broken(rng: &mut StdRng, mut frame: Vec<u8>, how: usize) -> Vec<u8> {
    match how {
        0 => frame[IP + 10] ^= 1 << rng.gen_range(0..8), // IPv4 header checksum
        1 => {
            // The TCP checksum, or a payload byte under it.
            let at = rng.gen_range(tcp_start(&frame) + 16..frame.len());
            frame[at] ^= 1 << rng.gen_range(0..8);
        }
        2 => frame.truncate(rng.gen_range(1..frame.len())),
        3 => frame[12..14].copy_from_slice(&[0x08, 0x06]), // ARP
        4 => {
            frame[IP + 9] = 17; // UDP
            refill_ip_checksum(&mut frame);
        }
        5 => {
            frame[IP + 6] |= 0x20; // more fragments
            refill_ip_checksum(&mut frame);
        }
        6 => {
            frame[IP + 7] = rng.gen_range(1..=255); // a fragment offset
            refill_ip_checksum(&mut frame);
        }
        7 => {
            frame[IP] = 0x40 | rng.gen_range(0..5); // IHL < 5
            refill_ip_checksum(&mut frame);
        }
        8 => {
            let at = tcp_start(&frame) + 12; // data offset < 5
            frame[at] = rng.gen_range(0..5) << 4;
        }
        9 => {
            // A total length beyond the frame.
            let total = u16::from_be_bytes([frame[IP + 2], frame[IP + 3]]);
            let grown = total + rng.gen_range(1..100);
            frame[IP + 2..IP + 4].copy_from_slice(&grown.to_be_bytes());
            refill_ip_checksum(&mut frame);
        }
        10 => frame[IP] = 0x65, // version 6
        _ => unreachable!(),
    }
    frame
}

/// A mix: valid frames (some with IPv4 options, some with extra Ethernet padding),
/// oversized ones, and each way of breaking one.
fn mixed_frames(rng: &mut StdRng, count: usize, max_payload: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| {
            let len = rng.gen_range(0..=max_payload);
            let mut f = frame(rng, len);
            if rng.gen_bool(0.3) {
                f = with_ip_options(f, rng.gen_range(1..=10));
            }
            match rng.gen_range(0..20) {
                0..=7 => f,
                8 => {
                    f.extend((0..rng.gen_range(1..20)).map(|_| rng.gen::<u8>()));
                    f
                }
                9 => {
                    let len = rng.gen_range(1465..=1600);
                    frame(rng, len)
                }
                how => broken(rng, f, how - 10),
            }
        })
        .collect()
}

/// Frames of every payload length 0..=40 with 0..=3 words of IPv4 options: every way
/// the payload can sit against the beats, and every header alignment.
#[test]
fn tcp_rx_every_alignment() {
    let mut rng = StdRng::seed_from_u64(0x7C90);
    let frames: Vec<Vec<u8>> = (0..=40)
        .flat_map(|len| (0..4).map(move |words| (len, words)))
        .map(|(len, words)| with_ip_options(frame(&mut rng, len), words))
        .collect();
    let (_, bench) = run(&frames, 0.0, 0.0, 20);
    assert_eq!(bench.expected_counts.accepted, frames.len() as u64);
    run(&frames, 0.4, 0.4, 21);
}

/// Frames back to back with the output always read: every beat is taken in the cycle it
/// is offered, with no idle cycle between frames (the verdict stages run while the next
/// frame comes in), whatever the mix of good, late-failed and unseen frames.
#[test]
fn tcp_rx_takes_a_beat_every_cycle() {
    let mut rng = StdRng::seed_from_u64(0xB2B);
    let frames = mixed_frames(&mut rng, 100, 200);
    let (_, bench) = run(&frames, 0.0, 0.0, 24);
    assert_eq!(bench.refused, 0);
}

#[test]
fn tcp_rx_drops_and_counts_every_kind_of_bad_frame() {
    let mut rng = StdRng::seed_from_u64(0xBAD);
    let mut frames = vec![];
    for how in 0..11 {
        for _ in 0..6 {
            let len = rng.gen_range(0..100);
            let f = frame(&mut rng, len);
            frames.push(broken(&mut rng, f, how));
        }
    }
    for _ in 0..4 {
        let len = rng.gen_range(1465..=2000);
        frames.push(frame(&mut rng, len));
    }
    let (_, bench) = run(&frames, 0.2, 0.2, 22);
    let counts = bench.expected_counts;
    assert!(
        counts.malformed > 0
            && counts.not_tcp > 0
            && counts.bad_checksum > 0
            && counts.oversized == 4,
        "{counts:?}"
    );
}

#[test]
fn tcp_rx_random_frames_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0x1518);
    let frames = mixed_frames(&mut rng, 200, 1460);
    let (timing, bench) = run(&frames, 0.3, 0.3, 23);
    timing.report(&format!(
        "tcp_rx, 200 mixed frames ({:?}, {} late-failed packets), 30% idle, 30% stall",
        bench.expected_counts, bench.bad_packets
    ));
}
