//! The C example (examples/c/listen_accept.c) built against the static library and run
//! against a scripted NIC written in C (tests/c/scripted_nic.c) on the other end of the
//! in-process link.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`: this test runs from its `deps/` directory.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The library's staticlib. Tests link the rlib only, so cargo has not built the C
/// libraries for them: build the library target itself, in this test's profile.
fn staticlib() -> PathBuf {
    let profile = profile_dir();
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "--quiet", "--lib", "-p", env!("CARGO_PKG_NAME")]);
    if profile.ends_with("release") {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("run cargo");
    assert!(status.success(), "cargo build of the C libraries failed");
    profile.join("libiwnic_host_driver.a")
}

#[test]
fn c_example_listens_accepts_from_its_handler_and_sees_the_close() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let staticlib = staticlib();
    assert!(staticlib.exists(), "{} not built", staticlib.display());
    let program = Path::new(env!("CARGO_TARGET_TMPDIR")).join("listen_accept");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&compiler)
        .args([
            "-std=c11",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
        ])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("examples/c/listen_accept.c"))
        .arg(crate_dir.join("tests/c/scripted_nic.c"))
        .arg(&staticlib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&program)
        .output()
        .expect("run the C compiler");
    assert!(
        built.status.success(),
        "C build failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let run = Command::new(&program).output().expect("run the example");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "example failed: {stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    // The CONNECT_REQUEST handler may run before `listen` returns (the request follows
    // the listen's completion at once), so only the event path is in a fixed order.
    assert!(lines.contains(&"listen: 0"), "{stdout}");
    assert!(lines.contains(&"second listen: -22"), "{stdout}");
    let path: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("event") || l.starts_with("accept"))
        .collect();
    assert_eq!(
        path,
        [
            "event CONNECT_REQUEST status 0 remote 10.0.0.2:50000 ird 5 ord 6 rtr 0 private_data \"hello\"",
            "accept: 0",
            "event ESTABLISHED status 0 remote 10.0.0.2:50000 ird 1 ord 1 rtr 0 private_data \"\"",
            "event CLOSE status 0 remote 10.0.0.2:50000 ird 0 ord 0 rtr 0 private_data \"\"",
        ],
        "{stdout}"
    );
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "reject message for -ECONNREFUSED: refused by remote application",
            "done"
        ]
    );
}
