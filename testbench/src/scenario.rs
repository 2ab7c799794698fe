//! The main scenario (`iwnic sim`): B listens, A opens connections that B's application
//! accepts from its handler, both sides send Send messages on every connection, A
//! disconnects every connection. Every delivered byte is checked against what was sent.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iwnic_host_driver::{
    CmEvent, CmId, ConnParam, Device, DeviceConfig, EventKind, Handler, Transport,
};
use iwnic_proto::ddp::{Body, MessageRepr, Opcode, UNTAGGED_HEADER_LEN};
use iwnic_proto::fpdu::max_ulpdu_len;

use crate::link::LinkConfig;
use crate::sim::{EngineKind, Side, Sim, SimConfig, SimReport, A_IP, B_IP};

pub const PORT: u16 = 4791;
/// Connection setups the scenario keeps in flight at once.
pub const SETUP_WINDOW: usize = 64;

/// Largest Send payload whose FPDU fits one 1460-byte segment.
pub const MAX_SEND_PAYLOAD: usize = match max_ulpdu_len(1460) {
    Some(n) => n - UNTAGGED_HEADER_LEN,
    None => 0,
};

/// What to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub connections: usize,
    /// Send messages each side sends on each connection.
    pub fpdus: usize,
    /// Payload bytes of each Send (at most [`MAX_SEND_PAYLOAD`]).
    pub size: usize,
    pub mpa_v1: bool,
    pub private_data: Vec<u8>,
    pub link: LinkConfig,
    pub pcap: Option<PathBuf>,
    /// The longest wait for any next event or message before the run is declared stuck.
    /// On a link that loses frames, at least the firmware's retrying and 5 s while
    /// connections set up and close: a connect may retry its SYN for `syn_timeout`, and
    /// its RTR (whose acknowledgement it waits for before CONNECT_REPLY) or a FIN for
    /// `data_timeout` (longer after a backed-off timeout: see its doc); while Sends
    /// move, `syn_timeout` and 5 s (the datapath does not send a lost FPDU again, so
    /// waiting longer finds none).
    pub patience: Duration,
    /// Datapath cycles between two firmware polls on each NIC.
    pub firmware_poll_cycles: u64,
    pub engine: EngineKind,
}

/// Events an application saw, by "KIND(status)".
pub type EventCounts = BTreeMap<String, usize>;

/// What happened.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub established: usize,
    pub closed: usize,
    pub messages_delivered: usize,
    pub bytes_delivered: u64,
    pub lost: usize,
    pub duplicated: usize,
    pub altered: usize,
    /// Terminate messages the hosts received (a peer reporting an error, e.g. a bad CRC).
    pub terminates: usize,
    pub a_events: EventCounts,
    pub b_events: EventCounts,
    pub setup_time: Duration,
    pub wall_time: Duration,
    pub sim: SimReport,
    /// What went wrong, in words; empty when every connection was set up, every byte
    /// delivered once and intact, and every connection closed cleanly on both sides.
    pub failures: Vec<String>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Progress of a long run, for a progress bar.
