//! Ethernet II / IPv4 / TCP frames for the firmware's control segments and the
//! testbench's peers: [`TcpFrameRepr`] parses and emits through `smoltcp::wire`;
//! [`TcpSegment`] and [`SegmentOut`] read and write the headers at constant offsets, held
//! to it by property tests, and leave the checksums to `smoltcp`. Between the firmware
//! and the datapath, headers travel as descriptors: [`RxDescriptor`] (the parser's
//! fields ahead of a received frame, read by [`TcpSegment::from_descriptor`]) and
//! [`TxDescriptor`] (a segment to send, from which the datapath builds the frame).

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, IpAddress, IpProtocol,
    Ipv4Address, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, ETHERNET_HEADER_LEN,
    IPV4_HEADER_LEN,
};

use crate::bytes::FixedFields;
use crate::{Error, Result};

/// Shortest Ethernet frame without FCS; shorter frames are padded with zeros.
pub const MIN_FRAME_LEN: usize = 60;
/// Default time to live of emitted IPv4 packets.
pub const DEFAULT_TTL: u8 = 64;

/// Who computes the IPv4 and TCP checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checksums {
    /// This code verifies them on receive and fills them in on transmit.
    #[default]
    Software,
    /// The datapath does: received frames were verified before they got here, and
    /// frames written here leave with the fields zero for the datapath to fill.
    Offloaded,
}

impl Checksums {
    fn caps(self) -> ChecksumCapabilities {
        match self {
            Checksums::Software => ChecksumCapabilities::default(),
            Checksums::Offloaded => ChecksumCapabilities::ignored(),
        }
    }
}

/// The TCP segment of a frame, with the addresses around it, checked as far as both
/// parsers need: Ethernet II, unfragmented IPv4 (options allowed), lengths, checksums
/// when they are ours to check. It refuses exactly what `smoltcp`'s `new_checked`
/// views refuse; the fields are read at constant offsets of fixed-size arrays, one bounds
/// check per header. Inlined into both parsers, so the firmware's parse never builds it.
struct Located<'a> {
    /// Addresses where they lie in the frame.
    src_mac: &'a [u8; 6],
    dst_mac: &'a [u8; 6],
    src_ip: &'a [u8; 4],
    dst_ip: &'a [u8; 4],
    ttl: u8,
    /// The TCP header without options.
    tcp_header: &'a [u8; TCP_HEADER_LEN],
    /// The TCP segment, its header included.
    tcp: &'a [u8],
    /// Its header length, options included (at least 20, at most `tcp.len()`).
    tcp_header_len: usize,
}

const TCP_HEADER_LEN: usize = 20;
// TCP flag bits (byte 13 of the header), as descriptors carry them.
pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

#[inline]
fn locate_tcp(frame: &[u8], checksums: Checksums) -> core::result::Result<Located<'_>, FrameError> {
    use FrameError::{BadChecksum, Malformed, NotTcp};
    let (eth, packet) = frame
        .split_first_chunk::<ETHERNET_HEADER_LEN>()
        .ok_or(Malformed)?;
    if eth[12..14] != [0x08, 0x00] {
        return Err(NotTcp);
    }
    let (ip, _) = packet
        .split_first_chunk::<IPV4_HEADER_LEN>()
        .ok_or(Malformed)?;
    let ip_header_len = usize::from(ip[0] & 0x0F) * 4;
    let total_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if ip_header_len < IPV4_HEADER_LEN || ip_header_len > total_len || total_len > packet.len() {
        return Err(Malformed);
    }
    let more_fragments = ip[6] & 0x20 != 0;
    let fragment_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1FFF;
    if ip[0] >> 4 != 4 || more_fragments || fragment_offset != 0 {
        return Err(NotTcp);
    }
    let verify = checksums == Checksums::Software;
    if verify && !Ipv4Packet::new_unchecked(&packet[..total_len]).verify_checksum() {
        return Err(BadChecksum);
    }
    if ip[9] != u8::from(IpProtocol::Tcp) {
        return Err(NotTcp);
    }
    let tcp = &packet[ip_header_len..total_len];
    let (tcp_header, _) = tcp.split_first_chunk::<TCP_HEADER_LEN>().ok_or(Malformed)?;
    let tcp_header_len = usize::from(tcp_header[12] >> 4) * 4;
    if tcp_header_len < TCP_HEADER_LEN || tcp_header_len > tcp.len() {
        return Err(Malformed);
    }
    let located = Located {
        src_mac: field(eth, 6)?,
        dst_mac: field(eth, 0)?,
        src_ip: field(ip, 12)?,
        dst_ip: field(ip, 16)?,
        ttl: ip[8],
        tcp_header,
        tcp,
        tcp_header_len,
    };
    if verify {
        let src = IpAddress::Ipv4(Ipv4Address::from(*located.src_ip));
        let dst = IpAddress::Ipv4(Ipv4Address::from(*located.dst_ip));
        if !TcpPacket::new_unchecked(tcp).verify_checksum(&src, &dst) {
            return Err(BadChecksum);
        }
    }
    Ok(located)
}

