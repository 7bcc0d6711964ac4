"""The plan-ffi surface exercised from Python through the installed plan-ffi
wheel: the UniFFI-generated module and the real native library, which the
module loads only from its own folder (test-wheel.sh builds the wheel and
installs it into a fresh virtualenv; test_installed_package.py checks that
this is what gets imported).

Each test gets its own temporary directory (database plus workspace), so
tests never share a host lock.
"""

import hashlib
import json
import os
import sqlite3
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from plan_ffi import (
    error_code_wire_name,
    ApprovalFilter,
    ApprovalStatus,
    ArtifactCheck,
    Clearable,
    CommandGetParams,
    CommandSandbox,
    CommandStartParams,
    CommandState,
    ErrorCode,
    ExecutionCompleteParams,
    ExecutionStartParams,
    ExecutionState,
    ExportOverrides,
    HostConfig,
    InitializeParams,
    Mode,
    Origin,
    OutputStream,
    PermissionMode,
    PlanApproveParams,
    PlanDiffParams,
    PlanError,
    PlanEventListener,
    PlanGetParams,
    PlanHost,
    PlanReadArtifactParams,
    PlanRejectParams,
    PlanSandbox,
    PlanVerifyParams,
    ServerNotification,
    PlanApprovalRequestedNotification,
    PlanApprovalResolvedNotification,
    ExecutionStateChangedNotification,
    SessionChangedNotification,
    SessionConfigureParams,
    SessionCreateParams,
    SessionGetParams,
    ShellListParams,
    ShellSetDefaultParams,
    ToolCall,
    ToolCallDecision,
    ToolConfirmParams,
    TurnCancelParams,
    TurnCompleteParams,
    TurnKind,
    TurnStartParams,
    TurnToolCallsParams,
)

MARKDOWN = "# Plan\r\n\n1. Read `src/main.rs`\n2. Ändern — naïve ✓\t🙂\n\nno trailing newline"

# ---------------------------------------------------------------------------
# Fixtures and helpers


@pytest.fixture
def hosts():
    """Opens hosts and shuts every one down after the test."""
    opened = []

    def open_host(db_path, ttl_ms=None, markdown_limit=None):
        host = PlanHost(db_path, HostConfig(approval_ttl_ms=ttl_ms, markdown_limit_bytes=markdown_limit))
        opened.append(host)
        return host

    yield open_host
    for host in opened:
        host.shutdown()


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "plan.db")


@pytest.fixture
def host(hosts, db):
    return hosts(db)


def workspace(tmp_path, name="ws"):
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return path


def query(session_id=None, status=None, limit=None):
    return ApprovalFilter(session_id=session_id, status=status, limit=limit)


def call(call_id, name, input_json="{}"):
    return ToolCall(call_id=call_id, name=name, input=input_json)


def submit_input(title="Refactor", markdown=MARKDOWN, question="Go ahead?", **extra):
    return json.dumps(dict(title=title, markdown=markdown, question=question, **extra))


def failed(code, fn, *args):
    with pytest.raises(PlanError.Failed) as info:
        fn(*args)
    assert info.value.code == code, info.value.reason
    assert info.value.reason
    assert isinstance(info.value, PlanError)
    return info.value


def denied(result, code):
    assert result.decision == ToolCallDecision.DENY
    assert result.error is not None and result.error.code == code
    assert result.error.message
    assert result.approval is None


def plan_session(host, ws, session_id=None):
    return host.session_create(SessionCreateParams(session_id=session_id, workspace_root=None if ws is None else str(ws), mode=Mode.PLAN, permission_mode=None))


def submit(host, session_id, markdown=MARKDOWN, title="Refactor"):
    turn = host.turn_start(TurnStartParams(session_id=session_id, prompt="", origin=Origin.INTERACTIVE))
    (result,) = host.turn_tool_calls(TurnToolCallsParams(session_id=session_id, turn_id=turn.turn_id, calls=[call("s", "SubmitPlan", submit_input(title, markdown))])).results
    assert result.decision == ToolCallDecision.ALLOW, result.error
    return result.approval


WAIT_S = 20


