//! A checker of the contract's event rules (`spec/iwcm.md`, "Event rules") over what an
//! application saw: the calls it made with their returns, and the events its handlers got.
//!
//! Use one [`TraceChecker`] per device. Wrap every handler with [`TraceChecker::handler`]
//! and make the API calls through [`TraceChecker::call`] (or report them with
//! [`TraceChecker::call_started`] / [`TraceChecker::call_returned`]); each rule is checked
//! as the trace grows, and [`TraceChecker::finish`] checks what only the end can tell.
//!
//! Checked, per id unless said otherwise:
//!
//! | rule | check |
//! |---|---|
//! | 1 | handlers never overlap; all run on one thread; never on a thread inside an API call |
//! | 3 | no event after the first accept or connect fails (from its start), nor after a reject that returned 0 or -ECONNRESET |
//! | 4 | after a successful connect, at most one CONNECT_REPLY, and at the end exactly one unless the id was destroyed first |
//! | 5 | after a successful accept, no CLOSE before ESTABLISHED |
//! | 6 | CLOSE at most once, and nothing after it |
//! | 7 | no event after a handler returned non-zero |
//! | 8 | no handler starts after destroy returned; none is running for the id (on another thread) when destroy returns |
//! | — | DISCONNECT never reaches the application; CONNECT_REQUEST only as an id's first event; CONNECT_REPLY only after a connect, ESTABLISHED only after an accept; statuses from the contract's lists |

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, ThreadId};

use crate::cm::{CmEvent, EventKind};
use crate::device::{CmId, IdKey};
use crate::errno::{Errno, Result, ECONNREFUSED, ECONNRESET, EHOSTUNREACH, EINVAL, ETIMEDOUT};

/// The API calls the rules speak about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    Listen,
    Connect,
    Accept,
    Reject,
    Disconnect,
    InitQpAttr,
    Destroy,
}

/// One thing that happened to an id, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEntry {
    CallStarted(Call),
    CallReturned { call: Call, status: i32 },
    HandlerStarted { event: EventKind, status: i32 },
    HandlerReturned { event: EventKind, status: i32 },
}

#[derive(Default)]
struct IdTrace {
    entries: Vec<TraceEntry>,
    events: usize,
    accepts: usize,
    connects: usize,
    connect_ok: bool,
    accept_ok: bool,
    /// Born of a CONNECT_REQUEST (a listener's child): its accept is the one rule 3 means.
    child: bool,
    connect_replies: usize,
    established: bool,
    closed: bool,
    /// Why no event may come any more, if one of the rules says so.
    silenced: Option<&'static str>,
    destroy_started: bool,
    destroy_returned: bool,
    /// The thread a handler for this id runs on now.
    handler_thread: Option<ThreadId>,
}

#[derive(Default)]
struct State {
    ids: HashMap<IdKey, IdTrace>,
    dispatch_thread: Option<ThreadId>,
    /// The handler running now, if any (rule 1: one at a time).
    running: Option<IdKey>,
    /// Per thread: API calls open now, made outside a handler.
    open_calls: HashMap<ThreadId, usize>,
    violations: Vec<String>,
}

impl State {
    /// Whether a call on thread `me` is the application's own, not one a handler makes.
    fn outside_handler(&self, me: ThreadId) -> bool {
        self.running.is_none() || self.dispatch_thread != Some(me)
    }

    fn violation(&mut self, key: IdKey, rule: &str, what: String) {
        let trace = self
            .ids
            .get(&key)
            .map(|t| format!("{:?}", t.entries))
            .unwrap_or_default();
        self.violations
            .push(format!("{key}: rule {rule}: {what}; trace: {trace}"));
    }
}

/// Records every id's trace and checks the event rules.
#[derive(Default, Clone)]
pub struct TraceChecker {
    state: Arc<Mutex<State>>,
}

impl TraceChecker {
    pub fn new() -> TraceChecker {
        TraceChecker::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `inner` wrapped so that every event it gets and every value it returns is recorded.
    pub fn handler(
        &self,
        inner: impl Fn(&CmId, &CmEvent) -> Result<()> + Send + Sync + 'static,
    ) -> impl Fn(&CmId, &CmEvent) -> Result<()> + Send + Sync + 'static {
        let checker = self.clone();
        move |id: &CmId, event: &CmEvent| {
            checker.handler_started(id.key(), event);
            let outcome = inner(id, event);
            checker.handler_returned(id.key(), event, outcome);
            outcome
        }
    }

