#!/usr/bin/env python3
"""Calls the mediator performs itself on its general road, where it resolves the path in the sandbox's
own view (BENCHMARKS.md, issue 30): run under `stockade run` in a project directory, one kind per run.
    python3 mediated-calls.py KIND [N]     KIND: rename | symlink | create-via-link | dev-stdout
rename: a file renamed there and back (two paths resolved a call); symlink: a link made and removed;
create-via-link: a new file made through a symlink to a directory (the direct road refuses symlinks);
dev-stdout: `/dev/stdout` opened for writing (`> /dev/stdout`), a reopen of a descriptor through `/proc`.
"""
import os
import sys

kind = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
os.makedirs("out", exist_ok=True)
if kind == "rename":
    open("out/a", "w").close()
    for _ in range(n):
        os.rename("out/a", "out/b")
        os.rename("out/b", "out/a")
elif kind == "symlink":
    for i in range(n):
        os.symlink("target", f"out/l{i}")
elif kind == "create-via-link":
    if not os.path.islink("via"):
        os.symlink("out", "via")
    for i in range(n):
        os.close(os.open(f"via/f{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
elif kind == "dev-stdout":
    for _ in range(n):
        os.close(os.open("/dev/stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
else:
    sys.exit(f"unknown kind {kind}")
