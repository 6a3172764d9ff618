"""Archives are streamed file by file: no piece of the answer is much bigger than one file."""

from __future__ import annotations

import io
import random
import tarfile

from starlette.testclient import TestClient

from kbserver.core.model import WriteRequest
from kbserver.services import Services
from kbserver.services.access.auth import ADMIN
from kbserver.services.reading import files
from kbserver.services.writing import writes

FILE_BYTES = 200 * 1024


def _text(rng: random.Random) -> str:
    hex_text = rng.randbytes(FILE_BYTES // 2).hex()  # hex only: no credential format can match
    return "\n".join(hex_text[i : i + 64] for i in range(0, len(hex_text), 64))[:FILE_BYTES]


def test_archive_chunks_stay_about_one_file(client: TestClient, services: Services, kb: str) -> None:
    rng = random.Random(26)
    for batch in range(2):
        changes = [
            {"path": f"big/{batch}-{i}.md", "mode": "create", "content": _text(rng)} for i in range(15)
        ]
        writes.submit(services, ADMIN, kb, WriteRequest.model_validate({"files": changes}))
    version, chunks = files.archive(services, ADMIN, kb)
    sizes = [len(c) for c in chunks]
    assert sum(sizes) > 10 * FILE_BYTES  # 30 files of 200 KiB hex, gzipped to about half
    assert max(sizes) < 2 * FILE_BYTES  # never the whole archive at once
    admin = {"Authorization": "Bearer test-admin-token"}
    r = client.get(f"/api/v1/kbs/{kb}/archive", headers=admin)
    assert r.status_code == 200 and "content-length" not in r.headers  # streamed (chunked)
    assert r.headers["x-kb-version"] == version
    with tarfile.open(fileobj=io.BytesIO(r.content), mode="r:gz") as tar:
        assert len(tar.getnames()) == 31
