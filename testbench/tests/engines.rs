//! One short `iwnic sim` scenario on every engine: the Verilated `nic_top` and the same
//! top on RustHDL's simulator must produce the events and deliver the bytes the
//! behavioural model does. (Cycle-for-cycle agreement of the two HDL engines, frame by
//! frame, is `tests/datapath.rs`'s.)

use std::time::Duration;

use iwnic_testbench::link::LinkConfig;
use iwnic_testbench::scenario::{run, Outcome, Quiet, Scenario};
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
