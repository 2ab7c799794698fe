//! Host-interface records: commands (host → NIC), their completions and events (NIC → host).
//!
//! Every record is little-endian with a fixed layout, a fixed header and, for commands
//! and events, up to 512 bytes of private data at the end. Decoding checks every field
//! and rejects a bad record with an [`Error`]; it never panics.
//!
//! ## Common header (8 bytes)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | kind: 0x01–0x08 command ([`CommandKind`]), 0x40 completion, 0x81–0x85 event (0x80 + [`EventKind`]) |
//! | 1 | 1 | flags (per kind below; undefined bits must be 0) |
//! | 2 | 2 | length of the whole record in bytes |
//! | 4 | 4 | tag (command, echoed by its completion) or sequence number (event) |
//!
//! ## Endpoint (20 bytes)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | family: 4 (IPv4) or 6 (IPv6); 0 with every other byte 0 = unused |
//! | 1 | 1 | reserved, 0 |
//! | 2 | 2 | port |
//! | 4 | 16 | address in network byte order; IPv4 in the first 4 bytes, the rest 0 |
//!
//! ## Command (64 bytes + private data)
//!
//! | offset | size | field | used by |
//! |---|---|---|---|
//! | 8 | 4 | handle: listener or connection | unlisten, accept, reject, disconnect, release, delivered |
//! | 12 | 2 | IRD | connect, accept |
//! | 14 | 2 | ORD | connect, accept |
//! | 16 | 4 | backlog (listen) or QP number (connect, accept) | listen, connect, accept |
//! | 20 | 20 | local endpoint | listen, connect |
//! | 40 | 20 | remote endpoint | connect |
//! | 60 | 2 | private data length (≤ 512) | connect, accept, reject |
//! | 62 | 2 | reserved, 0 | |
//! | 64 | n | private data | |
//!
//! Flags: connect 0x01 = MPA revision 1 (default: revision 2, peer-to-peer);
//! disconnect 0x01 = abrupt (RST instead of FIN). Fields a command does not use are 0.
//!
//! ## Completion (16 bytes)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 8 | 4 | handle: the new listener (listen) or connection (connect), else 0 |
//! | 12 | 4 | status: 0 or a negative errno |
//!
//! ## Event (68 bytes + private data)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 8 | 4 | connection handle |
//! | 12 | 4 | listener handle (CONNECT_REQUEST), else 0 |
//! | 16 | 4 | status: 0 or a negative errno |
//! | 20 | 2 | IRD |
//! | 22 | 2 | ORD |
//! | 24 | 20 | local endpoint |
//! | 44 | 20 | remote endpoint |
//! | 64 | 2 | private data length (≤ 512) |
//! | 66 | 2 | reserved, 0 |
//! | 68 | n | private data |
//!
//! Flags: CONNECT_REPLY with status 0 and ESTABLISHED of a connection in MPA peer-to-peer
//! mode say which RTR (the initiator's first FPDU) began FPDU mode: 0x01 a zero-length
//! Send, 0x02 a zero-length RDMA Write, 0x04 a zero-length RDMA Read Request; at most
//! one, and 0 on every other event. An RTR Send or Read Request is a real message: it
//! takes message number 1 of its queue (the initiator's Send or Read Request queue), so
//! the connection's own messages of that kind start at 2. The kernel's providers keep
//! this to themselves, since they send the RTR; here the NIC does, and the host's RDMAP
//! needs it.

use crate::bytes::{get, le16, le32, put};
use crate::mpa::{RtrTypes, MAX_PRIVATE_DATA};
use crate::{Error, Result, WordAligned};

pub const HEADER_LEN: usize = 8;
pub const ENDPOINT_LEN: usize = 20;
pub const COMMAND_FIXED_LEN: usize = 64;
pub const COMPLETION_LEN: usize = 16;
pub const EVENT_FIXED_LEN: usize = 68;
/// Longest record of any kind.
pub const MAX_RECORD_LEN: usize = EVENT_FIXED_LEN + MAX_PRIVATE_DATA;

/// Room for one record of any kind, on a word boundary as the NIC's queue slots are.
pub type RecordBuffer = WordAligned<MAX_RECORD_LEN>;

const KIND_COMPLETION: u8 = 0x40;
const KIND_EVENT: u8 = 0x80;
const FLAG_CONNECT_MPA_V1: u8 = 0x01;
const FLAG_DISCONNECT_ABRUPT: u8 = 0x01;
/// An event's RTR flags, in [`RtrTypes::EACH`]'s order.
const FLAGS_EVENT_RTR: [u8; 3] = [0x01, 0x02, 0x04];

