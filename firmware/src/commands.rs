//! Host commands (`spec/iwcm.md`): each completes with a status, exactly once.

use iwnic_proto::errno::{
    EADDRINUSE, EADDRNOTAVAIL, ECONNRESET, EHOSTUNREACH, EINVAL, ENOBUFS, ENOMEM,
};
use iwnic_proto::host::{Command, CommandRecord, Endpoint, EventKind, IpAddr};
use iwnic_proto::mpa::{FrameRepr, RtrTypes, MAX_PRIVATE_DATA, V2_BLOCK_LEN};
use smoltcp::wire::TcpControl;

use crate::hal::{is_peer_address, FlowWrite, FourTuple, Nic};
use crate::log::fw_warn;
use crate::machine::{
    next_generation, ListenAddr, Listener, Lookup, Machine, Owed, Payload, PrivateData, State,
    MAX_LISTENERS,
};
use crate::negotiation;

/// Backlog of a listen with backlog 0 (the kernel's iw_cm `default_backlog`).
const DEFAULT_BACKLOG: u32 = 256;

impl<const N: usize, const B: usize> Machine<N, B> {
    pub(crate) fn on_command<H: Nic>(&mut self, nic: &mut H, bytes: &[u8]) {
        let record = match CommandRecord::parse(bytes) {
            Ok(record) => record,
            Err(_) => {
                self.counters.bad_commands += 1;
                fw_warn!("undecodable host command of {=usize} bytes", bytes.len());
                // A readable header still gets its answer, so the host never waits forever.
                if let Some(tag) = bytes.get(4..8) {
                    let tag = u32::from_le_bytes([tag[0], tag[1], tag[2], tag[3]]);
                    self.complete(nic, tag, -EINVAL, 0);
                }
                return;
            }
        };
        let tag = record.tag;
        match record.command {
            Command::Listen { local, backlog } => {
                let (status, handle) = match self.listen(local, backlog) {
                    Ok(handle) => (0, handle),
                    Err(errno) => (-errno, 0),
                };
                self.complete(nic, tag, status, handle);
            }
            Command::Unlisten { listener } => {
                let status = self.unlisten(nic, listener);
                self.complete(nic, tag, status, 0);
            }
            Command::Connect {
                local,
                remote,
                ird,
                ord,
                qpn: _,
                mpa_v1,
                private_data,
            } => {
                let (status, handle) =
                    match self.connect(nic, local, remote, ird, ord, mpa_v1, private_data) {
                        Ok(handle) => (0, handle),
                        Err(errno) => (-errno, 0),
                    };
                self.complete(nic, tag, status, handle);
            }
            Command::Accept {
                conn,
                ird,
                ord,
                qpn: _,
                private_data,
            } => self.accept(nic, tag, conn, ird, ord, private_data),
            Command::Reject { conn, private_data } => {
                let status = self.reject(nic, conn, private_data);
                self.complete(nic, tag, status, 0);
            }
            Command::Disconnect { conn, abrupt } => self.disconnect(nic, tag, conn, abrupt),
            Command::Release { conn } => self.release(nic, tag, conn),
            Command::Delivered { conn } => {
                let status = self.delivered(conn);
                self.complete(nic, tag, status, 0);
            }
        }
    }

    fn local_ip(&self, local: &Endpoint) -> Result<[u8; 4], i32> {
        match local.addr {
            IpAddr::V4(ip) if ip == self.config.ip || ip == [0; 4] => Ok(ip),
            _ => Err(EADDRNOTAVAIL),
        }
    }

    fn listen(&mut self, local: Endpoint, backlog: u32) -> Result<u32, i32> {
        let ip = self.local_ip(&local)?;
        if local.port == 0 {
            return Err(EINVAL);
        }
        let local = ListenAddr {
            ip,
            port: local.port,
        };
        let taken = self.listeners.iter().flatten().any(|l| l.local == local);
        if taken {
            return Err(EADDRINUSE);
        }
        let slot = (0..MAX_LISTENERS)
            .map(|k| (usize::from(self.next_listener_slot) + k) % MAX_LISTENERS)
            .find(|&slot| self.listeners[slot].is_none())
            .ok_or(ENOMEM)?;
        self.next_listener_slot = ((slot + 1) % MAX_LISTENERS) as u8;
        let generation = self.listener_generations[slot];
        self.listening |= 1 << slot;
        self.listeners[slot] = Some(Listener {
            local,
            backlog: if backlog == 0 {
                DEFAULT_BACKLOG
            } else {
                backlog
            },
            pending: 0,
            half_open: 0,
            generation,
        });
        Ok(u32::from(generation) << 16 | slot as u32)
    }

