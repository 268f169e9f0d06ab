"""What a compaction hid: the records the runtime no longer sends, and their would-be faults.

After a compaction (a Claude Code `compact_boundary` line, a pi/OpenClaw
`compaction` entry) the runtime sends the live context only (see
`branch.live_context`), so `detect` rightly reports no pairing fault in the
history before it: the provider never sees it. A reviewer still wants to
know what is broken there (it is what a user reads when scrolling back, and
what a tool that replays the whole file would send), so this module pairs
that history on its own, without changing what counts as a fault.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from transcripts.core.branch import context_scopes, subagent_file
from transcripts.core.detect import (
    ORDER_SENSITIVE,
    SINGLE_RESPONSE_TURN,
    UNIQUE_CALL_IDS,
    Pairing,
    _pair_scope,
    _replayed,
)
from transcripts.core.markers import synthetic_marker
from transcripts.core.model import (
    _ABORTED,
    _INACTIVE,
    _LEADS,
    _OTHER_SHIFT,
    _SIDECHAIN,
    POSITIONAL,
    Fault,
    FaultKind,
    Record,
    Role,
    Transcript,
)
from transcripts.core.store import PairingRow, RecordStore
from transcripts.core.validate import (
    duplicate_text,
    missing_text,
    not_first_text,
    pattern_text,
    reused_text,
    unexpected_text,
    valid_id,
)


@dataclass(frozen=True, slots=True)
class Compacted:
    """The history before the last compaction.

    `boundary` is the record index of the last compaction; `hidden` the
    indexes of the records before it that the runtime does not send (in file
    order; sidechains excluded, but for a subagent's own file, which is all
    sidechain); `faults` what `detect` would report there if that history
    were sent, each segment between two compactions paired on its own,
    sorted by record then block.
    """

    boundary: int
    hidden: tuple[int, ...]
    faults: list[Fault] = field(default_factory=list)


def _is_compaction(record: Record) -> bool:
    return record.boundary or record.keep_from is not None


def before_compaction(transcript: Transcript) -> Compacted | None:
    """Return what the last compaction of the live branch hid; None when there was none."""
    records = transcript.records
    scopes = context_scopes(transcript)
    sent = {index for scope in scopes for index in scope}
    # A subagent's own file is all sidechain: there its records are the conversation's.
    own = subagent_file(transcript)
    marks = _column_marks(records, own)
    if marks is None:
        boundaries = [r.index for r in records if _is_compaction(r) and (own or not r.sidechain)]
    else:
        compactions, apart, unsent = marks
        boundaries = sorted(compactions - apart)
    if not boundaries:
        return None
    boundary = boundaries[-1]
    if marks is None:
        hidden = tuple(
            r.index
            for r in records[:boundary]
            if r.index not in sent and (own or not r.sidechain) and not _is_compaction(r)
        )
        # A set: looking each record up in the tuple made this quadratic (50,000 records: 9 s).
        hidden_set = set(hidden)
        # Each run of history between two compactions was once a context of its own.
        segments: list[list[int]] = [[]]
        for record in records[:boundary]:
            if _is_compaction(record):
                segments.append([])
            elif record.index in hidden_set and not record.inactive and record.error is None:
                segments[-1].append(record.index)
    else:
        unread: list[int] = []
        segments = [[]]
        segment = segments[0]
        for i in range(boundary):
            if i in compactions:
                segment = []
                segments.append(segment)
            elif i not in sent and i not in apart:
                unread.append(i)
                if i not in unsent:
                    segment.append(i)
        hidden = tuple(unread)
    faults: list[Fault] = []
    unusual = _unusual(transcript) if _plain_rows(transcript) else None
    for segment in segments:
        if not segment:
            continue
        found = None if unusual is None else _pair_rows(transcript, segment, unusual)
        if found is None:
            # The same pairing `detect` runs on the live context, run on this scope.
            pairing = Pairing(segment, [])
            _pair_scope(transcript, segment, pairing, False)
            found = pairing.faults
        faults.extend(found)
    faults.sort(key=lambda f: (f.record, -1 if f.block is None else f.block, str(f.kind)))
    return Compacted(boundary, hidden, faults)


def _column_marks(records: list[Record], own: bool) -> tuple[set[int], set[int], set[int]] | None:
    """Return a stored session's compactions, the records left apart, and those never paired.

    Read from the store's columns: (indexes of compaction records, of
    sidechain records unless `own`, of inactive or unreadable records).
    None for records that are no RecordStore's, or a store with replaced ones.
    """
    if not isinstance(records, RecordStore) or (marks := records.context_marks()) is None:
        return None
    boundaries, keeps = marks
    apart = set() if own else set(records.with_flag(_SIDECHAIN))
    unsent = set(records.with_flag(_INACTIVE)) | records.with_rare("error")
    return boundaries | keeps.keys(), apart, unsent


def _plain_rows(transcript: Transcript) -> bool:
    """Return True when `_pair_rows` pairs as `_pair_scope` does for this transcript's provider.

    It does for a stored session sent to a provider that pairs by id
    within a turn, its results right after their call (Anthropic, OpenAI
    Chat Completions and Responses, and the like); Gemini's order, results
    anywhere after their call or a stored history (Responses), and Bedrock
    Converse's own messages go through `_pair_scope`.
    """
    return (
        isinstance(transcript.records, RecordStore)
        and transcript.provider not in ORDER_SENSITIVE | SINGLE_RESPONSE_TURN
        and transcript.format != "bedrock"
        and transcript.adjacent
        and not transcript.server_history
    )


_Call = tuple[int, int, str, str]  # record, block, id, name


def _pair_rows(
    transcript: Transcript, segment: list[int], unusual: set[int] | None = None
) -> list[Fault] | None:
    """Return the faults `_pair_scope` finds in `segment`, paired in column space; None if not.

    The same rules, in the same order (so the faults come out as
    `_pair_scope` lists them), read from `RecordStore.pairing_rows` instead
    of a Record view per access: a segment is most of a long session. None
    when a record of `segment` needs what the rows leave out (a call with a
    problem or a family, an id repeated in one message, a relinked result,
    blocks attached to a call, a Responses reasoning item): the caller then
    runs `_pair_scope`. `unusual`
    is `_unusual(transcript)`, when the caller has it.
    """
    store = transcript.records
    assert isinstance(store, RecordStore)
    if not (_unusual(transcript) if unusual is None else unusual).isdisjoint(segment):
        return None
    rows = store.pairing_rows(segment)
    if rows is None:
        return None
    provider = transcript.provider
    responses = provider == "openai_responses"
    if responses and any(row[1] & _LEADS for row in rows):
        return None  # a reasoning item: `_pair_scope` tells whether its item follows it
    merge = provider in ("anthropic", "bedrock")  # Bedrock Converse's own files: not here
    unique_ids = provider in UNIQUE_CALL_IDS
    positions, messages, holding = _positions(segment, rows, merge)

    def at(index: int) -> tuple[int, int]:
        return positions.get(index, (0, 0))

    assistant, answering = Role.ASSISTANT, (Role.USER, Role.TOOL)
    # Each turn: its message's rows, its calls, its result run's rows, aborted, not_first.
    turns: list[tuple[list[int], list[_Call], list[int], bool, list[int]]] = []
    k, count = 0, len(messages)
    while k < count:
        row = rows[messages[k]]
        if row[0] is not assistant:
            k += 1
            continue
        message_id = row[2]
        own = [messages[k]]
        k += 1
        while (
            k < count
            and message_id is not None
            and rows[messages[k]][0] is assistant
            and rows[messages[k]][2] == message_id
        ):
            own.append(messages[k])
            k += 1
        calls: list[_Call] = []
        ids: set[str] = set()
        for q in own:
            index = segment[q]
            for block, ident, name in rows[q][3]:
                if ident:
                    if ident in ids:
                        return None  # a copy or a reused id: `_pair_scope` tells them apart
                    ids.add(ident)
                calls.append((index, block, ident, name))
        run: list[int] = []
        not_first: list[int] = []
        while k < count and rows[messages[k]][0] in answering:
            follower = rows[messages[k]]
            if not follower[4]:
                break
            if _results_follow_content(follower):
                if run:
                    break
                not_first.append(messages[k])
            run.append(messages[k])
            k += 1
            if follower[1] >> _OTHER_SHIFT:
                break
        turns.append((own, calls, run, bool(row[1] & _ABORTED), not_first))

    faults: list[Fault] = []
    earlier_ids: set[str] = set()
    answer: dict[_Call, tuple[int, str]] = {}  # call -> its result's (record, id)
    head_of: dict[_Call, int] = {}  # call -> its turn's head
    in_place: set[int] = set()  # results answering in place: record << 32 | block
    anthropic_ids = provider in ("anthropic", "bedrock")
    rewritten = transcript.rewritten_ids
    paired: list[tuple[int, list[_Call]]] = []  # the turns with calls that need answers
    for own, calls, run, aborted, not_first in turns:
        head = segment[own[0]]
        message = at(head)[0]
        if aborted:
            faults.extend(
                Fault(
                    FaultKind.ABORTED_FRAME,
                    ident,
                    index,
                    block,
                    head,
                    "",
                    "the assistant turn was aborted or errored; the runtime drops it before "
                    "the provider sees it, so this call is never sent",
                )
                for index, block, ident, _ in calls
            )
            continue
        for index, block, ident, _ in calls:
            if ident and unique_ids and ident in earlier_ids:
                faults.append(
                    Fault(
                        FaultKind.DUPLICATE_CALL_ID,
                        ident,
                        index,
                        block,
                        head,
                        reused_text(provider, message, block, ident),
                        "a call of an earlier message of the request already uses this id",
                    )
                )
            if anthropic_ids and ident and index not in rewritten and not valid_id(ident):
                faults.append(
                    Fault(
                        FaultKind.MALFORMED_CALL,
                        ident,
                        index,
                        block,
                        head,
                        pattern_text(message, block),
                        f"the id {ident[:80]!r} has characters Anthropic refuses",
                    )
                )
        if calls:  # else no record of the message holds a call for content to follow
            late = _content_after_call([rows[q] for q in own], [segment[q] for q in own], head)
            if late is not None:
                faults.append(late)
            earlier_ids.update(ident for _, _, ident, _ in calls)
            pending: dict[str, deque[_Call]] = {}
            for call in calls:
                pending.setdefault(call[2], deque()).append(call)
                head_of[call] = head
            for q in own + run:
                index = segment[q]
                for block, ident, _ in rows[q][4]:
                    queue = pending.get(ident)
                    if queue:
                        answer[queue.popleft()] = (index, ident)
                        in_place.add((index << 32) | block)
            paired.append((head, calls))
        if anthropic_ids:
            for q in not_first:
                index, first_result = segment[q], rows[q][4][0]
                faults.append(
                    Fault(
                        FaultKind.RESULT_NOT_FIRST,
                        first_result[1],
                        index,
                        first_result[0],
                        head,
                        not_first_text(at(index)[0], len(rows[q][4])),
                        "text comes before the tool results in the user message",
                    )
                )
    open_calls: dict[str, list[_Call]] = {}
    unpaired: list[tuple[int, list[_Call]]] = []  # the turns with a call unanswered so far
    for head, calls in paired:
        left = [call for call in calls if call not in answer]
        if left:
            unpaired.append((head, calls))
            for call in left:
                open_calls.setdefault(call[2], []).append(call)
    called = {call[2] for _, calls in paired for call in calls}
    answered_at = {ident: index for index, ident in answer.values()}
    for q in holding:
        index, results = segment[q], rows[q][4]
        for block, ident, text in results:
            marker = synthetic_marker(text) if text else None  # "" is no marker
            if marker is not None:
                faults.append(
                    Fault(
                        FaultKind.EXISTING_SYNTHETIC,
                        ident,
                        index,
                        block,
                        None,
                        "",
                        f"a result synthesized by an earlier repair ({marker})",
                    )
                )
            if (index << 32) | block in in_place:
                continue
            message, first = at(index)
            candidates = open_calls.get(ident, [])
            if len(candidates) == 1:
                call = candidates.pop()
                answer[call] = (index, ident)
                head = head_of[call]
                faults.append(
                    Fault(
                        FaultKind.DISPLACED_RESULT,
                        ident,
                        index,
                        block,
                        head,
                        missing_text(provider, at(head)[0], [ident]),
                        f"answers the call at record {call[0]}, but not right after it",
                    )
                )
            elif not candidates and (ident in called or _is_replayed(ident, paired)):
                first_answer = answered_at.get(ident)
                same = first_answer is not None and at(first_answer)[0] == message
                # Responses items are no messages: a second output is a duplicate wherever.
                texts = duplicate_text if same or responses else unexpected_text
                faults.append(
                    Fault(
                        FaultKind.DUPLICATE_RESULT,
                        ident,
                        index,
                        block,
                        None,
                        texts(provider, message, first + block, ident),
                        "a second result for a call that already has one",
                    )
                )
            else:
                why = (
                    "several unanswered calls share this id; ownership is ambiguous"
                    if candidates
                    else "no call on the live branch has this id"
                )
                faults.append(
                    Fault(
                        FaultKind.ORPHANED_RESULT,
                        ident,
                        index,
                        block,
                        None,
                        unexpected_text(provider, message, first + block, ident),
                        why,
                    )
                )
    for head, calls in unpaired:
        unanswered = [call for call in calls if call not in answer]
        if not unanswered:
            continue
        text = missing_text(provider, at(head)[0], [call[2] for call in unanswered])
        faults.extend(
            Fault(
                FaultKind.MISSING_RESULT,
                ident,
                index,
                block,
                head,
                text,
                f"the {name or 'unnamed'} call has no result",
            )
            for index, block, ident, name in unanswered
        )
    return faults


def _is_replayed(tool_call_id: str, paired: list[tuple[int, list[_Call]]]) -> bool:
    """Return `detect._replayed` for a result's id, the calls being those of `paired`."""
    if not tool_call_id.startswith(POSITIONAL):
        return False
    return _replayed(tool_call_id, {(call[2], "") for _, calls in paired for call in calls})


