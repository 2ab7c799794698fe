//! Wireshark (tshark) judges captures of iwnic's wire formats: the MPA request and reply
//! are found, every FPDU has a good CRC, nothing is malformed, no checksum is wrong. A
//! corrupted byte is seen as a bad CRC.

use iwnic_testbench::conversation::mpa_v2_connection;
use iwnic_testbench::link::refill_tcp_checksum;
use iwnic_testbench::pcap::{cycle_time, PcapRecorder};
use iwnic_testbench::tshark::{dissect, Dissection};

fn capture(frames: &[Vec<u8>], name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut pcap = PcapRecorder::create(dir.path().join(name)).unwrap();
    for (i, frame) in frames.iter().enumerate() {
        pcap.record(cycle_time(1000 * i as u64, 125_000_000), frame)
            .unwrap();
    }
    assert_eq!(pcap.frames(), frames.len());
    let path = pcap.finish().unwrap();
    (dir, path)
}

#[test]
fn a_whole_mpa_v2_connection_dissects_clean() {
    let sends: [&[u8]; 4] = [b"hello", b"", &[0xA5; 1000], b"iwnic"];
    let frames = mpa_v2_connection(b"app private data", &sends);
    let (_dir, pcap) = capture(&frames, "mpa_v2.pcap");
    let d: Dissection = dissect(&pcap).unwrap();
    d.check_clean().unwrap_or_else(|e| panic!("{e}\n{d:?}"));
    assert_eq!(d.frames, frames.len());
    assert_eq!((d.mpa_requests, d.mpa_replies), (1, 1));
    // The RTR and two FPDUs per Send.
    assert_eq!(d.fpdus, 1 + 2 * sends.len());
    assert_eq!(d.good_crc, d.fpdus);
    let mut opcodes = vec!["Read Request"];
    opcodes.extend(["Send"; 8]);
    assert_eq!(d.rdmap_opcodes, opcodes);
}

#[test]
fn a_corrupted_fpdu_byte_is_a_bad_crc() {
    let mut frames = mpa_v2_connection(b"", &[b"hello"]);
    // Frame 7 is A's Send "hello"; flip a payload byte and fix the TCP checksum so only
    // the MPA CRC can catch it.
    let frame = &mut frames[7];
    let at = frame.len() - 10;
    frame[at] ^= 0x20;
    assert!(refill_tcp_checksum(frame));
    let (_dir, pcap) = capture(&frames, "corrupt.pcap");
    let d = dissect(&pcap).unwrap();
    assert_eq!((d.bad_crc, d.good_crc), (1, d.fpdus - 1), "{d:?}");
    assert_eq!(d.tcp_checksum_errors, 0);
    assert!(d.check_clean().is_err());
}