    /// Make `call` on `id` with `f`, recording its start and its return.
    pub fn call<T>(&self, id: &CmId, call: Call, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.call_started(id.key(), call);
        let result = f();
        self.call_returned(id.key(), call, result.as_ref().map(|_| ()).map_err(|e| *e));
        result
    }

    /// `destroy` through the checker (it consumes the id, so [`Self::call`] cannot).
    pub fn destroy(&self, id: CmId) {
        let key = id.key();
        self.call_started(key, Call::Destroy);
        id.destroy();
        self.call_returned(key, Call::Destroy, Ok(()));
    }

    pub fn call_started(&self, key: IdKey, call: Call) {
        let mut s = self.lock();
        let me = thread::current().id();
        if s.outside_handler(me) {
            *s.open_calls.entry(me).or_default() += 1;
        }
        let t = s.ids.entry(key).or_default();
        t.entries.push(TraceEntry::CallStarted(call));
        match call {
            Call::Accept => t.accepts += 1,
            Call::Connect => t.connects += 1,
            Call::Destroy => t.destroy_started = true,
            _ => {}
        }
    }

    pub fn call_returned(&self, key: IdKey, call: Call, result: Result<()>) {
        let mut s = self.lock();
        let me = thread::current().id();
        if s.outside_handler(me) {
            if let Some(open) = s.open_calls.get_mut(&me) {
                *open = open.saturating_sub(1);
            }
        }
        let status = result.err().map_or(0, Errno::get);
        let t = s.ids.entry(key).or_default();
        t.entries.push(TraceEntry::CallReturned { call, status });
        // Rule 3 is about the accept of a request (on the child id) and a connect from
        // IDLE; the same calls refused in another state (-EINVAL) silence nothing.
        let first = match call {
            Call::Accept => t.accepts == 1 && t.child,
            Call::Connect => t.connects == 1 && !t.child && !t.accept_ok,
            _ => false,
        };
        let mut late_handler = false;
        match (call, status) {
            (Call::Accept, 0) if first => t.accept_ok = true,
            (Call::Connect, 0) if first => t.connect_ok = true,
            (Call::Accept | Call::Connect, _) if first => {
                // Rule 3 covers events delivered while the call was still in flight.
                let since_start = events_since_last_start(&t.entries, call);
                t.silenced.get_or_insert("rule 3: accept/connect failed");
                if since_start > 0 {
                    s.violation(
                        key,
                        "3",
                        format!(
                            "{call:?} failed ({status}) after delivering {since_start} event(s)"
                        ),
                    );
                }
            }
            (Call::Reject, s0) if s0 == 0 || s0 == -ECONNRESET => {
                t.silenced.get_or_insert("rule 3: rejected");
            }
            (Call::Destroy, _) => {
                t.destroy_returned = true;
                t.silenced.get_or_insert("rule 8: destroyed");
                late_handler = t.handler_thread.is_some_and(|h| h != me);
            }
            _ => {}
        }
        if late_handler {
            s.violation(
                key,
                "8",
                "destroy returned while a handler for the id runs".into(),
            );
        }
    }

    /// A handler for `key` starts with `event` (what [`Self::handler`] records).
    pub fn handler_started(&self, key: IdKey, event: &CmEvent) {
        let mut s = self.lock();
        let me = thread::current().id();
        if let Some(other) = s.running {
            s.violation(
                key,
                "1",
                format!("handler started while one for {other} runs"),
            );
        }
        match s.dispatch_thread {
            None => s.dispatch_thread = Some(me),
            Some(thread) if thread != me => {
                s.violation(key, "1", "handlers on more than one thread".into())
            }
            Some(_) => {}
        }
        if s.open_calls.get(&me).is_some_and(|n| *n > 0) {
            s.violation(
                key,
                "1",
                "handler ran on a thread inside an API call".into(),
            );
        }
        s.running = Some(key);
        let t = s.ids.entry(key).or_default();
        t.entries.push(TraceEntry::HandlerStarted {
            event: event.event,
            status: event.status,
        });
        t.handler_thread = Some(me);
        let mut found = check_event(t, event);
        if t.events == 0 && event.event == EventKind::ConnectRequest {
            t.child = true;
        }
        t.events += 1;
        if let Some(reason) = t.silenced {
            found.push((
                "3/6/7/8",
                format!("{:?} delivered after {reason}", event.event),
            ));
        }
        match event.event {
            EventKind::ConnectReply => t.connect_replies += 1,
            EventKind::Established => t.established = true,
            EventKind::Close => {
                t.closed = true;
                t.silenced.get_or_insert("rule 6: CLOSE");
            }
            _ => {}
        }
        for (rule, what) in found {
            s.violation(key, rule, what);
        }
    }

