//! End to end on the behavioural model: two NICs with their firmware, host drivers on
//! both, the link between them. Every id's events go through the contract's rules
//! checker.

use std::net::SocketAddr;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iwnic_firmware::Config;
use iwnic_host_driver::{
    CmEvent, CmId, ConnParam, Device, DeviceConfig, Errno, EventKind, Transport,
};
use iwnic_proto::errno::{ECONNREFUSED, ECONNRESET, ETIMEDOUT};
use iwnic_testbench::link::LinkConfig;
use iwnic_testbench::sim::{Side, Sim, SimConfig, SimReport, A_IP, B_IP};

const PORT: u16 = 4791;
const WAIT: Duration = Duration::from_secs(20);

fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

/// One host: its driver and every event its handlers saw, in order.
struct Host {
    device: Device,
    events: Receiver<(CmId, CmEvent)>,
    sender: Sender<(CmId, CmEvent)>,
}

type OnRequest = Arc<dyn Fn(&CmId, &CmEvent) -> Result<(), Errno> + Send + Sync>;

impl Host {
    fn open(transport: impl Transport + 'static, config: DeviceConfig) -> Host {
        let (sender, events) = channel();
        Host {
            device: Device::open_with(transport, config),
            events,
            sender,
        }
    }

    /// A handler that reports every event, and on CONNECT_REQUEST also runs `on_request`.
    fn handler(&self, on_request: Option<OnRequest>) -> iwnic_host_driver::Handler {
        let sender = Mutex::new(self.sender.clone());
        Arc::new(move |id: &CmId, event: &CmEvent| {
            let _ = sender.lock().unwrap().send((id.clone(), event.clone()));
            match (&on_request, event.event) {
                (Some(f), EventKind::ConnectRequest) => f(id, event),
                _ => Ok(()),
            }
        })
    }

    fn id(&self, on_request: Option<OnRequest>) -> CmId {
        self.device
            .create_cm_id_shared(self.handler(on_request), Arc::new(()))
            .unwrap()
    }

    /// The next event, or a panic naming what was awaited.
    fn next(&self, what: &str) -> (CmId, CmEvent) {
        self.events
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no event: waited for {what}"))
    }

    fn expect(&self, kind: EventKind, status: i32) -> (CmId, CmEvent) {
        let (id, event) = self.next(&format!("{kind:?}({status})"));
        assert_eq!((event.event, event.status), (kind, status), "{event:?}");
        (id, event)
    }

    fn quiet(&self, for_: Duration) {
        if let Ok((_, event)) = self.events.recv_timeout(for_) {
            panic!("unexpected event {event:?}");
        }
    }
}

struct Pair {
    sim: Sim,
    a: Host,
    b: Host,
}

fn quick_firmware() -> Config {
    use smoltcp::time::Duration as D;
    Config {
        rto_initial: D::from_millis(20),
        syn_retries: 3,
        data_retries: 4,
        mpa_request_timeout: D::from_millis(500),
        mpa_reply_timeout: D::from_millis(500),
        time_wait: D::from_millis(100),
        fin_wait_2_timeout: D::from_millis(500),
        ..Config::default()
    }
}

fn pair_with(mut config: SimConfig, a_config: DeviceConfig) -> Pair {
    config.firmware = Config { ..config.firmware };
    let mut sim = Sim::start(config).unwrap();
    let a = Host::open(sim.transport(Side::A), a_config);
    let b = Host::open(sim.transport(Side::B), DeviceConfig::default());
    Pair { sim, a, b }
}

fn pair() -> Pair {
    pair_with(
        SimConfig {
            firmware: quick_firmware(),
            ..SimConfig::default()
        },
        DeviceConfig::default(),
    )
}

fn param(private_data: &[u8]) -> ConnParam {
    ConnParam {
        private_data: private_data.to_vec(),
        ord: 4,
        ird: 4,
        qpn: 1,
    }
}

impl Pair {
    /// B listens and accepts every request from inside its handler with `reply`.
    fn listen_accepting(&self, reply: &'static [u8]) -> CmId {
        self.b.device.register_qp(2);
        let on_request: OnRequest = Arc::new(move |child, _| {
            child.accept(&ConnParam {
                qpn: 2,
                ..param(reply)
            })
        });
        let listener = self.b.id(Some(on_request));
        listener.set_local_addr(addr(B_IP, PORT)).unwrap();
        listener.listen(8).unwrap();
        listener
    }

    fn connect(&self, private_data: &[u8]) -> CmId {
        self.a.device.register_qp(1);
        let id = self.a.id(None);
        id.set_local_addr(addr(A_IP, 0)).unwrap();
        id.set_remote_addr(addr(B_IP, PORT)).unwrap();
        id.connect(&param(private_data)).unwrap();
        id
    }

    /// A connects to B, which accepts from its handler; both see the connection up.
    fn establish(&self, private_data: &[u8], reply: &'static [u8]) -> (CmId, CmId) {
        self.listen_accepting(reply);
        let a_id = self.connect(private_data);
        let (_, request) = self.b.expect(EventKind::ConnectRequest, 0);
        assert_eq!(request.private_data, private_data);
        let (b_id, _) = self.b.expect(EventKind::Established, 0);
        let (id, event) = self.a.expect(EventKind::ConnectReply, 0);
        assert_eq!(id, a_id);
        assert_eq!(event.private_data, reply);
        (a_id, b_id)
    }

    fn stop(self) -> SimReport {
        let Pair { sim, a, b } = self;
        a.device.close();
        b.device.close();
        sim.stop()
    }
}