/// The `N` bytes at `at` of a fixed-size header, in place. Only constant ranges inside
/// the header are asked for, so the error is never returned (and compiled away).
fn field<const N: usize>(header: &[u8], at: usize) -> core::result::Result<&[u8; N], FrameError> {
    header
        .get(at..at + N)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or(FrameError::Malformed)
}

/// One TCP segment in an Ethernet II frame over IPv4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpFrameRepr<'a> {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub src_ip: Ipv4Address,
    pub dst_ip: Ipv4Address,
    pub ttl: u8,
    pub tcp: TcpRepr<'a>,
}

/// Why a frame is not a TCP segment for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Not IPv4, not TCP, or an IPv4 fragment: valid, but not ours to parse.
    NotTcp,
    /// IPv4 header or TCP checksum wrong.
    BadChecksum,
    /// Lengths that do not fit, or TCP flags smoltcp refuses (SYN with FIN…).
    Malformed,
}

impl<'a> TcpFrameRepr<'a> {
    /// Parse a frame, verifying the IPv4 header checksum and the TCP checksum. IPv4
    /// options are allowed; Ethernet padding past the IPv4 total length is ignored.
    pub fn parse(frame: &'a [u8]) -> core::result::Result<TcpFrameRepr<'a>, FrameError> {
        Self::parse_with(frame, Checksums::Software)
    }

    /// [`TcpFrameRepr::parse`], with checksums verified only if `checksums` says so.
    pub fn parse_with(
        frame: &'a [u8],
        checksums: Checksums,
    ) -> core::result::Result<TcpFrameRepr<'a>, FrameError> {
        let located = locate_tcp(frame, checksums)?;
        let (src_ip, dst_ip) = (
            Ipv4Address::from(*located.src_ip),
            Ipv4Address::from(*located.dst_ip),
        );
        let tcp_repr = TcpRepr::parse(
            &TcpPacket::new_unchecked(located.tcp),
            &IpAddress::Ipv4(src_ip),
            &IpAddress::Ipv4(dst_ip),
            &ChecksumCapabilities::ignored(),
        )
        .map_err(|_| FrameError::Malformed)?;
        Ok(TcpFrameRepr {
            src_mac: EthernetAddress(*located.src_mac),
            dst_mac: EthernetAddress(*located.dst_mac),
            src_ip,
            dst_ip,
            ttl: located.ttl,
            tcp: tcp_repr,
        })
    }

    /// Bytes of the emitted frame (padding to 60 bytes included).
    pub fn buffer_len(&self) -> usize {
        (ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + self.tcp.buffer_len()).max(MIN_FRAME_LEN)
    }

    /// Write the frame with both checksums filled in; returns its length.
    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        self.emit_with(buffer, Checksums::Software)
    }

    /// [`TcpFrameRepr::emit`], with checksums filled in or left zero as `checksums` says.
    pub fn emit_with(&self, buffer: &mut [u8], checksums: Checksums) -> Result<usize> {
        let len = self.buffer_len();
        let tcp_len = self.tcp.buffer_len();
        if IPV4_HEADER_LEN + tcp_len > usize::from(u16::MAX) {
            return Err(Error::Malformed);
        }
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        out.fill(0);
        let caps = checksums.caps();
        let mut eth = EthernetFrame::new_unchecked(&mut *out);
        EthernetRepr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype: EthernetProtocol::Ipv4,
        }
        .emit(&mut eth);
        let ip_repr = Ipv4Repr {
            src_addr: self.src_ip,
            dst_addr: self.dst_ip,
            next_header: IpProtocol::Tcp,
            payload_len: tcp_len,
            hop_limit: self.ttl,
        };
        let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
        ip_repr.emit(&mut ip, &caps);
        let mut tcp = TcpPacket::new_unchecked(&mut ip.payload_mut()[..tcp_len]);
        self.tcp.emit(
            &mut tcp,
            &IpAddress::Ipv4(self.src_ip),
            &IpAddress::Ipv4(self.dst_ip),
            &caps,
        );
        Ok(len)
    }
}

