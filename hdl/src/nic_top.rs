//! `nic_top`: the whole datapath of one NIC, the blocks joined as DESIGN.md draws them.
//!
//! ```text
//! net_rx ─▶ tcp_rx ─▶ frame buffer ─▶ steering ─┬─▶ fw_rx queue ─▶ firmware
//!                    (raw + payload)   (flow    ├─▶ mpa_rx ─▶ host_rx queue ─▶ host
//!                                      table,   └─▶ ACK ─┐
//!                                      context)          ▼
//! host_tx ─▶ context check ─▶ mpa_tx ─▶ segment builder ─▶ arbiter ─▶ checksums ─▶ net_tx
//! fw_tx ─▶ TX descriptor + payload ─▶ segment builder ────┘
//! ```
//!
//! The behavioural model (`testbench::model::ModelDatapath`) is the reference: the same
//! frame sequences give the same frames out, the same host ULPDUs and the same firmware
//! queue contents.
//!
//! # Ports
//!
//! Streams are 64-bit `data` + 8-bit `keep` + `last` + `valid`/`ready`, byte 0 in bits
//! 7:0, one frame (or ULPDU) per packet; sideband travels with the first beat and is
//! held for the packet. A beat moves when `valid` and `ready` are both high at a rising
//! edge.
//!
//! - `local_ip`: this NIC's IPv4 address (big-endian number), a configuration input held
//!   steady; frames to other addresses are dropped and counted (`cnt_not_for_us`).
//! - `net_rx_*` / `net_tx_*`: the network port, whole Ethernet frames without FCS.
//! - `fw_rx_*` / `fw_tx_*`: the firmware's queues, frames to it and segments from it.
//!   Each packet on `fw_rx` is a 32-byte RX descriptor, four beats with `keep` 0xFF and
//!   `last` low, then the received frame's raw beats as they arrived (`last` on the
//!   frame's last): the parser's header fields, so the firmware loads them as aligned
//!   little-endian words rather than parsing the frame again. Layout
//!   (`iwnic_proto::net::RxDescriptor` is the reference), byte offsets: 0–3 destination
//!   and 4–7 source IPv4 address, first octet first; 8–9 destination and 10–11 source
//!   port; 12–15 sequence number; 16–19 acknowledgment field (whatever the ACK flag);
//!   20–21 window; 22 the flags ACK 0x10, PSH 0x08, RST 0x04, SYN 0x02, FIN 0x01; 24–25
//!   TCP payload length; bytes 23 and 26–31 zero; numbers little-endian.
//!   Each packet on `fw_tx` is a segment to send: a 40-byte TX descriptor, five beats
//!   (their `keep` not looked at), then the TCP payload from byte 0 of the next beat
//!   (`keep` 0xFF on every beat but the last), `last` on the payload's last beat, or on
//!   the descriptor's fifth without payload. Layout (`iwnic_proto::net::TxDescriptor` is
//!   the reference), byte offsets: 0–5 destination and 6–11 source MAC address, 12–15
//!   source and 16–19 destination IPv4 address, first byte first; 20–21 source and
//!   22–23 destination port; 24–27 sequence and 28–31 acknowledgment number; 32–33
//!   window; 34 flags: ACK 0x10, PSH 0x08, RST 0x04, SYN 0x02, FIN 0x01, 0x80 for
//!   the MSS and window scale options after the TCP header, and with it 0x40 to leave
//!   the window scale out (end of list and padding in its place); 35 window scale shift; 36–37
//!   MSS; 38–39 payload length; numbers little-endian. The datapath builds the frame
//!   from it, the one `TxDescriptor::frame` gives (for flags it refuses, two of SYN, FIN
//!   and RST, the low five flag bits without PSH), and sends it with its IPv4 and TCP
//!   checksums filled in (checksum offload). A packet that ends before its fifth beat is
//!   dropped; one that ends on it goes without payload whatever its payload length says;
//!   a payload under a payload length of 0 is dropped and the frame goes without it. Both
//!   drops are counted (`cnt_fw_tx_dropped`), and neither holds up the packets after. A
//!   payload of another nonzero length than the descriptor says is sent as it comes,
//!   under an IPv4 length from the descriptor (a frame the peer refuses or reads short;
//!   `TxDescriptor::frame` gives none): the firmware never writes one.
//! - `ctx_*`: the flow-context register window. With `ctx_valid` high and `ctx_ready`
//!   high a command is taken: `ctx_op` 0 writes the context at `ctx_index` from the
//!   `ctx_*` fields (and inserts its 4-tuple into the flow table), 1 reads it, 2 removes
//!   it (and its 4-tuple), 3 writes it as 0 does and then sends an ACK of the written
//!   `rcv_nxt` at its `snd_nxt` (the ACK that ends the firmware's hand-off: of a
//!   responder's RTR the datapath did not take itself, below, or of the initiator's
//!   reply; it may leave after `ctx_done`, and goes even when the insert found its
//!   bucket full). `ctx_done` pulses for one cycle when the command
//!   has finished; with it, `ctx_status` says: write — the tuple went into the flow table (low: its
//!   bucket was full, counted in `cnt_insert_full`: the context is written but no frame
//!   is steered to it, and the firmware ends the connection);
//!   read and remove — a flow was at that index. After a read the `rd_*` outputs hold the
//!   context (with the sequence numbers the datapath has reached) from `ctx_done` until
//!   the next command.
//! - `event_*`: datapath reports about a flow, one at a time: `event_index`, and
//!   `event_rtr`, what happened: 0 an MPA error, `event_crc` high for a CRC error, low
//!   for a length error; 1, 2, 3 the flow's RTR taken by the datapath (below), a
//!   zero-length Send, RDMA Write or RDMA Read Request, `event_crc` low. An RTR's
//!   event is raised after its context is written and its ACK queued for the segment
//!   builder (the ACK frame may leave after it), and before the next segment is decided.
//! - `host_tx_*`: ULPDUs from the host, `host_tx_index` (connection index) and
//!   `host_tx_len` (ULPDU bytes) with the first beat; a zero-length ULPDU is one beat with
//!   `keep` 0. A ULPDU for no flow in FPDU mode, or whose FPDU exceeds the flow's MSS, is
//!   taken and dropped (`cnt_host_refused`).
//! - `host_rx_*`: received ULPDUs, tagged with `host_rx_index`. Only ULPDUs whose CRC
//!   matched come out.
//! - `cnt_*`: free-running 32-bit counters (`cnt_rtr_taken`: RTRs the datapath took);
//!   `tick`: cycles since reset (64 bits), the firmware's clock on the board.
//!
//! Numbers on ports: IPv4 addresses big-endian (10.0.0.1 is 0x0A000001), MAC addresses
//! with the first byte on the wire in bits 47:40, ports and sequence numbers as numbers.
//!
//! Synchronous active-high `reset`; after it the flow table clears itself
//! (2^`SET_BITS` cycles) before commands and frames are taken.

//!
//! # How it works
//!
//! **Receive** is store and forward in four banks, taken in turn, so that one frame is
//! delivered while the controller decides on the next and others arrive and wait. As a
//! frame arrives, its raw beats go into the raw buffer (for the firmware) and
//! `tcp_rx`'s realigned payload, a few cycles behind, into the payload buffer; the next
//! frame's beats follow with no gap while the parser is still deciding on the last one.
//! The payload is compared with the RTR FPDUs as it is written (a stage behind, in
//! quarters of a beat; the beats' results ANDed the cycle after).
//! A frame is *held* (its bank, buffer ends and the parser's header fields, which move
//! on with the next frame, in a four-place queue, and beside them, a cycle later,
//! whether its payload is an RTR FPDU) only when the parser's verdict is
//! good; a late-failed frame, or one the parser drops outright, frees its bank there —
//! this is where the parser's good bit commits. A bank is busy from its frame's last
//! beat until nothing will read it again, and the input waits for a free bank; a held
//! frame's bank is busy, so the held queue always has room and the parser never waits.
//! The controller takes the oldest held frame, looks the 4-tuple up in the flow table
//! (latency 5), reads the flow's context (block RAM's read latch, then its output
//! register: latency 3 from the index), computes the segment's effects into registers
//! (two more cycles), and once the delivery of the frame before is done, decides as
//! the model does and hands the frame to the delivery:
//!
//! - a flow still expecting its RTR, and a segment with ACK and none of RST, SYN and
//!   FIN, in order, acknowledging `snd_nxt`, whose payload is exactly one of the three
//!   RTR FPDUs iwnic sends (`iwnic_proto::ddp::MessageRepr::rtr_fpdu` of a zero-length
//!   Send, Write or Read Request; compared as the payload is written into its buffer,
//!   [`crate::rtr_match`]): the datapath takes it. The context is written as for
//!   delivered payload (`rcv_nxt` past it, `snd_una` at the ACK, the peer window) with
//!   RTR expected cleared, so the flow is in FPDU mode from the next byte; the ACK
//!   goes; nothing is replayed into `mpa_rx` or sent to the firmware; an event
//!   (`event_rtr`) tells the firmware which RTR came, and `cnt_rtr_taken` counts it.
//!   This saves the firmware its part of each passive setup's end (the frame read,
//!   the compare, the flow rewrite with `ctx_op` 3: about 475 RISC-V instructions);
//! - no flow, a flow still expecting its RTR (any other segment: another stack's RTR,
//!   an RTR split over segments or followed by data, out of order, at another ACK,
//!   with FIN), RST, SYN or no ACK: the raw frame goes to the firmware, behind its RX
//!   descriptor (its payload is not delivered: RFC 9293 drops a segment without ACK,
//!   RFC 5961 answers a SYN with a challenge ACK);
//! - an ACK inside `(snd_una, snd_nxt]` moves `snd_una`; any ACK updates the peer window;
//! - payload at `rcv_nxt` moves `rcv_nxt` and, unless the flow has failed, is replayed
//!   from the payload buffer into `mpa_rx` (reset before each segment: FPDUs never
//!   straddle segments, so one *failed* bit per flow is all the MPA state that survives,
//!   and it lives in the context); ULPDUs go to the host queue, which commits each on
//!   `mpa_rx`'s good bit; a CRC or length error sets the failed bit and raises an event.
//!   A length error is an FPDU that does not end with its segment: `mpa_rx`'s ULPDU
//!   limit is [`MAX_RX_ULPDU_LEN`] for every flow, the largest ULPDU any segment the
//!   parser passes can hold, and not one from the context's MSS, which is the MSS
//!   *towards* the peer (the peer sizes its FPDUs by the MSS we advertised);
//! - payload entirely below `rcv_nxt` (a duplicate) or beyond it (out of order, dropped)
//!   is answered with an ACK, and so is delivered payload, and so is a segment without
//!   payload or FIN below `rcv_nxt` (a keepalive probe; counted as a duplicate);
//! - FIN (unless the segment was out of order) goes to the firmware (descriptor and raw
//!   frame) after its payload.
//!
//! **Transmit**: a host ULPDU's first beat makes the controller read the flow's context;
//! if the flow is in FPDU mode and the FPDU fits the MSS, `snd_nxt` moves by the FPDU's
//! length and a segment descriptor goes to the segment builder while the ULPDU streams
//! through `mpa_tx` into it. ACKs use the same builder with no payload. The firmware's
//! segments have a builder of their own: a front end takes a packet's five descriptor
//! beats into registers, offers them to it as its descriptor, then passes the payload
//! beats on (or drops them, above). An arbiter takes whole frames from the two builders,
//! the firmware's first, into checksum insertion.
//!
//! **Context** per connection index, in four block RAMs read and written together:
//! the 4-tuple (96 bits, packed as the flow table packs it), both MACs (96), the
//! sequence numbers `{snd_una, snd_nxt, rcv_nxt}` (96) and [`MISC_BITS`] of the rest:
//! MSS `[15:0]`, peer window `[31:16]`, its shift `[39:32]`, our shift `[47:40]`,
//! CRC `[48]`, RTR expected `[49]` (set by a context write, cleared by the datapath
//! when it takes the flow's RTR), failed `[50]`, valid `[51]`. After reset the
//! controller clears every valid bit (block RAM has no reset) while the flow table clears
//! its buckets.
//!
//! **Delivery**: the replay of a frame's payload into `mpa_rx` (its drain, the flow's
//! failure written back and its event), its ACK (sent while the payload is replayed),
//! a taken RTR's event, and its RX descriptor and raw frame to the firmware run apart
//! from the controller,
//! which meanwhile looks up and reads the context of the next frame. The delivery keeps
//! its own copy of the descriptor, taken at the hand-over, as it does of the frame's
//! bank and buffer ends; the frame's first raw beats are read from the buffer while the
//! descriptor's beats go, so the frame follows them without a gap. The next frame's
//! context may have been read before the delivery failed its flow: the failure is
//! forwarded into the decision (`fail_forward`).
//!
//! One controller serialises context commands, received frames and host ULPDUs (in that
//! priority); commands and host ULPDUs wait for the delivery to finish (and for a
//! command's ACK to reach the segment builder), so no two of them ever touch the same
//! context at once, and what leaves each port leaves in the model's order.
//!
//! # Throughput, size and speed
//!
//! Measured with `cargo bench -p iwnic-hdl --bench nic_top` (Verilated `SimNicTop`):
//! MPA receive carries 7.35–7.53 FPDU bytes per cycle on 200 back-to-back segments of
//! 64- to 1,460-byte FPDUs against the wire's 7.7–7.8 (the frames' headers share the
//! bus); the input waits 0.1–1.6 cycles a frame, and the run takes 139.4–193.9 cycles
//! a segment against 135–190 input beats: each delivery spends about four cycles
//! beyond its payload beats (hand-over, `mpa_rx`'s reset, the replay's and
//! `mpa_rx`'s input register's latency, the drain), so the four banks fill and the
//! last ULPDU trails the wire. Full wire rate needs the next delivery to start before
//! the last one's drain. Transmit: 7.5–7.6 for 1,024- and 1,460-byte FPDUs, 4.0 for
//! 64-byte ones, whose frames are mostly headers (the wire still carries 7.3 bytes per
//! cycle; the host input waits 8 cycles a ULPDU while the context is read).
//!
//! `iwnic synth --block nic_top` ([`EcpNicTop`], LFE5U-25F-6, out of context, nextpnr
//! asked for 125 MHz): 13,150 LUT4 (54 % of the device), 10,765 FF, 43 of 56 DP16KD;
//! **128.7 MHz** with the default placement, 119.3 and 117.3 with seeds 1 and 2 (3 to 5
//! not rerun), limited by the MPA slice's `skid_full` into `control` (default), the
//! parser's `ip_fields_ok` (seed 1) and the firmware builder's `tail_keep` (seed 2).
//! Before the keepalive ACK (`duplicate` without its payload term): 13,087 LUT4, 123.9,
//! 132.8 and 124.0 MHz, with MPA receive's ULPDU limit the constant
//! [`MAX_RX_ULPDU_LEN`] passed through `flow_max_ulpdu` and `max_ulpdu` (yosys folds
//! both: 86 LUT4 and 45 FF fewer than the per-flow limit); the keepalive ACK written as
//! its own term of `duplicate` gave 13,234 LUT4, 110.8 and 119.0 MHz. The constant wired
//! straight into `mpa_rx`, the same logic once folded, gave 13,153 LUT4 and 109.3, 105.2
//! and 118.3 MHz, limited by paths from `mpa_rx`'s `queue_head` and the host queue's
//! `too_long` and `full` into its `full`, 12–13 logic levels. Before the constant (its
//! default placement measured again beside it: the same figures): 13,173 LUT4, 10,810
//! FF; **127.9 MHz** with the default placement, 131.0, 121.0, 129.3, 115.1 and 116.7
//! with seeds 1 to 5 (mean 123.5), limited by the firmware builder's `tail_keep`
//! (default, seeds 4 and 5), `mpa_rx`'s input word (seed 1) and the checksums'
//! `ready_q` (seeds 2 and 3). The same logic has given three netlists as `bank_busy`'s
//! releases were written three ways: as `d.next = d.val() & ...` chains (below: 13,259 LUT4, mean
//! 115.3; wrong on RustHDL's simulator, see there), through a local accumulator
//! (13,390 LUT4: 109.5, 116.4, 118.4, 115.3, 113.0, 104.3, mean 112.8) and now as one
//! released mask (`bank_release`). The ~10 MHz between them is yosys's mapping and
//! nextpnr's placement, not a shorter path: re-check the six placements after a change
//! to the datapath. Before these, the figures of the RTR's change:
//! 13,259 LUT4; **127.3 MHz** with the default placement. The same netlist placed with nextpnr's
//! seeds 1 to 5 (`--seed N`) gives 107.6, 98.9, 123.8, 106.0 and 128.1 MHz. Taking the
//! RTR on the datapath (the compare, its registers, the decision, `cnt_rtr_taken`)
//! cost 381 LUT4 and 76 FF. None of these six placements is limited by it (its
//! slowest endpoints, `rtr_take` and `rtr_beat_equal`, arrive at 6.2–7.8 ns), but by
//! paths that limited placements before, placed worse or better by chance: the
//! checksums' `ready_q` and `mpa_rx`'s `room` (default), the firmware builder's
//! `tail_keep` and `carry` (seed 1), the network handshake through the parser's frame
//! length into `raw_ends`' enables (seed 2: 10.1 ns, 7.9 of it routing), the firmware
//! builder's `out_data` (seed 3), `mpa_rx`'s input stage and `raw_ends` again (seed 4,
//! 9.0–9.4 ns) and the controller's state (seed 5). Over the six placements the mean
//! fell from 122.6 to 115.3 MHz, two of them above 125 MHz rather than one: the
//! receive side's paths (parser, `raw_ends`, `mpa_rx`), next to the compare on the
//! parser's payload, landed worse in two of them. With the payload compared 64 bits
//! at once (12,966 LUT4), `rtr_beat_equal` arrived at 7.2–7.9 ns, among the slowest
//! endpoints of four placements (110.5, 120.1, 121.3 and 109.1 MHz): hence the
//! quarters ([`crate::rtr_match::RtrBeatMatch`]), about 300 LUT4 of the 381. (Figures
//! from `iwnic synth`'s yosys and nextpnr commands run by hand, with nextpnr's
//! `--detailed-timing-report` for `scripts/slowest-endpoints.py`; the netlist before
//! the change gave the figures below again.)
//!
//! Before it (the figures of the paragraphs below): 12,878 LUT4 (53 %), 10,734 FF;
//! **133.7 MHz** with the default placement, and with seeds 1 to 5 121.6, 119.6,
//! 114.2, 123.9 and 122.3 MHz, so the margin depends on the placement. Three of those
//! five critical paths run from the
//! firmware builder's beat `index` through its header mux into `out_data` (4 levels,
//! 8.2–8.8 ns, two thirds of it routing: the decode fans out to 64 bits). The others:
//! the datapath builder's output handshake into `tail_keep` (seed 2), and `mpa_rx`'s
//! room into its word register (seed 4). Tried and not kept: the builders' header as a
//! shift register of its seven beats, loaded from the descriptor (a beat from one
//! register, no mux on `index`; 342 LUT4 fewer). It took the builders off every
//! critical path, but the six placements gave 115.1, 131.0, 118.1, 116.8, 125.3 and
//! 123.8 MHz (against 133.7, 121.6, 119.6, 114.2, 123.9 and 122.3 here): the same spread,
//! now limited by the receive parser (`ethertype` through the IPv4 checks into
//! `ip_verdict`, and the network handshake into its beat counter). The margin needs
//! those paths shortened too; which placement lands above 125 MHz is chance.
//!
//! Three changes took the default placement from 115.9 MHz (111.3 and 113.8 with seeds
//! 1 and 2) to this figure:
//! - The firmware builder's payload comes through a skid buffer (`fw_payload_slice`),
//!   so the port's `fw_tx_valid` no longer runs into `carry`'s 48 enables.
//! - The builders' `takes_payload` flag is a register, set beside `phase`, in place of
//!   a decode of the phase and `has_payload`.
//! - A bank is marked busy a cycle after its frame's last beat (`bank_filled`), which
//!   takes the network handshake off `bank_busy`'s set-and-release logic.
//!
//! Earlier netlists, for the record: 128.3 MHz before the firmware's descriptors (five
//! placements of six above 125), 134.0 with the firmware's own builder (three of six),
//! and 115.9 after the SYN and ACK-less steering (none of three). Each round picked its
//! steps from the slowest endpoints of several placements at once
//! (`scripts/slowest-endpoints.py`): with one placement, fixing its worst path only
//! moves the worst to another block on the next.
//!
//! What took it there, each step measured on the whole top:
//! - block RAM read through its own output register ([`OutputRegisteredRam`]:
//!   clock-to-out 5.8 → 1.0 ns) for the contexts, the flow table, the frame buffers,
//!   the packet FIFOs and `tx_checksum`'s ring;
//! - counters fed by registered pulses ([`EventCounter`]); the context writes selected
//!   from one-hot state flags; the context's flags, the segment's sequence-number
//!   differences and a rewritten tuple's compare registered a cycle before they are
//!   used (states CmdCheck and RxCompare); the flow table's lookup request a register;
//!   the flow table's writes registered and its ways fetched into fabric registers
//!   before the compare;
//! - `mpa_rx` and `mpa_tx` with the data's share of each CRC update computed a stage
//!   before the CRC loop;
//! - the synthesis flow without RustHDL's flip-flop initial values, so yosys re-encodes
//!   the controller as one-hot;
//! - registers where a stream or a decision crossed blocks: `mpa_rx` decodes from its
//!   own input register (the payload buffer's clock-to-out and tile select were in
//!   series with its length compares and CRC matrices) and its `busy` is a register;
//!   `mpa_tx` and the segment builder are joined by a skid buffer (`fpdu_slice`: the
//!   builder's ready ran through the arbiter into every enable of `mpa_tx`), and so
//!   are the builder and the arbiter (`frame_slice`: the grant ran into the builder's
//!   output enables); the replay's read enable starts at delivery-state flags;
//! - no adder in series with another or with a compare where one would do:
//!   `tx_checksum` sums a beat's lanes in pairs, compares the beat read with the
//!   frame's last index, and compares beat indices in 8 bits; `packet_fifo` tests
//!   its pointers for full with XORs (no subtraction); `mpa_rx` computes `body0 - 1`
//!   from the length directly;
//! - the flow table's lookup bucket hashed when a frame is held and held beside it
//!   (the fold was in front of the RAMs' address, 4 levels and a 2.2 ns route), its
//!   command bucket hashed from the registered tuple (state `Hash`), its RAMs' read
//!   enable from two flip-flops and the write flag;
//! - the CRC data shares of both MPA blocks as 32-input matrices (word 0's and word
//!   1's), and `mpa_rx`'s CRC loop choosing between one update and restarts; `mpa_tx`
//!   registers both CRC fields a frame can end with;
//! - `tcp_rx`'s payload window in one adder; `tx_checksum` sums the pseudo-header
//!   from the frame's own lanes and sums and folds its fields over three cycles, no
//!   adder behind the pop; `mpa_rx` keeps its failed state in one flip-flop; a rewritten
//!   tuple compared in eighths; the ULPDU limit in one subtraction (since gone: the
//!   limit is a constant, [`MAX_RX_ULPDU_LEN`]);
//! - enables off the handshakes where a register's content does not matter until a
//!   valid flag says so: `tcp_rx`'s and `tcp_tx`'s output data load whenever the
//!   output moves, `tx_checksum`'s free queue entry on every beat, the skid registers
//!   whenever empty;
//! - fan-out taken off decisions: `mpa_rx` writes its output queue's tail places on
//!   the queue's own flags, selects the held last beat in stage 2 and keeps
//!   `out_left > 8` as a flag; `tcp_rx` sets a frame's output bits from one accepted
//!   flag and orders its verdict in the counting cycle;
//! - compares kept as registers beside what they compare, so no enable waits on one:
//!   `tx_checksum`'s "this beat is the frame's last" (the pop and its 150-odd enables)
//!   and the write beat's bounds (the commit), `tcp_rx`'s header-field beats (one-hot
//!   for beats 0-4, the rest compared a beat ahead), `mpa_rx`'s queue room and length
//!   limit, the parser's "for this NIC", the removal's condition beside `flow_valid`;
//! - decodes moved a stage ahead or flattened: `mpa_rx` decodes each word's last
//!   `keep` and "longer than 8" in stage 0, the flow table compares the tuple in
//!   quarters, `tcp_tx` masks the payload with its `keep` (a prefix) rather than
//!   decoding it, `ctx_misc`'s write data is two masked terms and the failed bit with
//!   the selects side by side, and `mpa_rx`'s `busy` is worked out from the registers
//!   rather than from their inputs.
//!
//! The netlist was ranked by estimated delay per flip-flop input
//! (`scripts/rank-timing-paths.py`: all endpoints at once, not nextpnr's single
//! critical path) to pick the first of these, and by nextpnr's own post-route arrival
//! per endpoint (`scripts/slowest-endpoints.py`) for the last.

