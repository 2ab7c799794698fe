//! Ethernet II / IPv4 / TCP frames, parsed and emitted through `smoltcp::wire` (the
//! checksums included), for the firmware's control segments and the testbench's peers.

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, IpAddress, IpProtocol,
    Ipv4Address, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr, ETHERNET_HEADER_LEN, IPV4_HEADER_LEN,
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
        let eth = EthernetFrame::new_checked(frame).map_err(|_| FrameError::Malformed)?;
        let eth_repr = EthernetRepr::parse(&eth).map_err(|_| FrameError::Malformed)?;
        if eth_repr.ethertype != EthernetProtocol::Ipv4 {
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
        let ip_repr = Ipv4Repr::parse(&ip, &ChecksumCapabilities::ignored())
            .map_err(|_| FrameError::Malformed)?;
        if ip_repr.next_header != IpProtocol::Tcp {
            return Err(FrameError::NotTcp);
        }
        let payload: &'a [u8] = ip.payload();
        let tcp = TcpPacket::new_checked(payload).map_err(|_| FrameError::Malformed)?;
        let (src, dst) = (
            IpAddress::Ipv4(ip_repr.src_addr),
            IpAddress::Ipv4(ip_repr.dst_addr),
        );
        if verify && !tcp.verify_checksum(&src, &dst) {
            return Err(FrameError::BadChecksum);
        }
        let tcp_repr = TcpRepr::parse(&tcp, &src, &dst, &ChecksumCapabilities::ignored())
            .map_err(|_| FrameError::Malformed)?;
        Ok(TcpFrameRepr {
            src_mac: eth_repr.src_addr,
            dst_mac: eth_repr.dst_addr,
            src_ip: ip_repr.src_addr,
            dst_ip: ip_repr.dst_addr,
            ttl: ip_repr.hop_limit,
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