class Recorder(PlanEventListener):
    """Records every typed event, in arrival order."""

    def __init__(self):
        self.events = []
        self.threads = set()
        self.lock = threading.Condition()
        self.requested = threading.Event()
        self.expired = threading.Event()
        self.expiry_threads = []

    def on_event(self, event):
        assert isinstance(event, ServerNotification)
        with self.lock:
            self.events.append(event)
            self.threads.add(threading.get_ident())
            if event.is_plan_approval_requested():
                self.requested.set()
            if event.is_plan_approval_resolved() and event[0].approval.status == ApprovalStatus.EXPIRED:
                self.expiry_threads.append(threading.get_ident())
                self.expired.set()
            self.lock.notify_all()

    def drain(self):
        """Takes the events recorded so far."""
        with self.lock:
            taken, self.events = self.events, []
            return taken

    def wait_for(self, what, matches):
        """Waits (bounded) for an event that matches; returns it."""
        deadline = time.monotonic() + WAIT_S
        with self.lock:
            while True:
                found = next((event for event in self.events if matches(event)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"no {what} within {WAIT_S} s; got {self.events}"
                self.lock.wait(left)

    def of(self, kind):
        with self.lock:
            return [event for event in self.events if isinstance(event, kind)]


class Raising(PlanEventListener):
    """Raises on every event; the host must contain it."""

    def __init__(self):
        self.calls = 0

    def on_event(self, event):
        self.calls += 1
        raise RuntimeError(f"listener failure on {event}")


# ---------------------------------------------------------------------------
# Lifecycle


@pytest.mark.parametrize("mode", [PermissionMode.ASK, PermissionMode.ACCEPT_EDITS, PermissionMode.AUTO])
def test_full_lifecycle(host, tmp_path, mode):
    ws = workspace(tmp_path)
    session = plan_session(host, ws)
    sid = session.session_id
    assert session.mode == Mode.PLAN and session.permission_mode == PermissionMode.ASK
    assert session.workspace_root == str(ws) and session.active_turn is None
    assert host.session_get(SessionGetParams(session_id=sid)) == session

    turn = host.turn_start(TurnStartParams(session_id=sid, prompt="", origin=Origin.INTERACTIVE))
    assert turn.mode == Mode.PLAN
    active = host.session_get(SessionGetParams(session_id=sid)).active_turn
    assert (active.turn_id, active.origin, active.kind) == (turn.turn_id, Origin.INTERACTIVE, TurnKind.PROMPT)
    read, write = host.turn_tool_calls(TurnToolCallsParams(session_id=sid, turn_id=turn.turn_id, calls=[call("r", "Read", '{"path":"a"}'), call("w", "Write")])).results
    assert read.decision == ToolCallDecision.ALLOW and read.error is None
    denied(write, ErrorCode.TOOL_DENIED_IN_PLAN)

    (result,) = host.turn_tool_calls(TurnToolCallsParams(session_id=sid, turn_id=turn.turn_id, calls=[call("s", "SubmitPlan", submit_input("Refactor", MARKDOWN, "Proceed?"))])).results
    approval = result.approval
    assert approval.status == ApprovalStatus.PENDING
    assert (approval.title, approval.question, approval.turn_id) == ("Refactor", "Proceed?", turn.turn_id)
    assert approval.expires_at - approval.created_at == 30 * 60 * 1000
    assert approval.execution_id is None and approval.permission_mode is None

    # The artifact: exact bytes, SHA-256 and size as recorded.
    artifact = approval.artifact
    assert artifact.path.startswith(".pi/plan/") and artifact.path.endswith(".md")
    data = (ws / artifact.path).read_bytes()
    assert data == MARKDOWN.encode("utf-8")
    assert artifact.size == len(data)
    assert artifact.sha256 == hashlib.sha256(data).hexdigest()
    content = host.plan_read_artifact(PlanReadArtifactParams(approval_id=approval.id))
    assert (content.markdown, content.sha256, content.size) == (MARKDOWN, artifact.sha256, artifact.size)

    assert host.session_get(SessionGetParams(session_id=sid)).pending_approval_id == approval.id
    assert host.plan_get(PlanGetParams(approval_id=approval.id)) == approval
    assert host.plan_list(query(sid, ApprovalStatus.PENDING)).approvals == [approval]

    decision = host.plan_approve(PlanApproveParams(approval_id=approval.id, permission_mode=mode))
    assert decision.approval.status == ApprovalStatus.APPROVED
    assert decision.approval.permission_mode == mode
    assert decision.approval.execution_state == ExecutionState.QUEUED
    eid = decision.approval.execution_id
    assert decision.session.mode == Mode.AGENT and decision.session.permission_mode == mode
    assert decision.session.active_execution_id == eid
    assert decision.session.active_turn.kind == TurnKind.EXECUTION

    assert host.execution_start(ExecutionStartParams(execution_id=eid)).execution_state == ExecutionState.RUNNING
    done = host.execution_complete(ExecutionCompleteParams(execution_id=eid))
    assert done.execution_state == ExecutionState.COMPLETED and done.status == ApprovalStatus.APPROVED
    after = host.session_get(SessionGetParams(session_id=sid))
    assert after.mode == Mode.AGENT and after.active_turn is None and after.active_execution_id is None

    agent_turn = host.turn_start(TurnStartParams(session_id=sid, prompt="", origin=Origin.SCHEDULED))
    assert agent_turn.mode == Mode.AGENT
    # The host's permission table: under ask a write needs a person, whom a
    # scheduled turn does not have; the other modes allow a write in the
    # workspace.
    (write,) = host.turn_tool_calls(TurnToolCallsParams(session_id=sid, turn_id=agent_turn.turn_id, calls=[call("w", "Write", '{"path": "notes.md"}')])).results
    if mode == PermissionMode.ASK:
        denied(write, ErrorCode.PERMISSION_REQUIRES_INTERACTIVE_SESSION)
    else:
        assert write.decision == ToolCallDecision.ALLOW and not write.host_run
    assert host.turn_complete(TurnCompleteParams(session_id=sid, turn_id=agent_turn.turn_id)).active_turn is None


def test_reject_is_terminal_and_a_revision_is_a_new_artifact(host, tmp_path):
    ws = workspace(tmp_path)
    sid = plan_session(host, ws).session_id
    first = submit(host, sid, "v1\n")
    rejected = host.plan_reject(PlanRejectParams(approval_id=first.id))
    assert rejected.approval.status == ApprovalStatus.REJECTED
    assert rejected.approval.permission_mode is None
    assert rejected.session.mode == Mode.PLAN and rejected.session.active_turn is None
    failed(ErrorCode.APPROVAL_NOT_PENDING, host.plan_approve, PlanApproveParams(approval_id=first.id, permission_mode=PermissionMode.AUTO))
    # No pause for a distinct created_at: a tie is broken by id, and ids are
    # UUIDv7, ordered by creation within a process.
    second = submit(host, sid, "v2\n")
    assert second.artifact.path != first.artifact.path
    assert (ws / first.artifact.path).read_text() == "v1\n"
    assert [a.id for a in host.plan_list(query(sid)).approvals] == [second.id, first.id]


def test_restart_interrupts_pending_queued_and_running(hosts, db, tmp_path):
    first = hosts(db)
    ws = workspace(tmp_path)
    pending_sid = plan_session(first, ws).session_id
    pending = submit(first, pending_sid)
    queued_sid = plan_session(first, ws).session_id
    queued = first.plan_approve(PlanApproveParams(approval_id=submit(first, queued_sid).id, permission_mode=PermissionMode.ACCEPT_EDITS)).approval
    running_sid = plan_session(first, ws).session_id
    running = first.plan_approve(PlanApproveParams(approval_id=submit(first, running_sid).id, permission_mode=PermissionMode.AUTO)).approval
    first.execution_start(ExecutionStartParams(execution_id=running.execution_id))
    done_sid = plan_session(first, ws).session_id
    done = first.plan_approve(PlanApproveParams(approval_id=submit(first, done_sid).id, permission_mode=PermissionMode.ASK)).approval
    first.execution_start(ExecutionStartParams(execution_id=done.execution_id))
    first.execution_complete(ExecutionCompleteParams(execution_id=done.execution_id))

    failed(ErrorCode.HOST_ALREADY_RUNNING, hosts, db)
    first.shutdown()
    failed(ErrorCode.HOST_CLOSED, first.session_get, SessionGetParams(session_id=pending_sid))

    second = hosts(db)
    row = second.plan_get(PlanGetParams(approval_id=pending.id))
    assert row.status == ApprovalStatus.INTERRUPTED and row.error_code == ErrorCode.HOST_RESTARTED
    session = second.session_get(SessionGetParams(session_id=pending_sid))
    assert session.mode == Mode.PLAN and session.pending_approval_id is None and session.active_turn is None
    for approval, sid in ((queued, queued_sid), (running, running_sid)):
        row = second.plan_get(PlanGetParams(approval_id=approval.id))
        assert row.status == ApprovalStatus.APPROVED
        assert row.execution_state == ExecutionState.INTERRUPTED and row.error_code == ErrorCode.HOST_RESTARTED
        session = second.session_get(SessionGetParams(session_id=sid))
        assert session.mode == Mode.AGENT and session.active_execution_id is None and session.active_turn is None
        failed(ErrorCode.EXECUTION_NOT_ACTIVE, second.execution_start, ExecutionStartParams(execution_id=row.execution_id))
        assert second.turn_start(TurnStartParams(session_id=sid, prompt="", origin=Origin.INTERACTIVE)).mode == Mode.AGENT
    assert second.plan_get(PlanGetParams(approval_id=done.id)).execution_state == ExecutionState.COMPLETED
    failed(ErrorCode.APPROVAL_NOT_PENDING, second.plan_approve, PlanApproveParams(approval_id=pending.id, permission_mode=PermissionMode.ASK))
    assert submit(second, pending_sid).status == ApprovalStatus.PENDING


# ---------------------------------------------------------------------------
# Errors


def test_session_and_turn_errors(host, tmp_path):
    ws = workspace(tmp_path)
    failed(ErrorCode.SESSION_NOT_FOUND, host.session_get, SessionGetParams(session_id="nope"))
    failed(ErrorCode.SESSION_NOT_FOUND, host.turn_start, TurnStartParams(session_id="nope", prompt="", origin=Origin.INTERACTIVE))
    host.session_create(SessionCreateParams(session_id="s1", workspace_root=str(ws), mode=Mode.PLAN, permission_mode=PermissionMode.AUTO))
    failed(ErrorCode.SESSION_ALREADY_EXISTS, host.session_create, SessionCreateParams(session_id="s1", workspace_root=None, mode=None, permission_mode=None))
    failed(ErrorCode.INVALID_PARAMS, host.session_create, SessionCreateParams(session_id=None, workspace_root="relative/path", mode=None, permission_mode=None))
    failed(ErrorCode.PLAN_REQUIRES_INTERACTIVE_SESSION, host.turn_start, TurnStartParams(session_id="s1", prompt="", origin=Origin.SCHEDULED))
    turn = host.turn_start(TurnStartParams(session_id="s1", prompt="", origin=Origin.INTERACTIVE))
    failed(ErrorCode.SESSION_BUSY, host.turn_start, TurnStartParams(session_id="s1", prompt="", origin=Origin.INTERACTIVE))
    failed(ErrorCode.SESSION_BUSY, host.session_configure, SessionConfigureParams(session_id="s1", mode=Mode.AGENT))
    failed(ErrorCode.TURN_NOT_ACTIVE, host.turn_complete, TurnCompleteParams(session_id="s1", turn_id="turn-other"))
    assert host.turn_cancel(TurnCancelParams(session_id="s1")).active_turn is None
    failed(ErrorCode.TURN_NOT_ACTIVE, host.turn_cancel, TurnCancelParams(session_id="s1"))
    failed(ErrorCode.TURN_NOT_ACTIVE, host.turn_complete, TurnCompleteParams(session_id="s1", turn_id=turn.turn_id))
    failed(ErrorCode.SHELL_UNKNOWN, host.session_configure, SessionConfigureParams(session_id="s1", shell=Clearable.SET(value="tcsh-9000")))
    failed(ErrorCode.SHELL_UNKNOWN, host.shell_set_default, ShellSetDefaultParams(shell_id="tcsh-9000"))


def test_tool_call_errors(hosts, db, tmp_path):
    host = hosts(db, markdown_limit=64)
    ws = workspace(tmp_path)
    sid = plan_session(host, ws).session_id
    tid = host.turn_start(TurnStartParams(session_id=sid, prompt="", origin=Origin.INTERACTIVE)).turn_id
    failed(ErrorCode.SUBMIT_PLAN_NOT_ALONE, host.turn_tool_calls, TurnToolCallsParams(session_id=sid, turn_id=tid, calls=[call("r", "Read"), call("s", "SubmitPlan", submit_input())]))
    failed(ErrorCode.INVALID_PARAMS, host.turn_tool_calls, TurnToolCallsParams(session_id=sid, turn_id=tid, calls=[call("r", "Read", "{not json")]))
    for bad in (
        '{"title":"T","markdown":"m"}',
        submit_input(title=""),
        submit_input(question=""),
        submit_input(steps=[]),
        submit_input(markdown="x" * 65),
    ):
        denied(host.turn_tool_calls(TurnToolCallsParams(session_id=sid, turn_id=tid, calls=[call("s", "SubmitPlan", bad)])).results[0], ErrorCode.INVALID_PLAN_INPUT)
    assert host.session_get(SessionGetParams(session_id=sid)).active_turn.turn_id == tid
    assert host.plan_list(query(sid)).approvals == []

    unbound = host.session_create(SessionCreateParams(session_id=None, workspace_root=None, mode=Mode.PLAN, permission_mode=None)).session_id
    ut = host.turn_start(TurnStartParams(session_id=unbound, prompt="", origin=Origin.INTERACTIVE)).turn_id
    denied(host.turn_tool_calls(TurnToolCallsParams(session_id=unbound, turn_id=ut, calls=[call("s", "SubmitPlan", submit_input())])).results[0], ErrorCode.SESSION_NOT_PROJECT_BOUND)

    agent = host.session_create(SessionCreateParams(session_id=None, workspace_root=str(ws), mode=Mode.AGENT, permission_mode=None)).session_id
    at = host.turn_start(TurnStartParams(session_id=agent, prompt="", origin=Origin.INTERACTIVE)).turn_id
    denied(host.turn_tool_calls(TurnToolCallsParams(session_id=agent, turn_id=at, calls=[call("s", "SubmitPlan", submit_input())])).results[0], ErrorCode.PLAN_NOT_ACTIVE)


def test_approval_artifact_and_execution_errors(host, tmp_path):
    ws = workspace(tmp_path)
    sid = plan_session(host, ws).session_id
    failed(ErrorCode.APPROVAL_NOT_FOUND, host.plan_get, PlanGetParams(approval_id="approval-nope"))
    failed(ErrorCode.APPROVAL_NOT_FOUND, host.plan_approve, PlanApproveParams(approval_id="approval-nope", permission_mode=PermissionMode.ASK))
    failed(ErrorCode.EXECUTION_NOT_FOUND, host.execution_start, ExecutionStartParams(execution_id="execution-nope"))

    approval = submit(host, sid)
    failed(ErrorCode.PERMISSION_MODE_REQUIRED, host.plan_approve, PlanApproveParams(approval_id=approval.id, permission_mode=None))
    assert host.plan_get(PlanGetParams(approval_id=approval.id)).status == ApprovalStatus.PENDING

    path = ws / approval.artifact.path
    original = path.read_bytes()
    os.chmod(path, 0o644)
    path.write_bytes(b"X" + original[1:])
    failed(ErrorCode.ARTIFACT_INTEGRITY_MISMATCH, host.plan_read_artifact, PlanReadArtifactParams(approval_id=approval.id))
    # Approving re-reads the plan: a rewritten or removed file is refused and
    # nothing changes.
    failed(ErrorCode.ARTIFACT_INTEGRITY_MISMATCH, host.plan_approve, PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.AUTO))
    path.unlink()
    failed(ErrorCode.ARTIFACT_MISSING, host.plan_read_artifact, PlanReadArtifactParams(approval_id=approval.id))
    failed(ErrorCode.ARTIFACT_MISSING, host.plan_approve, PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.AUTO))
    assert host.plan_get(PlanGetParams(approval_id=approval.id)).status == ApprovalStatus.PENDING

    # The plan as submitted, restored: now it can be approved.
    path.write_bytes(original)
    eid = host.plan_approve(PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.AUTO)).approval.execution_id
    failed(ErrorCode.EXECUTION_NOT_ACTIVE, host.execution_complete, ExecutionCompleteParams(execution_id=eid))
    host.execution_start(ExecutionStartParams(execution_id=eid))
    cancelled = host.turn_cancel(TurnCancelParams(session_id=sid))
    assert cancelled.active_execution_id is None
    row = host.plan_get(PlanGetParams(approval_id=approval.id))
    assert row.execution_state == ExecutionState.INTERRUPTED and row.error_code == ErrorCode.EXECUTION_CANCELLED
    failed(ErrorCode.EXECUTION_NOT_ACTIVE, host.execution_complete, ExecutionCompleteParams(execution_id=eid))


