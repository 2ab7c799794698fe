//! Two NICs' firmware joined by a wire: MPA v1 and v2 connections set up, refused and
//! closed end to end, also over a wire that loses frames. The datapath is reduced to its
//! steering rule: a frame of a flow in FPDU mode reaches the firmware only if it carries
//! FIN or RST or the flow still expects the RTR (an RTR that comes whole, as iwnic sends
//! it, the datapath takes itself); no FPDU data moves here.

mod common;

use common::*;
use iwnic_firmware::Config;
use iwnic_proto::errno::{ECONNREFUSED, ECONNRESET};
use iwnic_proto::host::{Command, Endpoint, EventKind};
use iwnic_proto::mpa::{REPLY_KEY, REQUEST_KEY};
use iwnic_proto::net::TcpSegment;
use iwnic_proto::smoltcp_wire::TcpControl;

const A_IP: [u8; 4] = NIC_IP;
const B_IP: [u8; 4] = PEER_IP;

struct Pair {
    a: Bench,
    b: Bench,
    /// Drop the n-th frame on the wire when `drop(n)` says so.
    drop: Box<dyn Fn(usize) -> bool>,
    carried: usize,
    /// What the lost frames were (see [`what`]).
    lost: Vec<&'static str>,
}

/// A frame on the wire, for telling which were lost: its TCP control, or the MPA frame
/// or FPDU it carries.
fn what(frame: &[u8]) -> &'static str {
    let Ok(seg) = TcpSegment::parse(frame, Default::default()) else {
        return "not TCP";
    };
    match (seg.control, seg.ack.is_some(), seg.payload) {
        (TcpControl::Syn, false, _) => "SYN",
        (TcpControl::Syn, true, _) => "SYN-ACK",
        (TcpControl::Fin, _, _) => "FIN",
        (TcpControl::Rst, _, _) => "RST",
        (_, _, []) => "ACK",
        (_, _, bytes) if bytes.starts_with(REQUEST_KEY) => "request",
        (_, _, bytes) if bytes.starts_with(REPLY_KEY) => "reply",
        _ => "FPDU",
    }
}

/// Where the receiving datapath puts a frame.
enum Steer {
    Firmware,
    /// Into the datapath, which answers a segment carrying data with an ACK of its own
    /// receive point (for a duplicate, that ACK is what the sender is waiting for).
    Datapath(Option<Vec<u8>>),
}

fn steer(bench: &Bench, frame: &[u8]) -> Steer {
    let Ok(seg) = TcpSegment::parse(frame, Default::default()) else {
        return Steer::Firmware;
    };
    let flow = bench
        .hal
        .flows
        .values()
        .find(|f| f.tuple.local_port == seg.dst_port && f.tuple.remote_port == seg.src_port);
    let Some(f) = flow else {
        return Steer::Firmware;
    };
    if f.rtr_expected || matches!(seg.control, TcpControl::Fin | TcpControl::Rst) {
        return Steer::Firmware;
    }
    if seg.payload.is_empty() {
        return Steer::Datapath(None);
    }
    Steer::Datapath(Some(datapath_ack(f)))
}

impl Pair {
    fn new(drop: impl Fn(usize) -> bool + 'static) -> Pair {
        let b_config = Config {
            ip: B_IP,
            mac: PEER_MAC,
            next_hop_mac: NIC_MAC,
            ..config()
        };
        Pair {
            a: Bench::default(),
            b: Bench::with(b_config),
            drop: Box::new(drop),
            carried: 0,
            lost: Vec::new(),
        }
    }

    /// Move frames across until the wire is quiet, polling both sides.
    fn exchange(&mut self) {
        loop {
            let a_out: Vec<Vec<u8>> = self.a.hal.tx.drain(..).collect();
            let b_out: Vec<Vec<u8>> = self.b.hal.tx.drain(..).collect();
            if a_out.is_empty() && b_out.is_empty() {
                return;
            }
            for (frames, to) in [(a_out, &mut self.b), (b_out, &mut self.a)] {
                for frame in frames {
                    self.carried += 1;
                    if (self.drop)(self.carried) {
                        self.lost.push(what(&frame));
                        continue;
                    }
                    match steer(to, &frame) {
                        Steer::Firmware => to.hal.arrive(frame),
                        // The datapath's own ACK leaves with the firmware's frames.
                        Steer::Datapath(Some(ack)) => to.hal.tx.push(ack),
                        Steer::Datapath(None) => {}
                    }
                }
                to.poll();
            }
        }
    }

    /// Let `ms` pass on both sides, a millisecond at a time, with the wire running.
    fn run(&mut self, ms: i64) {
        for _ in 0..ms {
            self.a.advance(1);
            self.b.advance(1);
            self.exchange();
        }
    }

