//! `nic_top` behind the [`Engine`] trait, on two simulators.
//!
//! - [`PortSim`]: one simulator running `SimNicTop` at port level: set inputs, settle,
//!   read outputs, clock. [`Verilated`] runs a Verilator build of its Verilog (built once
//!   and cached on disk, see [`verilator_dir`]); [`RustHdl`] steps the RustHDL block by
//!   hand (no threaded `Simulation`).
//! - [`HdlEngine`]: the [`Engine`] over any [`PortSim`]. Every cycle it drives each input
//!   stream from its queue (a valid never waits for a ready), holds every output `ready`
//!   high, collects whatever the outputs hand over, and clocks once. Both simulators see
//!   exactly the same inputs on the same cycles, so their outputs can be compared cycle
//!   for cycle; [`HdlEngine::net_tx_cycles`] records when each network frame finished.
//!
//! Ports follow `iwnic_hdl::nic_top`'s contract: 64-bit beats, byte 0 in bits 7:0,
//! `keep` one bit per byte, sideband held for the whole packet; IPv4 addresses
//! big-endian, MAC addresses with their first byte in bits 47:40.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use iwnic_firmware::{FlowContext, FlowEvent, FlowEventKind, FlowTableFull, FlowWrite, FourTuple};
use iwnic_hdl::nic_top::SimNicTop;
use iwnic_hdl::verilator::{self, BuildOptions, VerilatedModel};
use iwnic_proto::mpa::RtrTypes;
use rust_hdl::prelude::{generate_verilog, simulate, Block};

use crate::engine::{DatapathCounters, Engine};

use iwnic_hdl::verilator::PortValue;

/// Declares `nic_top`'s ports once: the [`InPort`] and [`OutPort`] enums, their names, and the
/// RustHDL accessors by port.
macro_rules! ports {
    (inputs { $($input:ident),* $(,)? } outputs { $($output:ident),* $(,)? }) => {
        /// An input port of `nic_top` (the clock aside: [`PortSim::tick`] drives it).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum InPort { $($input),* }

        /// An output port of `nic_top`.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum OutPort { $($output),* }

        impl InPort {
            pub const ALL: &'static [InPort] = &[$(InPort::$input),*];
            pub fn name(self) -> &'static str {
                match self { $(InPort::$input => stringify!($input)),* }
            }
        }

        impl OutPort {
            pub const ALL: &'static [OutPort] = &[$(OutPort::$output),*];
            pub fn name(self) -> &'static str {
                match self { $(OutPort::$output => stringify!($output)),* }
            }
        }

        fn rust_hdl_set(uut: &mut SimNicTop, port: InPort, value: u64) {
            match port { $(InPort::$input => uut.$input.next = PortValue::from_port(value)),* }
        }

        fn rust_hdl_get(uut: &SimNicTop, port: OutPort) -> u64 {
            match port { $(OutPort::$output => uut.$output.val().to_port()),* }
        }
    };
}

ports! {
    inputs {
        reset, local_ip,
        net_rx_data, net_rx_keep, net_rx_last, net_rx_valid, net_tx_ready,
        fw_rx_ready, fw_tx_data, fw_tx_keep, fw_tx_last, fw_tx_valid,
        ctx_op, ctx_valid, ctx_index, ctx_local_ip, ctx_local_port, ctx_remote_ip,
        ctx_remote_port, ctx_local_mac, ctx_remote_mac, ctx_snd_una, ctx_snd_nxt,
        ctx_rcv_nxt, ctx_peer_window, ctx_peer_window_shift, ctx_local_window_shift,
        ctx_mss, ctx_crc, ctx_rtr_expected,
        event_ready,
        host_tx_data, host_tx_keep, host_tx_last, host_tx_valid, host_tx_index,
        host_tx_len, host_rx_ready,
    }
    outputs {
        net_rx_ready, net_tx_data, net_tx_keep, net_tx_last, net_tx_valid,
        fw_rx_data, fw_rx_keep, fw_rx_last, fw_rx_valid, fw_tx_ready,
        ctx_ready, ctx_done, ctx_status,
        rd_local_ip, rd_local_port, rd_remote_ip, rd_remote_port, rd_local_mac,
        rd_remote_mac, rd_snd_una, rd_snd_nxt, rd_rcv_nxt, rd_peer_window,
        rd_peer_window_shift, rd_local_window_shift, rd_mss, rd_crc, rd_rtr_expected,
        event_valid, event_index, event_crc, event_rtr,
        host_tx_ready, host_rx_data, host_rx_keep, host_rx_last, host_rx_valid,
        host_rx_index,
        cnt_frames_in, cnt_frames_out, cnt_bad_checksum, cnt_oversized, cnt_malformed,
        cnt_not_tcp, cnt_not_for_us, cnt_to_firmware, cnt_out_of_order, cnt_duplicates,
        cnt_acks_sent, cnt_fpdus_in, cnt_fpdus_out, cnt_crc_errors, cnt_length_errors,
        cnt_host_refused, cnt_insert_full, cnt_fw_tx_dropped, cnt_rtr_taken,
    }
}

