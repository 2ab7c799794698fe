//! Settings of one NIC's firmware: its addresses, TCP parameters, timers and limits.

use iwnic_proto::net::Checksums;
use smoltcp::time::Duration;

/// Firmware settings. [`Config::default`] holds the values a board boots with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub mac: [u8; 6],
    pub ip: [u8; 4],
    /// Where frames to peers go until a peer's own address is learned from its SYN or
    /// SYN-ACK (no ARP yet: a point-to-point link or a static next hop).
    pub next_hop_mac: [u8; 6],
    /// Whether the checksums of frames on the firmware RX queue are the datapath's to
    /// check alone (the board: its parser drops bad ones) or the firmware checks them
    /// again (host tests). Sent frames get theirs from the datapath, which builds their
    /// headers from the firmware's descriptors.
    pub checksums: Checksums,
    /// Largest TCP payload we accept per segment (our MSS option).
    pub mss: u16,
    /// Receive window we advertise (unscaled) and our window scale shift (at most 14,
    /// RFC 7323 §2.3: larger values are taken as 14).
    pub window: u16,
    pub window_shift: u8,
    /// Wait for the MPA request after the handshake (siw: 5 s).
    pub mpa_request_timeout: Duration,
    /// Wait for the MPA reply after the request (siw: 10 s).
    pub mpa_reply_timeout: Duration,
    /// How long the ACK of a complete MPA request waits to ride on the reply: a host
    /// that answers sooner saves the peer a bare ACK. Delayed ACKs must stay under
    /// 0.5 s (RFC 1122 §4.2.3.2), so longer values count as 499 ms; Linux's shortest
    /// delay is 40 ms. One exception: while the host event queue has no room for an
    /// input's records, no input and no timer is taken (an event is never dropped), and
    /// this ACK waits with them until the host reads its queue; a request raised with the
    /// queue already that full is acknowledged at once.
    pub request_ack_delay: Duration,
    /// Retransmission timeout of the handshake (RFC 6298 §2.1: 1 s), of everything later
    /// when the handshake gives no round-trip sample, and the most a sample gives (the
    /// firmware times the round trip to when it takes the ACK, which a host that stalls
    /// its queue delays); doubled on every retry, capped at `rto_max`. Timeouts are kept
    /// in milliseconds within 16 bits: at most 65.535 s.
    pub rto_initial: Duration,
    /// Floor of the timeout computed from the handshake's round trip (three times it,
    /// RFC 6298 §2.2). RFC 6298 §2.4 says 1 s; Linux, whose stacks iWARP peers run,
    /// uses 200 ms (`TCP_RTO_MIN`), and so does iwnic by default.
    pub rto_min: Duration,
    /// Ceiling of every retransmission timeout (RFC 6298 §2.5: 60 s or more).
    pub rto_max: Duration,
    /// SYN and SYN-ACK sends before the attempt fails.
    pub syn_retries: u8,
    /// Retransmissions of stream bytes or FIN before the connection is given up.
    pub data_retries: u8,
    /// TIME_WAIT (2 MSL).
    pub time_wait: Duration,
    /// Longest wait in FIN_WAIT_2 for the peer's FIN.
    pub fin_wait_2_timeout: Duration,
    /// Shortest time between two ACKs one connection sends to answer invalid segments:
    /// challenge ACKs (RFC 5961 §7), duplicate ACKs to segments without data or FIN
    /// outside the window, and a half-open connection's SYN-ACK sent again to a repeated
    /// SYN. Spoofed SYNs, RSTs and ACKs cannot make it send an ACK each,
    /// and two ends that disagree on the window cannot ACK each other in a loop. Data
    /// always gets its ACK, which the peer's recovery needs. Linux's
    /// `tcp_invalid_ratelimit`, one interval per socket for both: 500 ms.
    pub invalid_ack_interval: Duration,
    /// Largest IRD/ORD the device supports (accept/connect beyond it: -EINVAL).
    pub max_ird: u16,
    pub max_ord: u16,
    /// Half-open connections (SYN received, request not yet complete) per listener.
    pub half_open_limit: u32,
    /// Secret mixed into initial sequence numbers (RFC 6528).
    pub isn_secret: u32,
    /// First local port tried for active opens without one.
    pub ephemeral_port_base: u16,
    /// Header prediction: the usual segments of a setup (the handshake's bare ACK, the
    /// MPA frames and the RTR in order) take short paths past the general checks. It
    /// changes how many instructions a segment costs, never what it does: off, every
    /// segment takes the general path, and a property test holds the two to the same
    /// frames, records, flows, counters, buffers and states.
    pub header_prediction: bool,
}

impl Config {
    /// How long a connect whose SYNs all go unanswered takes to fail with -ETIMEDOUT:
    /// the first timeout `rto_initial`, each retransmission's twice the last, at most
    /// `rto_max`, and the attempt given up when the last retransmission's runs out.
    pub fn syn_timeout(&self) -> Duration {
        self.retransmissions_span(self.syn_retries)
    }

    /// How long a connection keeps sending a FIN (or MPA bytes) that goes unacknowledged
    /// before it gives up with -ETIMEDOUT: `data_retries` retransmissions on the schedule
    /// of [`Config::syn_timeout`]. The first timeout is the one the handshake measured,
    /// at most `rto_initial`, so most connections give up sooner; one whose timeout had
    /// backed off and has not been measured since (Karn: an acknowledgement of a
    /// retransmitted segment is no sample) starts higher, up to `rto_max`, and takes
    /// longer.
    pub fn data_timeout(&self) -> Duration {
        self.retransmissions_span(self.data_retries)
    }

    /// A send and `retries` retransmissions, from `rto_initial` doubling up to `rto_max`,
    /// until the last one's timeout runs out.
    fn retransmissions_span(&self, retries: u8) -> Duration {
        // The firmware's own figures: `Timeouts` keeps them in 16-bit milliseconds.
        let t = crate::machine::Timeouts::of(self);
        let mut rto = u64::from(t.rto_initial);
        let mut total = 0;
        for _ in 0..=retries {
            total += rto;
            rto = (rto * 2).min(u64::from(t.rto_max));
        }
        Duration::from_millis(total)
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mac: [0x02, 0x1A, 0x4E, 0x00, 0x00, 0x01],
            ip: [10, 0, 0, 1],
            next_hop_mac: [0xFF; 6],
            checksums: Checksums::Software,
            mss: 1460,
            window: 65535,
            window_shift: 0,
            mpa_request_timeout: Duration::from_secs(5),
            mpa_reply_timeout: Duration::from_secs(10),
            request_ack_delay: Duration::from_millis(40),
            rto_initial: Duration::from_millis(1000),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            syn_retries: 5,
            data_retries: 8,
            time_wait: Duration::from_secs(60),
            fin_wait_2_timeout: Duration::from_secs(60),
            invalid_ack_interval: Duration::from_millis(500),
            max_ird: 64,
            max_ord: 64,
            half_open_limit: 128,
            isn_secret: 0x6977_6E69,
            ephemeral_port_base: 49152,
            header_prediction: true,
        }
    }
}
