//! The C example (host-driver/examples/c/listen_accept.c), built against the host
//! driver's static library, runs as B's application on the simulated NICs: A's Rust host
//! connects to it and closes, and the example prints what its handler saw.
//!
//! The example opens its device with `iwnic_open_inprocess`, whose NIC end lives in the
//! C process; tests/c/sim_relay.c relays that end's records over a Unix socket to B's
//! driver-side transport of the `Sim` here, unchanged.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{quick_firmware, Host, PATIENCE};
use iwnic_host_driver::{
    DeviceConfig, EventKind, InProcessTransport, RtrTypes, Transport, TransportError,
};
use iwnic_proto::host::Record;
use iwnic_testbench::sim::{Side, Sim, SimConfig, A_IP, B_IP};

/// `target/<profile>`: this test runs from its `deps/` directory.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The host driver's staticlib, built in this test's profile (tests link rlibs only).
fn staticlib() -> PathBuf {
    let profile = profile_dir();
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "--quiet", "--lib", "-p", "iwnic-host-driver"]);
    if profile.ends_with("release") {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("run cargo");
    assert!(
        status.success(),
        "cargo build of the host driver's C library failed"
    );
    profile.join("libiwnic_host_driver.a")
}

/// The example linked with the relay, in the test's scratch directory.
fn build_example() -> PathBuf {
    let testbench = Path::new(env!("CARGO_MANIFEST_DIR"));
    let host_driver = testbench.join("../host-driver");
    let program = Path::new(env!("CARGO_TARGET_TMPDIR")).join("listen_accept_on_sim");
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
        .arg(host_driver.join("include"))
        .arg(host_driver.join("examples/c/listen_accept.c"))
        .arg(testbench.join("tests/c/sim_relay.c"))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&program)
        .output()
        .expect("run the C compiler");
    assert!(
        built.status.success(),
        "C build failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    program
}

/// Relay B's driver-side transport to the C process over `socket`: commands in,
/// completions and events out, each record as a little-endian u32 length and its bytes.
/// `first_completion` hears when the first command (the example's listen) completed.
/// Both threads end when the C side closes the socket.
fn relay(
    transport: InProcessTransport,
    socket: UnixStream,
    first_completion: Sender<()>,
) -> [JoinHandle<()>; 2] {
    let transport = Arc::new(transport);
    let mut records_out = socket.try_clone().expect("clone the socket");
    let mut commands_in = socket;
    let records = {
        let transport = Arc::clone(&transport);
        std::thread::spawn(move || loop {
            match transport.receive_record(PATIENCE) {
                Ok(record) => {
                    let len = u32::try_from(record.len()).unwrap().to_le_bytes();
                    if records_out.write_all(&len).is_err()
                        || records_out.write_all(&record).is_err()
                    {
                        return;
                    }
                    if let Ok(Record::Completion(_)) = Record::parse(&record) {
                        // Only the first is awaited; later sends find nobody, as intended.
                        let _ = first_completion.send(());
                    }
                }
                Err(TransportError::Timeout) => {}
                Err(TransportError::Closed) => return,
            }
        })
    };
    let commands = std::thread::spawn(move || {
        let mut len = [0u8; 4];
        while commands_in.read_exact(&mut len).is_ok() {
            let mut command = vec![0u8; u32::from_le_bytes(len) as usize];
            if commands_in.read_exact(&mut command).is_err()
                || transport.send_command(&command).is_err()
            {
                break;
            }
        }
        // The application is gone: B's NIC sees its host link close, as on a real host,
        // and the records thread sees the link closed.
        transport.close();
    });
    [records, commands]
}

/// The child's output, or a failure if it runs past [`PATIENCE`].
fn finish(mut child: Child) -> Output {
    let start = Instant::now();
    while child.try_wait().expect("poll the example").is_none() {
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("the example did not finish: {:?}", child.wait_with_output());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("the example's output")
}

#[test]
fn c_example_accepts_from_its_handler_on_the_simulated_nic() {
    let program = build_example();
    let mut sim = Sim::start(SimConfig {
        firmware: quick_firmware(),
        ..SimConfig::default()
    })
    .expect("start the simulation");
    let a = Host::open(sim.transport(Side::A), A_IP, DeviceConfig::default());

    let scratch = tempfile::tempdir().unwrap();
    let socket_path = scratch.path().join("nic-b.sock");
    let listener = UnixListener::bind(&socket_path).unwrap();
    let child = Command::new(&program)
        .env("IWNIC_SIM_SOCKET", &socket_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example");
    let (socket, _) = listener.accept().expect("the example attaches");
    let (listened, first_completion) = channel();
    let relays = relay(sim.transport(Side::B), socket, listened);
    first_completion
        .recv_timeout(PATIENCE)
        .expect("the example's listen completes");

    let a_id = a.connecting(
        SocketAddr::from((B_IP, 4791)),
        b"hello",
        common::report_only(),
    );
    let (_, reply) = a.expect(EventKind::ConnectReply, 0);
    assert_eq!(reply.private_data, b"welcome");
    assert_eq!(reply.rtr, RtrTypes::WRITE, "the RTR A's NIC sent");
    let a_port = a_id
        .local_addr()
        .expect("A's address from the reply")
        .port();
    a_id.disconnect(false).unwrap();
    a.expect(EventKind::Close, 0);

    let run = finish(child);
    for relay in relays {
        relay.join().unwrap();
    }
    drop(a);
    let report = sim.stop();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "example failed: {stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"listen: 0"), "{stdout}");
    assert!(lines.contains(&"second listen: -22"), "{stdout}");
    let remote = format!("remote 10.0.0.1:{a_port}");
    let path: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("event") || l.starts_with("accept"))
        .collect();
    // Rule 9 in the C ABI: the request carries A's IRD 4 and ORD 3; ESTABLISHED carries
    // the example's ORD in `ird` and its IRD in `ord` (both 1), and the RTR A sent (the
    // Write RTR B's firmware chose: IWNIC_RTR_WRITE); CLOSE none.
    assert_eq!(
        path,
        [
            format!(
                "event CONNECT_REQUEST status 0 {remote} ird 4 ord 3 rtr 0 private_data \"hello\""
            ),
            "accept: 0".to_string(),
            format!("event ESTABLISHED status 0 {remote} ird 1 ord 1 rtr 2 private_data \"\""),
            format!("event CLOSE status 0 {remote} ird 0 ord 0 rtr 0 private_data \"\""),
        ],
        "{stdout}"
    );
    assert_eq!(lines.last(), Some(&"done"), "{stdout}");
    assert_eq!(report.b.firmware.connections_established, 1);
}
