"""Fuzz the unpacker: any archive, however damaged, is unpacked or refused with a message.

Valid .zip (stored, deflated, bzip2, LZMA) and .gz uploads get one to four
byte-level edits (overwrite, insert, delete) anywhere; `Unpacker.add` must
either stage sessions whose bytes it hashed right, or raise UploadRefused.
Any other exception would be a 500 on upload. PAIRFIX_FUZZ_EXAMPLES asks for
a longer run, as in tests/formats/test_fuzz.py.
"""

import gzip
import hashlib
import io
import os
import zipfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import sample
from transcripts.uploads import Limits, Unpacker, UploadRefused

LONG_RUN = "PAIRFIX_FUZZ_EXAMPLES" in os.environ
fuzz = settings(
    max_examples=int(os.environ.get("PAIRFIX_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=not LONG_RUN,
    database=settings.default.database if LONG_RUN else None,
)
LIMITS = Limits(file_size=1 << 20, total_size=4 << 20, files=10)
MEMBERS = {
    "sessions/claude_code.jsonl": sample("formats/claude_code.jsonl"),
    "openai_chat.json": sample("formats/openai_chat.json"),
}


def _zip(method: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        for name, data in MEMBERS.items():
            archive.writestr(name, data)
    return out.getvalue()


ARCHIVES = {
    "stored.zip": _zip(zipfile.ZIP_STORED),
    "deflated.zip": _zip(zipfile.ZIP_DEFLATED),
    "bzip2.zip": _zip(zipfile.ZIP_BZIP2),
    "lzma.zip": _zip(zipfile.ZIP_LZMA),
    "claude_code.jsonl.gz": gzip.compress(MEMBERS["sessions/claude_code.jsonl"], mtime=0),
}


@st.composite
def damaged(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(ARCHIVES)))
    data = bytearray(ARCHIVES[name])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1))
        edit = draw(st.sampled_from(["overwrite", "insert", "delete"]))
        if edit == "overwrite":
            data[at] = draw(st.integers(0, 255))
        elif edit == "insert":
            data.insert(at, draw(st.integers(0, 255)))
        elif len(data) > 1:
            del data[at]
    return name, bytes(data)


def test_every_intact_archive_unpacks():
    for name, data in ARCHIVES.items():
        with Unpacker(LIMITS) as unpacker:
            unpacker.add(name, io.BytesIO(data))
            expected = 1 if name.endswith(".gz") else len(MEMBERS)
            assert len(unpacker.sessions) == expected


@fuzz
@given(damaged())
def test_a_damaged_archive_is_unpacked_or_refused_with_a_message(upload):
    name, data = upload
    with Unpacker(LIMITS) as unpacker:
        try:
            unpacker.add(name, io.BytesIO(data))
        except UploadRefused as exc:
            assert str(exc).startswith("“"), str(exc)
            return
        for staged in unpacker.sessions:
            content = staged.path.read_bytes()
            assert (len(content), hashlib.sha256(content).hexdigest()) == (
                staged.size,
                staged.sha256,
            )
    # Every staged file is deleted with the unpacker.
    assert not any(staged.path.exists() for staged in unpacker.sessions)