/// An IP address; IPv4 now, the layout ready for IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpAddr {
    V4([u8; 4]),
    V6([u8; 16]),
}

/// Address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: u16,
}

impl Endpoint {
    pub const fn v4(addr: [u8; 4], port: u16) -> Endpoint {
        Endpoint {
            addr: IpAddr::V4(addr),
            port,
        }
    }

    /// `None` for the all-zero "unused" encoding.
    fn parse(b: &[u8]) -> Result<Option<Endpoint>> {
        // Read where it lies: a command is parsed in the firmware's receive buffer.
        let raw = b.get(..ENDPOINT_LEN).ok_or(Error::Truncated)?;
        let port = u16::from_le_bytes([raw[2], raw[3]]);
        let zero_from = |at: usize| raw[at..].iter().all(|&x| x == 0);
        match (raw[0], raw[1]) {
            (0, 0) if zero_from(2) => Ok(None),
            (4, 0) if zero_from(8) => Ok(Some(Endpoint {
                addr: IpAddr::V4([raw[4], raw[5], raw[6], raw[7]]),
                port,
            })),
            (6, 0) => Ok(Some(Endpoint {
                addr: IpAddr::V6(get(raw, 4)?),
                port,
            })),
            _ => Err(Error::Malformed),
        }
    }

    fn emit(this: Option<&Endpoint>, out: &mut [u8]) -> Result<()> {
        let raw = out
            .first_chunk_mut::<ENDPOINT_LEN>()
            .ok_or(Error::BufferTooSmall)?;
        match this {
            Some(e) => e.emit_into(raw),
            None => raw.fill(0),
        }
        Ok(())
    }

    /// Write the 20 bytes in place: a record is built in the host queue's slot. Inlined
    /// with a fixed-size array, so in a [`RecordBuffer`] the zeros are three word stores
    /// rather than a `memset` call.
    #[inline]
    fn emit_into(&self, raw: &mut [u8; ENDPOINT_LEN]) {
        let [port_lo, port_hi] = self.port.to_le_bytes();
        let (head, addr) = raw.split_at_mut(4);
        match self.addr {
            IpAddr::V4(a) => {
                // The address copied whole: one word where both sides are aligned.
                head.copy_from_slice(&[4, 0, port_lo, port_hi]);
                let (v4, zeros) = addr.split_at_mut(4);
                v4.copy_from_slice(&a);
                zeros.fill(0);
            }
            IpAddr::V6(a) => {
                head.copy_from_slice(&[6, 0, port_lo, port_hi]);
                addr.copy_from_slice(&a);
            }
        }
    }
}

/// Command opcodes (record kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommandKind {
    Listen = 1,
    Unlisten = 2,
    Connect = 3,
    Accept = 4,
    Reject = 5,
    Disconnect = 6,
    Release = 7,
    Delivered = 8,
}

/// What the host asks the NIC to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command<'a> {
    /// Listen on `local` (address 0.0.0.0 = every address); completes with the listener handle.
    Listen {
        local: Endpoint,
        backlog: u32,
    },
    Unlisten {
        listener: u32,
    },
    /// Open a connection; completes with the connection handle, then exactly one
    /// CONNECT_REPLY follows if the status was 0.
    Connect {
        local: Endpoint,
        remote: Endpoint,
        ird: u16,
        ord: u16,
        qpn: u32,
        mpa_v1: bool,
        private_data: &'a [u8],
    },
    Accept {
        conn: u32,
        ird: u16,
        ord: u16,
        qpn: u32,
        private_data: &'a [u8],
    },
    Reject {
        conn: u32,
        private_data: &'a [u8],
    },
    Disconnect {
        conn: u32,
        abrupt: bool,
    },
    /// Forget a connection the host no longer tracks; aborts it if still open.
    Release {
        conn: u32,
    },
    /// The application's handler has had the CONNECT_REQUEST of `conn` and returned
    /// without answering it: the request no longer counts against its listener's backlog,
    /// which bounds requests not yet delivered (spec/iwcm.md rule 10), and it survives
    /// the listener. A request answered from its handler needs none.
    Delivered {
        conn: u32,
    },
}