    pub(crate) fn listener_index(&self, handle: u32) -> Option<usize> {
        let (slot, generation) = ((handle & 0xFFFF) as usize, (handle >> 16) as u16);
        match self.listeners.get(slot) {
            Some(Some(l)) if l.generation == generation => Some(slot),
            _ => None,
        }
    }

    /// Stop listening. Requests never raised to the host are dropped and their connections
    /// reset; raised ones survive (rule 10).
    fn unlisten<H: Nic>(&mut self, nic: &mut H, handle: u32) -> i32 {
        let Some(slot) = self.listener_index(handle) else {
            return -EINVAL;
        };
        self.listeners[slot] = None;
        self.listening &= !(1 << slot);
        self.listener_generations[slot] = next_generation(self.listener_generations[slot]);
        for i in 0..N {
            if usize::from(self.conns[i].listener) != slot {
                continue;
            }
            match self.conns[i].state {
                State::SynReceived | State::AwaitRequest => self.abort(nic, i, -ECONNRESET),
                _ => self.leave_listener(i),
            }
        }
        0
    }

    /// The listener for a SYN to `tuple`: an exact address first, then the wildcard.
    /// One pass over the open listeners only, the port compared first.
    pub(crate) fn find_listener(&self, tuple: &FourTuple) -> Option<usize> {
        let mut wildcard = None;
        for (slot, l) in self.listeners.iter().enumerate() {
            if self.listening >> slot == 0 {
                break; // no listener open from here on
            }
            let Some(l) = l else { continue };
            if l.local.port != tuple.local_port {
                continue;
            }
            // As words: compared as byte arrays, the compiler loads each byte.
            match u32::from_ne_bytes(l.local.ip) {
                ip if ip == u32::from_ne_bytes(tuple.local_ip) => return Some(slot),
                0 if wildcard.is_none() => wildcard = Some(slot),
                _ => {}
            }
        }
        wildcard
    }

