#!/usr/bin/env python3
"""Interleaved A/B timing of whole commands (BENCHMARKS.md): runs each command in turn, N rounds after 20
warm-up rounds, each round starting with the next command, and prints each one's median and mean and the
median of its paired difference from the first command. On this shared VM the load drifts within
minutes; hyperfine runs one command's runs after the other's, so a drift lands on one of them, while a
difference paired round by round cancels it.
    python3 bench/ab.py [-p 'PREPARE'] [-i FILE] N 'CMD A' 'CMD B' ...   (commands are split like a shell
    would; no pipes). PREPARE runs through `sh -c` before each command, untimed (`rm -rf out && mkdir out`);
    FILE is each command's stdin (a hook call's JSON).
"""
import os, sys, time, statistics, shlex
args = sys.argv[1:]
prepare = None
stdin = None
while args[0] in ("-p", "-i"):
    if args[0] == "-p":
        prepare = ["sh", "-c", args[1]]
    else:
        stdin = args[1]
    args = args[2:]
n = int(args[0]); cmds = [shlex.split(c) for c in args[1:]]
times = [[] for _ in cmds]
devnull = os.open(os.devnull, os.O_WRONLY)
for r in range(n + 20):
    # Each round starts with the next command: whichever runs first in a round runs faster here (by
    # 0.2 to 0.4 ms in a 10 ms launch, the same binary against itself), and rotating cancels that.
    for i in [(r + k) % len(cmds) for k in range(len(cmds))]:
        c = cmds[i]
        if prepare:
            os.waitpid(os.posix_spawnp(prepare[0], prepare, os.environ), 0)
        actions = [(os.POSIX_SPAWN_DUP2, devnull, 1)]
        if stdin:
            actions.append((os.POSIX_SPAWN_OPEN, 0, stdin, os.O_RDONLY, 0))
        t = time.perf_counter()
        pid = os.posix_spawnp(c[0], c, os.environ, file_actions=actions)
        os.waitpid(pid, 0)
        if r >= 20: times[i].append((time.perf_counter() - t) * 1000)
for i, c in enumerate(cmds):
    print(f"{statistics.median(times[i]):7.3f} ms median {statistics.mean(times[i]):7.3f} mean  {' '.join(c)[:90]}")
base = times[0]
for i in range(1, len(cmds)):
    d = sorted(b - a for a, b in zip(base, times[i]))
    print(f"paired diff cmd{i}-cmd0: median {statistics.median(d):+.3f} ms")
