"""The committed conveyor/v1 code is what ``make proto`` generates from the committed .proto files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ["conveyor/v1/task.proto", "conveyor/v1/service.proto"]
GENERATED = ["task_pb2.py", "task_pb2.pyi", "service_pb2.py", "service_pb2.pyi", "service_connect.py"]


def generate(out: Path) -> None:
    plugin = Path(sys.executable).parent / "protoc-gen-connectrpc"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", f"--python_out={out}", f"--pyi_out={out}",
         f"--plugin=protoc-gen-connectrpc={plugin}", f"--connectrpc_out={out}", "--connectrpc_opt=protobuf=google",
         *PROTOS],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip


@pytest.mark.parametrize("name", GENERATED)
def test_generated_code_is_current(tmp_path, name):
    generate(tmp_path)
    fresh = (tmp_path / "conveyor" / "v1" / name).read_text()
    assert (ROOT / "conveyor" / "v1" / name).read_text() == fresh, f"conveyor/v1/{name} is stale: run make proto"


def test_the_contract_has_the_four_services():
    from conveyor.v1 import service_pb2

    services = service_pb2.DESCRIPTOR.services_by_name
    assert sorted(services) == ["AdminService", "TaskService", "WebhookService", "WorkerService"]
    assert service_pb2.DESCRIPTOR.package == "conveyor.v1"
