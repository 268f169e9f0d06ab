"""The C line scanner built with UBSan: arguments that once made it pass NULL to memcpy.

`canonical_args` (and the appender, which rewrites a call's arguments the same way)
decodes strings into buffers allocated on their first byte. An empty string, or objects
whose keys are all empty, left a buffer NULL, and `memcpy` or `memcmp` were called on it
with a length of 0: undefined behaviour in C, which an optimising compiler may act on.
Each case below runs in a child process with the module built with
`-fsanitize=undefined -fno-sanitize-recover=undefined`, so any such call aborts it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "transcripts" / "formats" / "_linescan.c"

REPEATED = b'{"":1,"":2}'
CASES = [
    b'{"a":""}',
    b'{"b": "", "a": 1}',
    b'{"":1}',
    b'{"": 1}',
    REPEATED,
    b'{"a": {"": ""}, "": [""]}',
]


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a `_linescan` module built with UBSan; skipped where it cannot be built."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler})")
    out = tmp_path_factory.mktemp("ubsan")
    target = out / f"_linescan{sysconfig.get_config_var('EXT_SUFFIX')}"
    flags = ["-fsanitize=undefined", "-fno-sanitize-recover=undefined", "-O1", "-g"]
    built = subprocess.run(
        [compiler, "-shared", "-fPIC", *flags, "-I", sysconfig.get_paths()["include"]]
        + [str(SOURCE), "-o", str(target)],
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        pytest.skip(f"cannot build with -fsanitize=undefined: {built.stderr[-300:]}")
    return out


@pytest.mark.parametrize("raw", CASES, ids=range(len(CASES)))
def test_arguments_with_empty_strings_are_rewritten_without_undefined_behaviour(
    raw: bytes, sanitized: Path
) -> None:
    code = "import sys, _linescan\nprint(_linescan.canonical_args(sys.stdin.buffer.read()))\n"
    ran = subprocess.run(
        [sys.executable, "-c", code],
        input=raw,
        capture_output=True,
        cwd=sanitized,
        env={"PYTHONPATH": str(sanitized), "UBSAN_OPTIONS": "print_stacktrace=1"},
    )
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")[-2000:]
    assert b"runtime error" not in ran.stderr
    try:
        expected = repr(orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS))
    except orjson.JSONDecodeError:
        expected = "None"
    written = ran.stdout.decode().strip()
    # A repeated key is left to orjson (None); any other case is orjson's sorted bytes.
    assert written == ("None" if raw == REPEATED else expected)
