//! Two NICs' firmware joined by a wire: MPA v1 and v2 connections set up, refused and
//! closed end to end, also over a wire that loses frames, and two applications playing
//! random connection lives over a wire that loses, doubles and reorders them, both ends
//! held to the contract's event rules. The datapath is reduced to its steering rule: a
//! frame of a flow in FPDU mode reaches the firmware only if it carries FIN or RST or
//! the flow still expects the RTR (an RTR that comes whole, as iwnic sends it, the
//! datapath takes itself); no FPDU data moves here.

mod common;

use common::*;
use iwnic_firmware::Config;
use iwnic_proto::errno::{ECONNREFUSED, ECONNRESET};
use iwnic_proto::host::{Command, Endpoint, EventKind};
use iwnic_proto::mpa::{RtrTypes, REPLY_KEY, REQUEST_KEY};
use iwnic_proto::net::TcpSegment;
use iwnic_proto::smoltcp_wire::TcpControl;
use proptest::prelude::*;

const A_IP: [u8; 4] = NIC_IP;
const B_IP: [u8; 4] = PEER_IP;

struct Pair {
    a: Bench,
    b: Bench,
    /// What the wire does to the n-th frame it carries (counted from 1).
    wire: Box<dyn Fn(usize) -> Fault>,
    carried: usize,
    /// What the lost frames were (see [`what`]).
    lost: Vec<&'static str>,
    /// Frames the wire holds back ([`Fault::Delay`]): when they arrive, and at which side
    /// (B if `true`).
    held: Vec<(i64, bool, Vec<u8>)>,
}