/// A TCP segment read in place: the fields the connection path acts on, with TCP options
/// parsed only when asked for. The firmware reads it from a frame's descriptor
/// ([`TcpSegment::from_descriptor`]); [`TcpSegment::parse`] reads it from the frame alone,
/// accepting and refusing exactly what [`TcpFrameRepr::parse_with`] does (a property
/// test holds them together; [`TcpFrameRepr`] is the full representation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    /// The MAC address where it lies in the frame: the firmware copies it only when it
    /// keeps it.
    pub src_mac: &'a [u8; 6],
    /// The addresses by value: read from a descriptor, each is one aligned word.
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: Option<u32>,
    pub control: TcpControl,
    pub window: u16,
    /// The MSS option.
    pub max_seg_size: Option<u16>,
    /// The window scale option, limited to 14 (RFC 7323 §2.3).
    pub window_scale: Option<u8>,
    pub payload: &'a [u8],
}

/// Walk TCP options by kind and length, without building an option value for each:
/// the MSS and window scale (the last of each, as `TcpRepr` keeps), or `Err` for the
/// options `smoltcp`'s `TcpOption::parse` refuses. Inlined into its one caller, which
/// keeps the results in registers (measured in the firmware: −56 instructions a setup).
#[inline(always)]
fn scan_options(mut options: &[u8]) -> core::result::Result<(Option<u16>, Option<u8>), ()> {
    const END: u8 = 0;
    const NOP: u8 = 1;
    const MSS: u8 = 2;
    const WS: u8 = 3;
    const SACK_PERMITTED: u8 = 4;
    const SACK: u8 = 5;
    let (mut mss, mut ws) = (None, None);
    while let Some(&kind) = options.first() {
        let len = match kind {
            END => break,
            NOP => 1,
            _ => {
                let len = usize::from(*options.get(1).ok_or(())?);
                let data = options.get(2..len).ok_or(())?;
                match (kind, len) {
                    (MSS, 4) => mss = Some(u16::from_be_bytes([data[0], data[1]])),
                    (WS, 3) => ws = Some(data[0].min(14)),
                    (SACK_PERMITTED, 2) => {}
                    (MSS | WS | SACK_PERMITTED, _) => return Err(()),
                    (SACK, n) if n < 10 || (n - 2) % 8 != 0 => return Err(()),
                    _ => {}
                }
                len
            }
        };
        options = &options[len..];
    }
    Ok((mss, ws))
}

/// The control a segment's flags give, as smoltcp reads them: one of SYN, FIN, RST (PSH
/// ignored beside it), else PSH or nothing; two of SYN, FIN and RST are refused.
#[inline]
fn control_of(flags: u8) -> core::result::Result<TcpControl, FrameError> {
    Ok(match (flags & (SYN | FIN | RST), flags & PSH != 0) {
        (0, false) => TcpControl::None,
        (0, true) => TcpControl::Psh,
        (SYN, _) => TcpControl::Syn,
        (FIN, _) => TcpControl::Fin,
        (RST, _) => TcpControl::Rst,
        _ => return Err(FrameError::Malformed),
    })
}

