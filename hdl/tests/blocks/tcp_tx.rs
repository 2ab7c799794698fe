//! The TCP segment builder against `iwnic_proto::net::SegmentOut::emit(..,
//! Checksums::Offloaded)`, with and without a SYN's options, and its frames through
//! `smoltcp::wire` once checksums are filled in.

use std::collections::VecDeque;

use iwnic_hdl::tcp_tx::SegmentBuilder;
use iwnic_proto::net::{Checksums, SegmentOut, TxDescriptor, TX_NO_WINDOW_SCALE, TX_SYN_OPTIONS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl,
    TcpPacket, TcpRepr, TcpSeqNumber,
};

use crate::dut::{dut, lockstep, Bench, Timing};
use crate::stream::{beats, kept_bytes, Beat, Sink, Source};

dut! {
    SegmentBuilder, verilated as "tcp_tx",
    inputs {
        reset, desc_src_mac, desc_dst_mac, desc_src_ip, desc_dst_ip, desc_src_port,
        desc_dst_port, desc_seq, desc_ack, desc_flags, desc_window, desc_syn_options,
        desc_mss, desc_window_shift, desc_no_window_scale, desc_payload_len, desc_valid, payload_data, payload_keep, payload_last, payload_valid, frame_ready,
    }
    outputs {
        desc_ready, payload_ready, frame_data, frame_keep, frame_last, frame_valid,
        frames_built,
    }
}

/// One segment to send: the descriptor's fields and the payload.
#[derive(Clone, Debug)]
struct Segment {
    out: SegmentOut,
    payload: Vec<u8>,
}

impl Segment {
    fn random(payload_len: usize, rng: &mut StdRng) -> Segment {
        Segment {
            out: SegmentOut {
                src_mac: rng.gen(),
                dst_mac: rng.gen(),
                src_ip: rng.gen(),
                dst_ip: rng.gen(),
                // Nonzero: smoltcp refuses port 0.
                src_port: rng.gen_range(1..=u16::MAX),
                dst_port: rng.gen_range(1..=u16::MAX),
                // The two controls a data segment or ACK carries.
                control: if rng.gen() {
                    TcpControl::Psh
                } else {
                    TcpControl::None
                },
                seq: rng.gen(),
                ack: Some(rng.gen()),
                window: rng.gen(),
                syn_options: None,
            },
            payload: (0..payload_len).map(|_| rng.gen()).collect(),
        }
    }

    /// A SYN or SYN-ACK with the MSS option and, or not, the window scale option
    /// (smoltcp takes a shift up to 14), and `payload_len` bytes of payload, which the
    /// builder takes as any other.
    fn random_syn(payload_len: usize, rng: &mut StdRng) -> Segment {
        let mut segment = Segment::random(payload_len, rng);
        segment.out.control = TcpControl::Syn;
        segment.out.ack = rng.gen::<bool>().then(|| rng.gen());
        let shift = rng.gen::<bool>().then(|| rng.gen_range(0..=14));
        segment.out.syn_options = Some((rng.gen_range(536..=9000), shift));
        segment
    }

    /// The descriptor ports (valid high), the fields the firmware's TX descriptor gives.
    fn descriptor(&self) -> Inputs {
        let d = TxDescriptor::of_segment(&self.out, self.payload.len() as u16);
        let number = |bytes: &[u8]| bytes.iter().fold(0u64, |n, &b| n << 8 | u64::from(b));
        Inputs {
            desc_src_mac: number(&d.src_mac),
            desc_dst_mac: number(&d.dst_mac),
            desc_src_ip: number(&d.src_ip),
            desc_dst_ip: number(&d.dst_ip),
            desc_src_port: d.src_port.into(),
            desc_dst_port: d.dst_port.into(),
            desc_seq: d.seq.into(),
            desc_ack: d.ack.into(),
            desc_flags: (d.flags & !(TX_SYN_OPTIONS | TX_NO_WINDOW_SCALE)).into(),
            desc_window: d.window.into(),
            desc_syn_options: u64::from(d.flags & TX_SYN_OPTIONS != 0),
            desc_mss: d.mss.into(),
            desc_window_shift: d.window_shift.into(),
            desc_no_window_scale: u64::from(d.flags & TX_NO_WINDOW_SCALE != 0),
            desc_payload_len: d.payload_len.into(),
            desc_valid: 1,
            ..Default::default()
        }
    }