def _unusual(transcript: Transcript) -> set[int]:
    """Return the indexes of a stored session's records that `_pair_rows` leaves to the views.

    Those with blocks attached to a call, and in pi's files a relinked result.
    """
    store = transcript.records
    assert isinstance(store, RecordStore)
    unusual = store.with_rare("attached")
    if transcript.last_copy:
        unusual |= store.with_rare("relinked_from")
    return unusual


def _positions(
    segment: list[int], rows: list[PairingRow], merge: bool
) -> tuple[dict[int, tuple[int, int]], list[int], list[int]]:
    """Return `validate.request_positions` of `segment`, read from its rows, and two lists.

    The lists hold positions in `rows`: of the messages (every record but
    META ones), and of the messages holding results. One walk for the three.
    """
    positions: dict[int, tuple[int, int]] = {}
    messages: list[int] = []
    holding: list[int] = []
    message, blocks = -1, 0
    last_role: Role | None = None
    last_id: str | None = None
    meta, system, tool, user = Role.META, Role.SYSTEM, Role.TOOL, Role.USER
    for q, (index, (role, bits, message_id, calls, results)) in enumerate(
        zip(segment, rows, strict=True)
    ):
        if role is meta:
            continue
        messages.append(q)
        if results:
            holding.append(q)
        if merge and role is system:
            continue
        if merge and role is tool:
            role = user
        same_response = message_id is not None and message_id == last_id
        last_id = message_id
        if (merge or same_response) and role is last_role:
            positions[index] = (message, blocks)
        else:
            message, blocks = message + 1, 0
            positions[index] = (message, 0)
        blocks += len(calls) + len(results) + (bits >> _OTHER_SHIFT) or 1
        last_role = role
    return positions, messages, holding


