//! TCP frames through smoltcp: checksums, IPv4 options, padding, and refusals.

use iwnic_proto::net::{FrameError, TcpFrameRepr, DEFAULT_TTL};
use iwnic_proto::smoltcp_wire::{EthernetAddress, Ipv4Address, TcpControl, TcpRepr, TcpSeqNumber};

fn syn() -> TcpFrameRepr<'static> {
    TcpFrameRepr {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        src_ip: Ipv4Address::new(10, 0, 0, 1),
        dst_ip: Ipv4Address::new(10, 0, 0, 2),
        ttl: DEFAULT_TTL,
        tcp: TcpRepr {
            src_port: 40000,
            dst_port: 4791,
            control: TcpControl::Syn,
            seq_number: TcpSeqNumber(1000),
            ack_number: None,
            window_len: 65535,
            window_scale: Some(7),
            max_seg_size: Some(1460),
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        },
    }
}

fn emit(repr: &TcpFrameRepr) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf).unwrap();
    buf
}

#[test]
fn short_frames_are_padded_and_parse_back() {
    let ack = TcpFrameRepr {
        tcp: TcpRepr {
            control: TcpControl::None,
            ack_number: Some(TcpSeqNumber(1)),
            window_scale: None,
            max_seg_size: None,
            ..syn().tcp
        },
        ..syn()
    };
    let wire = emit(&ack);
    assert_eq!(wire.len(), 60, "14 + 20 + 20 bytes, padded");
    assert_eq!(TcpFrameRepr::parse(&wire), Ok(ack));
    let wire = emit(&syn());
    assert_eq!(wire.len(), 62, "MSS and window scale options");
    assert_eq!(TcpFrameRepr::parse(&wire), Ok(syn()));
}

#[test]
fn checksum_errors_are_told_apart() {
    let wire = emit(&syn());
    let mut bad_ip = wire.clone();
    bad_ip[14 + 8] ^= 1; // TTL: covered by the IPv4 header checksum only
    assert_eq!(TcpFrameRepr::parse(&bad_ip), Err(FrameError::BadChecksum));
    let mut bad_tcp = wire.clone();
    bad_tcp[14 + 20 + 4] ^= 1; // sequence number
    assert_eq!(TcpFrameRepr::parse(&bad_tcp), Err(FrameError::BadChecksum));
}

#[test]
fn ipv4_options_are_skipped() {
    let payload = b"MPA";
    let repr = TcpFrameRepr {
        tcp: TcpRepr {
            payload,
            control: TcpControl::Psh,
            ..syn().tcp
        },
        ..syn()
    };
    let wire = emit(&repr);
    // Insert a 4-byte NOP option block into the IPv4 header and fix lengths and checksum.
    let mut with_options = wire[..34].to_vec();
    with_options.extend_from_slice(&[1, 1, 1, 0]);
    with_options.extend_from_slice(&wire[34..]);
    let ip = &mut with_options[14..];
    ip[0] = 0x46;
    let total = u16::from_be_bytes([ip[2], ip[3]]) + 4;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[10..12].fill(0);
    let sum = ip[..24]
        .chunks(2)
        .fold(0u32, |s, w| s + u32::from(u16::from_be_bytes([w[0], w[1]])));
    let sum = !((sum & 0xFFFF) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    assert_eq!(TcpFrameRepr::parse(&with_options), Ok(repr));
}

#[test]
fn what_is_not_tcp_or_not_whole() {
    let wire = emit(&syn());
    let mut arp = wire.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(TcpFrameRepr::parse(&arp), Err(FrameError::NotTcp));
    assert_eq!(TcpFrameRepr::parse(&wire[..40]), Err(FrameError::Malformed));
    // IPv4 total length beyond the frame.
    let mut long = wire.clone();
    long[16..18].copy_from_slice(&1000u16.to_be_bytes());
    assert_eq!(TcpFrameRepr::parse(&long), Err(FrameError::Malformed));
}

#[test]
fn offloaded_checksums_are_left_to_the_datapath() {
    use iwnic_proto::net::Checksums;
    let repr = syn();
    let mut wire = vec![0u8; repr.buffer_len()];
    repr.emit_with(&mut wire, Checksums::Offloaded).unwrap();
    assert_eq!(&wire[24..26], &[0, 0], "IPv4 checksum left zero");
    assert_eq!(&wire[50..52], &[0, 0], "TCP checksum left zero");
    assert_eq!(TcpFrameRepr::parse(&wire), Err(FrameError::BadChecksum));
    assert_eq!(
        TcpFrameRepr::parse_with(&wire, Checksums::Offloaded),
        Ok(repr)
    );
}