def test_host_errors(hosts, tmp_path):
    failed(ErrorCode.INVALID_PARAMS, hosts, str(tmp_path / "a.db"), 0)
    # The one range rule of plan-core, as serve and Rust embedders meet it.
    for ttl in (-5, 604800001, 9223372036854775807):
        failed(ErrorCode.INVALID_PARAMS, hosts, str(tmp_path / "a.db"), ttl)
    # Names SQLite would not keep on disk host nothing.
    for name in ("", ":memory:", "file:a.db?mode=memory"):
        failed(ErrorCode.INVALID_PARAMS, hosts, name)
    assert not (tmp_path / "a.db").exists()
    path = str(tmp_path / "locked.db")
    first = hosts(path)
    failed(ErrorCode.HOST_ALREADY_RUNNING, hosts, path)
    first.shutdown()
    first.shutdown()
    for fn, args in (
        (first.shell_list, (ShellListParams(),)),
        (first.session_create, (SessionCreateParams(workspace_root=None),)),
        (first.plan_list, (query(),)),
        (first.shell_set_default, (ShellSetDefaultParams(shell_id="sh"),)),
        (first.initialize, (InitializeParams(protocol_version=9),)),
    ):
        failed(ErrorCode.HOST_CLOSED, fn, *args)

    # A database whose PRAGMA user_version is 9 (or newer than 10) is refused.
    for version in (9, 11):
        v = str(tmp_path / f"v{version}.db")
        with sqlite3.connect(v) as conn:
            conn.execute("CREATE TABLE t (x)")
            conn.execute(f"PRAGMA user_version = {version}")
        conn.close()
        failed(ErrorCode.SCHEMA_UNSUPPORTED, hosts, v)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x5a" * 4096)
    failed(ErrorCode.DATABASE_UNREADABLE, hosts, str(junk))


