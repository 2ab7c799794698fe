//! Frames from the firmware RX queue and datapath reports, per connection state.

use iwnic_proto::ddp::{llp_code, Body, MessageRepr, ReadRequestRepr, TerminateRepr};
use iwnic_proto::errno::{ECONNREFUSED, ECONNRESET, EINVAL};
use iwnic_proto::fpdu::{fpdu_len, FpduRepr};
use iwnic_proto::host::EventKind;
use iwnic_proto::mpa::{Frame, FrameRepr, RtrTypes, MAX_FRAME_LEN as MPA_MAX_FRAME_LEN};
use iwnic_proto::net::{RxDescriptor, TcpSegment};
use iwnic_proto::Error;
use smoltcp::wire::TcpControl;

use crate::hal::{is_peer_address, FlowEvent, FlowEventKind, FlowWrite, FourTuple, Nic};
use crate::machine::{
    Machine, NegotiationBuffer, Owed, Payload, PrivateData, State, MAX_WINDOW_SHIFT,
    NO_WINDOW_SCALING, RECORDS_PER_INPUT,
};
use crate::negotiation::{self, Negotiation, Refusal, ReplyVerdict};

/// Bytes staged to follow the negotiation buffer's others: from `seq`, at `skip` in it.
#[derive(Clone, Copy)]
struct Staged {
    seq: u32,
    skip: usize,
}

enum RtrError {
    Crc,
    Mismatch,
}

/// The initiator's RTR at the start of `rx`: its FPDU length once complete and of the
/// `agreed` type, `None` while incomplete.
fn judge_rtr(rx: &[u8], agreed: RtrTypes) -> Result<Option<usize>, RtrError> {
    // Header prediction: the agreed RTR byte for byte as iwnic sends it has a good CRC
    // and is that type; computing the CRC costs several times the compare.
    if let Some(total) = MessageRepr::starts_with_rtr_fpdu(rx, agreed) {
        return Ok(Some(total));
    }
    let Some(&[hi, lo]) = rx.first_chunk() else {
        return Ok(None);
    };
    let total = fpdu_len(usize::from(u16::from_be_bytes([hi, lo])));
    if total > MPA_MAX_FRAME_LEN {
        return Err(RtrError::Mismatch);
    }
    let Some(fpdu) = rx.get(..total) else {
        return Ok(None);
    };
    match FpduRepr::parse(fpdu).map(|f| MessageRepr::rtr_type_of(f.ulpdu)) {
        Ok(rtr) if rtr == Some(agreed) => Ok(Some(total)),
        Err(Error::BadCrc { .. }) => Err(RtrError::Crc),
        _ => Err(RtrError::Mismatch),
    }
}

/// The Read Request in a Read RTR FPDU that `judge_rtr` took (its sink buffer is all a
/// zero-length response needs).
fn read_request_of(rtr: &[u8]) -> ReadRequestRepr {
    match FpduRepr::parse(rtr).and_then(|f| MessageRepr::parse(f.ulpdu)) {
        Ok(MessageRepr {
            body: Body::ReadRequest(request),
            ..
        }) => request,
        _ => ReadRequestRepr::default(),
    }
}

/// Whether a segment's `ack` may be taken with our `snd_una` and `snd_nxt`: it
/// acknowledges nothing never sent (RFC 9293 §3.10.7.4, fifth check) and is no further
/// back than the largest window the peer can advertise with its `window_shift`, for
/// RFC 5961 §5.2's MAX.SND.WND (kept per connection by Linux, bounded here by what the
/// window field can say, so no valid ACK is refused).
fn ack_acceptable(ack: u32, snd_una: u32, snd_nxt: u32, window_shift: u8) -> bool {
    let shift = match window_shift {
        NO_WINDOW_SCALING => 0,
        shift => shift.min(MAX_WINDOW_SHIFT),
    };
    let max_window = i64::from(u16::MAX) << shift;
    seq_diff(ack, snd_nxt) <= 0 && i64::from(seq_diff(ack, snd_una)) >= -max_window
}

/// The smallest MSS taken from a peer (Linux's TCP_MIN_MSS).
const MIN_PEER_MSS: u16 = 88;

/// Signed distance from `b` to `a` on the sequence-number circle.
fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

impl<const N: usize, const B: usize> Machine<N, B> {
    pub(crate) fn on_frame<H: Nic>(
        &mut self,
        nic: &mut H,
        descriptor: &RxDescriptor,
        frame: &[u8],
    ) {
        let Ok(seg) = TcpSegment::from_descriptor(descriptor, frame, self.config.checksums) else {
            self.counters.frames_ignored += 1;
            return;
        };
        if seg.dst_ip != self.config.ip {
            self.counters.frames_ignored += 1;
            return;
        }
        let tuple = FourTuple {
            local_ip: self.config.ip,
            local_port: seg.dst_port,
            remote_ip: seg.src_ip,
            remote_port: seg.src_port,
        };
        match self.find(&tuple) {
            Some(i) => self.on_segment(nic, i, &seg),
            None => self.on_unmatched(nic, tuple, &seg),
        }
    }

    fn on_unmatched<H: Nic>(&mut self, nic: &mut H, tuple: FourTuple, seg: &TcpSegment) {
        // A segment from an address no peer can have opens nothing and draws no RST
        // (RFC 1122 §4.2.3.10; Linux drops such martians).
        if !is_peer_address(tuple.remote_ip, tuple.local_ip) {
            self.counters.frames_ignored += 1;
            return;
        }
        if seg.control == TcpControl::Syn && seg.ack.is_none() {
            if let Some(l) = self.find_listener(&tuple) {
                return self.on_syn(nic, l, tuple, seg);
            }
        }
        self.counters.segments_unmatched += 1;
        // An RST is never answered (RFC 9293 §3.10.7.1).
        if seg.control != TcpControl::Rst {
            self.reset_reply(nic, tuple, *seg.src_mac, seg);
        }
    }

    /// RST in answer to a segment no connection takes (RFC 9293 §3.10.7.1). Cold: kept
    /// out of the frame path's registers (measured: −39 instructions a setup).
    #[cold]
    fn reset_reply<H: Nic>(
        &mut self,
        nic: &mut H,
        tuple: FourTuple,
        remote_mac: [u8; 6],
        seg: &TcpSegment,
    ) {
        let (seq, ack) = match seg.ack {
            Some(ack) => (ack, None),
            None => (0, Some(seg.seq.wrapping_add(seg.segment_len()))),
        };
        self.send_stray(nic, &tuple, remote_mac, TcpControl::Rst, seq, ack, 0);
    }

