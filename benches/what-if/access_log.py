#!/usr/bin/env python3
"""An hour of nginx access log (combined, with "$http_x_forwarded_for" and
$request_time appended) behind a proxy at 10.0.0.1, for `ratelimit-sim
what-if` on examples/axum/ratelimit.toml: the guide's run and the speed
benchmark in BENCHMARKS.md.

    python3 benches/what-if/access_log.py LINES > access.log

Seeded: the same LINES give the same log. The traffic: ordinary clients
(items, health, logins that mostly succeed, a few sign-ups), a credential
stuffer rotating through one /24 from minute 20 to 35, a scraper polling
the items API every second, and a sign-up bot rotating through another
/24 from minute 40.
"""

import random
import sys
import time

START = 1764669600  # 2025-12-02 10:00:00 UTC
HOUR = 3600


def ordinary(rng):
    client = f"198.18.{rng.randint(0, 63)}.{rng.randint(1, 254)}"
    roll = rng.random()
    if roll < 0.55:
        return client, "GET", "/api/items", 200
    if roll < 0.75:
        return client, "GET", "/health", 200
    if roll < 0.97:
        return client, "POST", "/login", 200 if rng.random() < 0.9 else 401
    return client, "POST", "/accounts", 201


def main():
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = random.Random(27)
    events = []
    # The lines each abuser sends (the sign-up bot a tenth of it).
    extra = max(lines // 50, 60)
    abusers = extra + min(extra, HOUR) + extra // 10
    for _ in range(max(lines - abusers, 0)):
        events.append((rng.random() * HOUR,) + ordinary(rng))
    for i in range(extra):
        t = 20 * 60 + 15 * 60 * i / extra
        events.append((t, f"203.0.113.{rng.randint(1, 254)}", "POST", "/login", 401))
    for i in range(min(extra, HOUR)):
        events.append((i * HOUR / min(extra, HOUR), "192.0.2.50", "GET", "/api/items", 200))
    for i in range(extra // 10):
        t = 40 * 60 + 10 * 60 * i / (extra // 10)
        events.append((t, f"198.51.100.{rng.randint(1, 254)}", "POST", "/accounts", 201))
    events.sort(key=lambda e: e[0])
    out = sys.stdout
    stamp_cache = {}
    for t, client, method, path, status in events:
        second = START + int(t)
        stamp = stamp_cache.get(second)
        if stamp is None:
            stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(second))
            stamp_cache = {second: stamp}
        out.write(
            f'10.0.0.1 - - [{stamp}] "{method} {path} HTTP/1.1" {status} 120 "-" '
            f'"Mozilla/5.0" "{client}" 0.00{rng.randint(1, 9)}\n'
        )


if __name__ == "__main__":
    main()
