//! Logging: `defmt` when the `defmt` feature is on, nothing otherwise, so the core carries
//! no formatting code in host tests or lean target builds.

#[cfg(feature = "defmt")]
macro_rules! fw_debug {
    ($($arg:tt)*) => { defmt::debug!($($arg)*) };
}
#[cfg(not(feature = "defmt"))]
macro_rules! fw_debug {
    ($($arg:tt)*) => {{
        if false {
            let _ = ($($arg)*);
        }
    }};
}

#[cfg(feature = "defmt")]
macro_rules! fw_warn {
    ($($arg:tt)*) => { defmt::warn!($($arg)*) };
}
#[cfg(not(feature = "defmt"))]
macro_rules! fw_warn {
    ($($arg:tt)*) => {{
        if false {
            let _ = ($($arg)*);
        }
    }};
}

pub(crate) use {fw_debug, fw_warn};