def test_the_export_settings_are_one_otel_record(tmp_path):
    # Every export setting is in HostConfig's one `otel` record, empty when omitted.
    assert HostConfig().otel == ExportOverrides()
    for otel in (
        ExportOverrides(logs_endpoint="http://127.0.0.1:4318/v1/logs", protocol="grpc"),
        ExportOverrides(include_content=True),
        ExportOverrides(logs_endpoint="ftp://127.0.0.1/v1/logs"),
    ):
        config = HostConfig(otel=otel, otel_from_environment=False)
        failed(ErrorCode.INVALID_PARAMS, PlanHost, str(tmp_path / "otel.db"), config)


# ---------------------------------------------------------------------------
# Events and the timer


def test_callback_and_timer_expiry(hosts, db, tmp_path):
    host = hosts(db, ttl_ms=300)
    recorder = Recorder()
    host.add_listener(recorder)
    sid = plan_session(host, workspace(tmp_path)).session_id
    approval = submit(host, sid)
    assert approval.expires_at - approval.created_at == 300
    assert recorder.requested.wait(10)
    (requested,) = recorder.of(ServerNotification.PLAN_APPROVAL_REQUESTED)
    assert requested == ServerNotification.PLAN_APPROVAL_REQUESTED(PlanApprovalRequestedNotification(approval=approval, card_url=None))
    assert requested[0].approval.artifact.sha256 == approval.artifact.sha256

    # Nobody asks: the host's timer expires it and tells the listener, on its own thread.
    assert recorder.expired.wait(10), recorder.events
    (resolved,) = recorder.of(ServerNotification.PLAN_APPROVAL_RESOLVED)
    assert resolved[0].approval.id == approval.id
    assert resolved[0].approval.status == ApprovalStatus.EXPIRED
    assert resolved[0].approval.error_code == ErrorCode.PLAN_APPROVAL_TIMEOUT
    assert len(recorder.expiry_threads) == 1 and recorder.expiry_threads[0] != threading.get_ident()

    row = host.plan_get(PlanGetParams(approval_id=approval.id))
    assert row == resolved[0].approval
    assert row.expires_at == approval.expires_at
    session = host.session_get(SessionGetParams(session_id=sid))
    assert session.mode == Mode.PLAN and session.active_turn is None
    changed = recorder.wait_for("the session's change", lambda e: e.is_session_changed() and e[0].session.active_turn is None)
    assert changed[0].session == session
    failed(ErrorCode.PLAN_APPROVAL_TIMEOUT, host.plan_approve, PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.AUTO))