    /// The reference frame, checksums zero, padded to 60 bytes.
    fn expected_frame(&self) -> Vec<u8> {
        let mut frame = vec![0; self.out.buffer_len(self.payload.len())];
        let len = self
            .out
            .emit(&self.payload, &mut frame, Checksums::Offloaded)
            .unwrap();
        assert_eq!(len, frame.len());
        frame
    }

    /// `frame` with both checksums filled in parses with smoltcp (checksums verified) to
    /// this segment.
    fn check_with_smoltcp(&self, frame: &[u8]) {
        let mut frame = frame.to_vec();
        let mut eth = EthernetFrame::new_checked(&mut frame[..]).unwrap();
        assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4);
        let mut ip = Ipv4Packet::new_checked(eth.payload_mut()).unwrap();
        assert_eq!(
            ip.checksum(),
            0,
            "the IPv4 checksum is left to the next block"
        );
        ip.fill_checksum();
        let (src, dst) = (
            IpAddress::Ipv4(ip.src_addr()),
            IpAddress::Ipv4(ip.dst_addr()),
        );
        let mut tcp = TcpPacket::new_checked(ip.payload_mut()).unwrap();
        assert_eq!(
            tcp.checksum(),
            0,
            "the TCP checksum is left to the next block"
        );
        tcp.fill_checksum(&src, &dst);

        let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
        assert_eq!(eth.dst_addr().0, self.out.dst_mac);
        assert_eq!(eth.src_addr().0, self.out.src_mac);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        let caps = ChecksumCapabilities::default();
        let ip_repr = Ipv4Repr::parse(&ip, &caps).unwrap();
        assert_eq!(ip_repr.src_addr.octets(), self.out.src_ip);
        assert_eq!(ip_repr.dst_addr.octets(), self.out.dst_ip);
        assert_eq!(ip_repr.next_header, IpProtocol::Tcp);
        assert_eq!(ip_repr.hop_limit, 64);
        let tcp_header_len = if self.out.syn_options.is_some() {
            28
        } else {
            20
        };
        assert_eq!(ip_repr.payload_len, tcp_header_len + self.payload.len());
        assert!(ip.dont_frag());
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        let tcp_repr = TcpRepr::parse(&tcp, &src, &dst, &caps).unwrap();
        assert_eq!(tcp_repr.src_port, self.out.src_port);
        assert_eq!(tcp_repr.dst_port, self.out.dst_port);
        assert_eq!(tcp_repr.control, self.out.control);
        assert_eq!(tcp_repr.seq_number, TcpSeqNumber(self.out.seq as i32));
        assert_eq!(
            tcp_repr.ack_number,
            self.out.ack.map(|ack| TcpSeqNumber(ack as i32))
        );
        assert_eq!(tcp_repr.window_len, self.out.window);
        let (mss, shift) = self.out.syn_options.unzip();
        assert_eq!(
            (tcp_repr.max_seg_size, tcp_repr.window_scale),
            (mss, shift.flatten())
        );
        assert_eq!(tcp_repr.payload, &self.payload[..]);
    }
}

/// One run between resets: its segments, and optionally the cycle (counted from the end
/// of its reset) at which reset is asserted again, abandoning what is left.
struct Batch {
    segments: Vec<Segment>,
    reset_at: Option<u64>,
}

struct BuilderBench {
    batches: VecDeque<Batch>,
    probabilities: (f64, f64, f64),
    seed: u64,
    reset_cycles: u32,
    cycle: u64,
    reset_at: Option<u64>,
    descriptors: Source<Inputs>,
    payload: Source<Beat>,
    sink: Sink,
    noise: StdRng,
    expected: VecDeque<Segment>,
    /// The bytes of the frame being received.
    frame: Vec<u8>,
    frames: u64,
    /// For each batch cut by reset: the bytes of the frame it cut (0: none).
    cut_at: Vec<usize>,
    /// Cycles with `frame_valid` low after the first beat of a batch.
    bubbles: u64,
    started: bool,
}