    /// That handler returned `outcome`.
    pub fn handler_returned(&self, key: IdKey, event: &CmEvent, outcome: Result<()>) {
        let mut s = self.lock();
        s.running = None;
        let status = outcome.err().map_or(0, Errno::get);
        let t = s.ids.entry(key).or_default();
        t.handler_thread = None;
        t.entries.push(TraceEntry::HandlerReturned {
            event: event.event,
            status,
        });
        if status != 0 {
            t.silenced
                .get_or_insert("rule 7: handler returned non-zero");
        }
    }

    /// End-of-trace checks (rule 4's "exactly one"), then every violation found.
    pub fn finish(&self) -> Vec<String> {
        let mut s = self.lock();
        let missing: Vec<IdKey> = s
            .ids
            .iter()
            .filter(|(_, t)| {
                t.connect_ok && t.connect_replies == 0 && !t.destroy_started && !rule7_fired(t)
            })
            .map(|(k, _)| *k)
            .collect();
        for key in missing {
            s.violation(
                key,
                "4",
                "connect succeeded but no CONNECT_REPLY came".into(),
            );
        }
        s.violations.clone()
    }

    /// Violations found so far (without the end-of-trace checks).
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// The recorded trace of one id.
    pub fn trace(&self, key: IdKey) -> Vec<TraceEntry> {
        self.lock()
            .ids
            .get(&key)
            .map(|t| t.entries.clone())
            .unwrap_or_default()
    }

    /// Panic with every violation, after the end-of-trace checks.
    pub fn assert_clean(&self) {
        let violations = self.finish();
        assert!(
            violations.is_empty(),
            "event rules broken:\n{}",
            violations.join("\n")
        );
    }
}

fn rule7_fired(t: &IdTrace) -> bool {
    t.entries
        .iter()
        .any(|e| matches!(e, TraceEntry::HandlerReturned { status, .. } if *status != 0))
}

/// Handler starts since the last start of `call`.
fn events_since_last_start(entries: &[TraceEntry], call: Call) -> usize {
    entries
        .iter()
        .rev()
        .take_while(|e| **e != TraceEntry::CallStarted(call))
        .filter(|e| matches!(e, TraceEntry::HandlerStarted { .. }))
        .count()
}

/// The per-event checks that do not depend on silencing; (rule, what) for each failure.
fn check_event(t: &IdTrace, event: &CmEvent) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    let status = event.status;
    let allowed: &[i32] = match event.event {
        EventKind::ConnectRequest | EventKind::Established => &[0],
        EventKind::ConnectReply => &[
            0,
            -ECONNREFUSED,
            -ECONNRESET,
            -ETIMEDOUT,
            -EHOSTUNREACH,
            -EINVAL,
        ],
        EventKind::Close => &[0, -ECONNRESET, -ETIMEDOUT],
        EventKind::Disconnect => &[],
    };
    match event.event {
        EventKind::Disconnect => {
            found.push(("DISCONNECT", "DISCONNECT reached the application".into()))
        }
        EventKind::ConnectRequest if t.events > 0 => found.push((
            "CONNECT_REQUEST",
            "CONNECT_REQUEST not the id's first event".into(),
        )),
        EventKind::ConnectReply if t.connects == 0 => {
            found.push(("4", "CONNECT_REPLY without a connect".into()))
        }
        EventKind::ConnectReply if t.connect_replies > 0 => {
            found.push(("4", "a second CONNECT_REPLY".into()))
        }
        EventKind::Established if t.accepts == 0 => {
            found.push(("5", "ESTABLISHED without an accept".into()))
        }
        EventKind::Close if t.closed => found.push(("6", "a second CLOSE".into())),
        EventKind::Close if t.accept_ok && !t.established => {
            found.push(("5", "CLOSE before ESTABLISHED".into()))
        }
        _ => {}
    }
    if event.event != EventKind::Disconnect && !allowed.contains(&status) {
        found.push((
            "status",
            format!(
                "{:?} with status {status}, not one the contract lists",
                event.event
            ),
        ));
    }
    found
}