impl Command<'_> {
    pub fn kind(&self) -> CommandKind {
        match self {
            Command::Listen { .. } => CommandKind::Listen,
            Command::Unlisten { .. } => CommandKind::Unlisten,
            Command::Connect { .. } => CommandKind::Connect,
            Command::Accept { .. } => CommandKind::Accept,
            Command::Reject { .. } => CommandKind::Reject,
            Command::Disconnect { .. } => CommandKind::Disconnect,
            Command::Release { .. } => CommandKind::Release,
            Command::Delivered { .. } => CommandKind::Delivered,
        }
    }
}

/// Every field of a command's fixed part, as it is emitted.
#[derive(Default)]
struct Fields<'a> {
    flags: u8,
    handle: u32,
    ird: u16,
    ord: u16,
    arg: u32,
    local: Option<Endpoint>,
    remote: Option<Endpoint>,
    private_data: &'a [u8],
}

/// Reads the common header; checks the length field against the buffer.
fn parse_header(bytes: &[u8]) -> Result<(u8, u8, usize, u32)> {
    let kind = *bytes.first().ok_or(Error::Truncated)?;
    let flags = *bytes.get(1).ok_or(Error::Truncated)?;
    let len = usize::from(le16(bytes, 2)?);
    let tag = le32(bytes, 4)?;
    if bytes.len() < len {
        return Err(Error::Truncated);
    }
    Ok((kind, flags, len, tag))
}

fn emit_header(out: &mut [u8], kind: u8, flags: u8, len: usize, tag: u32) -> Result<()> {
    put(out, 0, &[kind, flags])?;
    put(out, 2, &(len as u16).to_le_bytes())?;
    put(out, 4, &tag.to_le_bytes())
}

/// Reads the private data announced at `len_at`, which must end the record exactly.
fn parse_private_data(bytes: &[u8], len_at: usize, record_len: usize) -> Result<&[u8]> {
    let pd_len = usize::from(le16(bytes, len_at)?);
    if le16(bytes, len_at + 2)? != 0 {
        return Err(Error::Malformed);
    }
    if pd_len > MAX_PRIVATE_DATA {
        return Err(Error::PrivateDataTooLong);
    }
    let start = len_at + 4;
    if record_len != start + pd_len {
        return Err(Error::Malformed);
    }
    bytes.get(start..start + pd_len).ok_or(Error::Truncated)
}

fn check_private_data(pd: &[u8]) -> Result<()> {
    if pd.len() > MAX_PRIVATE_DATA {
        return Err(Error::PrivateDataTooLong);
    }
    Ok(())
}

/// A command with the tag its completion echoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommandRecord<'a> {
    pub tag: u32,
    pub command: Command<'a>,
}

/// Parts of a command's fixed layout a command kind uses; every other byte must be 0.
mod used {
    pub const HANDLE: u8 = 1 << 0;
    pub const IRD_ORD: u8 = 1 << 1;
    pub const ARG: u8 = 1 << 2;
    pub const LOCAL: u8 = 1 << 3;
    pub const REMOTE: u8 = 1 << 4;
    pub const PRIVATE_DATA: u8 = 1 << 5;
}