use iwnic_proto::fpdu::max_ulpdu_len;
use rust_hdl::prelude::*;

use crate::block_ram::{OutputRegisteredRam, WriteRegisteredRam};
use crate::event_counter::EventCounter;
use crate::flow_table::{FlowTable, TupleHash};
use crate::mpa_rx::MpaRxDelineator;
use crate::mpa_tx::MpaTxFramer;
use crate::packet_fifo::PacketFifo;
use crate::rtr_match::{RtrBeatMatch, RtrLength};
use crate::skid_buffer::SkidBuffer;
use crate::tcp_rx::{TcpRxParser, MAX_FRAME_LEN};
use crate::tcp_tx::SegmentBuilder;
use crate::tx_checksum::TxChecksum;

/// Verilator warnings waived on `nic_top` beyond `verilator::WAIVERS`, with the reason.
pub const TOP_WAIVERS: &[(&str, &str)] = &[(
    "UNUSED",
    "the top leaves some of its blocks' outputs unconnected on purpose: their own counters \
     that the top's counters already cover (frames accepted, packets committed, frames \
     built, checksums filled), the table's remove status (a remove always follows a valid \
     context) and the PSH and SYN flags; each block lints clean on its own without it",
)];

/// Bits of the context word that is not addresses or sequence numbers.
pub const MISC_BITS: usize = 52;
/// Beats of one bank of the raw-frame and payload buffers (2 KiB each: a 1,518-byte
/// frame is 190).
pub const FRAME_BUFFER_BITS: usize = 8;
/// Banks of each, used in turn: one frame is delivered while the controller decides on
/// the next and a third arrives (three would do; four cost the same block RAM).
pub const BANK_BITS: usize = 2;
pub const BANKED_BUFFER_BITS: usize = FRAME_BUFFER_BITS + BANK_BITS;
/// Beats of each of the firmware RX and host RX queues (4 KiB).
pub const QUEUE_BITS: usize = 9;

/// Longest TCP payload of a frame the receive parser passes: a [`MAX_FRAME_LEN`] frame
/// (1,518 bytes without FCS, an IPv4 total length of at most 1,504) behind the Ethernet
/// header and the shortest IPv4 and TCP headers (14 + 20 + 20 bytes): 1,464.
pub const MAX_RX_PAYLOAD_LEN: usize = MAX_FRAME_LEN as usize - 14 - 20 - 20;

/// The ULPDU limit of MPA receive (`mpa_rx`'s `max_ulpdu_len`), the same for every flow:
/// the largest ULPDU whose FPDU fits [`MAX_RX_PAYLOAD_LEN`] bytes,
/// `iwnic_proto::fpdu::max_ulpdu_len(1464)` = `((1464 - 4) & !3) - 2` = 1,458 (the CRC's 4
/// bytes, the length field's 2, no PAD). A longer ULPDU_Length cannot end with any segment
/// the parser passes, so the limit only raises at the FPDU's header the length error its
/// segment's end would raise: the flow contract's length error is an FPDU running beyond
/// its segment, whatever the flow's MSS. (The context's MSS is the MSS towards the peer,
/// 536 when its SYN had no MSS option, while the peer sizes its FPDUs by the MSS we
/// advertised; it bounds only what the datapath sends.) The behavioural model uses this
/// constant. (`#[hdl_gen]` cannot read Rust constants: `update` writes 1458.)
pub const MAX_RX_ULPDU_LEN: u16 = match max_ulpdu_len(MAX_RX_PAYLOAD_LEN) {
    Some(len) => len as u16,
    None => panic!("no FPDU fits the largest payload"),
};
const _: () = assert!(MAX_RX_ULPDU_LEN == 1458, "update writes 1458");

/// `index < 2^N`, on an index one bit wider than any connection index: a comparison
/// with a constant that depends on the block's parameter, which `#[hdl_gen]` cannot
/// write, so the Verilog is generated here.
#[derive(Clone, Debug, Default, LogicBlock)]
pub struct IndexRange<const N: usize> {
    pub index: Signal<In, Bits<17>>,
    pub in_range: Signal<Out, Bit>,
}

impl<const N: usize> Logic for IndexRange<N> {
    fn update(&mut self) {
        self.in_range.next = self.index.val().to_u64() < (1 << N);
    }

    fn connect(&mut self) {
        self.in_range.connect();
    }

    fn hdl(&self) -> Verilog {
        Verilog::Custom(format!(
            "always @(*) begin\n    in_range = index < 17'd{};\nend\n",
            1u64 << N
        ))
    }
}

/// What the controller is doing.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum Control {
    /// After reset: clearing the contexts' valid bits while the flow table clears.
    Clear,
    Idle,
    /// A context command: the context is being read.
    CmdRead,
    /// The RAMs put the context out; it is registered.
    CmdLatch,
    /// The registered context is compared with the command (a register of its own:
    /// the 96-bit tuple compare is too slow to select write data behind).
    CmdCheck,
    /// Act on the registered context, and start the flow-table command.
    CmdAct,
    /// Waiting for the flow table's `done`.
    CmdTable,
    /// A received frame: look its tuple up.
    RxLookup,
    RxLookupWait,
    /// The flow's context is read, registered, and the segment's effects on it
    /// computed into registers: a stage each, since block RAM's clock-to-out leaves no
    /// room for logic in its cycle.
    RxContext,
    RxLatch,
    RxCompute,
    /// The decisions are registered; waits here until the delivery is idle.
    RxCompare,
    /// Writes the context and hands the segment's delivery over.
    RxDecide,
    /// No flow: waits until the delivery is idle and hands it the frame (for the
    /// firmware: its descriptor and raw frame).
    RxToFirmware,
    /// A host ULPDU: the context is being read.
    TxContext,
    TxLatch,
    TxCompute,
    TxDecide,
    TxDescriptor,
    TxStream,
    /// A refused ULPDU is taken and dropped.
    TxDrop,
}

/// What the delivery is doing: the segment handed over by the controller, its payload
/// replayed into `mpa_rx`, its ACK, its RX descriptor and raw frame to the firmware.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum Deliver {
    Idle,
    /// Replay the payload into `mpa_rx`.
    MpaStart,
    MpaFeed,
    MpaDrain,
    /// Wait for the event register, then raise the flow's error, or its RTR taken.
    Event,
    /// To the firmware queue: read the raw frame's beat 0 (and count the frame),
    FirmwareStart,
    /// offer the four beats of the frame's RX descriptor while the replay reads the
    /// raw frame's first two beats into its registers behind them,
    FirmwareDescriptor,
    /// and copy the raw frame.
    FirmwareCopy,
}

/// Which source the transmit arbiter is carrying a frame from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum TxSource {
    None,
    Firmware,
    Builder,
}

/// Where the firmware's transmit front end is within a packet on `fw_tx`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum FwTx {
    /// Taking the TX descriptor's five beats into registers.
    Descriptor,
    /// Offering the descriptor to the firmware's segment builder.
    Offer,
    /// Passing the payload's beats to the builder.
    Payload,
    /// Taking payload beats and dropping them: the descriptor's payload length is 0, so
    /// the builder takes no payload for it.
    Drop,
}

/// The datapath of one NIC with a flow table of 2^`SET_BITS` × 4 entries and contexts
/// for connection indices below 2^`INDEX_BITS`.
#[derive(LogicBlock, Default)]
pub struct NicTop<const SET_BITS: usize, const INDEX_BITS: usize> {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub local_ip: Signal<In, Bits<32>>,

    pub net_rx_data: Signal<In, Bits<64>>,
    pub net_rx_keep: Signal<In, Bits<8>>,
    pub net_rx_last: Signal<In, Bit>,
    pub net_rx_valid: Signal<In, Bit>,
    pub net_rx_ready: Signal<Out, Bit>,
    pub net_tx_data: Signal<Out, Bits<64>>,
    pub net_tx_keep: Signal<Out, Bits<8>>,
    pub net_tx_last: Signal<Out, Bit>,
    pub net_tx_valid: Signal<Out, Bit>,
    pub net_tx_ready: Signal<In, Bit>,

    pub fw_rx_data: Signal<Out, Bits<64>>,
    pub fw_rx_keep: Signal<Out, Bits<8>>,
    pub fw_rx_last: Signal<Out, Bit>,
    pub fw_rx_valid: Signal<Out, Bit>,
    pub fw_rx_ready: Signal<In, Bit>,
    pub fw_tx_data: Signal<In, Bits<64>>,
    pub fw_tx_keep: Signal<In, Bits<8>>,
    pub fw_tx_last: Signal<In, Bit>,
    pub fw_tx_valid: Signal<In, Bit>,
    pub fw_tx_ready: Signal<Out, Bit>,

    pub ctx_op: Signal<In, Bits<2>>,
    pub ctx_valid: Signal<In, Bit>,
    pub ctx_ready: Signal<Out, Bit>,
    pub ctx_index: Signal<In, Bits<16>>,
    pub ctx_local_ip: Signal<In, Bits<32>>,
    pub ctx_local_port: Signal<In, Bits<16>>,
    pub ctx_remote_ip: Signal<In, Bits<32>>,
    pub ctx_remote_port: Signal<In, Bits<16>>,
    pub ctx_local_mac: Signal<In, Bits<48>>,
    pub ctx_remote_mac: Signal<In, Bits<48>>,
    pub ctx_snd_una: Signal<In, Bits<32>>,
    pub ctx_snd_nxt: Signal<In, Bits<32>>,
    pub ctx_rcv_nxt: Signal<In, Bits<32>>,
    pub ctx_peer_window: Signal<In, Bits<16>>,
    pub ctx_peer_window_shift: Signal<In, Bits<8>>,
    pub ctx_local_window_shift: Signal<In, Bits<8>>,
    pub ctx_mss: Signal<In, Bits<16>>,
    pub ctx_crc: Signal<In, Bit>,
    pub ctx_rtr_expected: Signal<In, Bit>,
    pub ctx_done: Signal<Out, Bit>,
    pub ctx_status: Signal<Out, Bit>,
    pub rd_local_ip: Signal<Out, Bits<32>>,
    pub rd_local_port: Signal<Out, Bits<16>>,
    pub rd_remote_ip: Signal<Out, Bits<32>>,
    pub rd_remote_port: Signal<Out, Bits<16>>,
    pub rd_local_mac: Signal<Out, Bits<48>>,
    pub rd_remote_mac: Signal<Out, Bits<48>>,
    pub rd_snd_una: Signal<Out, Bits<32>>,
    pub rd_snd_nxt: Signal<Out, Bits<32>>,
    pub rd_rcv_nxt: Signal<Out, Bits<32>>,
    pub rd_peer_window: Signal<Out, Bits<16>>,
    pub rd_peer_window_shift: Signal<Out, Bits<8>>,
    pub rd_local_window_shift: Signal<Out, Bits<8>>,
    pub rd_mss: Signal<Out, Bits<16>>,
    pub rd_crc: Signal<Out, Bit>,
    pub rd_rtr_expected: Signal<Out, Bit>,

