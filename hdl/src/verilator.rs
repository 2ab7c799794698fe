//! Verilator for RustHDL blocks: lint a block's exported Verilog, and build it into a
//! model that Rust drives through a small C ABI.
//!
//! [`VerilatedModel::build`] writes the Verilog, runs `verilator --cc`, generates a
//! C++ harness for the top's ports, compiles everything with the `cc` crate (C++20,
//! `-O2` even in debug builds, position-independent), links a shared object and loads
//! it. Builds are cached under the caller's work directory by a hash of the Verilog, so
//! a test run recompiles only the blocks whose Verilog changed.
//!
//! RustHDL's Verilog needs a few warnings waived; [`WAIVERS`] lists each with its reason
//! and is the only place waivers live: the lint check and the model build both use it.

use std::collections::hash_map::DefaultHasher;
use std::ffi::{c_char, c_void, CString};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use rust_hdl::core::atom::{Atom, AtomKind};
use rust_hdl::prelude::{Block, Probe};

/// Verilator warnings waived on RustHDL's Verilog, each with the reason it is benign.
pub const WAIVERS: &[(&str, &str)] = &[
    (
        "DECLFILENAME",
        "generate_verilog emits every module of a design into one file named after the top; \
         submodules are named top$path, which no file name can match",
    ),
    (
        "WIDTH",
        "RustHDL renders bit_cast::<64, N> as `x & 64'hFF..FF`, widening by context, and \
         initialises a DFF of an enum with a 64-bit literal; both are well-defined Verilog. \
         A width slip that changes behaviour shows up as a disagreement between RustHDL and \
         Verilator, which every block test checks on every cycle",
    ),
    (
        "UNUSEDPARAM",
        "RustHDL declares a LogicState enum's values as localparams in every module that \
         carries the enum, including the DFF holding it, which never compares against them",
    ),
    (
        "UNOPTFLAT",
        "RustHDL writes each module's logic as one always @(*) block, so a signal that goes \
         out to a combinational submodule (the CRC matrix) and comes back looks circular to \
         Verilator's block-level ordering although no bit depends on itself; it costs \
         Verilator a settle loop, not correctness (Verilator 5.04x no longer raises it)",
    ),
];

/// A port value as the 64-bit word a Verilated model's ports take and give (every port
/// of a RustHDL top driven from Rust is at most 64 bits wide), converted to and from the
/// RustHDL signal types: how one driver feeds both simulators.
pub trait PortValue {
    fn to_port(&self) -> u64;
    fn from_port(value: u64) -> Self;
}

impl PortValue for bool {
    fn to_port(&self) -> u64 {
        u64::from(*self)
    }
    fn from_port(value: u64) -> Self {
        value & 1 == 1
    }
}

impl<const N: usize> PortValue for rust_hdl::prelude::Bits<N> {
    fn to_port(&self) -> u64 {
        rust_hdl::prelude::LiteralType::from(*self)
    }
    fn from_port(value: u64) -> Self {
        value.into()
    }
}

/// Why a lint or build failed.
#[derive(Debug)]
pub enum Error {
    /// `verilator` is not on PATH.
    VerilatorMissing,
    /// A command ran and failed; `output` holds its stderr and stdout.
    CommandFailed { command: String, output: String },
    /// Writing or reading a build file.
    Io(std::io::Error),
    /// The C++ compiler (through the `cc` crate) failed.
    Compile(String),
    /// Loading the built shared object.
    Load(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::VerilatorMissing => write!(
                f,
                "verilator is not installed (not on PATH): run scripts/setup.sh, which \
                 installs Debian's verilator"
            ),
            Error::CommandFailed { command, output } => {
                write!(f, "`{command}` failed:\n{output}")
            }
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Compile(e) => write!(f, "compiling the verilated model failed: {e}"),
            Error::Load(e) => write!(f, "loading the verilated model failed: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// A port of the top module, as the Verilog declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub name: String,
    pub width: usize,
    pub is_input: bool,
}

/// The ports of `uut`'s top level, in declaration order.
pub fn top_ports<B: Block>(uut: &B) -> Vec<Port> {
    struct TopPorts {
        depth: usize,
        ports: Vec<Port>,
    }
    impl Probe for TopPorts {
        fn visit_start_scope(&mut self, _name: &str, _node: &dyn Block) {
            self.depth += 1;
        }
        fn visit_atom(&mut self, name: &str, signal: &dyn Atom) {
            let is_input = match signal.kind() {
                AtomKind::InputParameter => true,
                AtomKind::OutputParameter => false,
                _ => return,
            };
            if self.depth == 1 {
                self.ports.push(Port {
                    name: name.to_owned(),
                    width: signal.bits(),
                    is_input,
                });
            }
        }
        fn visit_end_scope(&mut self, _name: &str, _node: &dyn Block) {
            self.depth -= 1;
        }
    }
    let mut probe = TopPorts {
        depth: 0,
        ports: vec![],
    };
    uut.accept("top", &mut probe);
    probe.ports
}

fn waiver_flags() -> impl Iterator<Item = String> {
    WAIVERS.iter().map(|(code, _)| format!("-Wno-{code}"))
}

fn run(command: &mut Command) -> Result<(), Error> {
    let output = command.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound && command.get_program() == "verilator" {
            Error::VerilatorMissing
        } else {
            Error::Io(e)
        }
    })?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::CommandFailed {
            command: format!("{command:?}"),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stderr),
                String::from_utf8_lossy(&output.stdout)
            ),
        })
    }
}

