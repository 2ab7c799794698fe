#!/usr/bin/env python3
"""Where the firmware's RISC-V instructions per passive setup go, by function.

Runs the QEMU build of the self-tests and setup benchmark (built by
scripts/riscv-firmware.sh) one instruction per translation block with QEMU's execution
log (`-singlestep -d exec,nochain`), streamed through a pipe, and counts every
instruction executed inside the benchmark's measured windows (between the calls of
`measured_window` that open and close one: `Firmware::poll` only, as `minstret` in the
benchmark). Each instruction is charged to the function symbol holding its address, so
inlined code counts in its caller; the memory builtins (`memcpy`, `memset`, `memmove`)
are charged per caller, the function that jumped into them. Prints the total per
connection for the chosen checksum mode (it matches the benchmark's `minstret` figure
to within the window calls) and the largest functions.

    scripts/riscv-firmware.sh            # builds the ELF (and runs the tests)
    scripts/profile-firmware.py [--mode 0|1|2] [--top N] [--lines NAME | --inlined NAME | --by-kind] [--by-input] [--input K]
    scripts/profile-firmware.py [--mode 0|1|2] --trace SETUP --input K

Mode 0 is the first benchmark run (one connection at a time, checksums in the datapath),
1 the second (checksums in firmware too), 2 the third (8 side by side). `--lines
NAME` also charges the instructions of the functions whose symbol contains NAME to
their source lines (innermost inlined location, from the ELF's line tables through
llvm-addr2line), to see what the inlined code of a large function does; `--inlined NAME`
charges them to the call they were inlined from and to the innermost function of this
project's crates; `--by-kind` sums every instruction that way into kinds of work
(`KINDS`). `--by-input` splits the figure by the setup's polls (SYN; ACK and MPA
request; accept; RTR), each with its largest functions; `--input K` counts only poll K
in every view. `--trace SETUP --input K` prints poll K of one setup instruction by
instruction as it ran, disassembled (`llvm-objdump`): where the entries, exits and
spills of the totals are.
"""
import argparse
import bisect
import collections
import itertools
import os
import re
import subprocess
import tempfile

ELF = 'target/riscv/riscv32imac-unknown-none-elf/firmware/iwnic-firmware-qemu'
# The benchmark's runs in order (firmware/qemu/src/main.rs): one connection at a time
# (BENCH_CONNECTIONS) with checksums in the datapath, then in firmware too; then rounds
# (BENCH_ROUNDS) of MAX_SIDE_BY_SIDE side by side. Per mode: measured windows (a poll
# each) and connections.
CONNECTIONS, ROUNDS, SIDE_BY_SIDE = 100, 12, 8
MODES = ((4 * CONNECTIONS, CONNECTIONS), (4 * CONNECTIONS, CONNECTIONS),
         (4 * ROUNDS, ROUNDS * SIDE_BY_SIDE))
# What each of a setup's polls takes in, in order (passive_setup in
# firmware/src/selftest/passive_open.rs).
INPUTS = ('SYN', 'ACK and MPA request', 'accept command', 'RTR')
# A line of QEMU's exec log: `Trace 0: 0x... [cpu/pc/flags/cflags] symbol`.
TRACE_PC = re.compile(r'\[[0-9a-f]+/([0-9a-f]+)/')
# Library functions charged to their callers.
MEMORY_BUILTIN = re.compile(r'(^|::)mem(cpy|set|move)$')


def function_symbols(elf):
    """Code symbols, sorted by address, without the assembler's local labels."""
    out = subprocess.run(['nm', '-C', '-n', elf], capture_output=True, text=True, check=True)
    symbols = []
    for line in out.stdout.splitlines():
        parts = line.split(' ', 2)
        if len(parts) == 3 and parts[1] in 'tTwW' and not parts[2].startswith('.L'):
            symbols.append((int(parts[0], 16), parts[2]))
    return symbols


