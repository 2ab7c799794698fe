//! Every block of the datapath as Verilog, by name: what `iwnic verilog` writes and
//! `iwnic synth` synthesises. The top of each module is named `top`.

use rust_hdl::prelude::*;

use crate::crc32c::Crc32c;
use crate::event_counter::EventCounter;
use crate::flow_table::EcpFlowTable;
use crate::mpa_rx::MpaRxDelineator;
use crate::mpa_tx::MpaTxFramer;
use crate::nic_top::EcpNicTop;
use crate::packet_fifo::EcpPacketFifo;
use crate::skid_buffer::SkidBuffer;
use crate::tcp_rx::TcpRxParser;
use crate::tcp_tx::SegmentBuilder;
use crate::tx_checksum::TxChecksum;

/// A block ready for export.
pub struct ExportedBlock {
    pub name: &'static str,
    /// What it does, in a line.
    pub about: &'static str,
    verilog: fn() -> String,
}

impl ExportedBlock {
    /// The block's Verilog (generated on each call: a block of the whole datapath takes
    /// a moment).
    pub fn verilog(&self) -> String {
        (self.verilog)()
    }
}

fn verilog_of<B: Block + Default>() -> String {
    let mut uut = B::default();
    uut.connect_all();
    generate_verilog(&uut)
}

/// The NIC top first, then its blocks in datapath order (receive, then transmit).
pub fn blocks() -> [ExportedBlock; 11] {
    [
        ExportedBlock {
            name: "nic_top",
            about: "the whole datapath of one NIC (256 flows): what the board build instantiates",
            verilog: verilog_of::<EcpNicTop>,
        },
        ExportedBlock {
            name: "tcp_rx",
            about: "Ethernet II / IPv4 / TCP receive parser with both checksums",
            verilog: verilog_of::<TcpRxParser>,
        },
        ExportedBlock {
            name: "flow_table",
            about: "flow lookup: 4-tuple to connection index (256 entries, 64 buckets x 4 ways)",
            verilog: verilog_of::<EcpFlowTable>,
        },
        ExportedBlock {
            name: "mpa_rx",
            about: "MPA receive delineation: TCP payload to ULPDUs (CRC32c, length checks)",
            verilog: verilog_of::<MpaRxDelineator>,
        },
        ExportedBlock {
            name: "packet_fifo",
            about: "packet queue committing on a good bit (host RX and firmware RX, 512 beats)",
            verilog: verilog_of::<EcpPacketFifo>,
        },
        ExportedBlock {
            name: "crc32c",
            about: "CRC32c over 64-bit beats with a partial last beat",
            verilog: verilog_of::<Crc32c>,
        },
        ExportedBlock {
            name: "mpa_tx",
            about: "MPA transmit framer: ULPDU stream to FPDUs (length, PAD, CRC32c)",
            verilog: verilog_of::<MpaTxFramer>,
        },
        ExportedBlock {
            name: "tcp_tx",
            about: "TCP transmit: Ethernet/IPv4/TCP headers from a descriptor, payload realigned",
            verilog: verilog_of::<SegmentBuilder>,
        },
        ExportedBlock {
            name: "tx_checksum",
            about: "transmit checksum insertion, store and forward (IPv4 header and TCP)",
            verilog: verilog_of::<TxChecksum>,
        },
        ExportedBlock {
            name: "skid_buffer",
            about: "stream register slice with registered ready: cuts a path between blocks",
            verilog: verilog_of::<SkidBuffer>,
        },
        ExportedBlock {
            name: "event_counter",
            about: "32-bit event counter behind a registered pulse: keeps decisions off adders",
            verilog: verilog_of::<EventCounter>,
        },
    ]
}
