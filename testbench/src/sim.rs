//! Two NICs, each with its firmware, joined by a [`Link`], running on their own thread
//! while host drivers (on the test's or application's threads) talk to them through
//! in-process transports.
//!
//! The datapath of both NICs is one [`EngineKind`]: the behavioural model, or `nic_top`
//! on Verilator or on RustHDL's simulator.
//!
//! Simulated time never runs ahead of the wall clock: host code runs at its own pace, so
//! the firmware's timers mean what they say. With the model, simulated time *is* the
//! wall clock. With an HDL engine, time comes from the clock (125 MHz, [`CLOCK_HZ`]):
//! both NICs are clocked [`STEP_CYCLES`] at a time, each step moving time on by that
//! many cycles, as fast as the simulator runs (far slower than real time). Once nothing
//! has moved for [`SETTLE_CYCLES`] (no frame on the link, no input waiting at either
//! datapath, nothing from the hosts or the firmware), the datapaths stop being clocked
//! and time follows the wall clock again, because an idle datapath has nothing to do in
//! those cycles; the next frame, record or firmware timer starts the clock again. So a
//! run spends its simulator time on traffic, and timers still fire when they should.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant as WallClock};

use iwnic_firmware::{Config, Counters};
use iwnic_host_driver::{in_process, InProcessTransport};
use iwnic_proto::net::Checksums;
use smoltcp::time::Instant;

use crate::engine::{DatapathCounters, Engine};
use crate::hdl_engine::{HdlEngine, PortSim};
use crate::link::{Direction, Link, LinkConfig, LinkStats};
use crate::model::ModelDatapath;
use crate::nic::Nic;
use crate::pcap::PcapRecorder;

/// Datapath clock.
pub const CLOCK_HZ: u64 = 125_000_000;
const NS_PER_CYCLE: u64 = 1_000_000_000 / CLOCK_HZ;
/// Cycles an HDL engine runs between two looks at the link and the hosts (0.5 µs).
pub const STEP_CYCLES: u64 = 64;
/// Quiet cycles after which an HDL datapath counts as idle and stops being clocked:
/// longer than anything takes inside `nic_top` without showing at a port (a frame's
/// way through both buffers is under 400 cycles).
pub const SETTLE_CYCLES: u64 = 1_024;

/// The datapath inside each simulated NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// The behavioural model (`crate::model`).
    Model,
    /// `nic_top` Verilated.
    Verilator,
    /// `nic_top` on RustHDL's simulator, stepped by hand.
    RustHdl,
}

impl EngineKind {
    /// Verilator when it is installed, else RustHDL's simulator (no external tool, but
    /// far slower).
    pub fn auto() -> EngineKind {
        let verilator = std::process::Command::new("verilator")
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success());
        if verilator {
            EngineKind::Verilator
        } else {
            EngineKind::RustHdl
        }
    }

    /// The engine named by `$IWNIC_ENGINE` (`model`, `verilator` or `rusthdl`), the model
    /// when it is unset: how a test suite written against [`SimConfig::default`] runs
    /// unchanged on another engine.
    pub fn from_env() -> EngineKind {
        match std::env::var("IWNIC_ENGINE").as_deref() {
            Err(_) | Ok("model") => EngineKind::Model,
            Ok("verilator") => EngineKind::Verilator,
            Ok("rusthdl") => EngineKind::RustHdl,
            Ok(other) => panic!("IWNIC_ENGINE={other}: expected model, verilator or rusthdl"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Model => "model",
            EngineKind::Verilator => "verilator",
            EngineKind::RustHdl => "rusthdl",
        }
    }
}

/// What the run loop needs beyond [`Engine`]: whether the engine has a clock, and
/// whether it is quiet.
trait SimEngine: Engine + 'static {
    /// Time comes from this engine's clock (else from the wall clock).
    const CLOCKED: bool;
    /// Nothing waits at its inputs.
    fn quiet(&self) -> bool;
    /// Cycles clocked so far.
    fn cycles(&self) -> u64;
    /// Wall time spent in the simulator.
    fn busy(&self) -> Duration;
}

impl SimEngine for ModelDatapath {
    const CLOCKED: bool = false;
    fn quiet(&self) -> bool {
        true
    }
    fn cycles(&self) -> u64 {
        0
    }
    fn busy(&self) -> Duration {
        Duration::ZERO
    }
}

impl<P: PortSim + 'static> SimEngine for HdlEngine<P> {
    const CLOCKED: bool = true;
    fn quiet(&self) -> bool {
        self.inputs_idle()
    }
    fn cycles(&self) -> u64 {
        HdlEngine::cycles(self)
    }
    fn busy(&self) -> Duration {
        HdlEngine::busy(self)
    }
}

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
    pub engine: EngineKind,
    /// Write the Verilator waveform (FST, every signal of `nic_top`) of NIC A's datapath
    /// here and NIC B's next to it (see [`wave_path`]). Verilator engine only.
    pub wave: Option<PathBuf>,
}

