"""Cost of reading a JSON body that repeats keys: the REST gateway's reader
(automem/gateway/schemas.py ``parse_json_body``), the ingest service's ``metadata_json``
reader (automem/ingest/logic.py ``parse_metadata``) and an import line
(automem/cli/transfer_formats.py ``parse``), all on automem/common/jsontext.py.

A body ``{"content": "a", "metadata": {"k0": 1, ..., "kN": 1, "k0": 1, ..., "kN": 1}}`` repeats
every one of N keys; the reader must refuse it in time linear in its size (the REST reader
runs on the event loop, so its time is every other request's wait). Plain ``json.loads`` of
the same text is printed beside it as the floor. Medians of ``--repeat`` runs, seconds.

    .venv/bin/python bench/json_reader.py [--keys 10000,40000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from fastapi import HTTPException

from automem.cli import transfer_formats
from automem.common.errors import InvalidArgument
from automem.gateway.schemas import parse_json_body
from automem.ingest.logic import parse_metadata
from automem.v1 import ingest_service_pb2


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _row(n: int, repeat: int) -> str:
    """One table row: N keys, each given twice."""
    keys = ", ".join(f'"k{i}": 1' for i in range(n))
    metadata = f"{{{keys}, {keys}}}"
    body = f'{{"content": "a", "metadata": {metadata}}}'
    line = f'{{"id": "a", "memory": "a", "metadata": {metadata}}}\n'.encode()
    item = ingest_service_pb2.MemoryInput(content="a", metadata_json=metadata, metadata_set=True)

    def rest() -> None:
        try:
            parse_json_body(body)
        except HTTPException:
            return
        raise SystemExit("the REST reader accepted repeated keys")

    def grpc_metadata() -> None:
        try:
            parse_metadata(item)  # past 64 KiB: refused for its size before it is read
        except InvalidArgument:
            pass

    def imported() -> None:
        if not transfer_formats.parse("mem0", line).errors:
            raise SystemExit("the import accepted repeated keys")

    floor = _median(lambda: json.loads(body), repeat)
    return (f"{n:>7} {len(body):>9} {floor:>10.3f} {_median(rest, repeat):>8.3f} "
            f"{_median(grpc_metadata, repeat):>13.4f} {_median(imported, repeat):>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="10000,40000", help="comma-separated key counts")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'keys':>7} {'bytes':>9} {'json.loads':>10} {'REST':>8} {'metadata_json':>13} {'import':>8}")
    for n in (int(k) for k in args.keys.split(",")):
        print(_row(n, args.repeat), flush=True)


if __name__ == "__main__":
    main()