impl<'a> CommandRecord<'a> {
    /// Read in place, each field at its constant offset in the fixed part. Canonical form
    /// is enforced: flags and fields the command does not use must be 0, and a command
    /// that carries no private data must announce none. A record with several faults
    /// gets the error of the first check, in this order: header and length, the fixed
    /// part present (`Truncated`), private data, kind, canonical form, endpoints.
    ///
    /// Always inlined, as [`crate::net::TcpSegment::from_descriptor`]: out of line, the
    /// record is returned through memory and copied.
    #[inline(always)]
    pub fn parse(bytes: &'a [u8]) -> Result<CommandRecord<'a>> {
        use used::*;
        let (kind, flags, len, tag) = parse_header(bytes)?;
        let f = bytes
            .first_chunk::<COMMAND_FIXED_LEN>()
            .ok_or(Error::Truncated)?;
        let private_data = parse_private_data(bytes, 60, len)?;
        let (uses, allowed_flags) = match kind {
            1 => (LOCAL | ARG, 0),
            2 => (HANDLE, 0),
            3 => (
                LOCAL | REMOTE | IRD_ORD | ARG | PRIVATE_DATA,
                FLAG_CONNECT_MPA_V1,
            ),
            4 => (HANDLE | IRD_ORD | ARG | PRIVATE_DATA, 0),
            5 => (HANDLE | PRIVATE_DATA, 0),
            6 => (HANDLE, FLAG_DISCONNECT_ABRUPT),
            7 | 8 => (HANDLE, 0),
            _ => return Err(Error::Malformed),
        };
        // Four bytes at a time (the fields are whole words of a record that lies on a
        // word boundary in its queue slot), OR-ed with no branch until the end.
        let zero_unless = |part: u8, field: &[u8]| {
            if uses & part != 0 {
                return true;
            }
            let (words, rest) = field.as_chunks::<4>();
            let any = words.iter().fold(0, |a, w| a | u32::from_ne_bytes(*w))
                | rest.iter().fold(0, |a, &b| a | u32::from(b));
            any == 0
        };
        let canonical = flags & !allowed_flags == 0
            && zero_unless(HANDLE, &f[8..12])
            && zero_unless(IRD_ORD, &f[12..16])
            && zero_unless(ARG, &f[16..20])
            && zero_unless(LOCAL, &f[20..40])
            && zero_unless(REMOTE, &f[40..60])
            && (uses & PRIVATE_DATA != 0 || private_data.is_empty());
        if !canonical {
            return Err(Error::Malformed);
        }
        let endpoint = |part: u8, at: usize| match uses & part {
            0 => Ok(None),
            _ => Endpoint::parse(&f[at..at + ENDPOINT_LEN])?
                .ok_or(Error::Malformed)
                .map(Some),
        };
        let (local, remote) = (endpoint(LOCAL, 20)?, endpoint(REMOTE, 40)?);
        let handle = u32::from_le_bytes([f[8], f[9], f[10], f[11]]);
        let ird = u16::from_le_bytes([f[12], f[13]]);
        let ord = u16::from_le_bytes([f[14], f[15]]);
        let arg = u32::from_le_bytes([f[16], f[17], f[18], f[19]]);
        let command = match (kind, local, remote) {
            (1, Some(local), _) => Command::Listen {
                local,
                backlog: arg,
            },
            (2, ..) => Command::Unlisten { listener: handle },
            (3, Some(local), Some(remote)) => Command::Connect {
                local,
                remote,
                ird,
                ord,
                qpn: arg,
                mpa_v1: flags & FLAG_CONNECT_MPA_V1 != 0,
                private_data,
            },
            (4, ..) => Command::Accept {
                conn: handle,
                ird,
                ord,
                qpn: arg,
                private_data,
            },
            (5, ..) => Command::Reject {
                conn: handle,
                private_data,
            },
            (6, ..) => Command::Disconnect {
                conn: handle,
                abrupt: flags & FLAG_DISCONNECT_ABRUPT != 0,
            },
            (7, ..) => Command::Release { conn: handle },
            (8, ..) => Command::Delivered { conn: handle },
            _ => return Err(Error::Malformed),
        };
        Ok(CommandRecord { tag, command })
    }

    fn fields(&self) -> Fields<'a> {
        let d = Fields::default();
        match self.command {
            Command::Listen { local, backlog } => Fields {
                local: Some(local),
                arg: backlog,
                ..d
            },
            Command::Unlisten { listener } => Fields {
                handle: listener,
                ..d
            },
            Command::Connect {
                local,
                remote,
                ird,
                ord,
                qpn,
                mpa_v1,
                private_data,
            } => Fields {
                flags: if mpa_v1 { FLAG_CONNECT_MPA_V1 } else { 0 },
                local: Some(local),
                remote: Some(remote),
                ird,
                ord,
                arg: qpn,
                private_data,
                ..d
            },
            Command::Accept {
                conn,
                ird,
                ord,
                qpn,
                private_data,
            } => Fields {
                handle: conn,
                ird,
                ord,
                arg: qpn,
                private_data,
                ..d
            },
            Command::Reject { conn, private_data } => Fields {
                handle: conn,
                private_data,
                ..d
            },
            Command::Disconnect { conn, abrupt } => Fields {
                handle: conn,
                flags: if abrupt { FLAG_DISCONNECT_ABRUPT } else { 0 },
                ..d
            },
            Command::Release { conn } | Command::Delivered { conn } => Fields { handle: conn, ..d },
        }
    }

    pub fn buffer_len(&self) -> usize {
        COMMAND_FIXED_LEN + self.fields().private_data.len()
    }

    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        let f = self.fields();
        check_private_data(f.private_data)?;
        let len = self.buffer_len();
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        emit_header(out, self.command.kind() as u8, f.flags, len, self.tag)?;
        put(out, 8, &f.handle.to_le_bytes())?;
        put(out, 12, &f.ird.to_le_bytes())?;
        put(out, 14, &f.ord.to_le_bytes())?;
        put(out, 16, &f.arg.to_le_bytes())?;
        Endpoint::emit(f.local.as_ref(), &mut out[20..])?;
        Endpoint::emit(f.remote.as_ref(), &mut out[40..])?;
        put(out, 60, &(f.private_data.len() as u16).to_le_bytes())?;
        put(out, 62, &[0, 0])?;
        put(out, 64, f.private_data)?;
        Ok(len)
    }
}

