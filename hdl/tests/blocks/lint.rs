//! `verilator --lint-only -Wall` on every block's exported Verilog, with the waivers of
//! `iwnic_hdl::verilator::WAIVERS` (each listed there with its reason) and no others.

use iwnic_hdl::crc32c::Crc32c;
use iwnic_hdl::flow_table::EcpFlowTable;
use iwnic_hdl::mpa_rx::MpaRxDelineator;
use iwnic_hdl::mpa_tx::MpaTxFramer;
use iwnic_hdl::tcp_rx::TcpRxParser;
use iwnic_hdl::verilator::{lint, lint_waiving, Error, WAIVERS};
use rust_hdl::prelude::*;

use crate::dut::work_dir;

fn verilog_of<B: Block>(mut uut: B) -> String {
    uut.connect_all();
    generate_verilog(&uut)
}

#[test]
fn crc32c_lints_clean() {
    lint(
        &verilog_of(Crc32c::default()),
        &work_dir().join("lint-crc32c"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn flow_table_lints_clean() {
    lint(
        &verilog_of(EcpFlowTable::default()),
        &work_dir().join("lint-flow_table"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mpa_rx_lints_clean() {
    lint(
        &verilog_of(MpaRxDelineator::default()),
        &work_dir().join("lint-mpa_rx"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mpa_tx_lints_clean() {
    lint(
        &verilog_of(MpaTxFramer::default()),
        &work_dir().join("lint-mpa_tx"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// No waiver is there by habit: the framer, which uses every construct the blocks
/// share, raises each waived warning once its waiver is dropped.
#[test]
fn every_waiver_is_needed() {
    let verilog = verilog_of(MpaTxFramer::default());
    for (dropped, _) in WAIVERS {
        let kept: Vec<&str> = WAIVERS
            .iter()
            .map(|(code, _)| *code)
            .filter(|code| code != dropped)
            .collect();
        let dir = work_dir().join(format!("lint-without-{dropped}"));
        match lint_waiving(&verilog, &dir, &kept) {
            Err(Error::CommandFailed { output, .. }) => {
                assert!(output.contains(&format!("%Warning-{dropped}")), "{output}")
            }
            other => panic!("dropping the {dropped} waiver: {other:?}"),
        }
    }
}

#[test]
fn tcp_rx_lints_clean() {
    lint(
        &verilog_of(TcpRxParser::default()),
        &work_dir().join("lint-tcp_rx"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