/// `verilator --lint-only -Wall` on a RustHDL top (module `top`) with every waiver in
/// [`WAIVERS`]. `work_dir` receives `top.v` (named after the top module, so Verilator's
/// file-name check passes for the top itself).
pub fn lint(verilog: &str, work_dir: &Path) -> Result<(), Error> {
    let all: Vec<&str> = WAIVERS.iter().map(|(code, _)| *code).collect();
    lint_waiving(verilog, work_dir, &all)
}

/// [`lint`] waiving only the warnings in `waived` (to show that each waiver is needed).
pub fn lint_waiving(verilog: &str, work_dir: &Path, waived: &[&str]) -> Result<(), Error> {
    std::fs::create_dir_all(work_dir)?;
    let file = work_dir.join("top.v");
    std::fs::write(&file, verilog)?;
    run(Command::new("verilator")
        .args(["--lint-only", "-Wall", "--top-module", "top"])
        .args(waived.iter().map(|code| format!("-Wno-{code}")))
        .arg(&file))
}

type NewFn = unsafe extern "C" fn() -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type EvalFn = unsafe extern "C" fn(*mut c_void);
type SetFn = unsafe extern "C" fn(*mut c_void, u32, u64);
type GetFn = unsafe extern "C" fn(*mut c_void, u32) -> u64;
type TraceOpenFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> bool;
type TraceDumpFn = unsafe extern "C" fn(*mut c_void, u64);

/// How to build a model. The default is the plain, fastest model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BuildOptions {
    /// Build with waveform tracing (`verilator --trace-fst`, every signal of the design,
    /// time in nanoseconds): [`VerilatedModel::open_trace`] then writes an FST file
    /// (GTKWave reads it). Costs compile time, a zlib link and, while a trace is open,
    /// simulation speed; a traced build is cached apart from the plain one.
    pub trace: bool,
}

/// The trace entry points of a traced build.
struct TraceFns {
    open: TraceOpenFn,
    dump: TraceDumpFn,
}

/// A verilated RustHDL top, loaded into this process. Ports are addressed by their index
/// in [`VerilatedModel::ports`]; look indices up once with [`VerilatedModel::port`].
pub struct VerilatedModel {
    model: *mut c_void,
    free: FreeFn,
    eval: EvalFn,
    set: SetFn,
    get: GetFn,
    trace: Option<TraceFns>,
    ports: Vec<Port>,
    // Dropped after `model` is freed (see `Drop`), so the code stays mapped until then.
    _library: libloading::Library,
}