def window_pcs(elf, window_call):
    """The addresses executed in each measured window of a run of `elf`, in order: a list
    per window. Stopped early by the caller, it ends QEMU."""
    completed = False
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, 'exec.log')
        os.mkfifo(fifo)
        qemu = subprocess.Popen(
            ['qemu-system-riscv32', '-machine', 'virt', '-bios', 'none', '-nographic',
             '-icount', 'shift=0', '-singlestep', '-d', 'exec,nochain', '-D', fifo,
             '-kernel', elf],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            with open(fifo) as log:
                current, previous = None, None
                for line in log:
                    match = TRACE_PC.search(line)
                    if not match:
                        continue
                    pc, repeated = int(match.group(1), 16), previous
                    previous = pc
                    if pc == repeated == window_call:
                        # QEMU logs an instruction again when it runs it again (its
                        # instruction budget ran out there): not another call.
                        continue
                    if pc != window_call:
                        if current is not None:
                            current.append(pc)
                    elif current is None:
                        current = []
                    else:
                        yield current
                        current = None
            completed = True
        finally:
            if not completed:
                qemu.kill()
            status = qemu.wait()
    if status != 0:
        raise SystemExit(f'qemu exited with status {status}')


def function_of(symbols, starts, pc):
    """The name of the function symbol holding `pc`."""
    index = bisect.bisect_right(starts, pc) - 1
    return symbols[index][1] if index >= 0 else '?'


def measured_windows(elf, symbols, lines_of=None):
    """Per measured window, a Counter of instructions by function and, with `lines_of`, a
    Counter of instructions by address inside the functions whose name contains it (all
    of them but the memory builtins, with `True`)."""
    starts = [address for address, _ in symbols]
    window_call = next(address for address, name in symbols if name == 'measured_window')
    names = {}
    windows, addresses = [], []
    for pcs in window_pcs(elf, window_call):
        current, by_address = collections.Counter(), collections.Counter()
        # The function that called into a memory builtin, while one runs.
        previous, caller = None, None
        for pc in pcs:
            name = names.get(pc)
            if name is None:
                name = names[pc] = function_of(symbols, starts, pc)
            if MEMORY_BUILTIN.search(name):
                if caller is None:
                    caller = previous
                current[f'{name.split("::")[-1]} from {caller}'] += 1
            else:
                caller = None
                current[name] += 1
                if lines_of is True or (lines_of and lines_of in name):
                    by_address[pc] += 1
            previous = name
        windows.append(current)
        addresses.append(by_address)
    return windows, addresses


def print_trace(elf, symbols, window):
    """Every instruction of measured window `window` as it ran, disassembled, under the
    name of each function it enters."""
    starts = [address for address, _ in symbols]
    window_call = next(address for address, name in symbols if name == 'measured_window')
    pcs = next(itertools.islice(window_pcs(elf, window_call), window, None), None)
    if pcs is None:
        raise SystemExit(f'the run has no measured window {window}')
    dump = subprocess.run(['llvm-objdump', '-d', '--no-show-raw-insn', elf],
                          capture_output=True, text=True, check=True).stdout
    disassembly = {int(m.group(1), 16): m.group(2).strip()
                   for m in re.finditer(r'^\s*([0-9a-f]+):\s+(.*)$', dump, re.MULTILINE)}
    shown = None
    for pc in pcs:
        name = function_of(symbols, starts, pc)
        if name != shown:
            print(f'-- {name}')
            shown = name
        print(f'{pc:08x}  {disassembly.get(pc, "?")}')
    print(f'{len(pcs)} instructions')


def source_lines(elf, by_address):
    """Instruction counts by source line (innermost inlined frame) of the addresses."""
    addresses = sorted(by_address)
    out = subprocess.run(['llvm-addr2line', '-e', elf, '-a', '-i', '-C', '-f'],
                         input='\n'.join(hex(a) for a in addresses), capture_output=True,
                         text=True, check=True)
    by_line = collections.Counter()
    # Per address: its echo, then (function, file:line) pairs, innermost first.
    blocks = re.split(r'^0x', out.stdout, flags=re.M)[1:]
    for block in blocks:
        rows = block.splitlines()
        address = int(rows[0], 16)
        function, location = rows[1], rows[2]
        location = re.sub(r'^.*/(src|library)/', r'\1/', location)
        by_line[f'{location} ({function.split("<")[0][-40:]})'] += by_address[address]
    return by_line


def inlined_calls(elf, by_address):
    """Instruction counts by the call each address was inlined from: the frame just
    inside the physical function, and the innermost frame of this project's crates."""
    addresses = sorted(by_address)
    out = subprocess.run(['llvm-addr2line', '-e', elf, '-a', '-i', '-C', '-f'],
                         input='\n'.join(hex(a) for a in addresses), capture_output=True,
                         text=True, check=True)
    outer, inner = collections.Counter(), collections.Counter()
    for block in re.split(r'^0x', out.stdout, flags=re.M)[1:]:
        rows = block.splitlines()
        address = int(rows[0], 16)
        # (function, location) pairs, innermost first; the last is the physical function.
        frames = [(rows[i], re.sub(r'^.*/(src|library)/', r'\1/', rows[i + 1]))
                  for i in range(1, len(rows) - 1, 2)]
        count = by_address[address]
        call = frames[-2] if len(frames) > 1 else (frames[-1][0] + ' (itself)', frames[-1][1])
        outer[f'{call[0][:90]}  called at {frames[-1][1]}' if len(frames) > 1 else call[0][:90]] += count
        ours = next((f for f, _ in frames if 'iwnic' in f), frames[-1][0])
        inner[ours[:110]] += count
    return outer, inner


# Kinds of work, told by the innermost function of this project's crates an instruction
# was inlined from (substrings of its name; the first kind that matches takes it). The
# in-memory NIC's rings are the benchmark's hardware queues.
KINDS = (
    ('frames in (queue, header fields, 4-tuple)',
     ('TcpSegment', 'control_of', 'on_frame', 'scan_options', 'net::field',
      'passive_open::RxSlot>>')),
    ('frames out', ('TxDescriptor', 'TxSlot', 'machine::transmit', 'Machine>::send::',
                    'send_staged')),
    ('4-tuple index', ('EntryIndex', 'FourTuple', 'Machine>::find')),
    ('host records (commands in, events and completions out)',
     ('Event>::emit', 'Endpoint', 'Machine>::raise', 'Completion', 'CommandRecord',
      'WordAligned<580>', 'Machine>::complete', 'parse_header', 'parse_private_data',
      'Machine>::lookup', 'on_command', 'check_limits', 'established', 'emit_event',
      'emit_completion')),
    ('MPA request and reply', ('FrameRepr', 'V2Block', 'judge_request', 'request_bytes',
                               'Machine>::accept', 'negotiation', 'Machine>::stage',
                               'NegotiationBuffer>::stage')),
    ('RTR', ('prefix_len', 'equals_constant', 'rtr', 'judge_rtr')),
    ('clock and timers', ('Timer', 'Clock', 'Machine>::arm', 'not_after', 'set_time')),
    ('flow writes', ('write_flow', 'flow_context', 'install_flow')),
)
# The memory builtins' own instructions (charged to their callers by function) are a kind.
COPIES = 'copies (memcpy, memset, memmove)'



def by_kind(inner, by_function):
    """`inlined_calls`' innermost counts summed by KINDS, the memory builtins' from
    `by_function`; the rest is one more kind."""
    kinds = collections.Counter()
    kinds[COPIES] = sum(count for name, count in by_function.items()
                        if MEMORY_BUILTIN.search(name.split(' from ')[0]))
    for name, count in inner.items():
        # Without the table's sizes: `Machine<16, 8>>::send` matches `Machine>::send`.
        name = re.sub(r'<\d+, \d+>', '', name)
        kind = next((kind for kind, keys in KINDS if any(k in name for k in keys)),
                    'the rest: entries, exits, spills, the state machine')
        kinds[kind] += count
    return kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--elf', default=ELF)
    ap.add_argument('--mode', type=int, default=0, choices=range(len(MODES)),
                    help='0: one at a time, checksums in the datapath; 1: in firmware too; '
                         '2: side by side')
    ap.add_argument('--top', type=int, default=40)
    ap.add_argument('--lines', metavar='NAME')
    ap.add_argument('--by-input', action='store_true')
    ap.add_argument('--inlined', metavar='NAME',
                    help='what was inlined into the functions matching NAME, by call')
    ap.add_argument('--by-kind', action='store_true',
                    help='every instruction by the kind of work it does (KINDS)')
    ap.add_argument('--input', type=int, choices=range(1, len(INPUTS) + 1),
                    help='only the instructions of this poll of a setup (1 SYN, 2 ACK and '
                         'MPA request, 3 accept, 4 RTR)')
    ap.add_argument('--trace', type=int, metavar='SETUP',
                    help='with --input K: every instruction of poll K of setup SETUP (of '
                         'round SETUP in mode 2) in the order it ran, disassembled')
    args = ap.parse_args()
    if args.trace is not None:
        if not args.input:
            ap.error('--trace needs --input')
        polls = len(INPUTS)
        first = sum(count for count, _ in MODES[:args.mode])
        if not 0 <= args.trace < MODES[args.mode][0] // polls:
            ap.error(f'mode {args.mode} has setups 0 to {MODES[args.mode][0] // polls - 1}')
        return print_trace(args.elf, function_symbols(args.elf),
                           first + args.trace * polls + args.input - 1)
    if sum(map(bool, (args.lines, args.inlined, args.by_kind))) > 1:
        ap.error('--lines, --inlined and --by-kind each read the addresses of their own '
                 'functions: give one')
    windows, addresses = measured_windows(args.elf, function_symbols(args.elf),
                                          args.lines or args.inlined or args.by_kind or None)
    if len(windows) != sum(count for count, _ in MODES):
        raise SystemExit(f'expected {[count for count, _ in MODES]} windows, got {len(windows)}')
    first = sum(count for count, _ in MODES[:args.mode])
    count, connections = MODES[args.mode]
    mode = slice(first, first + count)
    # One input's polls: every len(INPUTS)-th window from its position on.
    polls = slice(args.input - 1, None, len(INPUTS)) if args.input else slice(None)
    by_function, by_address = collections.Counter(), collections.Counter()
    for window in windows[mode][polls]:
        by_function.update(window)
    for window in addresses[mode][polls]:
        by_address.update(window)
    total = sum(by_function.values())
    print(f'mode {args.mode}: {total / connections:.0f} instructions per connection '
          f'({count} measured windows, {connections} connections)')
    for name, count in by_function.most_common(args.top):
        print(f'{count / connections:8.0f}  {count / total:6.1%}  {name}')
    if args.by_input:
        for position, label in enumerate(INPUTS):
            by_poll = collections.Counter()
            for window in windows[mode][position::len(INPUTS)]:
                by_poll.update(window)
            print(f'\npoll {position + 1} ({label}): '
                  f'{sum(by_poll.values()) / connections:.0f} instructions per connection')
            for name, count in by_poll.most_common(min(args.top, 8)):
                print(f'{count / connections:8.0f}  {name}')
    if args.inlined:
        outer, inner = inlined_calls(args.elf, by_address)
        for title, counter in (('by the call inlined into it', outer),
                               ("by the innermost of this project's functions", inner)):
            print(f'\n{args.inlined!r}, {title}:')
            for name, count in counter.most_common(args.top):
                print(f'{count / connections:8.1f}  {name}')
    if args.by_kind:
        _, inner = inlined_calls(args.elf, by_address)
        kinds = by_kind(inner, by_function)
        print('\nby kind of work:')
        for kind, count in kinds.most_common():
            print(f'{count / connections:8.0f}  {count / total:6.1%}  {kind}')
    if args.lines:
        by_line = source_lines(args.elf, by_address)
        print(f'\nby source line, functions matching {args.lines!r}:')
        for line, count in by_line.most_common(args.top):
            print(f'{count / connections:8.1f}  {line}')


if __name__ == '__main__':
    main()