/// What the wire does to a frame.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Deliver,
    Drop,
    /// Delivered twice.
    Duplicate,
    /// Delivered this many milliseconds late, so later frames overtake it.
    Delay(u16),
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
    fn new(wire: impl Fn(usize) -> Fault + 'static) -> Pair {
        let mss = config().mss;
        Pair::with_mss(wire, mss, mss)
    }

    /// Each side advertising its own MSS, which cuts the other's MPA frames into pieces.
    fn with_mss(wire: impl Fn(usize) -> Fault + 'static, a_mss: u16, b_mss: u16) -> Pair {
        let b_config = Config {
            ip: B_IP,
            mac: PEER_MAC,
            next_hop_mac: NIC_MAC,
            mss: b_mss,
            ..config()
        };
        Pair {
            a: Bench::with(Config {
                mss: a_mss,
                ..config()
            }),
            b: Bench::with(b_config),
            wire: Box::new(wire),
            carried: 0,
            lost: Vec::new(),
            held: Vec::new(),
        }
    }

    /// Move frames across until the wire is quiet, polling both sides; frames held back
    /// arrive once their time has come.
    fn exchange(&mut self) {
        loop {
            let now = self.a.now_ms;
            let (due, later) = std::mem::take(&mut self.held)
                .into_iter()
                .partition(|&(at, _, _)| at <= now);
            self.held = later;
            let due: Vec<(i64, bool, Vec<u8>)> = due;
            let a_out: Vec<Vec<u8>> = self.a.hal.tx.drain(..).collect();
            let b_out: Vec<Vec<u8>> = self.b.hal.tx.drain(..).collect();
            if a_out.is_empty() && b_out.is_empty() && due.is_empty() {
                return;
            }
            for (frames, to_b) in [(a_out, true), (b_out, false)] {
                for frame in frames {
                    self.carried += 1;
                    match (self.wire)(self.carried) {
                        Fault::Deliver => self.deliver(to_b, frame),
                        Fault::Drop => self.lost.push(what(&frame)),
                        Fault::Duplicate => {
                            self.deliver(to_b, frame.clone());
                            self.deliver(to_b, frame);
                        }
                        Fault::Delay(ms) => self.held.push((now + i64::from(ms), to_b, frame)),
                    }
                }
                self.side(to_b).poll();
            }
            for (_, to_b, frame) in due {
                self.deliver(to_b, frame);
                self.side(to_b).poll();
            }
        }
    }

    fn side(&mut self, b: bool) -> &mut Bench {
        match b {
            true => &mut self.b,
            false => &mut self.a,
        }
    }

    /// A frame reaches a side's datapath, which steers it.
    fn deliver(&mut self, to_b: bool, frame: Vec<u8>) {
        let to = self.side(to_b);
        match steer(to, &frame) {
            Steer::Firmware => to.hal.arrive(frame),
            // The datapath's own ACK leaves with the firmware's frames.
            Steer::Datapath(Some(ack)) => to.hal.tx.push(ack),
            Steer::Datapath(None) => {}
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

fn never(_: usize) -> Fault {
    Fault::Deliver
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
        let mut pair = Pair::new(move |n| match n % loss.0 == loss.1 {
            true => Fault::Drop,
            false => Fault::Deliver,
        });
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

/// One connection as the two applications play it.
#[derive(Debug, Clone)]
struct Life {
    /// When A connects, in ms from the start.
    connect_at: u16,
    mpa_v1: bool,
    /// B's application accepts the request (or rejects it) this long after it comes;
    /// when later than at once, its handler returns first and the driver says so
    /// (`Delivered`, rule 10).
    accept: bool,
    answer_after: u16,
    /// Once up (A: CONNECT_REPLY 0; B: ESTABLISHED), this side disconnects after
    /// `close_after` ms, abruptly or gracefully.
    a_closes: bool,
    abrupt: bool,
    close_after: u16,
    /// Private data bytes of the request (at least the life's number) and of the reply:
    /// up to 508, what revision 2's block leaves of the 512 on the wire.
    request_data: u16,
    reply_data: u16,
}

/// `len` bytes of private data of life `i`: its number first, so the other side can tell
/// which life a request is.
fn private_data(i: usize, len: u16) -> Vec<u8> {
    (0..len)
        .map(|k| (i as u8).wrapping_add((k as u8).wrapping_mul(7)))
        .collect()
}

prop_compose! {
    fn life()(
        connect_at in 0u16..3_000,
        mpa_v1 in prop::bool::weighted(0.25),
        accept in prop::bool::weighted(0.8),
        answer_after in prop_oneof![Just(0u16), 1u16..2_000],
        a_closes in any::<bool>(),
        abrupt in prop::bool::weighted(0.25),
        close_after in 0u16..2_000,
        request_data in prop_oneof![1u16..16, 1u16..=508],
        reply_data in prop_oneof![0u16..16, 0u16..=508],
    ) -> Life {
        Life {
            connect_at,
            mpa_v1,
            accept,
            answer_after,
            a_closes,
            abrupt,
            close_after,
            request_data,
            reply_data,
        }
    }
}

/// Mostly delivered; the rest lost, doubled or held back up to 300 ms.
fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        14 => Just(Fault::Deliver),
        3 => Just(Fault::Drop),
        1 => Just(Fault::Duplicate),
        2 => (1u16..300).prop_map(Fault::Delay),
    ]
}

/// An MSS a side advertises: mostly Ethernet's, or small enough to cut a 536-byte MPA
/// frame into up to seven pieces.
fn mss() -> impl Strategy<Value = u16> {
    prop_oneof![
        2 => Just(1460u16),
        1 => Just(88u16),
        1 => 88u16..600,
    ]
}

/// Something an application does at a time it chose.
#[derive(Debug, Clone, Copy)]
enum Act {
    Connect(usize),
    Answer(usize),
    /// The life's closing side disconnects.
    Disconnect(usize),
    /// Both applications disconnect, gracefully, every connection of theirs still up
    /// that they have not disconnected. A lost RST leaves a side that sends nothing up
    /// for good, as TCP does (its next segment would draw another); this is that segment.
    Shutdown,
}

/// What happened to one [`Life`] on each side.
#[derive(Debug, Default)]
struct Fate {
    a_conn: Option<u32>,
    b_conn: Option<u32>,
    /// The CONNECT_REPLY's status.
    reply: Option<i32>,
    /// The RTR each side's CONNECT_REPLY 0 or ESTABLISHED named.
    a_rtr: RtrTypes,
    b_rtr: RtrTypes,
    /// The completion of B's answer.
    answered: Option<i32>,
    a_closed: bool,
    b_closed: bool,
    /// B raised ESTABLISHED.
    b_up: bool,
    /// Each side disconnected it.
    a_disconnected: bool,
    b_disconnected: bool,
    /// Both sides' flows were seen to start FPDU mode where the other's do.
    flows_agreed: bool,
}

/// Two applications play `lives` over a wire that does `faults` to its frames in turn
/// (then delivers everything), until both sides have let go of everything.
fn play(lives: &[Life], faults: Vec<Fault>, (a_mss, b_mss): (u16, u16)) {
    let wire = move |n: usize| faults.get(n - 1).copied().unwrap_or(Fault::Deliver);
    let mut pair = Pair::with_mss(wire, a_mss, b_mss);
    let requests: Vec<Vec<u8>> = (lives.iter().enumerate())
        .map(|(i, l)| private_data(i, l.request_data))
        .collect();
    let replies: Vec<Vec<u8>> = (lives.iter().enumerate())
        .map(|(i, l)| private_data(i, l.reply_data))
        .collect();
    let listener = pair.b.listen(PORT, 4);
    let start = pair.a.now_ms;
    let mut acts: Vec<(i64, Act)> = (lives.iter().enumerate())
        .map(|(i, l)| (start + i64::from(l.connect_at), Act::Connect(i)))
        .collect();
    // After every connect's longest setup (SYN retries: 63 s) and the lives' own steps.
    acts.push((start + 120_000, Act::Shutdown));
    let mut fates: Vec<Fate> = lives.iter().map(|_| Fate::default()).collect();
    let mut connects = std::collections::BTreeMap::new();
    let mut answers = std::collections::BTreeMap::new();
    let (mut a_rules, mut b_rules) = (RuleChecker::default(), RuleChecker::default());
    // Long enough after the shutdown for the longest retrying (a FIN sent data_retries
    // times, its timeout backed off up to 60 s: 540 s at most), TIME_WAIT included.
    let end = start + 800_000;
    while pair.a.now_ms < end {
        let now = pair.a.now_ms;
        let (due, later): (Vec<_>, Vec<_>) = acts.into_iter().partition(|&(at, _)| at <= now);
        acts = later;
        for (_, act) in due {
            match act {
                Act::Connect(i) => {
                    let tag = pair.a.command(Command::Connect {
                        local: Endpoint::v4(A_IP, 0),
                        remote: Endpoint::v4(B_IP, PORT),
                        ird: 8,
                        ord: 4,
                        qpn: 1,
                        mpa_v1: lives[i].mpa_v1,
                        private_data: &requests[i],
                    });
                    connects.insert(tag, i);
                }
                Act::Answer(i) => {
                    let conn = fates[i].b_conn.expect("answered after the request");
                    let command = match lives[i].accept {
                        true => Command::Accept {
                            conn,
                            ird: 4,
                            ord: 4,
                            qpn: 2,
                            private_data: &replies[i],
                        },
                        false => Command::Reject {
                            conn,
                            private_data: b"no",
                        },
                    };
                    answers.insert(pair.b.command(command), i);
                }
                Act::Disconnect(i) => {
                    let fate = &mut fates[i];
                    let (side, conn, closing) = match lives[i].a_closes {
                        true => (&mut pair.a, fate.a_conn, &mut fate.a_disconnected),
                        false => (&mut pair.b, fate.b_conn, &mut fate.b_disconnected),
                    };
                    let conn = conn.expect("up before it closes");
                    disconnect(side, conn, closing, lives[i].abrupt);
                }
                Act::Shutdown => {
                    for fate in &mut fates {
                        if let (Some(conn), Some(0), false) =
                            (fate.a_conn, fate.reply, fate.a_closed)
                        {
                            disconnect(&mut pair.a, conn, &mut fate.a_disconnected, false);
                        }
                        if let (true, Some(conn), false) = (fate.b_up, fate.b_conn, fate.b_closed) {
                            disconnect(&mut pair.b, conn, &mut fate.b_disconnected, false);
                        }
                    }
                }
            }
        }
        let find = |fates: &[Fate], a: bool, conn: u32| {
            (fates.iter()).position(|f| (if a { f.a_conn } else { f.b_conn }) == Some(conn))
        };
        for out in pair.a.out() {
            a_rules.see(&out);
            match out {
                Out::Done(c) => {
                    if let Some(i) = connects.remove(&c.tag) {
                        assert_eq!(c.status, 0, "connect {i} taken: {:?}", lives[i]);
                        fates[i].a_conn = Some(c.handle);
                    }
                }
                Out::Event(e) => {
                    let i = find(&fates, true, e.conn).expect("an event of a connect");
                    match e.kind {
                        EventKind::ConnectReply => {
                            fates[i].reply = Some(e.status);
                            fates[i].a_rtr = e.rtr;
                            if e.status == 0 {
                                assert_eq!(e.private_data, replies[i], "B's private data");
                                if lives[i].a_closes {
                                    let at = now + i64::from(lives[i].close_after);
                                    acts.push((at, Act::Disconnect(i)));
                                }
                            }
                        }
                        EventKind::Close => fates[i].a_closed = true,
                        _ => {}
                    }
                }
            }
        }
        for out in pair.b.out() {
            b_rules.see(&out);
            match out {
                Out::Done(c) => {
                    if let Some(i) = answers.remove(&c.tag) {
                        fates[i].answered = Some(c.status);
                    }
                }
                Out::Event(e) if e.kind == EventKind::ConnectRequest => {
                    let i = usize::from(e.private_data[0]);
                    assert_eq!(e.private_data, requests[i], "A's private data");
                    assert!(fates[i].b_conn.is_none(), "one request for connect {i}");
                    fates[i].b_conn = Some(e.conn);
                    let after = lives[i].answer_after;
                    if after > 0 {
                        pair.b.command(Command::Delivered { conn: e.conn });
                    }
                    acts.push((now + i64::from(after), Act::Answer(i)));
                }
                Out::Event(e) => {
                    let i = find(&fates, false, e.conn).expect("an event of a request");
                    match e.kind {
                        EventKind::Established => {
                            fates[i].b_up = true;
                            fates[i].b_rtr = e.rtr;
                            if !lives[i].a_closes {
                                let at = now + i64::from(lives[i].close_after);
                                acts.push((at, Act::Disconnect(i)));
                            }
                        }
                        EventKind::Close => fates[i].b_closed = true,
                        _ => {}
                    }
                }
            }
        }
        for fate in &mut fates {
            let both_up = fate.reply == Some(0) && fate.b_up;
            let open =
                !(fate.a_closed || fate.b_closed || fate.a_disconnected || fate.b_disconnected);
            if both_up && open && !std::mem::replace(&mut fate.flows_agreed, true) {
                let flow = |bench: &Bench, conn: Option<u32>| {
                    let index = conn.map(|c| (c & 0xFFFF) as u16);
                    *index
                        .and_then(|i| bench.hal.flows.get(&i))
                        .expect("in FPDU mode")
                };
                let (a, b) = (flow(&pair.a, fate.a_conn), flow(&pair.b, fate.b_conn));
                assert_eq!(
                    (a.snd_nxt, a.rcv_nxt),
                    (b.rcv_nxt, b.snd_nxt),
                    "each side starts FPDU mode where the other does: {fate:?}"
                );
                assert_eq!(fate.a_rtr, fate.b_rtr, "both name the RTR sent: {fate:?}");
            }
        }
        let quiet = pair.held.is_empty() && acts.is_empty();
        if quiet && pair.a.fw.connections() + pair.b.fw.connections() == 0 {
            break;
        }
        // A millisecond at a time while anything moves, then in strides.
        let stride = if now - start < 30_000 { 1 } else { 25 };
        pair.a.now_ms += stride;
        pair.b.now_ms += stride;
        pair.a.poll();
        pair.b.poll();
        pair.exchange();
    }
    for (i, (life, fate)) in lives.iter().zip(&fates).enumerate() {
        let reply = fate
            .reply
            .unwrap_or_else(|| panic!("connect {i} answered: {fate:?}"));
        if reply == 0 {
            assert!(
                fate.a_closed,
                "connect {i}: CLOSE after CONNECT_REPLY 0: {fate:?}"
            );
            assert!(life.accept && fate.answered == Some(0), "{i}: {fate:?}");
        }
        if !life.accept {
            assert_ne!(reply, 0, "connect {i} was rejected: {fate:?}");
        }
        if fate.b_conn.is_some() {
            assert!(
                fate.answered.is_some(),
                "{i}: B's answer completes: {fate:?}"
            );
        }
        assert!(
            !fate.b_up || fate.b_closed,
            "{i}: CLOSE after ESTABLISHED: {fate:?}"
        );
    }
    pair.b.command(Command::Unlisten { listener });
    for bench in [&mut pair.a, &mut pair.b] {
        assert_eq!(bench.fw.connections(), 0, "connections left");
        assert_eq!(bench.fw.buffers_in_use(), 0, "negotiation buffers left");
        assert_eq!(bench.fw.listener_count(), 0, "listeners left");
        assert!(bench.hal.flows.is_empty(), "datapath flows left");
    }
}

/// The application disconnects `conn`, once.
fn disconnect(side: &mut Bench, conn: u32, disconnected: &mut bool, abrupt: bool) {
    if !std::mem::replace(disconnected, true) {
        side.command(Command::Disconnect { conn, abrupt });
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Both ends are iwnic: up to three connections set up, refused and closed by either
    /// side, with up to 508 bytes of private data each way, MPA frames cut into pieces
    /// by a small MSS, over a wire that loses, doubles and reorders frames. Each side keeps the
    /// contract's event rules, every connect is answered once, every connection that
    /// came up ends with CLOSE on both sides, and nothing is left on either.
    #[test]
    fn both_ends_keep_the_rules_over_a_faulty_wire(
        lives in proptest::collection::vec(life(), 1..=3),
        faults in proptest::collection::vec(fault(), 0..150),
        mss in (mss(), mss()),
    ) {
        play(&lives, faults, mss);
    }
}
