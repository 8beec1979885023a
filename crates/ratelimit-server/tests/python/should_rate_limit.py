"""A second gRPC implementation calling ratelimitd: Python's grpcio, with
the protobuf bytes encoded and decoded by hand (no generated code).

    python3 should_rate_limit.py ADDR DOMAIN CALLS KEY=VALUE[,KEY=VALUE...]...

makes CALLS ShouldRateLimit calls, each with one descriptor per
KEY=VALUE list, and prints one JSON line per call: the overall code, each
status (code, limit name, requests per unit, unit, remaining, seconds and
nanoseconds until reset) and the response headers; or the gRPC error.
Exit 2 if grpcio is missing.
"""

import json
import sys

try:
    import grpc
except ImportError:
    print("grpcio is not installed", file=sys.stderr)
    sys.exit(2)

METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def varint(n):
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def request(domain, descriptors):
    """RateLimitRequest: domain = 1, descriptors = 2 (entries = 1: key = 1, value = 2)."""
    out = field(1, domain.encode())
    for entries in descriptors:
        d = b"".join(
            field(1, field(1, k.encode()) + field(2, v.encode())) for k, v in entries
        )
        out += field(2, d)
    return out


def fields(data):
    """(number, wire type, value) of each field: an int or bytes."""
    i = 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            n, i = read_varint(data, i)
            value, i = data[i : i + n], i + n
        else:
            raise ValueError(f"wire type {wire} of field {number}")
        yield number, wire, value


def read_varint(data, i):
    n, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def status(data):
    """DescriptorStatus: code = 1, current_limit = 2 (requests_per_unit = 1,
    unit = 2, name = 3), limit_remaining = 3, duration_until_reset = 4."""
    out = {"code": 0, "remaining": 0, "reset_secs": 0, "reset_nanos": 0}
    for number, _, value in fields(data):
        if number == 1:
            out["code"] = value
        elif number == 2:
            for n, _, v in fields(value):
                key = {1: "requests_per_unit", 2: "unit", 3: "name"}.get(n)
                if key:
                    out[key] = v.decode() if n == 3 else v
        elif number == 3:
            out["remaining"] = value
        elif number == 4:
            for n, _, v in fields(value):
                out["reset_secs" if n == 1 else "reset_nanos"] = v
    return out


def response(data):
    """RateLimitResponse: overall_code = 1, statuses = 2, response_headers_to_add = 3."""
    out = {"overall_code": 0, "statuses": [], "headers": {}}
    for number, _, value in fields(data):
        if number == 1:
            out["overall_code"] = value
        elif number == 2:
            out["statuses"].append(status(value))
        elif number == 3:
            header = dict((n, v.decode()) for n, _, v in fields(value))
            out["headers"][header.get(1, "")] = header.get(2, "")
    return out


def main():
    addr, domain, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    descriptors = [
        [tuple(e.split("=", 1)) for e in arg.split(",")] for arg in sys.argv[4:]
    ]
    body = request(domain, descriptors)
    with grpc.insecure_channel(addr) as channel:
        call = channel.unary_unary(METHOD)
        for _ in range(calls):
            try:
                answer = response(call(body, timeout=30))
            except grpc.RpcError as e:
                answer = {"error": e.code().name, "details": e.details()}
            print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