/// The C++ harness: one model per `new`, ports by index, values masked to their width
/// (Verilator requires the unused high bits of a port's storage to be zero). With
/// `trace`, it also opens, dumps and (on free) closes an FST trace; without, its text is
/// exactly what it was before tracing existed, so plain builds keep their cache.
fn harness(class: &str, ports: &[Port], trace: bool) -> String {
    let mut setters = String::new();
    let mut getters = String::new();
    for (index, port) in ports.iter().enumerate() {
        let name = &port.name;
        if port.is_input {
            let mask = if port.width == 64 {
                u64::MAX
            } else {
                (1u64 << port.width) - 1
            };
            writeln!(
                setters,
                "        case {index}: m->top.{name} = value & {mask:#x}ULL; break;"
            )
            .unwrap();
        }
        writeln!(getters, "        case {index}: return m->top.{name};").unwrap();
    }
    let (include, context, members, close, functions) = if trace {
        (
            "#include \"verilated_fst_c.h\"\n",
            "TracingContext",
            "    VerilatedFstC* trace = nullptr;\n",
            "    if (m->trace) {\n        m->trace->close();\n        delete m->trace;\n    }\n",
            TRACE_FUNCTIONS,
        )
    } else {
        ("", "VerilatedContext", "", "", "")
    };
    let context_class = if trace { TRACING_CONTEXT } else { "" };
    format!(
        r#"// Generated by iwnic_hdl::verilator: a C ABI over the verilated model {class}.
#include <cstdint>
#include "verilated.h"
{include}#include "{class}.h"

namespace {{
{context_class}struct Model {{
    {context} context;
    {class} top{{&context}};
{members}}};
}}

extern "C" {{
void* iwnic_model_new() {{ return new Model; }}
void iwnic_model_free(void* model) {{
    Model* m = static_cast<Model*>(model);
    m->top.final();
{close}    delete m;
}}{functions}
void iwnic_model_eval(void* model) {{ static_cast<Model*>(model)->top.eval(); }}
void iwnic_model_set(void* model, uint32_t port, uint64_t value) {{
    Model* m = static_cast<Model*>(model);
    switch (port) {{
{setters}        default: break;
    }}
}}
uint64_t iwnic_model_get(void* model, uint32_t port) {{
    Model* m = static_cast<Model*>(model);
    switch (port) {{
{getters}        default: return 0;
    }}
}}
}}
"#
    )
}

/// A traced build's context: tracing has to be switched on before the model is built.
const TRACING_CONTEXT: &str = "struct TracingContext : VerilatedContext {
    TracingContext() { traceEverOn(true); }
};
";

/// A traced build's entry points: open an FST trace of every signal (once), dump the
/// design's state at a time in nanoseconds.
const TRACE_FUNCTIONS: &str = r#"
bool iwnic_model_trace_open(void* model, const char* path) {
    Model* m = static_cast<Model*>(model);
    if (m->trace) return false;
    m->trace = new VerilatedFstC;
    m->top.trace(m->trace, 99);
    m->trace->open(path);
    if (!m->trace->isOpen()) {
        delete m->trace;
        m->trace = nullptr;
        return false;
    }
    return true;
}
void iwnic_model_trace_dump(void* model, uint64_t time) {
    Model* m = static_cast<Model*>(model);
    if (m->trace) m->trace->dump(time);
}"#;

/// The runtime sources a model needs, from the `VM_GLOBAL_*` lists of
/// `V<top>_classes.mk` (e.g. `verilated`, `verilated_threads`).
fn global_runtime_sources(classes_mk: &str) -> Vec<String> {
    let mut sources = vec![];
    let mut in_global_list = false;
    for line in classes_mk.lines() {
        if line.starts_with("VM_GLOBAL_") {
            in_global_list = true;
            continue;
        }
        if in_global_list {
            let name = line.trim().trim_end_matches('\\').trim();
            if line.starts_with('\t') && !name.is_empty() {
                sources.push(name.to_owned());
                continue;
            }
            in_global_list = line.trim_end().ends_with('\\');
        }
    }
    sources
}

/// The trimmed stdout of `verilator ARGS`.
fn verilator_output(args: &[&str]) -> Result<String, Error> {
    let output = Command::new("verilator")
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::VerilatorMissing,
            _ => Error::Io(e),
        })?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn verilator_version() -> Result<String, Error> {
    verilator_output(&["--version"])
}

fn verilator_root() -> Result<PathBuf, Error> {
    verilator_output(&["--getenv", "VERILATOR_ROOT"]).map(PathBuf::from)
}

/// A `cc` build for Verilator C++: C++20, `-O2` whatever the profile (a debug model
/// runs several times slower), position-independent for the shared object.
fn cpp_build(include: &Path, out_dir: &Path) -> cc::Build {
    let target = env!("IWNIC_HDL_TARGET");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++20")
        .opt_level(2)
        .debug(false)
        .pic(true)
        .target(target)
        .host(target)
        .cargo_metadata(false)
        .cargo_warnings(false)
        .warnings(false)
        .out_dir(out_dir)
        .include(include)
        .include(include.join("vltstd"));
    build
}

