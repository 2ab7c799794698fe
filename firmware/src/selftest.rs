//! Self-tests that run on the target (under QEMU, see `scripts/riscv-firmware.sh`)
//! and on the host (`cargo test`), so the same checks prove the code on both ISAs.

/// One named self-test.
pub struct Case {
    pub name: &'static str,
    pub run: fn() -> Result<(), &'static str>,
}

/// Every self-test, in the order they run.
pub const CASES: &[Case] = &[Case {
    name: "placeholder",
    run: || Ok(()),
}];
