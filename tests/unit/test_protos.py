"""The checked-in generated code matches the .proto files."""

import shutil
import subprocess
import sys
from pathlib import Path

from automem import protogen


def test_generated_code_is_up_to_date_with_protos(tmp_path: Path) -> None:
    fresh = protogen.generate(tmp_path)
    checked_in = protogen.OUT_ROOT
    names = {p.relative_to(tmp_path) for p in fresh}
    assert names == {p.relative_to(checked_in) for p in (checked_in / "automem" / "v1").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts}
    stale = [str(n) for n in names if (tmp_path / n).read_bytes() != (checked_in / n).read_bytes()]
    assert not stale, f"generated code is stale, run `make protos`: {stale}"


def test_client_stubs_are_up_to_date_with_protos(tmp_path: Path) -> None:
    # clients/python ships its own copy (automem_client._proto.automem.v1): `make protos`
    # regenerates it with the server's; a proto changed without it fails here.
    fresh = protogen.generate_client(tmp_path)
    checked_in = protogen.CLIENT_ROOT / "automem_client" / "_proto"
    names = {p.relative_to(tmp_path / "automem_client" / "_proto") for p in fresh}
    assert names == {p.relative_to(checked_in) for p in checked_in.rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts}
    stale = [str(n) for n in names
             if (tmp_path / "automem_client" / "_proto" / n).read_bytes() != (checked_in / n).read_bytes()]
    assert not stale, f"the client's generated code is stale, run `make protos`: {stale}"
    assert all("from automem.v1 import" not in p.read_text() for p in fresh if p.suffix in (".py", ".pyi"))


def test_generated_code_imports_from_installed_package() -> None:
    from automem.v1 import ingest_service_pb2_grpc, memory_pb2

    memory = memory_pb2.Memory(content="x", state=memory_pb2.MEMORY_STATE_ACTIVE)
    assert memory_pb2.Memory.FromString(memory.SerializeToString()).content == "x"
    assert hasattr(ingest_service_pb2_grpc, "IngestServiceStub")


def _buf_lint(root: Path) -> subprocess.CompletedProcess[str]:
    buf = Path(sys.executable).parent / "buf"
    return subprocess.run([str(buf), "lint", str(root)], capture_output=True, text=True, check=False)


def test_protos_pass_buf_lint_standard() -> None:
    config = protogen.PROTO_ROOT / "buf.yaml"
    assert "STANDARD" in config.read_text()
    result = _buf_lint(protogen.PROTO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_buf_lint_with_our_config_refuses_a_non_standard_proto(tmp_path: Path) -> None:
    # The same configuration catches what STANDARD forbids (a shared request type, an enum
    # without its _UNSPECIFIED zero value), so the test above can fail.
    shutil.copy(protogen.PROTO_ROOT / "buf.yaml", tmp_path / "buf.yaml")
    (tmp_path / "automem" / "v1").mkdir(parents=True)
    (tmp_path / "automem" / "v1" / "bad_service.proto").write_text(
        'syntax = "proto3";\npackage automem.v1;\nenum Colour { RED = 0; }\n'
        "message Empty {}\nservice BadService {\n  rpc Ping(Empty) returns (Empty);\n}\n")
    result = _buf_lint(tmp_path)
    assert result.returncode != 0
    assert "Ping" in result.stdout and "UNSPECIFIED" in result.stdout, result.stdout


def test_buf_generate_templates_in_the_docs_are_the_shipped_files() -> None:
    # docs/clients.md shows buf.gen.yaml templates for Go and TypeScript; docs/buf holds the
    # same text as files, pointing at this module (protos/, the directory of buf.yaml).
    import re

    import yaml

    root = protogen.ROOT
    shown = {name: text for text, name in re.findall(
        r"```yaml\n(# (buf\.gen\.\w+\.yaml)\n.*?)```", (root / "docs" / "clients.md").read_text(), re.DOTALL)}
    assert set(shown) == {"buf.gen.go.yaml", "buf.gen.ts.yaml"}
    for name, text in shown.items():
        assert (root / "docs" / "buf" / name).read_text() == text
        config = yaml.safe_load(text)
        assert config["version"] == "v2"
        assert [(root / i["directory"] / "buf.yaml").is_file() for i in config["inputs"]] == [True]
        assert all(p["remote"].startswith("buf.build/") and p["out"] for p in config["plugins"])
