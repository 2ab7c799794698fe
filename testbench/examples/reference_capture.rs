//! Writes the reference capture of an MPA v2 connection (handshake, request, reply, RTR,
//! Sends, close) built from `iwnic-proto`, for opening in Wireshark.
//!
//! `cargo run -p iwnic-testbench --example reference_capture -- out/reference.pcap`

use iwnic_testbench::conversation::mpa_v2_connection;
use iwnic_testbench::pcap::{cycle_time, PcapRecorder};

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "out/reference.pcap".into());
    if let Some(dir) = std::path::Path::new(&path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let frames = mpa_v2_connection(b"iwnic", &[b"hello", b"world"]);
    let mut pcap = PcapRecorder::create(&path)?;
    for (i, frame) in frames.iter().enumerate() {
        pcap.record(cycle_time(1000 * i as u64, 125_000_000), frame)?;
    }
    let written = pcap.frames();
    let path = pcap.finish()?;
    println!("wrote {written} frames to {}", path.display());
    Ok(())
}
