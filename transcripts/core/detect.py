"""Find the tool-call integrity faults of a transcript.

Pairing follows DESIGN.md: along the live branch of the session (tree formats
link records by `uid`/`parent`), inside the context the runtime would send
(after the last compaction boundary), by occurrence within each assistant
turn, first-in-first-out for ids repeated in one turn. Ids are never deduped
across the whole file: a later turn may reuse an id (Kimi, Mistral, local models).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from transcripts.core.branch import (
    branch_arrays,
    context_scopes,
    live_context,
    path_from,
    stands_for,
)
from transcripts.core.markers import synthetic_marker
from transcripts.core.model import (
    POSITIONAL,
    Fault,
    FaultKind,
    Record,
    Role,
    ToolCall,
    ToolResult,
    Transcript,
)
from transcripts.core.store import RecordStore
from transcripts.core.validate import (
    bedrock_split_text,
    duplicate_text,
    missing_text,
    not_first_text,
    pattern_text,
    request_positions,
    reused_text,
    unexpected_text,
    valid_id,
)

DEFAULT_GRACE = 300.0  # seconds a session counts as live after its last write
# Providers that match results to calls by position where ids are missing (Gemini
# without `id`); for every other provider results in any order are legal, and
# reporting them would flag healthy Claude Code sessions (case 02).
ORDER_SENSITIVE = frozenset({"gemini"})
# Providers that want every response of a call turn in the one content right after it.
SINGLE_RESPONSE_TURN = frozenset({"gemini"})
# Providers that refuse a tool call id used by an earlier message of the request: Anthropic
# and Bedrock, and OpenAI Responses, where each function_call must have exactly one
# matching output (agents that reuse per-turn ids hit it: hermes-agent #102629, pi #9057).
UNIQUE_CALL_IDS = frozenset({"anthropic", "bedrock", "openai_responses"})


def results_follow_content(record: Record) -> bool:
    """Return True when some other content block comes before one of the record's results.

    Before the first, or between two: Anthropic wants every result ahead of
    any other content.
    """
    results = record.results
    last = results[0].block if len(results) == 1 else max(r.block for r in results)
    if not last:
        return False  # the results come first: nothing stands before them
    taken = {r.block for r in results} | {c.block for c in record.calls}
    return any(j not in taken for j in range(last))


def other_blocks(record: Record) -> list[int]:
    """Return the indexes of the record's blocks that are neither calls nor results.

    Blocks `attached` to a call (a Vercel AI SDK approval request) are not counted.
    """
    taken = {r.block for r in record.results} | {c.block for c in record.calls}
    taken.update(record.attached)
    total = len(record.calls) + len(record.results) + record.other_blocks
    return [j for j in range(total) if j not in taken]


@dataclass(slots=True)
class Turn:
    """One assistant message (its records re-joined) with the results run right after it.

    `calls` are the calls that need an answer: a block that repeats an earlier
    call of the message exactly (same id and arguments, a streaming artefact) is
    in `copies` instead. `not_first` lists run records whose results follow
    other content.
    """

    records: list[int]
    calls: list[ToolCall]
    run: list[int] = field(default_factory=list)
    aborted: bool = False
    copies: list[ToolCall] = field(default_factory=list)
    not_first: list[int] = field(default_factory=list)
    span: set[int] = field(default_factory=set)
    follower: int | None = None

    @property
    def head(self) -> int:
        """Return the record index of the assistant message's first record."""
        return self.records[0]