/// One simulator running `nic_top`, at its ports.
pub trait PortSim: Send {
    /// For reports: "Verilator", "RustHDL".
    const NAME: &'static str;
    /// Drives an input (takes effect at the next [`settle`](Self::settle)).
    fn set(&mut self, port: InPort, value: u64);
    /// An output as last settled.
    fn get(&self, port: OutPort) -> u64;
    /// Takes the clock low and lets combinational logic settle on the inputs set so far:
    /// the outputs just before the next rising edge. (The falling edge is folded into
    /// this settle rather than taken after each rising edge: nothing in `nic_top` acts on
    /// it, and it saves a third of the work per cycle.)
    fn settle(&mut self);
    /// The rising clock edge; outputs settle after it.
    fn tick(&mut self);
}

/// Where the Verilated `nic_top` is cached: `$IWNIC_VERILATOR_DIR` if set, otherwise
/// `<target>/tmp/verilator` (the block tests' folder, so Verilator's runtime objects are
/// compiled once for both), found from this crate's `OUT_DIR`, which cargo gives every
/// user of the crate (tests, benches, the `iwnic` binary).
pub fn verilator_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("IWNIC_VERILATOR_DIR") {
        return PathBuf::from(dir);
    }
    // OUT_DIR is <target>[/<triple>]/<profile>/build/<package>-<hash>/out.
    let out = PathBuf::from(env!("OUT_DIR"));
    match out.ancestors().nth(4) {
        Some(target) => target.join("tmp").join("verilator"),
        None => out.join("verilator"),
    }
}

/// Nanoseconds per datapath cycle (125 MHz), the time step of a waveform.
pub const WAVE_NS_PER_CYCLE: u64 = 8;

/// `SimNicTop` on Verilator.
pub struct Verilated {
    model: VerilatedModel,
    clock: u32,
    inputs: Vec<u32>,
    outputs: Vec<u32>,
    /// Writing a waveform (see [`Verilated::traced`]).
    tracing: bool,
    /// Rising edges so far: the waveform's time base.
    edges: u64,
}

impl Verilated {
    /// Builds the model (once per process; on disk, once per Verilog) and loads a fresh
    /// instance of it.
    pub fn new() -> Result<Verilated, verilator::Error> {
        Self::build(BuildOptions::default())
    }

    /// [`Verilated::new`] on the traced build (compiled once, like the plain one), writing
    /// an FST waveform of every signal in `nic_top` to `wave`: the settled state before
    /// each rising edge at 8 ns × cycle, the state after it 4 ns later (so the clock
    /// shows as a 125 MHz square wave). The file is complete when this is dropped.
    pub fn traced(wave: &Path) -> Result<Verilated, verilator::Error> {
        let mut sim = Self::build(BuildOptions { trace: true })?;
        sim.model.open_trace(wave)?;
        sim.tracing = true;
        Ok(sim)
    }

    fn build(options: BuildOptions) -> Result<Verilated, verilator::Error> {
        static DESIGN: OnceLock<(String, Vec<verilator::Port>)> = OnceLock::new();
        static BUILDING: Mutex<()> = Mutex::new(());
        // A test that failed while holding the lock poisons it; the next build is sound.
        let _one_build_at_a_time = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
        let (verilog, ports) = DESIGN.get_or_init(|| {
            let mut uut = SimNicTop::default();
            uut.connect_all();
            (generate_verilog(&uut), verilator::top_ports(&uut))
        });
        let model = VerilatedModel::build_with(
            "nic_top",
            verilog,
            ports.clone(),
            &verilator_dir(),
            options,
        )?;
        let clock = model.port("clock");
        let inputs = InPort::ALL.iter().map(|p| model.port(p.name())).collect();
        let outputs = OutPort::ALL.iter().map(|p| model.port(p.name())).collect();
        Ok(Verilated {
            model,
            clock,
            inputs,
            outputs,
            tracing: false,
            edges: 0,
        })
    }
}

impl PortSim for Verilated {
    const NAME: &'static str = "Verilator";
    fn set(&mut self, port: InPort, value: u64) {
        self.model.set(self.inputs[port as usize], value);
    }
    fn get(&self, port: OutPort) -> u64 {
        self.model.get(self.outputs[port as usize])
    }
    fn settle(&mut self) {
        self.model.set(self.clock, 0);
        self.model.eval();
        if self.tracing {
            self.model.dump_trace(self.edges * WAVE_NS_PER_CYCLE);
        }
    }
    fn tick(&mut self) {
        self.model.set(self.clock, 1);
        self.model.eval();
        if self.tracing {
            self.model
                .dump_trace(self.edges * WAVE_NS_PER_CYCLE + WAVE_NS_PER_CYCLE / 2);
        }
        self.edges += 1;
    }
}

/// `SimNicTop` on RustHDL's simulator, stepped by hand.
pub struct RustHdl {
    uut: Box<SimNicTop>,
}

impl RustHdl {
    pub fn new() -> RustHdl {
        let mut uut = Box::<SimNicTop>::default();
        uut.connect_all();
        RustHdl { uut }
    }

    fn settle_uut(&mut self) {
        assert!(
            simulate(&mut *self.uut, 100),
            "RustHDL: nic_top's combinational logic did not settle in 100 delta cycles"
        );
    }
}

impl Default for RustHdl {
    fn default() -> Self {
        Self::new()
    }
}

impl PortSim for RustHdl {
    const NAME: &'static str = "RustHDL";
    fn set(&mut self, port: InPort, value: u64) {
        rust_hdl_set(&mut self.uut, port, value);
    }
    fn get(&self, port: OutPort) -> u64 {
        rust_hdl_get(&self.uut, port)
    }
    fn settle(&mut self) {
        self.uut.clock.next = false.into();
        self.settle_uut();
    }
    fn tick(&mut self) {
        self.uut.clock.next = true.into();
        self.settle_uut();
    }
}

