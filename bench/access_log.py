"""Cost of one access line (automem/common/logs.py ``access``) per format, written to /dev/null.

    .venv/bin/python bench/access_log.py --n 20000 --rounds 3

Prints microseconds per line for json and text, interleaved, and the medians.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from automem.common import logs


def one(fmt: str, n: int) -> float:
    logs.configure_logging("INFO", fmt)
    logging.getLogger().handlers[0].setStream(open("/dev/null", "w"))  # noqa: SIM115 - lives as long as the run
    start = time.perf_counter()
    for _ in range(n):
        logs.access("grpc", "/automem.v1.RecallService/SearchMemories", "", "OK", 0.0123, "anonymous", "acme/app")
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"json": [], "text": []}
    for _ in range(args.rounds):
        for fmt, values in results.items():
            values.append(one(fmt, args.n))
    for fmt, values in results.items():
        print(f"{fmt}: {', '.join(f'{v:.1f}' for v in values)} us/line; median {statistics.median(values):.1f}")


if __name__ == "__main__":
    main()