def test_each_event_carries_the_records_the_calls_return(host, tmp_path):
    recorder = Recorder()
    host.add_listener(recorder)
    sid = plan_session(host, workspace(tmp_path)).session_id
    assert recorder.drain() == [], "a new session is not a change"
    turn = host.turn_start(TurnStartParams(session_id=sid, prompt="", origin=Origin.INTERACTIVE))
    assert recorder.drain() == [ServerNotification.SESSION_CHANGED(SessionChangedNotification(session=host.session_get(SessionGetParams(session_id=sid))))]
    (result,) = host.turn_tool_calls(TurnToolCallsParams(session_id=sid, turn_id=turn.turn_id, calls=[call("s", "SubmitPlan", submit_input(markdown="v1\n"))])).results
    approval = result.approval
    assert recorder.drain() == [
        ServerNotification.PLAN_APPROVAL_REQUESTED(PlanApprovalRequestedNotification(approval=approval, card_url=None)),
        ServerNotification.SESSION_CHANGED(SessionChangedNotification(session=host.session_get(SessionGetParams(session_id=sid)))),
    ]

    # Approved: resolved, the execution queued, the session in Agent.
    decision = host.plan_approve(PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.AUTO))
    eid = decision.approval.execution_id
    assert decision.approval.status == ApprovalStatus.APPROVED
    assert decision.approval.permission_mode == PermissionMode.AUTO
    assert recorder.drain() == [
        ServerNotification.PLAN_APPROVAL_RESOLVED(PlanApprovalResolvedNotification(approval=decision.approval)),
        ServerNotification.EXECUTION_STATE_CHANGED(ExecutionStateChangedNotification(session_id=sid, execution_id=eid, state=ExecutionState.QUEUED)),
        ServerNotification.SESSION_CHANGED(SessionChangedNotification(session=decision.session)),
    ]
    host.execution_start(ExecutionStartParams(execution_id=eid))
    (running,) = recorder.drain()
    assert running.is_execution_state_changed()
    assert (running[0].session_id, running[0].execution_id, running[0].state) == (sid, eid, ExecutionState.RUNNING)
    host.execution_complete(ExecutionCompleteParams(execution_id=eid))
    idle = host.session_get(SessionGetParams(session_id=sid))
    assert idle.active_execution_id is None and idle.mode == Mode.AGENT
    assert recorder.drain() == [
        ServerNotification.EXECUTION_STATE_CHANGED(ExecutionStateChangedNotification(session_id=sid, execution_id=eid, state=ExecutionState.COMPLETED)),
        ServerNotification.SESSION_CHANGED(SessionChangedNotification(session=idle)),
    ]

    # Rejected: resolved without an execution, the session back to idle Plan.
    configured = host.session_configure(SessionConfigureParams(session_id=sid, mode=Mode.PLAN))
    assert recorder.drain() == [ServerNotification.SESSION_CHANGED(SessionChangedNotification(session=configured))]
    second = submit(host, sid, "v2\n")
    recorder.drain()
    rejected = host.plan_reject(PlanRejectParams(approval_id=second.id))
    assert rejected.approval.status == ApprovalStatus.REJECTED and rejected.approval.execution_id is None
    assert recorder.drain() == [
        ServerNotification.PLAN_APPROVAL_RESOLVED(PlanApprovalResolvedNotification(approval=rejected.approval)),
        ServerNotification.SESSION_CHANGED(SessionChangedNotification(session=rejected.session)),
    ]
    # Calls on the caller's thread are delivered on that thread.
    assert recorder.threads == {threading.get_ident()}


def test_a_raising_listener_is_contained(host, tmp_path):
    raising = Raising()
    host.add_listener(raising)
    recorder = Recorder()
    host.add_listener(recorder)
    approval = submit(host, plan_session(host, workspace(tmp_path)).session_id)
    assert raising.calls > 0
    assert ServerNotification.PLAN_APPROVAL_REQUESTED(PlanApprovalRequestedNotification(approval=approval, card_url=None)) in recorder.events, "later listeners still hear it"
    decision = host.plan_approve(PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.ASK))
    assert decision.approval.status == ApprovalStatus.APPROVED
    assert recorder.of(ServerNotification.PLAN_APPROVAL_RESOLVED) == [ServerNotification.PLAN_APPROVAL_RESOLVED(PlanApprovalResolvedNotification(approval=decision.approval))]


class Fatal(BaseException):
    """Not an Exception: passes UniFFI's handler and reaches ctypes'."""


def test_a_listener_raising_a_base_exception_is_contained_too(host, tmp_path, monkeypatch):
    # UniFFI's glue turns an Exception into a call failure; a BaseException
    # passes it by and ctypes reports it as unraisable instead. Either way
    # the host carries on.
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: unraisable.append(info.exc_type))

    class RaisingFatal(PlanEventListener):
        def on_event(self, event):
            raise Fatal(f"listener failure on {event}")

    host.add_listener(RaisingFatal())
    recorder = Recorder()
    host.add_listener(recorder)
    approval = submit(host, plan_session(host, workspace(tmp_path)).session_id)
    assert ServerNotification.PLAN_APPROVAL_REQUESTED(PlanApprovalRequestedNotification(approval=approval, card_url=None)) in recorder.events, "later listeners still hear it"
    assert host.plan_approve(PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.ASK)).approval.status == ApprovalStatus.APPROVED
    assert unraisable and set(unraisable) == {Fatal}, unraisable


def test_a_listener_raising_prints_no_panic_into_the_hosts_stderr(host, tmp_path, capfd):
    # A foreign exception must come back as an error value, not as a panic
    # of UniFFI's glue that the host then contains: the application's stderr
    # is the person's, and a panic message there reads as a crash.
    host.add_listener(Raising())
    recorder = Recorder()
    host.add_listener(recorder)
    approval = submit(host, plan_session(host, workspace(tmp_path)).session_id)
    assert host.plan_approve(PlanApproveParams(approval_id=approval.id, permission_mode=PermissionMode.ASK)).approval.status == ApprovalStatus.APPROVED
    assert recorder.of(ServerNotification.PLAN_APPROVAL_RESOLVED), "later listeners still hear it"
    err = capfd.readouterr().err
    assert "panicked" not in err, err


def test_a_listener_raising_on_the_timer_thread_does_not_stop_the_timer(hosts, db, tmp_path):
    host = hosts(db, ttl_ms=300)
    host.add_listener(Raising())
    recorder = Recorder()
    host.add_listener(recorder)
    sid = plan_session(host, workspace(tmp_path)).session_id
    for round_ in ("first", "second"):
        pending = submit(host, sid)
        expired = recorder.wait_for(
            f"{round_} expiry", lambda e, i=pending.id: e.is_plan_approval_resolved() and e[0].approval.id == i
        )
        assert expired[0].approval.status == ApprovalStatus.EXPIRED
        assert expired[0].approval.error_code == ErrorCode.PLAN_APPROVAL_TIMEOUT
    assert len(recorder.expiry_threads) == 2


def test_shutdown_from_a_listener_on_the_timer_thread(hosts, db, tmp_path):
    host = hosts(db, ttl_ms=200)
    outcome = {}
    done = threading.Event()

    class ShutsDown(PlanEventListener):
        def on_event(self, event):
            if event.is_plan_approval_resolved():
                try:
                    host.shutdown()
                    outcome["result"] = "ok"
                except Exception as error:  # noqa: BLE001 - reported below
                    outcome["result"] = repr(error)
                done.set()

    host.add_listener(ShutsDown())
    submit(host, plan_session(host, workspace(tmp_path)).session_id)
    assert done.wait(10)
    assert outcome["result"] == "ok"
    failed(ErrorCode.HOST_CLOSED, host.shell_list, ShellListParams())
    hosts(db).shell_list(ShellListParams())  # the lock was released


# ---------------------------------------------------------------------------
# JSON, shells, configuration


