//! Ethernet II / IPv4 / TCP frames, parsed and emitted through `smoltcp::wire` (the
//! checksums included), for the firmware's control segments and the testbench's peers.

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, IpAddress, IpProtocol,
    Ipv4Address, Ipv4Packet, Ipv4Repr, TcpControl, TcpOption, TcpPacket, TcpRepr,
    ETHERNET_HEADER_LEN, IPV4_HEADER_LEN,
};

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
    /// transmitted frames leave with the fields zero for the datapath to fill.
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
/// when they are ours to check.
struct Located<'a> {
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src_ip: Ipv4Address,
    dst_ip: Ipv4Address,
    ttl: u8,
    tcp: TcpPacket<&'a [u8]>,
}

fn locate_tcp(frame: &[u8], checksums: Checksums) -> core::result::Result<Located<'_>, FrameError> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| FrameError::Malformed)?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return Err(FrameError::NotTcp);
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).map_err(|_| FrameError::Malformed)?;
    if ip.version() != 4 || ip.more_frags() || ip.frag_offset() != 0 {
        return Err(FrameError::NotTcp);
    }
    let verify = checksums == Checksums::Software;
    if verify && !ip.verify_checksum() {
        return Err(FrameError::BadChecksum);
    }
    if ip.next_header() != IpProtocol::Tcp {
        return Err(FrameError::NotTcp);
    }
    let (src_ip, dst_ip) = (ip.src_addr(), ip.dst_addr());
    let tcp = TcpPacket::new_checked(ip.payload()).map_err(|_| FrameError::Malformed)?;
    if verify && !tcp.verify_checksum(&IpAddress::Ipv4(src_ip), &IpAddress::Ipv4(dst_ip)) {
        return Err(FrameError::BadChecksum);
    }
    Ok(Located {
        src_mac: eth.src_addr(),
        dst_mac: eth.dst_addr(),
        src_ip,
        dst_ip,
        ttl: ip.hop_limit(),
        tcp,
    })
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
        let (src, dst) = (
            IpAddress::Ipv4(located.src_ip),
            IpAddress::Ipv4(located.dst_ip),
        );
        let tcp = located.tcp;
        let tcp_repr = TcpRepr::parse(&tcp, &src, &dst, &ChecksumCapabilities::ignored())
            .map_err(|_| FrameError::Malformed)?;
        Ok(TcpFrameRepr {
            src_mac: located.src_mac,
            dst_mac: located.dst_mac,
            src_ip: located.src_ip,
            dst_ip: located.dst_ip,
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
/// parsed only when asked for. The firmware's fast path; [`TcpFrameRepr`] is the full
/// representation. Parsing accepts and refuses exactly what [`TcpFrameRepr::parse_with`]
/// does (a property test holds them together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    pub src_mac: [u8; 6],
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
/// options `smoltcp`'s `TcpOption::parse` refuses.
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

impl<'a> TcpSegment<'a> {
    /// Inlined, so the segment is built where the caller keeps it, not copied there.
    #[inline]
    pub fn parse(
        frame: &'a [u8],
        checksums: Checksums,
    ) -> core::result::Result<TcpSegment<'a>, FrameError> {
        let located = locate_tcp(frame, checksums)?;
        let tcp = located.tcp;
        if tcp.src_port() == 0 || tcp.dst_port() == 0 {
            return Err(FrameError::Malformed);
        }
        let control = match (tcp.syn(), tcp.fin(), tcp.rst(), tcp.psh()) {
            (false, false, false, false) => TcpControl::None,
            (false, false, false, true) => TcpControl::Psh,
            (true, false, false, _) => TcpControl::Syn,
            (false, true, false, _) => TcpControl::Fin,
            (false, false, true, _) => TcpControl::Rst,
            _ => return Err(FrameError::Malformed),
        };
        let (max_seg_size, window_scale) =
            scan_options(tcp.options()).map_err(|_| FrameError::Malformed)?;
        Ok(TcpSegment {
            src_mac: located.src_mac.0,
            src_ip: located.src_ip.octets(),
            dst_ip: located.dst_ip.octets(),
            src_port: tcp.src_port(),
            dst_port: tcp.dst_port(),
            seq: tcp.seq_number().0 as u32,
            ack: tcp.ack().then_some(tcp.ack_number().0 as u32),
            control,
            window: tcp.window_len(),
            max_seg_size,
            window_scale,
            payload: tcp.payload(),
        })
    }

    /// Sequence space the segment takes: payload, plus one for SYN or FIN.
    pub fn segment_len(&self) -> u32 {
        self.payload.len() as u32
            + u32::from(matches!(self.control, TcpControl::Syn | TcpControl::Fin))
    }
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
    /// MSS and window scale shift, sent on SYN and SYN-ACK.
    pub syn_options: Option<(u16, u8)>,
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
    pub fn emit(&self, payload: &[u8], buffer: &mut [u8], checksums: Checksums) -> Result<usize> {
        let tcp_len = self.tcp_header_len() + payload.len();
        if IPV4_HEADER_LEN + tcp_len > usize::from(u16::MAX) {
            return Err(Error::Malformed);
        }
        let len = self.buffer_len(payload.len());
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let mut eth = EthernetFrame::new_unchecked(&mut *out);
        eth.set_dst_addr(EthernetAddress(self.dst_mac));
        eth.set_src_addr(EthernetAddress(self.src_mac));
        eth.set_ethertype(EthernetProtocol::Ipv4);
        let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
        ip.set_version(4);
        ip.set_header_len(IPV4_HEADER_LEN as u8);
        ip.set_dscp(0);
        ip.set_ecn(0);
        ip.set_total_len((IPV4_HEADER_LEN + tcp_len) as u16);
        ip.set_ident(0);
        ip.clear_flags();
        ip.set_dont_frag(true);
        ip.set_frag_offset(0);
        ip.set_hop_limit(DEFAULT_TTL);
        ip.set_next_header(IpProtocol::Tcp);
        ip.set_src_addr(Ipv4Address::from(self.src_ip));
        ip.set_dst_addr(Ipv4Address::from(self.dst_ip));
        if checksums == Checksums::Software {
            ip.fill_checksum();
        } else {
            ip.set_checksum(0);
        }
        let mut tcp = TcpPacket::new_unchecked(&mut ip.payload_mut()[..tcp_len]);
        tcp.set_src_port(self.src_port);
        tcp.set_dst_port(self.dst_port);
        tcp.set_seq_number(smoltcp::wire::TcpSeqNumber(self.seq as i32));
        tcp.set_ack_number(smoltcp::wire::TcpSeqNumber(self.ack.unwrap_or(0) as i32));
        tcp.set_header_len(self.tcp_header_len() as u8);
        tcp.clear_flags();
        match self.control {
            TcpControl::None => {}
            TcpControl::Psh => tcp.set_psh(true),
            TcpControl::Syn => tcp.set_syn(true),
            TcpControl::Fin => tcp.set_fin(true),
            TcpControl::Rst => tcp.set_rst(true),
        }
        tcp.set_ack(self.ack.is_some());
        tcp.set_window_len(self.window);
        tcp.set_urgent_at(0);
        if let Some((mss, shift)) = self.syn_options {
            let options = tcp.options_mut();
            let rest = TcpOption::MaxSegmentSize(mss).emit(options);
            let rest = TcpOption::WindowScale(shift).emit(rest);
            TcpOption::EndOfList.emit(rest);
        }
        tcp.payload_mut()[..payload.len()].copy_from_slice(payload);
        if checksums == Checksums::Software {
            tcp.fill_checksum(
                &IpAddress::Ipv4(Ipv4Address::from(self.src_ip)),
                &IpAddress::Ipv4(Ipv4Address::from(self.dst_ip)),
            );
        } else {
            tcp.set_checksum(0);
        }
        // Ethernet padding.
        out[ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + tcp_len..].fill(0);
        Ok(len)
    }
}
