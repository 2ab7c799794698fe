//! Runs `iwnic_firmware::selftest::CASES` and prints one line per case, then the setup
//! benchmark (firmware cost of one passive connection setup: RISC-V instructions on the
//! target, read from `minstret` under QEMU's `-icount`; nanoseconds on the host), then
//! `N passed, M failed`; exits with success iff nothing failed.
//!
//! Two builds of the same file:
//! - bare metal (`target_os = "none"`): QEMU's riscv `virt` machine, linked with
//!   `firmware/qemu/link.x` by `scripts/riscv-firmware.sh`; output goes to the 16550 UART and
//!   the exit status to QEMU through the SiFive test finisher.
//! - host: a normal program, because `cargo test` builds every example.
#![cfg_attr(target_os = "none", no_std, no_main)]

use core::fmt::Write;
use iwnic_firmware::selftest::passive_open::{
    config, listen, passive_setups, MemoryFirmware, MemoryNic, MAX_SIDE_BY_SIDE,
};
use iwnic_firmware::selftest::CASES;
use iwnic_proto::net::Checksums;

/// Connections the benchmark sets up one at a time.
const BENCH_CONNECTIONS: u16 = 100;
/// Rounds of [`MAX_SIDE_BY_SIDE`] connections set up side by side.
const BENCH_ROUNDS: u16 = 12;

/// Firmware cost per passive setup (SYN to ESTABLISHED, MPA v2 with RTR, accept from the
/// host), measured with `counter` around `poll` only: the scripted peer is not counted.
/// `side_by_side` setups at a time, each step's inputs queued for one poll, `rounds`
/// times. One at a time (a poll per input) is the latency figure; side by side, as at
/// full load, the polls' fixed cost is shared.
fn bench_passive_setup(
    counter: &impl Fn() -> u64,
    checksums: Checksums,
    side_by_side: usize,
    rounds: u16,
) -> Result<u64, &'static str> {
    let mut fw = MemoryFirmware::new(config(checksums));
    let mut nic = MemoryNic::default();
    listen(&mut fw, &mut nic)?;
    let mut spent = 0;
    for k in 0..rounds {
        let first_port = 40000 + k * side_by_side as u16;
        passive_setups(&mut fw, &mut nic, first_port, side_by_side, |fw, nic| {
            measured_window(true);
            let start = counter();
            fw.poll(nic, smoltcp::time::Instant::from_millis(0));
            spent += counter() - start;
            measured_window(false);
        })?;
    }
    Ok(spent / (u64::from(rounds) * side_by_side as u64))
}

/// Marks the measured code for an execution-trace profile (`qemu -d exec`): the
/// profiler counts what runs between a call with `true` and one with `false`.
#[inline(never)]
#[no_mangle]
extern "C" fn measured_window(open: bool) {
    core::hint::black_box(open);
}

/// Runs every case and the benchmark, reporting to `out`; returns how many failed.
fn run_all(out: &mut impl Write, platform: &str, counter: impl Fn() -> u64, unit: &str) -> usize {
    // Writes to the UART or stdout cannot fail in a way worth reporting, hence `.ok()`.
    writeln!(out, "iwnic firmware self-test on {platform}").ok();
    let mut failed = 0;
    for case in CASES {
        match (case.run)() {
            Ok(()) => writeln!(out, "test {} ... ok", case.name).ok(),
            Err(why) => {
                failed += 1;
                writeln!(out, "test {} ... FAILED: {why}", case.name).ok()
            }
        };
    }
    let modes = [
        (Checksums::Offloaded, "checksums in the datapath"),
        (
            Checksums::Software,
            "received checksums checked in firmware too",
        ),
    ];
    let mut report = |label: &str, at_once: usize, cost: Result<u64, &'static str>| {
        let connections = match at_once {
            1 => usize::from(BENCH_CONNECTIONS),
            _ => at_once * usize::from(BENCH_ROUNDS),
        };
        match cost {
            Ok(cost) => writeln!(
                out,
                "bench passive_setup ({label}): {cost} {unit} per connection \
                 (SYN to ESTABLISHED, MPA v2 with RTR; {connections} connections, \
                 {at_once} at a time, firmware poll only)"
            )
            .ok(),
            Err(why) => {
                failed += 1;
                writeln!(
                    out,
                    "bench passive_setup ({label}, {at_once} at a time) ... FAILED: {why}"
                )
                .ok()
            }
        };
    };
    for (checksums, label) in modes {
        let cost = bench_passive_setup(&counter, checksums, 1, BENCH_CONNECTIONS);
        report(label, 1, cost);
    }
    // As at full load: each step's inputs of several setups queued for one poll, with a
    // negotiation buffer for each connection that can hold one at once.
    let cost = bench_passive_setup(
        &counter,
        Checksums::Offloaded,
        MAX_SIDE_BY_SIDE,
        BENCH_ROUNDS,
    );
    report(modes[0].1, MAX_SIDE_BY_SIDE, cost);
    let total = CASES.len() + modes.len() + 1;
    writeln!(out, "{} passed, {} failed", total - failed, failed).ok();
    failed
}

