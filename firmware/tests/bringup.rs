//! Board bring-up through embedded-hal: the PHY reset pulse and the link LED, checked
//! against a recording pin and delay (the order of pin changes and waits matters).

use std::cell::RefCell;
use std::convert::Infallible;
use std::rc::Rc;

use embedded_hal::delay::DelayNs;
use embedded_hal::digital::{ErrorType, OutputPin};
use iwnic_firmware::bringup::{reset_phy, LinkLed, PhyResetTiming};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Low,
    High,
    WaitNs(u64),
}

#[derive(Clone, Default)]
struct Recorder(Rc<RefCell<Vec<Step>>>);

impl Recorder {
    fn steps(&self) -> Vec<Step> {
        self.0.borrow_mut().drain(..).collect()
    }
}

impl ErrorType for Recorder {
    type Error = Infallible;
}

impl OutputPin for Recorder {
    fn set_low(&mut self) -> Result<(), Infallible> {
        self.0.borrow_mut().push(Step::Low);
        Ok(())
    }
    fn set_high(&mut self) -> Result<(), Infallible> {
        self.0.borrow_mut().push(Step::High);
        Ok(())
    }
}

impl DelayNs for Recorder {
    fn delay_ns(&mut self, ns: u32) {
        self.0.borrow_mut().push(Step::WaitNs(u64::from(ns)));
    }
    fn delay_ms(&mut self, ms: u32) {
        self.0
            .borrow_mut()
            .push(Step::WaitNs(u64::from(ms) * 1_000_000));
    }
}

#[test]
fn phy_reset_holds_then_settles() {
    let log = Recorder::default();
    let (mut pin, mut delay) = (log.clone(), log.clone());
    reset_phy(&mut pin, &mut delay, PhyResetTiming::default()).unwrap();
    assert_eq!(
        log.steps(),
        [
            Step::Low,
            Step::WaitNs(10_000_000),
            Step::High,
            Step::WaitNs(50_000_000)
        ]
    );
    reset_phy(
        &mut pin,
        &mut delay,
        PhyResetTiming {
            assert_ms: 1,
            settle_ms: 2,
        },
    )
    .unwrap();
    assert_eq!(
        log.steps(),
        [
            Step::Low,
            Step::WaitNs(1_000_000),
            Step::High,
            Step::WaitNs(2_000_000)
        ]
    );
}

#[test]
fn link_led_is_lit_with_link_and_blinks_on_activity() {
    let log = Recorder::default();
    let mut led = LinkLed::new(log.clone());
    led.update(false, false).unwrap();
    assert_eq!(log.steps(), [], "already dark");
    led.update(true, false).unwrap();
    led.update(true, false).unwrap();
    assert_eq!(log.steps(), [Step::High], "lit once, not rewritten");
    led.update(true, true).unwrap();
    led.update(true, false).unwrap();
    assert_eq!(log.steps(), [Step::Low, Step::High], "a blink for traffic");
    led.update(false, false).unwrap();
    assert_eq!(log.steps(), [Step::Low]);
    let _pin: Recorder = led.release();
}
