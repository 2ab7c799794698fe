//! Wire formats of the iwnic connection path, shared by the firmware, the host driver,
//! the datapath model and the testbench.
//!
//! Every format follows smoltcp's two layers: a zero-copy view over bytes (`Frame`,
//! `Fpdu`, `Header`…) with field accessors, and a parsed `…Repr` with `parse` and
//! `emit`. Parsing never panics, whatever the input; emitting checks the buffer and
//! the field limits and returns an [`Error`] instead of panicking.
//!
//! | module | what |
//! |---|---|
//! | [`crc32c`] | CRC32c (Castagnoli), one-shot and streaming |
//! | [`mpa`] | MPA request/reply frames and the MPA v2 block (RFC 5044, RFC 6581) |
//! | [`fpdu`] | FPDU framing (length, PAD, CRC) and a streaming FPDU splitter |
//! | [`ddp`] | DDP/RDMAP headers for RTR messages, Send and Terminate (RFC 5040/5041) |
//! | [`host`] | host-interface records: commands, completions, events |
//! | [`net`] | Ethernet II / IPv4 / TCP frames, built on `smoltcp::wire` |
//! | [`errno`] | the Linux errno values the host API reports |
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod crc32c;
pub mod ddp;
pub mod errno;
pub mod fpdu;
pub mod host;
pub mod mpa;
pub mod net;

mod bytes;

pub use smoltcp::wire as smoltcp_wire;

/// `N` bytes on a word boundary, as the NIC's queue slots are: a record or frame built or
/// read in place. Every 32-bit field of a host record sits at a multiple of 4, so code
/// that knows its buffer is aligned writes a field with one store, not four byte stores
/// and a `memset` call per run of zeros, as it must for a plain byte slice on a core
/// without misaligned access. The compiler knows it only where the buffer arrives as a
/// `&WordAligned` argument: inlined into its caller, a builder loses the alignment on the
/// way from the queue (the firmware's record writers are out of line for this).
#[derive(Clone)]
#[repr(C, align(4))]
pub struct WordAligned<const N: usize>(pub [u8; N]);

impl<const N: usize> WordAligned<N> {
    pub const ZERO: WordAligned<N> = WordAligned([0; N]);
}

impl<const N: usize> Default for WordAligned<N> {
    fn default() -> Self {
        Self::ZERO
    }
}

impl<const N: usize> AsRef<[u8]> for WordAligned<N> {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl<const N: usize> AsMut<[u8]> for WordAligned<N> {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

/// Why a buffer could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before the structure does (for a stream: wait for more bytes).
    Truncated,
    /// The output buffer is too small for what is being emitted.
    BufferTooSmall,
    /// MPA frame key is neither the request nor the reply key, or not the one expected.
    BadKey,
    /// MPA revision other than 1 or 2.
    BadRevision,
    /// More private data than the 512 bytes RFC 5044 allows.
    PrivateDataTooLong,
    /// MPA revision 2 with the enhanced flag but fewer than 4 bytes of private data.
    MissingV2Block,
    /// FPDU CRC32c mismatch.
    BadCrc { computed: u32, received: u32 },
    /// ULPDU longer than the receiver accepts (for example beyond the segment).
    UlpduTooLong,
    /// DDP or RDMAP version other than 1.
    BadVersion,
    /// RDMAP opcode not defined, or tagged flag not matching the opcode.
    BadOpcode,
    /// A record or header field holds a value its format does not allow.
    Malformed,
    /// The FPDU stream failed earlier; nothing more is delineated.
    StreamFailed,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Truncated => f.write_str("truncated"),
            Error::BufferTooSmall => f.write_str("output buffer too small"),
            Error::BadKey => f.write_str("bad MPA key"),
            Error::BadRevision => f.write_str("bad MPA revision"),
            Error::PrivateDataTooLong => f.write_str("private data longer than 512 bytes"),
            Error::MissingV2Block => f.write_str("MPA v2 block missing"),
            Error::BadCrc { computed, received } => write!(
                f,
                "bad CRC32c: computed {computed:#010x}, received {received:#010x}"
            ),
            Error::UlpduTooLong => f.write_str("ULPDU too long"),
            Error::BadVersion => f.write_str("bad DDP/RDMAP version"),
            Error::BadOpcode => f.write_str("bad RDMAP opcode"),
            Error::Malformed => f.write_str("malformed"),
            Error::StreamFailed => f.write_str("FPDU stream already failed"),
        }
    }
}

pub type Result<T> = core::result::Result<T, Error>;