/// Cycles `reset` is held after power-up.
pub const RESET_CYCLES: u64 = 4;
/// Longest wait for the flow table to clear after reset, or for `ctx_done`.
const WAIT_LIMIT: u64 = 1 << 20;

/// A packet queued for an input stream, with its sideband.
struct OutPacket {
    bytes: Vec<u8>,
    index: u16,
}

/// An input stream's queue: packets go out a beat at a time from the front.
#[derive(Default)]
struct Sender {
    packets: VecDeque<OutPacket>,
    offset: usize,
}

/// One beat: data, keep, last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Beat {
    pub data: u64,
    pub keep: u64,
    pub last: bool,
}

/// The beat of `bytes` at `offset` (a multiple of 8); an empty packet is one beat with
/// `keep` 0.
pub fn beat_at(bytes: &[u8], offset: usize) -> Beat {
    let chunk = &bytes[offset.min(bytes.len())..bytes.len().min(offset + 8)];
    let mut word = [0u8; 8];
    word[..chunk.len()].copy_from_slice(chunk);
    Beat {
        data: u64::from_le_bytes(word),
        keep: (1u64 << chunk.len()) - 1,
        last: offset + 8 >= bytes.len(),
    }
}

/// The bytes a beat carries: those whose `keep` bit is set.
pub fn beat_bytes(data: u64, keep: u64, out: &mut Vec<u8>) {
    let bytes = data.to_le_bytes();
    out.extend((0..8).filter(|i| keep >> i & 1 == 1).map(|i| bytes[i]));
}

impl Sender {
    fn push(&mut self, bytes: Vec<u8>, index: u16) {
        self.packets.push_back(OutPacket { bytes, index });
    }

    /// The beat offered this cycle and its packet's sideband (index, length).
    fn beat(&self) -> Option<(Beat, u16, usize)> {
        let packet = self.packets.front()?;
        Some((
            beat_at(&packet.bytes, self.offset),
            packet.index,
            packet.bytes.len(),
        ))
    }

    /// The offered beat was taken.
    fn advance(&mut self) {
        let Some(packet) = self.packets.front() else {
            return;
        };
        self.offset += 8;
        if self.offset >= packet.bytes.len() {
            self.packets.pop_front();
            self.offset = 0;
        }
    }

    fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
}

/// An output stream's packet being assembled.
#[derive(Default)]
struct Receiver {
    bytes: Vec<u8>,
    index: Option<u64>,
}

impl Receiver {
    /// A beat arrived; the finished packet and its first beat's sideband at `last`.
    fn beat(&mut self, data: u64, keep: u64, last: bool, side: u64) -> Option<(u64, Vec<u8>)> {
        let index = *self.index.get_or_insert(side);
        beat_bytes(data, keep, &mut self.bytes);
        if !last {
            return None;
        }
        self.index = None;
        Some((index, std::mem::take(&mut self.bytes)))
    }
}

/// A flow-context command: op, index, and the context to write.
struct Command {
    op: u64,
    index: u16,
    ctx: Option<FlowContext>,
    accepted: bool,
    /// `ctx_status`, and the `rd_*` context of a read, once `ctx_done` came.
    done: Option<(bool, Option<FlowContext>)>,
}

const OP_WRITE: u64 = 0;
const OP_READ: u64 = 1;
const OP_REMOVE: u64 = 2;
const OP_WRITE_AND_ACK: u64 = 3;

fn ip_to_port(ip: [u8; 4]) -> u64 {
    u64::from(u32::from_be_bytes(ip))
}

fn ip_from_port(value: u64) -> [u8; 4] {
    (value as u32).to_be_bytes()
}

fn mac_to_port(mac: [u8; 6]) -> u64 {
    mac.iter().fold(0, |acc, &b| acc << 8 | u64::from(b))
}

fn mac_from_port(value: u64) -> [u8; 6] {
    let bytes = value.to_be_bytes();
    bytes[2..8].try_into().unwrap()
}

/// The `ctx_*` input values of a context, as `nic_top` documents them.
pub fn context_to_ports(ctx: &FlowContext) -> Vec<(InPort, u64)> {
    vec![
        (InPort::ctx_index, u64::from(ctx.index)),
        (InPort::ctx_local_ip, ip_to_port(ctx.tuple.local_ip)),
        (InPort::ctx_local_port, u64::from(ctx.tuple.local_port)),
        (InPort::ctx_remote_ip, ip_to_port(ctx.tuple.remote_ip)),
        (InPort::ctx_remote_port, u64::from(ctx.tuple.remote_port)),
        (InPort::ctx_local_mac, mac_to_port(ctx.local_mac)),
        (InPort::ctx_remote_mac, mac_to_port(ctx.remote_mac)),
        (InPort::ctx_snd_una, u64::from(ctx.snd_una)),
        (InPort::ctx_snd_nxt, u64::from(ctx.snd_nxt)),
        (InPort::ctx_rcv_nxt, u64::from(ctx.rcv_nxt)),
        (InPort::ctx_peer_window, u64::from(ctx.peer_window)),
        (
            InPort::ctx_peer_window_shift,
            u64::from(ctx.peer_window_shift),
        ),
        (
            InPort::ctx_local_window_shift,
            u64::from(ctx.local_window_shift),
        ),
        (InPort::ctx_mss, u64::from(ctx.mss)),
        (InPort::ctx_crc, u64::from(ctx.crc)),
        (InPort::ctx_rtr_expected, u64::from(ctx.rtr_expected)),
    ]
}

