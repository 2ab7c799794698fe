//! A scripted TCP conversation between two hosts, emitted as Ethernet frames: the
//! handshake, payload segments with their sequence numbers, ACKs and the close. Used to
//! write reference captures of an iWARP connection (MPA request, reply, RTR, Sends) and,
//! later, as the scripted peer of firmware tests.

use iwnic_proto::mpa::{FrameKind, FrameRepr, RtrTypes, V2Block};
use iwnic_proto::net::{TcpFrameRepr, DEFAULT_TTL};
use iwnic_proto::smoltcp_wire::{EthernetAddress, Ipv4Address, TcpControl, TcpRepr, TcpSeqNumber};
use iwnic_proto::{ddp::MessageRepr, fpdu::FpduRepr};

/// One end of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    pub port: u16,
    /// Initial sequence number.
    pub isn: u32,
}

/// Which end sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The TCP active opener (MPA initiator).
    A,
    B,
}

#[derive(Debug, Clone)]
struct Peer {
    host: Host,
    /// Next sequence number this end sends.
    snd_nxt: u32,
    /// Next sequence number this end expects.
    rcv_nxt: u32,
}

/// Frames of a TCP conversation, with sequence numbers kept by the script.
#[derive(Debug, Clone)]
pub struct TcpConversation {
    peers: [Peer; 2],
    window: u16,
    mss: u16,
}

impl TcpConversation {
    pub fn new(a: Host, b: Host) -> TcpConversation {
        let peer = |host: Host| Peer {
            host,
            snd_nxt: host.isn,
            rcv_nxt: 0,
        };
        TcpConversation {
            peers: [peer(a), peer(b)],
            window: 65535,
            mss: 1460,
        }
    }

    fn index(side: Side) -> (usize, usize) {
        match side {
            Side::A => (0, 1),
            Side::B => (1, 0),
        }
    }

    /// Emit a segment from `side`: `control`, `payload`, with an ACK unless it is the first SYN.
    fn segment(&mut self, side: Side, control: TcpControl, payload: &[u8]) -> Vec<u8> {
        let (me, peer) = Self::index(side);
        let (src, dst) = (self.peers[me].host, self.peers[peer].host);
        let syn = control == TcpControl::Syn;
        let first_syn = syn && side == Side::A;
        let repr = TcpFrameRepr {
            src_mac: EthernetAddress(src.mac),
            dst_mac: EthernetAddress(dst.mac),
            src_ip: Ipv4Address::from(src.ip),
            dst_ip: Ipv4Address::from(dst.ip),
            ttl: DEFAULT_TTL,
            tcp: TcpRepr {
                src_port: src.port,
                dst_port: dst.port,
                control,
                seq_number: TcpSeqNumber(self.peers[me].snd_nxt as i32),
                ack_number: (!first_syn).then_some(TcpSeqNumber(self.peers[me].rcv_nxt as i32)),
                window_len: self.window,
                window_scale: None,
                max_seg_size: syn.then_some(self.mss),
                sack_permitted: false,
                sack_ranges: [None; 3],
                timestamp: None,
                payload,
            },
        };
        let mut frame = vec![0u8; repr.buffer_len()];
        repr.emit(&mut frame)
            .expect("a scripted segment always fits its buffer");
        let used = (repr.tcp.segment_len()) as u32;
        self.peers[me].snd_nxt = self.peers[me].snd_nxt.wrapping_add(used);
        self.peers[peer].rcv_nxt = self.peers[me].snd_nxt;
        frame
    }

    /// SYN, SYN-ACK, ACK.
    pub fn handshake(&mut self) -> Vec<Vec<u8>> {
        vec![
            self.segment(Side::A, TcpControl::Syn, &[]),
            self.segment(Side::B, TcpControl::Syn, &[]),
            self.segment(Side::A, TcpControl::None, &[]),
        ]
    }

    /// A data segment (PSH, ACK) from `side`.
    pub fn data(&mut self, side: Side, payload: &[u8]) -> Vec<u8> {
        self.segment(side, TcpControl::Psh, payload)
    }

    /// A pure ACK from `side`.
    pub fn ack(&mut self, side: Side) -> Vec<u8> {
        self.segment(side, TcpControl::None, &[])
    }

    /// FIN from `first`, the other side's FIN, and the last ACK.
    pub fn close(&mut self, first: Side) -> Vec<Vec<u8>> {
        let second = if first == Side::A { Side::B } else { Side::A };
        vec![
            self.segment(first, TcpControl::Fin, &[]),
            self.segment(second, TcpControl::Fin, &[]),
            self.segment(first, TcpControl::None, &[]),
        ]
    }
}

/// The two hosts of the reference conversation.
pub const HOST_A: Host = Host {
    mac: [2, 0, 0, 0, 0, 0xA],
    ip: [10, 0, 0, 1],
    port: 40000,
    isn: 1_000,
};
pub const HOST_B: Host = Host {
    mac: [2, 0, 0, 0, 0, 0xB],
    ip: [10, 0, 0, 2],
    port: 4791,
    isn: 0xFFFF_FF00,
};

/// Bytes of an emitted MPA frame.
pub fn mpa_frame(repr: &FrameRepr) -> Vec<u8> {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf).expect("MPA frame within limits");
    buf
}

/// Bytes of an FPDU carrying `message`.
pub fn fpdu(message: &MessageRepr) -> Vec<u8> {
    let mut ulpdu = vec![0u8; message.buffer_len()];
    message.emit(&mut ulpdu).expect("message fits");
    let repr = FpduRepr { ulpdu: &ulpdu };
    let mut wire = vec![0u8; repr.buffer_len()];
    repr.emit(&mut wire).expect("FPDU fits");
    wire
}

/// A whole MPA v2 peer-to-peer connection as iwnic runs it: handshake, request offering
/// Write and Read RTR with `private_data`, reply choosing Read, the RTR, then every
/// message of `sends` as a Send from A and echoed by B, then a graceful close from A.
/// B's ISN is just below 2^32, so sequence numbers wrap during the exchange.
pub fn mpa_v2_connection(private_data: &[u8], sends: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut tcp = TcpConversation::new(HOST_A, HOST_B);
    let block = |rtr| {
        Some(V2Block {
            peer_to_peer: true,
            rtr,
            ird: 16,
            ord: 16,
        })
    };
    let request = FrameRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        revision: 2,
        v2: block(RtrTypes {
            send: false,
            write: true,
            read: true,
        }),
        private_data,
    };
    let reply = FrameRepr {
        kind: FrameKind::Accept,
        v2: block(RtrTypes::READ),
        ..request
    };
    let mut frames = tcp.handshake();
    frames.push(tcp.data(Side::A, &mpa_frame(&request)));
    frames.push(tcp.data(Side::B, &mpa_frame(&reply)));
    let rtr = MessageRepr::rtr(RtrTypes::READ).expect("one RTR type");
    frames.push(tcp.data(Side::A, &fpdu(&rtr)));
    frames.push(tcp.ack(Side::B));
    for (i, payload) in sends.iter().enumerate() {
        let msn = i as u32 + 1;
        frames.push(tcp.data(Side::A, &fpdu(&MessageRepr::send(payload, msn))));
        frames.push(tcp.data(Side::B, &fpdu(&MessageRepr::send(payload, msn))));
    }
    frames.push(tcp.ack(Side::A));
    frames.extend(tcp.close(Side::A));
    frames
}