def turns(transcript: Transcript, context: list[int]) -> list[Turn]:
    """Split `context` into assistant turns: message records, calls, and the result run.

    The result run is the records after the message, before any other
    message, that carry tool results; it ends after a record that also holds
    other content. A first follower whose results come after other content
    still belongs to the run (Anthropic then wants the results moved first).
    The span is every message after the turn up to the next assistant message
    (OpenClaw's repair looks for a turn's results there, §1B B-1).
    """
    records = transcript.records
    messages = [i for i in context if records[i].role is not Role.META]
    found: list[Turn] = []
    # Where each turn's records end and its head starts among `messages` (no map of
    # every message to its position: a long session holds hundreds of thousands).
    ends: list[int] = []
    heads: list[int] = []
    k = 0
    while k < len(messages):
        record = records[messages[k]]
        if record.role is not Role.ASSISTANT:
            k += 1
            continue
        turn = Turn([record.index], [], aborted=record.aborted)
        heads.append(k)
        k += 1
        while (
            k < len(messages)
            and record.message_id is not None
            and records[messages[k]].role is Role.ASSISTANT
            and records[messages[k]].message_id == record.message_id
        ):
            turn.records.append(messages[k])
            k += 1
        seen: set[tuple[str, str]] = set()
        for index in turn.records:
            for call in records[index].calls:
                key = (call.id, call.args)
                if call.id and key in seen:
                    turn.copies.append(call)
                else:
                    seen.add(key)
                    turn.calls.append(call)
        ends.append(k)
        turn.follower = messages[k] if k < len(messages) else None
        while k < len(messages) and records[messages[k]].role in (Role.USER, Role.TOOL):
            follower = records[messages[k]]
            if not follower.results:
                break
            if results_follow_content(follower):
                if turn.run:
                    break
                turn.not_first.append(follower.index)
            turn.run.append(follower.index)
            k += 1
            # Gemini reads only the very next content as the function response turn. An
            # agent's own file is sent by the agent, which puts a turn's consecutive results
            # in that one content (pi's convertMessages for Google, see replay.openclaw).
            if follower.other_blocks or (
                transcript.provider in SINGLE_RESPONSE_TURN and not transcript.agent
            ):
                break
        found.append(turn)
    for k, turn in enumerate(found):
        stop = heads[k + 1] if k + 1 < len(found) else len(messages)
        turn.span = set(messages[ends[k] : stop])
    return found


@dataclass(slots=True)
class Pairing:
    """Who answers whom: the outcome of pairing one context."""

    context: list[int]
    turns: list[Turn]
    answer: dict[ToolCall, ToolResult] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    turn_of: dict[ToolCall, Turn] = field(default_factory=dict)
    in_place: set[ToolResult] = field(default_factory=set)
    # Replays of aborted frames: whether the target runtime sends them (OpenMAIC does).
    replays_aborted: bool = False
    live: bool = False
    # The leaves of the branches paired because a repair hands the session to them
    # (`pair_resumed`), in the order they were paired; each is a scope of its own.
    resumed: list[int] = field(default_factory=list)

    def paired(self, transcript: Transcript) -> bytearray:
        """Return a flag per record of `transcript`: 1 where some scope of this pairing holds it."""
        flags = bytearray(len(transcript.records))
        for context in context_scopes(transcript):
            for index in context:
                flags[index] = 1
        for leaf in self.resumed:
            for index in live_context(transcript, path_from(transcript, leaf)):
                flags[index] = 1
        return flags


def _is_tail(records: list[Record], context: list[int], turn: Turn) -> bool:
    """Return True when no message but tool results follows `turn` in the context."""
    last = (turn.run or turn.records)[-1]
    after = context[context.index(last) + 1 :]
    return all(records[i].role is Role.META or records[i].results for i in after)


def pair(transcript: Transcript, *, live: bool = False, replays_aborted: bool = False) -> Pairing:
    """Pair the calls and results of the live context and classify what does not pair.

    In place: a result in its turn's run answers the oldest unanswered call of
    that turn with its id. Out of place (after an interleaved message, in a later
    turn, before its call): a result whose id exactly one unanswered call in the
    context carries is `displaced_result`; one whose call is already answered is
    `duplicate_result`; any other is `orphaned_result`. Calls left unanswered
    are `missing_result`, or `pending_result` at the tail of a `live` session.
    Calls of aborted or errored frames are `aborted_frame` and need no answer,
    unless `replays_aborted` (the runtime sends such frames, as OpenMAIC does).
    Each scope (the live context, then each sidechain) pairs on its own.
    """
    scopes = context_scopes(transcript)
    result = Pairing(scopes[0], [], replays_aborted=replays_aborted, live=live)
    if transcript.tree:
        result.faults.extend(_loop_faults(transcript, branch_arrays(transcript)[0]))
    for context in scopes:
        _pair_scope(transcript, context, result, live)
    return result


