"""A built timeline stores exactly the rows and search entries made in memory from its file."""

from pathlib import Path

import pytest
from django.db import connection

from tests import hostile
from tests.helpers import SAMPLES
from transcripts import search, timeline
from transcripts.actions import timelines
from transcripts.core.compaction import before_compaction
from transcripts.engine import DEFAULT_POLICY, analyze
from transcripts.models import Timeline, TimelineRow

FILES = sorted(p for p in SAMPLES.glob("*/*") if not p.name.endswith(".expect.json"))
HOSTILE = {
    "unstorable.jsonl": hostile.unstorable_session,
    "big-line.jsonl": lambda: hostile.claude_code_session(big_line=True),
}


def in_memory(built: Timeline) -> tuple[list[tuple[object, ...]], dict[str, object]]:
    """Return the rows and compaction summary of `built` made in memory, as before spooling."""
    with built.revision.source() as data:
        analysis = timeline._analyze(built, data)
    assert analysis.transcript is not None
    compacted = before_compaction(analysis.transcript)
    rows = list(timeline._rows(analysis, compacted))
    every_position = {row[2]: row[0] for row in rows if row[3]}
    return rows, timeline._compaction_summary(compacted, every_position)


def stored_entries(session_id: int) -> list[tuple[int, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT record, text FROM {search.TABLE} WHERE session_id = %s ORDER BY record",
            [session_id],
        )
        return [(int(record), text) for record, text in cursor.fetchall()]


def check_stored(session) -> None:
    built = timelines.timeline_for(session, DEFAULT_POLICY)
    assert built.status == Timeline.Status.READY, built.error
    rows, compaction = in_memory(built)
    assert rows, "the file has rows"
    stored = list(
        TimelineRow.objects.filter(timeline=built)
        .order_by("position")
        .values_list(*timeline.COLUMNS)
    )
    assert stored == rows
    assert built.row_count == len(rows)
    assert built.compaction == compaction
    assert stored_entries(session.pk) == sorted(timeline.search_entries(rows))


@pytest.mark.django_db
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_samples_stored_rows_and_search_entries_are_the_rows_made_in_memory(
    workspace, ingest, path: Path
):
    check_stored(ingest(workspace, path.name, path.read_bytes()))


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_is_stored_as_made_in_memory(workspace, ingest, settings, name):
    # NUL, lone surrogates, bidi controls and a line of megabytes go through the spool file.
    settings.TIMELINE_INLINE_BYTES = 1 << 30  # built here, not by a task
    check_stored(ingest(workspace, name, HOSTILE[name]()))


@pytest.mark.django_db
def test_rows_are_inserted_a_batch_at_a_time(workspace, ingest, monkeypatch):
    monkeypatch.setattr(timelines, "BUILD_BATCH", 3)
    monkeypatch.setattr(search, "INDEX_BATCH", 2)
    check_stored(ingest(workspace, FILES[0].name, FILES[0].read_bytes()))


def test_a_spooled_row_reads_back_as_written(settings, tmp_path):
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "tmp")
    rows = [
        (0, "same", 0, True, 0, 10, False, True, '{"a":"\\u0000"}', "nul \\u0000 end"),
        (1, "inserted", None, False, None, None, True, False, "{}", "line\nsep\u2028 \ufffe"),
        (2, "same", 1, True, 2**40, 2**40 + 1, False, False, "[]", "é" * 100_000),
    ]
    with timeline.RowSpool() as spool:
        for row in rows:
            spool.add(row)
        assert list(spool) == rows
        assert list(spool) == rows  # read again, for the search index
        assert spool.count == 3
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_build_makes_the_engine_rows_one_at_a_time_and_keeps_none(path: Path):
    analysis = analyze(path.read_bytes(), path.name)
    assert analysis.transcript is not None
    compacted = before_compaction(analysis.transcript)
    made = list(timeline._rows(analysis, compacted))
    assert "rows" not in analysis.__dict__  # the aligned rows were not cached on the analysis
    assert len(analysis.rows) == len(made)  # now computed and cached, as the page's others use
    assert list(timeline._rows(analysis, compacted)) == made


class Recorded(timeline.RowSpool):
    made: list[timeline.RowSpool] = []

    def __init__(self) -> None:
        super().__init__()
        Recorded.made.append(self)


@pytest.mark.django_db
@pytest.mark.parametrize("failing", ["verdicts", "_insert"])
def test_a_failed_build_closes_its_rows_file_and_stores_no_row(
    workspace, ingest, monkeypatch, failing
):
    session = ingest(workspace, FILES[0].name, FILES[0].read_bytes())
    Recorded.made = []
    monkeypatch.setattr(timeline, "RowSpool", Recorded)

    def broken(*args: object) -> None:
        raise RuntimeError("engine bug")

    monkeypatch.setattr(timeline if failing == "verdicts" else timelines, failing, broken)
    if failing == "verdicts":
        built = timelines.timeline_for(session, DEFAULT_POLICY)
        assert built.status == Timeline.Status.FAILED
        assert built.error == "RuntimeError: engine bug"
    else:
        with pytest.raises(RuntimeError, match="engine bug"):
            timelines.timeline_for(session, DEFAULT_POLICY)
        assert Timeline.objects.get().status == Timeline.Status.BUILDING  # rolled back
    assert TimelineRow.objects.count() == 0
    assert stored_entries(session.pk) == []
    [spool] = Recorded.made
    assert spool.count > 0 and spool.file.closed
