"""Search across sessions by content: text, tool names, tool call ids.

The database's own full-text search: an FTS5 table in SQLite, a `tsvector`
column with a GIN index in PostgreSQL (both made by migration 0012). One
entry per raw record of a session's head, written when the head's timeline is
built under the default policy (`index_session`), so no search parses a file.
Tool call ids and names stay whole words: SQLite's tokenizer is told `_` and
`-` are word characters; PostgreSQL's parser splits them, and the query is
split the same way, so an id still matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.db import connection
from django.db.models import QuerySet

TABLE = "transcripts_search"
# An FTS5 rowid per (session, record): session * 2**24 + record, so that one
# session's entries are one rowid range, deleted without a scan.
RECORDS_PER_SESSION = 1 << 24
MAX_HITS = 200
INDEX_BATCH = 2000
_WORD = re.compile(r"[\w\-]+", re.UNICODE)

SQLITE_SQL = [
    f"CREATE VIRTUAL TABLE {TABLE} USING fts5("
    "text, session_id UNINDEXED, record UNINDEXED, tokenize = \"unicode61 tokenchars '_-'\")"
]
POSTGRES_SQL = [
    f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, session_id bigint NOT NULL, "
    "record integer NOT NULL, text text NOT NULL, "
    "document tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED)",
    f"CREATE INDEX {TABLE}_document ON {TABLE} USING GIN (document)",
    f"CREATE INDEX {TABLE}_session ON {TABLE} (session_id)",
]


@dataclass(frozen=True)
class Hit:
    """A record that matches: its session, record index and a snippet with [marked] words."""

    session_id: int
    record: int
    snippet: str


def _rowid(session_id: int, record: int) -> int:
    return session_id * RECORDS_PER_SESSION + record


def index_session(session_id: int, entries: Iterable[tuple[int, str]]) -> None:
    """Replace the search entries of session `session_id` by `entries`: (record, text) pairs.

    `entries` is read INDEX_BATCH at a time: a batch is all this holds of it.
    """
    drop_session(session_id)
    kept = (
        (_rowid(session_id, record), session_id, record, text)
        for record, text in entries
        if record < RECORDS_PER_SESSION
    )
    with connection.cursor() as cursor:
        while batch := list(islice(kept, INDEX_BATCH)):
            cursor.executemany(
                f"INSERT INTO {TABLE} (rowid, session_id, record, text) VALUES (%s, %s, %s, %s)"
                if connection.vendor == "sqlite"
                else f"INSERT INTO {TABLE} (id, session_id, record, text) VALUES (%s, %s, %s, %s)",
                batch,
            )


def drop_session(session_id: int) -> None:
    """Delete the search entries of session `session_id`."""
    drop_sessions([session_id])


def drop_sessions(session_ids: list[int]) -> None:
    """Delete the search entries of the sessions `session_ids` (one statement on PostgreSQL)."""
    if not session_ids:
        return
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for session_id in session_ids:
                start = _rowid(session_id, 0)
                cursor.execute(
                    f"DELETE FROM {TABLE} WHERE rowid BETWEEN %s AND %s",
                    [start, start + RECORDS_PER_SESSION - 1],
                )
        else:
            cursor.execute(f"DELETE FROM {TABLE} WHERE session_id = ANY(%s)", [session_ids])


MAX_WORDS = 20
# Tool call ids as the providers make them, which their 400s quote: Anthropic's
# `toolu_` (`srvtoolu_` for its server tools), Bedrock's `tooluse_`, OpenAI's `call_`
# and the Responses API's `fc_`, each followed by at least 8 random characters, a
# digit among them (which `call_count` or `fc_user_login`, words of code, lack).
_CALL_ID = re.compile(
    r"(?<![\w-])(?:srvtoolu|toolu|tooluse|call|fc)_(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{8,}"
)


MAX_QUERY = 2000


def word_count(query: str) -> int:
    """Return how many words `query` holds; the search takes the first MAX_WORDS."""
    return len(_WORD.findall(query))


def words(query: str) -> list[str]:
    """Return the words of a query as the search takes them: each one must match."""
    return _WORD.findall(query)[:MAX_WORDS]


def pasted_ids(query: str) -> list[str]:
    """Return the tool call ids `query` names when it holds more than them, else [].

    A provider's 400 pasted whole ("messages.1: `tool_use` ids were found
    without `tool_result` blocks immediately after: toolu_01A…", Codex's
    "No tool output found for function call call_8x…") holds words no record
    holds; the ids it names are what the user looks for. Each id once, in order.
    """
    ids = list(dict.fromkeys(_CALL_ID.findall(query)))
    return ids if ids and _WORD.findall(query) != ids else []


def alternatives(query: str) -> list[list[str]]:
    """Return what the search looks for: lists of words, any list matching (all its words).

    The ids of a pasted error, each alone (`pasted_ids`); else the query's words.
    """
    ids = pasted_ids(query)
    return [[call_id] for call_id in ids[:MAX_WORDS]] if ids else [words(query)]


def search(query: str, sessions: QuerySet[Any] | None = None) -> list[Hit]:
    """Return up to MAX_HITS records whose text holds every word of `query`, best first.

    A pasted provider error is searched for the tool call ids it names, any
    of them (`alternatives`). `sessions` (a Session queryset, e.g. the
    user's) limits the search to those sessions inside the query itself,
    before ranking and the limit: hits of other sessions can neither crowd
    out these nor be counted. No word: no hit.
    """
    found = [alternative for alternative in alternatives(query) if alternative]
    if not found:
        return []
    scope, scope_params = "", ()
    if sessions is not None:
        subquery, scope_params = sessions.values("pk").query.sql_with_params()
        scope = f" AND session_id IN ({subquery})"
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # Each word quoted: FTS5 query syntax in what a user typed is taken literally.
            match = " OR ".join(
                "(" + " ".join('"' + word.replace('"', '""') + '"' for word in words_) + ")"
                for words_ in found
            )
            cursor.execute(
                f"SELECT session_id, record, snippet({TABLE}, 0, '[', ']', '…', 16) "
                f"FROM {TABLE} WHERE {TABLE} MATCH %s{scope} ORDER BY rank LIMIT %s",
                [match, *scope_params, MAX_HITS],
            )
        else:
            tsquery = " || ".join(["plainto_tsquery('simple', %s)"] * len(found))
            cursor.execute(
                "SELECT session_id, record, ts_headline('simple', text, query, "
                "'StartSel=[, StopSel=], MaxWords=24, MinWords=8') "
                f"FROM {TABLE}, (SELECT {tsquery} AS query) found "
                f"WHERE document @@ query{scope} ORDER BY ts_rank(document, query) DESC LIMIT %s",
                [*(" ".join(words_) for words_ in found), *scope_params, MAX_HITS],
            )
        rows = cursor.fetchall()
    return [Hit(int(session_id), int(record), snippet) for session_id, record, snippet in rows]
