//! Property tests: no parser panics on arbitrary bytes, and emit → parse is the identity
//! for every Repr.

use iwnic_proto::ddp::{
    Body, HeaderRepr, Layer, MessageRepr, Opcode, Placement, ReadRequestRepr, TerminateRepr,
};
use iwnic_proto::fpdu::{FpduRepr, SplitEvent, Splitter};
use iwnic_proto::host::*;
use iwnic_proto::mpa::{FrameKind, FrameRepr, RtrTypes, V2Block};
use iwnic_proto::net::TcpFrameRepr;
use iwnic_proto::smoltcp_wire::{EthernetAddress, Ipv4Address, TcpControl, TcpRepr, TcpSeqNumber};
use proptest::collection::vec;
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_parser_panics(data in bytes(700)) {
        let _ = FrameRepr::parse_bytes(&data);
        let _ = FpduRepr::parse(&data);
        let _ = MessageRepr::parse(&data);
        let _ = TerminateRepr::parse(&data);
        let _ = Record::parse(&data);
        let _ = Record::record_len(&data);
        let _ = CommandRecord::parse(&data);
        let _ = Completion::parse(&data);
        let _ = Event::parse(&data);
        let _ = TcpFrameRepr::parse(&data);
    }

    #[test]
    fn no_parser_panics_on_nearly_valid_records(seed in any::<u32>(), flips in vec((0usize..600, any::<u8>()), 1..4)) {
        // Random bytes rarely get past the header checks; mutate valid records instead.
        let pd = vec![seed as u8; (seed % 513) as usize];
        let record = Record::Event(Event {
            seq: seed, kind: EventKind::Close, conn: 1, listener: 0, status: 0,
            local: Endpoint::v4([1, 2, 3, 4], 5), remote: Endpoint::v4([5, 6, 7, 8], 9),
            ird: 1, ord: 1, rtr: RtrTypes::NONE, private_data: &pd,
        });
        let mut wire = vec![0u8; record.buffer_len()];
        record.emit(&mut wire).unwrap();
        for (at, v) in flips {
            if let Some(b) = wire.get_mut(at) { *b = v; }
        }
        let _ = Record::parse(&wire);
        let _ = FrameRepr::parse_bytes(&wire);
    }

    #[test]
    fn splitter_never_panics(data in bytes(600), cuts in vec(0usize..600, 0..8), max in any::<u16>()) {
        let mut splitter = Splitter::new(max);
        let mut cuts = cuts;
        cuts.sort();
        let mut at = 0;
        for cut in cuts.into_iter().chain([data.len()]) {
            let cut = cut.min(data.len()).max(at);
            let _ = splitter.push(&data[at..cut], |_| ());
            at = cut;
        }
    }

    #[test]
    fn mpa_frame_round_trips(repr in mpa_frame(), pd in bytes(512)) {
        let room = 512 - if repr.v2.is_some() { 4 } else { 0 };
        let repr = FrameRepr { private_data: &pd[..pd.len().min(room)], ..repr };
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut buf), Ok(buf.len()));
        prop_assert_eq!(FrameRepr::parse_bytes(&buf), Ok(repr));
    }

    #[test]
    fn fpdu_stream_splits_back_at_random_cuts(ulpdus in vec(bytes(4000), 1..6), cuts in vec(any::<prop::sample::Index>(), 0..12)) {
        let mut stream = Vec::new();
        for u in &ulpdus {
            let repr = FpduRepr { ulpdu: u };
            let mut buf = vec![0u8; repr.buffer_len()];
            prop_assert_eq!(repr.emit(&mut buf), Ok(buf.len()));
            prop_assert_eq!(FpduRepr::parse(&buf), Ok(repr));
            stream.extend_from_slice(&buf);
        }
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        cuts.sort();
        let mut splitter = Splitter::new(u16::MAX);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([stream.len()]) {
            splitter.push(&stream[at..cut], |e| match e {
                SplitEvent::Start { ulpdu_len } => got.push(Vec::with_capacity(ulpdu_len.into())),
                SplitEvent::Data(d) => got.last_mut().unwrap().extend_from_slice(d),
                SplitEvent::End => {}
            }).unwrap();
            at = cut;
        }
        prop_assert!(splitter.at_boundary());
        prop_assert_eq!(got, ulpdus);
    }

    #[test]
    fn ddp_message_round_trips(repr in message(), payload in bytes(64), copies in bytes(40)) {
        let repr = match repr.body {
            Body::Payload(_) => MessageRepr { body: Body::Payload(&payload), ..repr },
            Body::Terminate(t) => MessageRepr { body: Body::Terminate(TerminateRepr { copies: &copies, ..t }), ..repr },
            Body::ReadRequest(_) => repr,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut buf), Ok(buf.len()));
        prop_assert_eq!(MessageRepr::parse(&buf), Ok(repr));
    }

    /// The RTR check's shortcut says what a full parse says, on valid messages mutated.
    #[test]
    fn rtr_type_of_agrees_with_the_full_parse(repr in message(), rtr in 0usize..6, payload in bytes(4), flips in vec((0usize..48, any::<u8>()), 0..3), cut in 0usize..48) {
        // Half the time a real RTR, so mutations start from messages that pass.
        let repr = match (rtr, repr.body) {
            (0..=2, _) => MessageRepr::rtr([RtrTypes::SEND, RtrTypes::WRITE, RtrTypes::READ][rtr]).unwrap(),
            (_, Body::Payload(_)) => MessageRepr { body: Body::Payload(&payload), ..repr },
            _ => repr,
        };
        let mut ulpdu = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ulpdu).unwrap();
        for (at, v) in flips {
            if let Some(b) = ulpdu.get_mut(at) { *b = v; }
        }
        for bytes in [&ulpdu[..], &ulpdu[..cut.min(ulpdu.len())]] {
            let full = MessageRepr::parse(bytes).ok().and_then(|m| m.rtr_type());
            prop_assert_eq!(MessageRepr::rtr_type_of(bytes), full);
        }
    }

    #[test]
    fn command_round_trips(tag in any::<u32>(), command in command(), pd in bytes(512)) {
        let command = match command {
            Command::Connect { local, remote, ird, ord, qpn, mpa_v1, .. } =>
                Command::Connect { local, remote, ird, ord, qpn, mpa_v1, private_data: &pd },
            Command::Accept { conn, ird, ord, qpn, .. } => Command::Accept { conn, ird, ord, qpn, private_data: &pd },
            Command::Reject { conn, .. } => Command::Reject { conn, private_data: &pd },
            other => other,
        };
        let record = Record::Command(CommandRecord { tag, command });
        let mut buf = vec![0u8; record.buffer_len()];
        prop_assert_eq!(record.emit(&mut buf), Ok(buf.len()));
        prop_assert_eq!(Record::parse(&buf), Ok(record));
    }

    /// A mutated command parses only if it is canonical: emitting what was parsed gives
    /// back exactly its bytes (unused fields and flags 0, lengths consistent).
    #[test]
    fn commands_parse_only_in_canonical_form(tag in any::<u32>(), command in command(), pd in bytes(16), flips in vec((0usize..80, any::<u8>()), 0..3), grow in 0usize..3) {
        let command = match command {
            Command::Accept { conn, ird, ord, qpn, .. } => Command::Accept { conn, ird, ord, qpn, private_data: &pd },
            other => other,
        };
        let record = CommandRecord { tag, command };
        let mut wire = vec![0u8; record.buffer_len()];
        record.emit(&mut wire).unwrap();
        // Zero bytes of private data appended, both lengths kept consistent: canonical
        // only for commands that carry private data.
        if grow > 0 {
            wire.resize(wire.len() + grow, 0);
            let pd_len = wire.len() - 64;
            let len = wire.len() as u16;
            wire[2..4].copy_from_slice(&len.to_le_bytes());
            wire[60..62].copy_from_slice(&(pd_len as u16).to_le_bytes());
        }
        for (at, v) in flips {
            if let Some(b) = wire.get_mut(at) { *b = v; }
        }
        if let Ok(parsed) = CommandRecord::parse(&wire) {
            let mut again = vec![0u8; parsed.buffer_len()];
            prop_assert_eq!(parsed.emit(&mut again), Ok(wire.len()));
            prop_assert_eq!(again, wire);
        }
    }

    #[test]
    fn completion_round_trips(tag in any::<u32>(), status in i32::MIN..=0, handle in any::<u32>()) {
        let record = Record::Completion(Completion { tag, status, handle });
        let mut buf = vec![0u8; record.buffer_len()];
        prop_assert_eq!(record.emit(&mut buf), Ok(buf.len()));
        prop_assert_eq!(Record::parse(&buf), Ok(record));
    }

    #[test]
    fn event_round_trips(
        seq in any::<u32>(), kind in 1u8..=5, conn in any::<u32>(), listener in any::<u32>(),
        status in i32::MIN..=0, local in endpoint(), remote in endpoint(),
        ird in any::<u16>(), ord in any::<u16>(), rtr in 0usize..4, pd in bytes(512),
    ) {
        let kind = EventKind::from_u8(kind).unwrap();
        // An RTR only where one may be named: CONNECT_REPLY 0 and ESTABLISHED.
        let names_rtr = kind == EventKind::Established || (kind == EventKind::ConnectReply && status == 0);
        let rtr = match RtrTypes::EACH.get(rtr) {
            Some(&one) if names_rtr => one,
            _ => RtrTypes::NONE,
        };
        let record = Record::Event(Event { seq, kind, conn, listener, status, local, remote, ird, ord, rtr, private_data: &pd });
        let mut buf = vec![0u8; record.buffer_len()];
        prop_assert_eq!(record.emit(&mut buf), Ok(buf.len()));
        prop_assert_eq!(Record::parse(&buf), Ok(record));
    }

    #[test]
    fn tcp_frame_round_trips(repr in tcp_frame(), payload in bytes(1460)) {
        let mut repr = repr;
        repr.tcp.payload = &payload;
        let mut buf = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit(&mut buf), Ok(buf.len()));
        prop_assert!(buf.len() >= 60);
        prop_assert_eq!(TcpFrameRepr::parse(&buf), Ok(repr));
    }
}

