//! Host input and addresses the firmware refuses: handles of the wrong kind or long dead,
//! connects to addresses no peer can have, SYNs from them. Bad input gets a clear error
//! or no answer, and never acts on another object.

mod common;

use common::*;
use iwnic_proto::errno::ECONNRESET;
use iwnic_proto::host::{Command, Endpoint};

/// The handle of a request reset in CONN_RECV: the kernel's iw_cm has no event for it,
/// so the application may still hold the id and answer it late.
fn a_dead_handle<const N: usize, const B: usize>(bench: &mut Bench<N, B>) -> u32 {
    bench.listen(PORT, 8);
    let (peer, _, out) = request_from(bench, 40000);
    let dead = event(&out[0]).conn;
    bench.deliver(peer.rst());
    assert!(
        bench.out().is_empty(),
        "no event for a request reset in CONN_RECV"
    );
    bench.sent();
    dead
}

/// `lifetimes` connections, each connected and released before the next.
fn churn<const N: usize, const B: usize>(bench: &mut Bench<N, B>, lifetimes: u32) {
    for _ in 0..lifetimes {
        bench.command(connect_to_peer(1, 1, false, b""));
        let handle = done(&bench.out()[0]).handle;
        bench.command(Command::Release { conn: handle });
        bench.out();
        bench.sent();
    }
}

/// Listener and connection handles are both `generation << 16 | slot`, their
/// generations of different parity: a Release meant for a listener is refused with
/// -EINVAL and leaves the connection of the same slot waiting for its accept, and an
/// Unlisten with a connection's handle leaves the listener.
#[test]
fn a_listener_handle_never_names_a_connection() {
    let mut bench = Bench::default();
    let listener = bench.listen(PORT, 8);
    let (_, _, out) = request_from(&mut bench, 40000);
    assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
    let conn = event(&out[0]).conn;
    assert_eq!(listener & 0xFFFF, conn & 0xFFFF, "the same slot");
    bench.command(Command::Release { conn: listener });
    let released = bench.out();
    let reset = bench.sent();
    assert_eq!(
        (briefs(&released), kinds(&reset), bench.fw.connections()),
        (
            vec![format!("DONE({})", -iwnic_proto::errno::EINVAL)],
            vec![],
            1
        ),
        "Release(listener {listener:#x}) must not touch connection {conn:#x}"
    );
    bench.command(Command::Unlisten { listener: conn });
    assert_eq!(
        briefs(&bench.out()),
        [format!("DONE({})", -iwnic_proto::errno::EINVAL)]
    );
    assert_eq!(bench.fw.listener_count(), 1);
    bench.command(accept_command(conn));
    assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
}

/// A handle the host saw die (a request reset underneath, for which the kernel's iw_cm
/// has no event, so the application may still hold the CONN_RECV id) answers a late
/// accept with -ECONNRESET (spec/iwcm.md's return values) however many connections came
/// and went since: entries are taken in turn, so its slot's generations come round only
/// after 32,767 lifetimes of every slot. (Taking the last freed entry first, one
/// connection at a time reused one slot, and after 65,535 the dead handle accepted a
/// stranger's request.)
#[test]
fn a_dead_connection_handle_never_names_a_new_connection() {
    let mut bench = Bench::default();
    let dead = a_dead_handle(&mut bench);
    // Other applications' connections come and go, one at a time, through every entry.
    churn(&mut bench, 65_534);
    // A stranger's request arrives; the holder of the dead id answers late.
    let (_, _, out) = request_from(&mut bench, 41000);
    assert_eq!(briefs(&out), ["ConnectRequest(0)"]);
    let stranger = event(&out[0]).conn;
    bench.command(accept_command(dead));
    let answer = bench.out();
    assert_eq!(
        briefs(&answer[..1]),
        [format!("DONE({})", -ECONNRESET)],
        "accept on dead handle {dead:#x} (the stranger's is {stranger:#x}): {:?}",
        briefs(&answer)
    );
}

/// The same for listeners: their slots are taken in turn too, so a stale Unlisten after
/// 65,535 listen/unlisten cycles is refused and removes nobody.
#[test]
fn a_dead_listener_handle_never_names_a_new_listener() {
    let mut bench = Bench::default();
    let dead = bench.listen(PORT, 8);
    bench.command(Command::Unlisten { listener: dead });
    bench.out();
    for _ in 0..65_534u32 {
        let l = bench.listen(PORT + 1, 8);
        bench.command(Command::Unlisten { listener: l });
        bench.out();
    }
    let current = bench.listen(PORT + 1, 8);
    bench.command(Command::Unlisten { listener: dead });
    assert_eq!(
        (briefs(&bench.out()), bench.fw.listener_count()),
        (vec![format!("DONE({})", -iwnic_proto::errno::EINVAL)], 1),
        "a stale Unlisten({dead:#x}) must not remove listener {current:#x}"
    );
}