    fn connect(&mut self, mpa_v1: bool, private_data: &[u8]) -> u32 {
        self.a.command(Command::Connect {
            local: Endpoint::v4(A_IP, 0),
            remote: Endpoint::v4(B_IP, PORT),
            ird: 8,
            ord: 4,
            qpn: 1,
            mpa_v1,
            private_data,
        });
        done(&self.a.out()[0]).handle
    }

    /// Listen on B, connect from A, and answer the request on B with `answer`; returns
    /// A's and B's connection handles and what each host heard.
    fn open(
        &mut self,
        mpa_v1: bool,
        answer: impl Fn(u32) -> Command<'static>,
    ) -> (u32, u32, Vec<Out>, Vec<Out>) {
        self.b.listen(PORT, 4);
        let a_conn = self.connect(mpa_v1, b"from A");
        let mut a_heard = Vec::new();
        let mut b_heard = Vec::new();
        let mut b_conn = None;
        for _ in 0..30_000 {
            self.run(1);
            a_heard.extend(self.a.out());
            for out in self.b.out() {
                if let Out::Event(e) = &out {
                    if e.kind == EventKind::ConnectRequest {
                        assert_eq!(e.private_data, b"from A");
                        b_conn = Some(e.conn);
                        self.b.command(answer(e.conn));
                    }
                }
                b_heard.push(out);
            }
            b_heard.extend(self.b.out());
            if a_heard
                .iter()
                .any(|o| matches!(o, Out::Event(e) if e.kind == EventKind::ConnectReply))
            {
                self.run(50);
                b_heard.extend(self.b.out());
                break;
            }
        }
        (
            a_conn,
            b_conn.expect("CONNECT_REQUEST on B"),
            a_heard,
            b_heard,
        )
    }

    fn assert_flows_agree(&self) {
        let a = self.a.hal.flows.values().next().expect("A in FPDU mode");
        let b = self.b.hal.flows.values().next().expect("B in FPDU mode");
        assert_eq!(
            (a.snd_nxt, a.rcv_nxt),
            (b.rcv_nxt, b.snd_nxt),
            "each side starts FPDU mode where the other does"
        );
        assert!(!a.rtr_expected && !b.rtr_expected);
    }

    fn assert_empty_after(&mut self, ms: i64) {
        self.run(ms);
        assert_eq!((self.a.fw.connections(), self.b.fw.connections()), (0, 0));
        assert_eq!(
            (self.a.fw.buffers_in_use(), self.b.fw.buffers_in_use()),
            (0, 0)
        );
        assert!(self.a.hal.flows.is_empty() && self.b.hal.flows.is_empty());
    }
}

fn accept(conn: u32) -> Command<'static> {
    Command::Accept {
        conn,
        ird: 4,
        ord: 4,
        qpn: 2,
        private_data: b"from B",
    }
}

fn never(_: usize) -> bool {
    false
}

#[test]
fn mpa_v2_peer_to_peer_end_to_end() {
    let mut pair = Pair::new(never);
    let (_, _, a_heard, b_heard) = pair.open(false, accept);
    assert_eq!(briefs(&a_heard), ["ConnectReply(0)"]);
    assert_eq!(event(&a_heard[0]).private_data, b"from B");
    // A's ORD (4) fits B's IRD (4); B's ORD is relaxed to A's IRD... which is 8, so 4 stays.
    assert_eq!((event(&a_heard[0]).ird, event(&a_heard[0]).ord), (8, 4));
    assert_eq!(
        briefs(&b_heard),
        ["ConnectRequest(0)", "DONE(0)", "Established(0)"]
    );
    pair.assert_flows_agree();
}

#[test]
fn mpa_v1_end_to_end() {
    let mut pair = Pair::new(never);
    let (_, _, a_heard, b_heard) = pair.open(true, accept);
    assert_eq!(briefs(&a_heard), ["ConnectReply(0)"]);
    assert_eq!(
        briefs(&b_heard),
        ["ConnectRequest(0)", "DONE(0)", "Established(0)"]
    );
    pair.assert_flows_agree();
}

#[test]
fn reject_end_to_end() {
    let mut pair = Pair::new(never);
    let (_, _, a_heard, b_heard) = pair.open(false, |conn| Command::Reject {
        conn,
        private_data: b"busy",
    });
    assert_eq!(
        briefs(&a_heard),
        [format!("ConnectReply({})", -ECONNREFUSED)]
    );
    assert_eq!(event(&a_heard[0]).private_data, b"busy");
    assert_eq!(briefs(&b_heard), ["ConnectRequest(0)", "DONE(0)"]);
    pair.assert_empty_after(61_000);
    assert!(pair.a.out().is_empty() && pair.b.out().is_empty());
    // The reject and its FIN travel in one segment; A's FIN acknowledges both, so
    // neither side sends anything twice.
    assert_eq!(pair.a.fw.counters().retransmissions, 0);
    assert_eq!(pair.b.fw.counters().retransmissions, 0);
}