impl<'a> TcpSegment<'a> {
    /// Inlined, so the segment is built where the caller keeps it, not copied there.
    #[inline]
    pub fn parse(
        frame: &'a [u8],
        checksums: Checksums,
    ) -> core::result::Result<TcpSegment<'a>, FrameError> {
        let located = locate_tcp(frame, checksums)?;
        let h = located.tcp_header;
        let (src_port, dst_port) = (
            u16::from_be_bytes([h[0], h[1]]),
            u16::from_be_bytes([h[2], h[3]]),
        );
        if src_port == 0 || dst_port == 0 {
            return Err(FrameError::Malformed);
        }
        let flags = h[13];
        let control = control_of(flags)?;
        // Only SYNs carry options here; the other segments skip the call.
        let (max_seg_size, window_scale) = match located.tcp_header_len {
            TCP_HEADER_LEN => (None, None),
            end => scan_options(&located.tcp[TCP_HEADER_LEN..end])
                .map_err(|_| FrameError::Malformed)?,
        };
        Ok(TcpSegment {
            src_mac: located.src_mac,
            src_ip: *located.src_ip,
            dst_ip: *located.dst_ip,
            src_port,
            dst_port,
            seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            ack: (flags & ACK != 0).then_some(u32::from_be_bytes([h[8], h[9], h[10], h[11]])),
            control,
            window: u16::from_be_bytes([h[14], h[15]]),
            max_seg_size,
            window_scale,
            payload: &located.tcp[located.tcp_header_len..],
        })
    }

    /// The segment of a frame the datapath steered to the firmware, read from its
    /// [`RxDescriptor`]: the header fields as the datapath read them, the payload (and a
    /// SYN's options) where they lie in the frame. It checks what the datapath leaves to
    /// software — zero ports, flag combinations, options — and the checksums if
    /// `checksums` says they are ours. A descriptor that does not fit its frame gets
    /// [`FrameError::Malformed`], never a read out of bounds. For a frame the datapath
    /// accepts it gives what [`TcpSegment::parse`] gives (a property test holds them).
    ///
    /// Always inlined into its caller, the firmware's frame handler: out of line, the
    /// segment is returned through memory and copied (about 140 RISC-V instructions a
    /// frame), and whether LLVM inlines it otherwise depends on how many firmware
    /// instances the program holds.
    #[inline(always)]
    pub fn from_descriptor(
        d: &'a RxDescriptor,
        frame: &'a [u8],
        checksums: Checksums,
    ) -> core::result::Result<TcpSegment<'a>, FrameError> {
        use FrameError::{BadChecksum, Malformed};
        let (eth, packet) = frame
            .split_first_chunk::<ETHERNET_HEADER_LEN>()
            .ok_or(Malformed)?;
        let ip = packet.first_chunk::<IPV4_HEADER_LEN>().ok_or(Malformed)?;
        let ip_header_len = usize::from(ip[0] & 0x0F) * 4;
        let total_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let ip_packet = packet.get(..total_len).ok_or(Malformed)?;
        let tcp = ip_packet.get(ip_header_len..).ok_or(Malformed)?;
        let payload_at = tcp
            .len()
            .checked_sub(usize::from(d.payload_len))
            .filter(|&at| at >= TCP_HEADER_LEN)
            .ok_or(Malformed)?;
        if checksums == Checksums::Software {
            let (src, dst) = (
                IpAddress::Ipv4(Ipv4Address::from(d.src_ip)),
                IpAddress::Ipv4(Ipv4Address::from(d.dst_ip)),
            );
            if ip_header_len < IPV4_HEADER_LEN
                || !Ipv4Packet::new_unchecked(ip_packet).verify_checksum()
                || !TcpPacket::new_unchecked(tcp).verify_checksum(&src, &dst)
            {
                return Err(BadChecksum);
            }
        }
        if d.src_port == 0 || d.dst_port == 0 {
            return Err(Malformed);
        }
        let (max_seg_size, window_scale) = match payload_at {
            TCP_HEADER_LEN => (None, None),
            end => scan_options(&tcp[TCP_HEADER_LEN..end]).map_err(|_| Malformed)?,
        };
        Ok(TcpSegment {
            src_mac: field(eth, 6)?,
            src_ip: d.src_ip,
            dst_ip: d.dst_ip,
            src_port: d.src_port,
            dst_port: d.dst_port,
            seq: d.seq,
            ack: (d.flags & ACK != 0).then_some(d.ack),
            control: control_of(d.flags)?,
            window: d.window,
            max_seg_size,
            window_scale,
            payload: &tcp[payload_at..],
        })
    }

    /// Sequence space the segment takes: payload, plus one for SYN or FIN.
    pub fn segment_len(&self) -> u32 {
        self.payload.len() as u32
            + u32::from(matches!(self.control, TcpControl::Syn | TcpControl::Fin))
    }
}

/// Bytes of an [`RxDescriptor`] ahead of its frame in the firmware RX queue: four beats
/// of the datapath's 64-bit stream.
pub const RX_DESCRIPTOR_LEN: usize = 32;

/// What the datapath's parser puts ahead of every frame it steers to the firmware: the
/// TCP header's fields as little-endian numbers at aligned places, so the firmware reads
/// each with one load rather than assemble it from the frame's big-endian bytes (header
/// parsing is the datapath's work in DESIGN.md's partition). The datapath steers only
/// frames its parser accepted: Ethernet II, unfragmented IPv4, TCP, lengths consistent,
/// both checksums good, for this NIC's address.
///
/// Layout, byte offsets:
///
/// | bytes | field |
/// |---|---|
/// | 0–3 | destination IPv4 address, first octet first (as on the wire) |
/// | 4–7 | source IPv4 address, first octet first |
/// | 8–9, 10–11 | destination port, source port |
/// | 12–15, 16–19 | sequence number, acknowledgment field (whatever the ACK flag says) |
/// | 20–21 | window, unscaled |
/// | 22 | the header's low five flags: ACK 0x10, PSH 0x08, RST 0x04, SYN 0x02, FIN 0x01 |
/// | 23 | zero |
/// | 24–25 | TCP payload bytes |
/// | 26–31 | zero |
///
/// Addresses first, destination before source: the first three words are the
/// connection's 4-tuple as the firmware keys it (local address, remote address, ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(4))]
pub struct RxDescriptor {
    pub dst_ip: [u8; 4],
    pub src_ip: [u8; 4],
    pub dst_port: u16,
    pub src_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub window: u16,
    pub flags: u8,
    pub payload_len: u16,
}