def rpc(host, method, params, request_id=1):
    reply = host.handle_json(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
    return json.loads(reply)


def test_handle_json(host, tmp_path):
    early = rpc(host, "shell/list", {})
    assert early["error"]["data"]["code"] == "PROTOCOL_NOT_INITIALIZED"
    assert rpc(host, "initialize", {"protocolVersion": 8})["error"]["data"]["code"] == "PROTOCOL_VERSION_UNSUPPORTED"
    init = rpc(host, "initialize", {"protocolVersion": 9, "clientName": "pytest"})["result"]
    assert (init["protocolVersion"], init["schemaVersion"], init["approvalTtlMs"]) == (9, 10, 1800000)
    created = rpc(host, "session/create", {"sessionId": "json-1", "workspaceRoot": str(workspace(tmp_path)), "mode": "plan"})
    assert created["result"]["mode"] == "plan"
    assert host.session_get(SessionGetParams(session_id="json-1")).mode == Mode.PLAN
    bad = rpc(host, "session/get", {"sessionId": "json-1", "feedback": "x"})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["code"] == "INVALID_PARAMS"
    assert host.handle_json('{"jsonrpc":"2.0","method":"initialized","params":{}}') is None
    assert json.loads(host.handle_json("{not json"))["error"]["code"] == -32700


def test_shells_and_configuration(hosts, db):
    host = hosts(db)
    catalog = host.shell_list(ShellListParams())
    ids = [shell.id for shell in catalog.shells]
    assert "bash" in ids and "sh" in ids and catalog.default_shell in ids
    assert host.shell_set_default(ShellSetDefaultParams(shell_id="sh")).default_shell == "sh"
    sid = host.session_create(SessionCreateParams(session_id="cfg", workspace_root=None, mode=None, permission_mode=None)).session_id
    configured = host.session_configure(SessionConfigureParams(
        session_id=sid,
        mode=Mode.PLAN,
        permission_mode=PermissionMode.ACCEPT_EDITS,
        provider=Clearable.SET(value="anthropic"),
        model=Clearable.SET(value="claude"),
        shell=Clearable.SET(value="bash"),
    ))
    assert (configured.mode, configured.permission_mode, configured.provider, configured.model, configured.shell) == (
        Mode.PLAN, PermissionMode.ACCEPT_EDITS, "anthropic", "claude", "bash")
    # Every field but the session has a default (absent: unchanged), so a
    # configuration names only what changes; CLEAR sets a field back to none.
    cleared = host.session_configure(
        SessionConfigureParams(session_id=sid, provider=Clearable.CLEAR(), shell=Clearable.CLEAR()))
    assert (cleared.provider, cleared.model, cleared.shell) == (None, "claude", None)
    configured = host.session_configure(SessionConfigureParams(
        session_id=sid, provider=Clearable.SET(value="anthropic"), shell=Clearable.SET(value="bash")))
    host.shutdown()
    again = hosts(db)
    assert again.shell_list(ShellListParams()).default_shell == "sh"
    assert again.session_get(SessionGetParams(session_id=sid)) == configured


# ---------------------------------------------------------------------------
# Threads


def test_concurrent_lifecycles_from_eight_threads(host, tmp_path):
    recorder = Recorder()
    host.add_listener(recorder)
    threads, rounds = 8, 3
    barrier = threading.Barrier(threads)

    def work(n):
        ws = workspace(tmp_path, f"ws-{n}")
        sid = plan_session(host, ws, f"thread-{n}").session_id
        barrier.wait(10)
        ids = []
        for r in range(rounds):
            host.session_configure(SessionConfigureParams(session_id=sid, mode=Mode.PLAN))
            approval = submit(host, sid, f"plan {n}/{r}\n")
            assert host.plan_read_artifact(PlanReadArtifactParams(approval_id=approval.id)).markdown == f"plan {n}/{r}\n"
            host.plan_list(query(limit=5)).approvals
            eid = host.plan_approve(PlanApproveParams(approval_id=approval.id, permission_mode=list(PermissionMode)[(n + r) % 3])).approval.execution_id
            host.execution_start(ExecutionStartParams(execution_id=eid))
            assert host.execution_complete(ExecutionCompleteParams(execution_id=eid)).execution_state == ExecutionState.COMPLETED
            ids.append(approval.id)
        return ids

    with ThreadPoolExecutor(threads) as pool:
        results = [f.result(timeout=60) for f in [pool.submit(work, n) for n in range(threads)]]
    assert len({i for ids in results for i in ids}) == threads * rounds
    approved = host.plan_list(query(status=ApprovalStatus.APPROVED)).approvals
    assert len(approved) == threads * rounds
    assert all(a.execution_state == ExecutionState.COMPLETED for a in approved)
    assert len(recorder.of(ServerNotification.PLAN_APPROVAL_REQUESTED)) == threads * rounds


def test_error_codes_are_typed_and_name_their_wire_strings():
    names = [code.name for code in ErrorCode]
    assert len(names) == len(set(names)) and "PLAN_APPROVAL_TIMEOUT" in names
    for code in ErrorCode:
        assert error_code_wire_name(code) == code.name


def test_verify_and_diff(host, tmp_path):
    ws = workspace(tmp_path)
    sid = plan_session(host, ws).session_id
    first = submit(host, sid, "# Plan\n\n1. Read.\n2. Split.\n")
    host.plan_reject(PlanRejectParams(approval_id=first.id))
    # "Previous" is by (created_at, id); ids are ordered by creation, so a
    # created_at tie still makes `first` the earlier one.
    second = submit(host, sid, "# Plan\n\n1. Read.\n2. Split in two.\n")

    report = host.plan_verify(PlanVerifyParams(approval_id=None, session_id=None))
    assert report.ok and {a.approval_id for a in report.artifacts} == {first.id, second.id}
    assert all(a.result == ArtifactCheck.OK and a.error_code is None for a in report.artifacts)

    # An orphan fails the session and everything, but not one approval.
    (ws / ".pi" / "plan" / "stray.md").write_text("# stray\n")
    assert not host.plan_verify(PlanVerifyParams(approval_id=None, session_id=sid)).ok
    assert [o.path for o in host.plan_verify(PlanVerifyParams(approval_id=None, session_id=None)).orphans] == [".pi/plan/stray.md"]
    one = host.plan_verify(PlanVerifyParams(approval_id=second.id, session_id=None))
    assert one.ok and one.orphans == [] and [a.approval_id for a in one.artifacts] == [second.id]
    failed(ErrorCode.INVALID_PARAMS, host.plan_verify, PlanVerifyParams(approval_id=second.id, session_id=sid))
    failed(ErrorCode.APPROVAL_NOT_FOUND, host.plan_verify, PlanVerifyParams(approval_id="nope", session_id=None))

    diff = host.plan_diff(PlanDiffParams(approval_id=second.id, against_approval_id=None))
    assert diff.against_approval_id == first.id and not diff.identical
    assert "-2. Split.\n+2. Split in two.\n" in diff.unified
    assert host.plan_diff(PlanDiffParams(approval_id=first.id, against_approval_id=None)).unified is None
    assert host.plan_diff(PlanDiffParams(approval_id=second.id, against_approval_id=second.id)).identical

    # The same operations over JSON-RPC give the same answers.
    rpc(host, "initialize", {"protocolVersion": 9})
    wire = rpc(host, "plan/verify", {"approvalId": second.id})["result"]
    assert wire["ok"] and wire["orphans"] == []
    wire_diff = rpc(host, "plan/diff", {"approvalId": first.id})["result"]
    assert wire_diff == {"approvalId": first.id, "againstApprovalId": None, "identical": False, "unified": None}
    both = rpc(host, "plan/verify", {"approvalId": second.id, "sessionId": sid})
    assert both["error"]["data"]["code"] == "INVALID_PARAMS"

    (ws / first.artifact.path).write_text("tampered\n")
    checked = host.plan_verify(PlanVerifyParams(approval_id=first.id, session_id=None))
    assert not checked.ok and checked.artifacts[0].result == ArtifactCheck.MISMATCH
    assert checked.artifacts[0].error_code == ErrorCode.ARTIFACT_INTEGRITY_MISMATCH
    failed(ErrorCode.ARTIFACT_INTEGRITY_MISMATCH, host.plan_diff, PlanDiffParams(approval_id=second.id, against_approval_id=None))

    wire_mismatch = rpc(host, "plan/diff", {"approvalId": second.id})
    assert wire_mismatch["error"]["data"]["code"] == "ARTIFACT_INTEGRITY_MISMATCH"


def test_workspace_roots_are_normalized_and_bad_roots_refused_alike(host, tmp_path):
    ws = workspace(tmp_path)
    created = host.session_create(SessionCreateParams(session_id="norm", workspace_root=str(ws) + "/./", mode=Mode.PLAN, permission_mode=None))
    assert created.workspace_root == str(ws)
    dotted = host.session_create(SessionCreateParams(session_id="dotted", workspace_root=str(ws) + "/../" + ws.name, mode=None, permission_mode=None))
    assert dotted.workspace_root == str(ws)
    rpc(host, "initialize", {"protocolVersion": 9})
    for bad in ["relative/path", "/..", "/w\u0000x"]:
        failed(ErrorCode.INVALID_PARAMS, host.session_create, SessionCreateParams(session_id=None, workspace_root=bad, mode=None, permission_mode=None))
        reply = rpc(host, "session/create", {"workspaceRoot": bad})
        assert reply["error"]["data"]["code"] == error_code_wire_name(ErrorCode.INVALID_PARAMS)
    failed(ErrorCode.INVALID_PARAMS, host.session_create, SessionCreateParams(session_id="", workspace_root=None, mode=None, permission_mode=None))
    assert rpc(host, "session/create", {"sessionId": "", "workspaceRoot": None})["error"]["data"]["code"] == "INVALID_PARAMS"


# ---------------------------------------------------------------------------
# Host-run commands


SANDBOX_HELPER = os.path.normpath(
    # The helper an app ships; generate.sh puts it beside the library.
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "native", "plan-exec-sandbox")
)