impl BuilderBench {
    /// `probabilities`: descriptor idle, payload idle, frame stall.
    fn new(batches: Vec<Batch>, probabilities: (f64, f64, f64), seed: u64) -> Self {
        let mut bench = BuilderBench {
            batches: batches.into(),
            probabilities,
            seed,
            reset_cycles: 0,
            cycle: 0,
            reset_at: None,
            descriptors: Source::new([], 0.0, 0),
            payload: Source::new([], 0.0, 0),
            sink: Sink::new(0.0, 0),
            noise: StdRng::seed_from_u64(seed),
            expected: VecDeque::new(),
            frame: vec![],
            frames: 0,
            cut_at: vec![],
            bubbles: 0,
            started: false,
        };
        bench.next_batch();
        bench
    }

    /// Resets the block for two cycles and starts the next batch.
    fn next_batch(&mut self) {
        let Batch { segments, reset_at } = self.batches.pop_front().unwrap();
        let (desc_idle, payload_idle, stall) = self.probabilities;
        self.seed += 10;
        let mut rng = StdRng::seed_from_u64(self.seed);
        let payload: Vec<Beat> = segments
            .iter()
            .filter(|s| !s.payload.is_empty())
            .flat_map(|s| beats(&s.payload, &mut rng))
            .collect();
        self.descriptors = Source::new(
            segments.iter().map(Segment::descriptor),
            desc_idle,
            self.seed + 1,
        );
        self.payload = Source::new(payload, payload_idle, self.seed + 2);
        self.sink = Sink::new(stall, self.seed + 3);
        self.expected = segments.into();
        self.reset_at = reset_at;
        self.reset_cycles = 2;
        self.cycle = 0;
        self.frame.clear();
        self.frames = 0;
        self.started = false;
    }

    fn done(&self) -> bool {
        self.expected.is_empty() && self.batches.is_empty()
    }
}

impl Bench<Inputs, Outputs> for BuilderBench {
    fn inputs(&mut self) -> Option<Inputs> {
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            return Some(Inputs {
                reset: 1,
                ..Default::default()
            });
        }
        if self.reset_at == Some(self.cycle) {
            self.cut_at.push(self.frame.len());
            self.next_batch();
            return self.inputs();
        }
        if self.expected.is_empty() {
            if self.batches.is_empty() {
                return None;
            }
            self.next_batch();
            return self.inputs();
        }
        self.cycle += 1;
        // Descriptor fields are noise while `desc_valid` is low: the block must not
        // sample them.
        let mut inputs = match self.descriptors.offer() {
            Some(descriptor) => *descriptor,
            None => Inputs {
                desc_src_mac: self.noise.gen::<u64>() >> 16,
                desc_seq: self.noise.gen::<u32>().into(),
                desc_syn_options: self.noise.gen::<bool>().into(),
                desc_no_window_scale: self.noise.gen::<bool>().into(),
                desc_mss: self.noise.gen::<u16>().into(),
                desc_payload_len: self.noise.gen::<u16>().into(),
                ..Default::default()
            },
        };
        if let Some(beat) = self.payload.offer() {
            inputs.payload_data = beat.data;
            inputs.payload_keep = beat.keep.into();
            inputs.payload_last = beat.last.into();
            inputs.payload_valid = 1;
        }
        inputs.frame_ready = self.sink.ready().into();
        Some(inputs)
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        if inputs.reset == 1 {
            assert_eq!(outputs.desc_ready, 0, "desc_ready during reset");
            assert_eq!(outputs.payload_ready, 0, "payload_ready during reset");
            return;
        }
        assert_eq!(outputs.frames_built, self.frames, "frames_built");
        self.descriptors.handshake(outputs.desc_ready == 1);
        self.payload.handshake(outputs.payload_ready == 1);
        if outputs.frame_valid == 0 {
            self.bubbles += u64::from(self.started);
            return;
        }
        self.started = true;
        if inputs.frame_ready == 0 {
            return;
        }
        let beat = Beat {
            data: outputs.frame_data,
            keep: outputs.frame_keep as u8,
            last: outputs.frame_last == 1,
        };
        let bytes = kept_bytes(&beat);
        assert_eq!(
            beat.data.to_le_bytes()[bytes.len()..]
                .iter()
                .max()
                .copied()
                .unwrap_or(0),
            0,
            "bytes outside frame_keep are zero: {beat:x?}"
        );
        if !beat.last {
            assert_eq!(beat.keep, 0xFF, "a partial beat before the last: {beat:x?}");
        }
        self.frame.extend(bytes);
        if beat.last {
            let segment = self.expected.pop_front().expect("a frame too many");
            assert_eq!(
                self.frame,
                segment.expected_frame(),
                "frame {} ({} payload bytes)",
                self.frames,
                segment.payload.len()
            );
            segment.check_with_smoltcp(&self.frame);
            self.frame.clear();
            self.frames += 1;
        }
    }
}