pub trait Progress {
    fn phase(&self, name: &str, total: u64);
    fn advance(&self, by: u64);
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {
    fn phase(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
}

type Report = (Side, CmId, CmEvent);

/// One application: its driver, a handler shared by all its ids, the events it saw.
struct Application {
    device: Device,
    handler: Handler,
    seen: Arc<Mutex<EventCounts>>,
}

impl Application {
    /// `accept`: accept every CONNECT_REQUEST from inside the handler (side B).
    fn open(
        sim: &mut Sim,
        side: Side,
        config: DeviceConfig,
        reports: &Sender<Report>,
    ) -> Application {
        let device = Device::open_with(sim.transport(side), config);
        device.register_qp(1);
        let seen = Arc::new(Mutex::new(EventCounts::new()));
        let counts = Arc::clone(&seen);
        let reports = Mutex::new(reports.clone());
        let handler: Handler = Arc::new(move |id: &CmId, event: &CmEvent| {
            *counts
                .lock()
                .unwrap()
                .entry(format!("{:?}({})", event.event, event.status))
                .or_default() += 1;
            // The scenario may have stopped listening; the report then has no reader.
            let _ = reports
                .lock()
                .unwrap()
                .send((side, id.clone(), event.clone()));
            if event.event == EventKind::ConnectRequest {
                let param = ConnParam {
                    private_data: event.private_data.clone(),
                    ird: 8,
                    ord: 8,
                    qpn: 1,
                };
                return id.accept(&param);
            }
            Ok(())
        });
        Application {
            device,
            handler,
            seen,
        }
    }

    fn id(&self) -> CmId {
        self.device
            .create_cm_id_shared(Arc::clone(&self.handler), Arc::new(()))
            .expect("an id")
    }
}

/// The payload of message `msn` from A (`from_a`) or B on the connection whose A-side
/// port is `port`: distinct for every message, so a byte delivered anywhere else is seen.
fn payload(size: usize, port: u16, msn: u32, from_a: bool) -> Vec<u8> {
    let seed =
        u32::from(port).wrapping_mul(2_654_435_761) ^ msn.wrapping_mul(40_503) ^ u32::from(from_a);
    (0..size)
        .map(|i| (seed.wrapping_add(i as u32).wrapping_mul(2_246_822_519) >> 24) as u8)
        .collect()
}

fn send_message(payload: &[u8], msn: u32) -> Vec<u8> {
    let message = MessageRepr::send(payload, msn);
    let mut ulpdu = vec![0u8; message.buffer_len()];
    message.emit(&mut ulpdu).expect("a Send fits its buffer");
    ulpdu
}

/// Checks received Sends: per receiving connection, MSN 1, 2, … with the right payload.
struct Receipts {
    size: usize,
    /// Receiving side's connection index → A-side port of that connection.
    ports: [HashMap<u16, u16>; 2],
    next_msn: [HashMap<u16, u32>; 2],
    received: usize,
    bytes: u64,
    duplicated: usize,
    altered: usize,
    terminates: usize,
}

impl Receipts {
    /// `at`: 0 for A receiving, 1 for B.
    fn take(&mut self, at: usize, index: u16, ulpdu: &[u8]) {
        let message = MessageRepr::parse(ulpdu);
        // A Terminate is the peer's RDMAP layer reporting an error to ours: the host's to
        // act on, not data.
        if let Ok(MessageRepr {
            body: Body::Terminate(_),
            ..
        }) = message
        {
            self.terminates += 1;
            return;
        }
        self.received += 1;
        let (
            Ok(MessageRepr {
                header,
                body: Body::Payload(data),
            }),
            Some(&port),
        ) = (message, self.ports[at].get(&index))
        else {
            self.altered += 1;
            return;
        };
        let msn = match header.placement {
            iwnic_proto::ddp::Placement::Untagged { msn, .. } if header.opcode == Opcode::Send => {
                msn
            }
            _ => {
                self.altered += 1;
                return;
            }
        };
        let next = self.next_msn[at].entry(index).or_insert(1);
        if msn < *next {
            self.duplicated += 1;
            return;
        }
        // A gap before `msn` is messages lost, counted from the totals.
        let from_a = at == 1;
        if data != payload(self.size, port, msn, from_a).as_slice() {
            self.altered += 1;
        }
        *next = msn + 1;
        self.bytes += data.len() as u64;
    }
}

/// Run the scenario.
pub fn run(scenario: &Scenario, progress: &dyn Progress) -> std::io::Result<Outcome> {
    run_with_wave(scenario, None, progress)
}

/// [`run`], writing the datapaths' waveforms to `wave` (see [`SimConfig::wave`]; the
/// Verilator engine only).
pub fn run_with_wave(
    scenario: &Scenario,
    wave: Option<&Path>,
    progress: &dyn Progress,
) -> std::io::Result<Outcome> {
    if scenario.size > MAX_SEND_PAYLOAD {
        return Err(std::io::Error::other(format!(
            "a Send of {} bytes does not fit one segment (at most {MAX_SEND_PAYLOAD})",
            scenario.size
        )));
    }
    let started = Instant::now();
    let sim_config = SimConfig {
        link: scenario.link,
        pcap: scenario.pcap.clone(),
        host_queue: 4096,
        firmware_poll_cycles: scenario.firmware_poll_cycles,
        engine: scenario.engine,
        wave: wave.map(Path::to_path_buf),
        ..SimConfig::default()
    };
    let loses_frames = scenario.link.drop > 0.0 || scenario.link.corrupt > 0.0;
    // On a lossy link, the firmware's longest retrying (`span`) and 5 s.
    let outlasting = |span: smoltcp::time::Duration| match loses_frames {
        true => Duration::from_millis(span.total_millis() + 5_000).max(scenario.patience),
        false => scenario.patience,
    };
    let firmware = &sim_config.firmware;
    let patience = outlasting(firmware.syn_timeout().max(firmware.data_timeout()));
    let data_patience = outlasting(firmware.syn_timeout());
    let mut sim = Sim::start(sim_config)?;
    let (sender, reports) = channel::<Report>();
    let config = DeviceConfig {
        mpa_v1: scenario.mpa_v1,
        ..DeviceConfig::default()
    };
    let a = Application::open(&mut sim, Side::A, config, &sender);
    let b = Application::open(&mut sim, Side::B, config, &sender);
    drop(sender);
    let mut failures = Vec::new();
    let listener = b.id();
    listener
        .set_local_addr(SocketAddr::from((B_IP, PORT)))
        .map_err(std::io::Error::other)?;
    listener.listen(0).map_err(std::io::Error::other)?;

    // Setup: connects in flight at most `SETUP_WINDOW` at a time (each holds one of the
    // NIC's MPA negotiation buffers until it is up); B's handler accepts each request.
    progress.phase("connecting", scenario.connections as u64);
    let connect = |a: &Application| -> Result<CmId, String> {
        let id = a.id();
        let param = ConnParam {
            private_data: scenario.private_data.clone(),
            ird: 8,
            ord: 8,
            qpn: 1,
        };
        id.set_local_addr(SocketAddr::from((A_IP, 0)))
            .and_then(|()| id.set_remote_addr(SocketAddr::from((B_IP, PORT))))
            .and_then(|()| id.connect(&param))
            .map(|()| id)
            .map_err(|e| format!("connect: {e}"))
    };
    let (mut issued, mut replies) = (0, 0);
    // CLOSEs of connections that died after they were up (an accepted one that lost its
    // RTR raises ESTABLISHED, then CLOSE), counted with those of the close below.
    let mut closed = 0;
    let mut a_up = Vec::new();
    let mut b_up = Vec::new();
    while replies < scenario.connections || b_up.len() < a_up.len() {
        while issued < scenario.connections && issued - replies < SETUP_WINDOW {
            issued += 1;
            if let Err(e) = connect(&a) {
                failures.push(e);
                replies += 1;
            }
        }
        if replies == scenario.connections && b_up.len() >= a_up.len() {
            break;
        }
        let Ok((side, id, event)) = reports.recv_timeout(patience) else {
            failures.push(format!(
                "setup stuck: {replies} CONNECT_REPLYs, {} ESTABLISHED, of {}",
                b_up.len(),
                scenario.connections
            ));
            break;
        };
        match (side, event.event, event.status) {
            (Side::A, EventKind::ConnectReply, 0) => {
                replies += 1;
                a_up.push(id);
                progress.advance(1);
            }
            (Side::A, EventKind::ConnectReply, status) => {
                replies += 1;
                failures.push(format!("CONNECT_REPLY {status}"));
            }
            (Side::B, EventKind::Established, _) => b_up.push(id),
            (_, EventKind::Close, status) => {
                closed += 1;
                failures.push(format!("CLOSE {status} during setup"));
            }
            _ => {}
        }
    }
    let setup_time = started.elapsed();

    // Data: every connection, both ways.
    let port_of = |addr: Option<SocketAddr>| addr.map_or(0, |a| a.port());
    let mut receipts = Receipts {
        size: scenario.size,
        ports: [
            a_up.iter()
                .filter_map(|id| Some((id.connection_index()?, port_of(id.local_addr()))))
                .collect(),
            b_up.iter()
                .filter_map(|id| Some((id.connection_index()?, port_of(id.remote_addr()))))
                .collect(),
        ],
        next_msn: [HashMap::new(), HashMap::new()],
        received: 0,
        bytes: 0,
        duplicated: 0,
        altered: 0,
        terminates: 0,
    };
    let expected = scenario.fpdus * (receipts.ports[0].len() + receipts.ports[1].len());
    progress.phase("exchanging", expected as u64);
    let links: [&dyn Transport; 2] = [a.device.transport(), b.device.transport()];
    for msn in 1..=scenario.fpdus as u32 {
        for (at, from_a) in [(0usize, true), (1, false)] {
            for (&index, &port) in &receipts.ports[at] {
                let sent = links[at].send_ulpdu(
                    index,
                    &send_message(&payload(scenario.size, port, msn, from_a), msn),
                );
                if sent.is_err() {
                    failures.push(format!("send on connection {index}: link closed"));
                }
            }
        }
    }
    let mut quiet_since = Instant::now();
    while receipts.received < expected && quiet_since.elapsed() < data_patience {
        let mut any = false;
        for (at, link) in links.iter().enumerate() {
            while let Ok((index, ulpdu)) = link.receive_ulpdu(Duration::from_millis(1)) {
                receipts.take(at, index, &ulpdu);
                progress.advance(1);
                any = true;
            }
        }
        if any {
            quiet_since = Instant::now();
        }
    }
    let lost = expected.saturating_sub(receipts.received - receipts.duplicated);
    if lost + receipts.duplicated + receipts.altered > 0 {
        failures.push(format!(
            "{lost} messages lost, {} duplicated, {} altered",
            receipts.duplicated, receipts.altered
        ));
    }

    // Close: A disconnects every connection; both sides must see CLOSE 0.
    let to_close = a_up.len() + b_up.len();
    progress.phase("closing", to_close as u64);
    for id in &a_up {
        if let Err(e) = id.disconnect(false) {
            failures.push(format!("disconnect: {e}"));
        }
    }
    while closed < to_close {
        let Ok((_, _, event)) = reports.recv_timeout(patience) else {
            failures.push(format!("close stuck: {closed} of {to_close} CLOSEs"));
            break;
        };
        if event.event == EventKind::Close {
            closed += 1;
            progress.advance(1);
            if event.status != 0 {
                failures.push(format!("CLOSE {}", event.status));
            }
        }
    }
    let established = a_up.len().min(b_up.len());
    if established < scenario.connections {
        failures.push(format!(
            "{established} of {} connections established",
            scenario.connections
        ));
    }
    let (a_events, b_events) = (
        a.seen.lock().unwrap().clone(),
        b.seen.lock().unwrap().clone(),
    );
    listener.destroy();
    a.device.close();
    b.device.close();
    let sim = sim.stop();
    Ok(Outcome {
        established,
        closed,
        messages_delivered: receipts.received - receipts.duplicated,
        bytes_delivered: receipts.bytes,
        lost,
        duplicated: receipts.duplicated,
        altered: receipts.altered,
        terminates: receipts.terminates,
        a_events,
        b_events,
        setup_time,
        wall_time: started.elapsed(),
        sim,
        failures,
    })
}
