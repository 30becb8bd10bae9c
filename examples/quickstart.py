"""Store a memory and recall it with automem's Python client (docs/clients.md).

    .venv/bin/python examples/quickstart.py --grpc localhost:50051
    .venv/bin/python examples/quickstart.py --rest http://localhost:8001

(the virtualenv `make install` made holds the client; elsewhere: `pip install ./clients/python`).

``AUTOMEM_API_KEY`` is sent as the key when set, ``AUTOMEM_SCOPE`` names the scope.
tests/integration/test_client_sdk.py runs this script against a real service.
"""

from __future__ import annotations

import argparse
import os

from automem_client import Client, InvalidArgument


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--grpc", metavar="HOST:PORT", help="the gRPC server")
    where.add_argument("--rest", metavar="URL", help="the REST gateway")
    args = parser.parse_args()
    options = {"api_key": os.environ.get("AUTOMEM_API_KEY", ""), "scope": os.environ.get("AUTOMEM_SCOPE", "")}
    client = Client.grpc(args.grpc, **options) if args.grpc else Client.rest(args.rest, **options)

    with client:
        stored = client.store("We chose Postgres for the billing service", tags=["db"], type="Decision")
        print("stored:", stored.id, "version", stored.memory.version)
        for hit in client.recall("which database for billing?", limit=3).results:
            print(f"recalled: {hit.memory.content} (score {hit.final_score:.2f}, {hit.match_type})")
        try:
            client.store("too important", importance=7)
        except InvalidArgument as exc:
            print("refused:", exc.field, "-", exc.message)


if __name__ == "__main__":
    main()