/// The context the `rd_*` outputs hold, for connection `index`.
pub fn context_from_ports(index: u16, get: impl Fn(OutPort) -> u64) -> FlowContext {
    FlowContext {
        index,
        tuple: FourTuple {
            local_ip: ip_from_port(get(OutPort::rd_local_ip)),
            local_port: get(OutPort::rd_local_port) as u16,
            remote_ip: ip_from_port(get(OutPort::rd_remote_ip)),
            remote_port: get(OutPort::rd_remote_port) as u16,
        },
        local_mac: mac_from_port(get(OutPort::rd_local_mac)),
        remote_mac: mac_from_port(get(OutPort::rd_remote_mac)),
        snd_una: get(OutPort::rd_snd_una) as u32,
        snd_nxt: get(OutPort::rd_snd_nxt) as u32,
        rcv_nxt: get(OutPort::rd_rcv_nxt) as u32,
        peer_window: get(OutPort::rd_peer_window) as u16,
        peer_window_shift: get(OutPort::rd_peer_window_shift) as u8,
        local_window_shift: get(OutPort::rd_local_window_shift) as u8,
        mss: get(OutPort::rd_mss) as u16,
        crc: get(OutPort::rd_crc) & 1 == 1,
        rtr_expected: get(OutPort::rd_rtr_expected) & 1 == 1,
    }
}

/// `nic_top` on a port-level simulator, as an [`Engine`].
pub struct HdlEngine<P: PortSim> {
    sim: P,
    /// The value last driven on each input.
    driven: Vec<u64>,
    cycle: u64,
    /// The last cycle anything moved on a stream, a command or an event.
    last_activity: u64,
    ctx_ready: bool,
    busy: Duration,
    max_gap: u64,

    net_rx: Sender,
    fw_tx: Sender,
    host_tx: Sender,
    command: Option<Command>,

    net_tx: Receiver,
    fw_rx: Receiver,
    host_rx: Receiver,
    to_network: VecDeque<Vec<u8>>,
    net_tx_cycles: Vec<u64>,
    to_firmware: VecDeque<Vec<u8>>,
    to_host: VecDeque<(u16, Vec<u8>)>,
    events: VecDeque<FlowEvent>,
}

impl HdlEngine<Verilated> {
    /// `nic_top` on Verilator for the NIC at `local_ip`.
    pub fn verilated(local_ip: [u8; 4]) -> Result<Self, verilator::Error> {
        Ok(HdlEngine::new(Verilated::new()?, local_ip))
    }

    /// [`HdlEngine::verilated`] writing an FST waveform to `wave` (see
    /// [`Verilated::traced`]), reset included.
    pub fn verilated_traced(local_ip: [u8; 4], wave: &Path) -> Result<Self, verilator::Error> {
        Ok(HdlEngine::new(Verilated::traced(wave)?, local_ip))
    }
}

impl HdlEngine<RustHdl> {
    /// `nic_top` on RustHDL's simulator for the NIC at `local_ip`.
    pub fn rust_hdl(local_ip: [u8; 4]) -> Self {
        HdlEngine::new(RustHdl::new(), local_ip)
    }
}

impl<P: PortSim> HdlEngine<P> {
    /// Powers `sim` up: every input driven (output readies high, `local_ip`), `reset`
    /// held for [`RESET_CYCLES`], then cycles until the flow table has cleared itself
    /// (`ctx_ready` high).
    pub fn new(sim: P, local_ip: [u8; 4]) -> Self {
        let mut engine = HdlEngine {
            sim,
            driven: vec![0; InPort::ALL.len()],
            cycle: 0,
            last_activity: 0,
            ctx_ready: false,
            busy: Duration::ZERO,
            max_gap: 0,
            net_rx: Sender::default(),
            fw_tx: Sender::default(),
            host_tx: Sender::default(),
            command: None,
            net_tx: Receiver::default(),
            fw_rx: Receiver::default(),
            host_rx: Receiver::default(),
            to_network: VecDeque::new(),
            net_tx_cycles: Vec::new(),
            to_firmware: VecDeque::new(),
            to_host: VecDeque::new(),
            events: VecDeque::new(),
        };
        for &port in InPort::ALL {
            let value = match port {
                InPort::net_tx_ready
                | InPort::fw_rx_ready
                | InPort::host_rx_ready
                | InPort::event_ready => 1,
                InPort::reset => 1,
                InPort::local_ip => ip_to_port(local_ip),
                _ => 0,
            };
            engine.sim.set(port, value);
            engine.driven[port as usize] = value;
        }
        engine.run(RESET_CYCLES);
        engine.drive(InPort::reset, 0);
        let start = engine.cycle;
        engine.cycle();
        while !engine.ctx_ready {
            assert!(
                engine.cycle - start < WAIT_LIMIT,
                "{}: ctx_ready still low {WAIT_LIMIT} cycles after reset",
                P::NAME
            );
            engine.cycle();
        }
        engine
    }

    /// The simulator.
    pub fn sim(&self) -> &P {
        &self.sim
    }

    /// Cycles run since power-up.
    pub fn cycles(&self) -> u64 {
        self.cycle
    }

    /// Wall time spent simulating.
    pub fn busy(&self) -> Duration {
        self.busy
    }

    /// For each frame that has left on `net_tx`, the cycle its last beat moved.
    pub fn net_tx_cycles(&self) -> &[u64] {
        &self.net_tx_cycles
    }

