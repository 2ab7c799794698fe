//! The whole system on each datapath engine: the same `iwnic sim` scenario (connections
//! set up, Sends both ways, closed) on the Verilated `nic_top`, on `nic_top` in RustHDL's
//! simulator and on the behavioural model. Prints, per engine, the datapath cycles
//! clocked and clocked per second of simulator time, end-to-end connections established
//! per wall-clock second, and the Verilator / RustHDL speed ratio.
//!
//! `cargo bench -p iwnic-testbench --bench engines` (`IWNIC_BENCH_CONNECTIONS` changes
//! the connection count, 16 by default; the RustHDL run dominates the time).

use std::time::Duration;

use iwnic_testbench::link::LinkConfig;
use iwnic_testbench::scenario::{run, Outcome, Progress, Scenario};
use iwnic_testbench::sim::EngineKind;

/// One line per phase, so a long RustHDL run shows it is moving.
struct Phases(&'static str);

impl Progress for Phases {
    fn phase(&self, name: &str, total: u64) {
        println!("  {:<9} {name} ({total})", self.0);
    }
    fn advance(&self, _by: u64) {}
}

fn scenario(engine: EngineKind, connections: usize) -> Scenario {
    Scenario {
        connections,
        fpdus: 4,
        size: 1024,
        mpa_v1: false,
        private_data: b"bench".to_vec(),
        link: LinkConfig::default(),
        pcap: None,
        patience: Duration::from_secs(120),
        firmware_poll_cycles: 1_000,
        engine,
    }
}

fn measure(engine: EngineKind, connections: usize) -> Outcome {
    let outcome = run(&scenario(engine, connections), &Phases(engine.name()))
        .unwrap_or_else(|e| panic!("{}: {e}", engine.name()));
    assert!(outcome.ok(), "{}: {:?}", engine.name(), outcome.failures);
    outcome
}

/// Cycles each NIC's datapath ran per second of simulator time (both NICs share one
/// thread).
fn cycles_per_second(o: &Outcome) -> f64 {
    2.0 * o.sim.cycles as f64 / o.sim.engine_busy.as_secs_f64().max(1e-9)
}

fn main() {
    let connections = std::env::var("IWNIC_BENCH_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16);
    println!(
        "the iwnic sim scenario: {connections} connections, MPA v2, 4 Sends of 1,024 bytes each way, closed"
    );
    let mut results = vec![];
    for engine in [
        EngineKind::Verilator,
        EngineKind::RustHdl,
        EngineKind::Model,
    ] {
        results.push((engine, measure(engine, connections)));
    }
    println!(
        "\n{:<10} {:>12} {:>14} {:>14} {:>12} {:>10}",
        "engine", "cycles/NIC", "cycles/s/NIC", "connections/s", "setup s", "wall s"
    );
    for (engine, o) in &results {
        let clocked = *engine != EngineKind::Model;
        println!(
            "{:<10} {:>12} {:>14} {:>14.1} {:>12.3} {:>10.3}",
            engine.name(),
            if clocked {
                o.sim.cycles.to_string()
            } else {
                "-".into()
            },
            if clocked {
                format!("{:.0}", cycles_per_second(o))
            } else {
                "-".into()
            },
            o.established as f64 / o.setup_time.as_secs_f64(),
            o.setup_time.as_secs_f64(),
            o.wall_time.as_secs_f64(),
        );
    }
    let rate = |kind| {
        results
            .iter()
            .find(|(engine, _)| *engine == kind)
            .map(|(_, o)| cycles_per_second(o))
            .unwrap_or(f64::NAN)
    };
    println!(
        "\nVerilator / RustHDL cycles per second on the same scenario: {:.0}x",
        rate(EngineKind::Verilator) / rate(EngineKind::RustHdl)
    );
    println!(
        "(the model keeps simulated time at the wall clock's pace and has no cycles; \
         the HDL engines' idle stretches are skipped, not clocked)"
    );
}