fn run(batches: Vec<Batch>, probabilities: (f64, f64, f64), seed: u64) -> (Timing, BuilderBench) {
    let mut bench = BuilderBench::new(batches, probabilities, seed);
    let timing = lockstep(
        &mut RustHdl::new(SegmentBuilder::default()),
        &mut Verilated::new(SegmentBuilder::default()),
        &mut bench,
    );
    assert!(bench.done());
    (timing, bench)
}

fn segments(lengths: impl IntoIterator<Item = usize>, seed: u64) -> Vec<Segment> {
    let mut rng = StdRng::seed_from_u64(seed);
    lengths
        .into_iter()
        .map(|len| Segment::random(len, &mut rng))
        .collect()
}

/// Segments of `lengths`, each with the SYN options or without at random (about half).
fn mixed_segments(lengths: impl IntoIterator<Item = usize>, seed: u64) -> Vec<Segment> {
    let mut rng = StdRng::seed_from_u64(seed);
    lengths
        .into_iter()
        .map(|len| {
            if rng.gen() {
                Segment::random_syn(len, &mut rng)
            } else {
                Segment::random(len, &mut rng)
            }
        })
        .collect()
}

fn one_batch(segments: Vec<Segment>) -> Vec<Batch> {
    vec![Batch {
        segments,
        reset_at: None,
    }]
}

/// Output beats of a frame with `len` payload bytes, with or without the SYN options.
fn frame_beats(len: usize, syn_options: bool) -> u64 {
    let headers = if syn_options { 62 } else { 54 };
    (headers + len).max(60).div_ceil(8) as u64
}

/// The layout tests' segment: distinct bytes in every header field, so each shows where
/// it lands.
fn layout_segment(
    control: TcpControl,
    syn_options: Option<(u16, Option<u8>)>,
    payload: &[u8],
) -> Segment {
    Segment {
        out: SegmentOut {
            src_mac: [0x02, 0, 0, 0, 0, 0x0A],
            dst_mac: [0x02, 0, 0, 0, 0, 0x0B],
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            src_port: 0x1234,
            dst_port: 0x5678,
            control,
            seq: 0x0102_0304,
            ack: Some(0x0506_0708),
            window: 0xFFFF,
            syn_options,
        },
        payload: payload.to_vec(),
    }
}

