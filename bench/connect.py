# Cost of connect() under a sandbox: `stockade run --ro bench/connect.py -- python3 bench/connect.py` in a project
# directory, against the same run unconfined (BENCHMARKS.md, issue #15).
import socket, os, time
p = "s.sock"
if os.path.exists(p): os.unlink(p)
l = socket.socket(socket.AF_UNIX); l.bind(p); l.listen(4096)
n = 2000
for blocking in (True, False):
    t = time.perf_counter()
    for i in range(n):
        c = socket.socket(socket.AF_UNIX); c.setblocking(blocking)
        c.connect(p); a, _ = l.accept(); a.close(); c.close()
    d = time.perf_counter() - t
    t2 = time.perf_counter()
    for i in range(n):
        c = socket.socket(socket.AF_INET); c.setblocking(blocking)
        try: c.connect(("127.0.0.1", 9))
        except OSError: pass
        c.close()
    d2 = time.perf_counter() - t2
    print(f"{'blocking' if blocking else 'non-blocking'}: unix connect+accept {d/n*1e6:.1f} us; tcp connect (refused) {d2/n*1e6:.1f} us")
os.unlink(p)