#[cfg(not(target_os = "none"))]
fn main() {
    struct Stdout;
    impl Write for Stdout {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            print!("{s}");
            Ok(())
        }
    }
    let platform = format!("{} (host)", std::env::consts::ARCH);
    let start = std::time::Instant::now();
    let nanos = || start.elapsed().as_nanos() as u64;
    let failed = run_all(
        &mut Stdout,
        &platform,
        nanos,
        if cfg!(debug_assertions) {
            "ns (unoptimised build)"
        } else {
            "ns"
        },
    );
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

/// QEMU `virt` (riscv) bare-metal support: start-up, UART, exit.
#[cfg(target_os = "none")]
mod bare {
    use core::fmt::Write;

    /// ns16550a UART of the `virt` machine.
    const UART: usize = 0x1000_0000;
    /// SiFive test finisher of the `virt` machine: a write ends QEMU.
    const FINISHER: usize = 0x10_0000;

    // Entry point, placed first in RAM by link.x. No runtime exists yet: set the stack
    // pointer, zero .bss (Rust assumes statics start zeroed), then enter Rust. `.data`
    // needs no copy: QEMU loads the ELF straight into RAM.
    core::arch::global_asm!(
        ".section .text.init, \"ax\"",
        ".global _start",
        "_start:",
        "    la sp, _stack_top",
        "    la t0, __bss_start",
        "    la t1, __bss_end",
        "1:  bgeu t0, t1, 2f",
        "    sw zero, 0(t0)",
        "    addi t0, t0, 4",
        "    j 1b",
        "2:  call {main}",
        "3:  j 3b",
        main = sym main,
    );

    struct Uart;
    impl Write for Uart {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            for b in s.bytes() {
                // SAFETY: UART registers of the virt machine; THR at +0, LSR at +5.
                unsafe {
                    // Wait for "transmit holding register empty" (always set on QEMU).
                    while (UART as *const u8).add(5).read_volatile() & 0x20 == 0 {}
                    (UART as *mut u8).write_volatile(b);
                }
            }
            Ok(())
        }
    }

    /// Ends the QEMU run: status 0 for `None`, else QEMU exits with `code`.
    fn exit(fail_code: Option<u16>) -> ! {
        let word = match fail_code {
            None => 0x5555,
            Some(code) => (u32::from(code) << 16) | 0x3333,
        };
        // SAFETY: the test finisher register of the virt machine.
        unsafe { (FINISHER as *mut u32).write_volatile(word) };
        loop {
            core::hint::spin_loop(); // not reached under QEMU
        }
    }

    /// Instructions retired: exact under QEMU with `-icount shift=0`.
    fn instructions() -> u64 {
        loop {
            let (hi, lo, hi2): (u32, u32, u32);
            // SAFETY: reading the machine-mode instruction counters has no side effect.
            unsafe {
                core::arch::asm!("csrr {0}, minstreth", "csrr {1}, minstret", "csrr {2}, minstreth",
                    out(reg) hi, out(reg) lo, out(reg) hi2);
            }
            if hi == hi2 {
                return u64::from(hi) << 32 | u64::from(lo);
            }
        }
    }

    extern "C" fn main() -> ! {
        let failed = super::run_all(
            &mut Uart,
            "riscv32imac (qemu virt)",
            instructions,
            "RISC-V instructions",
        );
        exit(if failed == 0 { None } else { Some(1) })
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo) -> ! {
        writeln!(Uart, "panic: {info}").ok();
        exit(Some(101)) // the status a panicking Rust test process exits with
    }
}