fn rtr_types() -> impl Strategy<Value = RtrTypes> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(send, write, read)| RtrTypes {
        send,
        write,
        read,
    })
}

fn mpa_frame() -> impl Strategy<Value = FrameRepr<'static>> {
    let v2 = (any::<bool>(), rtr_types(), 0u16..0x4000, 0u16..0x4000).prop_map(
        |(peer_to_peer, rtr, ird, ord)| V2Block {
            peer_to_peer,
            rtr,
            ird,
            ord,
        },
    );
    let kind = prop_oneof![
        Just(FrameKind::Request),
        Just(FrameKind::Accept),
        Just(FrameKind::Reject)
    ];
    (
        kind,
        any::<bool>(),
        any::<bool>(),
        prop::option::of(v2),
        any::<bool>(),
    )
        .prop_map(|(kind, markers, crc, v2, rev1)| FrameRepr {
            kind,
            markers,
            crc,
            revision: if rev1 && v2.is_none() { 1 } else { 2 },
            v2,
            private_data: &[],
        })
}

fn message() -> impl Strategy<Value = MessageRepr<'static>> {
    (
        0u8..8,
        any::<bool>(),
        any::<[u32; 4]>(),
        any::<u64>(),
        any::<[u64; 2]>(),
        0u8..3,
        0u8..16,
        any::<u8>(),
        any::<[bool; 3]>(),
    )
        .prop_map(|(op, last, w, to, tos, layer, etype, code, hdrct)| {
            let opcode = Opcode::from_u8(op).unwrap();
            let placement = if opcode.is_tagged() {
                Placement::Tagged { stag: w[0], to }
            } else {
                Placement::Untagged {
                    inv_stag: w[0],
                    qn: w[1],
                    msn: w[2],
                    mo: w[3],
                }
            };
            let body = match opcode {
                Opcode::ReadRequest => Body::ReadRequest(ReadRequestRepr {
                    sink_stag: w[1],
                    sink_to: tos[0],
                    size: w[2],
                    source_stag: w[3],
                    source_to: tos[1],
                }),
                Opcode::Terminate => Body::Terminate(TerminateRepr {
                    layer: [Layer::Rdmap, Layer::Ddp, Layer::Llp][usize::from(layer)],
                    etype,
                    code,
                    segment_length_valid: hdrct[0],
                    ddp_header_included: hdrct[1],
                    rdmap_header_included: hdrct[2],
                    copies: &[],
                }),
                _ => Body::Payload(&[]),
            };
            MessageRepr {
                header: HeaderRepr {
                    last,
                    opcode,
                    placement,
                },
                body,
            }
        })
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, port)| Endpoint {
            addr: IpAddr::V4(a),
            port
        }),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(a, port)| Endpoint {
            addr: IpAddr::V6(a),
            port
        }),
    ]
}