// In the struct's own layout the fields sit at the descriptor's offsets (its first 28
// bytes), word-aligned: a Hal that keeps descriptors as they are (the in-memory ones)
// hands the firmware aligned loads.
const _: () = {
    use core::mem::offset_of;
    assert!(core::mem::size_of::<RxDescriptor>() <= RX_DESCRIPTOR_LEN);
    assert!(offset_of!(RxDescriptor, dst_ip) == 0 && offset_of!(RxDescriptor, src_ip) == 4);
    assert!(offset_of!(RxDescriptor, dst_port) == 8 && offset_of!(RxDescriptor, src_port) == 10);
    assert!(offset_of!(RxDescriptor, seq) == 12 && offset_of!(RxDescriptor, ack) == 16);
    assert!(offset_of!(RxDescriptor, window) == 20 && offset_of!(RxDescriptor, flags) == 22);
    assert!(offset_of!(RxDescriptor, payload_len) == 24);
};

impl RxDescriptor {
    /// All fields zero: an empty queue slot's.
    pub const ZERO: RxDescriptor = RxDescriptor {
        dst_ip: [0; 4],
        src_ip: [0; 4],
        dst_port: 0,
        src_port: 0,
        seq: 0,
        ack: 0,
        window: 0,
        flags: 0,
        payload_len: 0,
    };

    /// The descriptor the datapath writes for `frame`, or why its parser drops it (the
    /// checksums verified). The reference of the descriptor's fields; which frames reach
    /// the firmware at all is the datapath's decision beside it (its parser also drops
    /// frames over 1,518 bytes, the datapath those for other addresses).
    pub fn of_frame(frame: &[u8]) -> core::result::Result<RxDescriptor, FrameError> {
        Self::parse(frame).map(|(descriptor, _)| descriptor)
    }

    /// [`RxDescriptor::of_frame`] and the TCP payload the parser hands on: what the
    /// datapath works from. Its parser leaves flag combinations, zero ports and the
    /// options' contents alone (the firmware judges those in the frames it gets), so a
    /// model of the datapath reads frames with this, not with [`TcpSegment::parse`].
    pub fn parse(frame: &[u8]) -> core::result::Result<(RxDescriptor, &[u8]), FrameError> {
        let located = locate_tcp(frame, Checksums::Software)?;
        let h = located.tcp_header;
        let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
        let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
        let descriptor = RxDescriptor {
            dst_ip: *located.dst_ip,
            src_ip: *located.src_ip,
            dst_port: be16(2),
            src_port: be16(0),
            seq: be32(4),
            ack: be32(8),
            window: be16(14),
            flags: h[13] & (FIN | SYN | RST | PSH | ACK),
            payload_len: (located.tcp.len() - located.tcp_header_len) as u16,
        };
        Ok((descriptor, &located.tcp[located.tcp_header_len..]))
    }

    /// A firmware RX queue packet split into its descriptor and its frame; `None` if it
    /// is shorter than a descriptor.
    pub fn split_packet(packet: &[u8]) -> Option<(RxDescriptor, &[u8])> {
        let (descriptor, frame) = packet.split_first_chunk::<RX_DESCRIPTOR_LEN>()?;
        Some((RxDescriptor::from_bytes(descriptor), frame))
    }

    pub fn from_bytes(bytes: &[u8; RX_DESCRIPTOR_LEN]) -> RxDescriptor {
        let d = FixedFields(bytes);
        RxDescriptor {
            dst_ip: d.array(0),
            src_ip: d.array(4),
            dst_port: d.le16(8),
            src_port: d.le16(10),
            seq: d.le32(12),
            ack: d.le32(16),
            window: d.le16(20),
            flags: bytes[22],
            payload_len: d.le16(24),
        }
    }

    pub fn to_bytes(&self) -> [u8; RX_DESCRIPTOR_LEN] {
        let mut b = [0; RX_DESCRIPTOR_LEN];
        b[0..4].copy_from_slice(&self.dst_ip);
        b[4..8].copy_from_slice(&self.src_ip);
        b[8..10].copy_from_slice(&self.dst_port.to_le_bytes());
        b[10..12].copy_from_slice(&self.src_port.to_le_bytes());
        b[12..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..20].copy_from_slice(&self.ack.to_le_bytes());
        b[20..22].copy_from_slice(&self.window.to_le_bytes());
        b[22] = self.flags;
        b[24..26].copy_from_slice(&self.payload_len.to_le_bytes());
        b
    }
}

/// Bytes of a [`TxDescriptor`] ahead of its payload in the firmware TX queue: five beats
/// of the datapath's 64-bit stream.
pub const TX_DESCRIPTOR_LEN: usize = 40;

