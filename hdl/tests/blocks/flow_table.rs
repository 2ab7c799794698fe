//! The flow table against a software reference: a `HashMap` of tuples to indices plus
//! the block's hash and way count, which predicts a full bucket. Commands take effect
//! for lookups taken from their `done` cycle on, and the reference applies them then.

use std::collections::{HashMap, VecDeque};

use iwnic_hdl::flow_table::{
    hash, pack, EcpFlowTable, FlowTable, ECP5_SET_BITS, LOOKUP_LATENCY, WAYS,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::dut::{dut, lockstep, Bench, Engine, Timing};

dut! {
    EcpFlowTable, verilated as "flow_table",
    inputs {
        reset, lookup_local_ip, lookup_local_port, lookup_remote_ip, lookup_remote_port,
        lookup_set, lookup_valid, cmd_local_ip, cmd_local_port, cmd_remote_ip, cmd_remote_port,
        cmd_index, cmd_remove, cmd_valid
    }
    outputs {
        lookup_ready, result_valid, result_hit, result_index, busy, done, done_full,
        done_missing, insert_full_count
    }
}

/// A 4-tuple as the ports carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tuple {
    local_ip: u32,
    local_port: u16,
    remote_ip: u32,
    remote_port: u16,
}

impl Tuple {
    fn packed(&self) -> u128 {
        pack(
            self.local_ip,
            self.local_port,
            self.remote_ip,
            self.remote_port,
        )
    }

    fn random(rng: &mut StdRng) -> Tuple {
        Tuple {
            local_ip: 0x0A00_0001,
            local_port: rng.gen_range(4000..4004),
            remote_ip: 0x0A00_0000 | rng.gen_range(0..0x1_0000),
            remote_port: rng.gen(),
        }
    }

    /// `self` moved into bucket `set` by flipping low remote-port bits (the fold is
    /// linear, and remote-port bit i lands in bucket bit i).
    fn in_set(mut self, set: usize, set_bits: usize) -> Tuple {
        self.remote_port ^= (hash(self.packed(), set_bits) ^ set) as u16;
        assert_eq!(hash(self.packed(), set_bits), set);
        self
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Lookup(Tuple),
    Insert(Tuple, u16),
    Remove(Tuple),
}

/// What a command must answer, from the reference.
#[derive(Debug, Default, PartialEq, Eq)]
struct Status {
    full: bool,
    missing: bool,
}

struct Reference {
    set_bits: usize,
    map: HashMap<Tuple, u16>,
    full_count: u64,
}

impl Reference {
    fn apply(&mut self, op: &Op) -> Status {
        match *op {
            Op::Insert(tuple, index) => {
                let set = hash(tuple.packed(), self.set_bits);
                let in_set = self
                    .map
                    .keys()
                    .filter(|t| hash(t.packed(), self.set_bits) == set)
                    .count();
                if !self.map.contains_key(&tuple) && in_set == WAYS {
                    self.full_count += 1;
                    return Status {
                        full: true,
                        missing: false,
                    };
                }
                self.map.insert(tuple, index);
                Status::default()
            }
            Op::Remove(tuple) => Status {
                full: false,
                missing: self.map.remove(&tuple).is_none(),
            },
            Op::Lookup(_) => unreachable!(),
        }
    }
}

/// Offers the operations (each held until taken, after a random idle), checks each
/// lookup's result exactly `LOOKUP_LATENCY` cycles after it was taken and each command's status in
/// its `done` cycle.
struct TableBench {
    reset_cycles: u32,
    serial: bool,
    /// Operations with their place in the list; lookups and commands queue apart.
    lookups: VecDeque<(usize, Tuple)>,
    commands: VecDeque<(usize, Op)>,
    offering_lookup: bool,
    offering_command: bool,
    idle_probability: f64,
    rng: StdRng,
    reference: Reference,
    command_in_flight: Option<Op>,
    /// Expected `(cycle, hit, index)` of each taken lookup.
    results: VecDeque<(u64, bool, u16)>,
    cycle: u64,
    hits: u64,
    misses: u64,
    fulls: u64,
}

impl TableBench {
    fn new(ops: &[Op], set_bits: usize, serial: bool, idle_probability: f64, seed: u64) -> Self {
        let mut lookups = VecDeque::new();
        let mut commands = VecDeque::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Lookup(t) => lookups.push_back((i, *t)),
                _ => commands.push_back((i, *op)),
            }
        }
        TableBench {
            reset_cycles: 2,
            serial,
            lookups,
            commands,
            offering_lookup: false,
            offering_command: false,
            idle_probability,
            rng: StdRng::seed_from_u64(seed),
            reference: Reference {
                set_bits,
                map: HashMap::new(),
                full_count: 0,
            },
            command_in_flight: None,
            results: VecDeque::new(),
            cycle: 0,
            hits: 0,
            misses: 0,
            fulls: 0,
        }
    }

    fn outstanding(&self) -> bool {
        self.command_in_flight.is_some() || !self.results.is_empty()
    }

    /// In serial mode only the earliest operation may be offered, and only when
    /// nothing is outstanding.
    fn may_offer(&self, place: usize) -> bool {
        if !self.serial {
            return true;
        }
        let first = self
            .lookups
            .front()
            .map(|(i, _)| *i)
            .into_iter()
            .chain(self.commands.front().map(|(i, _)| *i))
            .min();
        !self.outstanding() && first == Some(place)
    }
}