fn command() -> impl Strategy<Value = Command<'static>> {
    (
        0u8..8,
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        endpoint(),
        endpoint(),
        any::<bool>(),
    )
        .prop_map(|(kind, h, ird, ord, arg, local, remote, flag)| match kind {
            0 => Command::Listen {
                local,
                backlog: arg,
            },
            1 => Command::Unlisten { listener: h },
            2 => Command::Connect {
                local,
                remote,
                ird,
                ord,
                qpn: arg,
                mpa_v1: flag,
                private_data: &[],
            },
            3 => Command::Accept {
                conn: h,
                ird,
                ord,
                qpn: arg,
                private_data: &[],
            },
            4 => Command::Reject {
                conn: h,
                private_data: &[],
            },
            5 => Command::Disconnect {
                conn: h,
                abrupt: flag,
            },
            6 => Command::Release { conn: h },
            _ => Command::Delivered { conn: h },
        })
}

fn tcp_frame() -> impl Strategy<Value = TcpFrameRepr<'static>> {
    let control = prop_oneof![
        Just(TcpControl::None),
        Just(TcpControl::Psh),
        Just(TcpControl::Syn),
        Just(TcpControl::Fin),
        Just(TcpControl::Rst)
    ];
    (
        any::<[[u8; 6]; 2]>(),
        any::<[[u8; 4]; 2]>(),
        1u16..,
        1u16..,
        control,
        any::<i32>(),
        prop::option::of(any::<i32>()),
        any::<u16>(),
        prop::option::of(0u8..=14),
        prop::option::of(any::<u16>()),
        1u8..,
    )
        .prop_map(
            |(
                macs,
                ips,
                src_port,
                dst_port,
                control,
                seq,
                ack,
                window_len,
                window_scale,
                max_seg_size,
                ttl,
            )| {
                TcpFrameRepr {
                    src_mac: EthernetAddress(macs[0]),
                    dst_mac: EthernetAddress(macs[1]),
                    src_ip: Ipv4Address::from(ips[0]),
                    dst_ip: Ipv4Address::from(ips[1]),
                    ttl,
                    tcp: TcpRepr {
                        src_port,
                        dst_port,
                        control,
                        seq_number: TcpSeqNumber(seq),
                        ack_number: ack.map(TcpSeqNumber),
                        window_len,
                        window_scale,
                        max_seg_size,
                        sack_permitted: false,
                        sack_ranges: [None; 3],
                        timestamp: None,
                        payload: &[],
                    },
                }
            },
        )
}

