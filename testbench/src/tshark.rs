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

/// Counts the fields of interest in tshark's PDML, one `<field …>` or `<proto …>` per line.
fn parse_pdml(pdml: &str) -> Dissection {
    let mut d = Dissection::default();
    for line in pdml.lines() {
        let line = line.trim_start();
        if line.starts_with("<packet>") {
            d.frames += 1;
        }
        let Some(name) = attribute(line, "name") else {
            continue;
        };
        let show = attribute(line, "show").unwrap_or_default();
        let showname = attribute(line, "showname").unwrap_or_default();
        match name {
            "iwarp_mpa.req" => d.mpa_requests += 1,
            "iwarp_mpa.rep" => d.mpa_replies += 1,
            "iwarp_mpa.fpdu" => d.fpdus += 1,
            "iwarp_mpa.crc_check" if showname.contains("Good CRC32") => d.good_crc += 1,
            "iwarp_mpa.crc_check" => d.bad_crc += 1,
            "_ws.malformed" => d.malformed += 1,
            // Checksum status: 0 bad, 1 good, 2 unverified.
            "tcp.checksum.status" if show == "1" => d.tcp_checksum_good += 1,
            "tcp.checksum.status" if show == "0" => d.tcp_checksum_errors += 1,
            "ip.checksum.status" if show == "1" => d.ip_checksum_good += 1,
            "ip.checksum.status" if show == "0" => d.ip_checksum_errors += 1,
            "iwarp_rdma.opcode" => {
                // showname: ".... 0011 = OpCode: Send (0x3)"
                let label = showname.rsplit("OpCode: ").next().unwrap_or(showname);
                d.rdmap_opcodes
                    .push(label.split(" (").next().unwrap_or(label).to_string());
            }
            _ => {}
        }
    }
    d
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
}