/// The NIC's answer to one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Completion {
    pub tag: u32,
    /// 0 or a negative errno.
    pub status: i32,
    /// The new listener (listen) or connection (connect); 0 otherwise.
    pub handle: u32,
}

impl Completion {
    pub fn parse(bytes: &[u8]) -> Result<Completion> {
        let (kind, flags, len, tag) = parse_header(bytes)?;
        let handle = le32(bytes, 8)?;
        let status = le32(bytes, 12)? as i32;
        if kind != KIND_COMPLETION || flags != 0 || len != COMPLETION_LEN || status > 0 {
            return Err(Error::Malformed);
        }
        Ok(Completion {
            tag,
            status,
            handle,
        })
    }

    pub fn buffer_len(&self) -> usize {
        COMPLETION_LEN
    }

    #[inline]
    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        if self.status > 0 {
            return Err(Error::Malformed);
        }
        // At constant offsets of a fixed-size array, as Event::emit.
        let out = buffer
            .first_chunk_mut::<COMPLETION_LEN>()
            .ok_or(Error::BufferTooSmall)?;
        out[0..2].copy_from_slice(&[KIND_COMPLETION, 0]);
        out[2..4].copy_from_slice(&(COMPLETION_LEN as u16).to_le_bytes());
        out[4..8].copy_from_slice(&self.tag.to_le_bytes());
        out[8..12].copy_from_slice(&self.handle.to_le_bytes());
        out[12..16].copy_from_slice(&self.status.to_le_bytes());
        Ok(COMPLETION_LEN)
    }
}

/// Event types, in the kernel's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    ConnectRequest = 1,
    ConnectReply = 2,
    Established = 3,
    Disconnect = 4,
    Close = 5,
}

impl EventKind {
    pub fn from_u8(value: u8) -> Option<EventKind> {
        use EventKind::*;
        [ConnectRequest, ConnectReply, Established, Disconnect, Close]
            .get(usize::from(value).wrapping_sub(1))
            .copied()
    }
}

/// Something that happened to a connection, numbered so none is lost or duplicated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Event<'a> {
    pub seq: u32,
    pub kind: EventKind,
    pub conn: u32,
    /// The listener a CONNECT_REQUEST arrived on; 0 otherwise.
    pub listener: u32,
    /// 0 or a negative errno.
    pub status: i32,
    pub local: Endpoint,
    pub remote: Endpoint,
    pub ird: u16,
    pub ord: u16,
    /// CONNECT_REPLY 0 and ESTABLISHED in peer-to-peer mode: the RTR that began FPDU
    /// mode (one type); [`RtrTypes::NONE`] otherwise.
    pub rtr: RtrTypes,
    pub private_data: &'a [u8],
}

/// The flags byte of an event whose RTR is `rtr`.
fn rtr_flags(rtr: RtrTypes) -> u8 {
    let [send, write, read] = FLAGS_EVENT_RTR;
    (u8::from(rtr.send) * send) | (u8::from(rtr.write) * write) | (u8::from(rtr.read) * read)
}

/// Whether `flags` name at most one RTR, and only on an event that may name one.
fn rtr_flags_valid(flags: u8, kind: EventKind, status: i32) -> bool {
    // (Most events name none: one compare on their way.)
    flags == 0 || (flags.is_power_of_two() && Event::may_name_rtr(kind, status))
}

impl<'a> Event<'a> {
    /// Whether an event of this kind and status ends a setup in FPDU mode, and so names
    /// peer-to-peer mode's RTR: CONNECT_REPLY 0 and ESTABLISHED.
    pub fn may_name_rtr(kind: EventKind, status: i32) -> bool {
        match kind {
            EventKind::ConnectReply => status == 0,
            EventKind::Established => true,
            _ => false,
        }
    }