/// The reference puts the header fields where the module docs' beat map says.
#[test]
fn tcp_tx_reference_layout() {
    let segment = layout_segment(TcpControl::Psh, None, b"hi");
    let mut expected = vec![];
    expected.extend([0x02, 0, 0, 0, 0, 0x0B, 0x02, 0, 0, 0, 0, 0x0A, 0x08, 0x00]);
    expected.extend([
        0x45, 0, 0, 42, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    expected.extend([0x12, 0x34, 0x56, 0x78, 1, 2, 3, 4, 5, 6, 7, 8, 0x50, 0x18]);
    expected.extend([0xFF, 0xFF, 0, 0, 0, 0, b'h', b'i', 0, 0, 0, 0]);
    assert_eq!(segment.expected_frame(), expected);
    run(one_batch(vec![segment]), (0.0, 0.0, 0.0), 1);
}

/// Payloads of 0 to 80 bytes: no payload, the padded frames (1..5 bytes), and every
/// length mod 8 with and without a body several times over; then full-size ones.
#[test]
fn tcp_tx_every_short_length_under_random_stalls() {
    let lengths: Vec<usize> = (0..=80).chain(1450..=1460).collect();
    under_three_stall_settings(
        |seed| segments(lengths.clone(), seed),
        100,
        "payloads 0-80 and 1450-1460 bytes",
    );
}

/// One batch from `make(seed)` without stalls, with light ones on every side and with
/// heavy, uneven ones; each run's timing reported under `what`.
fn under_three_stall_settings(make: impl Fn(u64) -> Vec<Segment>, seed_base: u64, what: &str) {
    for (i, probabilities) in [(0.0, 0.0, 0.0), (0.3, 0.3, 0.3), (0.5, 0.1, 0.6)]
        .into_iter()
        .enumerate()
    {
        let seed = seed_base + 10 * i as u64;
        let (timing, _) = run(one_batch(make(seed)), probabilities, seed);
        timing.report(&format!("tcp_tx, {what}, stalls {probabilities:?}"));
    }
}

#[test]
fn tcp_tx_random_segments_under_random_stalls() {
    let mut rng = StdRng::seed_from_u64(0x7C9);
    for (i, probabilities) in [
        (0.0, 0.0, 0.0),
        (0.2, 0.2, 0.2),
        (0.0, 0.5, 0.0),
        (0.6, 0.0, 0.1),
        (0.1, 0.1, 0.7),
    ]
    .into_iter()
    .enumerate()
    {
        let lengths: Vec<usize> = (0..20)
            .map(|_| match rng.gen_range(0..4) {
                0 => rng.gen_range(0..8),
                1 => rng.gen_range(8..64),
                _ => rng.gen_range(64..=1460),
            })
            .collect();
        let seed = 200 + 10 * i as u64;
        let (timing, _) = run(one_batch(segments(lengths, seed)), probabilities, seed);
        timing.report(&format!(
            "tcp_tx, 20 random segments, stalls {probabilities:?}"
        ));
    }
}

/// With descriptors and payload always waiting and the output always ready, the output
/// carries a beat on every cycle from the first to the last, across frames: no idle
/// cycle between frames. The first beat leaves 2 cycles after its descriptor is taken.
#[test]
fn tcp_tx_back_to_back_exact_cycles() {
    let lengths: Vec<usize> = (0..=20).chain([0, 0, 1, 1460, 0, 1459, 7, 8, 9]).collect();
    let beats: u64 = lengths.iter().map(|&len| frame_beats(len, false)).sum();
    let (timing, bench) = run(
        one_batch(segments(lengths.clone(), 300)),
        (0.0, 0.0, 0.0),
        300,
    );
    assert_eq!(bench.bubbles, 0, "idle cycles between or within frames");
    // Two reset cycles; the first descriptor is taken on the next cycle, its beat 0 is
    // built on the one after and is on the output the cycle after that; then one beat
    // per cycle.
    assert_eq!(timing.cycles, 2 + 2 + beats);
    println!(
        "tcp_tx back to back: {} frames, {beats} beats in {} cycles",
        lengths.len(),
        timing.cycles
    );
}

/// Reset with a frame partly out (in its header, its body, and while its tail beat is
/// being built): the frame is dropped, the counter cleared, and the frames after reset
/// are whole.
#[test]
fn tcp_tx_reset_mid_frame() {
    // Without stalls, frame `k`'s beat `i` is received on cycle 3 + (beats before it) + i
    // of its batch; frame 1 here (150 payload bytes, 26 beats, the last a tail beat
    // after the last payload beat) on cycles 11..=36. Reset after cycle 11 (beat 0 out),
    // 20 (10 beats out) and 34 (24 beats out, the tail beat being built).
    let cut = |reset_at: u64, seed: u64| Batch {
        segments: segments([3, 150, 40], seed),
        reset_at: Some(reset_at),
    };
    let batches = vec![
        cut(11, 400),
        cut(20, 401),
        cut(10 + frame_beats(150, false) - 2, 402),
        Batch {
            segments: segments([0, 9, 1000], 403),
            reset_at: None,
        },
    ];
    let (_, bench) = run(batches, (0.0, 0.0, 0.0), 400);
    assert_eq!(
        bench.cut_at,
        [8, 80, 192],
        "bytes of frame 1 out before reset"
    );

    // Under stalls, reset at random points of random batches.
    let mut rng = StdRng::seed_from_u64(0x4E5);
    let batches = (0..6)
        .map(|i| Batch {
            segments: segments(
                (0..4).map(|_| rng.gen_range(0..200)).collect::<Vec<_>>(),
                410 + i,
            ),
            reset_at: (i < 5).then(|| rng.gen_range(1..60)),
        })
        .collect();
    run(batches, (0.3, 0.3, 0.3), 410);
}

/// The reference puts the SYN options where the module docs' beat map says: beat 6 ends
/// with the MSS option's kind and length, beat 7 is the rest and the first 2 payload
/// bytes.
#[test]
fn tcp_tx_syn_options_reference_layout() {
    let syn_ack =
        |payload: &[u8], shift| layout_segment(TcpControl::Syn, Some((0x05B4, shift)), payload);
    let expected = |total_len: u8, options: [u8; 4], payload: &[u8]| {
        let mut frame = vec![];
        frame.extend([0x02, 0, 0, 0, 0, 0x0B, 0x02, 0, 0, 0, 0, 0x0A, 0x08, 0x00]);
        frame.extend([
            0x45, 0, 0, total_len, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        frame.extend([0x12, 0x34, 0x56, 0x78, 1, 2, 3, 4, 5, 6, 7, 8, 0x70, 0x12]);
        frame.extend([0xFF, 0xFF, 0, 0, 0, 0, 2, 4, 0x05, 0xB4]);
        frame.extend(options);
        frame.extend(payload);
        frame
    };
    // 62 bytes without payload: no padding. Without the window scale, end of list and
    // padding in its place.
    let (scaled, unscaled) = ([3, 3, 7, 0], [0; 4]);
    assert_eq!(
        syn_ack(b"", Some(7)).expected_frame(),
        expected(48, scaled, b"")
    );
    assert_eq!(
        syn_ack(b"hi!", Some(7)).expected_frame(),
        expected(51, scaled, b"hi!")
    );
    assert_eq!(
        syn_ack(b"hi!", None).expected_frame(),
        expected(51, unscaled, b"hi!")
    );
    // The beats' byte counts: the last is 6 bytes; 2 payload bytes end beat 7; a third
    // makes a tail beat.
    run(
        one_batch(vec![
            syn_ack(b"", Some(7)),
            syn_ack(b"hi", Some(7)),
            syn_ack(b"hi!", Some(7)),
            syn_ack(b"hi!", None),
        ]),
        (0.0, 0.0, 0.0),
        2,
    );
}

/// Segments with and without the SYN options mixed, payloads 0 to 40 bytes (every
/// length mod 8 around the join) and full-size ones, under stalls on every side.
#[test]
fn tcp_tx_syn_options_under_random_stalls() {
    let lengths: Vec<usize> = (0..=40).chain(1450..=1460).chain(0..=40).collect();
    under_three_stall_settings(
        |seed| mixed_segments(lengths.clone(), seed),
        500,
        "SYN options mixed in",
    );
}

/// The options cost no cycle beyond their 8 bytes: back to back, with and without them
/// mixed, the output still carries a beat on every cycle.
#[test]
fn tcp_tx_syn_options_back_to_back_exact_cycles() {
    let lengths: Vec<usize> = (0..=20).chain([0, 0, 1, 1460, 0, 1459, 7, 8, 9]).collect();
    let segments = mixed_segments(lengths, 600);
    let beats: u64 = segments
        .iter()
        .map(|s| frame_beats(s.payload.len(), s.out.syn_options.is_some()))
        .sum();
    assert!(segments.iter().any(|s| s.out.syn_options.is_some()));
    assert!(segments.iter().any(|s| s.out.syn_options.is_none()));
    let (timing, bench) = run(one_batch(segments), (0.0, 0.0, 0.0), 600);
    assert_eq!(bench.bubbles, 0, "idle cycles between or within frames");
    assert_eq!(timing.cycles, 2 + 2 + beats);
}

#[test]
fn tcp_tx_lints_clean() {
    use rust_hdl::prelude::*;
    let mut uut = SegmentBuilder::default();
    uut.connect_all();
    iwnic_hdl::verilator::lint(
        &generate_verilog(&uut),
        &crate::dut::work_dir().join("lint-tcp_tx"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