def _loop_faults(transcript: Transcript, path: Sequence[int]) -> list[Fault]:
    """Return a `parent_loop` when the walk up the branch `path` (root first) comes round again.

    `branch.live_path` stops where a record's parent is one it has walked
    already, so that record is the branch's root. pi walks `parentId` from
    the file's last entry with no guard (pi-coding-agent 0.73.1
    session-manager.js `buildSessionContext`, `while (current)`): on such a
    link it goes round for ever and never resumes the session. The repair
    writes that record as a root (`parentId` null), the branch Pairfix reads.
    Only pi's files (`Transcript.last_copy`).
    """
    if not transcript.last_copy or not path:
        return []
    records = transcript.records
    root = path[0]
    named = records[root].parent
    if named is None:
        return []
    if isinstance(records, RecordStore):
        parent = records.parent_of(root)
    else:
        parent = stands_for(transcript)(named)  # pi's: the last copy stands for a uid
    if parent is None or parent not in path:
        return []
    if parent == root:
        why = "its parentId is its own id: pi's walk from the last entry never leaves it"
    else:
        why = (
            f"its parentId {named} names record {parent}, which pi's walk from the last entry "
            "reached before it: the walk goes round that loop for ever"
        )
    return [
        Fault(
            FaultKind.PARENT_LOOP,
            None,
            root,
            None,
            None,
            "",
            f"{why}, so pi hangs on resume and sends no request",
        )
    ]


def pair_resumed(transcript: Transcript, pairing: Pairing, leaf: int) -> None:
    """Pair, into `pairing`, the branch ending at record `leaf` as one more scope.

    That is the branch the session resumes from once a repair drops the end
    of the branch it resumed from (`branch.resumed_leaf`): its faults are the
    ones the repaired file would show, so one repair mends them too. Records
    an earlier scope paired are left out, as a sidechain's are. Each fault
    found says the branch is resumed only once the repair is made.
    """
    paired = pairing.paired(transcript)
    whole = path_from(transcript, leaf)
    path = [index for index in whole if not paired[index]]
    first = len(pairing.faults)
    pairing.resumed.append(leaf)
    # The loop is looked for on the whole branch: one that an earlier scope broke at a
    # record the repair drops closes again through the records this branch adds.
    looped = {f.record for f in pairing.faults if f.kind is FaultKind.PARENT_LOOP}
    if whole and whole[0] not in looped:
        pairing.faults.extend(_loop_faults(transcript, whole))
    _pair_scope(transcript, live_context(transcript, path), pairing, pairing.live)
    note = (
        f"; on the branch ending at record {leaf}, which the session resumes from once the "
        "repair drops the end of the branch it resumes from now"
    )
    pairing.faults[first:] = [
        replace(fault, detail=fault.detail + note) for fault in pairing.faults[first:]
    ]