/// RFC 1122 §4.2.3.10 (RFC 9293 §3.9.1.1 keeps it): "A TCP implementation MUST reject as
/// an error a local OPEN call for an invalid remote IP address (e.g., a broadcast or
/// multicast address)": -EHOSTUNREACH, as cxgb4 answers a connect it has no route for,
/// nothing sent, no entry taken.
#[test]
fn connect_to_an_address_no_peer_can_have_is_refused() {
    let invalid = [
        [255, 255, 255, 255],
        [224, 0, 0, 1],
        [0, 0, 0, 0],
        [127, 0, 0, 1],
        NIC_IP,
    ];
    for remote in invalid {
        let mut bench = Bench::default();
        bench.command(Command::Connect {
            local: Endpoint::v4(NIC_IP, 0),
            remote: Endpoint::v4(remote, PORT),
            ird: 1,
            ord: 1,
            qpn: 1,
            mpa_v1: false,
            private_data: b"",
        });
        assert_eq!(
            briefs(&bench.out()),
            [format!("DONE({})", -iwnic_proto::errno::EHOSTUNREACH)],
            "connect to {remote:?}"
        );
        assert!(bench.sent().is_empty());
        assert_eq!(bench.fw.connections(), 0);
    }
}

/// RFC 1122 §4.2.3.10: "An incoming SYN with an invalid source address must be ignored
/// either by TCP or by the IP layer (see Section 3.2.1.3)"; §3.2.1.3: a broadcast or
/// multicast address, or one of the host's own, is never a valid source. Linux drops
/// them as martians: no half-open entry, no SYN-ACK, and no RST to another segment.
#[test]
fn a_listener_ignores_syns_from_invalid_source_addresses() {
    for source in [
        [255, 255, 255, 255],
        [224, 0, 0, 1],
        [127, 0, 0, 1],
        [0; 4],
        NIC_IP,
    ] {
        let mut bench = Bench::default();
        bench.listen(PORT, 8);
        let mut peer = Peer::new(40000, PORT, 5);
        for mut frame in [peer.syn(), peer.data(b"no connection")] {
            frame[26..30].copy_from_slice(&source); // IPv4 source address
            fix_checksums(&mut frame);
            bench.deliver(frame);
        }
        assert!(bench.sent().is_empty(), "from {source:?}");
        assert_eq!(bench.fw.connections(), 0);
        let counters = bench.fw.counters();
        assert_eq!(
            (counters.frames_ignored, counters.segments_unmatched),
            (2, 0)
        );
    }
}

/// Linux numbers hosts in 240/4 and in 0/8 but 0.0.0.0 (RFC 1122 reserves both): a SYN
/// from one gets its SYN-ACK, and a connect to one goes out.
#[test]
fn addresses_linux_numbers_hosts_in_are_peers() {
    for address in [[240, 0, 0, 2], [0, 1, 2, 3]] {
        let mut bench = Bench::default();
        bench.listen(PORT, 8);
        let mut syn = Peer::new(40000, PORT, 5).syn();
        syn[26..30].copy_from_slice(&address); // IPv4 source address
        fix_checksums(&mut syn);
        bench.deliver(syn);
        assert_eq!(kinds(&bench.sent()), ["SYN-ACK"], "from {address:?}");
        bench.command(Command::Connect {
            local: Endpoint::v4(NIC_IP, 0),
            remote: Endpoint::v4(address, PORT),
            ird: 1,
            ord: 1,
            qpn: 1,
            mpa_v1: false,
            private_data: b"",
        });
        assert_eq!(briefs(&bench.out()), ["DONE(0)"]);
        assert_eq!(kinds(&bench.sent()), ["SYN"], "to {address:?}");
    }
}

/// A dead handle answers -ECONNRESET for as long as its entry's generations have not
/// come round: 32,767 more lifetimes of the entry. A table of one entry shows the far
/// end quickly (half of them was the limit once).
#[test]
fn a_dead_handle_is_gone_for_every_lifetime_of_its_entry() {
    let mut bench = Bench::<1, 1>::sized(config());
    let dead = a_dead_handle(&mut bench);
    churn(&mut bench, 32_766);
    // A stranger's request in the entry's last lifetime before the generations come
    // round; the holder of the dead id answers late.
    let (_, _, out) = request_from(&mut bench, 41000);
    let stranger = event(&out[0]).conn;
    bench.command(accept_command(dead));
    assert_eq!(briefs(&bench.out()), [format!("DONE({})", -ECONNRESET)]);
    bench.command(Command::Release { conn: stranger });
    bench.out();
    bench.sent();
    // The 32,768th lifetime has the dead handle's generation again.
    let (_, _, out) = request_from(&mut bench, 42000);
    assert_eq!(event(&out[0]).conn, dead);
}