#[test]
fn nobody_listening_is_refused() {
    let mut pair = Pair::new(never);
    pair.connect(false, b"");
    pair.run(5);
    assert_eq!(
        briefs(&pair.a.out()),
        [format!("ConnectReply({})", -ECONNREFUSED)]
    );
    pair.assert_empty_after(1);
}

#[test]
fn graceful_close_from_either_side() {
    for closer_is_a in [true, false] {
        let mut pair = Pair::new(never);
        let (a_conn, b_conn, _, _) = pair.open(false, accept);
        let (closer, conn) = if closer_is_a {
            (&mut pair.a, a_conn)
        } else {
            (&mut pair.b, b_conn)
        };
        closer.command(Command::Disconnect {
            conn,
            abrupt: false,
        });
        pair.run(10);
        let (closer_heard, other_heard) = if closer_is_a {
            (pair.a.out(), pair.b.out())
        } else {
            (pair.b.out(), pair.a.out())
        };
        assert_eq!(briefs(&closer_heard), ["DONE(0)", "Close(0)"]);
        assert_eq!(briefs(&other_heard), ["Disconnect(0)", "Close(0)"]);
        pair.assert_empty_after(60_000);
    }
}

#[test]
fn abrupt_close_resets_both() {
    let mut pair = Pair::new(never);
    let (_, b_conn, _, _) = pair.open(false, accept);
    pair.b.command(Command::Disconnect {
        conn: b_conn,
        abrupt: true,
    });
    pair.run(5);
    assert_eq!(
        briefs(&pair.b.out()),
        ["DONE(0)".to_string(), format!("Close({})", -ECONNRESET)]
    );
    assert_eq!(briefs(&pair.a.out()), [format!("Close({})", -ECONNRESET)]);
    pair.assert_empty_after(1);
}

/// Every k-th frame on the wire is lost (k = 3, 4, 5, counted from every starting
/// point), so that each of the SYN, SYN-ACK, request, reply, RTR and FINs is lost in one
/// run or another: every connection still sets up and closes with exactly the events of
/// a clean wire, and leaves nothing on either side.
#[test]
fn setup_and_close_survive_a_lossy_wire() {
    let mut lost = Vec::new();
    for loss in (3..=5).flat_map(|k| (0..k).map(move |r| (k, r))) {
        let mut pair = Pair::new(move |n| n % loss.0 == loss.1);
        let (a_conn, b_conn, a_heard, b_heard) = pair.open(false, accept);
        assert_eq!(briefs(&a_heard), ["ConnectReply(0)"], "loss {loss:?}");
        let reply = event(&a_heard[0]);
        assert_eq!(
            (reply.conn, reply.private_data.as_slice()),
            (a_conn, &b"from B"[..])
        );
        assert_eq!((reply.ird, reply.ord), (8, 4));
        assert_eq!(
            briefs(&b_heard),
            ["ConnectRequest(0)", "DONE(0)", "Established(0)"],
            "loss {loss:?}"
        );
        assert_eq!(
            (event(&b_heard[0]).conn, event(&b_heard[2]).conn),
            (b_conn, b_conn)
        );
        pair.assert_flows_agree();
        pair.a.command(Command::Disconnect {
            conn: a_conn,
            abrupt: false,
        });
        pair.run(30_000);
        let (a_heard, b_heard) = (pair.a.out(), pair.b.out());
        assert_eq!(briefs(&a_heard), ["DONE(0)", "Close(0)"], "loss {loss:?}");
        assert_eq!(event(&a_heard[1]).conn, a_conn);
        assert_eq!(
            briefs(&b_heard),
            ["Disconnect(0)", "Close(0)"],
            "loss {loss:?}"
        );
        assert!(b_heard.iter().all(|o| event(o).conn == b_conn));
        pair.assert_empty_after(90_000);
        assert!(pair.a.out().is_empty() && pair.b.out().is_empty());
        let retransmissions = |b: &Bench| b.fw.counters().retransmissions;
        if pair.lost.iter().any(|&what| what != "ACK") {
            assert!(retransmissions(&pair.a) + retransmissions(&pair.b) > 0);
        }
        lost.extend(pair.lost);
    }
    for what in ["SYN", "SYN-ACK", "request", "reply", "FPDU", "FIN"] {
        assert!(lost.contains(&what), "no {what} lost: {lost:?}");
    }
}