    fn on_syn<H: Nic>(&mut self, nic: &mut H, l: usize, tuple: FourTuple, seg: &TcpSegment) {
        let Some(listener) = self.listeners[l] else {
            return;
        };
        if listener.half_open >= self.config.half_open_limit {
            self.counters.syn_dropped_half_open += 1;
            return;
        }
        let Some(i) = self.alloc(tuple, *seg.src_mac, State::SynReceived) else {
            return;
        };
        let iss = self.isn(&tuple);
        let c = &mut self.conns[i];
        c.listener = l as u8;
        c.rcv_nxt = seg.seq.wrapping_add(1);
        c.snd_una = iss;
        c.snd_nxt = iss.wrapping_add(1);
        self.take_peer_options(i, seg);
        if let Some(Some(l)) = self.listeners.get_mut(l) {
            l.half_open += 1;
        }
        self.send(nic, i, TcpControl::Syn, iss, Payload::NONE);
        self.arm(i, true, false);
    }

    /// The listener of `seg`, a new SYN for connection `i` in TIME_WAIT, if `i` gives way
    /// to it and is gone: RFC 1122 §4.2.2.13 lets a SYN above the old connection's
    /// numbers reopen it (Linux's `TCP_TW_SYN`, RFC 6191) if the new ISS lies above every
    /// number the old one used, which the ISN clock gives unless that connection sent
    /// more bytes than the clock has moved since it began. Otherwise the SYN gets the
    /// challenge ACK of any synchronized state. Cold and out of line: only SYNs of
    /// known tuples.
    #[cold]
    #[inline(never)]
    fn time_wait_gives_way(&mut self, i: usize, seg: &TcpSegment) -> Option<usize> {
        let c = &self.conns[i];
        let reopens = c.state == State::TimeWait
            && seg.ack.is_none()
            && seq_diff(seg.seq, c.rcv_nxt) > 0
            && seq_diff(self.isn(&c.tuple), c.snd_nxt) > 0;
        let listener = self.find_listener(&c.tuple).filter(|_| reopens)?;
        self.counters.time_wait_reopened += 1;
        self.free(i);
        Some(listener)
    }

    fn take_peer_options(&mut self, i: usize, seg: &TcpSegment) {
        let c = &mut self.conns[i];
        // RFC 9293's default without the option, or with an MSS of 0, which Linux's
        // `tcp_parse_options` skips; a smaller MSS than Linux's floor (TCP_MIN_MSS) is
        // raised to it, so a peer cannot have every MPA frame sent in slivers.
        c.peer_mss = match seg.max_seg_size {
            None | Some(0) => 536,
            Some(mss) => mss.max(MIN_PEER_MSS),
        };
        c.peer_window_shift = seg.window_scale.unwrap_or(NO_WINDOW_SCALING);
        c.peer_window = seg.window;
    }