/// [`TxDescriptor::flags`] bit: the MSS and window scale options follow the TCP header
/// (a SYN's, a SYN-ACK's).
pub const TX_SYN_OPTIONS: u8 = 0x80;
/// [`TxDescriptor::flags`] bit, with [`TX_SYN_OPTIONS`]: the window scale option is left
/// out (a SYN-ACK to a SYN that offered none, RFC 7323 §2.2); its four bytes are end of
/// list and padding, so the options stay 8 bytes.
pub const TX_NO_WINDOW_SCALE: u8 = 0x40;

/// A segment the firmware sends, as it hands it to the datapath: the header fields ahead
/// of the payload in the firmware TX queue, as little-endian numbers at aligned places.
/// The datapath builds the Ethernet, IPv4 and TCP headers from it and fills in both
/// checksums, so the firmware writes ten words where the headers are 54 to 62 bytes
/// that a core without byte-swap instructions would store one at a time (header
/// generation is the datapath's work in DESIGN.md's partition). The frame it builds is
/// byte for byte [`SegmentOut::emit`]'s ([`TxDescriptor::frame`] is the reference).
///
/// Layout, byte offsets (the struct's own layout on a little-endian core, so firmware
/// writes it in place in a queue slot):
///
/// | bytes | field |
/// |---|---|
/// | 0–5, 6–11 | destination and source MAC address, first byte first |
/// | 12–15, 16–19 | source and destination IPv4 address, first octet first |
/// | 20–21, 22–23 | source port, destination port |
/// | 24–27, 28–31 | sequence number, acknowledgment number (zero without ACK) |
/// | 32–33 | window |
/// | 34 | flags: ACK 0x10, PSH 0x08, RST 0x04, SYN 0x02, FIN 0x01; [`TX_SYN_OPTIONS`] 0x80, [`TX_NO_WINDOW_SCALE`] 0x40 |
/// | 35 | window scale shift (with the options) |
/// | 36–37 | MSS (with the options) |
/// | 38–39 | payload bytes, which follow from byte 40 |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(4))]
pub struct TxDescriptor {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub window: u16,
    pub flags: u8,
    pub window_shift: u8,
    pub mss: u16,
    pub payload_len: u16,
}

// The struct is its layout: firmware on a little-endian core writes it in place.
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<TxDescriptor>() == TX_DESCRIPTOR_LEN);
    assert!(offset_of!(TxDescriptor, src_mac) == 6 && offset_of!(TxDescriptor, src_ip) == 12);
    assert!(offset_of!(TxDescriptor, dst_ip) == 16 && offset_of!(TxDescriptor, src_port) == 20);
    assert!(offset_of!(TxDescriptor, dst_port) == 22 && offset_of!(TxDescriptor, seq) == 24);
    assert!(offset_of!(TxDescriptor, ack) == 28 && offset_of!(TxDescriptor, window) == 32);
    assert!(offset_of!(TxDescriptor, flags) == 34 && offset_of!(TxDescriptor, window_shift) == 35);
    assert!(offset_of!(TxDescriptor, mss) == 36 && offset_of!(TxDescriptor, payload_len) == 38);
};

impl TxDescriptor {
    /// All fields zero: an empty queue slot's.
    pub const ZERO: TxDescriptor = TxDescriptor {
        dst_mac: [0; 6],
        src_mac: [0; 6],
        src_ip: [0; 4],
        dst_ip: [0; 4],
        src_port: 0,
        dst_port: 0,
        seq: 0,
        ack: 0,
        window: 0,
        flags: 0,
        window_shift: 0,
        mss: 0,
        payload_len: 0,
    };

    /// The descriptor of `segment` carrying `payload_len` bytes.
    #[inline]
    pub fn of_segment(segment: &SegmentOut, payload_len: u16) -> TxDescriptor {
        let (mss, window_shift) = segment.syn_options.unwrap_or((0, None));
        TxDescriptor {
            dst_mac: segment.dst_mac,
            src_mac: segment.src_mac,
            src_ip: segment.src_ip,
            dst_ip: segment.dst_ip,
            src_port: segment.src_port,
            dst_port: segment.dst_port,
            seq: segment.seq,
            ack: segment.ack.unwrap_or(0),
            window: segment.window,
            flags: flags_of(segment.control, segment.ack.is_some())
                | match segment.syn_options {
                    Some((_, Some(_))) => TX_SYN_OPTIONS,
                    Some((_, None)) => TX_SYN_OPTIONS | TX_NO_WINDOW_SCALE,
                    None => 0,
                },
            window_shift: window_shift.unwrap_or(0),
            mss,
            payload_len,
        }
    }