def _pair_scope(transcript: Transcript, context: list[int], result: Pairing, live: bool) -> None:
    """Pair one scope's calls and results into `result` (see `pair`)."""
    records = transcript.records
    found = turns(transcript, context)
    result.turns.extend(found)
    positions = request_positions(transcript, context)
    provider = transcript.provider
    unique_ids = provider in UNIQUE_CALL_IDS
    replays_aborted = result.replays_aborted
    faults = result.faults

    def at(index: int) -> tuple[int, int]:
        return positions.get(index, (0, 0))

    in_place = result.in_place
    if provider == "openai_responses":
        faults.extend(_lone_reasoning(records, context))
    earlier_ids: set[str] = set()
    for turn in found:
        message, _ = at(turn.head)
        if replays_aborted and not turn.calls and records[turn.head].interrupted:
            faults.append(
                Fault(
                    FaultKind.ABORTED_FRAME,
                    None,
                    turn.head,
                    None,
                    turn.head,
                    "",
                    "an interrupted assistant frame without tool calls; OpenMAIC drops it "
                    "from the model's view whenever it repairs the session",
                )
            )
        if turn.aborted:
            faults.extend(
                Fault(
                    FaultKind.ABORTED_FRAME,
                    call.id,
                    call.record,
                    call.block,
                    turn.head,
                    "",
                    "the assistant turn was aborted or errored; "
                    + (
                        "the runtime replays it, so the call needs a result"
                        if replays_aborted
                        else "the runtime drops it before the provider sees it, so this call "
                        "is never sent"
                    ),
                )
                for call in turn.calls
            )
            if not replays_aborted:
                turn.calls = []
                turn.copies = []
                continue
        faults.extend(_call_faults(transcript, turn, message, earlier_ids, unique_ids))
        earlier_ids.update(call.id for call in turn.calls)
        pending: dict[tuple[str, str], deque[ToolCall]] = {}
        for call in turn.calls:
            pending.setdefault((call.id, call.family), deque()).append(call)
            result.turn_of[call] = turn
        # Results written on the calls themselves (Gemini CLI) answer in place too.
        for index in turn.records + turn.run:
            for res in records[index].results:
                queue = pending.get((res.tool_call_id, res.family))
                if queue:
                    result.answer[queue.popleft()] = res
                    in_place.add(res)
        faults.extend(_relinked_faults(transcript, turn, result))
        faults.extend(_run_faults(transcript, turn, result, at))
    open_calls: dict[tuple[str, str], list[ToolCall]] = {}
    for turn in found:
        for call in turn.calls:
            if call not in result.answer:
                open_calls.setdefault((call.id, call.family), []).append(call)
    ever_called = {(call.id, call.family) for turn in found for call in turn.calls}
    families: dict[str, set[str]] | None = None  # call id -> families of the calls with it
    # Positions in the context, for providers that take results anywhere after their call
    # only: elsewhere this would be one more entry per record of a long session.
    order = {index: k for k, index in enumerate(context)} if not transcript.adjacent else {}
    answered_at = {res.tool_call_id: res.record for res in result.answer.values()}
    # Only records holding results have any to pair; a stored session's are found by its
    # columns, not a view of each record of the context.
    holding = records.holding_results(context) if isinstance(records, RecordStore) else context
    for index in holding:
        record = records[index]
        if record.role is Role.META:
            continue
        for res in record.results:
            marker = synthetic_marker(res.text)
            if marker is not None:
                faults.append(
                    Fault(
                        FaultKind.EXISTING_SYNTHETIC,
                        res.tool_call_id,
                        index,
                        res.block,
                        None,
                        "",
                        f"a result synthesized by an earlier repair ({marker})",
                    )
                )
            if res in in_place:
                continue
            message, first = at(index)
            key = (res.tool_call_id, res.family)
            candidates = open_calls.get(key, [])
            if len(candidates) == 1:
                call = candidates.pop()
                result.answer[call] = res
                if not transcript.adjacent and order[call.record] < order[index]:
                    continue  # Responses accepts a result anywhere after its call
                turn = result.turn_of[call]
                call_message, _ = at(turn.head)
                faults.append(
                    Fault(
                        FaultKind.DISPLACED_RESULT,
                        res.tool_call_id,
                        index,
                        res.block,
                        turn.head,
                        missing_text(provider, call_message, [call.id]),
                        f"answers the call at record {call.record}, but not right after it",
                    )
                )
            elif not candidates and (
                key in ever_called or _replayed(res.tool_call_id, ever_called)
            ):
                first_answer = answered_at.get(res.tool_call_id)
                same = first_answer is not None and at(first_answer)[0] == message
                # Responses items are no messages: a second output is a duplicate wherever.
                texts = (
                    duplicate_text if same or provider == "openai_responses" else unexpected_text
                )
                faults.append(
                    Fault(
                        FaultKind.DUPLICATE_RESULT,
                        res.tool_call_id,
                        index,
                        res.block,
                        None,
                        texts(provider, message, first + res.block, res.tool_call_id),
                        "a second result for a call that already has one",
                    )
                )
            elif transcript.server_history and not candidates:
                # The request continues a stored response: the call lives server-side.
                continue
            else:
                if families is None:
                    # Built once, on the first result that needs it, not a scan per result.
                    families = {}
                    for cid, family in ever_called:
                        families.setdefault(cid, set()).add(family)
                other = families.get(res.tool_call_id, set())
                why = (
                    "several unanswered calls share this id; ownership is ambiguous"
                    if candidates
                    else f"the call with this id is a {'/'.join(sorted(other))} call, which a "
                    "result of this type does not answer"
                    if other
                    else "no call on the live branch has this id"
                )
                faults.append(
                    Fault(
                        FaultKind.ORPHANED_RESULT,
                        res.tool_call_id,
                        index,
                        res.block,
                        None,
                        unexpected_text(provider, message, first + res.block, res.tool_call_id),
                        why,
                    )
                )
    for turn in found:
        unanswered = [call for call in turn.calls if call not in result.answer]
        if not unanswered:
            continue
        message, _ = at(turn.head)
        text = missing_text(provider, message, [call.id for call in unanswered])
        pending_tail = live and _is_tail(records, context, turn)
        for call in unanswered:
            faults.append(
                Fault(
                    FaultKind.PENDING_RESULT if pending_tail else FaultKind.MISSING_RESULT,
                    call.id,
                    call.record,
                    call.block,
                    turn.head,
                    "" if pending_tail else text,
                    f"the {call.name or 'unnamed'} call "
                    + ("is still running" if pending_tail else "has no result"),
                )
            )


