//! Connection setup through the behavioural model, host drivers on both NICs: connections
//! established per second for 1,000 sequential and 1,000 concurrent connects (B accepts
//! from its CONNECT_REQUEST handler), and the driver's event dispatch latency.
//!
//! Dispatch latency runs from the moment an event record is pushed onto the driver's host
//! queue to the first instruction of the application's handler: the receive thread's
//! wake-up and decode, the dispatch queue, the dispatch thread's wake-up and routing. To
//! see the push without changing the driver or the simulator, each driver sits behind a
//! relay: the Sim's host link on one side, a second in-process link on the other, and the
//! relay notes the time as it pushes each event record on. The relay's own hop is outside
//! the measured span.
//!
//! `cargo bench -p iwnic-testbench --bench connections`

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use iwnic_host_driver::{
    in_process, CmEvent, CmId, ConnParam, Device, EventKind, Handler, InProcessNic,
    InProcessTransport, Transport, TransportError, DEFAULT_HOST_QUEUE_CAPACITY,
};
use iwnic_proto::host::Record;
use iwnic_testbench::sim::{Side, Sim, SimConfig, A_IP, B_IP};

const CONNECTIONS: usize = 1_000;
/// Connects in flight at once in the concurrent run: the NIC negotiates at most
/// `iwnic_testbench::nic::NEGOTIATIONS` (256) connections at a time and refuses more
/// with -ENOBUFS, so the window stays below it.
const WINDOW: usize = 200;
const PORT: u16 = 4791;
const QPN: u32 = 1;
const PATIENCE: Duration = Duration::from_secs(30);

/// When each event record was pushed to the driver, by (event, connection index): the
/// handler finds its own with the same key.
type PushTimes = Arc<Mutex<HashMap<(EventKind, u16), Instant>>>;

/// A driver behind a timing relay on one of the Sim's host links.
struct TimedHost {
    device: Device,
    pushed: PushTimes,
    latencies: Arc<Mutex<Vec<Duration>>>,
    stop: Arc<AtomicBool>,
    relays: Vec<JoinHandle<()>>,
}

impl TimedHost {
    fn open(sim_link: InProcessTransport) -> TimedHost {
        let (driver_link, relay_nic) = in_process(DEFAULT_HOST_QUEUE_CAPACITY);
        let sim_link = Arc::new(sim_link);
        let pushed = PushTimes::default();
        let stop = Arc::new(AtomicBool::new(false));
        let records = {
            let (sim_link, relay_nic, pushed, stop) = (
                Arc::clone(&sim_link),
                relay_nic.clone(),
                Arc::clone(&pushed),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || relay_records(&sim_link, &relay_nic, &pushed, &stop))
        };
        let commands = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || relay_commands(&relay_nic, &sim_link, &stop))
        };
        let device = Device::open(driver_link);
        device.register_qp(QPN);
        TimedHost {
            device,
            pushed,
            latencies: Arc::default(),
            stop,
            relays: vec![records, commands],
        }
    }

    /// A handler that records its dispatch latency, then runs `then`.
    fn timed(
        &self,
        then: impl Fn(&CmId, &CmEvent) -> iwnic_host_driver::Result<()> + Send + Sync + 'static,
    ) -> impl Fn(&CmId, &CmEvent) -> iwnic_host_driver::Result<()> + Send + Sync + 'static {
        let (pushed, latencies) = (Arc::clone(&self.pushed), Arc::clone(&self.latencies));
        move |id, event| {
            let running = Instant::now();
            let key = id.connection_index().map(|index| (event.event, index));
            if let Some(at) = key.and_then(|key| pushed.lock().unwrap().remove(&key)) {
                latencies.lock().unwrap().push(running - at);
            }
            then(id, event)
        }
    }

    fn close(mut self) -> Vec<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        for relay in self.relays.drain(..) {
            relay.join().unwrap();
        }
        self.device.close();
        // Handlers (held by ids that outlive the device) may keep the list alive.
        std::mem::take(&mut *self.latencies.lock().unwrap())
    }
}