/// Verilator's runtime (`sources`, from `include`) compiled once into `work_dir` and
/// shared by every model: it is most of a model's compile time.
fn runtime_objects(
    include: &Path,
    sources: &[String],
    work_dir: &Path,
) -> Result<Vec<PathBuf>, Error> {
    static COMPILING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = COMPILING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut hasher = DefaultHasher::new();
    (sources, verilator_version()?).hash(&mut hasher);
    let dir = work_dir.join(format!("runtime-{:016x}", hasher.finish()));
    let list = dir.join("objects");
    if let Ok(objects) = std::fs::read_to_string(&list) {
        return Ok(objects.lines().map(PathBuf::from).collect());
    }
    let objects = cpp_build(include, &dir)
        .files(sources.iter().map(|s| include.join(format!("{s}.cpp"))))
        .try_compile_intermediates()
        .map_err(|e| Error::Compile(e.to_string()))?;
    // Written last, so an interrupted build is redone rather than half used.
    let names: Vec<String> = objects.iter().map(|o| o.display().to_string()).collect();
    std::fs::write(&list, names.join("\n"))?;
    Ok(objects)
}

impl VerilatedModel {
    /// Builds (or reuses from `work_dir`) and loads the model of a RustHDL top whose
    /// Verilog is `verilog` and whose ports are `ports` (see [`top_ports`]). `name`
    /// names the build folder and the C++ class (`V<name>`).
    pub fn build(
        name: &str,
        verilog: &str,
        ports: Vec<Port>,
        work_dir: &Path,
    ) -> Result<VerilatedModel, Error> {
        Self::build_with(name, verilog, ports, work_dir, BuildOptions::default())
    }

    /// [`build`](Self::build) with `options` (e.g. a traced model).
    pub fn build_with(
        name: &str,
        verilog: &str,
        ports: Vec<Port>,
        work_dir: &Path,
        options: BuildOptions,
    ) -> Result<VerilatedModel, Error> {
        if let Some(port) = ports.iter().find(|p| p.width > 64) {
            panic!(
                "port {} is {} bits; the harness carries at most 64",
                port.name, port.width
            );
        }
        let class = format!("V{name}");
        let harness_source = harness(&class, &ports, options.trace);
        let mut hasher = DefaultHasher::new();
        (verilog, &harness_source, WAIVERS, verilator_version()?).hash(&mut hasher);
        // The plain build's key is unchanged by `options`; a traced build has its own
        // folder (and its harness differs).
        let flavour = if options.trace { "-fst" } else { "" };
        let dir = work_dir.join(format!("{name}{flavour}-{:016x}", hasher.finish()));
        let library = dir.join(format!("lib{name}.so"));
        if !library.exists() {
            Self::compile(
                &class,
                verilog,
                &harness_source,
                options,
                work_dir,
                &dir,
                &library,
            )?;
        }
        Self::load(&library, ports, options)
    }

