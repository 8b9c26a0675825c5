# Download rate through each way out, without curl's own ceiling (BENCHMARKS.md, issue #16): a 1 MiB
# recv_into loop over a raw socket. Inside `stockade run --net` with `direct`; inside
# `stockade run --net-allow 127.0.0.1:PORT` with `connect`, `socks` and `http` (absolute form). PORT serves
# /big (nginx).
#   python3 bench/net_download.py PORT WAY...
import socket, time, sys, statistics
PORT = int(sys.argv[1])
def get(way):
    s = socket.create_connection(('127.0.0.1', 3128 if way != 'direct' else PORT))
    if way == 'connect':
        s.sendall(b'CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: x\r\n\r\n' % PORT)
        h=b''
        while b'\r\n\r\n' not in h: h+=s.recv(1)
    elif way == 'socks':
        s.sendall(b'\x05\x01\x00'); s.recv(2)
        s.sendall(b'\x05\x01\x00\x01\x7f\x00\x00\x01' + PORT.to_bytes(2,'big')); s.recv(10)
    if way == 'http':
        s.sendall(b'GET http://127.0.0.1:%d/big HTTP/1.0\r\n\r\n' % PORT)
    else:
        s.sendall(b'GET /big HTTP/1.0\r\n\r\n')
    n=0; t=time.perf_counter(); buf=bytearray(1<<20)
    while True:
        k=s.recv_into(buf)
        if not k: break
        n+=k
    return n/(time.perf_counter()-t)/1e6
for way in sys.argv[2:]:
    r=[get(way) for _ in range(9)]
    print(way, 'median %.0f MB/s'%statistics.median(r))