/// Sim → driver: every record passed on as the NIC pushed it, event records timed. Room
/// in the driver's queue is waited for, as the NIC does.
fn relay_records(
    sim_link: &InProcessTransport,
    to_driver: &InProcessNic,
    pushed: &PushTimes,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        let record = match sim_link.receive_record(Duration::from_millis(10)) {
            Ok(record) => record,
            Err(TransportError::Timeout) => continue,
            Err(TransportError::Closed) => return,
        };
        while to_driver.host_space() == 0 {
            std::thread::yield_now();
        }
        if let Ok(Record::Event(event)) = Record::parse(&record) {
            let key = (event.kind, (event.conn & 0xFFFF) as u16);
            pushed.lock().unwrap().insert(key, Instant::now());
        }
        to_driver.push_record(&record);
    }
}

/// Driver → Sim: commands passed on unchanged.
fn relay_commands(from_driver: &InProcessNic, sim_link: &InProcessTransport, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match from_driver.wait_command(Duration::from_millis(10)) {
            Ok(command) => {
                if sim_link.send_command(&command).is_err() {
                    return;
                }
            }
            Err(TransportError::Timeout) => {}
            Err(TransportError::Closed) => return,
        }
    }
}

fn param() -> ConnParam {
    ConnParam {
        private_data: Vec::new(),
        ird: 4,
        ord: 4,
        qpn: QPN,
    }
}

/// One run: a fresh simulation, B listening and accepting from its handler, A connecting
/// `CONNECTIONS` times with at most `window` attempts in flight. Connections per second
/// and the dispatch latencies both hosts saw.
fn run(window: usize) -> (f64, Vec<Duration>) {
    let mut sim = Sim::start(SimConfig::default()).expect("start the simulation");
    let a = TimedHost::open(sim.transport(Side::A));
    let b = TimedHost::open(sim.transport(Side::B));

    let listener = b
        .device
        .create_cm_id(
            b.timed(|id, event| match event.event {
                EventKind::ConnectRequest => id.accept(&param()),
                _ => Ok(()),
            }),
            Arc::new(()),
        )
        .unwrap();
    listener
        .set_local_addr(std::net::SocketAddr::from((B_IP, PORT)))
        .unwrap();
    listener.listen(CONNECTIONS as u32).unwrap();

    let (replied, replies): (_, Receiver<i32>) = channel();
    let replied = Mutex::new(replied);
    let handler: Handler = Arc::new(a.timed(move |_, event| {
        if event.event == EventKind::ConnectReply {
            replied.lock().unwrap().send(event.status).unwrap();
        }
        Ok(())
    }));
    let start = Instant::now();
    let (mut issued, mut established) = (0, 0);
    while established < CONNECTIONS {
        while issued < CONNECTIONS && issued - established < window {
            let id = a
                .device
                .create_cm_id_shared(Arc::clone(&handler), Arc::new(()))
                .unwrap();
            id.set_local_addr(std::net::SocketAddr::from((A_IP, 0)))
                .unwrap();
            id.set_remote_addr(std::net::SocketAddr::from((B_IP, PORT)))
                .unwrap();
            id.connect(&param()).expect("connect");
            issued += 1;
        }
        let status = replies.recv_timeout(PATIENCE).expect("a CONNECT_REPLY");
        assert_eq!(status, 0, "every connection is accepted");
        established += 1;
    }
    let rate = CONNECTIONS as f64 / start.elapsed().as_secs_f64();

    let mut latencies = a.close();
    latencies.extend(b.close());
    let report = sim.stop();
    assert_eq!(
        report.a.firmware.connections_established as usize,
        CONNECTIONS
    );
    assert_eq!(
        report.b.firmware.connections_established as usize,
        CONNECTIONS
    );
    (rate, latencies)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    for (name, window) in [("sequential", 1), ("concurrent", WINDOW)] {
        let (rate, mut latencies) = run(window);
        latencies.sort();
        println!(
            "{name:>10}: {CONNECTIONS} connections, window {window:>3}: {rate:>8.0} connections/s; \
             dispatch latency over {} events: median {:?}, p99 {:?}",
            latencies.len(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
        );
    }
}
