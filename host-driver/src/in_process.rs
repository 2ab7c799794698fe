//! The in-process transport: the driver and a simulated NIC in one process, joined by
//! queues.
//!
//! [`in_process`] returns the two ends. The driver gets the [`InProcessTransport`]; a
//! simulator (the testbench's NIC, a scripted fake, a C harness through the C ABI) drives
//! the [`InProcessNic`], whose methods have the shapes of the firmware's `Hal` host port:
//! `receive_command` into a buffer, `host_space`, `push_record`.
//!
//! The host record queue has a fixed capacity, as the NIC's host event queue does: the
//! firmware takes no input that could raise a record unless [`InProcessNic::host_space`]
//! says there is room. A record pushed into a full queue is dropped and counted, as
//! hardware would drop it; the driver then sees a gap in the event sequence numbers.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::transport::{Transport, TransportError};

/// Default capacity of the host record queue, in records.
pub const DEFAULT_HOST_QUEUE_CAPACITY: usize = 256;

#[derive(Default)]
struct Queues {
    commands: VecDeque<Vec<u8>>,
    records: VecDeque<Vec<u8>>,
    ulpdus_to_nic: VecDeque<(u16, Vec<u8>)>,
    ulpdus_to_host: VecDeque<(u16, Vec<u8>)>,
    records_dropped: u64,
    closed: bool,
}

struct Link {
    queues: Mutex<Queues>,
    /// Signalled whenever a queue gains an entry or the link closes.
    changed: Condvar,
    host_queue_capacity: usize,
}

impl Link {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        // The queues stay consistent even if a holder panicked: every update is one push/pop.
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push<T>(
        &self,
        queue: impl FnOnce(&mut Queues) -> &mut VecDeque<T>,
        item: T,
    ) -> Result<(), TransportError> {
        let mut q = self.lock();
        if q.closed {
            return Err(TransportError::Closed);
        }
        queue(&mut q).push_back(item);
        self.changed.notify_all();
        Ok(())
    }

    /// Pop from a queue, waiting up to `timeout` (`None`: do not wait).
    fn pop<T>(
        &self,
        queue: impl Fn(&mut Queues) -> &mut VecDeque<T>,
        timeout: Option<Duration>,
    ) -> Result<T, TransportError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut q = self.lock();
        loop {
            if q.closed {
                return Err(TransportError::Closed);
            }
            if let Some(item) = queue(&mut q).pop_front() {
                return Ok(item);
            }
            let now = Instant::now();
            match deadline {
                Some(deadline) if now < deadline => {
                    q = self
                        .changed
                        .wait_timeout(q, deadline - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                _ => return Err(TransportError::Timeout),
            }
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

/// The two ends of a new in-process link whose host record queue holds
/// `host_queue_capacity` records.
pub fn in_process(host_queue_capacity: usize) -> (InProcessTransport, InProcessNic) {
    let link = Arc::new(Link {
        queues: Mutex::new(Queues::default()),
        changed: Condvar::new(),
        host_queue_capacity,
    });
    (
        InProcessTransport {
            link: Arc::clone(&link),
        },
        InProcessNic { link },
    )
}

/// The driver's end of an in-process link.
pub struct InProcessTransport {
    link: Arc<Link>,
}

impl Transport for InProcessTransport {
    fn send_command(&self, record: &[u8]) -> Result<(), TransportError> {
        self.link.push(|q| &mut q.commands, record.to_vec())
    }

    fn receive_record(&self, timeout: Duration) -> Result<Vec<u8>, TransportError> {
        self.link.pop(|q| &mut q.records, Some(timeout))
    }

    fn send_ulpdu(&self, conn_index: u16, ulpdu: &[u8]) -> Result<(), TransportError> {
        self.link
            .push(|q| &mut q.ulpdus_to_nic, (conn_index, ulpdu.to_vec()))
    }

    fn receive_ulpdu(&self, timeout: Duration) -> Result<(u16, Vec<u8>), TransportError> {
        self.link.pop(|q| &mut q.ulpdus_to_host, Some(timeout))
    }

    fn close(&self) {
        self.link.close();
    }
}

/// The NIC's end of an in-process link. Clones share the link.
#[derive(Clone)]
pub struct InProcessNic {
    link: Arc<Link>,
}

impl InProcessNic {
    /// The next command record from the host, if one is queued.
    pub fn pop_command(&self) -> Option<Vec<u8>> {
        self.link.pop(|q| &mut q.commands, None).ok()
    }

    /// The next command record, waiting up to `timeout` (for a NIC on its own thread).
    pub fn wait_command(&self, timeout: Duration) -> Result<Vec<u8>, TransportError> {
        self.link.pop(|q| &mut q.commands, Some(timeout))
    }

    /// The firmware `Hal` shape: copy the next command into `buf`, return its length.
    /// A command longer than `buf` is dropped whole and reported by its length, so the
    /// caller sees the truncation (records never exceed `host::MAX_RECORD_LEN`).
    pub fn receive_command(&self, buf: &mut [u8]) -> Option<usize> {
        let command = self.pop_command()?;
        if let Some(dest) = buf.get_mut(..command.len()) {
            dest.copy_from_slice(&command);
        }
        Some(command.len())
    }

    /// Records the host queue can take now.
    pub fn host_space(&self) -> usize {
        let q = self.link.lock();
        self.link
            .host_queue_capacity
            .saturating_sub(q.records.len())
    }

    /// Queue a completion or event record for the host. Into a full queue (the NIC did not
    /// check [`Self::host_space`]) the record is dropped and counted; on a closed link it
    /// goes nowhere.
    pub fn push_record(&self, record: &[u8]) {
        let mut q = self.link.lock();
        if q.closed {
            return;
        }
        if q.records.len() >= self.link.host_queue_capacity {
            q.records_dropped += 1;
            tracing::warn!(len = record.len(), "host record queue full: record dropped");
            return;
        }
        q.records.push_back(record.to_vec());
        self.link.changed.notify_all();
    }

    /// Records dropped because the host queue was full.
    pub fn records_dropped(&self) -> u64 {
        self.link.lock().records_dropped
    }

    /// Deliver a received ULPDU to the host.
    pub fn push_ulpdu(&self, conn_index: u16, ulpdu: &[u8]) -> Result<(), TransportError> {
        self.link
            .push(|q| &mut q.ulpdus_to_host, (conn_index, ulpdu.to_vec()))
    }

    /// The next ULPDU the host sent, with its connection index.
    pub fn pop_ulpdu(&self) -> Option<(u16, Vec<u8>)> {
        self.link.pop(|q| &mut q.ulpdus_to_nic, None).ok()
    }

    /// Whether either end closed the link.
    pub fn is_closed(&self) -> bool {
        self.link.lock().closed
    }

    /// Close the link from the NIC's side (the NIC went away).
    pub fn close(&self) {
        self.link.close();
    }
}
