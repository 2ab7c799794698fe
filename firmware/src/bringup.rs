//! Board bring-up through `embedded-hal` 1.0: the Ethernet PHY's reset pin and a link /
//! activity LED. Generic over the traits, so each board crate supplies its own pins.

use embedded_hal::delay::DelayNs;
use embedded_hal::digital::OutputPin;

/// Reset timing of the RGMII PHYs on the supported boards (Broadcom B50612D, Realtek
/// RTL8211F): hold reset ≥ 10 ms, then wait ≥ 50 ms before the first MDIO access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhyResetTiming {
    pub assert_ms: u32,
    pub settle_ms: u32,
}

impl Default for PhyResetTiming {
    fn default() -> Self {
        PhyResetTiming {
            assert_ms: 10,
            settle_ms: 50,
        }
    }
}

/// Pulse the PHY's active-low reset, then wait for it to come up.
pub fn reset_phy<P: OutputPin, D: DelayNs>(
    reset_n: &mut P,
    delay: &mut D,
    timing: PhyResetTiming,
) -> Result<(), P::Error> {
    reset_n.set_low()?;
    delay.delay_ms(timing.assert_ms);
    reset_n.set_high()?;
    delay.delay_ms(timing.settle_ms);
    Ok(())
}

/// The link/activity LED: on while a link is up, blinking off for one poll per burst of
/// traffic.
pub struct LinkLed<P: OutputPin> {
    pin: P,
    lit: bool,
}

impl<P: OutputPin> LinkLed<P> {
    pub fn new(pin: P) -> Self {
        LinkLed { pin, lit: false }
    }

    /// Update once per poll with the link state and whether frames moved since the last call.
    pub fn update(&mut self, link_up: bool, activity: bool) -> Result<(), P::Error> {
        let lit = link_up && !activity;
        if lit != self.lit {
            if lit {
                self.pin.set_high()?;
            } else {
                self.pin.set_low()?;
            }
            self.lit = lit;
        }
        Ok(())
    }

    pub fn release(self) -> P {
        self.pin
    }
}
