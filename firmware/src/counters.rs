//! Counters of every rejection and protocol event, published through the Hal.

macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Event counts since start; they wrap at 2^32.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct Counters {
            $($(#[doc = $doc])* pub $name: u32,)*
        }

        impl Counters {
            /// All zero (`const`, unlike `Default`).
            pub const ZERO: Counters = Counters { $($name: 0,)* };

            /// Every counter with its name, in declaration order (register window order).
            pub fn named(&self) -> impl Iterator<Item = (&'static str, u32)> + '_ {
                [$((stringify!($name), self.$name),)*].into_iter()
            }
        }
    };
}

counters! {
    /// Frames taken from the firmware RX queue.
    frames_received,
    /// Frames queued on the firmware TX queue.
    frames_sent,
    /// Frames the firmware would not take: a descriptor that does not fit its frame, zero
    /// ports, flags or options TCP does not allow, another address, a source address no
    /// peer can have (for no connection: broadcast, multicast, ours...), or (with
    /// `Checksums::Software`) a bad checksum. The datapath's parser drops the frames that
    /// are not IPv4/TCP or fail their checksums before they get here.
    frames_ignored,
    /// Segments for no connection and no listener: answered with RST, or dropped when
    /// they are RSTs themselves (RFC 9293 §3.10.7.1).
    segments_unmatched,
    /// Segments outside the receive window or out of order (a duplicate ACK answers),
    /// RSTs outside the window or not acknowledging our SYN, and a FIN behind bytes the
    /// datapath has not received (dropped, no answer).
    segments_out_of_order,
    /// Segments without ACK after our SYN-ACK (a SYN again aside) or on a synchronized
    /// connection, dropped (RFC 9293 §3.10.7.4).
    segments_without_ack,
    /// SYNs on a synchronized connection, answered with a challenge ACK and dropped
    /// (RFC 9293 §3.10.7.4, RFC 5961 §4).
    syns_challenged,
    /// SYNs above the numbers of a connection in TIME_WAIT that ended it and opened a new
    /// connection from the listener (RFC 6191).
    time_wait_reopened,
    /// Segments whose ACK acknowledges bytes never sent, or lies further back than any
    /// window the peer can advertise: dropped whole, data and FIN too, with a challenge
    /// ACK (RFC 9293 §3.10.7.4 fifth check, RFC 5961 §5.2).
    acks_unacceptable,
    /// Challenge ACKs not sent: an ACK to an invalid segment had gone within the
    /// connection's interval.
    challenge_acks_limited,
    /// Duplicate ACKs not sent to segments without data or FIN outside the window: an ACK
    /// to an invalid segment had gone within the connection's interval.
    duplicate_acks_limited,
    /// SYN-ACKs not sent again to a repeated SYN of a half-open connection: an ACK to an
    /// invalid segment or a repeated SYN had gone within the connection's interval.
    syn_acks_limited,
    /// Control segments and stream bytes sent again: after a timeout, or a SYN-ACK for
    /// the peer's repeated SYN (our first was lost).
    retransmissions,
    /// RST segments received that reset a connection.
    resets_received,
    /// RST segments in the receive window but not at its start, answered with a
    /// challenge ACK and dropped (RFC 5961 §3.2).
    resets_challenged,
    /// RST segments sent.
    resets_sent,
    /// SYNs dropped because the listener's half-open limit was reached.
    syn_dropped_half_open,
    /// Connections refused (MPA reject) because the listener's backlog was full.
    backlog_refused,
    /// MPA frames with a wrong key.
    mpa_bad_key,
    /// MPA frames with revision 0 or above 2.
    mpa_bad_revision,
    /// MPA frames announcing more than 512 bytes of private data.
    mpa_private_data_too_long,
    /// MPA frames cut short by a FIN.
    mpa_truncated,
    /// Bytes after the MPA request before the reply was sent.
    mpa_extra_bytes,
    /// Requests asking for markers (refused).
    mpa_markers_refused,
    /// Revision-2 frames with the enhanced flag but no v2 block.
    mpa_missing_v2_block,
    /// MPA requests not received within the request timeout.
    mpa_request_timeouts,
    /// MPA replies not received within the reply timeout.
    mpa_reply_timeouts,
    /// Rejecting replies received.
    mpa_rejects_received,
    /// Rejecting replies sent (host reject, markers, backlog, bad v2 block).
    mpa_rejects_sent,
    /// RTR messages of a type not agreed, or not an RTR at all.
    rtr_mismatch,
    /// Zero-length RDMA Read Responses sent to answer an initiator's Read RTR.
    read_responses_sent,
    /// Zero-length RDMA Read Responses to our Read RTR, taken before the hand-off.
    read_responses_received,
    /// Replies whose ORD exceeds our IRD.
    ird_shortfall,
    /// FPDUs with a CRC32c error (firmware-checked or reported by the datapath).
    crc_errors,
    /// FPDUs whose ULPDU_Length ran beyond the segment.
    length_errors,
    /// Terminate messages sent.
    terminates_sent,
    /// FPDU data that reached the firmware after the hand-off and was dropped unacknowledged.
    early_data_dropped,
    /// Segments with data after a FIN: after ours, acknowledged and dropped; after the
    /// peer's, ignored (RFC 9293 §3.10.7.4, seventh step).
    data_after_fin_dropped,
    /// Connections whose flow the datapath no longer held when a frame of theirs came:
    /// reset, CLOSE -ECONNRESET.
    flows_lost,
    /// Connection attempts whose SYN retransmissions ran out.
    connect_timeouts,
    /// Half-open connections whose SYN-ACK retransmissions ran out: freed, the host never
    /// heard of them.
    handshake_timeouts,
    /// Connections that ran out of retransmissions after being set up.
    retransmit_timeouts,
    /// Connection requests refused because the connection table was full.
    table_full,
    /// Connections the datapath could not carry, their 4-tuple's flow-table bucket being
    /// full: the accept fails with -ENOMEM, or the connect's CONNECT_REPLY is -ECONNRESET
    /// (one of rule 4's statuses), and the connection is reset.
    flow_table_full,
    /// Connections that needed a negotiation buffer when none was free.
    buffers_exhausted,
    /// Connections whose MPA request was still arriving in pieces, reset to give their
    /// buffer to a host's accept, reject or connect when every buffer was held.
    requests_evicted,
    /// Closing connections (a refusal or reply not yet acknowledged) reset to give their
    /// buffer to a host's accept, reject or connect when every buffer was held and no
    /// request was arriving in pieces.
    closings_evicted,
    /// Negotiation buffers taken back, with every buffer in use, from connections in FPDU
    /// mode whose bytes the datapath had seen acknowledged.
    buffers_reclaimed,
    /// Host command records that failed to decode.
    bad_commands,
    /// Host commands completed with an error status.
    commands_failed,
    /// Connections set up (ESTABLISHED or CONNECT_REPLY 0).
    connections_established,
    /// Connections closed (entry freed).
    connections_closed,
    /// Events raised to the host.
    events_raised,
}
