"""The provider's verdict on a file: would the request built from it be accepted?

Pure Python (no Django). The verdict is `core.validate` run on the file's
live context for the session's provider, the way the runtime builds its
request; the errors are worded as the provider words them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transcripts import formats
from transcripts.core.model import Transcript
from transcripts.core.policy import PRESETS
from transcripts.core.validate import PROVIDERS, validate
from transcripts.engine import Analysis
from transcripts.formats import FormatError

PROVIDER_LABELS = {
    "anthropic": "Anthropic",
    "bedrock": "Amazon Bedrock",
    "openai_chat": "OpenAI Chat Completions",
    "openai_responses": "OpenAI Responses",
    "gemini": "Gemini",
}
# Errors kept per verdict: the first is what the provider answers; a few more show the pattern.
ERRORS_KEPT = 3


@dataclass(frozen=True)
class Verdict:
    """`provider`'s verdict: `count` violations, the first ERRORS_KEPT of their error texts."""

    provider: str
    count: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """Return True when the provider would accept the request."""
        return self.count == 0

    @property
    def provider_label(self) -> str:
        """Return the provider's name as people write it ("Anthropic")."""
        return PROVIDER_LABELS.get(self.provider, self.provider)

    def __str__(self) -> str:
        if self.valid:
            return f"valid for {self.provider_label}"
        return f"still rejected by {self.provider_label}: {self.errors[0]}"

    def as_dict(self) -> dict[str, Any]:
        """Return the verdict as JSON values (for a JSONField)."""
        return {"provider": self.provider, "count": self.count, "errors": self.errors}

    @classmethod
    def from_dict(cls, value: dict[str, Any] | None) -> Verdict | None:
        """Return the verdict `as_dict` gave, None for None or {}."""
        if not value:
            return None
        return cls(value["provider"], value["count"], list(value["errors"]))


def verdict_of(transcript: Transcript, policy: str) -> Verdict | None:
    """Return the session provider's verdict on `transcript`; None when it has no known provider.

    Aborted frames are left out of the request unless `policy` is for a runtime
    that replays them (OpenMAIC), as `core.validate` describes.
    """
    if transcript.provider not in PROVIDERS:
        return None
    # A workspace's own policy is a table of actions; only a preset imitates a runtime
    # that replays aborted frames.
    replays = policy in PRESETS and PRESETS[policy].replays_aborted
    violations = validate(transcript, drops_aborted=not replays)
    return Verdict(
        transcript.provider, len(violations), [v.error for v in violations[:ERRORS_KEPT]]
    )


def verdicts(analysis: Analysis) -> tuple[Verdict | None, Verdict | None]:
    """Return (verdict on the file as it is, verdict on it repaired under the analysis's policy).

    Both None for an unreadable file. The repaired file is rendered and read
    back in its format, exactly as it would be downloaded; a streamed file's
    through a temporary file (`Analysis.repaired_file`), never whole in
    memory. Raises OSError when that file cannot be written.
    """
    if analysis.transcript is None:
        return None, None
    policy = analysis.plan.policy
    before = verdict_of(analysis.transcript, policy)
    if not analysis.plan:
        return before, before
    try:
        with analysis.repaired_file() as data:
            # The provider's rules read roles, ids and order, never texts: no previews.
            repaired = formats.load(data, analysis.filename, analysis.format, summaries=False)
            after = verdict_of(repaired, policy)
    except FormatError as exc:
        return before, Verdict(
            analysis.provider, 1, [f"the repaired file cannot be read back: {exc}"]
        )
    return before, after
