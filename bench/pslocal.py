"""What the local parameter-server baselines (bench/ps_tf.py, bench/ps_paddle.py) share."""

import socket


def free_ports(n):
    """`n` distinct free TCP ports on 127.0.0.1 (bound together, then released)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports
