//! Wireshark's dissector as the outside judge of every capture: runs `tshark` with the
//! options of spec/mpa.md and counts what it found.

use std::path::Path;
use std::process::Command;

/// What `tshark` found in a capture.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dissection {
    pub frames: usize,
    pub mpa_requests: usize,
    pub mpa_replies: usize,
    pub fpdus: usize,
    pub good_crc: usize,
    pub bad_crc: usize,
    /// Frames Wireshark marked malformed.
    pub malformed: usize,
    /// Frames Wireshark took for TCP retransmissions (a link's duplicate, the firmware's
    /// resend of a control segment or an MPA frame). Their MPA findings are not counted
    /// above: Wireshark's MPA dissector keeps one state per stream and reads a second
    /// copy of the MPA reply as an FPDU, which it then calls malformed. The copy's bytes
    /// are the first's, judged already; their checksums still count.
    pub retransmissions: usize,
    /// TCP segments whose checksum Wireshark verified good / found wrong.
    pub tcp_checksum_good: usize,
    pub tcp_checksum_errors: usize,
    /// IPv4 headers whose checksum Wireshark verified good / found wrong.
    pub ip_checksum_good: usize,
    pub ip_checksum_errors: usize,
    /// The RDMAP opcode names seen, in order (for example "Send", "Terminate").
    pub rdmap_opcodes: Vec<String>,
}