    fn check_limits(
        &self,
        ird: u16,
        ord: u16,
        private_data: &[u8],
        enhanced: bool,
    ) -> Result<(), i32> {
        let room = MAX_PRIVATE_DATA - if enhanced { V2_BLOCK_LEN } else { 0 };
        if ird > self.config.max_ird || ord > self.config.max_ord || private_data.len() > room {
            return Err(EINVAL);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn connect<H: Nic>(
        &mut self,
        nic: &mut H,
        local: Endpoint,
        remote: Endpoint,
        ird: u16,
        ord: u16,
        mpa_v1: bool,
        private_data: &[u8],
    ) -> Result<u32, i32> {
        self.local_ip(&local)?;
        let IpAddr::V4(remote_ip) = remote.addr else {
            return Err(EADDRNOTAVAIL);
        };
        if remote.port == 0 {
            return Err(EINVAL);
        }
        // RFC 1122 §4.2.3.10: an open to an invalid remote address is an error. cxgb4
        // answers a connect it finds no route for with -EHOSTUNREACH.
        if !is_peer_address(remote_ip, self.config.ip) {
            return Err(EHOSTUNREACH);
        }
        self.check_limits(ird, ord, private_data, !mpa_v1)?;
        let mut tuple = FourTuple {
            local_ip: self.config.ip,
            local_port: local.port,
            remote_ip,
            remote_port: remote.port,
        };
        // No free local port is -EADDRNOTAVAIL, as the rdma_cm's `cma_alloc_any_port`
        // has it for a used-up ephemeral range, and TCP's `__inet_check_established` for
        // a bound port whose 4-tuple is taken.
        if tuple.local_port == 0 {
            tuple.local_port = self.ephemeral_port(&tuple).ok_or(EADDRNOTAVAIL)?;
        } else if self.find(&tuple).is_some() {
            return Err(EADDRNOTAVAIL);
        }
        let i = self
            .alloc(tuple, self.config.next_hop_mac, State::SynSent)
            .ok_or(ENOMEM)?;
        if self.take_buffer_for_host(nic, i).is_none() {
            self.free(i);
            return Err(ENOBUFS);
        }
        let iss = self.isn(&tuple);
        let (request, neg) =
            negotiation::request(mpa_v1, ird, ord, self.config.max_ord, private_data);
        if self.stage(i, iss.wrapping_add(1), &request).is_err() {
            self.free(i);
            return Err(EINVAL);
        }
        let c = &mut self.conns[i];
        c.neg = neg;
        c.owed = Owed::ConnectReply;
        c.snd_una = iss;
        c.snd_nxt = iss.wrapping_add(1);
        self.send(nic, i, TcpControl::Syn, iss, Payload::NONE);
        self.arm(i, true, false);
        Ok(self.handle(i))
    }

    /// Put an MPA frame in connection `i`'s buffer as the stream bytes from `seq`.
    pub(crate) fn stage(&mut self, i: usize, seq: u32, frame: &FrameRepr) -> Result<usize, ()> {
        self.buffer_mut(i).ok_or(())?.stage(seq, frame)
    }

    fn ephemeral_port(&mut self, tuple: &FourTuple) -> Option<u16> {
        let base = self.config.ephemeral_port_base;
        let span = u32::from(u16::MAX - base) + 1;
        for _ in 0..span {
            let port = base + (self.next_port as u32 % span) as u16;
            self.next_port = self.next_port.wrapping_add(1);
            // Port 0 is no port (RFC 9293): a base of 0 skips it.
            if port == 0 {
                continue;
            }
            let candidate = FourTuple {
                local_port: port,
                ..*tuple
            };
            if self.find(&candidate).is_none() {
                return Some(port);
            }
        }
        None
    }

    /// Send the stream bytes staged in the buffer (a reply): one segment, optionally
    /// with FIN, and the retransmission timer. Inlined, as the setup path's other small
    /// steps (`raise`, `install_flow`, `leave_listener`): out of line each paid a call
    /// and saved registers for a few loads and stores (together −117 instructions a
    /// setup, and less code).
    #[inline(always)]
    pub(crate) fn send_staged<H: Nic>(&mut self, nic: &mut H, i: usize, fin: bool) {
        let len = self.buffer(i).map_or(0, |b| b.tx().len());
        let seq = self.conns[i].snd_nxt;
        let control = if fin {
            TcpControl::Fin
        } else {
            TcpControl::Psh
        };
        self.send(nic, i, control, seq, Payload::Buffered { skip: 0 });
        let c = &mut self.conns[i];
        c.snd_nxt = seq.wrapping_add(len as u32 + u32::from(fin));
        self.reset_backoff(i);
    }

    /// Accept a raised request: send the reply, hand the flow to the datapath and
    /// complete. In peer-to-peer mode ESTABLISHED waits for the initiator's RTR
    /// ([`Owed::Established`]).
    fn accept<H: Nic>(
        &mut self,
        nic: &mut H,
        tag: u32,
        conn: u32,
        ird: u16,
        ord: u16,
        private_data: &[u8],
    ) {
        let i = match self.lookup(conn) {
            Lookup::Live(i) if self.conns[i].state == State::AwaitAccept => i,
            Lookup::Gone => return self.complete(nic, tag, -ECONNRESET, 0),
            _ => return self.complete(nic, tag, -EINVAL, 0),
        };
        let handle = self.handle(i);
        // A failed accept leaves the id IDLE with no events ever: the connection goes quietly.
        let fail = |fw: &mut Self, nic: &mut H, errno: i32| {
            fw.detach(i);
            fw.abort(nic, i, -errno);
            fw.complete(nic, tag, -errno, handle);
        };
        if let Err(errno) = self.check_limits(ird, ord, private_data, self.conns[i].neg.enhanced) {
            return fail(self, nic, errno);
        }
        if self.take_buffer_for_host(nic, i).is_none() {
            return fail(self, nic, ENOBUFS);
        }
        let (reply, neg) = negotiation::accept(self.conns[i].neg, ird, ord, private_data);
        let seq = self.conns[i].snd_nxt;
        if self.stage(i, seq, &reply).is_err() {
            return fail(self, nic, EINVAL);
        }
        self.leave_listener(i);
        self.conns[i].neg = neg;
        self.send_staged(nic, i, false);
        // A flow the datapath cannot carry fails the accept, as a provider out of
        // hardware connection slots does (-ENOMEM); the peer gets a reset after the reply.
        if self
            .install_flow(nic, i, neg.peer_to_peer, FlowWrite::Install)
            .is_err()
        {
            return fail(self, nic, ENOMEM);
        }
        // A Read RTR is answered with a Read Response before our first FPDU, which the
        // firmware sends: the flow stays off the datapath until the RTR has come here.
        // (It went in to be sure it fits; the RTR cannot come before the reply it
        // answers, which this poll sends.)
        if neg.rtr == RtrTypes::READ {
            self.take_back_flow(nic, i);
        }
        self.complete(nic, tag, 0, handle);
        if neg.peer_to_peer {
            self.conns[i].state = State::AwaitRtr;
            self.conns[i].owed = Owed::Established;
            self.conns[i].phase_deadline = self.after(self.timeouts.mpa_reply);
            self.arm(i, true, true);
        } else {
            self.conns[i].state = State::Established;
            self.arm(i, true, false);
            self.established(nic, i, EventKind::Established, PrivateData::None);
        }
    }

    /// Raise ESTABLISHED or CONNECT_REPLY 0 and count the connection.
    pub(crate) fn established<H: Nic>(
        &mut self,
        nic: &mut H,
        i: usize,
        kind: EventKind,
        private_data: PrivateData<'_>,
    ) {
        self.counters.connections_established += 1;
        self.conns[i].owed = Owed::Close;
        self.raise(nic, i, kind, 0, private_data);
    }

    /// Reject a raised request: a reply with R=1 and the private data, then FIN.
    fn reject<H: Nic>(&mut self, nic: &mut H, conn: u32, private_data: &[u8]) -> i32 {
        let i = match self.lookup(conn) {
            Lookup::Live(i) if self.conns[i].state == State::AwaitAccept => i,
            Lookup::Gone => return -ECONNRESET,
            _ => return -EINVAL,
        };
        if self
            .check_limits(0, 0, private_data, self.conns[i].neg.enhanced)
            .is_err()
        {
            return -EINVAL;
        }
        self.detach(i);
        // The host's answer takes a buffer as its accept would: the peer is owed the
        // reply with R=1 and the private data, not a reset (which it gets, counted,
        // only when no buffer can be had).
        match self.take_buffer_for_host(nic, i) {
            Some(_) => self.send_reject(nic, i, private_data),
            None => self.abort(nic, i, -ECONNRESET),
        }
        0
    }

    /// Reply with R=1 and close gracefully, telling the host nothing.
    pub(crate) fn send_reject<H: Nic>(&mut self, nic: &mut H, i: usize, private_data: &[u8]) {
        self.leave_listener(i);
        let neg = self.conns[i].neg;
        let frame = negotiation::reject(&neg, private_data);
        let seq = self.conns[i].snd_nxt;
        if self.take_buffer(nic, i).is_none() || self.stage(i, seq, &frame).is_err() {
            return self.abort(nic, i, -ECONNRESET);
        }
        self.counters.mpa_rejects_sent += 1;
        self.send_staged(nic, i, true);
        self.conns[i].state = State::FinWait1;
        self.arm(i, true, false);
    }

    fn disconnect<H: Nic>(&mut self, nic: &mut H, tag: u32, conn: u32, abrupt: bool) {
        let i = match self.lookup(conn) {
            Lookup::Live(i) => i,
            // Already closed: nothing to do, as in IDLE.
            Lookup::Gone => return self.complete(nic, tag, 0, 0),
            Lookup::Unknown => return self.complete(nic, tag, -EINVAL, 0),
        };
        let handle = self.handle(i);
        match self.conns[i].state {
            State::Established if abrupt => {
                self.complete(nic, tag, 0, handle);
                self.abort(nic, i, -ECONNRESET);
            }
            State::Established => {
                self.complete(nic, tag, 0, handle);
                self.take_back_flow(nic, i);
                self.close_gracefully(nic, i);
            }
            // A connection still being set up is given up: the host hears the one reply.
            State::SynSent | State::AwaitReply | State::AwaitRtrAck | State::AwaitRtr => {
                self.complete(nic, tag, 0, handle);
                self.abort(nic, i, -ECONNRESET);
            }
            // CONN_RECV and CLOSING: a no-op.
            _ => self.complete(nic, tag, 0, handle),
        }
    }

    /// The application has had `conn`'s request and not answered it yet: the request
    /// leaves its listener, whose backlog bounds requests not yet delivered (rule 10,
    /// as the kernel's work entries do), and survives it. Once only; an answered or
    /// dead request is refused as an accept would be.
    fn delivered(&mut self, conn: u32) -> i32 {
        match self.lookup(conn) {
            Lookup::Live(i) if self.conns[i].state == State::AwaitAccept => {
                self.leave_listener(i);
                0
            }
            Lookup::Gone => -ECONNRESET,
            _ => -EINVAL,
        }
    }

    /// The host forgets the connection: it is aborted if open, and raises nothing more.
    fn release<H: Nic>(&mut self, nic: &mut H, tag: u32, conn: u32) {
        let i = match self.lookup(conn) {
            Lookup::Live(i) => i,
            Lookup::Gone => return self.complete(nic, tag, 0, 0),
            Lookup::Unknown => return self.complete(nic, tag, -EINVAL, 0),
        };
        self.detach(i);
        match self.conns[i].state {
            // Let a graceful close finish on the wire, silently.
            State::FinWait1
            | State::FinWait2
            | State::Closing
            | State::TimeWait
            | State::LastAck => {}
            _ => self.abort(nic, i, -ECONNRESET),
        }
        self.complete(nic, tag, 0, 0);
    }
}

// Listener slots are indexed by u8 in connection entries.
const _: () = assert!(MAX_LISTENERS < u8::MAX as usize);