impl Bench<Inputs, Outputs> for TableBench {
    fn inputs(&mut self) -> Option<Inputs> {
        if self.reset_cycles > 0 {
            self.reset_cycles -= 1;
            return Some(Inputs {
                reset: 1,
                ..Default::default()
            });
        }
        if self.lookups.is_empty() && self.commands.is_empty() && !self.outstanding() {
            return None;
        }
        let mut inputs = Inputs::default();
        if let Some(&(place, t)) = self.lookups.front() {
            if !self.offering_lookup && self.may_offer(place) {
                self.offering_lookup = !self.rng.gen_bool(self.idle_probability);
            }
            if self.offering_lookup {
                inputs.lookup_valid = 1;
                inputs.lookup_local_ip = t.local_ip.into();
                inputs.lookup_local_port = t.local_port.into();
                inputs.lookup_remote_ip = t.remote_ip.into();
                inputs.lookup_remote_port = t.remote_port.into();
                inputs.lookup_set = hash(t.packed(), ECP5_SET_BITS) as u64;
            }
        }
        if let Some(&(place, op)) = self.commands.front() {
            if !self.offering_command && self.command_in_flight.is_none() && self.may_offer(place) {
                self.offering_command = !self.rng.gen_bool(self.idle_probability);
            }
            if self.offering_command {
                let (t, index, remove) = match op {
                    Op::Insert(t, index) => (t, index, 0),
                    Op::Remove(t) => (t, self.rng.gen(), 1),
                    Op::Lookup(_) => unreachable!(),
                };
                inputs.cmd_valid = 1;
                inputs.cmd_local_ip = t.local_ip.into();
                inputs.cmd_local_port = t.local_port.into();
                inputs.cmd_remote_ip = t.remote_ip.into();
                inputs.cmd_remote_port = t.remote_port.into();
                inputs.cmd_index = index.into();
                inputs.cmd_remove = remove;
            }
        } else {
            // Noise on the idle command port must not matter.
            inputs.cmd_local_ip = self.rng.gen::<u32>().into();
            inputs.cmd_index = self.rng.gen::<u16>().into();
        }
        Some(inputs)
    }

    fn outputs(&mut self, inputs: &Inputs, outputs: &Outputs) {
        if inputs.reset == 1 {
            assert_eq!(outputs.lookup_ready, 0, "lookup_ready during reset");
            assert_eq!(outputs.insert_full_count, self.reference.full_count);
            return;
        }
        let cycle = self.cycle;
        self.cycle += 1;
        // A command's change is visible to lookups taken in its done cycle.
        if outputs.done == 1 {
            let op = self
                .command_in_flight
                .take()
                .expect("done without a command");
            let status = self.reference.apply(&op);
            self.fulls += u64::from(status.full);
            assert_eq!(
                Status {
                    full: outputs.done_full == 1,
                    missing: outputs.done_missing == 1,
                },
                status,
                "status of {op:?} at cycle {cycle}"
            );
        }
        assert_eq!(outputs.insert_full_count, self.reference.full_count);
        if inputs.cmd_valid == 1 && outputs.busy == 0 {
            let (_, op) = self.commands.pop_front().unwrap();
            self.command_in_flight = Some(op);
            self.offering_command = false;
        }
        if inputs.lookup_valid == 1 && outputs.lookup_ready == 1 {
            let (_, t) = self.lookups.pop_front().unwrap();
            self.offering_lookup = false;
            let found = self.reference.map.get(&t).copied();
            self.results
                .push_back((cycle + LOOKUP_LATENCY, found.is_some(), found.unwrap_or(0)));
        }
        if outputs.result_valid == 1 {
            let (due, hit, index) = self.results.pop_front().expect("a result too many");
            assert_eq!(due, cycle, "result latency");
            assert_eq!(
                (outputs.result_hit == 1, outputs.result_index as u16),
                (hit, index),
                "lookup result at cycle {cycle}"
            );
            if hit {
                self.hits += 1;
            } else {
                self.misses += 1;
            }
        } else if let Some((due, _, _)) = self.results.front() {
            assert!(*due > cycle, "no result at cycle {cycle}");
        }
    }
}