    /// The segment described, or `None` for flags no [`SegmentOut`] has (two of SYN,
    /// FIN and RST).
    pub fn segment(&self) -> Option<SegmentOut> {
        Some(SegmentOut {
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
            control: control_of(self.flags).ok()?,
            seq: self.seq,
            ack: (self.flags & ACK != 0).then_some(self.ack),
            window: self.window,
            syn_options: (self.flags & TX_SYN_OPTIONS != 0).then_some((
                self.mss,
                (self.flags & TX_NO_WINDOW_SCALE == 0).then_some(self.window_shift),
            )),
        })
    }

    /// The frame the datapath builds from this descriptor and `payload`, with the
    /// checksums filled in (`Software`, as the datapath sends it) or left zero
    /// (`Offloaded`, as its segment builder hands it to checksum insertion); its length.
    /// `Malformed` for a descriptor the firmware never writes: flags no segment has, or
    /// a payload length other than `payload`'s.
    pub fn frame(&self, payload: &[u8], buffer: &mut [u8], checksums: Checksums) -> Result<usize> {
        if usize::from(self.payload_len) != payload.len() {
            return Err(Error::Malformed);
        }
        self.segment()
            .ok_or(Error::Malformed)?
            .emit(payload, buffer, checksums)
    }

    /// A firmware TX queue packet split into its descriptor and its payload; `None` if
    /// it is shorter than a descriptor.
    pub fn split_packet(packet: &[u8]) -> Option<(TxDescriptor, &[u8])> {
        let (descriptor, payload) = packet.split_first_chunk::<TX_DESCRIPTOR_LEN>()?;
        Some((TxDescriptor::from_bytes(descriptor), payload))
    }

    pub fn from_bytes(bytes: &[u8; TX_DESCRIPTOR_LEN]) -> TxDescriptor {
        let d = FixedFields(bytes);
        TxDescriptor {
            dst_mac: d.array(0),
            src_mac: d.array(6),
            src_ip: d.array(12),
            dst_ip: d.array(16),
            src_port: d.le16(20),
            dst_port: d.le16(22),
            seq: d.le32(24),
            ack: d.le32(28),
            window: d.le16(32),
            flags: bytes[34],
            window_shift: bytes[35],
            mss: d.le16(36),
            payload_len: d.le16(38),
        }
    }

    pub fn to_bytes(&self) -> [u8; TX_DESCRIPTOR_LEN] {
        let mut b = [0; TX_DESCRIPTOR_LEN];
        b[0..6].copy_from_slice(&self.dst_mac);
        b[6..12].copy_from_slice(&self.src_mac);
        b[12..16].copy_from_slice(&self.src_ip);
        b[16..20].copy_from_slice(&self.dst_ip);
        b[20..22].copy_from_slice(&self.src_port.to_le_bytes());
        b[22..24].copy_from_slice(&self.dst_port.to_le_bytes());
        b[24..28].copy_from_slice(&self.seq.to_le_bytes());
        b[28..32].copy_from_slice(&self.ack.to_le_bytes());
        b[32..34].copy_from_slice(&self.window.to_le_bytes());
        b[34] = self.flags;
        b[35] = self.window_shift;
        b[36..38].copy_from_slice(&self.mss.to_le_bytes());
        b[38..40].copy_from_slice(&self.payload_len.to_le_bytes());
        b
    }
}

/// The header's flag byte for `control`, with ACK if `ack`.
#[inline]
fn flags_of(control: TcpControl, ack: bool) -> u8 {
    (match control {
        TcpControl::None => 0,
        TcpControl::Psh => PSH,
        TcpControl::Syn => SYN,
        TcpControl::Fin => FIN,
        TcpControl::Rst => RST,
    }) | if ack { ACK } else { 0 }
}

/// The header fields of a segment to send: a 20-byte TCP header, or 28 with the MSS and
/// window scale options of a SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentOut {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
    pub control: TcpControl,
    pub seq: u32,
    pub ack: Option<u32>,
    pub window: u16,
    /// MSS and window scale shift, sent on SYN and SYN-ACK; the shift only when the
    /// peer's SYN offered scaling (RFC 7323 §2.2) or on our own SYN. Always 8 bytes of
    /// options: without the shift, end of list and padding where it would be.
    pub syn_options: Option<(u16, Option<u8>)>,
}

impl SegmentOut {
    fn tcp_header_len(&self) -> usize {
        if self.syn_options.is_some() {
            28
        } else {
            20
        }
    }

