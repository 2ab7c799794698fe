//! The link between the driver and a NIC: host-interface records both ways, plus the
//! ULPDU streams of the data path.
//!
//! Commands go down as encoded [`iwnic_proto::host::CommandRecord`]s; completions and
//! events come up as encoded records, in the order the NIC pushed them. ULPDUs travel
//! tagged with the connection index (the low 16 bits of a connection handle, the index
//! the datapath's flow context carries).
//!
//! A transport is shared by the API callers (which send) and the driver's receive thread
//! (which blocks in [`Transport::receive_record`]), so every method takes `&self`.

use std::fmt;
use std::time::Duration;

/// Why a transport operation did not go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportError {
    /// Nothing arrived within the timeout.
    Timeout,
    /// The transport was closed, by either end.
    Closed,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportError::Timeout => "timed out",
            TransportError::Closed => "transport closed",
        })
    }
}

impl std::error::Error for TransportError {}

/// Driver ⇄ NIC link.
pub trait Transport: Send + Sync {
    /// Queue one encoded command record for the NIC.
    fn send_command(&self, record: &[u8]) -> Result<(), TransportError>;

    /// The next record from the NIC (a completion or an event), waiting up to `timeout`.
    fn receive_record(&self, timeout: Duration) -> Result<Vec<u8>, TransportError>;

    /// Queue one ULPDU for the connection with datapath index `conn_index`.
    fn send_ulpdu(&self, conn_index: u16, ulpdu: &[u8]) -> Result<(), TransportError>;

    /// The next received ULPDU and its connection index, waiting up to `timeout`.
    fn receive_ulpdu(&self, timeout: Duration) -> Result<(u16, Vec<u8>), TransportError>;

    /// Close the link: every blocked receive returns [`TransportError::Closed`] at once,
    /// and so does every later call, on either end.
    fn close(&self);
}