impl Dissection {
    /// Everything a clean iWARP capture must show: the MPA request and reply, a good CRC
    /// on every FPDU, nothing malformed and no checksum errors. Returns what was wrong.
    pub fn check_clean(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.mpa_requests == 0 {
            problems.push("no MPA request found".to_string());
        }
        if self.mpa_replies == 0 {
            problems.push("no MPA reply found".to_string());
        }
        if self.good_crc != self.fpdus || self.bad_crc != 0 {
            problems.push(format!(
                "{} FPDUs, {} good CRC, {} bad CRC",
                self.fpdus, self.good_crc, self.bad_crc
            ));
        }
        if self.malformed != 0 {
            problems.push(format!("{} malformed frames", self.malformed));
        }
        // Every frame here is TCP over IPv4, so every checksum must have been verified good.
        if self.tcp_checksum_good != self.frames || self.ip_checksum_good != self.frames {
            problems.push(format!(
                "{} frames: {} TCP checksums good, {} bad; {} IPv4 checksums good, {} bad",
                self.frames,
                self.tcp_checksum_good,
                self.tcp_checksum_errors,
                self.ip_checksum_good,
                self.ip_checksum_errors
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// Dissect `pcap` with tshark (PDML output, TCP and IPv4 checksum checks on, the two
/// heuristics that would claim Send payloads off).
pub fn dissect(pcap: &Path) -> Result<Dissection, String> {
    let output = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args([
            "--disable-heuristic",
            "rpcrdma_iwarp",
            "--disable-heuristic",
            "smb_direct_iwarp",
        ])
        .args([
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
            "-T",
            "pdml",
        ])
        .output()
        .map_err(|e| format!("cannot run tshark ({e}); scripts/setup.sh installs it"))?;
    if !output.status.success() {
        return Err(format!(
            "tshark failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(parse_pdml(&String::from_utf8_lossy(&output.stdout)))
}

/// Counts the fields of interest in tshark's PDML, one `<field …>` or `<proto …>` per line,
/// a packet at a time (see [`Dissection::retransmissions`]).
fn parse_pdml(pdml: &str) -> Dissection {
    let mut d = Dissection::default();
    let mut packet = Dissection::default();
    let mut retransmitted = false;
    for line in pdml.lines() {
        let line = line.trim_start();
        if line.starts_with("<packet>") {
            packet = Dissection::default();
            retransmitted = false;
        }
        if line.starts_with("</packet>") {
            d.add(&packet, retransmitted);
            continue;
        }
        let Some(name) = attribute(line, "name") else {
            continue;
        };
        let show = attribute(line, "show").unwrap_or_default();
        let showname = attribute(line, "showname").unwrap_or_default();
        match name {
            "tcp.analysis.retransmission"
            | "tcp.analysis.fast_retransmission"
            | "tcp.analysis.spurious_retransmission" => retransmitted = true,
            "iwarp_mpa.req" => packet.mpa_requests += 1,
            "iwarp_mpa.rep" => packet.mpa_replies += 1,
            "iwarp_mpa.fpdu" => packet.fpdus += 1,
            "iwarp_mpa.crc_check" if showname.contains("Good CRC32") => packet.good_crc += 1,
            "iwarp_mpa.crc_check" => packet.bad_crc += 1,
            "_ws.malformed" => packet.malformed += 1,
            // Checksum status: 0 bad, 1 good, 2 unverified.
            "tcp.checksum.status" if show == "1" => packet.tcp_checksum_good += 1,
            "tcp.checksum.status" if show == "0" => packet.tcp_checksum_errors += 1,
            "ip.checksum.status" if show == "1" => packet.ip_checksum_good += 1,
            "ip.checksum.status" if show == "0" => packet.ip_checksum_errors += 1,
            "iwarp_rdma.opcode" => {
                // showname: ".... 0011 = OpCode: Send (0x3)"
                let label = showname.rsplit("OpCode: ").next().unwrap_or(showname);
                packet
                    .rdmap_opcodes
                    .push(label.split(" (").next().unwrap_or(label).to_string());
            }
            _ => {}
        }
    }
    d
}

impl Dissection {
    /// Add one packet's findings; a retransmission's checksums only.
    fn add(&mut self, packet: &Dissection, retransmitted: bool) {
        self.frames += 1;
        self.tcp_checksum_good += packet.tcp_checksum_good;
        self.tcp_checksum_errors += packet.tcp_checksum_errors;
        self.ip_checksum_good += packet.ip_checksum_good;
        self.ip_checksum_errors += packet.ip_checksum_errors;
        if retransmitted {
            self.retransmissions += 1;
            return;
        }
        self.mpa_requests += packet.mpa_requests;
        self.mpa_replies += packet.mpa_replies;
        self.fpdus += packet.fpdus;
        self.good_crc += packet.good_crc;
        self.bad_crc += packet.bad_crc;
        self.malformed += usize::from(packet.malformed > 0);
        self.rdmap_opcodes.extend_from_slice(&packet.rdmap_opcodes);
    }
}

fn attribute<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let needle = format!(" {key}=\"");
    let start = line.find(&needle)? + needle.len();
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdml_fields_are_counted() {
        let pdml = r#"<packet>
  <proto name="iwarp_mpa" showname="MPA">
    <field name="iwarp_mpa.req" showname="Request frame header" show="" value=""/>
    <field name="iwarp_mpa.crc_check" showname="CRC check: 0x1234 (Good CRC32)" show="4660"/>
    <field name="iwarp_mpa.crc_check" showname="CRC check: 0x1 (Bad CRC32, should be 0x2)" show="1"/>
    <field name="tcp.checksum.status" showname="[Checksum Status: Bad]" show="0"/>
    <field name="ip.checksum.status" showname="Header checksum status: Good" show="1"/>
    <field name="iwarp_rdma.opcode" showname=".... 0011 = OpCode: Send (0x3)" show="0x03"/>
    <field name="_ws.malformed" showname="[Malformed Packet]"/>
</packet>"#;
        let d = parse_pdml(pdml);
        assert_eq!(
            (d.frames, d.mpa_requests, d.good_crc, d.bad_crc),
            (1, 1, 1, 1)
        );
        assert_eq!(
            (d.tcp_checksum_errors, d.ip_checksum_good, d.malformed),
            (1, 1, 1)
        );
        assert_eq!(d.rdmap_opcodes, ["Send"]);
    }

    /// A link's copy of an MPA reply, as tshark 4.0 dissected it: the reply read again as
    /// an FPDU whose length runs past the segment.
    #[test]
    fn a_retransmission_counts_its_checksums_only() {
        let pdml = r#"<packet>
  <field name="iwarp_mpa.rep" showname="Reply frame header" show="" value=""/>
  <field name="tcp.checksum.status" showname="Checksum Status: Good" size="0" pos="50" show="1"/>
</packet>
<packet>
  <field name="ip.checksum.status" showname="Header checksum status: Good" size="0" pos="24" show="1"/>
  <field name="tcp.checksum.status" showname="Checksum Status: Good" size="0" pos="50" show="1"/>
  <field name="tcp.analysis.fast_retransmission" showname="This frame is a (suspected) fast retransmission" size="0" pos="0" show="" value=""/>
  <field name="tcp.analysis.retransmission" showname="This frame is a (suspected) retransmission" size="0" pos="0" show="" value=""/>
  <field name="iwarp_mpa.fpdu" showname="FPDU" size="40" pos="54" show="" value="">
  <proto name="_ws.malformed" showname="[Malformed Packet: IWARP_MPA]" size="0" pos="54">
  <proto name="_ws.malformed" showname="Malformed Packet" hide="yes" size="0" pos="54"/>
</packet>
<packet>
  <field name="tcp.checksum.status" showname="Checksum Status: Bad" size="0" pos="50" show="0"/>
  <field name="_ws.malformed" showname="[Malformed Packet]"/>
  <field name="_ws.malformed" showname="Malformed Packet" hide="yes"/>
</packet>"#;
        let d = parse_pdml(pdml);
        assert_eq!((d.frames, d.retransmissions), (3, 1));
        assert_eq!((d.mpa_replies, d.fpdus, d.malformed), (1, 0, 1));
        assert_eq!(
            (
                d.tcp_checksum_good,
                d.tcp_checksum_errors,
                d.ip_checksum_good
            ),
            (2, 1, 1)
        );
    }
}