    fn compile(
        class: &str,
        verilog: &str,
        harness_source: &str,
        options: BuildOptions,
        work_dir: &Path,
        dir: &Path,
        library: &Path,
    ) -> Result<(), Error> {
        let obj_dir = dir.join("obj_dir");
        std::fs::create_dir_all(&obj_dir)?;
        let file = dir.join("top.v");
        std::fs::write(&file, verilog)?;
        run(Command::new("verilator")
            .args(["--cc", "-O3", "--top-module", "top", "--prefix", class])
            .args(waiver_flags())
            .args(if options.trace {
                // Every signal, timestamps in nanoseconds (RustHDL's Verilog has no
                // `timescale of its own).
                &["--trace-fst", "--timescale-override", "1ns/1ns"][..]
            } else {
                &[]
            })
            .arg("--Mdir")
            .arg(&obj_dir)
            .arg(&file))?;
        let harness_file = dir.join("harness.cpp");
        std::fs::write(&harness_file, harness_source)?;

        let include = verilator_root()?.join("include");
        let classes_mk = std::fs::read_to_string(obj_dir.join(format!("{class}_classes.mk")))?;
        let runtime = runtime_objects(&include, &global_runtime_sources(&classes_mk), work_dir)?;
        let mut sources: Vec<PathBuf> = vec![harness_file];
        for entry in std::fs::read_dir(&obj_dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "cpp") {
                sources.push(path);
            }
        }
        let mut build = cpp_build(&include, &dir.join("build"));
        build.include(&obj_dir).files(&sources);
        let objects = build
            .try_compile_intermediates()
            .map_err(|e| Error::Compile(e.to_string()))?;
        let partial = library.with_extension("so.partial");
        let mut link = build.get_compiler().to_command();
        link.arg("-shared")
            .arg("-o")
            .arg(&partial)
            .args(&objects)
            .args(&runtime)
            .arg("-pthread");
        if options.trace {
            // The FST writer compresses with zlib.
            link.arg("-lz");
        }
        run(&mut link)?;
        // Rename last: a crash mid-build never leaves a library that looks complete.
        std::fs::rename(&partial, library)?;
        Ok(())
    }

    fn load(
        library: &Path,
        ports: Vec<Port>,
        options: BuildOptions,
    ) -> Result<VerilatedModel, Error> {
        let load_error = |e: libloading::Error| Error::Load(format!("{}: {e}", library.display()));
        // SAFETY: the library is the harness built above; its initialisers only set up
        // Verilator's runtime, and the symbols have the signatures declared here.
        unsafe {
            let lib = libloading::Library::new(library).map_err(load_error)?;
            let new: NewFn = *lib.get(b"iwnic_model_new").map_err(load_error)?;
            let free: FreeFn = *lib.get(b"iwnic_model_free").map_err(load_error)?;
            let eval: EvalFn = *lib.get(b"iwnic_model_eval").map_err(load_error)?;
            let set: SetFn = *lib.get(b"iwnic_model_set").map_err(load_error)?;
            let get: GetFn = *lib.get(b"iwnic_model_get").map_err(load_error)?;
            let trace = if options.trace {
                Some(TraceFns {
                    open: *lib.get(b"iwnic_model_trace_open").map_err(load_error)?,
                    dump: *lib.get(b"iwnic_model_trace_dump").map_err(load_error)?,
                })
            } else {
                None
            };
            Ok(VerilatedModel {
                model: new(),
                free,
                eval,
                set,
                get,
                trace,
                ports,
                _library: lib,
            })
        }
    }

    /// The top's ports; a port's index here is its address for [`set`](Self::set) and
    /// [`get`](Self::get).
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// The index of the port called `name`. Panics if there is none: port names are
    /// fixed by the block, so a miss is a bug in the caller.
    pub fn port(&self, name: &str) -> u32 {
        let index = self.ports.iter().position(|p| p.name == name);
        index.unwrap_or_else(|| panic!("the model has no port {name}")) as u32
    }

    /// Drives input port `port` (bits above its width are dropped).
    pub fn set(&mut self, port: u32, value: u64) {
        assert!(
            self.ports[port as usize].is_input,
            "port {port} is an output"
        );
        // SAFETY: `model` came from this library's `new` and is freed only in `drop`.
        unsafe { (self.set)(self.model, port, value) }
    }

    /// The current value of `port`, input or output.
    pub fn get(&self, port: u32) -> u64 {
        // SAFETY: as in `set`.
        unsafe { (self.get)(self.model, port) }
    }

    /// Evaluates the model: combinational logic settles and any clock edge since the
    /// last evaluation takes effect.
    pub fn eval(&mut self) {
        // SAFETY: as in `set`.
        unsafe { (self.eval)(self.model) }
    }

    /// Starts an FST waveform of every signal at `path`, written by
    /// [`dump_trace`](Self::dump_trace) and closed when the model is dropped. The model
    /// must have been built with [`BuildOptions::trace`]; one trace per model.
    pub fn open_trace(&mut self, path: &Path) -> Result<(), Error> {
        let Some(trace) = &self.trace else {
            panic!("open_trace on a model built without BuildOptions::trace");
        };
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|e| Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
        // SAFETY: as in `set`; `c_path` outlives the call (the writer copies it).
        if unsafe { (trace.open)(self.model, c_path.as_ptr()) } {
            Ok(())
        } else {
            Err(Error::Io(std::io::Error::other(format!(
                "cannot open the waveform {} (or a trace is already open)",
                path.display()
            ))))
        }
    }

    /// Records every signal's current value at `time_ns` (nanoseconds, never
    /// decreasing) in the open trace; nothing without one.
    pub fn dump_trace(&mut self, time_ns: u64) {
        if let Some(trace) = &self.trace {
            // SAFETY: as in `set`.
            unsafe { (trace.dump)(self.model, time_ns) }
        }
    }
}

// SAFETY: the model is plain memory owned by this value: Verilator's runtime allows a
// model (and its own `VerilatedContext`) to be used from any thread, one at a time, which
// `&mut self` on every mutating call guarantees; `VerilatedModel` is not `Sync`.
unsafe impl Send for VerilatedModel {}

impl Drop for VerilatedModel {
    fn drop(&mut self) {
        // SAFETY: `model` is live and freed exactly once, before the library unloads.
        unsafe { (self.free)(self.model) }
    }
}