    pub event_valid: Signal<Out, Bit>,
    pub event_ready: Signal<In, Bit>,
    pub event_index: Signal<Out, Bits<16>>,
    pub event_crc: Signal<Out, Bit>,
    pub event_rtr: Signal<Out, Bits<2>>,

    pub host_tx_data: Signal<In, Bits<64>>,
    pub host_tx_keep: Signal<In, Bits<8>>,
    pub host_tx_last: Signal<In, Bit>,
    pub host_tx_valid: Signal<In, Bit>,
    pub host_tx_ready: Signal<Out, Bit>,
    pub host_tx_index: Signal<In, Bits<16>>,
    pub host_tx_len: Signal<In, Bits<16>>,
    pub host_rx_data: Signal<Out, Bits<64>>,
    pub host_rx_keep: Signal<Out, Bits<8>>,
    pub host_rx_last: Signal<Out, Bit>,
    pub host_rx_valid: Signal<Out, Bit>,
    pub host_rx_ready: Signal<In, Bit>,
    pub host_rx_index: Signal<Out, Bits<16>>,

    pub cnt_frames_in: Signal<Out, Bits<32>>,
    pub cnt_frames_out: Signal<Out, Bits<32>>,
    pub cnt_bad_checksum: Signal<Out, Bits<32>>,
    pub cnt_oversized: Signal<Out, Bits<32>>,
    pub cnt_malformed: Signal<Out, Bits<32>>,
    pub cnt_not_tcp: Signal<Out, Bits<32>>,
    pub cnt_not_for_us: Signal<Out, Bits<32>>,
    pub cnt_to_firmware: Signal<Out, Bits<32>>,
    pub cnt_out_of_order: Signal<Out, Bits<32>>,
    pub cnt_duplicates: Signal<Out, Bits<32>>,
    pub cnt_acks_sent: Signal<Out, Bits<32>>,
    pub cnt_fpdus_in: Signal<Out, Bits<32>>,
    pub cnt_fpdus_out: Signal<Out, Bits<32>>,
    pub cnt_crc_errors: Signal<Out, Bits<32>>,
    pub cnt_length_errors: Signal<Out, Bits<32>>,
    pub cnt_host_refused: Signal<Out, Bits<32>>,
    pub cnt_insert_full: Signal<Out, Bits<32>>,
    pub cnt_fw_tx_dropped: Signal<Out, Bits<32>>,
    pub cnt_rtr_taken: Signal<Out, Bits<32>>,
    pub tick: Signal<Out, Bits<64>>,

    // Blocks.
    parser: TcpRxParser,
    raw: OutputRegisteredRam<Bits<64>, BANKED_BUFFER_BITS>,
    payload: OutputRegisteredRam<Bits<64>, BANKED_BUFFER_BITS>,
    flows: FlowTable<SET_BITS>,
    /// The flow table bucket of the parser's tuple, hashed when its frame is held and
    /// held beside it (`held_set*`), then loaded into `lookup_set` with the tuple
    /// registers: neither the fold nor the held frames' selection is in front of the
    /// flow table's read address or of another.
    lookup_hash: TupleHash<SET_BITS>,
    lookup_set: DFF<Bits<SET_BITS>>,
    /// The contexts, read through the RAMs' own output registers (loaded every cycle):
    /// a word is there two cycles after its address, from a flip-flop, with none of
    /// block RAM's 5.8 ns clock-to-out in the decisions' cycle.
    ctx_tuple: WriteRegisteredRam<Bits<96>, INDEX_BITS>,
    ctx_macs: WriteRegisteredRam<Bits<96>, INDEX_BITS>,
    ctx_seqs: WriteRegisteredRam<Bits<96>, INDEX_BITS>,
    ctx_misc: WriteRegisteredRam<Bits<MISC_BITS>, INDEX_BITS>,
    /// Between the raw buffer (and the RX descriptor) and the firmware queue: the replay
    /// pointer's advance does not wait on the queue's ready. (`mpa_rx` takes the payload
    /// buffer's output register directly: its `in_ready` is a register and its input has
    /// a skid.)
    firmware_slice: SkidBuffer,
    mpa_rx: MpaRxDelineator,
    host_queue: PacketFifo<QUEUE_BITS>,
    firmware_queue: PacketFifo<QUEUE_BITS>,
    framer: MpaTxFramer,
    /// Between `mpa_tx` and the segment builder: the builder's payload ready (from the
    /// arbiter's grant and `tx_slice`) would otherwise run on into every enable of
    /// `mpa_tx`'s stages and back out to `host_tx_ready`.
    fpdu_slice: SkidBuffer,
    builder: SegmentBuilder,
    /// Between the segment builder and the arbiter: the grant (from the firmware
    /// builder's frame and the transmit state) would otherwise run into the builder's
    /// output-register enables and its payload ready.
    frame_slice: SkidBuffer,
    /// The firmware's segments: a builder of their own (sharing the datapath's would put
    /// a 300-bit descriptor mux and a second payload source in front of it, and an
    /// arbiter there too; apart, the two build at once, the datapath's builder and its
    /// paths stay as they were, and only this one has the SYN options' logic), and the
    /// same cut between it and the arbiter, whose grant would otherwise run on through
    /// the builder's payload ready to `fw_tx_ready`.
    fw_builder: SegmentBuilder,
    /// The firmware's payload beats into its builder: `fw_tx_valid` (a port input) would
    /// otherwise run into the builder's payload handshake and on to `carry`'s and the
    /// phase's enables, and the builder's `payload_ready` out to `fw_tx_ready`.
    fw_payload_slice: SkidBuffer,
    fw_frame_slice: SkidBuffer,
    /// Between the arbiter and checksum insertion: `tx_checksum`'s ready (its ring fill
    /// level) would otherwise run through the arbiter and the builder into `mpa_tx`.
    tx_slice: SkidBuffer,
    checksums: TxChecksum,
    cmd_range: IndexRange<INDEX_BITS>,
    tx_range: IndexRange<INDEX_BITS>,
    clear_range: IndexRange<INDEX_BITS>,

    // Receive buffers. Frames take the banks in turn; a bank is busy from its frame's
    // last beat until the frame is dropped, or decided on and needs no replay, or
    // replayed for the last time.
    /// The bank the arriving frame's raw beats go to, and its next beat.
    raw_bank: DFF<Bits<BANK_BITS>>,
    raw_wr: DFF<Bits<FRAME_BUFFER_BITS>>,
    /// The bank of the oldest frame still waiting for the parser's verdict (the
    /// parser's payload is that frame's), and its next payload beat.
    payload_bank: DFF<Bits<BANK_BITS>>,
    payload_wr: DFF<Bits<FRAME_BUFFER_BITS>>,
    /// Each bank's raw frame: its last beat `[7:0]` and that beat's keep `[15:8]`,
    /// bank `b` in bits `16b..16b+16`, kept from its last beat until its verdict.
    raw_ends: DFF<Bits<64>>,
    raw_end: Signal<Local, Bits<64>>,
    verdict_end: Signal<Local, Bits<64>>,
    bank_busy: DFF<Bits<4>>,
    /// The banks (one-hot) released this cycle: the OR of the three releases.
    bank_release: Signal<Local, Bits<4>>,
    /// The bank (one-hot) a frame's last raw beat went to in the cycle before, marked in
    /// `bank_busy` a cycle late: the network handshake then feeds one register's
    /// four inputs, not the busy bits' set-and-release logic. Nothing reads the bank's
    /// busy bit sooner: `raw_bank_free` looks at the bank after it, and its verdict,
    /// which may release it, comes two cycles after the last beat at the earliest.
    bank_filled: DFF<Bits<4>>,
    /// `raw_bank` is free, registered (from the bank the next cycle writes, and the
    /// busy bits before this cycle's releases: a freed bank shows a cycle late), so the
    /// parser's input valid and `net_rx_ready` start at a flip-flop.
    raw_bank_free: DFF<Bit>,
    /// The bank after `raw_bank`.
    raw_bank_next: Signal<Local, Bits<BANK_BITS>>,
    /// A network beat is taken this cycle.
    net_take: Signal<Local, Bit>,
    /// The parser's verdict on the oldest waiting frame: it is good (held for the
    /// controller) or dropped (late-failed, or dropped outright by the parser).
    verdict_good: Signal<Local, Bit>,
    verdict_drop: Signal<Local, Bit>,
    /// Banks freed this cycle: by a dropped frame, by the controller (a frame of
    /// which nothing is replayed), by the delivery (its last read of the bank).
    front_release: Signal<Local, Bit>,
    back_release: Signal<Local, Bit>,
    /// Held frames: good, their verdicts in, waiting for the controller, oldest at
    /// `held_head`; each its bank, buffer ends, the parser's fields (which move on with
    /// the next frame) and whether it is for this NIC, packed: raw frame's last beat
    /// and keep `[15:0]`, payload's last beat `[23:16]` and keep `[31:24]`, source and
    /// destination address `[63:32]`, `[95:64]`, ports `[111:96]`, `[127:112]`,
    /// sequence and acknowledgment numbers `[159:128]`, `[191:160]`, flags `[196:192]`,
    /// window `[212:197]`, payload length `[228:213]`, for this NIC `[229]`, bank
    /// `[231:230]`. A frame is held only while its bank is busy, so four places always
    /// have room: the parser never waits (its stages advance every cycle).
    held0: DFF<Bits<232>>,
    held1: DFF<Bits<232>>,
    held2: DFF<Bits<232>>,
    held3: DFF<Bits<232>>,
    /// Beside each held word: its payload is an RTR FPDU, whole (`rtr_final`: Send,
    /// Write, Read), written a cycle after the word (see `rtr_verdict`). (In the held
    /// word itself, RustHDL's whole-word write of the late bits kept yosys from seeing
    /// the other bits hold: a multiplexer in front of each of the 928 bits, 880 LUT4.)
    held_rtr0: DFF<Bits<3>>,
    held_rtr1: DFF<Bits<3>>,
    held_rtr2: DFF<Bits<3>>,
    held_rtr3: DFF<Bits<3>>,
    head_rtr: Signal<Local, Bits<3>>,
    held_set0: DFF<Bits<SET_BITS>>,
    held_set1: DFF<Bits<SET_BITS>>,
    held_set2: DFF<Bits<SET_BITS>>,
    held_set3: DFF<Bits<SET_BITS>>,
    head_set: Signal<Local, Bits<SET_BITS>>,
    held_head: DFF<Bits<2>>,
    held_tail: DFF<Bits<2>>,
    held_count: DFF<Bits<3>>,
    /// The frame the parser's verdict holds, packed, and the oldest held frame.
    verdict_held: Signal<Local, Bits<232>>,
    /// The parser's destination address is ours, compared a cycle before the verdict
    /// reads it: the parser's header fields hold from the frame's beat 4 until the
    /// next frame's beat 3 is taken, at least a cycle after the verdict, so they change
    /// two cycles after it at the earliest (`tcp_rx`: the verdict comes three cycles
    /// after the last beat, and stalls hold both).
    verdict_for_us: DFF<Bit>,
    head_held: Signal<Local, Bits<232>>,
    /// The payload against the RTR FPDUs iwnic sends (`rtr_match`), compared as it is
    /// written into the payload buffer, a stage behind it so the compare has a cycle of
    /// its own: the beat's match bits (`rtr_beat`, per quarter of the beat, registered;
    /// `rtr_beat_all` ANDs the quarters of each type), whether it was a
    /// payload's beat 0 and whether there was a beat; the match of the payload's beats
    /// before it; the payload length against the FPDUs' lengths (`rtr_length`,
    /// registered from the parser's field, which holds for two cycles after the
    /// verdict).
    rtr_beat: RtrBeatMatch,
    rtr_length: RtrLength,
    rtr_beat_equal: DFF<Bits<12>>,
    rtr_beat_first: DFF<Bit>,
    rtr_beat_valid: DFF<Bit>,
    rtr_match: DFF<Bits<3>>,
    rtr_len_equal: DFF<Bits<3>>,
    /// The match of the payload up to the registered beat, and with the length: at
    /// most one bit set (the three lengths differ), valid the cycle after the verdict.
    rtr_beat_all: Signal<Local, Bits<3>>,
    rtr_so_far: Signal<Local, Bits<3>>,
    rtr_final: Signal<Local, Bits<3>>,
    /// The verdict held a frame in the cycle before, in held place `rtr_slot`: its
    /// match bits (`rtr_final`) go into that place's `held_rtr` now. (With the last beat's compare
    /// in the verdict's cycle, the compare, the AND with the beats before and the
    /// held words' enables would be in series behind the parser's output register.)
    /// A frame taken by the controller in this same cycle takes them from `rtr_final`.
    rtr_verdict: DFF<Bit>,
    rtr_slot: DFF<Bits<2>>,
    /// The controller takes the held frame this cycle.
    frame_taken: Signal<Local, Bit>,
    /// The frame the controller works on: its bank, buffer ends and header fields.
    work_bank: DFF<Bits<BANK_BITS>>,
    w_raw_last: DFF<Bits<FRAME_BUFFER_BITS>>,
    w_raw_last_keep: DFF<Bits<8>>,
    w_payload_last: DFF<Bits<FRAME_BUFFER_BITS>>,
    w_payload_last_keep: DFF<Bits<8>>,
    w_src_ip: DFF<Bits<32>>,
    w_dst_ip: DFF<Bits<32>>,
    w_src_port: DFF<Bits<16>>,
    w_dst_port: DFF<Bits<16>>,
    w_seq: DFF<Bits<32>>,
    w_ack: DFF<Bits<32>>,
    w_seg_flags: DFF<Bits<5>>,
    w_window: DFF<Bits<16>>,
    w_payload_len: DFF<Bits<16>>,
    /// The payload is an RTR FPDU, whole: Send, Write, Read (its `held_rtr`).
    w_rtr: DFF<Bits<3>>,

