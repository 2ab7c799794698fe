//! Host-interface records: a round trip of every record type, and every rejection.

use iwnic_proto::host::*;
use iwnic_proto::mpa::RtrTypes;
use iwnic_proto::Error;

const LOCAL: Endpoint = Endpoint::v4([10, 0, 0, 1], 4791);
const REMOTE: Endpoint = Endpoint::v4([10, 0, 0, 2], 50000);

fn emit(record: &Record) -> Vec<u8> {
    let mut buf = vec![0u8; record.buffer_len()];
    assert_eq!(record.emit(&mut buf), Ok(buf.len()));
    assert_eq!(Record::record_len(&buf), Ok(buf.len()));
    buf
}

fn round_trip(record: Record) {
    let wire = emit(&record);
    assert_eq!(Record::parse(&wire), Ok(record), "{record:?}");
}

fn commands(pd: &[u8]) -> Vec<Command<'_>> {
    vec![
        Command::Listen {
            local: Endpoint::v4([0; 4], 4791),
            backlog: 16,
        },
        Command::Unlisten { listener: 3 },
        Command::Connect {
            local: LOCAL,
            remote: REMOTE,
            ird: 16,
            ord: 8,
            qpn: 7,
            mpa_v1: false,
            private_data: pd,
        },
        Command::Connect {
            local: LOCAL,
            remote: REMOTE,
            ird: 1,
            ord: 1,
            qpn: 7,
            mpa_v1: true,
            private_data: pd,
        },
        Command::Accept {
            conn: 9,
            ird: 4,
            ord: 4,
            qpn: 11,
            private_data: pd,
        },
        Command::Reject {
            conn: 9,
            private_data: pd,
        },
        Command::Disconnect {
            conn: 9,
            abrupt: false,
        },
        Command::Disconnect {
            conn: 9,
            abrupt: true,
        },
        Command::Release { conn: 9 },
        Command::Delivered { conn: 9 },
    ]
}

#[test]
fn every_command_round_trips() {
    for pd_len in [0usize, 1, 255, 256, 512] {
        let pd: Vec<u8> = (0..pd_len).map(|i| i as u8).collect();
        for (tag, command) in commands(&pd).into_iter().enumerate() {
            round_trip(Record::Command(CommandRecord {
                tag: tag as u32,
                command,
            }));
        }
    }
}

#[test]
fn completions_and_events_round_trip() {
    round_trip(Record::Completion(Completion {
        tag: 1,
        status: 0,
        handle: 42,
    }));
    round_trip(Record::Completion(Completion {
        tag: 2,
        status: -22,
        handle: 0,
    }));
    let pd = [7u8; 512];
    for kind in [
        EventKind::ConnectRequest,
        EventKind::ConnectReply,
        EventKind::Established,
        EventKind::Disconnect,
        EventKind::Close,
    ] {
        for (status, pd) in [(0, &pd[..0]), (-111, &pd[..]), (-104, &pd[..255])] {
            let v6 = Endpoint {
                addr: IpAddr::V6([0xfe; 16]),
                port: 1,
            };
            round_trip(Record::Event(Event {
                seq: kind as u32 * 100,
                kind,
                conn: 5,
                listener: 2,
                status,
                local: LOCAL,
                remote: v6,
                ird: 16,
                ord: 0x3FFF,
                rtr: RtrTypes::NONE,
                private_data: pd,
            }));
        }
    }
}

#[test]
fn the_layout_is_the_documented_one() {
    let command = CommandRecord {
        tag: 0x0102_0304,
        command: Command::Connect {
            local: LOCAL,
            remote: REMOTE,
            ird: 16,
            ord: 8,
            qpn: 7,
            mpa_v1: true,
            private_data: b"hi",
        },
    };
    let wire = emit(&Record::Command(command));
    assert_eq!(&wire[..8], &[3, 0x01, 66, 0, 4, 3, 2, 1]);
    assert_eq!(&wire[12..20], &[16, 0, 8, 0, 7, 0, 0, 0]);
    assert_eq!(&wire[20..28], &[4, 0, 0xB7, 0x12, 10, 0, 0, 1]);
    assert_eq!(&wire[40..48], &[4, 0, 0x50, 0xC3, 10, 0, 0, 2]);
    assert_eq!(&wire[60..66], &[2, 0, 0, 0, b'h', b'i']);
    let completion = emit(&Record::Completion(Completion {
        tag: 9,
        status: -111,
        handle: 5,
    }));
    assert_eq!(
        completion,
        [0x40, 0, 16, 0, 9, 0, 0, 0, 5, 0, 0, 0, 0x91, 0xFF, 0xFF, 0xFF]
    );
}

fn good_connect() -> Vec<u8> {
    emit(&Record::Command(CommandRecord {
        tag: 1,
        command: commands(b"pd")[2],
    }))
}