    /// Whether every input queue is empty and no command is pending.
    pub fn inputs_idle(&self) -> bool {
        self.net_rx.is_empty()
            && self.fw_tx.is_empty()
            && self.host_tx.is_empty()
            && self.command.is_none()
    }

    /// Cycles until every input has been taken and nothing has moved at any port for
    /// `quiet` cycles; panics after `limit` cycles. Returns the cycles run.
    pub fn run_until_idle(&mut self, quiet: u64, limit: u64) -> u64 {
        let start = self.cycle;
        let began = Instant::now();
        while !(self.inputs_idle() && self.cycle - self.last_activity >= quiet) {
            let since = self.last_activity.max(start);
            assert!(
                self.cycle - start < limit,
                "{}: still busy after {limit} cycles (inputs idle: {})",
                P::NAME,
                self.inputs_idle()
            );
            self.cycle_untimed();
            if self.last_activity + 1 == self.cycle {
                self.max_gap = self.max_gap.max(self.last_activity - since);
            }
        }
        self.busy += began.elapsed();
        self.cycle - start
    }

    /// The longest run of cycles without any port activity inside a
    /// [`run_until_idle`](Self::run_until_idle) (from its start or the last activity to
    /// the next activity): how long a quiet period must be to be sure an operation is over.
    pub fn max_gap(&self) -> u64 {
        self.max_gap
    }

    /// `cycles` clock cycles.
    pub fn run(&mut self, cycles: u64) {
        let began = Instant::now();
        for _ in 0..cycles {
            self.cycle_untimed();
        }
        self.busy += began.elapsed();
    }

    fn cycle(&mut self) {
        let began = Instant::now();
        self.cycle_untimed();
        self.busy += began.elapsed();
    }

    fn drive(&mut self, port: InPort, value: u64) {
        let slot = &mut self.driven[port as usize];
        if *slot != value {
            *slot = value;
            self.sim.set(port, value);
        }
    }

    /// Drives a stream's `data`, `keep`, `last` and `valid` from its offered beat.
    fn drive_stream(&mut self, ports: [InPort; 4], beat: Option<Beat>) {
        let [data, keep, last, valid] = ports;
        match beat {
            Some(beat) => {
                self.drive(data, beat.data);
                self.drive(keep, beat.keep);
                self.drive(last, u64::from(beat.last));
                self.drive(valid, 1);
            }
            None => self.drive(valid, 0),
        }
    }

    /// One clock cycle: inputs from the queues, settle, handshakes, outputs collected,
    /// rising edge.
    fn cycle_untimed(&mut self) {
        use InPort::*;
        let net_rx = self.net_rx.beat().map(|(beat, _, _)| beat);
        self.drive_stream(
            [net_rx_data, net_rx_keep, net_rx_last, net_rx_valid],
            net_rx,
        );
        let fw_tx = self.fw_tx.beat().map(|(beat, _, _)| beat);
        self.drive_stream([fw_tx_data, fw_tx_keep, fw_tx_last, fw_tx_valid], fw_tx);
        let host = self.host_tx.beat();
        if let Some((_, index, len)) = host {
            self.drive(host_tx_index, u64::from(index));
            self.drive(host_tx_len, len as u64);
        }
        let host_tx = host.map(|(beat, _, _)| beat);
        self.drive_stream(
            [host_tx_data, host_tx_keep, host_tx_last, host_tx_valid],
            host_tx,
        );
        let offer = match &self.command {
            Some(command) if !command.accepted => Some((
                command.op,
                command.index,
                command.ctx.map(|c| context_to_ports(&c)),
            )),
            _ => None,
        };
        match offer {
            Some((op, index, fields)) => {
                self.drive(ctx_op, op);
                self.drive(ctx_index, u64::from(index));
                for (port, value) in fields.unwrap_or_default() {
                    self.drive(port, value);
                }
                self.drive(ctx_valid, 1);
            }
            None => self.drive(ctx_valid, 0),
        }

        self.sim.settle();

        let get = |port| self.sim.get(port);
        let mut moved = false;
        if net_rx.is_some() && get(OutPort::net_rx_ready) & 1 == 1 {
            self.net_rx.advance();
            moved = true;
        }
        if fw_tx.is_some() && get(OutPort::fw_tx_ready) & 1 == 1 {
            self.fw_tx.advance();
            moved = true;
        }
        if host_tx.is_some() && get(OutPort::host_tx_ready) & 1 == 1 {
            self.host_tx.advance();
            moved = true;
        }
        self.ctx_ready = get(OutPort::ctx_ready) & 1 == 1;
        if let Some(command) = &mut self.command {
            if !command.accepted && self.ctx_ready {
                command.accepted = true;
                moved = true;
            }
            if command.accepted && command.done.is_none() && get(OutPort::ctx_done) & 1 == 1 {
                let status = get(OutPort::ctx_status) & 1 == 1;
                let read = (command.op == OP_READ && status)
                    .then(|| context_from_ports(command.index, get));
                command.done = Some((status, read));
                moved = true;
            }
        }
        if get(OutPort::net_tx_valid) & 1 == 1 {
            moved = true;
            let (data, keep, last) = (
                get(OutPort::net_tx_data),
                get(OutPort::net_tx_keep),
                get(OutPort::net_tx_last) & 1 == 1,
            );
            if let Some((_, frame)) = self.net_tx.beat(data, keep, last, 0) {
                self.to_network.push_back(frame);
                self.net_tx_cycles.push(self.cycle);
            }
        }
        if get(OutPort::fw_rx_valid) & 1 == 1 {
            moved = true;
            let (data, keep, last) = (
                get(OutPort::fw_rx_data),
                get(OutPort::fw_rx_keep),
                get(OutPort::fw_rx_last) & 1 == 1,
            );
            if let Some((_, frame)) = self.fw_rx.beat(data, keep, last, 0) {
                self.to_firmware.push_back(frame);
            }
        }
        if get(OutPort::host_rx_valid) & 1 == 1 {
            moved = true;
            let (data, keep, last, index) = (
                get(OutPort::host_rx_data),
                get(OutPort::host_rx_keep),
                get(OutPort::host_rx_last) & 1 == 1,
                get(OutPort::host_rx_index),
            );
            if let Some((index, ulpdu)) = self.host_rx.beat(data, keep, last, index) {
                self.to_host.push_back((index as u16, ulpdu));
            }
        }
        if get(OutPort::event_valid) & 1 == 1 {
            moved = true;
            // `event_rtr` k > 0: type k - 1 of `RtrTypes::EACH` taken; 0: an MPA error.
            let rtr = (get(OutPort::event_rtr) as usize).checked_sub(1);
            let kind = match (rtr, get(OutPort::event_crc) & 1) {
                (Some(k), _) => FlowEventKind::RtrTaken(RtrTypes::EACH[k]),
                (None, 1) => FlowEventKind::CrcError,
                (None, _) => FlowEventKind::LengthError,
            };
            self.events.push_back(FlowEvent {
                index: get(OutPort::event_index) as u16,
                kind,
            });
        }
        if moved {
            self.last_activity = self.cycle;
        }

        self.sim.tick();
        self.cycle += 1;
    }

