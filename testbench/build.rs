//! Nothing to build: its presence gives the crate an `OUT_DIR`, below which
//! `hdl_engine` caches the Verilated `nic_top` (see `hdl_engine::verilator_dir`).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