def _replayed(tool_call_id: str, ever_called: set[tuple[str, str]]) -> bool:
    """Return True for a positional response (`@name#k`) beyond its name's calls.

    Gemini without ids pairs by name and rank: a resume that replays each
    `functionResponse` (reported against Gemini CLI) gives a name more
    responses than calls, and the extra ones answer calls already answered.
    """
    if not tool_call_id.startswith(POSITIONAL):
        return False
    name = tool_call_id[len(POSITIONAL) :].rpartition("#")[0]
    return (f"{POSITIONAL}{name}#0", "") in ever_called


def _relinked_faults(transcript: Transcript, turn: Turn, pairing: Pairing) -> list[Fault]:
    """Return a `displaced_result` for each in-place result whose parent link the reader mended.

    A pi result whose `parentId` names its call's tool call id, not the entry
    holding the call, is read under that entry (as OpenClaw's import re-links
    it; `Record.relinked_from`); one whose `parentId` names no entry, or is
    null, under the entry written before it (`formats.openclaw`). pi walks
    `parentId` from the leaf and stops there (session-manager.js
    `buildSessionContext`): its request opens with the result, which the
    provider refuses, and holds nothing written before it.
    Only pi's files (`Transcript.last_copy`): Claude Code's walk takes the link
    its reader mends (a line parented on itself or on no line) as that reader does.
    """
    if not transcript.last_copy:
        return []
    records = transcript.records
    faults = []
    for call in turn.calls:
        res = pairing.answer.get(call)
        if res is None or res not in pairing.in_place:
            continue
        written = records[res.record].relinked_from
        if written is None:
            continue
        if any(c.id == written for c in records[call.record].calls):
            why = f"its parentId names the call's id {written}, not the entry holding the call "
        elif written and written == records[res.record].uid:
            why = "its parentId is its own id, not the call's entry "
        elif written:
            why = f"its parentId {written} names no entry of the file, not the call's entry "
        else:
            why = "its parentId is null, not the call's entry "
        faults.append(
            Fault(
                FaultKind.DISPLACED_RESULT,
                res.tool_call_id,
                res.record,
                res.block,
                turn.head,
                unexpected_text(transcript.provider, 0, res.block, res.tool_call_id),
                f"{why}(record {call.record}): pi's branch stops here and sends nothing before it",
            )
        )
    return faults