def _results_follow_content(row: PairingRow) -> bool:
    """Return `detect.results_follow_content` of a record, read from its row."""
    results = row[4]
    last = results[0][0] if len(results) == 1 else max(r[0] for r in results)
    if not last:
        return False
    taken = {r[0] for r in results} | {c[0] for c in row[3]}
    return any(j not in taken for j in range(last))


def _content_after_call(rows: list[PairingRow], indexes: list[int], head: int) -> Fault | None:
    """Return the `content_after_call` of one message's records, as `detect._call_faults` does."""
    seen_call: tuple[int, str, str] | None = None
    for row, index in zip(rows, indexes, strict=True):
        _, bits, _, calls, results = row
        if not calls and seen_call is None:
            continue  # no call yet: whatever the record holds comes before any
        count = len(calls)
        total = count + len(results) + (bits >> _OTHER_SHIFT)
        if (
            calls
            and not results
            and (seen_call is None or total == count)
            and calls[0][0] == total - count
            and calls[-1][0] == total - 1
            and (count < 3 or [c[0] for c in calls] == list(range(total - count, total)))
        ):
            # The calls close the record, each block in turn: nothing comes after them.
            seen_call = calls[-1]
            continue
        taken = {r[0] for r in results} | {c[0] for c in calls}
        others = [j for j in range(total) if j not in taken]
        first_call = min((c[0] for c in calls), default=None)
        late = [j for j in others if first_call is not None and j > first_call]
        if seen_call is not None and others and not late:
            late = others
        if late:
            call = seen_call or min(calls, key=lambda c: c[0])
            return Fault(
                FaultKind.CONTENT_AFTER_CALL,
                call[1],
                index,
                late[0],
                head,
                "",
                "the assistant message goes on after a tool call",
            )
        if calls:
            seen_call = max(calls, key=lambda c: c[0])
    return None
