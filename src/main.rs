//! `iwnic`: the command-line front end of the iwnic project.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use iwnic_testbench::conversation::mpa_v2_connection;
use iwnic_testbench::pcap::{cycle_time, PcapRecorder};
use iwnic_testbench::tshark;

/// iwnic: an open iWARP connection-offload NIC (RustHDL datapath, no_std firmware,
/// iw_cm host driver), simulated and built for ECP5 boards.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write a reference capture of an MPA v2 connection built from iwnic's wire formats
    /// (handshake, MPA request and reply, RTR, Sends, close) and have Wireshark's
    /// dissector (tshark, when installed) judge it.
    Capture {
        /// Where to write the pcap.
        #[arg(long, default_value = "out/reference.pcap")]
        out: PathBuf,
        /// Send messages each way.
        #[arg(long, default_value_t = 4)]
        sends: usize,
        /// Bytes per Send (at most 1,400 so each FPDU fits one segment).
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(0..=1400))]
        size: u16,
        /// Private data in the MPA request and reply.
        #[arg(long, default_value = "iwnic")]
        private_data: String,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Capture {
            out,
            sends,
            size,
            private_data,
        } => capture(&out, sends, size, &private_data),
    }
}

fn capture(out: &std::path::Path, sends: usize, size: u16, private_data: &str) -> ExitCode {
    if private_data.len() > 508 {
        eprintln!(
            "error: private data is {} bytes; MPA v2 leaves 508",
            private_data.len()
        );
        return ExitCode::FAILURE;
    }
    let payloads: Vec<Vec<u8>> = (0..sends)
        .map(|i| (0..size).map(|b| (b as usize * 31 + i) as u8).collect())
        .collect();
    let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    let frames = mpa_v2_connection(private_data.as_bytes(), &refs);
    let written = (|| -> std::io::Result<PathBuf> {
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut pcap = PcapRecorder::create(out)?;
        for (i, frame) in frames.iter().enumerate() {
            // One frame per microsecond of a 125 MHz datapath clock.
            pcap.record(cycle_time(125 * i as u64, 125_000_000), frame)?;
        }
        pcap.finish()
    })();
    let path = match written {
        Ok(path) => path,
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
    };
    println!(
        "pcap: {} ({} frames; open it in Wireshark)",
        path.display(),
        frames.len()
    );
    match tshark::dissect(&path) {
        Ok(d) => {
            println!(
                "tshark: {} MPA request, {} MPA reply, {} FPDUs, {} good CRC32, {} bad, {} malformed",
                d.mpa_requests, d.mpa_replies, d.fpdus, d.good_crc, d.bad_crc, d.malformed
            );
            match d.check_clean() {
                Ok(()) => {
                    println!("tshark: clean");
                    ExitCode::SUCCESS
                }
                Err(problems) => {
                    eprintln!("tshark: {problems}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(e) => {
            println!("tshark: not run ({e})");
            ExitCode::SUCCESS
        }
    }
}
