//! One short `iwnic sim` scenario on every engine: the Verilated `nic_top` and the same
//! top on RustHDL's simulator must produce the events and deliver the bytes the
//! behavioural model does. (Cycle-for-cycle agreement of the two HDL engines, frame by
//! frame, is `tests/datapath.rs`'s.)

use std::time::Duration;

use iwnic_testbench::link::LinkConfig;
use iwnic_testbench::scenario::{run, run_with_wave, Outcome, Quiet, Scenario};
use iwnic_testbench::sim::EngineKind;
use iwnic_testbench::tshark::dissect;

fn on(engine: EngineKind, dir: &std::path::Path) -> Outcome {
    let scenario = Scenario {
        connections: 2,
        fpdus: 2,
        size: 300,
        mpa_v1: false,
        private_data: b"engines".to_vec(),
        link: LinkConfig::default(),
        pcap: Some(dir.join(format!("{}.pcap", engine.name()))),
        patience: Duration::from_secs(60),
        firmware_poll_cycles: 1_000,
        engine,
    };
    let outcome = run(&scenario, &Quiet).unwrap();
    assert!(outcome.ok(), "{}: {:?}", engine.name(), outcome.failures);
    assert_eq!(outcome.sim.engine, engine);
    let (pcap, _) = outcome.sim.pcap.clone().unwrap();
    dissect(&pcap)
        .unwrap()
        .check_clean()
        .unwrap_or_else(|e| panic!("{}: {e}", engine.name()));
    outcome
}

#[test]
fn every_engine_runs_the_scenario_as_the_model_does() {
    let dir = tempfile::tempdir().unwrap();
    let model = on(EngineKind::Model, dir.path());
    for engine in [EngineKind::Verilator, EngineKind::RustHdl] {
        let hdl = on(engine, dir.path());
        assert_eq!(hdl.a_events, model.a_events, "{}", engine.name());
        assert_eq!(hdl.b_events, model.b_events, "{}", engine.name());
        assert_eq!(
            (
                hdl.established,
                hdl.closed,
                hdl.messages_delivered,
                hdl.bytes_delivered
            ),
            (
                model.established,
                model.closed,
                model.messages_delivered,
                model.bytes_delivered
            ),
            "{}",
            engine.name()
        );
        // Each connection's RTR was taken by the responder's datapath, not its firmware.
        let taken = |o: &Outcome| o.sim.a.datapath.rtr_taken + o.sim.b.datapath.rtr_taken;
        assert_eq!((taken(&model), taken(&hdl)), (2, 2), "{}", engine.name());
        assert!(
            hdl.sim.cycles > 0,
            "{}: the datapath was clocked",
            engine.name()
        );
        let (model_frames, hdl_frames) =
            (model.sim.pcap.as_ref().unwrap().1, hdl.sim.pcap.unwrap().1);
        assert_eq!(
            hdl_frames,
            model_frames,
            "{}: frames on the link",
            engine.name()
        );
    }
}

/// The header block of an FST file (the format GTKWave reads): block type 0, a 329-byte
/// section, then start and end time, ..., the variable count and the timescale exponent.
struct FstHeader {
    end_time: u64,
    vars: u64,
    timescale: i8,
}

fn fst_header(path: &std::path::Path) -> FstHeader {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.len() > 329,
        "{}: {} bytes",
        path.display(),
        bytes.len()
    );
    let word = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(bytes[0], 0, "{}: an FST header block", path.display());
    assert_eq!(word(1), 329, "{}: an FST header's length", path.display());
    FstHeader {
        end_time: word(17),
        vars: word(57),
        timescale: bytes[73] as i8,
    }
}

#[test]
fn wave_writes_an_fst_of_each_nics_datapath() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Scenario {
        connections: 1,
        fpdus: 1,
        size: 100,
        mpa_v1: false,
        private_data: vec![],
        link: LinkConfig::default(),
        pcap: None,
        patience: Duration::from_secs(60),
        firmware_poll_cycles: 1_000,
        engine: EngineKind::Verilator,
    };
    let wave = dir.path().join("nic.fst");
    let outcome = run_with_wave(&scenario, Some(&wave), &Quiet).unwrap();
    assert!(outcome.ok(), "{:?}", outcome.failures);
    let b_wave = dir.path().join("nic-b.fst");
    assert_eq!(outcome.sim.waves, [wave.clone(), b_wave.clone()]);
    for path in [&wave, &b_wave] {
        let header = fst_header(path);
        assert_eq!(header.timescale, -9, "{}: time in ns", path.display());
        assert!(
            header.vars > 100,
            "{}: every signal of nic_top",
            path.display()
        );
        // Every cycle clocked is in it, 8 ns apiece (reset included).
        assert!(
            header.end_time >= outcome.sim.cycles * 8 - 8,
            "{}: ends at {} ns, {} cycles clocked",
            path.display(),
            header.end_time,
            outcome.sim.cycles
        );
    }

    let model = Scenario {
        engine: EngineKind::Model,
        ..scenario
    };
    let error = run_with_wave(&model, Some(&wave), &Quiet).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("--wave needs the Verilator engine"),
        "{error}"
    );
}
