#!/usr/bin/env python3
"""Replication lag, from acknowledgement to visibility: registers a fresh first install on one
node, and from the moment the answer arrives polls another node until the device resolves there.
Rotates over the ordered pairs of nodes. Prints a JSON summary (milliseconds).

Usage: lag_probe.py SAMPLES HOST:PORT HOST:PORT [HOST:PORT...]"""
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "Interop"))
from interop import Connection, generate  # noqa: E402


def main():
    samples, endpoints = int(sys.argv[1]), sys.argv[2:]
    generate()
    from registry.v1 import common_pb2, envelope_pb2, handshake_pb2  # noqa: E402

    connections = []
    for endpoint in endpoints:
        host, port = endpoint.rsplit(":", 1)
        conn = Connection(host, int(port))
        hello = envelope_pb2.ClientFrame(request_id=0)
        hello.hello.version.major = 1
        hello.hello.role = handshake_pb2.ROLE_CLIENT
        hello.hello.client_name = "lag-probe"
        conn.send(hello)
        conn.receive(envelope_pb2)
        connections.append(conn)
    pairs = [(a, b) for a in range(len(endpoints)) for b in range(len(endpoints)) if a != b]
    lags, polls, request = [], 0, 1
    for sample in range(samples):
        source, target = pairs[sample % len(pairs)]
        frame = envelope_pb2.ClientFrame(request_id=request)
        request += 1
        frame.register_device.bundle_id = "com.lagprobe.app"
        frame.register_device.identifiers.add(kind=common_pb2.IDENTIFIER_KIND_IDFV, value=str(uuid.uuid4()))
        connections[source].send(frame)
        answer = connections[source].receive(envelope_pb2)
        acknowledged = time.monotonic()
        device = answer.register_result.device_id
        while True:
            resolve = envelope_pb2.ClientFrame(request_id=request)
            request += 1
            resolve.resolve_device.device_id = device
            connections[target].send(resolve)
            found = connections[target].receive(envelope_pb2)
            polls += 1
            if found.WhichOneof("body") == "device":
                lags.append((time.monotonic() - acknowledged) * 1000)
                break
            if time.monotonic() - acknowledged > 30:
                lags.append(30_000.0)
                break
        time.sleep(0.02)
    lags.sort()
    pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]
    print(json.dumps({"samples": len(lags), "p50_ms": pick(0.5), "p90_ms": pick(0.9), "p99_ms": pick(0.99), "max_ms": lags[-1], "polls": polls}))


if __name__ == "__main__":
    main()