@pytest.fixture
def command_host(tmp_path):
    host = PlanHost(
        str(tmp_path / "plan.db"),
        HostConfig(sandbox_helper=SANDBOX_HELPER),
    )
    yield host
    host.shutdown()


def test_the_installed_plan_checkpoint_binary_is_the_sandbox_helper_of_a_python_host(tmp_path):
    """The bindings README's way to Plan Bash for Python: the wheel ships no
    helper, and the `plan-checkpoint` binary (test-wheel.sh builds it and
    names it in PLAN_CHECKPOINT_BIN) is one."""
    binary = os.environ.get("PLAN_CHECKPOINT_BIN")
    assert binary and os.path.isfile(binary), (
        "PLAN_CHECKPOINT_BIN must name a built plan-checkpoint binary (test-wheel.sh sets it)"
    )
    host = PlanHost(str(tmp_path / "plan.db"), HostConfig(sandbox_helper=binary))
    try:
        ws = workspace(tmp_path)
        (ws / "notes.txt").write_text("plan me\n")
        recorder = Recorder()
        host.add_listener(recorder)
        host.session_create(SessionCreateParams(session_id="py", workspace_root=str(ws), mode=Mode.PLAN, permission_mode=None))
        turn = host.turn_start(TurnStartParams(session_id="py", prompt="", origin=Origin.INTERACTIVE))
        command = json.dumps({"command": "cat notes.txt"})
        [result] = host.turn_tool_calls(TurnToolCallsParams(session_id="py", turn_id=turn.turn_id, calls=[ToolCall(call_id="c1", name="Bash", input=command)])).results
        info = host.sandbox_info()
        if info.plan_sandbox != PlanSandbox.LANDLOCK:
            print(f"the kernel sandbox is unavailable here ({info.reason}); asserting PLAN_SANDBOX_UNAVAILABLE")
            assert result.error.code == ErrorCode.PLAN_SANDBOX_UNAVAILABLE
            return
        assert result.decision == ToolCallDecision.ALLOW
        assert result.command.sandbox == CommandSandbox.READ_ONLY
        outputs, exited = command_events(recorder, "c1")
        assert exited.command.state == CommandState.EXITED and exited.command.exit_code == 0
        assert "".join(o.chunk for o in outputs if o.stream == OutputStream.STDOUT) == "plan me\n"
    finally:
        host.shutdown()


def test_a_missing_sandbox_helper_is_the_cause_plan_bash_is_refused_with(tmp_path):
    """A wrong helper path is not blamed on the kernel: sandbox_info() and
    the refusal of a Plan Bash call both name the helper that was not found."""
    host = PlanHost(str(tmp_path / "plan.db"), HostConfig(sandbox_helper="/nonexistent/helper"))
    try:
        info = host.sandbox_info()
        assert info.plan_sandbox == PlanSandbox.UNAVAILABLE
        assert info.layers == [] and info.enforced == []
        assert "/nonexistent/helper was not found" in info.reason
        ws = workspace(tmp_path)
        host.session_create(SessionCreateParams(session_id="py", workspace_root=str(ws), mode=Mode.PLAN, permission_mode=None))
        turn = host.turn_start(TurnStartParams(session_id="py", prompt="", origin=Origin.INTERACTIVE))
        command = json.dumps({"command": "cat notes.txt"})
        [result] = host.turn_tool_calls(TurnToolCallsParams(session_id="py", turn_id=turn.turn_id, calls=[ToolCall(call_id="c1", name="Bash", input=command)])).results
        assert result.decision == ToolCallDecision.DENY
        assert result.error.code == ErrorCode.PLAN_SANDBOX_UNAVAILABLE
        assert result.error.message == (
            "the read-only Plan sandbox is unavailable, so Plan-mode Bash cannot run: " + info.reason
        )
        assert "not available on this host" not in result.error.message
    finally:
        host.shutdown()