#[test]
fn connect_accept_from_the_handler_exchange_data_and_close() {
    let p = pair();
    let (a_id, b_id) = p.establish(b"hello B", b"hello A");
    // ULPDUs both ways, tagged with each side's connection index.
    let (a_index, b_index) = (
        a_id.connection_index().unwrap(),
        b_id.connection_index().unwrap(),
    );
    let a_link = p.a.device.transport();
    let b_link = p.b.device.transport();
    for n in 0..20u8 {
        let ulpdu: Vec<u8> = (0..(n as usize * 50)).map(|i| i as u8 ^ n).collect();
        a_link.send_ulpdu(a_index, &ulpdu).unwrap();
        assert_eq!(
            b_link.receive_ulpdu(WAIT).unwrap(),
            (b_index, ulpdu.clone())
        );
        b_link.send_ulpdu(b_index, &ulpdu).unwrap();
        assert_eq!(a_link.receive_ulpdu(WAIT).unwrap(), (a_index, ulpdu));
    }
    a_id.disconnect(false).unwrap();
    p.a.expect(EventKind::Close, 0);
    p.b.expect(EventKind::Close, 0);
    let report = p.stop();
    assert_eq!(report.a.datapath.fpdus_in, 20);
    assert_eq!(report.b.datapath.fpdus_in, 20);
    assert_eq!(
        (report.a.datapath.crc_errors, report.b.datapath.crc_errors),
        (0, 0)
    );
}

#[test]
fn abrupt_disconnect_resets_both() {
    let p = pair();
    let (_, b_id) = p.establish(b"", b"");
    b_id.disconnect(true).unwrap();
    p.b.expect(EventKind::Close, -ECONNRESET);
    p.a.expect(EventKind::Close, -ECONNRESET);
    p.stop();
}

#[test]
fn reject_reaches_the_initiator_with_its_private_data() {
    let p = pair();
    let on_request: OnRequest = Arc::new(|child, _| child.reject(b"not today"));
    let listener = p.b.id(Some(on_request));
    listener.set_local_addr(addr(B_IP, PORT)).unwrap();
    listener.listen(8).unwrap();
    p.connect(b"please");
    p.b.expect(EventKind::ConnectRequest, 0);
    let (_, reply) = p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    assert_eq!(reply.private_data, b"not today");
    p.a.quiet(Duration::from_millis(300));
    p.b.quiet(Duration::ZERO);
    let report = p.stop();
    assert_eq!(
        (report.a.connections, report.b.connections),
        (0, 0),
        "TIME_WAIT is over"
    );
}

#[test]
fn nobody_listening_is_econnrefused() {
    let p = pair();
    p.connect(b"");
    p.a.expect(EventKind::ConnectReply, -ECONNREFUSED);
    p.stop();
}

#[test]
fn an_address_that_never_answers_is_etimedout() {
    let p = pair();
    let id = p.a.id(None);
    p.a.device.register_qp(1);
    id.set_local_addr(addr(A_IP, 0)).unwrap();
    id.set_remote_addr(addr([10, 0, 0, 99], PORT)).unwrap();
    id.connect(&param(b"")).unwrap();
    p.a.expect(EventKind::ConnectReply, -ETIMEDOUT);
    p.stop();
}

#[test]
fn a_responder_that_never_answers_is_an_mpa_reply_timeout() {
    let p = pair();
    // B's application takes the request and sits on it.
    let on_request: OnRequest = Arc::new(|_, _| Ok(()));
    let listener = p.b.id(Some(on_request));
    listener.set_local_addr(addr(B_IP, PORT)).unwrap();
    listener.listen(8).unwrap();
    p.connect(b"");
    let (child, _) = p.b.expect(EventKind::ConnectRequest, 0);
    p.a.expect(EventKind::ConnectReply, -ETIMEDOUT);
    // A's reset ended the request under B (no event in CONN_RECV, as in the kernel):
    // B's late accept finds the connection gone.
    p.b.device.register_qp(2);
    assert_eq!(
        child.accept(&ConnParam {
            qpn: 2,
            ..param(b"")
        }),
        Err(Errno::ECONNRESET)
    );
    p.b.quiet(Duration::from_millis(100));
    p.stop();
}

#[test]
fn private_data_of_every_size() {
    for len in [0usize, 1, 255, 256, 508] {
        let p = pair();
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let reply: &'static [u8] = Box::leak(data.clone().into_boxed_slice());
        p.establish(&data, reply);
        p.stop();
    }
}

#[test]
fn mpa_v1_initiator() {
    let p = pair_with(
        SimConfig {
            firmware: quick_firmware(),
            ..SimConfig::default()
        },
        DeviceConfig {
            mpa_v1: true,
            ..DeviceConfig::default()
        },
    );
    let data = vec![7u8; 512];
    let reply: &'static [u8] = b"v1";
    p.establish(&data, reply);
    p.stop();
}

#[test]
fn setup_survives_a_lossy_reordering_link() {
    for seed in 1..4 {
        let link = LinkConfig {
            drop: 0.2,
            duplicate: 0.1,
            reorder: 0.2,
            seed,
            ..LinkConfig::default()
        };
        let p = pair_with(
            SimConfig {
                link,
                firmware: quick_firmware(),
                ..SimConfig::default()
            },
            DeviceConfig::default(),
        );
        let (a_id, _) = p.establish(b"lossy", b"ok");
        a_id.disconnect(false).unwrap();
        p.a.expect(EventKind::Close, 0);
        p.b.expect(EventKind::Close, 0);
        let report = p.stop();
        assert!(report.link.dropped > 0, "seed {seed}: {:?}", report.link);
    }
}
