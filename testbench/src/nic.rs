//! One simulated NIC: a datapath engine, the real firmware polled in the loop, and the
//! NIC's end of the host link that a host driver opens.

use iwnic_firmware::{
    Config, Counters, Firmware, FlowContext, FlowEvent, FlowTableFull, FlowWrite, Hal,
    Nic as FirmwareNic, TxSlot,
};
use iwnic_host_driver::InProcessNic;
use iwnic_proto::host::RecordBuffer;
use iwnic_proto::net::RxDescriptor;
use smoltcp::time::{Duration, Instant};

use crate::engine::{firmware_tx_packet, Engine};

/// Connections each simulated NIC holds (a power of two) and MPA negotiations at once.
pub const CONNECTIONS: usize = 2048;
pub const NEGOTIATIONS: usize = 256;

pub type SimFirmware = Firmware<CONNECTIONS, NEGOTIATIONS>;

/// The firmware's view of the engine and the host link: the input queues' heads, in
/// place, beside what the firmware acts on.
struct NicHal<'a, E: Engine> {
    inputs: &'a mut InputHeads,
    port: NicPort<'a, E>,
}

/// What the firmware acts on: the engine's firmware TX queue and flow contexts, the host
/// link's record queue.
struct NicPort<'a, E: Engine> {
    engine: &'a mut E,
    host: &'a InProcessNic,
    counters: &'a mut Counters,
    buffers: &'a mut OutBuffers,
}

/// The input queues' head entries while the firmware reads them (the engine and the host
/// link hand out copies; a board's queues are read in place).
#[derive(Default)]
struct InputHeads {
    /// The head of the firmware RX queue: the datapath's descriptor and the frame.
    frame: Option<(RxDescriptor, Vec<u8>)>,
    command: RecordBuffer,
    command_len: Option<usize>,
}

/// Where the firmware writes its next segment and record (the queues' free slots on a
/// board); the Hal hands them to the engine and the host link from there.
struct OutBuffers {
    segment: TxSlot,
    record: RecordBuffer,
}

impl<'a, E: Engine> Hal for NicHal<'a, E> {
    type Nic = NicPort<'a, E>;
    fn nic(&mut self) -> &mut NicPort<'a, E> {
        &mut self.port
    }
    fn next_frame(&mut self) -> (Option<(&RxDescriptor, &[u8])>, &mut NicPort<'a, E>) {
        if self.inputs.frame.is_none() {
            self.inputs.frame = self.port.engine.firmware_receive().map(|packet| {
                // Every packet starts with its descriptor. One too short for it (the
                // datapath's fault) goes on with an all-zero descriptor, which the
                // firmware ignores and counts (port 0), so it shows.
                match RxDescriptor::split_packet(&packet) {
                    Some((descriptor, frame)) => (descriptor, frame.to_vec()),
                    None => (RxDescriptor::ZERO, packet),
                }
            });
        }
        let head = self
            .inputs
            .frame
            .as_ref()
            .map(|(d, frame)| (d, frame.as_slice()));
        (head, &mut self.port)
    }
    fn pop_frame(&mut self) {
        self.inputs.frame = None;
    }
    fn next_command(&mut self) -> (Option<(&RecordBuffer, usize)>, &mut NicPort<'a, E>) {
        if self.inputs.command_len.is_none() {
            self.inputs.command_len = self.port.host.receive_command(&mut self.inputs.command.0);
        }
        let command = self
            .inputs
            .command_len
            .map(|len| (&self.inputs.command, len));
        (command, &mut self.port)
    }
    fn pop_command(&mut self) {
        self.inputs.command_len = None;
    }
}

impl<E: Engine> FirmwareNic for NicPort<'_, E> {
    fn transmit_slot(&mut self) -> &mut TxSlot {
        &mut self.buffers.segment
    }
    fn transmit_segment(&mut self) {
        let slot = &self.buffers.segment;
        self.engine
            .firmware_transmit(&firmware_tx_packet(&slot.descriptor, slot.payload()));
    }
    fn host_space(&self) -> usize {
        self.host.host_space()
    }
    fn record_buffer(&mut self) -> &mut RecordBuffer {
        &mut self.buffers.record
    }
    fn push_record(&mut self, len: usize) {
        self.host.push_record(&self.buffers.record.0[..len]);
    }
    fn write_flow(&mut self, flow: &FlowContext, write: FlowWrite) -> Result<(), FlowTableFull> {
        self.engine.write_flow(flow, write)
    }
    fn read_flow(&mut self, index: u16) -> Option<FlowContext> {
        self.engine.read_flow(index)
    }
    fn remove_flow(&mut self, index: u16) {
        self.engine.remove_flow(index);
    }
    fn receive_flow_event(&mut self) -> Option<FlowEvent> {
        self.engine.flow_event()
    }
    fn publish_counters(&mut self, counters: &Counters) {
        *self.counters = *counters;
    }
}

/// A NIC in the simulation.
pub struct Nic<E: Engine> {
    pub engine: E,
    firmware: Box<SimFirmware>,
    buffers: Box<OutBuffers>,
    inputs: Box<InputHeads>,
    host: InProcessNic,
    /// The firmware's counters as its register window shows them.
    pub firmware_counters: Counters,
    /// The firmware runs once per `poll_period`: the soft core's speed.
    poll_period: Duration,
    last_poll: Option<Instant>,
}

impl<E: Engine> Nic<E> {
    pub fn new(engine: E, config: Config, host: InProcessNic, poll_period: Duration) -> Nic<E> {
        Nic {
            engine,
            firmware: Box::new(SimFirmware::new(config)),
            buffers: Box::new(OutBuffers {
                segment: TxSlot::ZERO,
                record: RecordBuffer::ZERO,
            }),
            inputs: Box::default(),
            host,
            firmware_counters: Counters::ZERO,
            poll_period,
            last_poll: None,
        }
    }

    pub fn firmware(&self) -> &SimFirmware {
        &self.firmware
    }

    /// Host ULPDUs into the datapath, received ULPDUs out to the host, then a firmware
    /// poll at `now` if one is due. Returns whether anything moved.
    pub fn service(&mut self, now: Instant) -> bool {
        let mut moved = false;
        while let Some((index, ulpdu)) = self.host.pop_ulpdu() {
            self.engine.host_transmit(index, &ulpdu);
            moved = true;
        }
        while let Some((index, ulpdu)) = self.engine.host_receive() {
            // A host that closed its end takes nothing more; the data has nowhere to go.
            let _ = self.host.push_ulpdu(index, &ulpdu);
            moved = true;
        }
        if self
            .last_poll
            .is_some_and(|last| now - last < self.poll_period)
        {
            return moved;
        }
        self.last_poll = Some(now);
        let before = self.firmware.counters().frames_sent + self.firmware.counters().events_raised;
        let mut hal = NicHal {
            inputs: &mut self.inputs,
            port: NicPort {
                engine: &mut self.engine,
                host: &self.host,
                counters: &mut self.firmware_counters,
                buffers: &mut self.buffers,
            },
        };
        self.firmware.poll(&mut hal, now);
        moved
            | (self.firmware.counters().frames_sent + self.firmware.counters().events_raised
                != before)
    }

    /// The host side went away: close its link so blocked driver threads return.
    pub fn close_host_link(&self) {
        self.host.close();
    }
}