fn run(ops: &[Op], serial: bool, idle_probability: f64, seed: u64) -> (Timing, TableBench) {
    let mut bench = TableBench::new(ops, ECP5_SET_BITS, serial, idle_probability, seed);
    let timing = lockstep(
        &mut RustHdl::new(EcpFlowTable::default()),
        &mut Verilated::new(EcpFlowTable::default()),
        &mut bench,
    );
    assert!(bench.lookups.is_empty() && bench.commands.is_empty());
    (timing, bench)
}

#[test]
fn flow_table_hash_is_the_xor_fold() {
    for bits in [2, ECP5_SET_BITS, 7] {
        assert_eq!(hash(0, bits), 0);
        for j in 0..96 {
            assert_eq!(hash(1 << j, bits), 1 << (j % bits));
        }
    }
    assert_eq!((1 << ECP5_SET_BITS) * WAYS, 256);
}

/// Inserts, hits and misses, a replaced index, removes (present and missing),
/// re-inserts, and a bucket filled past its ways, one operation at a time.
#[test]
fn flow_table_directed_operations() {
    let mut rng = StdRng::seed_from_u64(0xF10);
    let a = Tuple::random(&mut rng);
    let b = Tuple::random(&mut rng);
    // Five tuples of one bucket: the fifth finds it full.
    let same: Vec<Tuple> = (0..5)
        .map(|_| Tuple::random(&mut rng).in_set(17, ECP5_SET_BITS))
        .collect();
    let mut ops = vec![
        Op::Lookup(a),
        Op::Insert(a, 7),
        Op::Lookup(a),
        Op::Lookup(b),
        Op::Insert(b, 0xBEEF),
        Op::Lookup(b),
        Op::Insert(a, 9),
        Op::Lookup(a),
        Op::Remove(a),
        Op::Lookup(a),
        Op::Lookup(b),
        Op::Remove(a),
        Op::Insert(a, 11),
        Op::Lookup(a),
    ];
    for (i, t) in same.iter().enumerate() {
        ops.push(Op::Insert(*t, 100 + i as u16));
    }
    ops.extend(same.iter().map(|t| Op::Lookup(*t)));
    ops.extend([
        Op::Insert(same[2], 200),
        Op::Remove(same[1]),
        Op::Insert(same[4], 104),
        Op::Lookup(same[1]),
        Op::Lookup(same[4]),
        Op::Insert(same[1], 101),
    ]);
    for (serial, idle, seed) in [(true, 0.0, 1), (true, 0.5, 2)] {
        let (_, bench) = run(&ops, serial, idle, seed);
        assert_eq!(bench.fulls, 2);
        assert!(bench.hits >= 10 && bench.misses >= 4);
    }
}

/// Back to back, a lookup is taken every cycle except a command's read cycle and the
/// cycle its write lands, and each result comes exactly `LOOKUP_LATENCY` cycles later.
#[test]
fn flow_table_lookups_back_to_back_with_commands() {
    let mut rng = StdRng::seed_from_u64(0xB2B);
    let pool: Vec<Tuple> = (0..16).map(|_| Tuple::random(&mut rng)).collect();
    let mut ops = vec![];
    for i in 0..200 {
        let t = pool[rng.gen_range(0..pool.len())];
        ops.push(Op::Lookup(t));
        if i % 10 == 0 {
            ops.push(Op::Insert(t, rng.gen()));
        }
    }
    let (timing, bench) = run(&ops, false, 0.0, 3);
    // Two reset cycles, the clear and the cycle its last write lands, 200 lookups, 20
    // commands' read and write-landing cycles, the latency.
    assert_eq!(
        timing.cycles,
        2 + (1 << ECP5_SET_BITS) + 1 + 200 + 2 * 20 + LOOKUP_LATENCY
    );
    assert_eq!(bench.hits + bench.misses, 200);
}

/// Random inserts, removes and lookups over a pool of tuples crowded into a few buckets
/// (so buckets fill), lookups and commands overlapping, under random idles.
#[test]
fn flow_table_random_operations_under_stalls() {
    let mut rng = StdRng::seed_from_u64(0x7AB1E);
    let pool: Vec<Tuple> = (0..40)
        .map(|i| {
            let t = Tuple::random(&mut rng);
            if i % 2 == 0 {
                t.in_set(i % 3, ECP5_SET_BITS)
            } else {
                t
            }
        })
        .collect();
    let ops: Vec<Op> = (0..1500)
        .map(|_| {
            let t = pool[rng.gen_range(0..pool.len())];
            match rng.gen_range(0..10) {
                0..=2 => Op::Insert(t, rng.gen()),
                3..=4 => Op::Remove(t),
                _ => Op::Lookup(t),
            }
        })
        .collect();
    let (timing, bench) = run(&ops, false, 0.3, 4);
    timing.report("flow_table, 1,500 random operations, 30% idle");
    println!(
        "flow_table random: {} hits, {} misses, {} full buckets",
        bench.hits, bench.misses, bench.fulls
    );
    assert!(bench.fulls > 0 && bench.hits > 100 && bench.misses > 100);
}