    // The controller.
    control: DFF<Control>,
    /// The delivery, and the segment it works on: bank, buffer ends, connection index,
    /// whether its MPA stream failed (for the next segment's decision, whose context
    /// may have been read before the failure was written).
    deliver: DFF<Deliver>,
    d_bank: DFF<Bits<BANK_BITS>>,
    d_raw_last: DFF<Bits<FRAME_BUFFER_BITS>>,
    d_raw_last_keep: DFF<Bits<8>>,
    d_payload_last: DFF<Bits<FRAME_BUFFER_BITS>>,
    d_payload_last_keep: DFF<Bits<8>>,
    d_index: DFF<Bits<16>>,
    d_failed: DFF<Bit>,
    /// The segment was a flow's RTR, taken by the datapath: its kind as `event_rtr`
    /// gives it (1 Send, 2 Write, 3 Read; 0 for every other segment), for its event.
    d_rtr: DFF<Bits<2>>,
    /// The segment's RX descriptor (`iwnic_proto::net::RxDescriptor`) as its four beats
    /// go to the firmware queue, without beat 2's and beat 3's high bits (always zero),
    /// packed at the hand-over from the controller's header fields, which move on with
    /// the next frame while the delivery runs.
    d_descriptor0: DFF<Bits<64>>,
    d_descriptor1: DFF<Bits<64>>,
    d_descriptor2: DFF<Bits<53>>,
    d_descriptor3: DFF<Bits<16>>,
    /// The delivered segment's ACK, or a `ctx_op` 3 command's, waits for the segment
    /// builder (it goes while the payload is replayed: its fields are the working copy's,
    /// which stays until the delivery is idle).
    ack_pending: DFF<Bit>,
    /// The delivery is idle: the controller may decide the next segment (and hand it
    /// over the cycle after), start a command or a host ULPDU. (Also letting them start
    /// in the cycle the delivery's ACK goes to the builder put the builder's ready in
    /// front of the controller's next state: 95.7 MHz.)
    deliver_idle: Signal<Local, Bit>,
    /// The controller hands the segment (its bank, buffer ends and flow) to the delivery.
    hand_over: Signal<Local, Bit>,
    /// The segment being decided is of the flow the last delivery failed.
    fail_forward: DFF<Bit>,
    /// The flow of the segment being decided has failed (its context or the forward).
    rx_failed: Signal<Local, Bit>,
    /// A FIN goes to the firmware after the segment's payload (unless the segment was
    /// out of order).
    rx_fin_after: Signal<Local, Bit>,
    /// `new_misc` with the forwarded failure.
    rx_new_misc: Signal<Local, Bits<MISC_BITS>>,
    /// `control` is in the state named: one-hot copies of the states that write
    /// contexts, so the write data's selection starts at a flip-flop.
    at_clear: DFF<Bit>,
    at_cmd_act: DFF<Bit>,
    at_rx_decide: DFF<Bit>,
    at_rx_mpa_drain: DFF<Bit>,
    at_tx_decide: DFF<Bit>,
    /// Eighths of the context's tuple equal the command's (bit `i`: bits `12i..12i+12`;
    /// valid in CmdAct, registered from the context in CmdCheck), and so a context
    /// write command rewrites the flow it names, which has failed.
    tuple_same: DFF<Bits<8>>,
    tuple_diff: Signal<Local, Bits<96>>,
    rewrite_keeps_failed: Signal<Local, Bit>,
    /// The command removes a flow that is there (`cmd_op` 2, `flow_valid`), registered
    /// beside `flow_valid`: it clears the context's misc word in CmdAct.
    cmd_removes_flow: DFF<Bit>,
    /// Which write `ctx_misc` takes this cycle: all zero (clear, removal), the
    /// received segment's update, the rewrite keeping the failed bit, the delivery's
    /// failure; and its data's two terms.
    misc_zero_write: Signal<Local, Bit>,
    misc_rx_write: Signal<Local, Bit>,
    misc_keep_failed_write: Signal<Local, Bit>,
    misc_failed_write: Signal<Local, Bit>,
    misc_w_term: Signal<Local, Bits<MISC_BITS>>,
    misc_new_term: Signal<Local, Bits<MISC_BITS>>,
    /// In RxLookup: the frame is for this NIC and its lookup waits for the table.
    lookup_request: DFF<Bit>,
    /// In RxDecide: the segment stays on the datapath (a flow in FPDU mode, no RTR
    /// expected, ACK and neither RST nor SYN).
    rx_datapath: DFF<Bit>,
    /// The segment may be the flow's RTR (registered beside `rx_datapath`: a valid
    /// flow expecting its RTR, ACK without RST, SYN and FIN, its payload one of the RTR
    /// FPDUs), and is taken (registered beside `ack_moves`: that, in order, and its
    /// ACK at `snd_nxt`), valid in RxDecide.
    rtr_candidate: DFF<Bit>,
    rtr_take: DFF<Bit>,
    /// The context's valid and failed bits, and the ULPDU limit (see `max_ulpdu`).
    flow_valid: DFF<Bit>,
    flow_failed: DFF<Bit>,
    flow_max_ulpdu: DFF<Bits<16>>,
    /// In RxDecide: the sequence numbers the segment leaves.
    rx_new_seqs: Signal<Local, Bits<96>>,
    /// Counts contexts cleared after reset; `clear_index` is below the context count.
    clear_index: DFF<Bits<17>>,
    clear_in_range: DFF<Bit>,
    /// The context being worked on: its index (the RAMs' address) and working copy.
    ctx_addr: DFF<Bits<16>>,
    w_tuple: DFF<Bits<96>>,
    w_macs: DFF<Bits<96>>,
    w_seqs: DFF<Bits<96>>,
    w_misc: DFF<Bits<MISC_BITS>>,
    /// The command taken: its operation; whether it writes a context (`ctx_op` 0 or 3)
    /// and whether it then sends an ACK (3), decoded as it is taken.
    cmd_op: DFF<Bits<2>>,
    cmd_writes: DFF<Bit>,
    cmd_acks: DFF<Bit>,
    /// The segment the builder is asked for: TCP flags and payload length.
    w_flags: DFF<Bits<8>>,
    w_len: DFF<Bits<16>>,
    /// The delivered segment goes to the firmware after its ACK (a FIN whose segment was
    /// not out of order).
    rx_firmware_after: DFF<Bit>,
    /// The host ULPDU being sent: its length.
    tx_len: DFF<Bits<16>>,
    /// Replaying a buffer: the next beat to read, and whether the last one has been.
    replay: DFF<Bits<FRAME_BUFFER_BITS>>,
    replay_read_all: DFF<Bit>,
    /// The beat read this cycle (0 in the start states), and whether it is the last.
    replay_beat: Signal<Local, Bits<FRAME_BUFFER_BITS>>,
    replay_beat_last: Signal<Local, Bit>,
    /// A beat is read this cycle (the buffers' read enable).
    replay_issue: Signal<Local, Bit>,
    /// The beat in the buffers' read latch (A) and in their output registers (B): there,
    /// and last of the frame.
    replay_a_valid: DFF<Bit>,
    replay_a_last: DFF<Bit>,
    replay_b_valid: DFF<Bit>,
    replay_b_last: DFF<Bit>,
    /// The sink (`mpa_rx`, or the firmware queue's slice) takes a beat this cycle if
    /// one is offered; the output registers load.
    replay_sink_ready: Signal<Local, Bit>,
    replay_b_load: Signal<Local, Bit>,
    /// The delivery is in `MpaFeed` / `FirmwareCopy`: flags that follow the delivery's
    /// transitions into and out of those states, so the replay's read enable (fanned
    /// out to every tile of both buffers) starts at flip-flops, not at a state decode.
    at_mpa_feed: DFF<Bit>,
    at_firmware_copy: DFF<Bit>,
    /// The delivery is in `FirmwareDescriptor` (a flag as the two above: it selects the
    /// firmware slice's input and joins the replay's read enable).
    at_firmware_descriptor: DFF<Bit>,
    /// The descriptor beat offered to the firmware queue, and its data.
    descriptor_beat: DFF<Bits<2>>,
    descriptor_data: Signal<Local, Bits<64>>,
    /// The descriptor's last beat goes to the firmware queue this cycle.
    descriptor_done: Signal<Local, Bit>,
    /// The frame's last beat goes to its sink this cycle.
    replay_done: Signal<Local, Bit>,
    /// The ULPDU limit of the delivery, [`MAX_RX_ULPDU_LEN`] for every flow, loaded at
    /// RxDecide through `flow_max_ulpdu` as the per-flow limit once was. Yosys folds both
    /// registers into the constant; kept because the netlist it maps from this form met
    /// timing (123.9, 132.8 and 124.0 MHz with the default placement and seeds 1 and 2,
    /// before the keepalive ACK), where the literal wired into `mpa_rx` gave 109.3, 105.2
    /// and 118.3 MHz: the same logic, mapped and placed differently (see the timing notes
    /// above).
    max_ulpdu: DFF<Bits<16>>,
    /// Results of a context command.
    done_q: DFF<Bit>,
    status_q: DFF<Bit>,
    rd_tuple: DFF<Bits<96>>,
    rd_macs: DFF<Bits<96>>,
    rd_seqs: DFF<Bits<96>>,
    rd_misc: DFF<Bits<MISC_BITS>>,
    /// The event register.
    event_q: DFF<Bit>,
    event_index_q: DFF<Bits<16>>,
    event_crc_q: DFF<Bit>,
    event_rtr_q: DFF<Bits<2>>,

    // Decisions on a received segment (from the registered context and the parser's
    // fields), registered every cycle.
    seq_snd_una: Signal<Local, Bits<32>>,
    seq_snd_nxt: Signal<Local, Bits<32>>,
    seq_rcv_nxt: Signal<Local, Bits<32>>,
    /// Sequence-number differences, registered the cycle after the context is there
    /// (RxCompute); the decisions from them, the cycle after that (RxCompare): no
    /// 32-bit subtraction and zero test share a cycle.
    ack_past_una: DFF<Bits<32>>,
    ack_past_nxt: DFF<Bits<32>>,
    ack_moves: DFF<Bit>,
    /// The 32-bit selections from the registered decisions, in RxDecide.
    new_snd_una: Signal<Local, Bits<32>>,
    seq_offset: DFF<Bits<32>>,
    end_offset: DFF<Bits<32>>,
    has_payload: DFF<Bit>,
    in_order: DFF<Bit>,
    duplicate: DFF<Bit>,
    new_rcv_nxt: Signal<Local, Bits<32>>,
    rcv_after_payload: DFF<Bits<32>>,
    /// The sequence number after the segment's payload (registered from `w_seq` and
    /// `w_payload_len`, so a cycle before the context arrives).
    w_seq_end: DFF<Bits<32>>,
    new_misc: DFF<Bits<MISC_BITS>>,
    /// A host ULPDU's FPDU length and whether the flow takes it.
    fpdu_len: DFF<Bits<32>>,
    /// `snd_nxt` after it, computed at 32 bits on its own: inside the 96-bit context
    /// word, Verilog would widen the sum and carry into `snd_una`.
    new_snd_nxt: DFF<Bits<32>>,
    tx_refused: DFF<Bit>,
    /// The tuple of the command (packed).
    cmd_tuple: Signal<Local, Bits<96>>,

    // The firmware's transmit front end.
    fw_tx_state: DFF<FwTx>,
    /// The descriptor beat taken next (0..4) and the beats taken, as they came (byte
    /// `8k + i` of the descriptor in `fw_desc<k>` bits `8i+7:8i`).
    fw_desc_beat: DFF<Bits<3>>,
    fw_desc0: DFF<Bits<64>>,
    fw_desc1: DFF<Bits<64>>,
    fw_desc2: DFF<Bits<64>>,
    fw_desc3: DFF<Bits<64>>,
    fw_desc4: DFF<Bits<64>>,
    /// Payload beats follow the descriptor (the packet did not end on its fifth beat).
    fw_payload_follows: DFF<Bit>,
    /// The descriptor's flags byte.
    fw_flags: Signal<Local, Bits<8>>,
    fw_tx_dropped: EventCounter,

    // Transmit arbitration.
    tx_source: DFF<TxSource>,
    tx_grant: Signal<Local, TxSource>,

    // Counters the blocks do not keep (each a cycle behind its event: the decisions
    // that raise them end at one flip-flop, not at 32 with an adder behind).
    frames_in: EventCounter,
    frames_out: EventCounter,
    not_for_us: EventCounter,
    to_firmware: EventCounter,
    out_of_order: EventCounter,
    duplicates: EventCounter,
    acks_sent: EventCounter,
    fpdus_in: EventCounter,
    fpdus_out: EventCounter,
    crc_errors: EventCounter,
    length_errors: EventCounter,
    host_refused: EventCounter,
    rtrs_taken: EventCounter,
    ticks: DFF<Bits<64>>,
}

/// The ECP5 build: 256 flows.
pub type EcpNicTop = NicTop<6, 8>;
/// The simulation build: contexts for the testbench firmware's 2,048 connections, in a
/// flow table of 8,192 entries.
pub type SimNicTop = NicTop<SIM_SET_BITS, SIM_INDEX_BITS>;
/// The simulation build's flow table has 2^`SIM_SET_BITS` buckets.
pub const SIM_SET_BITS: usize = 11;
/// The simulation build has contexts for connection indices below 2^`SIM_INDEX_BITS`.
pub const SIM_INDEX_BITS: usize = 11;