def command_events(recorder, call_id):
    """Waits (bounded) for the end of call_id; returns its outputs' params and its end's."""
    exited = recorder.wait_for(f"the end of {call_id}", lambda e: e.is_command_exited() and e[0].call_id == call_id)
    outputs = [e[0] for e in recorder.of(ServerNotification.COMMAND_OUTPUT) if e[0].call_id == call_id]
    return outputs, exited[0]


def test_plan_command_runs_read_only_and_a_write_is_refused_by_the_kernel(command_host, tmp_path):
    host = command_host
    ws = workspace(tmp_path)
    (ws / "notes.txt").write_text("plan me\n")
    recorder = Recorder()
    host.add_listener(recorder)
    host.session_create(SessionCreateParams(session_id="cmd", workspace_root=str(ws), mode=Mode.PLAN, permission_mode=None))
    turn = host.turn_start(TurnStartParams(session_id="cmd", prompt="", origin=Origin.INTERACTIVE))
    command = json.dumps({"command": "cat notes.txt; echo x > written.txt"})
    [result] = host.turn_tool_calls(TurnToolCallsParams(session_id="cmd", turn_id=turn.turn_id, calls=[ToolCall(call_id="c1", name="Bash", input=command)])).results
    info = host.sandbox_info()
    if info.plan_sandbox != PlanSandbox.LANDLOCK:
        print(f"the kernel sandbox is unavailable here ({info.reason}); asserting PLAN_SANDBOX_UNAVAILABLE")
        assert result.decision == ToolCallDecision.DENY
        assert result.error.code == ErrorCode.PLAN_SANDBOX_UNAVAILABLE
        return
    assert result.decision == ToolCallDecision.ALLOW
    assert result.command.sandbox == CommandSandbox.READ_ONLY
    assert result.command.network is False
    outputs, exited = command_events(recorder, "c1")
    assert exited.command.state == CommandState.EXITED
    assert exited.command.exit_code != 0, "the refused write fails the command"
    assert "".join(o.chunk for o in outputs if o.stream == OutputStream.STDOUT) == "plan me\n"
    assert not (ws / "written.txt").exists(), "the kernel refused the write"
    assert host.command_get(CommandGetParams(session_id="cmd", call_id="c1")) == exited.command
    with pytest.raises(PlanError.Failed) as missing:
        host.command_get(CommandGetParams(session_id="cmd", call_id="nope"))
    assert missing.value.code == ErrorCode.COMMAND_NOT_FOUND
    with pytest.raises(PlanError.Failed) as again:
        host.command_start(CommandStartParams(session_id="cmd", turn_id=turn.turn_id, call_id="c1", command="ls", cwd=None, timeout_ms=None))
    assert again.value.code == ErrorCode.COMMAND_NOT_ALLOWED
    host.turn_complete(TurnCompleteParams(session_id="cmd", turn_id=turn.turn_id))


def test_agent_command_output_and_exit_arrive_as_typed_events(command_host, tmp_path):
    # Under ask the Bash call awaits a person (tool_confirm), then runs on the
    # host in the workspace-write sandbox, with the text it was decided with.
    host = command_host
    recorder = Recorder()
    host.add_listener(recorder)
    host.session_create(SessionCreateParams(session_id="agent", workspace_root=str(workspace(tmp_path)), mode=Mode.AGENT, permission_mode=None))
    turn = host.turn_start(TurnStartParams(session_id="agent", prompt="", origin=Origin.INTERACTIVE))
    command = "printf out; printf err >&2"
    (asked, written) = host.turn_tool_calls(TurnToolCallsParams(session_id="agent", turn_id=turn.turn_id, calls=[call("b1", "Bash", json.dumps({"command": command, "timeoutMs": 10_000})), call("w1", "Write")])).results
    assert (asked.decision, asked.host_run) == (ToolCallDecision.CONFIRM, True)
    assert (written.decision, written.host_run) == (ToolCallDecision.CONFIRM, False)
    with pytest.raises(PlanError.Failed) as early:
        host.command_start(CommandStartParams(session_id="agent", turn_id=turn.turn_id, call_id="b1", command=command, cwd=None, timeout_ms=10_000))
    assert early.value.code == ErrorCode.COMMAND_NOT_ALLOWED
    denied(host.tool_confirm(ToolConfirmParams(session_id="agent", turn_id=turn.turn_id, call_id="w1", allow=False)), ErrorCode.TOOL_DECLINED)
    with pytest.raises(PlanError.Failed) as twice:
        host.tool_confirm(ToolConfirmParams(session_id="agent", turn_id=turn.turn_id, call_id="w1", allow=True))
    assert twice.value.code == ErrorCode.TOOL_CONFIRMATION_NOT_PENDING
    confirmed = host.tool_confirm(ToolConfirmParams(session_id="agent", turn_id=turn.turn_id, call_id="b1", allow=True))
    assert (confirmed.decision, confirmed.host_run) == (ToolCallDecision.ALLOW, True)
    recorder.drain()
    if host.sandbox_info().plan_sandbox != PlanSandbox.LANDLOCK:
        with pytest.raises(PlanError.Failed) as unavailable:
            host.command_start(CommandStartParams(session_id="agent", turn_id=turn.turn_id, call_id="b1", command=command, cwd=None, timeout_ms=10_000))
        assert unavailable.value.code == ErrorCode.SANDBOX_UNAVAILABLE
        return
    run = host.command_start(CommandStartParams(session_id="agent", turn_id=turn.turn_id, call_id="b1", command=command, cwd=None, timeout_ms=10_000))
    assert run.sandbox == CommandSandbox.WORKSPACE_WRITE and run.state == CommandState.RUNNING
    outputs, exited = command_events(recorder, "b1")
    assert all(o.session_id == "agent" for o in outputs)
    assert [o.seq for o in outputs] == list(range(len(outputs))), "seq counts from 0 across streams"
    assert "".join(o.chunk for o in outputs if o.stream == OutputStream.STDOUT) == "out"
    assert "".join(o.chunk for o in outputs if o.stream == OutputStream.STDERR) == "err"
    assert exited.session_id == "agent"
    assert exited.command.state == CommandState.EXITED and exited.command.exit_code == 0
    assert (exited.command.stdout_bytes, exited.command.stderr_bytes) == (3, 3)
    assert exited.command == host.command_get(CommandGetParams(session_id="agent", call_id="b1"))
    assert recorder.events[-1] == ServerNotification.COMMAND_EXITED(exited), "nothing of the call after its end"
    host.turn_complete(TurnCompleteParams(session_id="agent", turn_id=turn.turn_id))