/// A 16-entry table (4 buckets) of the same block, so the capacity parameter is tested
/// too: its ports match the ECP5 table's, so the same bench drives it through `Small`.
mod small {
    use iwnic_hdl::flow_table::FlowTable;

    use crate::dut::dut;

    pub const SET_BITS: usize = 2;

    dut! {
        FlowTable<SET_BITS>, verilated as "flow_table_16",
        inputs {
            reset, lookup_local_ip, lookup_local_port, lookup_remote_ip, lookup_remote_port,
            lookup_set, lookup_valid, cmd_local_ip, cmd_local_port, cmd_remote_ip, cmd_remote_port,
            cmd_index, cmd_remove, cmd_valid
        }
        outputs {
            lookup_ready, result_valid, result_hit, result_index, busy, done, done_full,
            done_missing, insert_full_count
        }
    }
}

/// An engine of the small table seen through the ECP5 table's port structs.
struct Small<E>(E);

impl<E: Engine<Inputs = small::Inputs, Outputs = small::Outputs>> Engine for Small<E> {
    type Inputs = Inputs;
    type Outputs = Outputs;
    fn drive(&mut self, i: &Inputs) -> Outputs {
        let o = self.0.drive(&small::Inputs {
            reset: i.reset,
            lookup_local_ip: i.lookup_local_ip,
            lookup_local_port: i.lookup_local_port,
            lookup_remote_ip: i.lookup_remote_ip,
            lookup_remote_port: i.lookup_remote_port,
            // The small table's bucket: the same fold to its own width.
            lookup_set: hash(
                pack(
                    i.lookup_local_ip as u32,
                    i.lookup_local_port as u16,
                    i.lookup_remote_ip as u32,
                    i.lookup_remote_port as u16,
                ),
                small::SET_BITS,
            ) as u64,
            lookup_valid: i.lookup_valid,
            cmd_local_ip: i.cmd_local_ip,
            cmd_local_port: i.cmd_local_port,
            cmd_remote_ip: i.cmd_remote_ip,
            cmd_remote_port: i.cmd_remote_port,
            cmd_index: i.cmd_index,
            cmd_remove: i.cmd_remove,
            cmd_valid: i.cmd_valid,
        });
        Outputs {
            lookup_ready: o.lookup_ready,
            result_valid: o.result_valid,
            result_hit: o.result_hit,
            result_index: o.result_index,
            busy: o.busy,
            done: o.done,
            done_full: o.done_full,
            done_missing: o.done_missing,
            insert_full_count: o.insert_full_count,
        }
    }
    fn tick(&mut self) {
        self.0.tick();
    }
}

/// Random operations on the 16-entry table, where 24 tuples crowd 16 ways: buckets are
/// full much of the time, and removes free ways that inserts then take.
#[test]
fn flow_table_16_entries_random_operations_under_stalls() {
    let mut rng = StdRng::seed_from_u64(0x16);
    let pool: Vec<Tuple> = (0..24).map(|_| Tuple::random(&mut rng)).collect();
    let ops: Vec<Op> = (0..600)
        .map(|_| {
            let t = pool[rng.gen_range(0..pool.len())];
            match rng.gen_range(0..10) {
                0..=3 => Op::Insert(t, rng.gen()),
                4..=5 => Op::Remove(t),
                _ => Op::Lookup(t),
            }
        })
        .collect();
    let mut bench = TableBench::new(&ops, small::SET_BITS, false, 0.3, 5);
    let timing = lockstep(
        &mut Small(small::RustHdl::new(
            FlowTable::<{ small::SET_BITS }>::default(),
        )),
        &mut Small(small::Verilated::new(
            FlowTable::<{ small::SET_BITS }>::default(),
        )),
        &mut bench,
    );
    assert!(bench.lookups.is_empty() && bench.commands.is_empty());
    println!(
        "flow_table_16 random: {} cycles, {} hits, {} misses, {} full buckets",
        timing.cycles, bench.hits, bench.misses, bench.fulls
    );
    assert!(bench.fulls > 20 && bench.hits > 50 && bench.misses > 50);
}