#[test]
fn bad_records_are_refused() {
    let good = good_connect();
    assert!(Record::parse(&good).is_ok());
    let refuse = |mutate: &dyn Fn(&mut Vec<u8>), why: Error| {
        let mut bad = good.clone();
        mutate(&mut bad);
        assert_eq!(Record::parse(&bad), Err(why), "{bad:?}");
    };
    refuse(&|b| b.truncate(65), Error::Truncated);
    refuse(&|b| b.truncate(7), Error::Truncated);
    refuse(&|b| b[0] = 0x09, Error::Malformed); // unknown command
    refuse(&|b| b[0] = 0x86, Error::Malformed); // unknown event
    refuse(&|b| b[1] = 0x02, Error::Malformed); // undefined flag
    refuse(&|b| b[2] = 67, Error::Truncated); // length beyond the buffer
    refuse(&|b| b[2] = 65, Error::Malformed); // length not matching the private data
    refuse(&|b| b[8] = 1, Error::Malformed); // handle set in a connect
    refuse(&|b| b[20] = 5, Error::Malformed); // address family 5
    refuse(&|b| b[30] = 1, Error::Malformed); // IPv4 with bytes past the 4th
    refuse(&|b| b[40..60].fill(0), Error::Malformed); // connect without a remote
    refuse(&|b| b[62] = 1, Error::Malformed); // reserved
    refuse(
        &|b| {
            b[60..62].copy_from_slice(&513u16.to_le_bytes());
            b.resize(64 + 513, 0);
            b[2..4].copy_from_slice(&(64u16 + 513).to_le_bytes());
        },
        Error::PrivateDataTooLong,
    );
    let completion = emit(&Record::Completion(Completion {
        tag: 9,
        status: 0,
        handle: 5,
    }));
    let mut positive = completion.clone();
    positive[12] = 1;
    assert_eq!(Record::parse(&positive), Err(Error::Malformed));
    assert_eq!(Record::parse(&[]), Err(Error::Truncated));
}

#[test]
fn emit_refuses_what_cannot_be_decoded() {
    let pd = [0u8; 513];
    let too_long = CommandRecord {
        tag: 1,
        command: Command::Reject {
            conn: 1,
            private_data: &pd,
        },
    };
    assert_eq!(
        too_long.emit(&mut [0u8; 1024]),
        Err(Error::PrivateDataTooLong)
    );
    let positive = Completion {
        tag: 1,
        status: 5,
        handle: 0,
    };
    assert_eq!(positive.emit(&mut [0u8; 16]), Err(Error::Malformed));
    let record = CommandRecord {
        tag: 1,
        command: Command::Release { conn: 1 },
    };
    assert_eq!(record.emit(&mut [0u8; 63]), Err(Error::BufferTooSmall));
}

/// An event of `kind` and `status` naming `rtr`.
fn event_with_rtr(kind: EventKind, status: i32, rtr: RtrTypes) -> Event<'static> {
    Event {
        seq: 1,
        kind,
        conn: 5,
        listener: 0,
        status,
        local: LOCAL,
        remote: REMOTE,
        ird: 4,
        ord: 4,
        rtr,
        private_data: b"",
    }
}

#[test]
fn an_event_names_the_rtr_that_began_fpdu_mode_in_its_flags() {
    for (rtr, flags) in RtrTypes::EACH.into_iter().zip([0x01, 0x02, 0x04]) {
        for kind in [EventKind::ConnectReply, EventKind::Established] {
            let event = event_with_rtr(kind, 0, rtr);
            let wire = emit(&Record::Event(event));
            assert_eq!(wire[1], flags, "{rtr:?}");
            round_trip(Record::Event(event));
        }
    }
    // On every other event, a failed CONNECT_REPLY, or two at once: malformed both ways.
    let good = emit(&Record::Event(event_with_rtr(
        EventKind::Established,
        0,
        RtrTypes::WRITE,
    )));
    for flags in [0x03, 0x06, 0x08, 0x80] {
        let mut bad = good.clone();
        bad[1] = flags;
        assert_eq!(Record::parse(&bad), Err(Error::Malformed), "{flags:#x}");
    }
    for (kind, status) in [
        (EventKind::ConnectReply, -111),
        (EventKind::ConnectRequest, 0),
        (EventKind::Disconnect, 0),
        (EventKind::Close, 0),
    ] {
        let event = event_with_rtr(kind, status, RtrTypes::READ);
        assert_eq!(
            event.emit(&mut [0u8; 128]),
            Err(Error::Malformed),
            "{kind:?}"
        );
        let mut wire = emit(&Record::Event(event_with_rtr(kind, status, RtrTypes::NONE)));
        wire[1] = 0x04;
        assert_eq!(Record::parse(&wire), Err(Error::Malformed), "{kind:?}");
    }
    let both = RtrTypes {
        send: true,
        write: true,
        read: false,
    };
    let event = event_with_rtr(EventKind::Established, 0, both);
    assert_eq!(event.emit(&mut [0u8; 128]), Err(Error::Malformed));
}