mod fast_path {
    use super::*;
    use iwnic_proto::net::{
        Checksums, RxDescriptor, SegmentOut, TcpSegment, TxDescriptor, RX_DESCRIPTOR_LEN,
    };

    fn out_of(repr: &TcpFrameRepr) -> SegmentOut {
        SegmentOut {
            src_mac: repr.src_mac.0,
            dst_mac: repr.dst_mac.0,
            src_ip: repr.src_ip.octets(),
            dst_ip: repr.dst_ip.octets(),
            src_port: repr.tcp.src_port,
            dst_port: repr.tcp.dst_port,
            control: repr.tcp.control,
            seq: repr.tcp.seq_number.0 as u32,
            ack: repr.tcp.ack_number.map(|a| a.0 as u32),
            window: repr.tcp.window_len,
            syn_options: repr
                .tcp
                .max_seg_size
                .zip(repr.tcp.window_scale)
                .map(|(mss, shift)| (mss, Some(shift))),
        }
    }

    /// Make both checksums of an edited frame good again, as far as its IPv4 header
    /// still locates them.
    fn refill_checksums(frame: &mut [u8]) {
        use iwnic_proto::smoltcp_wire::{IpAddress, Ipv4Packet, TcpPacket};
        let Some(bytes) = frame.get_mut(14..) else {
            return;
        };
        let Ok(mut ip) = Ipv4Packet::new_checked(bytes) else {
            return;
        };
        ip.fill_checksum();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let (header, total) = (usize::from(ip.header_len()), usize::from(ip.total_len()));
        if let Some(tcp) = ip.into_inner().get_mut(header..total) {
            if tcp.len() >= 20 {
                TcpPacket::new_unchecked(tcp)
                    .fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// SegmentOut writes the bytes TcpFrameRepr writes, and TcpSegment reads back what
        /// TcpFrameRepr reads.
        #[test]
        fn agrees_with_the_full_representation(repr in tcp_frame(), payload in bytes(600), with_options in any::<bool>(), offload in any::<bool>()) {
            let checksums = if offload { Checksums::Offloaded } else { Checksums::Software };
            let mut repr = repr;
            repr.tcp.payload = &payload;
            if !with_options {
                repr.tcp.max_seg_size = None;
                repr.tcp.window_scale = None;
            } else {
                repr.tcp.max_seg_size.get_or_insert(1460);
                repr.tcp.window_scale.get_or_insert(7);
            }
            repr.ttl = iwnic_proto::net::DEFAULT_TTL;
            let out = out_of(&repr);
            // A used buffer, as a queue slot is: every byte of the frame must be written.
            let mut fast = vec![0xA5u8; out.buffer_len(payload.len())];
            prop_assert_eq!(out.emit(&payload, &mut fast, checksums), Ok(fast.len()));
            let mut full = vec![0u8; repr.buffer_len()];
            prop_assert_eq!(repr.emit_with(&mut full, checksums), Ok(full.len()));
            prop_assert_eq!(&fast, &full);
            let seg = TcpSegment::parse(&fast, checksums).unwrap();
            prop_assert_eq!((seg.src_port, seg.dst_port, seg.control, seg.window), (repr.tcp.src_port, repr.tcp.dst_port, repr.tcp.control, repr.tcp.window_len));
            prop_assert_eq!((seg.seq, seg.ack), (out.seq, out.ack));
            prop_assert_eq!((seg.max_seg_size, seg.window_scale), (repr.tcp.max_seg_size, repr.tcp.window_scale));
            prop_assert_eq!(seg.payload, &payload[..]);
        }

        #[test]
        fn reads_options_as_the_full_representation_does(options in any::<[u8; 8]>(), base in tcp_frame()) {
            let mut base = base;
            base.tcp.max_seg_size = Some(1460);
            base.tcp.window_scale = Some(7);
            let mut frame = vec![0u8; base.buffer_len()];
            base.emit(&mut frame).unwrap();
            frame[54..62].copy_from_slice(&options); // the 8 option bytes after the fixed header
            let fast = TcpSegment::parse(&frame, Checksums::Offloaded).map(|s| (s.max_seg_size, s.window_scale));
            let full = TcpFrameRepr::parse_with(&frame, Checksums::Offloaded).map(|r| (r.tcp.max_seg_size, r.tcp.window_scale));
            prop_assert_eq!(fast, full);
        }

        /// A segment's transmit descriptor survives its bytes and gives back the segment,
        /// and the frame the datapath builds from it is the segment's own.
        #[test]
        fn a_transmit_descriptor_builds_its_segment(repr in tcp_frame(), payload in bytes(600), with_options in any::<bool>()) {
            let mut repr = repr;
            repr.tcp.payload = &payload;
            if with_options {
                repr.tcp.max_seg_size.get_or_insert(1460);
                repr.tcp.window_scale.get_or_insert(7);
            } else {
                repr.tcp.max_seg_size = None;
                repr.tcp.window_scale = None;
            }
            let out = out_of(&repr);
            let d = TxDescriptor::of_segment(&out, payload.len() as u16);
            prop_assert_eq!(TxDescriptor::from_bytes(&d.to_bytes()), d);
            prop_assert_eq!(d.segment(), Some(out));
            let mut built = vec![0x5Au8; out.buffer_len(payload.len())];
            let mut direct = built.clone();
            prop_assert_eq!(d.frame(&payload, &mut built, Checksums::Offloaded), out.emit(&payload, &mut direct, Checksums::Offloaded));
            prop_assert_eq!(built, direct);
        }

        /// The descriptor the datapath puts ahead of a frame it accepts survives its bytes,
        /// and the firmware reads from it the segment the frame's own parse gives; a frame
        /// the datapath drops is one the parse refuses for the same reason. The flips aim
        /// at the TCP header and options too, with the checksums made good again after
        /// them, so zero ports, flag combinations and bad options reach the reader.
        #[test]
        fn a_descriptor_reads_as_its_frame(flips in proptest::collection::vec((0usize..120, any::<u8>()), 0..3), tcp_flips in proptest::collection::vec((34usize..62, any::<u8>()), 0..3), refill in any::<bool>(), base in tcp_frame(), payload in bytes(80), with_options in any::<bool>()) {
            let mut base = base;
            base.tcp.payload = &payload;
            if with_options {
                base.tcp.max_seg_size.get_or_insert(1460);
            }
            let mut frame = vec![0u8; base.buffer_len()];
            base.emit(&mut frame).unwrap();
            for (at, v) in flips.into_iter().chain(tcp_flips) {
                if let Some(b) = frame.get_mut(at) { *b = v; }
            }
            if refill {
                refill_checksums(&mut frame);
            }
            match RxDescriptor::of_frame(&frame) {
                Ok(d) => {
                    prop_assert_eq!(RxDescriptor::from_bytes(&d.to_bytes()), d);
                    for checksums in [Checksums::Software, Checksums::Offloaded] {
                        prop_assert_eq!(TcpSegment::from_descriptor(&d, &frame, checksums), TcpSegment::parse(&frame, checksums));
                    }
                }
                Err(dropped) => prop_assert_eq!(TcpSegment::parse(&frame, Checksums::Software), Err(dropped)),
            }
        }

        /// Whatever the descriptor and the frame, reading them refuses or succeeds: no
        /// index beyond the frame, no panic.
        #[test]
        fn any_descriptor_with_any_frame_is_read_safely(descriptor in any::<[u8; RX_DESCRIPTOR_LEN]>(), frame in bytes(120), base in tcp_frame()) {
            let mut valid = vec![0u8; base.buffer_len()];
            base.emit(&mut valid).unwrap();
            let d = RxDescriptor::from_bytes(&descriptor);
            for bytes in [&frame[..], &valid[..]] {
                for checksums in [Checksums::Software, Checksums::Offloaded] {
                    if let Ok(seg) = TcpSegment::from_descriptor(&d, bytes, checksums) {
                        prop_assert_eq!(seg.payload.len(), usize::from(d.payload_len));
                    }
                }
            }
        }

        #[test]
        fn refuses_what_the_full_representation_refuses(data in bytes(120), flips in proptest::collection::vec((0usize..120, any::<u8>()), 0..4), base in tcp_frame()) {
            // Mutated valid frames reach far deeper than random bytes.
            let mut frame = vec![0u8; base.buffer_len()];
            base.emit(&mut frame).unwrap();
            for (at, v) in flips {
                if let Some(b) = frame.get_mut(at) { *b = v; }
            }
            for bytes in [&data[..], &frame[..]] {
                for checksums in [Checksums::Software, Checksums::Offloaded] {
                    let fast = TcpSegment::parse(bytes, checksums)
                        .map(|s| (s.seq, s.ack, s.control, s.payload.len(), s.max_seg_size, s.window_scale));
                    let full = TcpFrameRepr::parse_with(bytes, checksums).map(|r| {
                        let t = r.tcp;
                        (t.seq_number.0 as u32, t.ack_number.map(|a| a.0 as u32), t.control, t.payload.len(), t.max_seg_size, t.window_scale)
                    });
                    prop_assert_eq!(fast, full);
                }
            }
        }
    }
}
