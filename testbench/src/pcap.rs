//! Captures of simulated links as pcap files (link type Ethernet, nanosecond timestamps
//! derived from simulated cycles), for Wireshark and for `tshark` in the test suite.

use std::borrow::Cow;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

/// Writes Ethernet frames to a pcap file.
pub struct PcapRecorder {
    writer: PcapWriter<BufWriter<File>>,
    path: PathBuf,
    frames: usize,
}

impl PcapRecorder {
    /// Create (or truncate) the capture file at `path`.
    pub fn create(path: impl AsRef<Path>) -> std::io::Result<PcapRecorder> {
        let path = path.as_ref().to_path_buf();
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(BufWriter::new(File::create(&path)?), header)
            .map_err(std::io::Error::other)?;
        Ok(PcapRecorder {
            writer,
            path,
            frames: 0,
        })
    }

    /// Record one frame seen on the link at `time` since the start of the simulation.
    pub fn record(&mut self, time: Duration, frame: &[u8]) -> std::io::Result<()> {
        let packet = PcapPacket {
            timestamp: time,
            orig_len: frame.len() as u32,
            data: Cow::Borrowed(frame),
        };
        self.writer
            .write_packet(&packet)
            .map_err(std::io::Error::other)?;
        self.frames += 1;
        Ok(())
    }

    /// Flush and close the file; returns its path.
    pub fn finish(self) -> std::io::Result<PathBuf> {
        let mut inner = self.writer.into_writer();
        std::io::Write::flush(&mut inner)?;
        Ok(self.path)
    }

    pub fn frames(&self) -> usize {
        self.frames
    }
}

/// Simulated time of `cycle` on a clock of `clock_hz`.
pub fn cycle_time(cycle: u64, clock_hz: u64) -> Duration {
    Duration::from_nanos((u128::from(cycle) * 1_000_000_000 / u128::from(clock_hz)) as u64)
}