    fn on_segment<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        if seg.control == TcpControl::Rst {
            return self.on_rst(nic, i, seg);
        }
        let state = self.conns[i].state;
        match state {
            State::SynSent => self.in_syn_sent(nic, i, seg),
            State::SynReceived => self.in_syn_received(nic, i, seg),
            // Header prediction: the next bytes of the negotiation, in order, acknowledging
            // all we sent. The stream path would take them the same way through every
            // check (the ACK moves no state in these states). Measured: −52 instructions
            // a setup, from the MPA request and the RTR.
            State::AwaitRequest | State::AwaitRtr | State::AwaitReply if self.in_order(i, seg) => {
                self.take_ack(i, self.conns[i].snd_nxt, seg.window);
                match state {
                    State::AwaitRequest => self.request_bytes(nic, i, seg.payload, false),
                    State::AwaitRtr => self.rtr_bytes(nic, i, seg.payload, false),
                    _ => self.reply_bytes(nic, i, seg.payload, false),
                }
            }
            _ => self.in_stream(nic, i, seg),
        }
    }

    /// `seg` is the next bytes of the stream and acknowledges all we sent, with no
    /// control flag that needs the stream path.
    fn in_order(&self, i: usize, seg: &TcpSegment) -> bool {
        let c = &self.conns[i];
        self.config.header_prediction
            && matches!(seg.control, TcpControl::None | TcpControl::Psh)
            && seg.ack == Some(c.snd_nxt)
            && seg.seq == c.rcv_nxt
            && !seg.payload.is_empty()
    }

    /// RFC 9293 §3.10.7.4 first check, with RFC 5961 §3.2: after SYN-SENT only an RST
    /// at exactly `rcv_nxt` resets; one elsewhere in the receive window gets a challenge
    /// ACK (a peer that really reset answers it with an exact RST); others are dropped.
    fn on_rst<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        let c = &self.conns[i];
        if c.state == State::SynSent {
            if seg.ack != Some(c.snd_nxt) {
                self.counters.segments_out_of_order += 1;
                return;
            }
            self.counters.resets_received += 1;
            return self.drop_connection(nic, i, -ECONNREFUSED);
        }
        let Some((_, rcv_nxt)) = self.current_numbers(nic, i) else {
            return self.flow_lost(nic, i, seg);
        };
        let offset = seq_diff(seg.seq, rcv_nxt);
        if offset == 0 {
            self.counters.resets_received += 1;
            return self.drop_connection(nic, i, -ECONNRESET);
        }
        if offset < 0 || offset as u32 >= self.receive_window(i) {
            self.counters.segments_out_of_order += 1;
            return;
        }
        if self.challenge(nic, i) {
            self.counters.resets_challenged += 1;
        }
    }

    fn in_syn_sent<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        let snd_nxt = self.conns[i].snd_nxt;
        match (seg.control, seg.ack) {
            (TcpControl::Syn, Some(ack)) if ack == snd_nxt => {
                self.time_handshake(i);
                let c = &mut self.conns[i];
                c.rcv_nxt = seg.seq.wrapping_add(1);
                c.snd_una = ack;
                c.remote_mac = *seg.src_mac;
                self.take_peer_options(i, seg);
                self.send_ack(nic, i);
                self.send_staged(nic, i, false);
                self.conns[i].state = State::AwaitReply;
                self.conns[i].phase_deadline = self.after(self.timeouts.mpa_reply);
                self.arm(i, true, true);
            }
            (_, Some(ack)) if ack != snd_nxt => {
                let (tuple, mac) = (self.conns[i].tuple, *seg.src_mac);
                self.reset_reply(nic, tuple, mac, seg);
            }
            // A SYN without ACK (simultaneous open) is not supported: the peer retries.
            _ => {}
        }
    }

    fn in_syn_received<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        let (snd_una, snd_nxt) = (self.conns[i].snd_una, self.conns[i].snd_nxt);
        match seg.ack {
            // The peer sent its SYN again: our SYN-ACK was lost. Answered at most once
            // an interval, as Linux's `tcp_check_req` does, so copies of a SYN cannot
            // draw a SYN-ACK each (the peer's own retransmissions are seconds apart).
            None if seg.control == TcpControl::Syn => {
                if !self.invalid_ack_allowed(i) {
                    self.counters.syn_acks_limited += 1;
                    return;
                }
                self.counters.retransmissions += 1;
                self.send(nic, i, TcpControl::Syn, snd_una, Payload::NONE);
            }
            Some(ack) if ack == snd_nxt && seg.control != TcpControl::Syn => {
                self.time_handshake(i);
                self.conns[i].state = State::AwaitRequest;
                self.conns[i].phase_deadline = self.after(self.timeouts.mpa_request);
                // Header prediction for the usual third segment, the ACK alone at
                // rcv_nxt: all the stream path would do with it is take the ACK and the
                // window, done here without entering it (measured: −46 instructions a
                // setup). With anything else the stream path takes the ACK and what
                // rides with it.
                let bare = self.config.header_prediction
                    && seg.control == TcpControl::None
                    && seg.payload.is_empty()
                    && seg.seq == self.conns[i].rcv_nxt;
                if bare {
                    self.take_ack(i, ack, seg.window);
                }
                self.arm(i, false, true);
                if !bare {
                    self.in_stream(nic, i, seg);
                }
            }
            Some(_) => {
                let (tuple, mac) = (self.conns[i].tuple, self.conns[i].remote_mac);
                self.reset_reply(nic, tuple, mac, seg);
            }
            None => self.counters.segments_without_ack += 1,
        }
    }

    /// Every state after the handshake: the ACK first (it may move the state on), then
    /// the payload and FIN, taken strictly in order. A SYN, or a segment without ACK,
    /// takes nothing (RFC 9293 §3.10.7.4, fourth and fifth checks).
    fn in_stream<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        if seg.control == TcpControl::Syn {
            let tuple = self.conns[i].tuple;
            if let Some(l) = self.time_wait_gives_way(i, seg) {
                return self.on_syn(nic, l, tuple, seg);
            }
            if self.challenge(nic, i) {
                self.counters.syns_challenged += 1;
            }
            return;
        }
        let Some(ack) = seg.ack else {
            return self.without_ack(nic, i, seg);
        };
        let c = &self.conns[i];
        // On a flow the datapath carries, its numbers judge the ACK (`in_fpdu_mode`).
        if !c.datapath_numbers_current()
            && !ack_acceptable(ack, c.snd_una, c.snd_nxt, c.peer_window_shift)
        {
            return self.unacceptable_ack(nic, i);
        }
        let snd_una = c.snd_una;
        self.take_ack(i, ack, seg.window);
        self.after_ack(nic, i, snd_una);
        let fin = seg.control == TcpControl::Fin;
        match self.conns[i].state {
            State::Free => return,
            State::Established => return self.in_fpdu_mode(nic, i, seg),
            _ => {}
        }
        let offset = seq_diff(seg.seq, self.conns[i].rcv_nxt);
        if offset > 0 {
            self.counters.segments_out_of_order += 1;
            return self.duplicate_ack(nic, i, seg);
        }
        let skip = offset.unsigned_abs() as usize;
        let Some(payload) = seg.payload.get(skip..) else {
            // Entirely old, FIN included: our ACK was lost; send it again. In TIME_WAIT
            // that is the peer's FIN again, which restarts the wait (RFC 9293
            // §3.10.7.4, eighth step).
            if fin && self.conns[i].state == State::TimeWait {
                self.wait_two_msl(i);
            }
            return self.duplicate_ack(nic, i, seg);
        };
        if payload.is_empty() && !fin {
            if skip > 0 {
                self.send_ack(nic, i);
            }
            return;
        }
        match self.conns[i].state {
            State::AwaitRequest => self.request_bytes(nic, i, payload, fin),
            State::AwaitAccept => {
                // Bytes or FIN before our reply: a protocol error (spec/mpa.md).
                self.counters.mpa_extra_bytes += u32::from(!payload.is_empty());
                self.abort(nic, i, -ECONNRESET);
            }
            State::AwaitRtr => self.rtr_bytes(nic, i, payload, fin),
            State::AwaitReply => self.reply_bytes(nic, i, payload, fin),
            State::AwaitRtrAck if fin => self.abort(nic, i, -ECONNRESET),
            State::AwaitRtrAck => self.read_response_bytes(nic, i, payload),
            _ => self.closing_bytes(nic, i, payload, fin),
        }
    }

    /// Whether an ACK answering an invalid segment of connection `i` may go now, one per
    /// [`crate::Config::invalid_ack_interval`]; if it may, the interval starts again.
    fn invalid_ack_allowed(&mut self, i: usize) -> bool {
        let c = &mut self.conns[i];
        if self.now_ms.wrapping_sub(c.invalid_acked_at) < self.timeouts.invalid_ack {
            return false;
        }
        c.invalid_acked_at = self.now_ms;
        true
    }

    /// The duplicate ACK to a segment outside the window, or entirely old: always for one
    /// with data or FIN (the peer's recovery needs it), else at most one per interval
    /// (Linux's `tcp_oow_rate_limited`), so two ends that disagree on the window cannot
    /// ACK each other in a loop, nor can forged ACKs draw one each. Cold.
    #[cold]
    fn duplicate_ack<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        if seg.segment_len() == 0 && !self.invalid_ack_allowed(i) {
            self.counters.duplicate_acks_limited += 1;
            return;
        }
        self.send_ack(nic, i);
    }

    /// A segment whose ACK is not acceptable (see [`ack_acceptable`]) takes nothing, data
    /// and FIN included, and gets a challenge ACK, as Linux's `tcp_ack` answers one.
    #[cold]
    fn unacceptable_ack<H: Nic>(&mut self, nic: &mut H, i: usize) {
        self.counters.acks_unacceptable += 1;
        self.challenge(nic, i);
    }

    /// The challenge ACK of RFC 5961 (§3.2 for an RST, §4 for a SYN, §5.2 for an ACK):
    /// our next sequence number and `rcv_nxt`, the datapath's on a flow it carries, so a
    /// peer that really lost the connection answers with an RST at exactly `rcv_nxt`. At
    /// most one per [`crate::Config::invalid_ack_interval`] (§7); `false` when none went.
    /// Cold: peers do not send these on a connection they hold.
    #[cold]
    fn challenge<H: Nic>(&mut self, nic: &mut H, i: usize) -> bool {
        if !self.invalid_ack_allowed(i) {
            self.counters.challenge_acks_limited += 1;
            return false;
        }
        let c = &self.conns[i];
        // On a flow the datapath carries, the window its ACKs advertise.
        let window = match c.datapath_numbers_current() {
            true => u16::MAX,
            false => self.config.window,
        };
        let (tuple, remote_mac) = (c.tuple, c.remote_mac);
        let (seq, ack) = self
            .current_numbers(nic, i)
            .unwrap_or((c.snd_nxt, c.rcv_nxt));
        self.send_stray(
            nic,
            &tuple,
            remote_mac,
            TcpControl::None,
            seq,
            Some(ack),
            window,
        );
        true
    }

    /// Connection `i`'s next sequence numbers, `(snd_nxt, rcv_nxt)`: the datapath's while
    /// they are current there (it moves them in FPDU mode), ours otherwise; `None` when
    /// they are the datapath's and it holds no context for the flow.
    fn current_numbers<H: Nic>(&self, nic: &mut H, i: usize) -> Option<(u32, u32)> {
        let c = &self.conns[i];
        match c.datapath_numbers_current() {
            true => nic
                .read_flow(i as u16)
                .map(|ctx| (ctx.snd_nxt, ctx.rcv_nxt)),
            false => Some((c.snd_nxt, c.rcv_nxt)),
        }
    }

    /// RFC 9293 §3.10.7.4 in order: a segment without ACK that is not acceptable gets
    /// an ACK (first check; the datapath answers on a flow it carries), one that is
    /// acceptable is dropped (fifth check).
    #[cold]
    fn without_ack<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        let c = &self.conns[i];
        let offset = seq_diff(seg.seq, c.rcv_nxt);
        let old = offset < 0 && seg.segment_len() <= offset.unsigned_abs();
        if !c.datapath_numbers_current() && (offset > 0 || old) {
            self.counters.segments_out_of_order += 1;
            return self.duplicate_ack(nic, i, seg);
        }
        self.counters.segments_without_ack += 1;
    }

    /// The window connection `i` advertised last, for judging an RST: the datapath's
    /// (65535, what its ACKs carry) once the flow may have been handed over, which is
    /// never less than ours after; ours before. Scaled once both SYNs offered scaling,
    /// except in our SYN-ACK (RFC 7323 §2.2).
    fn receive_window(&self, i: usize) -> u32 {
        let c = &self.conns[i];
        let window = match (c.in_datapath, c.state) {
            (true, _)
            | (
                _,
                State::Established
                | State::FinWait1
                | State::FinWait2
                | State::Closing
                | State::TimeWait
                | State::LastAck,
            ) => u16::MAX,
            _ => self.config.window,
        };
        let shift = match (c.state, c.peer_window_shift) {
            (State::SynReceived, _) | (_, NO_WINDOW_SCALING) => 0,
            _ => self.config.window_shift,
        };
        u32::from(window) << shift
    }

    /// What a segment's ACK does: the peer's `window` taken, `snd_una` advanced to an
    /// acceptable `ack` and acknowledged buffered bytes forgotten. Inlined into its three
    /// callers: out of line, its few stores paid for a call and saved registers
    /// (measured: −35 instructions a setup).
    #[inline(always)]
    fn take_ack(&mut self, i: usize, ack: u32, window: u16) {
        let c = &mut self.conns[i];
        if seq_diff(ack, c.snd_una) > 0 && seq_diff(ack, c.snd_nxt) <= 0 {
            c.snd_una = ack;
            c.retries = 0;
            if let Some(b) = self.buffer_mut(i) {
                let acked = seq_diff(ack, b.tx_seq).clamp(0, i32::from(b.tx_len)) as usize;
                // Usually all of it (a frame is acknowledged whole): nothing to move.
                if acked < usize::from(b.tx_len) {
                    b.tx.copy_within(acked..usize::from(b.tx_len), 0);
                }
                b.tx_len -= acked as u16;
                b.tx_seq = b.tx_seq.wrapping_add(acked as u32);
            }
        }
        self.conns[i].peer_window = window;
    }

    /// Transitions an acknowledgement alone can cause; `snd_una` is where it was before
    /// the acknowledgement was taken.
    fn after_ack<H: Nic>(&mut self, nic: &mut H, i: usize, snd_una: u32) {
        let all_acked = self.conns[i].snd_una == self.conns[i].snd_nxt;
        match self.conns[i].state {
            // The RTR carried the ACK of the reply, and nothing was taken since.
            State::AwaitRtrAck if all_acked && !self.conns[i].neg.read_response_due => {
                self.enter_fpdu_mode_active(nic, i, FlowWrite::Install)
            }
            // A Read RTR's response is still to come: wait for it, as long as for a reply,
            // from the ACK that completed the RTR (a repeated ACK does not restart the
            // wait: a peer acknowledging every few seconds put the hand-off off for good).
            State::AwaitRtrAck if all_acked && snd_una != self.conns[i].snd_una => {
                self.conns[i].phase_deadline = self.after(self.timeouts.mpa_reply);
                self.arm(i, false, true);
            }
            State::FinWait1 if all_acked => {
                self.conns[i].state = State::FinWait2;
                self.release_buffer(i);
                self.conns[i].phase_deadline = self.after(self.timeouts.fin_wait_2);
                self.arm(i, false, true);
            }
            State::Closing if all_acked => self.enter_time_wait(nic, i),
            State::LastAck if all_acked => {
                self.settle(nic, i, 0);
                self.free(i);
            }
            _ => {}
        }
    }

    pub(crate) fn send_ack<H: Nic>(&mut self, nic: &mut H, i: usize) {
        let seq = self.conns[i].snd_nxt;
        self.send(nic, i, TcpControl::None, seq, Payload::NONE);
        if self.conns[i].state == State::AwaitAccept {
            // The request's delayed ACK, if still pending, has just gone.
            self.timers.disarm(i);
        }
    }

    /// Append in-order bytes to the negotiation buffer's receive side; how many fit.
    fn collect(&mut self, i: usize, payload: &[u8]) -> usize {
        let Some(b) = self.buffer_mut(i) else {
            return 0;
        };
        let have = usize::from(b.rx_len);
        let take = payload.len().min(MPA_MAX_FRAME_LEN - have);
        b.rx[have..have + take].copy_from_slice(&payload[..take]);
        b.rx_len += take as u16;
        take
    }

    /// The responder collects the MPA request. One that arrives whole in a segment (the
    /// usual case) is judged where it lies and its private data raised from there; one
    /// in pieces is collected in a negotiation buffer, taken with the first piece. So a
    /// handshake holds no buffer, and peers that complete handshakes and send nothing
    /// cannot use the buffers up.
    fn request_bytes<H: Nic>(&mut self, nic: &mut H, i: usize, payload: &[u8], fin: bool) {
        let have = self.buffer(i).map_or(0, |b| usize::from(b.rx_len));
        let whole =
            have == 0 && Frame::<&[u8]>::frame_len(payload).is_ok_and(|len| len <= payload.len());
        if !whole && !payload.is_empty() && self.take_buffer(nic, i).is_none() {
            return self.abort(nic, i, -ECONNRESET);
        }
        let take = match whole {
            true => payload.len().min(MPA_MAX_FRAME_LEN),
            false => self.collect(i, payload),
        };
        let overflow = take < payload.len();
        self.conns[i].rcv_nxt = self.conns[i].rcv_nxt.wrapping_add(take as u32);
        let counters = &mut self.counters;
        let mut judge = |rx: &[u8]| {
            FrameRepr::parse_bytes(rx).map(|frame| {
                let (neg, verdict) = negotiation::judge_request(&frame, counters);
                let frame_len = Frame::<&[u8]>::frame_len(rx).unwrap_or(usize::MAX);
                // The application's private data ends the frame.
                let private_data = frame_len.saturating_sub(frame.private_data.len())..frame_len;
                (neg, verdict, frame_len < rx.len(), private_data)
            })
        };
        let judged = match whole {
            true => judge(payload),
            // A FIN alone, before any piece, is judged as an empty request.
            false => judge(
                self.buffers
                    .get(usize::from(self.conns[i].buffer))
                    .map_or(&[][..], NegotiationBuffer::rx),
            ),
        };
        let (neg, verdict, extra, private_data) = match judged {
            Ok(judged) => judged,
            Err(Error::Truncated) if !fin && !overflow => return self.send_ack(nic, i),
            Err(error) => {
                let refusal = match error {
                    Error::Truncated => {
                        self.counters.mpa_truncated += 1;
                        Refusal::Reset
                    }
                    other => negotiation::refuse_frame(other, &mut self.counters),
                };
                // A frame refused before it parsed echoes no v2 block.
                self.conns[i].neg = Negotiation {
                    revision: 2,
                    ..Negotiation::default()
                };
                return self.refuse(nic, i, refusal);
            }
        };
        self.conns[i].neg = neg;
        if extra || overflow {
            self.counters.mpa_extra_bytes += 1;
            return self.abort(nic, i, -ECONNRESET);
        }
        if fin {
            self.counters.mpa_truncated += 1;
            return self.abort(nic, i, -ECONNRESET);
        }
        if let Err(refusal) = verdict {
            return self.refuse(nic, i, refusal);
        }
        let l = usize::from(self.conns[i].listener);
        let Some(Some(listener)) = self.listeners.get_mut(l) else {
            return self.abort(nic, i, -ECONNRESET);
        };
        if listener.pending >= listener.backlog {
            self.counters.backlog_refused += 1;
            return self.refuse(nic, i, Refusal::RejectReply);
        }
        listener.half_open = listener.half_open.saturating_sub(1);
        listener.pending += 1;
        self.conns[i].state = State::AwaitAccept;
        self.conns[i].owed = Owed::Answer;
        let private_data = match whole {
            true => PrivateData::Bytes(payload.get(private_data).unwrap_or(&[])),
            false => PrivateData::OfReceivedFrame,
        };
        self.raise(nic, i, EventKind::ConnectRequest, 0, private_data);
        self.release_buffer(i);
        // A delayed ACK: the reply carries it if the host answers in time. Timers run
        // only while the host queue has room for what they may raise, so with the queue
        // nearly full the ACK goes at once rather than wait for the host to drain it.
        if nic.host_space() >= RECORDS_PER_INPUT {
            self.conns[i].phase_deadline = self.after(self.timeouts.request_ack_delay);
            self.arm(i, false, true);
        } else {
            // Also cancels the request timer: an ACK sent in AWAIT_ACCEPT disarms.
            self.send_ack(nic, i);
        }
    }

    fn refuse<H: Nic>(&mut self, nic: &mut H, i: usize, refusal: Refusal) {
        match refusal {
            Refusal::Reset => self.abort(nic, i, -ECONNRESET),
            Refusal::RejectReply => self.send_reject(nic, i, &[]),
        }
    }

    /// The responder in peer-to-peer mode collects the initiator's RTR.
    fn rtr_bytes<H: Nic>(&mut self, nic: &mut H, i: usize, payload: &[u8], fin: bool) {
        if fin {
            return self.abort(nic, i, -ECONNRESET);
        }
        let Some(have) = self.buffer(i).map(|b| usize::from(b.rx_len)) else {
            return;
        };
        let agreed = self.conns[i].neg.rtr;
        // An RTR that arrives whole (the usual case) is judged where it lies; pieces are
        // collected in the negotiation buffer and judged there.
        let mut check = match have {
            0 => judge_rtr(payload, agreed),
            _ => Ok(None),
        };
        let mut take = 0;
        if let Ok(None) = check {
            take = self.collect(i, payload);
            if let (true, Some(b)) = (have > 0, self.buffer(i)) {
                check = judge_rtr(b.rx(), agreed);
            }
        }
        let total = match check {
            Ok(Some(total)) => total,
            Ok(None) => {
                self.conns[i].rcv_nxt = self.conns[i].rcv_nxt.wrapping_add(take as u32);
                return self.send_ack(nic, i);
            }
            Err(RtrError::Crc) => {
                self.counters.crc_errors += 1;
                return self.terminate(nic, i, llp_code::CRC_ERROR, -ECONNRESET);
            }
            Err(RtrError::Mismatch) => {
                self.counters.rtr_mismatch += 1;
                return self.terminate(nic, i, llp_code::NO_MATCHING_RTR, -ECONNRESET);
            }
        };
        if total - have < payload.len() {
            // FPDUs after the RTR belong to the datapath, which had not taken the flow yet.
            self.counters.early_data_dropped += 1;
        }
        self.conns[i].rcv_nxt = self.conns[i].rcv_nxt.wrapping_add((total - have) as u32);
        // FPDU mode from the byte after the RTR. While the RTR was expected every frame of
        // the flow came here, so our sequence numbers are the current ones. The datapath
        // acknowledges the RTR from them, or our Read Response does, which goes out only
        // once the flow is in (so a flow the datapath cannot carry gets none).
        // Rewrites the flow the accept installed, whose tuple is in the table: this fails
        // only on a datapath that lost it. (A Read RTR's flow is installed only now.)
        let (write, response) = match agreed {
            RtrTypes::READ => {
                let rtr = match have {
                    0 => payload,
                    _ => self.buffer(i).map_or(&[][..], NegotiationBuffer::rx),
                };
                let request = read_request_of(rtr.get(..total).unwrap_or(&[]));
                (FlowWrite::Install, self.stage_read_response(i, &request))
            }
            _ => (FlowWrite::InstallAndAcknowledge, None),
        };
        if self.install_flow(nic, i, false, write).is_err() {
            // The reset goes at our numbers before the response, which never went.
            self.take_back_flow(nic, i);
            if let Some(staged) = response {
                self.unstage(i, staged);
            }
            return self.abort(nic, i, -ECONNRESET);
        }
        if let Some(staged) = response {
            self.send(
                nic,
                i,
                TcpControl::Psh,
                staged.seq,
                Payload::Buffered { skip: staged.skip },
            );
            self.counters.read_responses_sent += 1;
        }
        self.rtr_arrived(nic, i);
        self.keep_only_unacked(i);
    }

    /// Stage the zero-length Read Response that answers the initiator's Read RTR,
    /// `request` (RFC 5040: every Read Request is answered; the initiator waits for it
    /// among its outstanding reads), as our first FPDU: after whatever of the reply is
    /// still unacknowledged, and `snd_nxt` past it. It stays in the negotiation buffer
    /// until the datapath sees it acknowledged, sent again like a handed-over reply.
    #[cold]
    fn stage_read_response(&mut self, i: usize, request: &ReadRequestRepr) -> Option<Staged> {
        let fpdu = MessageRepr::zero_length_read_response_fpdu(request);
        let len = fpdu.len();
        let seq = self.conns[i].snd_nxt;
        let b = self.buffer_mut(i)?;
        // The unacknowledged bytes end at snd_nxt.
        let skip = usize::from(b.tx_len);
        b.tx.get_mut(skip..skip + len)?.copy_from_slice(&fpdu);
        if skip == 0 {
            b.tx_seq = seq;
        }
        b.tx_len += len as u16;
        self.conns[i].snd_nxt = seq.wrapping_add(len as u32);
        Some(Staged { seq, skip })
    }

    /// Take back bytes [`Machine::stage_read_response`] staged and did not send.
    fn unstage(&mut self, i: usize, staged: Staged) {
        if let Some(b) = self.buffer_mut(i) {
            b.tx_len = staged.skip as u16;
        }
        self.conns[i].snd_nxt = staged.seq;
    }

    /// The datapath took the peer's RTR itself (the usual case: the RTR arrives whole,
    /// as iwnic sends it), acknowledged it and carries the flow in FPDU mode. The RTR's
    /// ACK covered our reply, so nothing of ours is left to send.
    fn rtr_taken<H: Nic>(&mut self, nic: &mut H, i: usize, rtr: RtrTypes) {
        if self.conns[i].state != State::AwaitRtr {
            return;
        }
        if rtr != self.conns[i].neg.rtr {
            self.counters.rtr_mismatch += 1;
            return self.terminate(nic, i, llp_code::NO_MATCHING_RTR, -ECONNRESET);
        }
        // The datapath took the RTR at the receive point the flow was written with, which
        // is ours less what we collected of an RTR in pieces (a peer may resend it whole).
        let collected = self.buffer(i).map_or(0, |b| u32::from(b.rx_len));
        let len = MessageRepr::rtr_fpdu(rtr).map_or(0, <[u8]>::len) as u32;
        let c = &mut self.conns[i];
        c.rcv_nxt = c.rcv_nxt.wrapping_sub(collected).wrapping_add(len);
        c.snd_una = c.snd_nxt;
        c.retries = 0;
        self.rtr_arrived(nic, i);
        self.release_buffer(i);
        self.timers.disarm(i);
    }

    /// The responder's negotiation is over: ESTABLISHED.
    #[inline(always)]
    fn rtr_arrived<H: Nic>(&mut self, nic: &mut H, i: usize) {
        self.conns[i].state = State::Established;
        self.established(nic, i, EventKind::Established, PrivateData::None);
    }

    /// In FPDU mode the buffer is kept only while our own bytes are unacknowledged.
    fn keep_only_unacked(&mut self, i: usize) {
        if self.buffer(i).is_some_and(|b| b.tx_len == 0) {
            self.release_buffer(i);
            self.timers.disarm(i);
        } else {
            self.arm(i, true, false);
        }
    }

    /// The initiator collects the MPA reply.
    fn reply_bytes<H: Nic>(&mut self, nic: &mut H, i: usize, payload: &[u8], fin: bool) {
        let have = self.buffer(i).map_or(0, |b| usize::from(b.rx_len));
        let take = self.collect(i, payload);
        let asked = self.conns[i].neg;
        let Some(b) = self.buffers.get(usize::from(self.conns[i].buffer)) else {
            return;
        };
        let rx = b.rx();
        let judged = FrameRepr::parse_bytes(rx).map(|frame| {
            let verdict = negotiation::judge_reply(&asked, &frame, &mut self.counters);
            let frame_len = Frame::<&[u8]>::frame_len(rx).unwrap_or(rx.len());
            (verdict, frame_len, frame_len < rx.len())
        });
        let (verdict, frame_len, extra) = match judged {
            Ok(judged) => judged,
            Err(Error::Truncated) if !fin && take == payload.len() => {
                self.conns[i].rcv_nxt = self.conns[i].rcv_nxt.wrapping_add(take as u32);
                return self.send_ack(nic, i);
            }
            Err(error) => {
                match error {
                    Error::Truncated => self.counters.mpa_truncated += 1,
                    other => {
                        negotiation::refuse_frame(other, &mut self.counters);
                    }
                }
                let status = if fin { -ECONNRESET } else { -EINVAL };
                return self.abort(nic, i, status);
            }
        };
        // Bytes past the reply (FPDUs the peer sent early), in the buffer or beyond
        // what it could take: they are not acknowledged, nor a FIN after them.
        let extra = extra || take < payload.len();
        if extra {
            self.counters.early_data_dropped += 1;
        }
        // The peer's FIN right after its reply (a reject's, as iwnic sends it) is taken
        // with the reply: our FIN acknowledges it and the close needs one exchange.
        let peer_closed = fin && !extra;
        self.conns[i].rcv_nxt = self.conns[i]
            .rcv_nxt
            .wrapping_add(frame_len.saturating_sub(have) as u32 + u32::from(peer_closed));
        let our_fin = if peer_closed {
            State::LastAck
        } else {
            State::FinWait1
        };
        match verdict {
            ReplyVerdict::Rejected => {
                self.raise(
                    nic,
                    i,
                    EventKind::ConnectReply,
                    -ECONNREFUSED,
                    PrivateData::OfReceivedFrame,
                );
                self.detach(i);
                self.send_fin(nic, i, our_fin);
            }
            // An accept that closes at once: the connection ends before FPDU mode.
            ReplyVerdict::Accepted(_) if peer_closed => {
                self.raise(
                    nic,
                    i,
                    EventKind::ConnectReply,
                    -ECONNRESET,
                    PrivateData::None,
                );
                self.detach(i);
                self.send_fin(nic, i, our_fin);
            }
            ReplyVerdict::Failed { term_code: 0 } => self.abort(nic, i, -EINVAL),
            ReplyVerdict::Failed { term_code } => self.terminate(nic, i, term_code, -EINVAL),
            ReplyVerdict::Accepted(neg) => {
                self.conns[i].neg = neg;
                if neg.peer_to_peer {
                    self.send_rtr(nic, i);
                } else {
                    self.enter_fpdu_mode_active(nic, i, FlowWrite::InstallAndAcknowledge);
                }
            }
        }
    }

    /// The initiator sends the agreed RTR as its first FPDU and waits for its ACK.
    fn send_rtr<H: Nic>(&mut self, nic: &mut H, i: usize) {
        // The RTR FPDUs are constants, their CRC computed at compile time.
        let Some(rtr) = MessageRepr::rtr_fpdu(self.conns[i].neg.rtr) else {
            return self.abort(nic, i, -EINVAL);
        };
        let snd_nxt = self.conns[i].snd_nxt;
        let Some(b) = self.buffer_mut(i) else { return };
        // The request is acknowledged by now (the reply answered it): the RTR starts the buffer.
        b.tx_seq = snd_nxt;
        b.tx[..rtr.len()].copy_from_slice(rtr);
        b.tx_len = rtr.len() as u16;
        let neg = &mut self.conns[i].neg;
        neg.read_response_due = neg.rtr == RtrTypes::READ;
        self.send_staged(nic, i, false);
        self.conns[i].state = State::AwaitRtrAck;
        self.arm(i, true, false);
    }

    /// The responder's first bytes, while the initiator waits for its RTR's ACK or, after
    /// a Read RTR, for the zero-length Read Response that answers it (irdma's responders
    /// choose the Read RTR when offered both, and answer it as any RDMA Read). The
    /// firmware sent that Read, so it takes the response: the datapath would hand the
    /// host a Read Response to a Read it never made. Taken when it arrives whole, as
    /// responders send it (beside the RTR's ACK); anything else first ends the wait and
    /// is left to the peer to send again to the datapath, as early FPDUs are.
    #[cold]
    fn read_response_bytes<H: Nic>(&mut self, nic: &mut H, i: usize, payload: &[u8]) {
        let due = core::mem::take(&mut self.conns[i].neg.read_response_due);
        // Into our RTR's sink buffer: STag 0, TO 0.
        let expected = MessageRepr::zero_length_read_response_fpdu(&ReadRequestRepr::default());
        let taken = match due && payload.starts_with(&expected) {
            true => expected.len(),
            false => 0,
        };
        if taken > 0 {
            self.counters.read_responses_received += 1;
            let c = &mut self.conns[i];
            c.rcv_nxt = c.rcv_nxt.wrapping_add(taken as u32);
        }
        if payload.len() > taken {
            self.counters.early_data_dropped += 1;
        }
        let c = &self.conns[i];
        if c.snd_una == c.snd_nxt {
            let write = match taken {
                0 => FlowWrite::Install,
                _ => FlowWrite::InstallAndAcknowledge,
            };
            self.enter_fpdu_mode_active(nic, i, write);
        } else if taken > 0 {
            self.send_ack(nic, i);
        }
    }

    /// Hand the initiator's connection to the datapath and tell the host, with the
    /// reply's private data.
    pub(crate) fn enter_fpdu_mode_active<H: Nic>(
        &mut self,
        nic: &mut H,
        i: usize,
        write: FlowWrite,
    ) {
        // A flow the datapath cannot carry is reset; the one CONNECT_REPLY says so with
        // one of rule 4's statuses (the count is `flow_table_full`).
        if self.install_flow(nic, i, false, write).is_err() {
            return self.abort(nic, i, -ECONNRESET);
        }
        self.conns[i].state = State::Established;
        self.timers.disarm(i);
        self.established(
            nic,
            i,
            EventKind::ConnectReply,
            PrivateData::OfReceivedFrame,
        );
        self.release_buffer(i);
    }

    /// A frame of a flow the datapath carries: its FIN (the datapath delivered any payload
    /// in front of it), its RST, or data that raced the hand-off.
    fn in_fpdu_mode<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        let Some(ctx) = nic.read_flow(i as u16) else {
            return self.flow_lost(nic, i, seg);
        };
        let shift = self.conns[i].peer_window_shift;
        if seg
            .ack
            .is_some_and(|ack| !ack_acceptable(ack, ctx.snd_una, ctx.snd_nxt, shift))
        {
            return self.unacceptable_ack(nic, i);
        }
        let end = seg.seq.wrapping_add(seg.payload.len() as u32);
        if seg.control == TcpControl::Fin && end == ctx.rcv_nxt {
            self.take_back_flow(nic, i);
            self.conns[i].rcv_nxt = self.conns[i].rcv_nxt.wrapping_add(1);
            self.send_fin(nic, i, State::LastAck);
            self.raise(nic, i, EventKind::Disconnect, 0, PrivateData::None);
        } else if !seg.payload.is_empty() {
            self.counters.early_data_dropped += 1;
        } else if seg.control == TcpControl::Fin {
            // Behind bytes the datapath has not received: the peer sends it again with them.
            self.counters.segments_out_of_order += 1;
        }
    }

    /// A frame of a connection whose flow the datapath no longer holds: it can carry
    /// nothing more, and the firmware has no FPDU path and no current numbers. The frame
    /// gets the RST a segment for no connection gets (its numbers from the frame's),
    /// and the host CLOSE -ECONNRESET, once; without this the peer's FIN went unanswered
    /// and its RST, judged by numbers from before the hand-off, was ignored: the
    /// connection stayed ESTABLISHED for good.
    #[cold]
    fn flow_lost<H: Nic>(&mut self, nic: &mut H, i: usize, seg: &TcpSegment) {
        self.counters.flows_lost += 1;
        let (tuple, mac) = (self.conns[i].tuple, self.conns[i].remote_mac);
        if seg.control != TcpControl::Rst {
            self.reset_reply(nic, tuple, mac, seg);
        }
        self.drop_connection(nic, i, -ECONNRESET);
    }

    /// Bytes and FIN after a FIN. After ours, data is acknowledged and dropped (the
    /// connection is closing) and the peer's FIN moves the close on. After the peer's
    /// (CLOSING, LAST_ACK, TIME_WAIT) nothing more can come: the text is ignored and not
    /// acknowledged (RFC 9293 §3.10.7.4, seventh step; Linux's `tcp_rcv_state_process`),
    /// so our numbers never pass the peer's FIN and its RST at FIN + 1 still resets.
    fn closing_bytes<H: Nic>(&mut self, nic: &mut H, i: usize, payload: &[u8], fin: bool) {
        self.counters.data_after_fin_dropped += u32::from(!payload.is_empty());
        let c = &mut self.conns[i];
        if matches!(c.state, State::Closing | State::LastAck | State::TimeWait) {
            return;
        }
        c.rcv_nxt = c
            .rcv_nxt
            .wrapping_add(payload.len() as u32 + u32::from(fin));
        let state = c.state;
        self.send_ack(nic, i);
        if !fin {
            return;
        }
        match state {
            State::FinWait1 => self.conns[i].state = State::Closing,
            State::FinWait2 => self.enter_time_wait(nic, i),
            _ => {}
        }
    }

    fn enter_time_wait<H: Nic>(&mut self, nic: &mut H, i: usize) {
        self.conns[i].state = State::TimeWait;
        self.release_buffer(i);
        self.settle(nic, i, 0);
        self.wait_two_msl(i);
    }

    fn wait_two_msl(&mut self, i: usize) {
        self.conns[i].phase_deadline = self.after(self.timeouts.time_wait);
        self.arm(i, false, true);
    }

    /// FIN after everything we sent; the peer's FIN completes the close.
    pub(crate) fn close_gracefully<H: Nic>(&mut self, nic: &mut H, i: usize) {
        self.send_fin(nic, i, State::FinWait1);
    }

    /// Our FIN after everything we sent, acknowledging `rcv_nxt`, retransmitted until
    /// acknowledged; then `state`: FIN_WAIT_1 when we close first, LAST_ACK when the
    /// peer's FIN (already counted in `rcv_nxt`) came first.
    fn send_fin<H: Nic>(&mut self, nic: &mut H, i: usize, state: State) {
        // A negotiation buffer with none of our bytes left unacknowledged is of no more
        // use (the FIN goes again on its own, and nothing more is received into it): it
        // goes back to the pool now, not when the peer acknowledges the FIN, which a
        // silent peer puts off for the FIN's whole retransmission span.
        let snd_una = self.conns[i].snd_una;
        if self
            .buffer(i)
            .is_some_and(|b| b.tx_len == 0 || b.acknowledged_by(snd_una))
        {
            self.release_buffer(i);
        }
        let seq = self.conns[i].snd_nxt;
        self.send(nic, i, TcpControl::Fin, seq, Payload::NONE);
        self.conns[i].snd_nxt = seq.wrapping_add(1);
        self.conns[i].state = state;
        self.reset_backoff(i);
        self.arm(i, true, false);
    }

    /// Terminate (LLP layer, `code`), then RST, then the host hears `status`.
    pub(crate) fn terminate<H: Nic>(&mut self, nic: &mut H, i: usize, code: u8, status: i32) {
        self.take_back_flow(nic, i);
        let term = MessageRepr::terminate(TerminateRepr::llp(code), 1);
        let mut ulpdu = [0u8; 32];
        let mut fpdu = [0u8; 48];
        let len = term
            .emit(&mut ulpdu)
            .and_then(|n| FpduRepr { ulpdu: &ulpdu[..n] }.emit(&mut fpdu));
        if let Ok(len) = len {
            let seq = self.conns[i].snd_nxt;
            self.send(nic, i, TcpControl::Psh, seq, Payload::Bytes(&fpdu[..len]));
            self.conns[i].snd_nxt = seq.wrapping_add(len as u32);
            self.counters.terminates_sent += 1;
        }
        self.abort(nic, i, status);
    }

    #[inline(never)]
    pub(crate) fn on_flow_event<H: Nic>(&mut self, nic: &mut H, report: FlowEvent) {
        let i = usize::from(report.index);
        if self.conns.get(i).is_none_or(|c| !c.in_datapath) {
            return;
        }
        match report.kind {
            FlowEventKind::RtrTaken(rtr) => return self.rtr_taken(nic, i, rtr),
            FlowEventKind::CrcError => self.counters.crc_errors += 1,
            FlowEventKind::LengthError => self.counters.length_errors += 1,
        }
        self.terminate(nic, i, llp_code::CRC_ERROR, -ECONNRESET);
    }
}