/// Where `side`'s waveform goes for `--wave wave`: `wave` itself for A, for B the same
/// name with `-b` before the extension (`out/sim.fst` → `out/sim-b.fst`).
pub fn wave_path(wave: &Path, side: Side) -> PathBuf {
    match side {
        Side::A => wave.to_path_buf(),
        Side::B => {
            let stem = wave.file_stem().unwrap_or_default().to_string_lossy();
            let name = match wave.extension() {
                Some(ext) => format!("{stem}-b.{}", ext.to_string_lossy()),
                None => format!("{stem}-b"),
            };
            wave.with_file_name(name)
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            link: LinkConfig::default(),
            firmware: Config::default(),
            host_queue: 256,
            pcap: None,
            firmware_poll_cycles: 1_000,
            engine: EngineKind::from_env(),
            wave: None,
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
    pub engine: EngineKind,
    /// Cycles NIC A's datapath was clocked during the run, power-up not counted (0 for
    /// the model; B's differs only by the cycles of its own register-window commands),
    /// and the wall time the simulator took for both.
    pub cycles: u64,
    pub engine_busy: Duration,
    /// The waveforms written (A's, then B's), complete once the run has stopped.
    pub waves: Vec<PathBuf>,
}

/// A running simulation.
pub struct Sim {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<SimReport>>,
    transports: [Option<InProcessTransport>; 2],
}

impl Sim {
    /// Start the two NICs and the link on their own thread. Building the Verilated
    /// datapath (the first time: a minute or two) happens here.
    pub fn start(config: SimConfig) -> std::io::Result<Sim> {
        if config.wave.is_some() && config.engine != EngineKind::Verilator {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "--wave needs the Verilator engine (this run's is {})",
                    config.engine.name()
                ),
            ));
        }
        match config.engine {
            EngineKind::Model => {
                Sim::start_with(config, ModelDatapath::new(A_IP), ModelDatapath::new(B_IP))
            }
            EngineKind::Verilator => {
                let build = |ip, side| {
                    match &config.wave {
                        Some(wave) => HdlEngine::verilated_traced(ip, &wave_path(wave, side)),
                        None => HdlEngine::verilated(ip),
                    }
                    .map_err(std::io::Error::other)
                };
                let (a, b) = (build(A_IP, Side::A)?, build(B_IP, Side::B)?);
                Sim::start_with(config, a, b)
            }
            EngineKind::RustHdl => {
                Sim::start_with(config, HdlEngine::rust_hdl(A_IP), HdlEngine::rust_hdl(B_IP))
            }
        }
    }

    fn start_with<E: SimEngine>(config: SimConfig, a: E, b: E) -> std::io::Result<Sim> {
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
                let a = Nic::new(a, config.firmware_of(Side::A), a_host, period);
                let b = Nic::new(b, config.firmware_of(Side::B), b_host, period);
                let waves = match &config.wave {
                    Some(wave) => vec![wave_path(wave, Side::A), wave_path(wave, Side::B)],
                    None => vec![],
                };
                run(a, b, link, &flag, config.engine, waves)
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

fn run<E: SimEngine>(
    mut a: Nic<E>,
    mut b: Nic<E>,
    mut link: Link,
    stop: &AtomicBool,
    engine: EngineKind,
    waves: Vec<PathBuf>,
) -> SimReport {
    let start = WallClock::now();
    let powered_up = a.engine.cycles();
    let mut iterations = 0u64;
    let mut now_ns = 0u64;
    let step = if E::CLOCKED { STEP_CYCLES } else { 1 };
    // Cycles since anything moved (clocked engines only).
    let mut quiet_for = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let clocking = !E::CLOCKED || quiet_for < SETTLE_CYCLES;
        if !E::CLOCKED {
            now_ns = start.elapsed().as_nanos() as u64;
        }
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
            if clocking {
                nic.engine.step(step);
            }
            while let Some(frame) = nic.engine.net_transmit() {
                link.send(now_ns, direction, frame);
                busy = true;
            }
        }
        iterations += 1;
        let idle = !busy && link.idle() && a.engine.quiet() && b.engine.quiet();
        if E::CLOCKED {
            if clocking {
                now_ns += step * NS_PER_CYCLE;
            }
            quiet_for = if idle { quiet_for + step } else { 0 };
            if quiet_for >= SETTLE_CYCLES {
                // Nothing to clock for: catch up with the wall clock, or wait for it.
                let wall = start.elapsed().as_nanos() as u64;
                if now_ns < wall {
                    now_ns = wall;
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        } else if idle {
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
    // (The engines, and so the waveforms, close when `a` and `b` drop on return, before
    // `Sim::stop` hands the report over.)
    SimReport {
        a: report(&a),
        b: report(&b),
        link: link.stats(),
        pcap: link.finish(),
        simulated: Duration::from_nanos(now_ns),
        iterations,
        engine,
        cycles: a.engine.cycles() - powered_up,
        engine_busy: a.engine.busy() + b.engine.busy(),
        waves,
    }
}
