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

/// No block reads back a flip-flop's input in the expression it assigns to that input
/// (`x.d.next = x.d.val() ...`). A DFF's `d` is an input signal: RustHDL's simulator
/// gives the value before the update, the generated Verilog (blocking assignments) the
/// one just assigned, so the two engines settle on different values. (Reading another
/// flip-flop's input is fine: the simulator updates until nothing changes.) `nic_top`'s
/// `bank_busy` did this once, dropping a bank filled in the cycle of a release on
/// RustHDL only.
#[test]
fn no_block_reads_back_a_flip_flops_input_where_it_assigns_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = vec![];
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for statement in text.split(';') {
            let Some((target, value)) = statement.split_once(".d.next =") else {
                continue;
            };
            let name = target.rsplit("self.").next().unwrap_or_default();
            if value.contains(&format!("self.{name}.d.val()")) {
                offenders.push(format!("{}: {}", path.display(), statement.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "flip-flop inputs read back where they are assigned (use a local signal): {offenders:#?}"
    );
}