def _call_faults(
    transcript: Transcript,
    turn: Turn,
    message: int,
    earlier_ids: set[str],
    unique_ids: bool,
) -> list[Fault]:
    """Return the faults of a turn's own calls: malformed, repeated ids, content after calls."""
    records = transcript.records
    found: list[Fault] = []
    reported: set[str] = set()
    for call in turn.copies:
        if call.id in reported:
            continue
        reported.add(call.id)
        found.append(
            Fault(
                FaultKind.DUPLICATE_CALL_ID,
                call.id,
                call.record,
                call.block,
                turn.head,
                f"messages.{message}.content.{call.block}: `tool_use` ids must be unique",
                "the same call (id and arguments) appears again in the message, "
                "as a streaming snapshot appended twice",
            )
        )
    counts: dict[str, int] = {}
    for call in turn.calls:
        counts[call.id] = counts.get(call.id, 0) + 1
        # Two distinct calls of one message sharing an id can never be answered apart
        # (OpenAI-compatible servers write ids like `functions.edit:22`); Anthropic and
        # Bedrock also refuse an id used by an earlier message of the request.
        here = counts[call.id] > 1
        if call.id and (here or (unique_ids and call.id in earlier_ids)):
            found.append(
                Fault(
                    FaultKind.DUPLICATE_CALL_ID,
                    call.id,
                    call.record,
                    call.block,
                    turn.head,
                    reused_text(transcript.provider, message, call.block, call.id)
                    if unique_ids
                    else "",
                    "another call of the same message already uses this id"
                    if here
                    else "a call of an earlier message of the request already uses this id",
                )
            )
        problem, error = call.problem, ""
        anthropic_ids = transcript.provider in ("anthropic", "bedrock")
        rewritten = call.record in transcript.rewritten_ids
        if anthropic_ids and call.id and not problem and not rewritten and not valid_id(call.id):
            problem = f"the id {call.id[:80]!r} has characters Anthropic refuses"
            error = pattern_text(message, call.block)
        if problem:
            found.append(
                Fault(
                    FaultKind.MALFORMED_CALL,
                    call.id or None,
                    call.record,
                    call.block,
                    turn.head,
                    error,
                    problem,
                )
            )
    seen_call: ToolCall | None = None
    for index in turn.records:
        record = records[index]
        others = other_blocks(record)
        first_call = min((c.block for c in record.calls), default=None)
        late = [j for j in others if first_call is not None and j > first_call]
        if seen_call is not None and others and not late:
            late = others
        if late and (seen_call is not None or record.calls):
            call = seen_call or min(record.calls, key=lambda c: c.block)
            found.append(
                Fault(
                    FaultKind.CONTENT_AFTER_CALL,
                    call.id,
                    index,
                    late[0],
                    turn.head,
                    "",
                    "the assistant message goes on after a tool call",
                )
            )
            break
        if record.calls:
            seen_call = max(record.calls, key=lambda c: c.block)
    return found