    pub fn parse(bytes: &'a [u8]) -> Result<Event<'a>> {
        let (kind, flags, len, seq) = parse_header(bytes)?;
        let event_kind = match kind {
            k if k & KIND_EVENT != 0 => {
                EventKind::from_u8(k & !KIND_EVENT).ok_or(Error::Malformed)?
            }
            _ => return Err(Error::Malformed),
        };
        let status = le32(bytes, 16)? as i32;
        let local = Endpoint::parse(bytes.get(24..).unwrap_or(&[]))?;
        let remote = Endpoint::parse(bytes.get(44..).unwrap_or(&[]))?;
        let private_data = parse_private_data(bytes, 64, len)?;
        let rtr = RtrTypes {
            send: flags & FLAGS_EVENT_RTR[0] != 0,
            write: flags & FLAGS_EVENT_RTR[1] != 0,
            read: flags & FLAGS_EVENT_RTR[2] != 0,
        };
        if flags != rtr_flags(rtr) || !rtr_flags_valid(flags, event_kind, status) || status > 0 {
            return Err(Error::Malformed);
        }
        Ok(Event {
            seq,
            kind: event_kind,
            conn: le32(bytes, 8)?,
            listener: le32(bytes, 12)?,
            status,
            local: local.ok_or(Error::Malformed)?,
            remote: remote.ok_or(Error::Malformed)?,
            ird: le16(bytes, 20)?,
            ord: le16(bytes, 22)?,
            rtr,
            private_data,
        })
    }

    pub fn buffer_len(&self) -> usize {
        EVENT_FIXED_LEN + self.private_data.len()
    }

    /// Written at constant offsets of the fixed part, in place in the host queue's slot.
    /// Inlined, so a caller writing into a [`RecordBuffer`] gets word stores.
    #[inline]
    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        check_private_data(self.private_data)?;
        let flags = rtr_flags(self.rtr);
        if self.status > 0 || !rtr_flags_valid(flags, self.kind, self.status) {
            return Err(Error::Malformed);
        }
        let len = self.buffer_len();
        let out = buffer.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let (f, private_data) = out
            .split_first_chunk_mut::<EVENT_FIXED_LEN>()
            .ok_or(Error::BufferTooSmall)?;
        f[0..2].copy_from_slice(&[KIND_EVENT | self.kind as u8, flags]);
        f[2..4].copy_from_slice(&(len as u16).to_le_bytes());
        f[4..8].copy_from_slice(&self.seq.to_le_bytes());
        f[8..12].copy_from_slice(&self.conn.to_le_bytes());
        f[12..16].copy_from_slice(&self.listener.to_le_bytes());
        f[16..20].copy_from_slice(&self.status.to_le_bytes());
        f[20..22].copy_from_slice(&self.ird.to_le_bytes());
        f[22..24].copy_from_slice(&self.ord.to_le_bytes());
        let (local, remote) = f[24..64].split_at_mut(ENDPOINT_LEN);
        let (Ok(local), Ok(remote)) = (local.try_into(), remote.try_into()) else {
            return Err(Error::BufferTooSmall); // not reached: both are 20 bytes
        };
        self.local.emit_into(local);
        self.remote.emit_into(remote);
        f[64..66].copy_from_slice(&(self.private_data.len() as u16).to_le_bytes());
        f[66..68].copy_from_slice(&[0, 0]);
        // Most events carry none: no call to copy nothing.
        if !self.private_data.is_empty() {
            private_data.copy_from_slice(self.private_data);
        }
        Ok(len)
    }
}

/// Any record, told apart by its kind byte (the host link carries all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Record<'a> {
    Command(CommandRecord<'a>),
    Completion(Completion),
    Event(Event<'a>),
}

impl<'a> Record<'a> {
    /// Length of the record at the start of `bytes`, from its header: how much of a
    /// stream of records to take next.
    pub fn record_len(bytes: &[u8]) -> Result<usize> {
        let len = usize::from(le16(bytes, 2)?);
        if !(COMPLETION_LEN..=MAX_RECORD_LEN).contains(&len) {
            return Err(Error::Malformed);
        }
        Ok(len)
    }

    pub fn parse(bytes: &'a [u8]) -> Result<Record<'a>> {
        match *bytes.first().ok_or(Error::Truncated)? {
            KIND_COMPLETION => Completion::parse(bytes).map(Record::Completion),
            k if k & KIND_EVENT != 0 => Event::parse(bytes).map(Record::Event),
            _ => CommandRecord::parse(bytes).map(Record::Command),
        }
    }

    pub fn buffer_len(&self) -> usize {
        match self {
            Record::Command(c) => c.buffer_len(),
            Record::Completion(c) => c.buffer_len(),
            Record::Event(e) => e.buffer_len(),
        }
    }

    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize> {
        match self {
            Record::Command(c) => c.emit(buffer),
            Record::Completion(c) => c.emit(buffer),
            Record::Event(e) => e.emit(buffer),
        }
    }
}