    /// Runs a context command to its `ctx_done`; everything else keeps moving meanwhile.
    fn command(
        &mut self,
        op: u64,
        index: u16,
        ctx: Option<FlowContext>,
    ) -> (bool, Option<FlowContext>) {
        self.command = Some(Command {
            op,
            index,
            ctx,
            accepted: false,
            done: None,
        });
        let start = self.cycle;
        let began = Instant::now();
        loop {
            self.cycle_untimed();
            if let Some(done) = self.command.as_ref().and_then(|c| c.done) {
                self.command = None;
                self.busy += began.elapsed();
                return done;
            }
            assert!(
                self.cycle - start < WAIT_LIMIT,
                "{}: no ctx_done {WAIT_LIMIT} cycles after context command {op} for index {index}",
                P::NAME
            );
        }
    }

    fn counter(&self, port: OutPort) -> u64 {
        self.sim.get(port) & 0xFFFF_FFFF
    }
}

impl<P: PortSim> Engine for HdlEngine<P> {
    fn step(&mut self, cycles: u64) {
        self.run(cycles);
    }

    fn net_receive(&mut self, frame: &[u8]) {
        self.net_rx.push(frame.to_vec(), 0);
    }

    fn net_transmit(&mut self) -> Option<Vec<u8>> {
        self.to_network.pop_front()
    }

    fn firmware_receive(&mut self) -> Option<Vec<u8>> {
        self.to_firmware.pop_front()
    }

    fn firmware_transmit(&mut self, packet: &[u8]) {
        self.fw_tx.push(packet.to_vec(), 0);
    }

    fn write_flow(&mut self, flow: &FlowContext, write: FlowWrite) -> Result<(), FlowTableFull> {
        let op = match write {
            FlowWrite::Install => OP_WRITE,
            FlowWrite::InstallAndAcknowledge => OP_WRITE_AND_ACK,
        };
        let (installed, _) = self.command(op, flow.index, Some(*flow));
        installed.then_some(()).ok_or(FlowTableFull)
    }

    fn read_flow(&mut self, index: u16) -> Option<FlowContext> {
        self.command(OP_READ, index, None).1
    }

    fn remove_flow(&mut self, index: u16) {
        self.command(OP_REMOVE, index, None);
    }

    fn flow_event(&mut self) -> Option<FlowEvent> {
        self.events.pop_front()
    }

    fn host_transmit(&mut self, index: u16, ulpdu: &[u8]) {
        self.host_tx.push(ulpdu.to_vec(), index);
    }

    fn host_receive(&mut self) -> Option<(u16, Vec<u8>)> {
        self.to_host.pop_front()
    }