def _run_faults(
    transcript: Transcript,
    turn: Turn,
    pairing: Pairing,
    at: Callable[[int], tuple[int, int]],
) -> list[Fault]:
    """Return the faults of a turn's result run: results after content, results out of order."""
    records = transcript.records
    found: list[Fault] = []
    provider = transcript.provider
    for index in turn.not_first:
        if provider not in ("anthropic", "bedrock"):
            continue
        record = records[index]
        message, _ = at(index)
        found.append(
            Fault(
                FaultKind.RESULT_NOT_FIRST,
                record.results[0].tool_call_id,
                index,
                record.results[0].block,
                turn.head,
                not_first_text(message, len(record.results)),
                "text comes before the tool results in the user message",
            )
        )
    if provider == "bedrock" and transcript.format == "bedrock" and len(turn.run) > 1:
        # Bedrock, unlike Anthropic, does not merge consecutive user messages: every
        # result of the call message must be in the one user message right after it.
        message, _ = at(turn.head)
        # Only the results that answer the turn's calls: a duplicate or an orphan there is
        # reported (and mended) as such.
        answers = {pairing.answer[call] for call in turn.calls if call in pairing.answer}
        for index in turn.run[1:]:
            for res in records[index].results:
                if res not in answers:
                    continue
                found.append(
                    Fault(
                        FaultKind.DISPLACED_RESULT,
                        res.tool_call_id,
                        index,
                        res.block,
                        turn.head,
                        bedrock_split_text(message + 1, [res.tool_call_id]),
                        "the turn's results are split over two user messages",
                    )
                )
    if provider not in ORDER_SENSITIVE or not any(
        call.id.startswith(POSITIONAL) for call in turn.calls
    ):
        return found
    position = {call: k for k, call in enumerate(turn.calls)}
    # The turn's own calls, not every answer of the session: this runs once per turn.
    answered = [
        (pairing.answer[call], call)
        for call in turn.calls
        if call in pairing.answer and pairing.turn_of.get(call) is turn
    ]
    if len(answered) == len(turn.calls) > 1:
        answered.sort(key=lambda pair: (pair[0].record, pair[0].block))
        order = [position[call] for _, call in answered]
        if order != sorted(order):
            res = next(r for (r, _), k in zip(answered, order, strict=True) if k != order.index(k))
            found.append(
                Fault(
                    FaultKind.MISORDERED_RESULTS,
                    res.tool_call_id,
                    res.record,
                    res.block,
                    turn.head,
                    "",
                    "the turn's results do not follow the order of its calls",
                )
            )
    return found


def _lone_reasoning(records: list[Record], context: list[int]) -> list[Fault]:
    """Return a fault for each Responses `reasoning` item not followed by the item it produced.

    A runtime that dropped an unanswered call kept its reasoning; the API
    refuses the request (formats.md §3, invariant 4).
    """
    found = []
    messages = [i for i in context if records[i].role is not Role.META]
    for k, index in enumerate(messages):
        if not records[index].leads:
            continue
        following = records[messages[k + 1]] if k + 1 < len(messages) else None
        if following is None or following.role is not Role.ASSISTANT or following.leads:
            found.append(
                Fault(
                    FaultKind.ORPHANED_REASONING,
                    None,
                    index,
                    None,
                    None,
                    f"Item of type '{records[index].kind}' was provided without its required "
                    "following item.",
                    "a reasoning item whose call or message is gone",
                )
            )
    return found


def detect(
    transcript: Transcript,
    pairing: Pairing | None = None,
    *,
    now: float | None = None,
    last_write: float | None = None,
    grace: float = DEFAULT_GRACE,
) -> list[Fault]:
    """Return every fault of `transcript`, sorted by record then block.

    Malformed records are reported wherever they are; pairing faults only
    inside the live context (see `pair`, whose result may be passed in).
    `now` and `last_write` (seconds since the epoch; the core reads no clock)
    make the session live when less than `grace` seconds apart: its
    unanswered tail calls are then `pending_result`.
    """
    if pairing is None:
        pairing = pair(transcript, live=is_live(now, last_write, grace))
    records = transcript.records
    # A stored session's errors are among its rare fields: no view of every record.
    malformed = (
        [records[i] for i in records.with_error()]
        if isinstance(records, RecordStore)
        else [record for record in records if record.error is not None]
    )
    faults = [
        Fault(
            FaultKind.MALFORMED_RECORD,
            None,
            record.index,
            None,
            None,
            "",
            " ".join(part for part in (record.error or "", transcript.malformed_note) if part),
        )
        for record in malformed
    ]
    faults.extend(pairing.faults)
    faults.sort(key=lambda f: (f.record, -1 if f.block is None else f.block, str(f.kind)))
    return faults


def is_live(now: float | None, last_write: float | None, grace: float = DEFAULT_GRACE) -> bool:
    """Return True when a session last written at `last_write` is still written to at `now`."""
    return now is not None and last_write is not None and now - last_write < grace