impl<const SET_BITS: usize, const INDEX_BITS: usize> Logic for NicTop<SET_BITS, INDEX_BITS> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            verdict_for_us,
            cmd_removes_flow,
            raw_bank,
            raw_wr,
            payload_bank,
            payload_wr,
            raw_ends,
            bank_busy,
            bank_filled,
            raw_bank_free,
            held0,
            held1,
            held2,
            held3,
            held_set0,
            held_set1,
            held_set2,
            held_set3,
            held_rtr0,
            held_rtr1,
            held_rtr2,
            held_rtr3,
            held_head,
            held_tail,
            held_count,
            work_bank,
            w_raw_last,
            w_raw_last_keep,
            w_payload_last,
            w_payload_last_keep,
            w_src_ip,
            w_dst_ip,
            w_src_port,
            w_dst_port,
            w_seq,
            w_ack,
            w_seg_flags,
            w_window,
            w_payload_len,
            w_rtr,
            rtr_beat_equal,
            rtr_beat_first,
            rtr_beat_valid,
            rtr_match,
            rtr_len_equal,
            rtr_verdict,
            rtr_slot,
            rtr_candidate,
            rtr_take,
            d_rtr,
            event_rtr_q,
            control,
            deliver,
            d_bank,
            d_raw_last,
            d_raw_last_keep,
            d_payload_last,
            d_payload_last_keep,
            d_index,
            d_failed,
            d_descriptor0,
            d_descriptor1,
            d_descriptor2,
            d_descriptor3,
            ack_pending,
            fail_forward,
            at_clear,
            at_cmd_act,
            at_rx_decide,
            at_rx_mpa_drain,
            at_tx_decide,
            lookup_request,
            rx_datapath,
            flow_valid,
            flow_failed,
            flow_max_ulpdu,
            tuple_same,
            clear_index,
            clear_in_range,
            ctx_addr,
            w_tuple,
            w_macs,
            w_seqs,
            w_misc,
            cmd_op,
            cmd_writes,
            cmd_acks,
            w_flags,
            w_len,
            rx_firmware_after,
            tx_len,
            replay,
            replay_read_all,
            replay_a_valid,
            replay_a_last,
            replay_b_valid,
            replay_b_last,
            max_ulpdu,
            done_q,
            status_q,
            rd_tuple,
            rd_macs,
            rd_seqs,
            rd_misc,
            event_q,
            event_index_q,
            event_crc_q,
            ack_past_una,
            ack_past_nxt,
            seq_offset,
            end_offset,
            ack_moves,
            w_seq_end,
            has_payload,
            in_order,
            duplicate,
            rcv_after_payload,
            new_misc,
            fpdu_len,
            new_snd_nxt,
            tx_refused,
            tx_source,
            fw_tx_state,
            fw_desc_beat,
            fw_desc0,
            fw_desc1,
            fw_desc2,
            fw_desc3,
            fw_desc4,
            fw_payload_follows,
            ticks,
            at_mpa_feed,
            at_firmware_copy,
            at_firmware_descriptor,
            descriptor_beat,
            lookup_set
        );
        self.parser.clock.next = self.clock.val();
        self.parser.reset.next = self.reset.val();
        self.flows.clock.next = self.clock.val();
        self.flows.reset.next = self.reset.val();
        self.host_queue.clock.next = self.clock.val();
        self.host_queue.reset.next = self.reset.val();
        self.firmware_queue.clock.next = self.clock.val();
        self.firmware_queue.reset.next = self.reset.val();
        self.framer.clock.next = self.clock.val();
        self.framer.reset.next = self.reset.val();
        self.builder.clock.next = self.clock.val();
        self.builder.reset.next = self.reset.val();
        self.tx_slice.clock.next = self.clock.val();
        self.tx_slice.reset.next = self.reset.val();
        self.frame_slice.clock.next = self.clock.val();
        self.frame_slice.reset.next = self.reset.val();
        self.fw_builder.clock.next = self.clock.val();
        self.fw_builder.reset.next = self.reset.val();
        self.fw_payload_slice.clock.next = self.clock.val();
        self.fw_payload_slice.reset.next = self.reset.val();
        self.fw_frame_slice.clock.next = self.clock.val();
        self.fw_frame_slice.reset.next = self.reset.val();
        self.fpdu_slice.clock.next = self.clock.val();
        self.fpdu_slice.reset.next = self.reset.val();
        self.firmware_slice.clock.next = self.clock.val();
        self.firmware_slice.reset.next = self.reset.val();
        self.checksums.clock.next = self.clock.val();
        self.checksums.reset.next = self.reset.val();
        self.mpa_rx.clock.next = self.clock.val();
        self.raw.clock.next = self.clock.val();
        self.payload.clock.next = self.clock.val();
        self.ctx_tuple.clock.next = self.clock.val();
        self.ctx_tuple.output_enable.next = true;
        self.ctx_macs.clock.next = self.clock.val();
        self.ctx_macs.output_enable.next = true;
        self.ctx_seqs.clock.next = self.clock.val();
        self.ctx_seqs.output_enable.next = true;
        self.ctx_misc.clock.next = self.clock.val();
        self.ctx_misc.output_enable.next = true;
        self.frames_in.clock.next = self.clock.val();
        self.frames_in.reset.next = self.reset.val();
        self.frames_in.increment.next = false;
        self.frames_out.clock.next = self.clock.val();
        self.frames_out.reset.next = self.reset.val();
        self.frames_out.increment.next = false;
        self.not_for_us.clock.next = self.clock.val();
        self.not_for_us.reset.next = self.reset.val();
        self.not_for_us.increment.next = false;
        self.to_firmware.clock.next = self.clock.val();
        self.to_firmware.reset.next = self.reset.val();
        self.to_firmware.increment.next = false;
        self.out_of_order.clock.next = self.clock.val();
        self.out_of_order.reset.next = self.reset.val();
        self.out_of_order.increment.next = false;
        self.duplicates.clock.next = self.clock.val();
        self.duplicates.reset.next = self.reset.val();
        self.duplicates.increment.next = false;
        self.acks_sent.clock.next = self.clock.val();
        self.acks_sent.reset.next = self.reset.val();
        self.acks_sent.increment.next = false;
        self.fpdus_in.clock.next = self.clock.val();
        self.fpdus_in.reset.next = self.reset.val();
        self.fpdus_in.increment.next = false;
        self.fpdus_out.clock.next = self.clock.val();
        self.fpdus_out.reset.next = self.reset.val();
        self.fpdus_out.increment.next = false;
        self.crc_errors.clock.next = self.clock.val();
        self.crc_errors.reset.next = self.reset.val();
        self.crc_errors.increment.next = false;
        self.length_errors.clock.next = self.clock.val();
        self.length_errors.reset.next = self.reset.val();
        self.length_errors.increment.next = false;
        self.host_refused.clock.next = self.clock.val();
        self.host_refused.reset.next = self.reset.val();
        self.host_refused.increment.next = false;
        self.fw_tx_dropped.clock.next = self.clock.val();
        self.fw_tx_dropped.reset.next = self.reset.val();
        self.fw_tx_dropped.increment.next = false;
        self.rtrs_taken.clock.next = self.clock.val();
        self.rtrs_taken.reset.next = self.reset.val();
        self.rtrs_taken.increment.next = false;

        // ---- Receive: frames into the buffers, kept only on the parser's good bit ----
        // A frame's raw beats go to the next bank once it is free; the parser's
        // payload, a few cycles behind, to the bank of the oldest frame without a
        // verdict. The verdicts come in the frames' order, one a frame.
        self.raw_bank_next.next = self.raw_bank.q.val() + 1;
        self.raw_bank_free.d.next = (self.bank_busy.q.val()
            & (bit_cast::<4, 1>(true.into()) << bit_cast::<4, BANK_BITS>(self.raw_bank.q.val())))
            == 0;
        self.parser.frame_data.next = self.net_rx_data.val();
        self.parser.frame_keep.next = self.net_rx_keep.val();
        self.parser.frame_last.next = self.net_rx_last.val();
        self.parser.frame_valid.next = self.net_rx_valid.val() & self.raw_bank_free.q.val();
        self.net_rx_ready.next = self.parser.frame_ready.val() & self.raw_bank_free.q.val();
        self.net_take.next = self.net_rx_valid.val() & self.net_rx_ready.val();
        self.raw.write_address.next =
            (bit_cast::<BANKED_BUFFER_BITS, BANK_BITS>(self.raw_bank.q.val()) << 8)
                | bit_cast::<BANKED_BUFFER_BITS, FRAME_BUFFER_BITS>(self.raw_wr.q.val());
        self.raw.write_data.next = self.net_rx_data.val();
        self.raw.write_enable.next = self.net_take.val();
        self.raw_end.next = (bit_cast::<64, 8>(self.net_rx_keep.val()) << 8)
            | bit_cast::<64, FRAME_BUFFER_BITS>(self.raw_wr.q.val());
        if self.net_take.val() {
            // A frame too long for the buffer is oversized: the parser drops it, so its
            // tail may overwrite the last beat.
            if self.raw_wr.q.val() != 255 {
                self.raw_wr.d.next = self.raw_wr.q.val() + 1;
            }
            if self.net_rx_last.val() {
                match self.raw_bank.q.val().index() {
                    0 => {
                        self.raw_ends.d.next =
                            (self.raw_ends.q.val() & 0xFFFF_FFFF_FFFF_0000_u64) | self.raw_end.val()
                    }
                    1 => {
                        self.raw_ends.d.next = (self.raw_ends.q.val() & 0xFFFF_FFFF_0000_FFFF_u64)
                            | (self.raw_end.val() << 16)
                    }
                    2 => {
                        self.raw_ends.d.next = (self.raw_ends.q.val() & 0xFFFF_0000_FFFF_FFFF_u64)
                            | (self.raw_end.val() << 32)
                    }
                    _ => {
                        self.raw_ends.d.next = (self.raw_ends.q.val() & 0x0000_FFFF_FFFF_FFFF_u64)
                            | (self.raw_end.val() << 48)
                    }
                }
                self.raw_bank.d.next = self.raw_bank_next.val();
                self.raw_bank_free.d.next = (self.bank_busy.q.val()
                    & (bit_cast::<4, 1>(true.into())
                        << bit_cast::<4, BANK_BITS>(self.raw_bank_next.val())))
                    == 0;
                self.raw_wr.d.next = 0.into();
                self.frames_in.increment.next = true;
            }
        }
        self.parser.payload_ready.next = true;
        self.payload.write_address.next =
            (bit_cast::<BANKED_BUFFER_BITS, BANK_BITS>(self.payload_bank.q.val()) << 8)
                | bit_cast::<BANKED_BUFFER_BITS, FRAME_BUFFER_BITS>(self.payload_wr.q.val());
        self.payload.write_data.next = self.parser.payload_data.val();
        self.payload.write_enable.next = self.parser.payload_valid.val();
        self.verdict_good.next = false;
        self.verdict_drop.next = self.parser.frame_unseen.val();
        self.verdict_end.next =
            self.raw_ends.q.val() >> (bit_cast::<64, BANK_BITS>(self.payload_bank.q.val()) << 4);
        self.verdict_for_us.d.next = self.parser.seg_dst_ip.val() == self.local_ip.val();
        self.lookup_hash.local_ip.next = self.parser.seg_dst_ip.val();
        self.lookup_hash.local_port.next = self.parser.seg_dst_port.val();
        self.lookup_hash.remote_ip.next = self.parser.seg_src_ip.val();
        self.lookup_hash.remote_port.next = self.parser.seg_src_port.val();
        self.verdict_held.next = bit_cast::<232, 16>(self.verdict_end.val().get_bits::<16>(0))
            | (bit_cast::<232, FRAME_BUFFER_BITS>(self.payload_wr.q.val()) << 16)
            | (bit_cast::<232, 8>(self.parser.payload_keep.val()) << 24)
            | (bit_cast::<232, 32>(self.parser.seg_src_ip.val()) << 32)
            | (bit_cast::<232, 32>(self.parser.seg_dst_ip.val()) << 64)
            | (bit_cast::<232, 16>(self.parser.seg_src_port.val()) << 96)
            | (bit_cast::<232, 16>(self.parser.seg_dst_port.val()) << 112)
            | (bit_cast::<232, 32>(self.parser.seg_seq.val()) << 128)
            | (bit_cast::<232, 32>(self.parser.seg_ack.val()) << 160)
            | (bit_cast::<232, 5>(self.parser.seg_flags.val()) << 192)
            | (bit_cast::<232, 16>(self.parser.seg_window.val()) << 197)
            | (bit_cast::<232, 16>(self.parser.seg_payload_len.val()) << 213)
            | (bit_cast::<232, 1>(self.verdict_for_us.q.val().into()) << 229)
            | (bit_cast::<232, BANK_BITS>(self.payload_bank.q.val()) << 230);
        if self.parser.payload_valid.val() {
            if self.payload_wr.q.val() != 255 {
                self.payload_wr.d.next = self.payload_wr.q.val() + 1;
            }
            if self.parser.payload_last.val() {
                self.verdict_good.next = self.parser.payload_good.val();
                self.verdict_drop.next = !self.parser.payload_good.val();
            }
        }
        // The payload against the RTR FPDUs, a stage behind the buffer's write: the
        // beat's compare registered, ANDed with the beats before it the cycle after.
        self.rtr_beat.beat.next = self.payload_wr.q.val();
        self.rtr_beat.data.next = self.parser.payload_data.val();
        self.rtr_beat_equal.d.next = self.rtr_beat.equal.val();
        self.rtr_beat_first.d.next = self.payload_wr.q.val() == 0;
        self.rtr_beat_valid.d.next = self.parser.payload_valid.val();
        self.rtr_length.len.next = self.parser.seg_payload_len.val();
        self.rtr_len_equal.d.next = self.rtr_length.equal.val();
        self.rtr_beat_all.next =
            bit_cast::<3, 1>((self.rtr_beat_equal.q.val().get_bits::<4>(0) == 0xF).into())
                | (bit_cast::<3, 1>((self.rtr_beat_equal.q.val().get_bits::<4>(4) == 0xF).into())
                    << 1)
                | (bit_cast::<3, 1>((self.rtr_beat_equal.q.val().get_bits::<4>(8) == 0xF).into())
                    << 2);
        self.rtr_so_far.next = self.rtr_match.q.val() & self.rtr_beat_all.val();
        if self.rtr_beat_first.q.val() {
            self.rtr_so_far.next = self.rtr_beat_all.val();
        }
        if self.rtr_beat_valid.q.val() {
            self.rtr_match.d.next = self.rtr_so_far.val();
        }
        self.rtr_final.next = self.rtr_so_far.val() & self.rtr_len_equal.q.val();
        self.rtr_verdict.d.next = self.verdict_good.val();
        self.rtr_slot.d.next = self.held_tail.q.val();
        if self.verdict_good.val() {
            match self.held_tail.q.val().index() {
                0 => {
                    self.held0.d.next = self.verdict_held.val();
                    self.held_set0.d.next = self.lookup_hash.set.val();
                }
                1 => {
                    self.held1.d.next = self.verdict_held.val();
                    self.held_set1.d.next = self.lookup_hash.set.val();
                }
                2 => {
                    self.held2.d.next = self.verdict_held.val();
                    self.held_set2.d.next = self.lookup_hash.set.val();
                }
                _ => {
                    self.held3.d.next = self.verdict_held.val();
                    self.held_set3.d.next = self.lookup_hash.set.val();
                }
            }
            self.held_tail.d.next = self.held_tail.q.val() + 1;
        }
        // The match bits of the frame held in the cycle before (never the place the
        // verdict fills now, which is the next one).
        if self.rtr_verdict.q.val() {
            match self.rtr_slot.q.val().index() {
                0 => {
                    self.held_rtr0.d.next = self.rtr_final.val();
                }
                1 => {
                    self.held_rtr1.d.next = self.rtr_final.val();
                }
                2 => {
                    self.held_rtr2.d.next = self.rtr_final.val();
                }
                _ => {
                    self.held_rtr3.d.next = self.rtr_final.val();
                }
            }
        }
        match self.held_head.q.val().index() {
            0 => {
                self.head_held.next = self.held0.q.val();
                self.head_set.next = self.held_set0.q.val();
                self.head_rtr.next = self.held_rtr0.q.val();
            }
            1 => {
                self.head_held.next = self.held1.q.val();
                self.head_set.next = self.held_set1.q.val();
                self.head_rtr.next = self.held_rtr1.q.val();
            }
            2 => {
                self.head_held.next = self.held2.q.val();
                self.head_set.next = self.held_set2.q.val();
                self.head_rtr.next = self.held_rtr2.q.val();
            }
            _ => {
                self.head_held.next = self.held3.q.val();
                self.head_set.next = self.held_set3.q.val();
                self.head_rtr.next = self.held_rtr3.q.val();
            }
        }
        if self.verdict_good.val() | self.verdict_drop.val() {
            self.payload_bank.d.next = self.payload_bank.q.val() + 1;
            self.payload_wr.d.next = 0.into();
        }
        self.frame_taken.next = false;

        // ---- The controller's defaults ----
        self.deliver_idle.next =
            (self.deliver.q.val() == Deliver::Idle) & !self.ack_pending.q.val();
        self.hand_over.next = false;
        self.front_release.next = false;
        self.ctx_ready.next =
            (self.control.q.val() == Control::Idle) & self.deliver_idle.val() & !self.reset.val();
        self.host_tx_ready.next = false;
        self.done_q.d.next = false;
        self.cmd_range.index.next = bit_cast::<17, 16>(self.ctx_index.val());
        self.tx_range.index.next = bit_cast::<17, 16>(self.host_tx_index.val());

        self.ctx_tuple.read_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_macs.read_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_seqs.read_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_misc.read_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_tuple.write_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_macs.write_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_seqs.write_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_misc.write_address.next = bit_cast::<INDEX_BITS, 16>(self.ctx_addr.q.val());
        self.ctx_tuple.write_data.next = self.w_tuple.q.val();
        self.ctx_macs.write_data.next = self.w_macs.q.val();
        self.ctx_seqs.write_data.next = self.w_seqs.q.val();
        self.ctx_tuple.write_enable.next = false;
        self.ctx_macs.write_enable.next = false;
        self.ctx_seqs.write_enable.next = false;
        self.ctx_misc.write_enable.next = false;

        // The flow table: lookups of the held frame's tuple (ours is the destination),
        // commands from the register window.
        self.flows.lookup_local_ip.next = self.w_dst_ip.q.val();
        self.flows.lookup_local_port.next = self.w_dst_port.q.val();
        self.flows.lookup_remote_ip.next = self.w_src_ip.q.val();
        self.flows.lookup_remote_port.next = self.w_src_port.q.val();
        self.flows.lookup_set.next = self.lookup_set.q.val();
        // The lookup request is a register (set as RxLookup is entered with a frame for
        // this NIC, cleared when the table takes it): the table's read enables follow
        // it into sixteen block RAMs with no decode in front.
        self.flows.lookup_valid.next = self.lookup_request.q.val();
        if self.cmd_op.q.val() == 2 {
            self.cmd_tuple.next = self.ctx_tuple.read_data.val();
        } else {
            self.cmd_tuple.next = self.w_tuple.q.val();
        }
        self.flows.cmd_local_ip.next = self.cmd_tuple.val().get_bits::<32>(64);
        self.flows.cmd_local_port.next = self.cmd_tuple.val().get_bits::<16>(48);
        self.flows.cmd_remote_ip.next = self.cmd_tuple.val().get_bits::<32>(16);
        self.flows.cmd_remote_port.next = self.cmd_tuple.val().get_bits::<16>(0);
        self.flows.cmd_index.next = self.ctx_addr.q.val();
        self.flows.cmd_remove.next = self.cmd_op.q.val() == 2;
        self.flows.cmd_valid.next = false;

        // What a received segment does to its flow's context (valid in RxDecide).
        self.seq_snd_una.next = self.ctx_seqs.read_data.val().get_bits::<32>(64);
        self.seq_snd_nxt.next = self.ctx_seqs.read_data.val().get_bits::<32>(32);
        self.seq_rcv_nxt.next = self.ctx_seqs.read_data.val().get_bits::<32>(0);
        self.ack_past_una.d.next = self.w_ack.q.val() - self.seq_snd_una.val();
        self.ack_past_nxt.d.next = self.w_ack.q.val() - self.seq_snd_nxt.val();
        self.ack_moves.d.next = self.w_seg_flags.q.val().get_bit(4)
            & (self.ack_past_una.q.val() != 0)
            & !self.ack_past_una.q.val().get_bit(31)
            & ((self.ack_past_nxt.q.val() == 0) | self.ack_past_nxt.q.val().get_bit(31));
        self.new_snd_una.next = self.seq_snd_una.val();
        if self.ack_moves.q.val() {
            self.new_snd_una.next = self.w_ack.q.val();
        }
        self.w_seq_end.d.next = self.w_seq.q.val() + bit_cast::<32, 16>(self.w_payload_len.q.val());
        self.seq_offset.d.next = self.w_seq.q.val() - self.seq_rcv_nxt.val();
        self.end_offset.d.next = self.w_seq_end.q.val() - self.seq_rcv_nxt.val();
        self.has_payload.d.next = self.w_payload_len.q.val() != 0;
        self.in_order.d.next = (self.w_payload_len.q.val() != 0) & (self.seq_offset.q.val() == 0);
        // A segment entirely below `rcv_nxt`: payload the flow has, or none (a keepalive
        // probe at `rcv_nxt` - 1, an old ACK: not acceptable, RFC 9293 §3.10.7.4). Either
        // is answered with an ACK, unless a FIN sends it to the firmware.
        self.duplicate.d.next = self.seq_offset.q.val().get_bit(31)
            & ((self.end_offset.q.val() == 0) | self.end_offset.q.val().get_bit(31));
        self.rcv_after_payload.d.next =
            self.seq_rcv_nxt.val() + bit_cast::<32, 16>(self.w_payload_len.q.val());
        self.new_rcv_nxt.next = self.seq_rcv_nxt.val();
        if self.in_order.q.val() {
            self.new_rcv_nxt.next = self.rcv_after_payload.q.val();
        }
        self.rx_new_seqs.next = (bit_cast::<96, 32>(self.new_snd_una.val()) << 64)
            | (bit_cast::<96, 32>(self.seq_snd_nxt.val()) << 32)
            | bit_cast::<96, 32>(self.new_rcv_nxt.val());
        // The context's flags, registered every cycle: valid the cycle after the context
        // is (RxDecide, CmdAct), so they select writes from a flip-flop rather than from
        // block RAM's route.
        self.flow_valid.d.next = self.ctx_misc.read_data.val().get_bit(51);
        self.cmd_removes_flow.d.next =
            (self.cmd_op.q.val() == 2) & self.ctx_misc.read_data.val().get_bit(51);
        self.flow_failed.d.next = self.ctx_misc.read_data.val().get_bit(50);
        self.flow_max_ulpdu.d.next = 1458.into();
        // Flags ACK 0x10, RST 0x04, SYN 0x02: a segment with RST or SYN, or without ACK,
        // is the firmware's (RFC 9293 §3.10.7.4, RFC 5961), whole and undelivered.
        self.rx_datapath.d.next = self.ctx_misc.read_data.val().get_bit(51)
            & !self.ctx_misc.read_data.val().get_bit(49)
            & self.w_seg_flags.q.val().get_bit(4)
            & !self.w_seg_flags.q.val().get_bit(2)
            & !self.w_seg_flags.q.val().get_bit(1);
        // The flow's RTR, taken here rather than by the firmware: the flow expects it,
        // the segment has ACK and none of RST, SYN and FIN, its payload is one of the
        // RTR FPDUs iwnic sends, whole (`w_rtr`), it is in order and acknowledges
        // `snd_nxt`. A segment of such a flow that fails any of these goes to the
        // firmware as before.
        self.rtr_candidate.d.next = self.ctx_misc.read_data.val().get_bit(51)
            & self.ctx_misc.read_data.val().get_bit(49)
            & self.w_seg_flags.q.val().get_bit(4)
            & !self.w_seg_flags.q.val().get_bit(2)
            & !self.w_seg_flags.q.val().get_bit(1)
            & !self.w_seg_flags.q.val().get_bit(0)
            & self.w_rtr.q.val().any();
        self.rtr_take.d.next = self.rtr_candidate.q.val()
            & (self.ack_past_nxt.q.val() == 0)
            & (self.w_payload_len.q.val() != 0)
            & (self.seq_offset.q.val() == 0);
        // The last delivery failed this segment's flow after its context was read (the
        // controller reads the next segment's context while a delivery runs): registered
        // every cycle, valid in RxDecide, which follows a cycle of idle delivery.
        self.fail_forward.d.next =
            self.d_failed.q.val() & (self.d_index.q.val() == self.ctx_addr.q.val());
        self.rx_failed.next = self.flow_failed.q.val() | self.fail_forward.q.val();
        self.rx_fin_after.next = self.w_seg_flags.q.val().get_bit(0)
            & !(self.has_payload.q.val() & !self.in_order.q.val() & !self.duplicate.q.val());
        self.rx_new_misc.next = self.new_misc.q.val()
            | (bit_cast::<MISC_BITS, 1>(self.fail_forward.q.val().into()) << 50);
        // RTR expected cleared: a segment's update is written only for a flow without
        // it, or with the RTR taken, after which the flow is in FPDU mode.
        self.new_misc.d.next = self.ctx_misc.read_data.val() & 0xD_FFFF_FFFF_FFFF_u64;
        // A rewrite of the same flow (its RTR arrived) keeps its failed bit. The tuple
        // is compared in eighths, registered: two LUT levels each behind the RAM's
        // route (one 96-bit compare did not fit a cycle, nor did quarters in the full
        // design).
        self.tuple_diff.next = self.ctx_tuple.read_data.val() ^ self.w_tuple.q.val();
        self.tuple_same.d.next =
            bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(0).any()).into())
                | (bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(12).any()).into()) << 1)
                | (bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(24).any()).into()) << 2)
                | (bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(36).any()).into()) << 3)
                | (bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(48).any()).into()) << 4)
                | (bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(60).any()).into()) << 5)
                | (bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(72).any()).into()) << 6)
                | (bit_cast::<8, 1>((!self.tuple_diff.val().get_bits::<12>(84).any()).into()) << 7);
        self.rewrite_keeps_failed.next =
            self.flow_valid.q.val() & self.flow_failed.q.val() & (self.tuple_same.q.val() == 0xFF);
        if self.w_seg_flags.q.val().get_bit(4) {
            self.new_misc.d.next = (((self.ctx_misc.read_data.val() >> 32) << 32)
                & 0xD_FFFF_FFFF_FFFF_u64)
                | (self.ctx_misc.read_data.val() & 0xFFFF)
                | (bit_cast::<MISC_BITS, 16>(self.w_window.q.val()) << 16);
        }
        // A host ULPDU's FPDU: length, PAD and CRC (valid in TxDecide).
        self.fpdu_len.d.next = (((bit_cast::<32, 16>(self.tx_len.q.val()) + 5) >> 2) << 2) + 4;
        self.new_snd_nxt.d.next = self.seq_snd_nxt.val() + self.fpdu_len.q.val();
        self.tx_refused.d.next = !self.ctx_misc.read_data.val().get_bit(51)
            | self.ctx_misc.read_data.val().get_bit(49)
            | self.ctx_misc.read_data.val().get_bit(50)
            | (self.fpdu_len.q.val()
                > bit_cast::<32, 16>(self.ctx_misc.read_data.val().get_bits::<16>(0)));

        // Replaying a buffer (payload into mpa_rx, raw frame to the firmware queue):
        // beats are read into the buffers' read latches and output registers (A, B),
        // each holding while the one after it stalls, and go from B to the sink.
        // Beat 0 is read in the start state, so B offers it in the state's second cycle.
        // Before a raw frame the descriptor goes (FirmwareDescriptor, four cycles at
        // least): the replay reads on then with no sink taking, filling B and A with
        // beats 0 and 1, so FirmwareCopy offers beat 0 in its first cycle and the next
        // beats without a bubble.
        self.replay_sink_ready.next = (self.at_mpa_feed.q.val() & self.mpa_rx.in_ready.val())
            | (self.at_firmware_copy.q.val() & self.firmware_slice.in_ready.val());
        self.replay_b_load.next = !self.replay_b_valid.q.val() | self.replay_sink_ready.val();
        self.replay_done.next =
            self.replay_b_valid.q.val() & self.replay_b_last.q.val() & self.replay_sink_ready.val();
        // The delivery's last read of its bank: the raw frame's, or the payload's when
        // the raw frame does not follow.
        self.back_release.next = self.replay_done.val()
            & (self.at_firmware_copy.q.val()
                | (self.at_mpa_feed.q.val() & !self.rx_firmware_after.q.val()));
        self.replay_beat.next = self.replay.q.val();
        self.replay_issue.next = (self.at_mpa_feed.q.val()
            | self.at_firmware_descriptor.q.val()
            | self.at_firmware_copy.q.val())
            & !self.replay_read_all.q.val()
            & (!self.replay_a_valid.q.val() | self.replay_b_load.val());
        if (self.deliver.q.val() == Deliver::MpaStart)
            | (self.deliver.q.val() == Deliver::FirmwareStart)
        {
            self.replay_beat.next = 0.into();
            self.replay_issue.next = true;
        }
        self.replay_beat_last.next = self.replay_beat.val() == self.d_payload_last.q.val();
        if (self.deliver.q.val() == Deliver::FirmwareStart)
            | (self.deliver.q.val() == Deliver::FirmwareDescriptor)
            | (self.deliver.q.val() == Deliver::FirmwareCopy)
        {
            self.replay_beat_last.next = self.replay_beat.val() == self.d_raw_last.q.val();
        }
        if self.replay_issue.val() {
            self.replay.d.next = self.replay_beat.val() + 1;
            self.replay_read_all.d.next = self.replay_beat_last.val();
            self.replay_a_valid.d.next = true;
            self.replay_a_last.d.next = self.replay_beat_last.val();
        } else if self.replay_b_load.val() {
            self.replay_a_valid.d.next = false;
        }
        if self.replay_b_load.val() {
            self.replay_b_valid.d.next = self.replay_a_valid.q.val();
            self.replay_b_last.d.next = self.replay_a_last.q.val();
        }

        // MPA receive, reset before each segment, into the host queue.
        self.mpa_rx.reset.next = self.reset.val() | (self.deliver.q.val() == Deliver::MpaStart);
        // The same limit for every flow, [`MAX_RX_ULPDU_LEN`] (1,458, see `max_ulpdu`),
        // not one from the context's MSS, which is the MSS towards the peer.
        self.mpa_rx.max_ulpdu_len.next = self.max_ulpdu.q.val();
        self.mpa_rx.in_data.next = self.payload.read_data.val();
        self.mpa_rx.in_keep.next = 0xFF.into();
        if self.replay_b_last.q.val() {
            self.mpa_rx.in_keep.next = self.d_payload_last_keep.q.val();
        }
        self.mpa_rx.in_last.next = self.replay_b_last.q.val();
        self.mpa_rx.in_valid.next = self.replay_b_valid.q.val() & self.at_mpa_feed.q.val();
        self.host_queue.in_data.next = self.mpa_rx.ulpdu_data.val();
        self.host_queue.in_keep.next = self.mpa_rx.ulpdu_keep.val();
        self.host_queue.in_last.next = self.mpa_rx.ulpdu_last.val();
        self.host_queue.in_good.next = self.mpa_rx.ulpdu_good.val();
        self.host_queue.in_tag.next = self.d_index.q.val();
        self.host_queue.in_valid.next = self.mpa_rx.ulpdu_valid.val();
        self.mpa_rx.ulpdu_ready.next = self.host_queue.in_ready.val();
        if self.mpa_rx.ulpdu_valid.val()
            & self.host_queue.in_ready.val()
            & self.mpa_rx.ulpdu_last.val()
            & self.mpa_rx.ulpdu_good.val()
        {
            self.fpdus_in.increment.next = true;
        }
        self.host_rx_data.next = self.host_queue.out_data.val();
        self.host_rx_keep.next = self.host_queue.out_keep.val();
        self.host_rx_last.next = self.host_queue.out_last.val();
        self.host_rx_valid.next = self.host_queue.out_valid.val();
        self.host_rx_index.next = self.host_queue.out_tag.val();
        self.host_queue.out_ready.next = self.host_rx_ready.val();

        // Frames into the firmware queue: the RX descriptor's four beats, then the raw
        // frame, one packet. The two never offer in the same cycle: the descriptor in
        // FirmwareDescriptor, the replay's B register only in FirmwareCopy (it holds
        // beat 0 while the descriptor goes).
        // (A frame's last beats may still be in the slice when the controller moves on:
        // the slice keeps them in order ahead of the next frame's descriptor.)
        match self.descriptor_beat.q.val().index() {
            0 => {
                self.descriptor_data.next = self.d_descriptor0.q.val();
            }
            1 => {
                self.descriptor_data.next = self.d_descriptor1.q.val();
            }
            2 => {
                self.descriptor_data.next = bit_cast::<64, 53>(self.d_descriptor2.q.val());
            }
            _ => {
                self.descriptor_data.next = bit_cast::<64, 16>(self.d_descriptor3.q.val());
            }
        }
        self.descriptor_done.next = self.at_firmware_descriptor.q.val()
            & self.firmware_slice.in_ready.val()
            & (self.descriptor_beat.q.val() == 3);
        if self.at_firmware_descriptor.q.val() & self.firmware_slice.in_ready.val() {
            self.descriptor_beat.d.next = self.descriptor_beat.q.val() + 1;
        }
        self.firmware_slice.in_data.next = self.raw.read_data.val();
        self.firmware_slice.in_keep.next = 0xFF.into();
        if self.replay_b_last.q.val() {
            self.firmware_slice.in_keep.next = self.d_raw_last_keep.q.val();
        }
        self.firmware_slice.in_last.next = self.replay_b_last.q.val();
        self.firmware_slice.in_valid.next =
            self.replay_b_valid.q.val() & self.at_firmware_copy.q.val();
        if self.at_firmware_descriptor.q.val() {
            self.firmware_slice.in_data.next = self.descriptor_data.val();
            self.firmware_slice.in_keep.next = 0xFF.into();
            self.firmware_slice.in_last.next = false;
            self.firmware_slice.in_valid.next = true;
        }
        self.firmware_queue.in_data.next = self.firmware_slice.out_data.val();
        self.firmware_queue.in_keep.next = self.firmware_slice.out_keep.val();
        self.firmware_queue.in_last.next = self.firmware_slice.out_last.val();
        self.firmware_queue.in_good.next = true;
        self.firmware_queue.in_tag.next = 0.into();
        self.firmware_queue.in_valid.next = self.firmware_slice.out_valid.val();
        self.firmware_slice.out_ready.next = self.firmware_queue.in_ready.val();
        self.fw_rx_data.next = self.firmware_queue.out_data.val();
        self.fw_rx_keep.next = self.firmware_queue.out_keep.val();
        self.fw_rx_last.next = self.firmware_queue.out_last.val();
        self.fw_rx_valid.next = self.firmware_queue.out_valid.val();
        self.firmware_queue.out_ready.next = self.fw_rx_ready.val();

        // The segment builder: one descriptor from the working context.
        self.builder.desc_src_mac.next = self.w_macs.q.val().get_bits::<48>(48);
        self.builder.desc_dst_mac.next = self.w_macs.q.val().get_bits::<48>(0);
        self.builder.desc_src_ip.next = self.w_tuple.q.val().get_bits::<32>(64);
        self.builder.desc_dst_ip.next = self.w_tuple.q.val().get_bits::<32>(16);
        self.builder.desc_src_port.next = self.w_tuple.q.val().get_bits::<16>(48);
        self.builder.desc_dst_port.next = self.w_tuple.q.val().get_bits::<16>(0);
        self.builder.desc_seq.next = self.w_seqs.q.val().get_bits::<32>(32);
        self.builder.desc_ack.next = self.w_seqs.q.val().get_bits::<32>(0);
        self.builder.desc_flags.next = self.w_flags.q.val();
        self.builder.desc_window.next = 0xFFFF.into();
        // The datapath's segments carry no SYN: synthesis drops the options' logic.
        self.builder.desc_syn_options.next = false;
        self.builder.desc_no_window_scale.next = false;
        self.builder.desc_mss.next = 0.into();
        self.builder.desc_window_shift.next = 0.into();
        self.builder.desc_payload_len.next = self.w_len.q.val();
        self.builder.desc_valid.next =
            self.ack_pending.q.val() | (self.control.q.val() == Control::TxDescriptor);
        // Host ULPDUs through the MPA framer into the builder.
        self.framer.ulpdu_data.next = self.host_tx_data.val();
        self.framer.ulpdu_keep.next = self.host_tx_keep.val();
        self.framer.ulpdu_last.next = self.host_tx_last.val();
        self.framer.ulpdu_len.next = self.tx_len.q.val();
        self.framer.ulpdu_valid.next =
            self.host_tx_valid.val() & (self.control.q.val() == Control::TxStream);
        self.fpdu_slice.in_data.next = self.framer.fpdu_data.val();
        self.fpdu_slice.in_keep.next = self.framer.fpdu_keep.val();
        self.fpdu_slice.in_last.next = self.framer.fpdu_last.val();
        self.fpdu_slice.in_valid.next = self.framer.fpdu_valid.val();
        self.framer.fpdu_ready.next = self.fpdu_slice.in_ready.val();
        self.builder.payload_data.next = self.fpdu_slice.out_data.val();
        self.builder.payload_keep.next = self.fpdu_slice.out_keep.val();
        self.builder.payload_last.next = self.fpdu_slice.out_last.val();
        self.builder.payload_valid.next = self.fpdu_slice.out_valid.val();
        self.fpdu_slice.out_ready.next = self.builder.payload_ready.val();

        // The firmware's segments: a TX descriptor's five beats into registers, offered
        // to the firmware's builder, then the payload's beats passed to it through
        // `fw_payload_slice`.
        self.fw_tx_ready.next = false;
        self.fw_builder.desc_valid.next = false;
        self.fw_payload_slice.in_valid.next = false;
        match self.fw_tx_state.q.val() {
            FwTx::Descriptor => {
                self.fw_tx_ready.next = !self.reset.val();
                // The beat's register loads on every cycle of its turn, taken or not: it
                // holds the beat taken when the turn ends, and its 64 enables wait on the
                // beat count alone, not on `fw_tx_valid`.
                match self.fw_desc_beat.q.val().index() {
                    0 => {
                        self.fw_desc0.d.next = self.fw_tx_data.val();
                    }
                    1 => {
                        self.fw_desc1.d.next = self.fw_tx_data.val();
                    }
                    2 => {
                        self.fw_desc2.d.next = self.fw_tx_data.val();
                    }
                    3 => {
                        self.fw_desc3.d.next = self.fw_tx_data.val();
                    }
                    _ => {
                        self.fw_desc4.d.next = self.fw_tx_data.val();
                    }
                }
                if self.fw_tx_valid.val() & !self.reset.val() {
                    self.fw_desc_beat.d.next = self.fw_desc_beat.q.val() + 1;
                    if self.fw_desc_beat.q.val() == 4 {
                        self.fw_desc_beat.d.next = 0.into();
                        self.fw_payload_follows.d.next = !self.fw_tx_last.val();
                        self.fw_tx_state.d.next = FwTx::Offer;
                    } else if self.fw_tx_last.val() {
                        // Too short for a descriptor: nothing to send.
                        self.fw_desc_beat.d.next = 0.into();
                        self.fw_tx_dropped.increment.next = true;
                    }
                }
            }
            FwTx::Offer => {
                self.fw_builder.desc_valid.next = true;
                if self.fw_builder.desc_ready.val() {
                    self.fw_tx_state.d.next = FwTx::Descriptor;
                    if self.fw_payload_follows.q.val() {
                        self.fw_tx_state.d.next = FwTx::Payload;
                        if self.fw_desc4.q.val().get_bits::<16>(48) == 0 {
                            self.fw_tx_state.d.next = FwTx::Drop;
                            self.fw_tx_dropped.increment.next = true;
                        }
                    }
                }
            }
            FwTx::Payload => {
                // Into the slice; the builder takes the beats from it in order, the
                // next descriptor's header in front of them only once they are taken.
                self.fw_payload_slice.in_valid.next = self.fw_tx_valid.val();
                self.fw_tx_ready.next = self.fw_payload_slice.in_ready.val();
                if self.fw_tx_valid.val()
                    & self.fw_payload_slice.in_ready.val()
                    & self.fw_tx_last.val()
                {
                    self.fw_tx_state.d.next = FwTx::Descriptor;
                }
            }
            FwTx::Drop => {
                self.fw_tx_ready.next = !self.reset.val();
                if self.fw_tx_valid.val() & self.fw_tx_last.val() & !self.reset.val() {
                    self.fw_tx_state.d.next = FwTx::Descriptor;
                }
            }
        }
        // The descriptor's fields from its beats (wiring only); addresses as the builder
        // takes them, first byte in the high bits.
        self.fw_flags.next = self.fw_desc4.q.val().get_bits::<8>(16);
        self.fw_builder.desc_dst_mac.next =
            (bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(0)) << 40)
                | (bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(8)) << 32)
                | (bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(16)) << 24)
                | (bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(24)) << 16)
                | (bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(32)) << 8)
                | bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(40));
        self.fw_builder.desc_src_mac.next =
            (bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(48)) << 40)
                | (bit_cast::<48, 8>(self.fw_desc0.q.val().get_bits::<8>(56)) << 32)
                | (bit_cast::<48, 8>(self.fw_desc1.q.val().get_bits::<8>(0)) << 24)
                | (bit_cast::<48, 8>(self.fw_desc1.q.val().get_bits::<8>(8)) << 16)
                | (bit_cast::<48, 8>(self.fw_desc1.q.val().get_bits::<8>(16)) << 8)
                | bit_cast::<48, 8>(self.fw_desc1.q.val().get_bits::<8>(24));
        self.fw_builder.desc_src_ip.next =
            (bit_cast::<32, 8>(self.fw_desc1.q.val().get_bits::<8>(32)) << 24)
                | (bit_cast::<32, 8>(self.fw_desc1.q.val().get_bits::<8>(40)) << 16)
                | (bit_cast::<32, 8>(self.fw_desc1.q.val().get_bits::<8>(48)) << 8)
                | bit_cast::<32, 8>(self.fw_desc1.q.val().get_bits::<8>(56));
        self.fw_builder.desc_dst_ip.next =
            (bit_cast::<32, 8>(self.fw_desc2.q.val().get_bits::<8>(0)) << 24)
                | (bit_cast::<32, 8>(self.fw_desc2.q.val().get_bits::<8>(8)) << 16)
                | (bit_cast::<32, 8>(self.fw_desc2.q.val().get_bits::<8>(16)) << 8)
                | bit_cast::<32, 8>(self.fw_desc2.q.val().get_bits::<8>(24));
        self.fw_builder.desc_src_port.next = self.fw_desc2.q.val().get_bits::<16>(32);
        self.fw_builder.desc_dst_port.next = self.fw_desc2.q.val().get_bits::<16>(48);
        self.fw_builder.desc_seq.next = self.fw_desc3.q.val().get_bits::<32>(0);
        self.fw_builder.desc_window.next = self.fw_desc4.q.val().get_bits::<16>(0);
        self.fw_builder.desc_window_shift.next = self.fw_desc4.q.val().get_bits::<8>(24);
        self.fw_builder.desc_mss.next = self.fw_desc4.q.val().get_bits::<16>(32);
        self.fw_builder.desc_syn_options.next = self.fw_flags.val().get_bit(7);
        self.fw_builder.desc_no_window_scale.next = self.fw_flags.val().get_bit(6);
        // The flags and acknowledgment field as `TxDescriptor::frame` writes them (it goes
        // through `SegmentOut`): the low five flags, PSH only without SYN, FIN and RST,
        // the field zero without ACK. A few gates in front of the builder's registers.
        self.fw_builder.desc_flags.next = self.fw_flags.val() & 0x1F;
        if self.fw_flags.val().get_bits::<3>(0).any() {
            self.fw_builder.desc_flags.next = self.fw_flags.val() & 0x17;
        }
        self.fw_builder.desc_ack.next = 0.into();
        if self.fw_flags.val().get_bit(4) {
            self.fw_builder.desc_ack.next = self.fw_desc3.q.val().get_bits::<32>(32);
        }
        // No payload beats: length 0, so the builder does not wait for any.
        self.fw_builder.desc_payload_len.next = 0.into();
        if self.fw_payload_follows.q.val() {
            self.fw_builder.desc_payload_len.next = self.fw_desc4.q.val().get_bits::<16>(48);
        }
        self.fw_payload_slice.in_data.next = self.fw_tx_data.val();
        self.fw_payload_slice.in_keep.next = self.fw_tx_keep.val();
        self.fw_payload_slice.in_last.next = self.fw_tx_last.val();
        self.fw_builder.payload_data.next = self.fw_payload_slice.out_data.val();
        self.fw_builder.payload_keep.next = self.fw_payload_slice.out_keep.val();
        self.fw_builder.payload_last.next = self.fw_payload_slice.out_last.val();
        self.fw_builder.payload_valid.next = self.fw_payload_slice.out_valid.val();
        self.fw_payload_slice.out_ready.next = self.fw_builder.payload_ready.val();
        self.fw_frame_slice.in_data.next = self.fw_builder.frame_data.val();
        self.fw_frame_slice.in_keep.next = self.fw_builder.frame_keep.val();
        self.fw_frame_slice.in_last.next = self.fw_builder.frame_last.val();
        self.fw_frame_slice.in_valid.next = self.fw_builder.frame_valid.val();
        self.fw_builder.frame_ready.next = self.fw_frame_slice.in_ready.val();

        // Whole frames from the firmware's builder (first) or the datapath's, each
        // through its skid buffer, into checksum insertion: the grant starts at
        // registers.
        self.frame_slice.in_data.next = self.builder.frame_data.val();
        self.frame_slice.in_keep.next = self.builder.frame_keep.val();
        self.frame_slice.in_last.next = self.builder.frame_last.val();
        self.frame_slice.in_valid.next = self.builder.frame_valid.val();
        self.builder.frame_ready.next = self.frame_slice.in_ready.val();
        self.tx_grant.next = self.tx_source.q.val();
        if self.tx_source.q.val() == TxSource::None {
            if self.fw_frame_slice.out_valid.val() {
                self.tx_grant.next = TxSource::Firmware;
            } else if self.frame_slice.out_valid.val() {
                self.tx_grant.next = TxSource::Builder;
            }
        }
        self.tx_slice.in_data.next = self.frame_slice.out_data.val();
        self.tx_slice.in_keep.next = self.frame_slice.out_keep.val();
        self.tx_slice.in_last.next = self.frame_slice.out_last.val();
        self.tx_slice.in_valid.next =
            self.frame_slice.out_valid.val() & (self.tx_grant.val() == TxSource::Builder);
        if self.tx_grant.val() == TxSource::Firmware {
            self.tx_slice.in_data.next = self.fw_frame_slice.out_data.val();
            self.tx_slice.in_keep.next = self.fw_frame_slice.out_keep.val();
            self.tx_slice.in_last.next = self.fw_frame_slice.out_last.val();
            self.tx_slice.in_valid.next = self.fw_frame_slice.out_valid.val();
        }
        self.fw_frame_slice.out_ready.next =
            self.tx_slice.in_ready.val() & (self.tx_grant.val() == TxSource::Firmware);
        self.frame_slice.out_ready.next =
            self.tx_slice.in_ready.val() & (self.tx_grant.val() == TxSource::Builder);
        if self.tx_slice.in_valid.val() & self.tx_slice.in_ready.val() {
            if self.tx_slice.in_last.val() {
                self.tx_source.d.next = TxSource::None;
            } else {
                self.tx_source.d.next = self.tx_grant.val();
            }
        }
        self.checksums.in_data.next = self.tx_slice.out_data.val();
        self.checksums.in_keep.next = self.tx_slice.out_keep.val();
        self.checksums.in_last.next = self.tx_slice.out_last.val();
        self.checksums.in_valid.next = self.tx_slice.out_valid.val();
        self.tx_slice.out_ready.next = self.checksums.in_ready.val();
        self.net_tx_data.next = self.checksums.out_data.val();
        self.net_tx_keep.next = self.checksums.out_keep.val();
        self.net_tx_last.next = self.checksums.out_last.val();
        self.net_tx_valid.next = self.checksums.out_valid.val();
        self.checksums.out_ready.next = self.net_tx_ready.val();
        if self.checksums.out_valid.val() & self.net_tx_ready.val() & self.checksums.out_last.val()
        {
            self.frames_out.increment.next = true;
        }

        // The event register.
        if self.event_q.q.val() & self.event_ready.val() {
            self.event_q.d.next = false;
        }

        // ---- The controller ----
        match self.control.q.val() {
            Control::Clear => {
                if self.clear_in_range.q.val() {
                    self.clear_index.d.next = self.clear_index.q.val() + 1;
                } else if !self.flows.busy.val() {
                    self.control.d.next = Control::Idle;
                }
            }
            Control::Idle => {
                // A command or a host ULPDU waits for the delivery to finish (they read
                // and write the contexts and the working copy its ACK is built from); a
                // pending command keeps the next frame waiting too, so it is not starved.
                if self.ctx_valid.val() & self.deliver_idle.val() {
                    // The last delivery is over and its failure is in its flow's
                    // context: nothing to forward any more, and a command may replace
                    // that flow (a new flow at the index does not inherit it).
                    self.d_failed.d.next = false;
                    self.cmd_op.d.next = self.ctx_op.val();
                    self.cmd_writes.d.next = (self.ctx_op.val() == 0) | (self.ctx_op.val() == 3);
                    self.cmd_acks.d.next = self.ctx_op.val() == 3;
                    self.ctx_addr.d.next = self.ctx_index.val();
                    self.w_tuple.d.next = (bit_cast::<96, 32>(self.ctx_local_ip.val()) << 64)
                        | (bit_cast::<96, 16>(self.ctx_local_port.val()) << 48)
                        | (bit_cast::<96, 32>(self.ctx_remote_ip.val()) << 16)
                        | bit_cast::<96, 16>(self.ctx_remote_port.val());
                    self.w_macs.d.next = (bit_cast::<96, 48>(self.ctx_local_mac.val()) << 48)
                        | bit_cast::<96, 48>(self.ctx_remote_mac.val());
                    self.w_seqs.d.next = (bit_cast::<96, 32>(self.ctx_snd_una.val()) << 64)
                        | (bit_cast::<96, 32>(self.ctx_snd_nxt.val()) << 32)
                        | bit_cast::<96, 32>(self.ctx_rcv_nxt.val());
                    self.w_misc.d.next = bit_cast::<MISC_BITS, 16>(self.ctx_mss.val())
                        | (bit_cast::<MISC_BITS, 16>(self.ctx_peer_window.val()) << 16)
                        | (bit_cast::<MISC_BITS, 8>(self.ctx_peer_window_shift.val()) << 32)
                        | (bit_cast::<MISC_BITS, 8>(self.ctx_local_window_shift.val()) << 40)
                        | (bit_cast::<MISC_BITS, 1>(self.ctx_crc.val().into()) << 48)
                        | (bit_cast::<MISC_BITS, 1>(self.ctx_rtr_expected.val().into()) << 49)
                        | (bit_cast::<MISC_BITS, 1>(true.into()) << 51);
                    if self.cmd_range.in_range.val() {
                        self.control.d.next = Control::CmdRead;
                    } else {
                        self.done_q.d.next = true;
                        self.status_q.d.next = false;
                    }
                } else if !self.ctx_valid.val() & (self.held_count.q.val() != 0) {
                    self.frame_taken.next = true;
                    self.w_raw_last.d.next = self.head_held.val().get_bits::<8>(0);
                    self.w_raw_last_keep.d.next = self.head_held.val().get_bits::<8>(8);
                    self.w_payload_last.d.next = self.head_held.val().get_bits::<8>(16);
                    self.w_payload_last_keep.d.next = self.head_held.val().get_bits::<8>(24);
                    self.w_src_ip.d.next = self.head_held.val().get_bits::<32>(32);
                    self.w_dst_ip.d.next = self.head_held.val().get_bits::<32>(64);
                    self.w_src_port.d.next = self.head_held.val().get_bits::<16>(96);
                    self.w_dst_port.d.next = self.head_held.val().get_bits::<16>(112);
                    self.lookup_set.d.next = self.head_set.val();
                    self.w_seq.d.next = self.head_held.val().get_bits::<32>(128);
                    self.w_ack.d.next = self.head_held.val().get_bits::<32>(160);
                    self.w_seg_flags.d.next = self.head_held.val().get_bits::<5>(192);
                    self.w_window.d.next = self.head_held.val().get_bits::<16>(197);
                    self.w_payload_len.d.next = self.head_held.val().get_bits::<16>(213);
                    self.w_rtr.d.next = self.head_rtr.val();
                    if self.rtr_verdict.q.val() & (self.rtr_slot.q.val() == self.held_head.q.val())
                    {
                        self.w_rtr.d.next = self.rtr_final.val();
                    }
                    self.lookup_request.d.next = self.head_held.val().get_bit(229);
                    self.work_bank.d.next = self.head_held.val().get_bits::<BANK_BITS>(230);
                    self.control.d.next = Control::RxLookup;
                } else if !self.ctx_valid.val() & self.host_tx_valid.val() & self.deliver_idle.val()
                {
                    self.tx_len.d.next = self.host_tx_len.val();
                    self.ctx_addr.d.next = self.host_tx_index.val();
                    if self.tx_range.in_range.val() {
                        self.control.d.next = Control::TxContext;
                    } else {
                        self.host_refused.increment.next = true;
                        self.control.d.next = Control::TxDrop;
                    }
                }
            }
            Control::CmdRead => {
                self.control.d.next = Control::CmdLatch;
            }
            Control::CmdLatch => {
                self.control.d.next = Control::CmdCheck;
            }
            Control::CmdCheck => {
                self.control.d.next = Control::CmdAct;
            }
            Control::CmdAct => {
                self.control.d.next = Control::Idle;
                self.done_q.d.next = true;
                self.status_q.d.next = self.ctx_misc.read_data.val().get_bit(51);
                if self.cmd_writes.q.val() {
                    self.flows.cmd_valid.next = true;
                    self.done_q.d.next = false;
                    self.control.d.next = Control::CmdTable;
                }
                // The ACK is built from the working copy the command loaded, as a
                // received segment's is; the next frame or command waits for it.
                if self.cmd_acks.q.val() {
                    self.w_flags.d.next = 0x10.into();
                    self.w_len.d.next = 0.into();
                    self.ack_pending.d.next = true;
                }
                if self.cmd_op.q.val() == 1 {
                    self.rd_tuple.d.next = self.ctx_tuple.read_data.val();
                    self.rd_macs.d.next = self.ctx_macs.read_data.val();
                    self.rd_seqs.d.next = self.ctx_seqs.read_data.val();
                    self.rd_misc.d.next = self.ctx_misc.read_data.val();
                }
                if (self.cmd_op.q.val() == 2) & self.flow_valid.q.val() {
                    self.flows.cmd_valid.next = true;
                    self.done_q.d.next = false;
                    self.control.d.next = Control::CmdTable;
                }
            }
            Control::CmdTable => {
                if self.flows.done.val() {
                    self.done_q.d.next = true;
                    if self.cmd_writes.q.val() {
                        self.status_q.d.next = !self.flows.done_full.val();
                    }
                    self.control.d.next = Control::Idle;
                }
            }
            Control::RxLookup => {
                if !self.lookup_request.q.val() {
                    self.not_for_us.increment.next = true;
                    self.front_release.next = true;
                    self.control.d.next = Control::Idle;
                } else if self.flows.lookup_ready.val() {
                    self.lookup_request.d.next = false;
                    self.control.d.next = Control::RxLookupWait;
                }
            }
            Control::RxLookupWait => {
                if self.flows.result_valid.val() {
                    if self.flows.result_hit.val() {
                        self.ctx_addr.d.next = self.flows.result_index.val();
                        self.control.d.next = Control::RxContext;
                    } else {
                        self.control.d.next = Control::RxToFirmware;
                    }
                }
            }
            Control::RxToFirmware => {
                if self.deliver_idle.val() {
                    self.hand_over.next = true;
                    self.deliver.d.next = Deliver::FirmwareStart;
                    self.control.d.next = Control::Idle;
                }
            }
            Control::RxContext => {
                self.control.d.next = Control::RxLatch;
            }
            Control::RxLatch => {
                self.control.d.next = Control::RxCompute;
            }
            Control::RxCompute => {
                self.control.d.next = Control::RxCompare;
            }
            Control::RxCompare => {
                if self.deliver_idle.val() {
                    self.control.d.next = Control::RxDecide;
                }
            }
            Control::RxDecide => {
                self.w_tuple.d.next = self.ctx_tuple.read_data.val();
                self.w_macs.d.next = self.ctx_macs.read_data.val();
                self.w_seqs.d.next = self.rx_new_seqs.val();
                self.w_misc.d.next = self.rx_new_misc.val();
                self.w_flags.d.next = 0x10.into();
                self.w_len.d.next = 0.into();
                self.max_ulpdu.d.next = self.flow_max_ulpdu.q.val();
                self.hand_over.next = true;
                self.control.d.next = Control::Idle;
                // The bank is freed here unless the delivery replays the frame.
                self.front_release.next = true;
                if self.rtr_take.q.val() {
                    // The flow's RTR: its context written as for delivered payload
                    // (`rcv_nxt` past it, RTR expected cleared), acknowledged, nothing
                    // replayed (the bank is freed here), and reported.
                    self.ack_pending.d.next = true;
                    self.rx_firmware_after.d.next = false;
                    self.deliver.d.next = Deliver::Event;
                    self.rtrs_taken.increment.next = true;
                } else if !self.rx_datapath.q.val() {
                    self.deliver.d.next = Deliver::FirmwareStart;
                    self.front_release.next = false;
                } else {
                    if self.duplicate.q.val() {
                        self.duplicates.increment.next = true;
                    }
                    if self.has_payload.q.val() & !self.in_order.q.val() & !self.duplicate.q.val() {
                        self.out_of_order.increment.next = true;
                    }
                    self.rx_firmware_after.d.next = self.rx_fin_after.val();
                    if self.in_order.q.val() & !self.rx_failed.val() {
                        self.deliver.d.next = Deliver::MpaStart;
                        self.ack_pending.d.next = true;
                        self.front_release.next = false;
                    } else if self.has_payload.q.val() {
                        self.ack_pending.d.next = true;
                        if self.rx_fin_after.val() {
                            self.deliver.d.next = Deliver::FirmwareStart;
                            self.front_release.next = false;
                        }
                    } else if self.w_seg_flags.q.val().get_bit(0) {
                        self.deliver.d.next = Deliver::FirmwareStart;
                        self.front_release.next = false;
                    } else if self.duplicate.q.val() {
                        self.ack_pending.d.next = true;
                    }
                }
            }
            Control::TxContext => {
                self.control.d.next = Control::TxLatch;
            }
            Control::TxLatch => {
                self.control.d.next = Control::TxCompute;
            }
            Control::TxCompute => {
                self.control.d.next = Control::TxDecide;
            }
            Control::TxDecide => {
                if self.tx_refused.q.val() {
                    self.host_refused.increment.next = true;
                    self.control.d.next = Control::TxDrop;
                } else {
                    self.w_tuple.d.next = self.ctx_tuple.read_data.val();
                    self.w_macs.d.next = self.ctx_macs.read_data.val();
                    self.w_seqs.d.next = self.ctx_seqs.read_data.val();
                    self.w_flags.d.next = 0x18.into();
                    self.w_len.d.next = bit_cast::<16, 32>(self.fpdu_len.q.val());
                    self.control.d.next = Control::TxDescriptor;
                }
            }
            Control::TxDescriptor => {
                if self.builder.desc_ready.val() {
                    self.fpdus_out.increment.next = true;
                    self.control.d.next = Control::TxStream;
                }
            }
            Control::TxStream => {
                self.host_tx_ready.next = self.framer.ulpdu_ready.val();
                if self.host_tx_valid.val()
                    & self.framer.ulpdu_ready.val()
                    & self.host_tx_last.val()
                {
                    self.control.d.next = Control::Idle;
                }
            }
            Control::TxDrop => {
                self.host_tx_ready.next = true;
                if self.host_tx_valid.val() & self.host_tx_last.val() {
                    self.control.d.next = Control::Idle;
                }
            }
        }

        // The segment handed over: its bank and buffer ends (the controller's copies
        // move on with the next frame) and its flow.
        if self.hand_over.val() {
            self.d_bank.d.next = self.work_bank.q.val();
            self.d_raw_last.d.next = self.w_raw_last.q.val();
            self.d_raw_last_keep.d.next = self.w_raw_last_keep.q.val();
            self.d_payload_last.d.next = self.w_payload_last.q.val();
            self.d_payload_last_keep.d.next = self.w_payload_last_keep.q.val();
            self.d_index.d.next = self.ctx_addr.q.val();
            self.d_failed.d.next = false;
            // Send 1 (bit 0), Write 2 (bit 1), Read 3 (bit 2): at most one bit is set.
            self.d_rtr.d.next = 0.into();
            if self.at_rx_decide.q.val() & self.rtr_take.q.val() {
                self.d_rtr.d.next = bit_cast::<2, 1>(
                    (self.w_rtr.q.val().get_bit(0) | self.w_rtr.q.val().get_bit(2)).into(),
                ) | (bit_cast::<2, 1>(
                    (self.w_rtr.q.val().get_bit(1) | self.w_rtr.q.val().get_bit(2)).into(),
                ) << 1);
            }
            // The RX descriptor's beats: the addresses' bytes swapped (they are
            // big-endian numbers and go first octet first), the other numbers as they
            // are (little-endian in the beat's lanes).
            self.d_descriptor0.d.next = bit_cast::<64, 8>(self.w_dst_ip.q.val().get_bits::<8>(24))
                | (bit_cast::<64, 8>(self.w_dst_ip.q.val().get_bits::<8>(16)) << 8)
                | (bit_cast::<64, 8>(self.w_dst_ip.q.val().get_bits::<8>(8)) << 16)
                | (bit_cast::<64, 8>(self.w_dst_ip.q.val().get_bits::<8>(0)) << 24)
                | (bit_cast::<64, 8>(self.w_src_ip.q.val().get_bits::<8>(24)) << 32)
                | (bit_cast::<64, 8>(self.w_src_ip.q.val().get_bits::<8>(16)) << 40)
                | (bit_cast::<64, 8>(self.w_src_ip.q.val().get_bits::<8>(8)) << 48)
                | (bit_cast::<64, 8>(self.w_src_ip.q.val().get_bits::<8>(0)) << 56);
            self.d_descriptor1.d.next = (bit_cast::<64, 32>(self.w_seq.q.val()) << 32)
                | (bit_cast::<64, 16>(self.w_src_port.q.val()) << 16)
                | bit_cast::<64, 16>(self.w_dst_port.q.val());
            self.d_descriptor2.d.next = (bit_cast::<53, 5>(self.w_seg_flags.q.val()) << 48)
                | (bit_cast::<53, 16>(self.w_window.q.val()) << 32)
                | bit_cast::<53, 32>(self.w_ack.q.val());
            self.d_descriptor3.d.next = self.w_payload_len.q.val();
        }

        // ---- The delivery ----
        if self.ack_pending.q.val() & self.builder.desc_ready.val() {
            self.ack_pending.d.next = false;
            self.acks_sent.increment.next = true;
        }
        match self.deliver.q.val() {
            Deliver::Idle => {}
            Deliver::MpaStart => {
                self.deliver.d.next = Deliver::MpaFeed;
            }
            Deliver::MpaFeed => {
                if self.replay_done.val() {
                    self.deliver.d.next = Deliver::MpaDrain;
                }
            }
            Deliver::MpaDrain => {
                // The segment's last beat is replayed; wait until its ULPDUs are all out
                // of `mpa_rx` and its errors latched.
                if !self.mpa_rx.busy.val() {
                    self.deliver.d.next = Deliver::Idle;
                    if self.rx_firmware_after.q.val() {
                        self.deliver.d.next = Deliver::FirmwareStart;
                    }
                    if self.mpa_rx.crc_error.val() | self.mpa_rx.length_error.val() {
                        self.d_failed.d.next = true;
                        if self.mpa_rx.crc_error.val() {
                            self.crc_errors.increment.next = true;
                        } else {
                            self.length_errors.increment.next = true;
                        }
                        self.deliver.d.next = Deliver::Event;
                    }
                }
            }
            Deliver::Event => {
                if !self.event_q.q.val() {
                    self.event_q.d.next = true;
                    self.event_index_q.d.next = self.d_index.q.val();
                    // An MPA error (`d_rtr` 0: CRC or length), or a flow's RTR taken
                    // (`mpa_rx` holds the errors of the last replay: not this event's).
                    self.event_crc_q.d.next =
                        self.mpa_rx.crc_error.val() & (self.d_rtr.q.val() == 0);
                    self.event_rtr_q.d.next = self.d_rtr.q.val();
                    self.deliver.d.next = Deliver::Idle;
                    if self.rx_firmware_after.q.val() {
                        self.deliver.d.next = Deliver::FirmwareStart;
                    }
                }
            }
            Deliver::FirmwareStart => {
                self.to_firmware.increment.next = true;
                self.descriptor_beat.d.next = 0.into();
                self.deliver.d.next = Deliver::FirmwareDescriptor;
            }
            Deliver::FirmwareDescriptor => {
                if self.descriptor_done.val() {
                    self.deliver.d.next = Deliver::FirmwareCopy;
                }
            }
            Deliver::FirmwareCopy => {
                if self.replay_done.val() {
                    self.deliver.d.next = Deliver::Idle;
                }
            }
        }

        // Context writes, decided from one-hot state flags, so a write's data selection
        // starts at a flip-flop: the state decode fanned out to the ~340 write-data bits
        // was nic_top's critical path.
        // `ctx_misc`'s data is selected apart from the enables, below.
        self.misc_zero_write.next =
            self.at_clear.q.val() | (self.at_cmd_act.q.val() & self.cmd_removes_flow.q.val());
        self.misc_rx_write.next =
            self.at_rx_decide.q.val() & (self.rx_datapath.q.val() | self.rtr_take.q.val());
        self.misc_keep_failed_write.next =
            self.at_cmd_act.q.val() & self.cmd_writes.q.val() & self.rewrite_keeps_failed.val();
        // The delivery's failure, into the context of the flow delivered (while the
        // controller may read the next segment's: the RAMs hold their read while a
        // write lands, and `fail_forward` covers a read of this flow from before).
        self.misc_failed_write.next = self.at_rx_mpa_drain.q.val()
            & !self.mpa_rx.busy.val()
            & (self.mpa_rx.crc_error.val() | self.mpa_rx.length_error.val());
        if self.at_clear.q.val() {
            self.ctx_misc.write_address.next = bit_cast::<INDEX_BITS, 17>(self.clear_index.q.val());
            self.ctx_misc.write_enable.next = self.clear_in_range.q.val();
        }
        if self.at_cmd_act.q.val() & self.cmd_writes.q.val() {
            self.ctx_tuple.write_enable.next = true;
            self.ctx_macs.write_enable.next = true;
            self.ctx_seqs.write_enable.next = true;
            self.ctx_misc.write_enable.next = true;
        }
        if self.at_cmd_act.q.val() & self.cmd_removes_flow.q.val() {
            self.ctx_misc.write_enable.next = true;
        }
        if self.misc_rx_write.val() {
            self.ctx_seqs.write_data.next = self.rx_new_seqs.val();
            self.ctx_seqs.write_enable.next = true;
            self.ctx_misc.write_enable.next = true;
        }
        if self.misc_failed_write.val() {
            self.ctx_misc.write_address.next = bit_cast::<INDEX_BITS, 16>(self.d_index.q.val());
            self.ctx_misc.write_enable.next = true;
        }
        // The data as two masked terms and the failed bit, the selects side by side
        // (the states writing it are exclusive; the failure's write wins, as it would
        // last in a chain): a chain of the writes' conditions in front of the write
        // data was nic_top's critical path (5 levels from `at_cmd_act`, 8.7 ns).
        self.misc_w_term.next = 0.into();
        if (!self.misc_zero_write.val() & !self.misc_rx_write.val()) | self.misc_failed_write.val()
        {
            self.misc_w_term.next = self.w_misc.q.val();
        }
        self.misc_new_term.next = 0.into();
        if self.misc_rx_write.val() & !self.misc_failed_write.val() {
            self.misc_new_term.next = self.rx_new_misc.val();
        }
        self.ctx_misc.write_data.next = self.misc_w_term.val()
            | self.misc_new_term.val()
            | (bit_cast::<MISC_BITS, 1>(
                (self.misc_failed_write.val() | self.misc_keep_failed_write.val()).into(),
            ) << 50);
        if self.at_tx_decide.q.val() & !self.tx_refused.q.val() {
            self.ctx_seqs.write_data.next = (bit_cast::<96, 32>(self.seq_snd_una.val()) << 64)
                | (bit_cast::<96, 32>(self.new_snd_nxt.q.val()) << 32)
                | bit_cast::<96, 32>(self.seq_rcv_nxt.val());
            self.ctx_seqs.write_enable.next = true;
        }

        // A block RAM read of the word being written is undefined (`block_ram`). The
        // context RAMs are read and written at one address, their writes registered
        // (`WriteRegisteredRam`: a write lands a cycle after it is presented, so the
        // choice of what to write has a cycle and the route to the RAM another): each
        // holds its read while a write lands, so it keeps the word from before the write.
        // No context is read again within two cycles of a write to it (every write is
        // followed by at least one other state before a read starts). The frame buffers
        // are read only while a frame is replayed, when the work bank is never the bank
        // being written.
        self.ctx_tuple.read_enable.next = !self.ctx_tuple.writing.val();
        self.ctx_macs.read_enable.next = !self.ctx_macs.writing.val();
        self.ctx_seqs.read_enable.next = !self.ctx_seqs.writing.val();
        self.ctx_misc.read_enable.next = !self.ctx_misc.writing.val();
        self.raw.read_enable.next = self.replay_issue.val();
        self.payload.read_enable.next = self.replay_issue.val();
        self.raw.output_enable.next = self.replay_b_load.val();
        self.payload.output_enable.next = self.replay_b_load.val();
        self.raw.read_address.next =
            (bit_cast::<BANKED_BUFFER_BITS, BANK_BITS>(self.d_bank.q.val()) << 8)
                | bit_cast::<BANKED_BUFFER_BITS, FRAME_BUFFER_BITS>(self.replay_beat.val());
        self.payload.read_address.next =
            (bit_cast::<BANKED_BUFFER_BITS, BANK_BITS>(self.d_bank.q.val()) << 8)
                | bit_cast::<BANKED_BUFFER_BITS, FRAME_BUFFER_BITS>(self.replay_beat.val());

        if self.frame_taken.val() {
            self.held_head.d.next = self.held_head.q.val() + 1;
        }
        self.held_count.d.next = self.held_count.q.val()
            + bit_cast::<3, 1>(self.verdict_good.val().into())
            - bit_cast::<3, 1>(self.frame_taken.val().into());
        // The banks: taken at a frame's last beat, freed by whoever is done with them
        // (each frees its own bank; they may coincide).
        self.bank_filled.d.next = 0.into();
        if self.net_take.val() & self.net_rx_last.val() {
            self.bank_filled.d.next =
                bit_cast::<4, 1>(true.into()) << bit_cast::<4, BANK_BITS>(self.raw_bank.q.val());
        }
        // The releases are ORed into a local mask and cleared from the busy bits in one
        // expression (never `d.next = d.val() & ...`: a DFF's `d` is an input, whose
        // `val()` in RustHDL's simulator is the value before this update, while the
        // generated Verilog's blocking assignments read the value just assigned; that
        // form dropped a bank filled in the same cycle on RustHDL, never in the Verilog).
        self.bank_release.next = 0.into();
        if self.verdict_drop.val() {
            self.bank_release.next = self.bank_release.val()
                | (bit_cast::<4, 1>(true.into())
                    << bit_cast::<4, BANK_BITS>(self.payload_bank.q.val()));
        }
        if self.front_release.val() {
            self.bank_release.next = self.bank_release.val()
                | (bit_cast::<4, 1>(true.into())
                    << bit_cast::<4, BANK_BITS>(self.work_bank.q.val()));
        }
        if self.back_release.val() {
            self.bank_release.next = self.bank_release.val()
                | (bit_cast::<4, 1>(true.into()) << bit_cast::<4, BANK_BITS>(self.d_bank.q.val()));
        }
        self.bank_busy.d.next =
            (self.bank_busy.q.val() | self.bank_filled.q.val()) & !self.bank_release.val();

        self.ticks.d.next = self.ticks.q.val() + 1;
        if self.reset.val() {
            self.ticks.d.next = 0.into();
            self.control.d.next = Control::Clear;
            self.clear_index.d.next = 0.into();
            self.replay_a_valid.d.next = false;
            self.replay_b_valid.d.next = false;
            self.lookup_request.d.next = false;
            self.deliver.d.next = Deliver::Idle;
            self.ack_pending.d.next = false;
            self.raw_bank.d.next = 0.into();
            self.raw_wr.d.next = 0.into();
            self.payload_bank.d.next = 0.into();
            self.payload_wr.d.next = 0.into();
            self.bank_busy.d.next = 0.into();
            self.bank_filled.d.next = 0.into();
            self.raw_bank_free.d.next = false;
            self.held_head.d.next = 0.into();
            self.held_tail.d.next = 0.into();
            self.held_count.d.next = 0.into();
            self.event_q.d.next = false;
            self.rtr_verdict.d.next = false;
            self.done_q.d.next = false;
            self.tx_source.d.next = TxSource::None;
            self.fw_tx_state.d.next = FwTx::Descriptor;
            self.fw_desc_beat.d.next = 0.into();
        }

        // Whether the next context to clear exists, registered from the next index (a
        // 17-bit compare in front of the controller's next state was too slow).
        self.clear_range.index.next = self.clear_index.d.val();
        self.clear_in_range.d.next = self.clear_range.in_range.val();

        // The state flags follow the controller's transitions into and out of their
        // states (each of these states is entered from one state only), not its
        // next-state value, so no flag waits behind the next-state logic.
        self.at_clear.d.next = self.reset.val()
            | (self.at_clear.q.val() & (self.clear_in_range.q.val() | self.flows.busy.val()));
        self.at_cmd_act.d.next = (self.control.q.val() == Control::CmdCheck) & !self.reset.val();
        self.at_rx_decide.d.next = (self.control.q.val() == Control::RxCompare)
            & self.deliver_idle.val()
            & !self.reset.val();
        self.at_tx_decide.d.next = (self.control.q.val() == Control::TxCompute) & !self.reset.val();
        self.at_mpa_feed.d.next = !self.reset.val()
            & ((self.deliver.q.val() == Deliver::MpaStart)
                | (self.at_mpa_feed.q.val() & !self.replay_done.val()));
        self.at_firmware_descriptor.d.next = !self.reset.val()
            & ((self.deliver.q.val() == Deliver::FirmwareStart)
                | (self.at_firmware_descriptor.q.val() & !self.descriptor_done.val()));
        self.at_firmware_copy.d.next = !self.reset.val()
            & (self.descriptor_done.val()
                | (self.at_firmware_copy.q.val() & !self.replay_done.val()));
        self.at_rx_mpa_drain.d.next = !self.reset.val()
            & ((self.at_mpa_feed.q.val() & self.replay_done.val())
                | (self.at_rx_mpa_drain.q.val() & self.mpa_rx.busy.val()));

        // Outputs.
        self.ctx_done.next = self.done_q.q.val();
        self.ctx_status.next = self.status_q.q.val();
        self.rd_local_ip.next = self.rd_tuple.q.val().get_bits::<32>(64);
        self.rd_local_port.next = self.rd_tuple.q.val().get_bits::<16>(48);
        self.rd_remote_ip.next = self.rd_tuple.q.val().get_bits::<32>(16);
        self.rd_remote_port.next = self.rd_tuple.q.val().get_bits::<16>(0);
        self.rd_local_mac.next = self.rd_macs.q.val().get_bits::<48>(48);
        self.rd_remote_mac.next = self.rd_macs.q.val().get_bits::<48>(0);
        self.rd_snd_una.next = self.rd_seqs.q.val().get_bits::<32>(64);
        self.rd_snd_nxt.next = self.rd_seqs.q.val().get_bits::<32>(32);
        self.rd_rcv_nxt.next = self.rd_seqs.q.val().get_bits::<32>(0);
        self.rd_mss.next = self.rd_misc.q.val().get_bits::<16>(0);
        self.rd_peer_window.next = self.rd_misc.q.val().get_bits::<16>(16);
        self.rd_peer_window_shift.next = self.rd_misc.q.val().get_bits::<8>(32);
        self.rd_local_window_shift.next = self.rd_misc.q.val().get_bits::<8>(40);
        self.rd_crc.next = self.rd_misc.q.val().get_bit(48);
        self.rd_rtr_expected.next = self.rd_misc.q.val().get_bit(49);
        self.event_valid.next = self.event_q.q.val();
        self.event_index.next = self.event_index_q.q.val();
        self.event_crc.next = self.event_crc_q.q.val();
        self.event_rtr.next = self.event_rtr_q.q.val();
        self.cnt_frames_in.next = self.frames_in.count.val();
        self.cnt_frames_out.next = self.frames_out.count.val();
        self.cnt_bad_checksum.next = self.parser.dropped_bad_checksum.val();
        self.cnt_oversized.next = self.parser.dropped_oversized.val();
        self.cnt_malformed.next = self.parser.dropped_malformed.val();
        self.cnt_not_tcp.next = self.parser.dropped_not_tcp.val();
        self.cnt_not_for_us.next = self.not_for_us.count.val();
        self.cnt_to_firmware.next = self.to_firmware.count.val();
        self.cnt_out_of_order.next = self.out_of_order.count.val();
        self.cnt_duplicates.next = self.duplicates.count.val();
        self.cnt_acks_sent.next = self.acks_sent.count.val();
        self.cnt_fpdus_in.next = self.fpdus_in.count.val();
        self.cnt_fpdus_out.next = self.fpdus_out.count.val();
        self.cnt_crc_errors.next = self.crc_errors.count.val();
        self.cnt_length_errors.next = self.length_errors.count.val();
        self.cnt_host_refused.next = self.host_refused.count.val();
        self.cnt_insert_full.next = self.flows.insert_full_count.val();
        self.cnt_fw_tx_dropped.next = self.fw_tx_dropped.count.val();
        self.cnt_rtr_taken.next = self.rtrs_taken.count.val();
        self.tick.next = self.ticks.q.val();
    }
}
