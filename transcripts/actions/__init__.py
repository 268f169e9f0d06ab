"""Every write Pairfix makes: one `do_*` function per state change, a module per domain.

The way zulip's `zerver/actions/` is split by topic: `sessions` (ingest,
delete), `jobs` (start, cancel, retry), `runner` (what the workers do for a
job), `sync` (folders, appends), `workspaces` (members, invitations,
policies), `tokens`, `timelines`. Each `do_*` runs in
`transaction.atomic(durable=True)`, takes the acting user as a keyword-only
argument (None for the command line or a worker) and writes its AuditLog row
(`common.audit`) in the same transaction; tasks go out once it commits
(`transcripts.queue`). A session's new head is written by one function,
`common.write_head`, whichever path makes it.

The names below are the package's public ones, importable from here.
"""

from transcripts.actions.common import (
    HEAD_FIELDS,
    FenceLost,
    HeadMove,
    HeadState,
    JobStateError,
    fit_name,
    live_fields,
    live_until,
    open_analysis,
    store_repaired,
    write_head,
    write_heads,
)
from transcripts.actions.jobs import (
    do_cancel_job,
    do_retry_failed_items,
    do_start_job,
    do_start_repair_from_dry_run,
    do_start_rollback_job,
    rollback_blocker,
)
from transcripts.actions.runner import PROCESSORS, chunk_queues, do_fan_out_job, do_run_job_items
from transcripts.actions.sessions import (
    CannotDelete,
    create_session,
    do_count_session,
    do_delete_sessions,
    do_ingest_session,
    do_ingest_sessions,
    earlier_copies,
)
from transcripts.actions.sync import (
    do_append_records,
    do_create_source,
    do_expire_live_sessions,
    do_grant_folder,
    do_queue_sync,
    do_sync_source,
    do_update_source,
)
from transcripts.actions.timelines import do_build_timeline, queue_index, timeline_for, unindexed
from transcripts.actions.tokens import do_create_api_token, do_mark_token_used, do_revoke_api_token
from transcripts.actions.workspaces import (
    LastAdmin,
    do_accept_invitation,
    do_add_member,
    do_create_invitation,
    do_create_workspace,
    do_delete_workspace_policy,
    do_revoke_invitation,
    do_save_workspace_policy,
    do_set_member_role,
)
from transcripts.queue import BrokerUnavailable

__all__ = [
    "HEAD_FIELDS",
    "PROCESSORS",
    "BrokerUnavailable",
    "CannotDelete",
    "FenceLost",
    "HeadMove",
    "HeadState",
    "JobStateError",
    "LastAdmin",
    "chunk_queues",
    "create_session",
    "do_accept_invitation",
    "do_add_member",
    "do_append_records",
    "do_build_timeline",
    "do_cancel_job",
    "do_create_api_token",
    "do_create_invitation",
    "do_create_source",
    "do_create_workspace",
    "do_delete_sessions",
    "do_delete_workspace_policy",
    "do_expire_live_sessions",
    "do_fan_out_job",
    "do_grant_folder",
    "do_count_session",
    "do_ingest_session",
    "do_ingest_sessions",
    "earlier_copies",
    "do_mark_token_used",
    "do_queue_sync",
    "do_retry_failed_items",
    "do_revoke_invitation",
    "do_revoke_api_token",
    "do_run_job_items",
    "do_save_workspace_policy",
    "do_set_member_role",
    "do_start_job",
    "do_start_repair_from_dry_run",
    "do_start_rollback_job",
    "do_sync_source",
    "do_update_source",
    "fit_name",
    "live_fields",
    "live_until",
    "open_analysis",
    "rollback_blocker",
    "store_repaired",
    "queue_index",
    "timeline_for",
    "unindexed",
    "write_head",
    "write_heads",
]
