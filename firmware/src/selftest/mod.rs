//! Self-tests that run on the target (under QEMU, see `scripts/riscv-firmware.sh`) and
//! on the host (`cargo test`), so the same checks prove the code on both ISAs: byte
//! order, CRC tables and slice handling are where a 32-bit little-endian core could
//! differ from the host.

pub mod passive_open;

use iwnic_proto::crc32c::crc32c;
use iwnic_proto::ddp::MessageRepr;
use iwnic_proto::fpdu::{FpduRepr, SplitEvent, Splitter};
use iwnic_proto::host::{Command, CommandRecord, Endpoint, Record};
use iwnic_proto::mpa::{FrameKind, FrameRepr, RtrTypes, V2Block, REQUEST_KEY};

/// One named self-test.
pub struct Case {
    pub name: &'static str,
    pub run: fn() -> Result<(), &'static str>,
}

/// Every self-test, in the order they run.
pub const CASES: &[Case] = &[
    Case {
        name: "crc32c_vectors",
        run: crc32c_vectors,
    },
    Case {
        name: "mpa_request_round_trip",
        run: mpa_request_round_trip,
    },
    Case {
        name: "send_fpdu_hello",
        run: send_fpdu_hello,
    },
    Case {
        name: "fpdu_splitter_every_cut",
        run: fpdu_splitter_every_cut,
    },
    Case {
        name: "command_record_round_trip",
        run: command_record_round_trip,
    },
    Case {
        name: "passive_open_v2_rtr",
        run: passive_open_v2_rtr,
    },
    Case {
        name: "passive_opens_side_by_side",
        run: passive_opens_side_by_side,
    },
];

/// A passive MPA v2 connection with RTR through the whole state machine, twice (the
/// second reuses the freed entry).
fn passive_open_v2_rtr() -> Result<(), &'static str> {
    passive_opens(1)
}

/// As many passive connections as the in-memory NIC's queues hold, set up side by side
/// (each step's inputs queued for one poll), twice: what the benchmark's full-load figure
/// runs.
fn passive_opens_side_by_side() -> Result<(), &'static str> {
    passive_opens(passive_open::MAX_SIDE_BY_SIDE)
}

fn passive_opens(side_by_side: usize) -> Result<(), &'static str> {
    use passive_open::{MemoryFirmware, MemoryNic};
    let config = passive_open::config(iwnic_proto::net::Checksums::Software);
    let mut fw = MemoryFirmware::new(config);
    let mut nic = MemoryNic::default();
    passive_open::listen(&mut fw, &mut nic)?;
    let poll = |fw: &mut MemoryFirmware, nic: &mut MemoryNic| {
        fw.poll(nic, smoltcp::time::Instant::from_millis(0))
    };
    passive_open::passive_setups(&mut fw, &mut nic, 40000, side_by_side, poll)?;
    passive_open::passive_setups(&mut fw, &mut nic, 41000, side_by_side, poll)
}

fn check(ok: bool, why: &'static str) -> Result<(), &'static str> {
    if ok {
        Ok(())
    } else {
        Err(why)
    }
}

fn crc32c_vectors() -> Result<(), &'static str> {
    check(crc32c(b"123456789") == 0xE306_9283, "\"123456789\"")?;
    check(crc32c(&[0x00; 32]) == 0x8A91_36AA, "32 x 0x00")?;
    check(crc32c(&[0xFF; 32]) == 0x62A8_AB43, "32 x 0xFF")?;
    let ramp: [u8; 32] = core::array::from_fn(|i| i as u8);
    check(crc32c(&ramp) == 0x46DD_794E, "0x00..0x1F")
}

/// The revision-2 request of spec/mpa.md, emitted, compared and parsed back.
fn mpa_request_round_trip() -> Result<(), &'static str> {
    let request = FrameRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        revision: 2,
        v2: Some(V2Block {
            peer_to_peer: true,
            rtr: RtrTypes {
                send: false,
                write: true,
                read: true,
            },
            ird: 16,
            ord: 16,
        }),
        private_data: &[],
    };
    let mut wire = [0u8; 24];
    check(request.emit(&mut wire) == Ok(24), "emit")?;
    check(&wire[..16] == REQUEST_KEY, "key")?;
    check(
        wire[16..] == [0x50, 0x02, 0x00, 0x04, 0x80, 0x10, 0xC0, 0x10],
        "bytes",
    )?;
    check(FrameRepr::parse_bytes(&wire) == Ok(request), "parse")
}

const HELLO_FPDU: [u8; 32] = [
    0x00, 0x17, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, b'h', b'e', b'l', b'l',
    b'o', 0, 0, 0, 0xB9, 0x90, 0xB1, 0x0C,
];

fn send_fpdu_hello() -> Result<(), &'static str> {
    let send = MessageRepr::send(b"hello", 1);
    let mut ulpdu = [0u8; 23];
    check(send.emit(&mut ulpdu) == Ok(23), "emit ULPDU")?;
    let mut wire = [0u8; 32];
    check(
        FpduRepr { ulpdu: &ulpdu }.emit(&mut wire) == Ok(32),
        "emit FPDU",
    )?;
    check(wire == HELLO_FPDU, "bytes")?;
    let parsed = FpduRepr::parse(&wire).map_err(|_| "parse FPDU")?;
    check(MessageRepr::parse(parsed.ulpdu) == Ok(send), "parse ULPDU")
}

fn fpdu_splitter_every_cut() -> Result<(), &'static str> {
    for cut in 0..=HELLO_FPDU.len() {
        let mut splitter = Splitter::new(u16::MAX);
        let (mut data, mut ends) = (0usize, 0usize);
        for piece in [&HELLO_FPDU[..cut], &HELLO_FPDU[cut..]] {
            splitter
                .push(piece, |event| match event {
                    SplitEvent::Data(d) => data += d.len(),
                    SplitEvent::End => ends += 1,
                    SplitEvent::Start { .. } => {}
                })
                .map_err(|_| "splitter error")?;
        }
        check(data == 23 && ends == 1 && splitter.at_boundary(), "split")?;
    }
    Ok(())
}

fn command_record_round_trip() -> Result<(), &'static str> {
    let record = Record::Command(CommandRecord {
        tag: 7,
        command: Command::Connect {
            local: Endpoint::v4([10, 0, 0, 1], 40000),
            remote: Endpoint::v4([10, 0, 0, 2], 4791),
            ird: 16,
            ord: 16,
            qpn: 1,
            mpa_v1: false,
            private_data: b"iwnic",
        },
    });
    let mut wire = [0u8; 80];
    let len = record.emit(&mut wire).map_err(|_| "emit")?;
    check(Record::parse(&wire[..len]) == Ok(record), "parse")
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_case_passes_on_the_host() {
        for case in super::CASES {
            assert_eq!((case.run)(), Ok(()), "{}", case.name);
        }
    }
}