    /// Bytes of the frame carrying `payload_len` bytes (padded to 60).
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        (ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + self.tcp_header_len() + payload_len)
            .max(MIN_FRAME_LEN)
    }

    /// Write the frame; the same bytes [`TcpFrameRepr::emit_with`] writes for the same
    /// segment (IPv4 without options, identification 0, DF).
    ///
    /// The headers are one fixed-size array written at constant offsets after a single
    /// bounds check, where `smoltcp`'s setters check and locate every field on its own
    /// (about half the instructions on riscv32, when the firmware still wrote frames).
    /// The software checksums are left to `smoltcp`. The reference of the frames the
    /// datapath builds ([`TxDescriptor::frame`]) and of the model's.
    #[inline]
    pub fn emit(&self, payload: &[u8], buffer: &mut [u8], checksums: Checksums) -> Result<usize> {
        const IP: usize = ETHERNET_HEADER_LEN;
        const TCP: usize = IP + IPV4_HEADER_LEN;
        let tcp_header_len = self.tcp_header_len();
        let tcp_len = tcp_header_len + payload.len();
        if IPV4_HEADER_LEN + tcp_len > usize::from(u16::MAX) {
            return Err(Error::Malformed);
        }
        let len = self.buffer_len(payload.len());
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        // Every frame is at least MIN_FRAME_LEN long, so the fixed headers fit.
        let (h, rest) = out
            .split_first_chunk_mut::<{ TCP + TCP_HEADER_LEN }>()
            .ok_or(Error::BufferTooSmall)?;
        h[0..6].copy_from_slice(&self.dst_mac);
        h[6..12].copy_from_slice(&self.src_mac);
        // EtherType IPv4. Then version 4, IHL 5, DSCP/ECN 0, total length, identification
        // 0, DF, TTL, TCP, checksum 0 (filled below or by the datapath).
        h[12..14].copy_from_slice(&[0x08, 0x00]);
        h[IP..IP + 2].copy_from_slice(&[0x45, 0]);
        h[IP + 2..IP + 4].copy_from_slice(&((IPV4_HEADER_LEN + tcp_len) as u16).to_be_bytes());
        h[IP + 4..IP + 12].copy_from_slice(&[0, 0, 0x40, 0, DEFAULT_TTL, 6, 0, 0]);
        h[IP + 12..IP + 16].copy_from_slice(&self.src_ip);
        h[IP + 16..IP + 20].copy_from_slice(&self.dst_ip);
        h[TCP..TCP + 2].copy_from_slice(&self.src_port.to_be_bytes());
        h[TCP + 2..TCP + 4].copy_from_slice(&self.dst_port.to_be_bytes());
        h[TCP + 4..TCP + 8].copy_from_slice(&self.seq.to_be_bytes());
        h[TCP + 8..TCP + 12].copy_from_slice(&self.ack.unwrap_or(0).to_be_bytes());
        h[TCP + 12] = (tcp_header_len as u8 / 4) << 4;
        h[TCP + 13] = flags_of(self.control, self.ack.is_some());
        h[TCP + 14..TCP + 16].copy_from_slice(&self.window.to_be_bytes());
        // Checksum and urgent pointer 0. Ethernet padding lies within the 6 bytes after a
        // 54-byte header: zero them first (fixed-size stores), then write options and
        // payload over them.
        h[TCP + 16..TCP + 20].copy_from_slice(&[0; 4]);
        if let Some(padding) = rest.first_chunk_mut::<{ MIN_FRAME_LEN - TCP - TCP_HEADER_LEN }>() {
            *padding = [0; MIN_FRAME_LEN - TCP - TCP_HEADER_LEN];
        }
        if let (Some((mss, shift)), Some(options)) = (self.syn_options, rest.first_chunk_mut()) {
            // MSS, window scale, end of list: the bytes smoltcp's options emit; without
            // the window scale, end of list and padding in its place.
            let [mss_hi, mss_lo] = mss.to_be_bytes();
            *options = match shift {
                Some(shift) => [2, 4, mss_hi, mss_lo, 3, 3, shift, 0],
                None => [2, 4, mss_hi, mss_lo, 0, 0, 0, 0],
            };
        }
        // Most control segments carry no payload: no library call for nothing.
        if !payload.is_empty() {
            rest[tcp_header_len - TCP_HEADER_LEN..][..payload.len()].copy_from_slice(payload);
        }
        if checksums == Checksums::Software {
            fill_checksums(&mut out[IP..], tcp_len);
        }
        Ok(len)
    }
}

/// Fill the IPv4 header and TCP checksums of the packet at the start of `ip` (no IPv4
/// options, `tcp_len` bytes of segment). Out of line: the offloaded case, which inlines
/// the rest of [`SegmentOut::emit`], keeps its registers for the headers.
#[inline(never)]
fn fill_checksums(ip: &mut [u8], tcp_len: usize) {
    let mut ip = Ipv4Packet::new_unchecked(ip);
    ip.fill_checksum();
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let mut tcp = TcpPacket::new_unchecked(&mut ip.payload_mut()[..tcp_len]);
    tcp.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
}
