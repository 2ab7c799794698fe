//! The `iwnic sim` scenario on the model: a clean run delivers every byte and Wireshark
//! finds every FPDU good; a link that corrupts FPDUs gets them caught by the MPA CRC.

use std::time::Duration;

use iwnic_testbench::link::LinkConfig;
use iwnic_testbench::scenario::{run, Quiet, Scenario};
use iwnic_testbench::sim::EngineKind;
use iwnic_testbench::tshark::dissect;

fn scenario(pcap: std::path::PathBuf) -> Scenario {
    Scenario {
        connections: 8,
        fpdus: 4,
        size: 700,
        mpa_v1: false,
        private_data: b"iwnic".to_vec(),
        link: LinkConfig::default(),
        pcap: Some(pcap),
        patience: Duration::from_secs(20),
        firmware_poll_cycles: 1_000,
        engine: EngineKind::from_env(),
    }
}

#[test]
fn every_byte_arrives_and_wireshark_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(&scenario(dir.path().join("sim.pcap")), &Quiet).unwrap();
    assert!(outcome.ok(), "{:?}", outcome.failures);
    assert_eq!((outcome.established, outcome.closed), (8, 16));
    assert_eq!(outcome.messages_delivered, 2 * 8 * 4);
    assert_eq!(outcome.bytes_delivered, 2 * 8 * 4 * 700);
    assert_eq!(outcome.a_events.get("ConnectReply(0)"), Some(&8));
    assert_eq!(outcome.b_events.get("Established(0)"), Some(&8));
    let (pcap, frames) = outcome.sim.pcap.clone().unwrap();
    let d = dissect(&pcap).unwrap();
    d.check_clean().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.frames, frames);
    assert_eq!((d.mpa_requests, d.mpa_replies), (8, 8));
    assert_eq!(d.fpdus, 8 + 2 * 8 * 4, "the RTRs and every Send");
}

#[test]
fn mpa_v1_runs_without_rtr() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        &Scenario {
            mpa_v1: true,
            ..scenario(dir.path().join("v1.pcap"))
        },
        &Quiet,
    )
    .unwrap();
    assert!(outcome.ok(), "{:?}", outcome.failures);
    let d = dissect(&outcome.sim.pcap.unwrap().0).unwrap();
    assert_eq!(d.fpdus, 2 * 8 * 4, "no RTR in revision 1");
}

#[test]
fn a_corrupted_fpdu_is_caught_by_the_crc_and_resets_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    // Payload bits flipped with the TCP checksum recomputed: only the MPA CRC sees it.
    // The link draws for frames with payload alone, so the seed fixes which one is hit
    // first whatever the threads' timing: with seed 12, the 39th. Setup sends 24 (eight
    // MPA requests, replies and RTRs), so every connection comes up and the first byte
    // flipped is in a Send, with room for a retransmission or two in setup.
    let link = LinkConfig {
        corrupt: 0.05,
        seed: 12,
        ..LinkConfig::default()
    };
    let outcome = run(
        &Scenario {
            link,
            patience: Duration::from_secs(3),
            ..scenario(dir.path().join("bad.pcap"))
        },
        &Quiet,
    )
    .unwrap();
    assert!(!outcome.ok());
    assert_eq!(outcome.established, 8, "{:?}", outcome.failures);
    assert_eq!(
        outcome.altered, 0,
        "the CRC lets no corrupted byte through to a host"
    );
    let crc_errors = outcome.sim.a.datapath.crc_errors + outcome.sim.b.datapath.crc_errors;
    assert!(crc_errors > 0, "{:?}", outcome.sim);
    let terminates =
        outcome.sim.a.firmware.terminates_sent + outcome.sim.b.firmware.terminates_sent;
    assert!(terminates >= crc_errors as u32, "TERM for every CRC error");
    let resets = outcome.a_events.get("Close(-104)").copied().unwrap_or(0)
        + outcome.b_events.get("Close(-104)").copied().unwrap_or(0);
    assert!(
        resets > 0,
        "CLOSE -ECONNRESET delivered: {:?} {:?}",
        outcome.a_events,
        outcome.b_events
    );
    let d = dissect(&outcome.sim.pcap.unwrap().0).unwrap();
    assert!(d.bad_crc > 0, "Wireshark sees the bad CRC too");
}
