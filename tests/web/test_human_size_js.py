"""static/js/pairfix.js's humanSize writes sizes as transcripts.sizes.binary_size does."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from transcripts.sizes import binary_size

SCRIPT = Path(__file__).resolve().parents[2] / "static" / "js" / "pairfix.js"
SIZES = [0, 1, 2, 1023, 1024, 1536, 1024 * 1024 - 1, 50 << 20, 10**9, 1 << 30, 5 << 40, 5 << 50]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_upload_progress_sizes_agree_with_the_servers() -> None:
    # The function alone: the rest of the script needs a page.
    [function] = re.findall(r"^function humanSize\(.*?^}$", SCRIPT.read_text(), re.M | re.S)
    program = f"{function}\nconsole.log(JSON.stringify({json.dumps(SIZES)}.map(humanSize)));"
    done = subprocess.run(
        ["node", "-e", program], capture_output=True, text=True, timeout=30, check=True
    )
    shown = json.loads(done.stdout)
    assert shown == [binary_size(n) for n in SIZES]
    assert shown[1:3] + shown[6:7] + shown[-2:] == [
        "1 byte",
        "2 bytes",
        "1.0 MiB",
        "5.0 TiB",
        "5120.0 TiB",
    ]
