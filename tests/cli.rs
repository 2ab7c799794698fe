//! The `iwnic` command as a user runs it.

use std::process::Command;

fn iwnic(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_iwnic"))
        .args(args)
        .output()
        .expect("run iwnic")
}

#[test]
fn help_lists_every_subcommand() {
    let out = iwnic(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for command in ["sim", "verilog", "synth", "capture"] {
        assert!(text.contains(command), "{command} missing from:\n{text}");
    }
}

#[test]
fn verilog_writes_every_block() {
    let dir = tempfile::tempdir().unwrap();
    let out = iwnic(&["verilog", "--out", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for block in iwnic_hdl::export::blocks() {
        let text = std::fs::read_to_string(dir.path().join(format!("{}.v", block.name))).unwrap();
        assert!(text.contains("module top"), "{}: no top module", block.name);
    }
}

#[test]
fn synth_refuses_an_unknown_block() {
    let out = iwnic(&["synth", "--block", "no_such_block"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("blocks: "));
}

#[test]
fn sim_refuses_what_does_not_fit() {
    let out = iwnic(&["sim", "--size", "1437"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not fit one segment"));
    let out = iwnic(&["sim", "--private-data", "509"]);
    assert!(!out.status.success());
    let out = iwnic(&["sim", "--engine", "model", "--wave", "never.fst"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--wave needs the Verilator engine"));
    assert!(!std::path::Path::new("never.fst").exists());
}

#[test]
fn a_small_sim_passes() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("sim.pcap");
    let json = dir.path().join("sim.json");
    let out = iwnic(&[
        "sim",
        "--connections",
        "4",
        "--fpdus",
        "3",
        "--size",
        "100",
        "--pcap",
        pcap.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("result:    PASS"));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(report["established"], 4);
    assert_eq!(report["messages_lost"], 0);
    assert_eq!(report["bytes_delivered"], 2 * 4 * 3 * 100);
    assert_eq!(report["pass"], true);
}