    fn counters(&self) -> DatapathCounters {
        let c = |port| self.counter(port);
        DatapathCounters {
            frames_in: c(OutPort::cnt_frames_in),
            frames_out: c(OutPort::cnt_frames_out),
            bad_checksum: c(OutPort::cnt_bad_checksum),
            not_for_us: c(OutPort::cnt_oversized)
                + c(OutPort::cnt_malformed)
                + c(OutPort::cnt_not_tcp)
                + c(OutPort::cnt_not_for_us),
            to_firmware: c(OutPort::cnt_to_firmware),
            out_of_order: c(OutPort::cnt_out_of_order),
            duplicates: c(OutPort::cnt_duplicates),
            acks_sent: c(OutPort::cnt_acks_sent),
            fpdus_in: c(OutPort::cnt_fpdus_in),
            fpdus_out: c(OutPort::cnt_fpdus_out),
            crc_errors: c(OutPort::cnt_crc_errors),
            length_errors: c(OutPort::cnt_length_errors),
            rtr_taken: c(OutPort::cnt_rtr_taken),
            flow_table_full: c(OutPort::cnt_insert_full),
            host_ulpdus_refused: c(OutPort::cnt_host_refused),
            firmware_segments_dropped: c(OutPort::cnt_fw_tx_dropped),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn beats_pack_bytes_low_first() {
        let bytes: Vec<u8> = (1..=11).collect();
        let first = beat_at(&bytes, 0);
        assert_eq!(first.data, 0x0807_0605_0403_0201);
        assert_eq!((first.keep, first.last), (0xFF, false));
        let second = beat_at(&bytes, 8);
        assert_eq!(second.data, 0x0B_0A09);
        assert_eq!((second.keep, second.last), (0x07, true));
        let empty = beat_at(&[], 0);
        assert_eq!(
            empty,
            Beat {
                data: 0,
                keep: 0,
                last: true
            }
        );
        let exact = beat_at(&bytes[..8], 0);
        assert_eq!((exact.keep, exact.last), (0xFF, true));

        let mut out = vec![];
        beat_bytes(first.data, first.keep, &mut out);
        beat_bytes(second.data, second.keep, &mut out);
        beat_bytes(empty.data, empty.keep, &mut out);
        assert_eq!(out, bytes);
    }

    fn context() -> FlowContext {
        FlowContext {
            index: 0x0123,
            tuple: FourTuple {
                local_ip: [10, 0, 0, 1],
                local_port: 4791,
                remote_ip: [192, 168, 7, 2],
                remote_port: 50000,
            },
            local_mac: [0x02, 0x11, 0x22, 0x33, 0x44, 0x55],
            remote_mac: [0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE],
            snd_una: 0x8000_0001,
            snd_nxt: 0x8000_0101,
            rcv_nxt: 0xFFFF_FFF0,
            peer_window: 65535,
            peer_window_shift: 7,
            local_window_shift: 3,
            mss: 1460,
            crc: true,
            rtr_expected: true,
        }
    }

    #[test]
    fn context_numbers_on_ports() {
        let ctx = context();
        let ports: HashMap<InPort, u64> = context_to_ports(&ctx).into_iter().collect();
        assert_eq!(ports[&InPort::ctx_local_ip], 0x0A00_0001);
        assert_eq!(ports[&InPort::ctx_remote_ip], 0xC0A8_0702);
        assert_eq!(ports[&InPort::ctx_local_mac], 0x0211_2233_4455);
        assert_eq!(ports[&InPort::ctx_remote_mac] >> 40, 0x02);
        assert_eq!(ports[&InPort::ctx_remote_port], 50000);
        assert_eq!(ports[&InPort::ctx_rtr_expected], 1);
        assert_eq!(ports.len(), 16);
        // Read back through the rd_* ports, which carry the same numbers.
        let rd = |port: OutPort| {
            let name = port.name().replacen("rd_", "ctx_", 1);
            let input = InPort::ALL.iter().find(|i| i.name() == name).unwrap();
            ports[input]
        };
        assert_eq!(context_from_ports(ctx.index, rd), ctx);
    }

    /// A stand-in for `nic_top` that exercises the driver: streams loop back (net_rx to
    /// net_tx, fw_tx to fw_rx, host_tx to host_rx) through a register and a FIFO whose
    /// readiness alternates, the context window stores contexts and answers a cycle
    /// after each command, and reset clears for a few cycles.
    #[derive(Default)]
    struct Loopback {
        inputs: Vec<u64>,
        outputs: Vec<u64>,
        clearing: u64,
        reset_seen: bool,
        phase: bool,
        fifos: [VecDeque<(u64, u64, u64, u64)>; 3],
        contexts: HashMap<u64, Vec<(InPort, u64)>>,
        done: Option<(bool, Option<u64>)>,
        frames_in: u64,
    }

    const LOOPS: [([InPort; 4], [OutPort; 4], OutPort); 3] = [
        (
            [
                InPort::net_rx_data,
                InPort::net_rx_keep,
                InPort::net_rx_last,
                InPort::net_rx_valid,
            ],
            [
                OutPort::net_tx_data,
                OutPort::net_tx_keep,
                OutPort::net_tx_last,
                OutPort::net_tx_valid,
            ],
            OutPort::net_rx_ready,
        ),
        (
            [
                InPort::fw_tx_data,
                InPort::fw_tx_keep,
                InPort::fw_tx_last,
                InPort::fw_tx_valid,
            ],
            [
                OutPort::fw_rx_data,
                OutPort::fw_rx_keep,
                OutPort::fw_rx_last,
                OutPort::fw_rx_valid,
            ],
            OutPort::fw_tx_ready,
        ),
        (
            [
                InPort::host_tx_data,
                InPort::host_tx_keep,
                InPort::host_tx_last,
                InPort::host_tx_valid,
            ],
            [
                OutPort::host_rx_data,
                OutPort::host_rx_keep,
                OutPort::host_rx_last,
                OutPort::host_rx_valid,
            ],
            OutPort::host_tx_ready,
        ),
    ];

    impl Loopback {
        fn new() -> Self {
            Loopback {
                inputs: vec![0; InPort::ALL.len()],
                outputs: vec![0; OutPort::ALL.len()],
                ..Default::default()
            }
        }
        fn input(&self, port: InPort) -> u64 {
            self.inputs[port as usize]
        }
        fn output(&mut self, port: OutPort, value: u64) {
            self.outputs[port as usize] = value;
        }
    }

    impl PortSim for Loopback {
        const NAME: &'static str = "loopback";
        fn set(&mut self, port: InPort, value: u64) {
            self.inputs[port as usize] = value;
        }
        fn get(&self, port: OutPort) -> u64 {
            self.outputs[port as usize]
        }
        fn settle(&mut self) {
            let ready = self.reset_seen && self.input(InPort::reset) == 0 && self.clearing == 0;
            for (i, (_, outs, ready_port)) in LOOPS.iter().enumerate() {
                let front = self.fifos[i].front().copied();
                let (d, k, l) = front.map_or((0, 0, 0), |(d, k, l, _)| (d, k, l));
                self.output(outs[0], d);
                self.output(outs[1], k);
                self.output(outs[2], l);
                self.output(outs[3], u64::from(front.is_some()));
                self.output(*ready_port, u64::from(ready && self.phase));
                if i == 2 {
                    self.output(OutPort::host_rx_index, front.map_or(0, |f| f.3));
                }
            }
            self.output(OutPort::ctx_ready, u64::from(ready && self.done.is_none()));
            self.output(OutPort::ctx_done, u64::from(self.done.is_some()));
            let (status, read) = self.done.unwrap_or((false, None));
            self.output(OutPort::ctx_status, u64::from(status));
            if let Some(index) = read {
                for (port, value) in self.contexts[&index].clone() {
                    let name = port.name().replacen("ctx_", "rd_", 1);
                    if let Some(out) = OutPort::ALL.iter().find(|o| o.name() == name) {
                        self.output(*out, value);
                    }
                }
            }
            self.output(OutPort::cnt_frames_in, self.frames_in);
        }
        fn tick(&mut self) {
            if self.input(InPort::reset) == 1 {
                self.reset_seen = true;
                self.clearing = 10;
                return;
            }
            self.clearing = self.clearing.saturating_sub(1);
            for (i, (ins, outs, ready_port)) in LOOPS.iter().enumerate() {
                // The driver holds every output ready high.
                if self.get(outs[3]) == 1 {
                    self.fifos[i].pop_front();
                }
                if self.input(ins[3]) == 1 && self.get(*ready_port) == 1 {
                    let side = if i == 2 {
                        self.input(InPort::host_tx_index)
                    } else {
                        0
                    };
                    let beat = (
                        self.input(ins[0]),
                        self.input(ins[1]),
                        self.input(ins[2]),
                        side,
                    );
                    self.fifos[i].push_back(beat);
                    if i == 0 && beat.2 == 1 {
                        self.frames_in += 1;
                    }
                }
            }
            self.phase = !self.phase;
            if self.done.take().is_some() {
                return;
            }
            if self.input(InPort::ctx_valid) == 1 && self.get(OutPort::ctx_ready) == 1 {
                let index = self.input(InPort::ctx_index);
                self.done = Some(match self.input(InPort::ctx_op) {
                    OP_WRITE | OP_WRITE_AND_ACK => {
                        let fields = InPort::ALL
                            .iter()
                            .filter(|p| p.name().starts_with("ctx_"))
                            .map(|&p| (p, self.input(p)))
                            .collect();
                        self.contexts.insert(index, fields);
                        (true, None)
                    }
                    OP_READ if self.contexts.contains_key(&index) => (true, Some(index)),
                    OP_REMOVE => (self.contexts.remove(&index).is_some(), None),
                    _ => (false, None),
                });
            }
        }
    }

    #[test]
    fn driver_moves_packets_commands_and_counters() {
        let mut engine = HdlEngine::new(Loopback::new(), [10, 0, 0, 1]);
        assert_eq!(engine.sim().input(InPort::local_ip), 0x0A00_0001);
        assert!(engine.cycles() > RESET_CYCLES + 10);

        let frames: Vec<Vec<u8>> = [60usize, 61, 64, 1514]
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        for frame in &frames {
            engine.net_receive(frame);
            engine.firmware_transmit(frame);
        }
        for (i, len) in [0usize, 1, 8, 9, 1400].into_iter().enumerate() {
            engine.host_transmit(i as u16 + 40, &vec![len as u8; len]);
        }
        let ctx = context();
        assert_eq!(engine.write_flow(&ctx, FlowWrite::Install), Ok(()));
        assert_eq!(engine.read_flow(ctx.index), Some(ctx));
        assert_eq!(engine.read_flow(7), None);
        engine.run_until_idle(16, 100_000);
        assert!(engine.inputs_idle());

        let mut out = vec![];
        while let Some(frame) = engine.net_transmit() {
            out.push(frame);
        }
        assert_eq!(out, frames);
        assert_eq!(engine.net_tx_cycles().len(), frames.len());
        assert!(engine.net_tx_cycles().windows(2).all(|w| w[0] < w[1]));
        let mut fw = vec![];
        while let Some(frame) = engine.firmware_receive() {
            fw.push(frame);
        }
        assert_eq!(fw, frames);
        let mut host = vec![];
        while let Some(ulpdu) = engine.host_receive() {
            host.push(ulpdu);
        }
        let lens: Vec<(u16, usize)> = host.iter().map(|(i, u)| (*i, u.len())).collect();
        assert_eq!(lens, [(40, 0), (41, 1), (42, 8), (43, 9), (44, 1400)]);
        assert_eq!(engine.counters().frames_in, 4);

        engine.remove_flow(ctx.index);
        assert_eq!(engine.read_flow(ctx.index), None);
    }
}
