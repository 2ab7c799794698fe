//! Two NICs, each with its firmware, joined by a [`Link`], running on their own thread
//! while host drivers (on the test's or application's threads) talk to them through
//! in-process transports.
//!
//! Simulated time follows the wall clock (it never runs ahead of it): host code runs at
//! its own pace, so the firmware's timers mean what they say. A clock of 125 MHz turns
//! time into cycles for the engines and the capture.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant as WallClock};

use iwnic_firmware::{Config, Counters};
use iwnic_host_driver::{in_process, InProcessTransport};
use iwnic_proto::net::Checksums;
use smoltcp::time::Instant;

use crate::engine::{DatapathCounters, Engine};
use crate::link::{Direction, Link, LinkConfig, LinkStats};
use crate::model::ModelDatapath;
use crate::nic::Nic;
use crate::pcap::PcapRecorder;

/// Datapath clock.
pub const CLOCK_HZ: u64 = 125_000_000;

/// Time between firmware polls for a poll every `cycles` datapath cycles (microsecond
/// resolution, the firmware's clock).
fn firmware_poll_period(cycles: u64) -> smoltcp::time::Duration {
    smoltcp::time::Duration::from_micros(cycles * 1_000_000 / CLOCK_HZ)
}

/// One end of the simulated link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

pub const A_IP: [u8; 4] = [10, 0, 0, 1];
pub const B_IP: [u8; 4] = [10, 0, 0, 2];
pub const A_MAC: [u8; 6] = [0x02, 0x1A, 0x4E, 0, 0, 0x0A];
pub const B_MAC: [u8; 6] = [0x02, 0x1A, 0x4E, 0, 0, 0x0B];

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub link: LinkConfig,
    /// Firmware settings of both NICs; addresses and checksum mode are set per side.
    pub firmware: Config,
    /// Records the host queue of each NIC holds.
    pub host_queue: usize,
    /// Write every frame that crosses the link here.
    pub pcap: Option<PathBuf>,
    /// Datapath cycles between two runs of each NIC's firmware (the soft core's speed).
    pub firmware_poll_cycles: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            link: LinkConfig::default(),
            firmware: Config::default(),
            host_queue: 256,
            pcap: None,
            firmware_poll_cycles: 1_000,
        }
    }
}

impl SimConfig {
    fn firmware_of(&self, side: Side) -> Config {
        let (ip, mac, peer_mac) = match side {
            Side::A => (A_IP, A_MAC, B_MAC),
            Side::B => (B_IP, B_MAC, A_MAC),
        };
        Config {
            ip,
            mac,
            next_hop_mac: peer_mac,
            checksums: Checksums::Offloaded,
            ..self.firmware
        }
    }
}

/// Counters of one NIC at the end of a run.
#[derive(Debug, Clone, Copy)]
pub struct NicReport {
    pub datapath: DatapathCounters,
    pub firmware: Counters,
    /// Connections still in the firmware's table.
    pub connections: usize,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct SimReport {
    pub a: NicReport,
    pub b: NicReport,
    pub link: LinkStats,
    /// The capture and how many frames it holds.
    pub pcap: Option<(PathBuf, usize)>,
    pub simulated: Duration,
    /// Loop iterations (each services both NICs once).
    pub iterations: u64,
}

/// A running simulation.
pub struct Sim {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<SimReport>>,
    transports: [Option<InProcessTransport>; 2],
}

impl Sim {
    /// Start the two NICs and the link on their own thread.
    pub fn start(config: SimConfig) -> std::io::Result<Sim> {
        let pcap = config.pcap.as_ref().map(PcapRecorder::create).transpose()?;
        let (a_transport, a_host) = in_process(config.host_queue);
        let (b_transport, b_host) = in_process(config.host_queue);
        let link = Link::new(config.link, pcap);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        // The firmware tables are built on the simulation thread, whose stack has room for
        // them (debug builds construct before they box).
        let thread = std::thread::Builder::new()
            .name("iwnic-sim".into())
            .stack_size(64 << 20)
            .spawn(move || {
                let period = firmware_poll_period(config.firmware_poll_cycles);
                let a = Nic::new(
                    ModelDatapath::new(A_IP),
                    config.firmware_of(Side::A),
                    a_host,
                    period,
                );
                let b = Nic::new(
                    ModelDatapath::new(B_IP),
                    config.firmware_of(Side::B),
                    b_host,
                    period,
                );
                run(a, b, link, &flag)
            })?;
        Ok(Sim {
            stop,
            thread: Some(thread),
            transports: [Some(a_transport), Some(b_transport)],
        })
    }

    /// The host driver's end of `side`'s NIC (once).
    pub fn transport(&mut self, side: Side) -> InProcessTransport {
        let slot = match side {
            Side::A => 0,
            Side::B => 1,
        };
        self.transports[slot]
            .take()
            .expect("each side's transport is taken once")
    }

    /// Stop the NICs and report.
    pub fn stop(mut self) -> SimReport {
        self.finish()
    }

    fn finish(&mut self) -> SimReport {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().expect("stopped once");
        thread.join().expect("the simulation thread does not panic")
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.finish();
        }
    }
}

fn run<E: Engine>(mut a: Nic<E>, mut b: Nic<E>, mut link: Link, stop: &AtomicBool) -> SimReport {
    let start = WallClock::now();
    let mut iterations = 0u64;
    let mut now_ns = 0u64;
    while !stop.load(Ordering::Relaxed) {
        now_ns = start.elapsed().as_nanos() as u64;
        let now = Instant::from_micros((now_ns / 1_000) as i64);
        let mut busy = false;
        for (direction, frame) in link.arrived(now_ns) {
            match direction {
                Direction::AToB => b.engine.net_receive(&frame),
                Direction::BToA => a.engine.net_receive(&frame),
            }
            busy = true;
        }
        for (nic, direction) in [(&mut a, Direction::AToB), (&mut b, Direction::BToA)] {
            busy |= nic.service(now);
            nic.engine.step(1);
            while let Some(frame) = nic.engine.net_transmit() {
                link.send(now_ns, direction, frame);
                busy = true;
            }
        }
        iterations += 1;
        if !busy && link.idle() {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    a.close_host_link();
    b.close_host_link();
    let report = |nic: &Nic<E>| NicReport {
        datapath: nic.engine.counters(),
        firmware: *nic.firmware().counters(),
        connections: nic.firmware().connections(),
    };
    SimReport {
        a: report(&a),
        b: report(&b),
        link: link.stats(),
        pcap: link.finish(),
        simulated: Duration::from_nanos(now_ns),
        iterations,
    }
}
