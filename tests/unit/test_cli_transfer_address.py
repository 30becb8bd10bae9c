"""``automem import`` names the address it was talking to when the service goes away.

The address came from ``<data dir>/automem.endpoints.json``, which ``automem up`` keeps only
while it lives: read again after a ``kill -9`` of the service (mid-import), the failure named
the default ``127.0.0.1:50051`` instead of the service's own address.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_names_the_discovered_address_after_the_service_died(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # stands for `automem up`
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    (data / "automem.endpoints.json").write_text(json.dumps({"pid": service.pid, "grpc": address, "http": ""}))

    def die_on_first_connection() -> None:
        connection, _ = listener.accept()
        service.kill()  # the process behind the endpoints file dies...
        service.wait()
        connection.close()  # ...and its connection with it

    threading.Thread(target=die_on_first_connection, daemon=True).start()
    (tmp_path / "one.jsonl").write_text(json.dumps({"id": "a", "memory": "one fact"}) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOMEM_GRPC_TARGET", "AUTOMEM_API_KEY")}
    done = subprocess.run([sys.executable, "-m", "automem.cli", "import", str(tmp_path / "one.jsonl"), "--format",
                           "mem0", "--timeout", "20"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**env, "AUTOMEM_DATA_DIR": str(data), "AUTOMEM_GRPC_PORT": "50051"}, check=False)
    listener.close()
    assert done.returncode == 1, done.stderr
    assert f"cannot reach the service at {address}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_timeout_that_is_no_positive_number_is_a_usage_error(tmp_path: Path) -> None:
    """``--timeout 0`` (or -1, nan) made every call fail at once, reported as "cannot reach
    the service"; it is an argument error naming --timeout before anything is read."""
    (tmp_path / "one.jsonl").write_text(json.dumps({"id": "a", "memory": "one fact"}) + "\n")
    for value in ("0", "-1", "nan", "soon"):
        done = subprocess.run([sys.executable, "-m", "automem.cli", "import", str(tmp_path / "one.jsonl"),
                               "--format", "native", "--timeout", value], check=False, capture_output=True,
                              text=True,
                              cwd=REPO, timeout=60)
        assert done.returncode == 2 and "argument --timeout" in done.stderr, (value, done.stderr)
        assert "cannot reach" not in done.stderr
