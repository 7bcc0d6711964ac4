package dev.plancheckpoint.ffi

import java.io.RandomAccessFile
import java.nio.file.Files
import java.nio.file.Path
import java.security.MessageDigest
import java.util.Collections
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.CountDownLatch
import java.util.concurrent.CyclicBarrier
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.ReentrantLock
import kotlin.concurrent.withLock
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.MethodOrderer
import org.junit.jupiter.api.Order
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestMethodOrder
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.io.TempDir

/**
 * The plan-ffi surface exercised from Kotlin through the UniFFI-generated
 * bindings and the real native library: lifecycle, restart interruption,
 * every canonical error as [PlanException.Failed], typed [ServerNotification]s for
 * every notification (timer-driven expiry and host-run commands included),
 * handleJson, shells, configuration and threads.
 *
 * Each test gets its own temporary directory (database plus workspace), so
 * tests never share a host lock.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation::class)
class PlanHostTest {
    @TempDir
    lateinit var dir: Path

    /** Hosts a test opened; shut down after it, whatever happened. */
    private val opened = CopyOnWriteArrayList<PlanHost>()

    @AfterEach
    fun shutDownHosts() {
        opened.forEach { it.shutdown() }
        opened.forEach { it.close() }
    }

    // ----------------------------------------------------------------------
    // Helpers

    private fun db(name: String = "plan.db"): String = dir.resolve(name).toString()

    private fun open(
        dbPath: String = db(),
        ttlMs: Long? = null,
        markdownLimit: ULong? = null,
    ): PlanHost = PlanHost(dbPath, HostConfig(ttlMs, markdownLimit)).also { opened.add(it) }

    private fun workspace(name: String = "ws"): Path = Files.createDirectories(dir.resolve(name))

    private fun call(id: String, name: String, inputJson: String = "{}") = ToolCall(id, name, inputJson)

    private fun quote(text: String): String = buildString {
        append('"')
        for (ch in text) {
            when (ch) {
                '"' -> append("\\\"")
                '\\' -> append("\\\\")
                '\n' -> append("\\n")
                '\r' -> append("\\r")
                '\t' -> append("\\t")
                else -> if (ch < ' ') append("\\u%04x".format(ch.code)) else append(ch)
            }
        }
        append('"')
    }

    private fun submitInput(title: String, markdown: String, question: String) =
        """{"title":${quote(title)},"markdown":${quote(markdown)},"question":${quote(question)}}"""

    /** Exact bytes matter: CRLF, a tab, non-ASCII, no trailing newline. */
    private val markdown = "# Plan\r\n\n1. Read `src/main.rs`\n2. Ändern — naïve ✓\t🙂\n\nno trailing newline"

    private fun sha256Hex(bytes: ByteArray): String =
        MessageDigest.getInstance("SHA-256").digest(bytes).joinToString("") { "%02x".format(it) }

    /** Expects [PlanException.Failed] with [code] and records the code as reached. */
    private fun failed(code: ErrorCode, block: () -> Unit): PlanException.Failed {
        val error = assertThrows<PlanException.Failed>("expected $code") { block() }
        assertEquals(code, error.code, "code of: ${error.reason}")
        assertTrue(error.reason.isNotBlank())
        assertTrue(error.message.contains(errorCodeWireName(code)), error.message)
        reached.add(code)
        return error
    }

    /** Expects a deny result carrying [code] and records it as reached. */
    private fun denied(result: ToolCallResult, code: ErrorCode) {
        assertEquals(ToolCallDecision.DENY, result.decision, "decision of ${result.callId}")
        assertEquals(code, result.error?.code)
        assertTrue(result.error?.message?.isNotEmpty() == true, "a sentence for ${result.callId}")
        assertNull(result.approval)
        reached.add(code)
    }

    private fun planSession(host: PlanHost, ws: Path?, id: String? = null): Session =
        host.sessionCreate(SessionCreateParams(sessionId = id, workspaceRoot = ws?.toString(), mode = Mode.PLAN, permissionMode = null))

    /** Starts a Plan turn and submits a plan; returns the pending approval. */
    private fun submit(host: PlanHost, sessionId: String, title: String = "Refactor", body: String = markdown): PlanApproval {
        val turn = host.turnStart(TurnStartParams(sessionId = sessionId, prompt = "", origin = Origin.INTERACTIVE))
        assertEquals(Mode.PLAN, turn.mode)
        val results = host.turnToolCalls(TurnToolCallsParams(sessionId = sessionId, turnId = turn.turnId, calls = listOf(call("submit", "SubmitPlan", submitInput(title, body, "Go ahead?"))))).results
        assertEquals(1, results.size)
        assertEquals(ToolCallDecision.ALLOW, results[0].decision, "SubmitPlan refused: ${results[0].error?.code}")
        return results[0].approval!!
    }

    private fun artifactFile(ws: Path, approval: PlanApproval): Path = ws.resolve(approval.artifact!!.path)

    // ----------------------------------------------------------------------
    // Lifecycle

    @Test
    @Order(1)
    fun fullLifecycleWithEachPermissionMode() {
        val host = open()
        for (mode in PermissionMode.values()) {
            // Listings order by createdAt (ms), then id; ids are UUIDv7,
            // ordered by creation within a process, so ties keep this order.
            val ws = workspace("ws-$mode")
            val session = planSession(host, ws)
            assertEquals(Mode.PLAN, session.mode)
            assertEquals(PermissionMode.ASK, session.permissionMode)
            assertEquals(ws.toString(), session.workspaceRoot)
            assertNull(session.activeTurn)
            val sid = session.sessionId
            assertEquals(session, host.sessionGet(SessionGetParams(sessionId = sid)))

            val turn = host.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.INTERACTIVE))
            assertEquals(Mode.PLAN, turn.mode)
            assertEquals(
                ActiveTurn(turn.turnId, Mode.PLAN, Origin.INTERACTIVE, TurnKind.PROMPT),
                host.sessionGet(SessionGetParams(sessionId = sid)).activeTurn,
            )

            // Plan-safe tools pass; writers are denied; the turn stays active.
            val checks = host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = turn.turnId, calls = listOf(
                    call("r", "Read", """{"path":"src/main.rs"}"""),
                    call("g", "Grep", """{"pattern":"fn"}"""),
                    call("w", "Write", """{"path":"x","content":"y"}"""),
                    call("e", "Edit", "{}"),
                    call("p", "mcp__plugin__tool", "{}"),
                ))).results
            assertEquals(listOf("r", "g", "w", "e", "p"), checks.map { it.callId })
            assertEquals(ToolCallDecision.ALLOW, checks[0].decision)
            assertNull(checks[0].error)
            assertEquals(ToolCallDecision.ALLOW, checks[1].decision)
            checks.drop(2).forEach { denied(it, ErrorCode.TOOL_DENIED_IN_PLAN) }

            val results = host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = turn.turnId, calls = listOf(call("s", "SubmitPlan", submitInput("Refactor the parser", markdown, "Proceed?"))))).results
            val approval = results.single().approval!!
            assertEquals(ToolCallDecision.ALLOW, results.single().decision)
            assertEquals(ApprovalStatus.PENDING, approval.status)
            assertEquals("Refactor the parser", approval.title)
            assertEquals("Proceed?", approval.question)
            assertEquals(sid, approval.sessionId)
            assertEquals(turn.turnId, approval.turnId)
            assertNull(approval.errorCode)
            assertNull(approval.permissionMode)
            assertNull(approval.executionId)
            assertNull(approval.executionState)
            assertNull(approval.decidedAt)
            assertEquals(30L * 60 * 1000, approval.expiresAt - approval.createdAt)

            // The artifact: exact bytes on disk, SHA-256 and size as recorded.
            val artifact = approval.artifact!!
            assertTrue(artifact.path.startsWith(".pi/plan/") && artifact.path.endsWith(".md"), artifact.path)
            val bytes = Files.readAllBytes(artifactFile(ws, approval))
            val expected = markdown.toByteArray(Charsets.UTF_8)
            assertArrayEquals(expected, bytes)
            assertEquals(expected.size.toULong(), artifact.size)
            assertEquals(sha256Hex(bytes), artifact.sha256)
            val content = host.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id))
            assertEquals(markdown, content.markdown)
            assertEquals(artifact.sha256, content.sha256)
            assertEquals(artifact.size, content.size)

            // Pending: visible on the session, in get and in list.
            val pendingSession = host.sessionGet(SessionGetParams(sessionId = sid))
            assertEquals(approval.id, pendingSession.pendingApprovalId)
            assertEquals(approval, host.planGet(PlanGetParams(approvalId = approval.id)))
            assertEquals(listOf(approval), host.planList(ApprovalFilter(sid, ApprovalStatus.PENDING, null)).approvals)

            // Approve with this mode: Agent, the mode, a queued execution turn.
            val decision = host.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = mode))
            assertEquals(ApprovalStatus.APPROVED, decision.approval.status)
            assertEquals(mode, decision.approval.permissionMode)
            assertEquals(ExecutionState.QUEUED, decision.approval.executionState)
            assertNotNull(decision.approval.decidedAt)
            val executionId = decision.approval.executionId!!
            assertEquals(Mode.AGENT, decision.session.mode)
            assertEquals(mode, decision.session.permissionMode)
            assertNull(decision.session.pendingApprovalId)
            assertEquals(executionId, decision.session.activeExecutionId)
            assertEquals(TurnKind.EXECUTION, decision.session.activeTurn!!.kind)
            assertEquals(Mode.AGENT, decision.session.activeTurn!!.mode)
            assertEquals(decision.session, host.sessionGet(SessionGetParams(sessionId = sid)))

            assertEquals(ExecutionState.RUNNING, host.executionStart(ExecutionStartParams(executionId = executionId)).executionState)
            val done = host.executionComplete(ExecutionCompleteParams(executionId = executionId))
            assertEquals(ExecutionState.COMPLETED, done.executionState)
            assertEquals(ApprovalStatus.APPROVED, done.status)
            assertEquals(done, host.planGet(PlanGetParams(approvalId = approval.id)))

            val after = host.sessionGet(SessionGetParams(sessionId = sid))
            assertEquals(Mode.AGENT, after.mode)
            assertEquals(mode, after.permissionMode)
            assertNull(after.activeTurn)
            assertNull(after.activeExecutionId)

            // The session now works as an Agent under the host's permission
            // table: under ask a write needs a person, whom a scheduled turn
            // does not have; the other modes allow a write in the workspace.
            val agentTurn = host.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.SCHEDULED))
            assertEquals(Mode.AGENT, agentTurn.mode)
            val write = host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = agentTurn.turnId, calls = listOf(call("w", "Write", """{"path":"notes.md"}""")))).results.single()
            if (mode == PermissionMode.ASK) {
                denied(write, ErrorCode.PERMISSION_REQUIRES_INTERACTIVE_SESSION)
            } else {
                assertEquals(ToolCallDecision.ALLOW, write.decision)
                assertEquals(false, write.hostRun)
            }
            assertNull(host.turnComplete(TurnCompleteParams(sessionId = sid, turnId = agentTurn.turnId)).activeTurn)
        }
        val all = host.planList(ApprovalFilter(null, null, null)).approvals
        assertEquals(3, all.size)
        assertEquals(PermissionMode.values().reversed(), all.map { it.permissionMode }, "newest first")
        assertEquals(1, host.planList(ApprovalFilter(null, ApprovalStatus.APPROVED, 1u)).approvals.size)
    }

    @Test
    @Order(2)
    fun rejectIsTerminalAndARevisionIsANewArtifact() {
        val host = open()
        val ws = workspace()
        val sid = planSession(host, ws).sessionId
        val first = submit(host, sid, body = "v1\n")
        val rejected = host.planReject(PlanRejectParams(approvalId = first.id))
        assertEquals(ApprovalStatus.REJECTED, rejected.approval.status)
        assertNull(rejected.approval.permissionMode)
        assertNull(rejected.approval.executionId)
        assertEquals(Mode.PLAN, rejected.session.mode)
        assertEquals(PermissionMode.ASK, rejected.session.permissionMode)
        assertNull(rejected.session.activeTurn)
        assertNull(rejected.session.pendingApprovalId)

        failed(ErrorCode.APPROVAL_NOT_PENDING) { host.planApprove(PlanApproveParams(approvalId = first.id, permissionMode = PermissionMode.AUTO)) }
        failed(ErrorCode.APPROVAL_NOT_PENDING) { host.planReject(PlanRejectParams(approvalId = first.id)) }

        // No pause for a distinct createdAt: a tie is broken by id (UUIDv7,
        // ordered by creation within a process).
        val second = submit(host, sid, body = "v2\n")
        assertNotEquals(first.artifact!!.path, second.artifact!!.path)
        assertEquals("v1\n", Files.readString(artifactFile(ws, first)), "an earlier artifact is never replaced")
        assertEquals("v2\n", Files.readString(artifactFile(ws, second)))
        assertEquals("v1\n", host.planReadArtifact(PlanReadArtifactParams(approvalId = first.id)).markdown)
        assertEquals(listOf(second.id, first.id), host.planList(ApprovalFilter(sid, null, null)).approvals.map { it.id })
        assertEquals(listOf(first.id), host.planList(ApprovalFilter(sid, ApprovalStatus.REJECTED, null)).approvals.map { it.id })
    }

    @Test
    @Order(3)
    fun restartInterruptsPendingQueuedAndRunningButNothingElse() {
        val path = db()
        val first = open(path)
        val ws = workspace()
        val pendingSid = planSession(first, ws).sessionId
        val pending = submit(first, pendingSid)

        val queuedSid = planSession(first, ws).sessionId
        val queued = first.planApprove(PlanApproveParams(approvalId = submit(first, queuedSid).id, permissionMode = PermissionMode.ACCEPT_EDITS)).approval

        val runningSid = planSession(first, ws).sessionId
        val running = first.planApprove(PlanApproveParams(approvalId = submit(first, runningSid).id, permissionMode = PermissionMode.AUTO)).approval
        first.executionStart(ExecutionStartParams(executionId = running.executionId!!))

        val doneSid = planSession(first, ws).sessionId
        val done = first.planApprove(PlanApproveParams(approvalId = submit(first, doneSid).id, permissionMode = PermissionMode.ASK)).approval
        first.executionStart(ExecutionStartParams(executionId = done.executionId!!))
        first.executionComplete(ExecutionCompleteParams(executionId = done.executionId!!))

        val rejectedSid = planSession(first, ws).sessionId
        val rejected = first.planReject(PlanRejectParams(approvalId = submit(first, rejectedSid).id)).approval

        // While the first host lives, a second one is refused.
        failed(ErrorCode.HOST_ALREADY_RUNNING) { open(path) }

        first.shutdown()
        first.shutdown() // idempotent
        failed(ErrorCode.HOST_CLOSED) { first.sessionGet(SessionGetParams(sessionId = pendingSid)) }

        val second = open(path)
        val p = second.planGet(PlanGetParams(approvalId = pending.id))
        assertEquals(ApprovalStatus.INTERRUPTED, p.status)
        assertEquals(ErrorCode.HOST_RESTARTED, p.errorCode)
        assertNull(p.executionId)
        reached.add(ErrorCode.HOST_RESTARTED)
        val pSession = second.sessionGet(SessionGetParams(sessionId = pendingSid))
        assertEquals(Mode.PLAN, pSession.mode, "an interrupted pending approval leaves the session in Plan")
        assertNull(pSession.pendingApprovalId)
        assertNull(pSession.activeTurn)

        for ((approval, sid, mode) in listOf(
            Triple(queued, queuedSid, PermissionMode.ACCEPT_EDITS),
            Triple(running, runningSid, PermissionMode.AUTO),
        )) {
            val row = second.planGet(PlanGetParams(approvalId = approval.id))
            assertEquals(ApprovalStatus.APPROVED, row.status)
            assertEquals(ExecutionState.INTERRUPTED, row.executionState)
            assertEquals(ErrorCode.HOST_RESTARTED, row.errorCode)
            val session = second.sessionGet(SessionGetParams(sessionId = sid))
            assertEquals(Mode.AGENT, session.mode, "an interrupted execution leaves the session in Agent")
            assertEquals(mode, session.permissionMode)
            assertNull(session.activeExecutionId)
            assertNull(session.activeTurn)
            // Nothing is replayed: the old execution cannot be resumed.
            failed(ErrorCode.EXECUTION_NOT_ACTIVE) { second.executionStart(ExecutionStartParams(executionId = row.executionId!!)) }
            failed(ErrorCode.EXECUTION_NOT_ACTIVE) { second.executionComplete(ExecutionCompleteParams(executionId = row.executionId!!)) }
            // The user may start a new turn, in Agent.
            val turn = second.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.INTERACTIVE))
            assertEquals(Mode.AGENT, turn.mode)
            second.turnCancel(TurnCancelParams(sessionId = sid))
        }
        assertEquals(ExecutionState.COMPLETED, second.planGet(PlanGetParams(approvalId = done.id)).executionState)
        assertNull(second.planGet(PlanGetParams(approvalId = done.id)).errorCode)
        assertEquals(rejected, second.planGet(PlanGetParams(approvalId = rejected.id)))
        failed(ErrorCode.APPROVAL_NOT_PENDING) { second.planApprove(PlanApproveParams(approvalId = pending.id, permissionMode = PermissionMode.ASK)) }
        assertEquals(
            listOf(pending.id),
            second.planList(ApprovalFilter(null, ApprovalStatus.INTERRUPTED, null)).approvals.map { it.id },
        )
        // The interrupted Plan session can submit again.
        assertEquals(ApprovalStatus.PENDING, submit(second, pendingSid).status)
    }

    @Test
    @Order(4)
    fun closeFreesTheHandleAndShutdownReleasesTheLock() {
        val path = db()
        // use {} frees the handle; with no call in flight the native object
        // is dropped at once, which shuts the host down.
        PlanHost(path, HostConfig()).use { it.sessionCreate(SessionCreateParams(sessionId = "kept", workspaceRoot = null, mode = null, permissionMode = null)) }
        val reopened = PlanHost(path, HostConfig())
        assertEquals("kept", reopened.sessionGet(SessionGetParams(sessionId = "kept")).sessionId)
        reopened.shutdown()
        reopened.shutdown()
        // After shutdown the handle is still valid; every call says HOST_CLOSED.
        failed(ErrorCode.HOST_CLOSED) { reopened.shellList(ShellListParams()) }
        reopened.close()
        assertThrows<IllegalStateException> { reopened.shellList(ShellListParams()) }
        // And the lock is free again.
        open(path).sessionGet(SessionGetParams(sessionId = "kept"))
    }

    // ----------------------------------------------------------------------
    // Errors

    @Test
    @Order(10)
    fun sessionAndTurnErrors() {
        val host = open()
        val ws = workspace()
        failed(ErrorCode.SESSION_NOT_FOUND) { host.sessionGet(SessionGetParams(sessionId = "nope")) }
        failed(ErrorCode.SESSION_NOT_FOUND) { host.turnStart(TurnStartParams(sessionId = "nope", prompt = "", origin = Origin.INTERACTIVE)) }
        failed(ErrorCode.SESSION_NOT_FOUND) { host.sessionConfigure(SessionConfigureParams(sessionId = "nope")) }
        failed(ErrorCode.SESSION_NOT_FOUND) { host.turnCancel(TurnCancelParams(sessionId = "nope")) }
        failed(ErrorCode.SESSION_NOT_FOUND) { host.turnToolCalls(TurnToolCallsParams(sessionId = "nope", turnId = "t", calls = listOf(call("r", "Read")))).results }
        failed(ErrorCode.SESSION_NOT_FOUND) { host.turnComplete(TurnCompleteParams(sessionId = "nope", turnId = "t")) }

        host.sessionCreate(SessionCreateParams(sessionId = "s1", workspaceRoot = ws.toString(), mode = Mode.PLAN, permissionMode = PermissionMode.AUTO))
        failed(ErrorCode.SESSION_ALREADY_EXISTS) { host.sessionCreate(SessionCreateParams(sessionId = "s1", workspaceRoot = null, mode = null, permissionMode = null)) }
        failed(ErrorCode.INVALID_PARAMS) { host.sessionCreate(SessionCreateParams(sessionId = null, workspaceRoot = "relative/path", mode = null, permissionMode = null)) }
        failed(ErrorCode.INVALID_PARAMS) { host.sessionCreate(SessionCreateParams(sessionId = "", workspaceRoot = null, mode = null, permissionMode = null)) }

        failed(ErrorCode.PLAN_REQUIRES_INTERACTIVE_SESSION) { host.turnStart(TurnStartParams(sessionId = "s1", prompt = "", origin = Origin.SCHEDULED)) }
        assertNull(host.sessionGet(SessionGetParams(sessionId = "s1")).activeTurn, "nothing was created")

        val turn = host.turnStart(TurnStartParams(sessionId = "s1", prompt = "", origin = Origin.INTERACTIVE))
        failed(ErrorCode.SESSION_BUSY) { host.turnStart(TurnStartParams(sessionId = "s1", prompt = "", origin = Origin.INTERACTIVE)) }
        failed(ErrorCode.SESSION_BUSY) { host.sessionConfigure(SessionConfigureParams(sessionId = "s1", mode = Mode.AGENT)) }
        failed(ErrorCode.TURN_NOT_ACTIVE) { host.turnComplete(TurnCompleteParams(sessionId = "s1", turnId = "turn-other")) }
        failed(ErrorCode.TURN_NOT_ACTIVE) { host.turnToolCalls(TurnToolCallsParams(sessionId = "s1", turnId = "turn-other", calls = listOf(call("r", "Read")))).results }
        assertEquals(Mode.PLAN, host.sessionGet(SessionGetParams(sessionId = "s1")).mode)

        val cancelled = host.turnCancel(TurnCancelParams(sessionId = "s1"))
        assertNull(cancelled.activeTurn)
        failed(ErrorCode.TURN_NOT_ACTIVE) { host.turnCancel(TurnCancelParams(sessionId = "s1")) }
        failed(ErrorCode.TURN_NOT_ACTIVE) { host.turnComplete(TurnCompleteParams(sessionId = "s1", turnId = turn.turnId)) }
        failed(ErrorCode.SHELL_UNKNOWN) { host.sessionConfigure(SessionConfigureParams(sessionId = "s1", shell = Clearable.Set("tcsh-9000"))) }
        failed(ErrorCode.SHELL_UNKNOWN) { host.shellSetDefault(ShellSetDefaultParams(shellId = "tcsh-9000")).defaultShell }
    }

    @Test
    @Order(11)
    fun toolCallErrors() {
        val host = open(markdownLimit = 64u)
        val ws = workspace()
        val sid = planSession(host, ws).sessionId
        val turn = host.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.INTERACTIVE))
        val tid = turn.turnId
        val valid = submitInput("T", "body", "Q?")

        // SubmitPlan with company: the whole request is refused, nothing allowed.
        failed(ErrorCode.SUBMIT_PLAN_NOT_ALONE) {
            host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = tid, calls = listOf(call("r", "Read"), call("s", "SubmitPlan", valid)))).results
        }
        // Input that is not JSON at all is a request error.
        failed(ErrorCode.INVALID_PARAMS) { host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = tid, calls = listOf(call("r", "Read", "{not json")))).results }

        for (input in listOf(
            """{"title":"T","markdown":"m"}""",
            """{"title":"","markdown":"m","question":"Q?"}""",
            """{"title":"T","markdown":"m","question":""}""",
            """{"title":"T","markdown":"m","question":"Q?","steps":[]}""",
            """{"title":1,"markdown":"m","question":"Q?"}""",
            """["T","m","Q?"]""",
            submitInput("T", "x".repeat(65), "Q?"),
        )) {
            denied(host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = tid, calls = listOf(call("s", "SubmitPlan", input)))).results.single(), ErrorCode.INVALID_PLAN_INPUT)
        }
        denied(host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = tid, calls = listOf(call("w", "Write")))).results.single(), ErrorCode.TOOL_DENIED_IN_PLAN)
        assertEquals(tid, host.sessionGet(SessionGetParams(sessionId = sid)).activeTurn!!.turnId, "a refused call leaves the Plan turn active")
        assertTrue(host.planList(ApprovalFilter(sid, null, null)).approvals.isEmpty())
        assertFalse(Files.exists(ws.resolve(".pi/plan")) && Files.list(ws.resolve(".pi/plan")).use { it.count() } > 0)
        // At the limit exactly it is accepted.
        val ok = host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = tid, calls = listOf(call("s", "SubmitPlan", submitInput("T", "x".repeat(64), "Q?"))))).results.single()
        assertEquals(ApprovalStatus.PENDING, ok.approval!!.status)
        failed(ErrorCode.SESSION_BUSY) { host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = tid, calls = listOf(call("r", "Read")))).results }
        failed(ErrorCode.SESSION_BUSY) { host.turnCancel(TurnCancelParams(sessionId = sid)) }
        failed(ErrorCode.SESSION_BUSY) { host.turnComplete(TurnCompleteParams(sessionId = sid, turnId = tid)) }

        // A session without a workspace cannot write an artifact.
        val unbound = host.sessionCreate(SessionCreateParams(sessionId = null, workspaceRoot = null, mode = Mode.PLAN, permissionMode = null)).sessionId
        val ut = host.turnStart(TurnStartParams(sessionId = unbound, prompt = "", origin = Origin.INTERACTIVE)).turnId
        denied(host.turnToolCalls(TurnToolCallsParams(sessionId = unbound, turnId = ut, calls = listOf(call("s", "SubmitPlan", valid)))).results.single(), ErrorCode.SESSION_NOT_PROJECT_BOUND)

        // SubmitPlan in an Agent turn.
        val agent = host.sessionCreate(SessionCreateParams(sessionId = null, workspaceRoot = ws.toString(), mode = Mode.AGENT, permissionMode = null)).sessionId
        val at = host.turnStart(TurnStartParams(sessionId = agent, prompt = "", origin = Origin.INTERACTIVE)).turnId
        denied(host.turnToolCalls(TurnToolCallsParams(sessionId = agent, turnId = at, calls = listOf(call("s", "SubmitPlan", valid)))).results.single(), ErrorCode.PLAN_NOT_ACTIVE)

        // A symbolic link under the workspace is refused, not followed.
        val linked = workspace("linked")
        val elsewhere = workspace("elsewhere")
        Files.createSymbolicLink(linked.resolve(".pi"), elsewhere)
        val ls = planSession(host, linked).sessionId
        val lt = host.turnStart(TurnStartParams(sessionId = ls, prompt = "", origin = Origin.INTERACTIVE)).turnId
        denied(host.turnToolCalls(TurnToolCallsParams(sessionId = ls, turnId = lt, calls = listOf(call("s", "SubmitPlan", valid)))).results.single(), ErrorCode.ARTIFACT_SYMLINK)
        assertEquals(0L, Files.list(elsewhere).use { it.count() })

        // A workspace root that does not exist cannot be written.
        val gone = planSession(host, dir.resolve("does-not-exist")).sessionId
        val gt = host.turnStart(TurnStartParams(sessionId = gone, prompt = "", origin = Origin.INTERACTIVE)).turnId
        denied(host.turnToolCalls(TurnToolCallsParams(sessionId = gone, turnId = gt, calls = listOf(call("s", "SubmitPlan", valid)))).results.single(), ErrorCode.ARTIFACT_WRITE_FAILED)
    }

    @Test
    @Order(12)
    fun approvalAndArtifactErrors() {
        val host = open()
        val ws = workspace()
        val sid = planSession(host, ws).sessionId
        failed(ErrorCode.APPROVAL_NOT_FOUND) { host.planGet(PlanGetParams(approvalId = "approval-nope")) }
        failed(ErrorCode.APPROVAL_NOT_FOUND) { host.planApprove(PlanApproveParams(approvalId = "approval-nope", permissionMode = PermissionMode.ASK)) }
        failed(ErrorCode.APPROVAL_NOT_FOUND) { host.planReject(PlanRejectParams(approvalId = "approval-nope")) }
        failed(ErrorCode.APPROVAL_NOT_FOUND) { host.planReadArtifact(PlanReadArtifactParams(approvalId = "approval-nope")) }

        val approval = submit(host, sid)
        failed(ErrorCode.PERMISSION_MODE_REQUIRED) { host.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = null)) }
        assertEquals(ApprovalStatus.PENDING, host.planGet(PlanGetParams(approvalId = approval.id)).status, "a failed request changes nothing")
        failed(ErrorCode.SESSION_BUSY) { host.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.INTERACTIVE)) }
        failed(ErrorCode.SESSION_BUSY) { host.sessionConfigure(SessionConfigureParams(sessionId = sid, permissionMode = PermissionMode.AUTO)) }

        // Tampering: same size, different bytes.
        val file = artifactFile(ws, approval)
        val original = Files.readAllBytes(file)
        val tampered = original.copyOf().also { it[0] = (it[0] + 1).toByte() }
        file.toFile().setWritable(true)
        Files.write(file, tampered)
        failed(ErrorCode.ARTIFACT_INTEGRITY_MISMATCH) { host.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id)) }
        // Tampering: appended bytes.
        Files.write(file, original + "\n".toByteArray())
        failed(ErrorCode.ARTIFACT_INTEGRITY_MISMATCH) { host.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id)) }
        Files.write(file, original)
        assertEquals(markdown, host.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id)).markdown)
        Files.delete(file)
        failed(ErrorCode.ARTIFACT_MISSING) { host.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id)) }
        // The approval itself is untouched by any of this.
        assertEquals(ApprovalStatus.PENDING, host.planGet(PlanGetParams(approvalId = approval.id)).status)
    }

    @Test
    @Order(13)
    fun executionErrorsAndCancellation() {
        val host = open()
        val ws = workspace()
        val sid = planSession(host, ws).sessionId
        failed(ErrorCode.EXECUTION_NOT_FOUND) { host.executionStart(ExecutionStartParams(executionId = "execution-nope")) }
        failed(ErrorCode.EXECUTION_NOT_FOUND) { host.executionComplete(ExecutionCompleteParams(executionId = "execution-nope")) }

        val decision = host.planApprove(PlanApproveParams(approvalId = submit(host, sid).id, permissionMode = PermissionMode.ACCEPT_EDITS))
        val eid = decision.approval.executionId!!
        failed(ErrorCode.EXECUTION_NOT_ACTIVE) { host.executionComplete(ExecutionCompleteParams(executionId = eid)) } // still queued
        failed(ErrorCode.SESSION_BUSY) { host.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.INTERACTIVE)) }
        failed(ErrorCode.SESSION_BUSY) { host.turnComplete(TurnCompleteParams(sessionId = sid, turnId = decision.session.activeTurn!!.turnId)) }
        host.executionStart(ExecutionStartParams(executionId = eid))
        failed(ErrorCode.EXECUTION_NOT_ACTIVE) { host.executionStart(ExecutionStartParams(executionId = eid)) } // already running

        // Cancelling the execution turn interrupts the execution.
        val cancelled = host.turnCancel(TurnCancelParams(sessionId = sid))
        assertNull(cancelled.activeTurn)
        assertNull(cancelled.activeExecutionId)
        assertEquals(Mode.AGENT, cancelled.mode)
        val row = host.planGet(PlanGetParams(approvalId = decision.approval.id))
        assertEquals(ExecutionState.INTERRUPTED, row.executionState)
        assertEquals(ErrorCode.EXECUTION_CANCELLED, row.errorCode)
        reached.add(ErrorCode.EXECUTION_CANCELLED)
        failed(ErrorCode.EXECUTION_NOT_ACTIVE) { host.executionComplete(ExecutionCompleteParams(executionId = eid)) }
        failed(ErrorCode.EXECUTION_NOT_ACTIVE) { host.executionStart(ExecutionStartParams(executionId = eid)) }
    }

    @Test
    @Order(14)
    fun hostErrors() {
        failed(ErrorCode.INVALID_PARAMS) { PlanHost(db(), HostConfig(0, null)) }
        failed(ErrorCode.INVALID_PARAMS) { PlanHost(db(), HostConfig(-5, null)) }
        // The export settings are HostConfig's one `otel` record, empty when omitted.
        assertEquals(ExportOverrides(), HostConfig().otel)
        for (otel in listOf(
            ExportOverrides(logsEndpoint = "http://127.0.0.1:4318/v1/logs", protocol = "grpc"),
            ExportOverrides(includeContent = true),
            ExportOverrides(logsEndpoint = "ftp://127.0.0.1/v1/logs"),
        )) {
            failed(ErrorCode.INVALID_PARAMS) { PlanHost(db(), HostConfig(otel = otel, otelFromEnvironment = false)) }
        }

        val path = db("locked.db")
        val first = open(path)
        failed(ErrorCode.HOST_ALREADY_RUNNING) { PlanHost(path, HostConfig(null, null)) }
        val ws = workspace()
        val sid = planSession(first, ws).sessionId
        val approval = submit(first, sid)
        first.shutdown()

        // Every method of a shut-down host fails with HOST_CLOSED.
        val calls: List<Pair<String, () -> Unit>> = listOf(
            "sessionCreate" to { first.sessionCreate(SessionCreateParams(sessionId = null, workspaceRoot = null, mode = null, permissionMode = null)) },
            "sessionGet" to { first.sessionGet(SessionGetParams(sessionId = sid)) },
            "sessionConfigure" to { first.sessionConfigure(SessionConfigureParams(sessionId = sid)) },
            "turnStart" to { first.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.INTERACTIVE)) },
            "turnToolCalls" to { first.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = "t", calls = listOf(call("r", "Read")))).results },
            "turnComplete" to { first.turnComplete(TurnCompleteParams(sessionId = sid, turnId = "t")) },
            "turnCancel" to { first.turnCancel(TurnCancelParams(sessionId = sid)) },
            "planApprove" to { first.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = PermissionMode.ASK)) },
            "planReject" to { first.planReject(PlanRejectParams(approvalId = approval.id)) },
            "planGet" to { first.planGet(PlanGetParams(approvalId = approval.id)) },
            "planList" to { first.planList(ApprovalFilter()).approvals },
            "planReadArtifact" to { first.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id)) },
            "executionStart" to { first.executionStart(ExecutionStartParams(executionId = "e")) },
            "executionComplete" to { first.executionComplete(ExecutionCompleteParams(executionId = "e")) },
            "shellList" to { first.shellList(ShellListParams()) },
            "shellSetDefault" to { first.shellSetDefault(ShellSetDefaultParams(shellId = "sh")).defaultShell },
        )
        for ((name, block) in calls) {
            val error = assertThrows<PlanException.Failed>(name) { block() }
            assertEquals(ErrorCode.HOST_CLOSED, error.code, name)
        }
        reached.add(ErrorCode.HOST_CLOSED)
        // handleJson answers with the same code inside a JSON-RPC error.
        // (initialize itself still succeeds on a closed host: it reads no
        // state; see crates/host/src/dispatch.rs `Connection::dispatch`.)
        first.handleJson("""{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}""")
        val reply = first.handleJson("""{"jsonrpc":"2.0","id":2,"method":"session/get","params":{"sessionId":"$sid"}}""")!!
        assertTrue(reply.contains("\"HOST_CLOSED\""), reply)
        first.addListener(object : PlanEventListener {
            override fun onEvent(event: ServerNotification) {}
        })

        // SCHEMA_UNSUPPORTED: a database whose PRAGMA user_version is 9. No
        // SQLite driver is needed: user_version is the big-endian 32-bit
        // integer at byte offset 60 of the database header, so a v10 file
        // written by the host is patched in place after a clean shutdown
        // (which checkpoints and removes the WAL).
        val v9 = db("v9.db")
        open(v9).shutdown()
        assertFalse(Files.exists(Path.of("$v9-wal")) && Files.size(Path.of("$v9-wal")) > 0, "WAL checkpointed")
        RandomAccessFile(v9, "rw").use { file ->
            file.seek(60)
            assertEquals(10, file.readInt())
            file.seek(60)
            file.writeInt(9)
        }
        failed(ErrorCode.SCHEMA_UNSUPPORTED) { PlanHost(v9, HostConfig(null, null)) }
        // Newer than this build: refused too.
        RandomAccessFile(v9, "rw").use { file -> file.seek(60); file.writeInt(11) }
        failed(ErrorCode.SCHEMA_UNSUPPORTED) { PlanHost(v9, HostConfig(null, null)) }

        // A file that is not a database at all.
        val junk = dir.resolve("junk.db")
        Files.write(junk, ByteArray(4096) { 0x5a })
        failed(ErrorCode.DATABASE_UNREADABLE) { PlanHost(junk.toString(), HostConfig(null, null)) }
    }

    // ----------------------------------------------------------------------
    // Events and the timer

    private class Recorder : PlanEventListener {
        val events = CopyOnWriteArrayList<ServerNotification>()
        private val lock = ReentrantLock()
        private val changed = lock.newCondition()
        val threads: MutableSet<String> = Collections.newSetFromMap(ConcurrentHashMap())
        val requested = CountDownLatch(1)
        val expired = CountDownLatch(1)
        val expiryThreads = CopyOnWriteArrayList<String>()

        override fun onEvent(event: ServerNotification) = lock.withLock {
            events.add(event)
            threads.add(Thread.currentThread().name)
            // Exhaustive on purpose: a new kind of event must be looked at here.
            when (event) {
                is ServerNotification.PlanApprovalRequested -> requested.countDown()
                is ServerNotification.PlanApprovalResolved -> if (event.v1.approval.status == ApprovalStatus.EXPIRED) {
                    expiryThreads.add(Thread.currentThread().name)
                    expired.countDown()
                }
                is ServerNotification.ExecutionStateChanged, is ServerNotification.SessionChanged,
                is ServerNotification.CommandOutput, is ServerNotification.CommandExited -> {}
            }
            // Last, so a waiter woken by this event sees all of it recorded.
            changed.signalAll()
        }

        /** Takes the events recorded so far. */
        fun drain(): List<ServerNotification> = lock.withLock { events.toList().also { events.clear() } }

        /** Waits (bounded) for an event matching [matches], woken by each new event; returns it. */
        fun <T : ServerNotification> await(type: Class<T>, what: String, matches: (T) -> Boolean = { true }): T {
            var left = TimeUnit.SECONDS.toNanos(20)
            lock.withLock {
                while (true) {
                    events.filterIsInstance(type).firstOrNull(matches)?.let { return it }
                    if (left <= 0) throw AssertionError("no $what within 20 s; got $events")
                    left = changed.awaitNanos(left)
                }
            }
        }
    }

    @Test
    @Order(20)
    fun eventCallbackReceivesRequestAndTimerExpiry() {
        val host = open(ttlMs = 300)
        val recorder = Recorder()
        host.addListener(recorder)
        val ws = workspace()
        val sid = planSession(host, ws).sessionId
        val approval = submit(host, sid)
        assertEquals(300L, approval.expiresAt - approval.createdAt)
        assertTrue(recorder.requested.await(10, TimeUnit.SECONDS), "plan/approvalRequested")
        val requested = recorder.events.filterIsInstance<ServerNotification.PlanApprovalRequested>().single().v1
        assertEquals(approval, requested.approval, "the event carries the record the call returned")
        assertEquals(ApprovalStatus.PENDING, requested.approval.status)
        assertEquals(approval.artifact!!.sha256, requested.approval.artifact!!.sha256)

        // Nobody asks: the host's own timer expires it and tells the listener.
        val testThread = Thread.currentThread().name
        assertTrue(recorder.expired.await(10, TimeUnit.SECONDS), "expiry event from the timer: ${recorder.events}")
        val resolved = recorder.events.filterIsInstance<ServerNotification.PlanApprovalResolved>().single().v1.approval
        assertEquals(approval.id, resolved.id)
        assertEquals(ApprovalStatus.EXPIRED, resolved.status)
        assertEquals(ErrorCode.PLAN_APPROVAL_TIMEOUT, resolved.errorCode)
        assertEquals(1, recorder.expiryThreads.size)
        assertNotEquals(testThread, recorder.expiryThreads.single(), "the expiry arrived on the timer's thread")

        val row = host.planGet(PlanGetParams(approvalId = approval.id))
        assertEquals(resolved, row)
        assertEquals(ApprovalStatus.EXPIRED, row.status)
        assertEquals(ErrorCode.PLAN_APPROVAL_TIMEOUT, row.errorCode)
        assertEquals(approval.expiresAt, row.expiresAt, "the deadline never moves")
        val session = host.sessionGet(SessionGetParams(sessionId = sid))
        assertEquals(Mode.PLAN, session.mode)
        assertNull(session.activeTurn)
        assertNull(session.pendingApprovalId)
        val changed = recorder.await(ServerNotification.SessionChanged::class.java, "the session's change") { it.v1.session.activeTurn == null }.v1
        assertEquals(session, changed.session)
        failed(ErrorCode.PLAN_APPROVAL_TIMEOUT) { host.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = PermissionMode.AUTO)) }
        failed(ErrorCode.PLAN_APPROVAL_TIMEOUT) { host.planReject(PlanRejectParams(approvalId = approval.id)) }
        // The artifact stays readable after expiry.
        assertEquals(markdown, host.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id)).markdown)
    }

    @Test
    @Order(21)
    fun eachEventCarriesTheRecordsTheCallsReturn() {
        val host = open()
        val recorder = Recorder()
        host.addListener(recorder)
        val sid = planSession(host, workspace()).sessionId
        assertEquals(emptyList<ServerNotification>(), recorder.drain(), "a new session is not a change")
        val turn = host.turnStart(TurnStartParams(sessionId = sid, prompt = "", origin = Origin.INTERACTIVE))
        assertEquals(listOf(ServerNotification.SessionChanged(SessionChangedNotification(host.sessionGet(SessionGetParams(sessionId = sid))))), recorder.drain())
        val results = host.turnToolCalls(TurnToolCallsParams(sessionId = sid, turnId = turn.turnId, calls = listOf(call("s", "SubmitPlan", submitInput("T", "v1\n", "Q?"))))).results
        val approval = results.single().approval!!
        assertEquals(
            listOf(ServerNotification.PlanApprovalRequested(PlanApprovalRequestedNotification(approval, null)), ServerNotification.SessionChanged(SessionChangedNotification(host.sessionGet(SessionGetParams(sessionId = sid))))),
            recorder.drain(),
        )

        // Approved: resolved, the execution queued, the session in Agent.
        val decision = host.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = PermissionMode.AUTO))
        val eid = decision.approval.executionId!!
        assertEquals(
            listOf(
                ServerNotification.PlanApprovalResolved(PlanApprovalResolvedNotification(decision.approval)),
                ServerNotification.ExecutionStateChanged(ExecutionStateChangedNotification(sid, eid, ExecutionState.QUEUED)),
                ServerNotification.SessionChanged(SessionChangedNotification(decision.session)),
            ),
            recorder.drain(),
        )
        val resolved = decision.approval
        assertEquals(ApprovalStatus.APPROVED, resolved.status)
        assertEquals(PermissionMode.AUTO, resolved.permissionMode)
        assertEquals(Mode.AGENT, decision.session.mode)
        host.executionStart(ExecutionStartParams(executionId = eid))
        assertEquals(listOf(ServerNotification.ExecutionStateChanged(ExecutionStateChangedNotification(sid, eid, ExecutionState.RUNNING))), recorder.drain())
        host.executionComplete(ExecutionCompleteParams(executionId = eid))
        val idle = host.sessionGet(SessionGetParams(sessionId = sid))
        assertNull(idle.activeExecutionId)
        assertEquals(
            listOf(ServerNotification.ExecutionStateChanged(ExecutionStateChangedNotification(sid, eid, ExecutionState.COMPLETED)), ServerNotification.SessionChanged(SessionChangedNotification(idle))),
            recorder.drain(),
        )

        // Rejected: resolved without an execution, the session back to idle Plan.
        val configured = host.sessionConfigure(SessionConfigureParams(sessionId = sid, mode = Mode.PLAN))
        assertEquals(listOf(ServerNotification.SessionChanged(SessionChangedNotification(configured))), recorder.drain())
        val second = submit(host, sid, body = "v2\n")
        recorder.drain()
        val rejected = host.planReject(PlanRejectParams(approvalId = second.id))
        assertEquals(ApprovalStatus.REJECTED, rejected.approval.status)
        assertNull(rejected.approval.executionId)
        assertEquals(
            listOf(ServerNotification.PlanApprovalResolved(PlanApprovalResolvedNotification(rejected.approval)), ServerNotification.SessionChanged(SessionChangedNotification(rejected.session))),
            recorder.drain(),
        )
        // Calls on the caller's thread are delivered on that thread, in order.
        assertEquals(setOf(Thread.currentThread().name), recorder.threads)
    }

    /** Adds a listener that throws on every event, then a [Recorder] after it. */
    private fun throwingThenRecorder(host: PlanHost): Pair<CountDownLatch, Recorder> {
        val calls = CountDownLatch(1)
        host.addListener(object : PlanEventListener {
            override fun onEvent(event: ServerNotification) {
                calls.countDown()
                // No stack trace: the Rust side prints the failure it catches,
                // and a JUnit stack would flood the build log.
                throw QuietFailure("listener failure on ${event::class.simpleName}")
            }
        })
        val recorder = Recorder()
        host.addListener(recorder)
        return calls to recorder
    }

    @Test
    @Order(22)
    fun aThrowingListenerDoesNotBreakTheHost() {
        val host = open()
        val (calls, recorder) = throwingThenRecorder(host)
        val sid = planSession(host, workspace()).sessionId
        val approval = submit(host, sid)
        assertTrue(calls.await(10, TimeUnit.SECONDS))
        assertTrue(recorder.events.contains(ServerNotification.PlanApprovalRequested(PlanApprovalRequestedNotification(approval, null))), "later listeners still hear it")
        val decision = host.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = PermissionMode.ASK))
        assertEquals(ApprovalStatus.APPROVED, decision.approval.status)
        assertEquals(ServerNotification.PlanApprovalResolved(PlanApprovalResolvedNotification(decision.approval)), recorder.events.filterIsInstance<ServerNotification.PlanApprovalResolved>().single())
    }

    @Test
    @Order(22)
    fun aListenerThrowingAnErrorIsContainedToo() {
        // UniFFI's glue turns an Exception into a call failure; an Error (an
        // assertion, say) passes it by and is caught by JNA's callback
        // handler instead. Either way the host carries on.
        val caught = CopyOnWriteArrayList<Throwable>()
        val previous = com.sun.jna.Native.getCallbackExceptionHandler()
        com.sun.jna.Native.setCallbackExceptionHandler { _, error -> caught.add(error) }
        try {
            val host = open()
            host.addListener(object : PlanEventListener {
                override fun onEvent(event: ServerNotification) = throw QuietError("listener error on ${event::class.simpleName}")
            })
            val recorder = Recorder()
            host.addListener(recorder)
            val approval = submit(host, planSession(host, workspace()).sessionId)
            assertTrue(recorder.events.contains(ServerNotification.PlanApprovalRequested(PlanApprovalRequestedNotification(approval, null))), "later listeners still hear it")
            assertEquals(ApprovalStatus.APPROVED, host.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = PermissionMode.ASK)).approval.status)
            assertTrue(caught.isNotEmpty(), "the error reached JNA's handler")
            assertTrue(caught.all { it is QuietError }, caught.toString())
        } finally {
            com.sun.jna.Native.setCallbackExceptionHandler(previous)
        }
    }

    @Test
    @Order(22)
    fun aListenerThrowingOnTheTimerThreadDoesNotStopTheTimer() {
        val host = open(ttlMs = 300)
        val (_, recorder) = throwingThenRecorder(host)
        val sid = planSession(host, workspace()).sessionId
        for (round in 1..2) {
            val pending = submit(host, sid)
            val expired = recorder.await(ServerNotification.PlanApprovalResolved::class.java, "expiry $round") { it.v1.approval.id == pending.id }.v1
            assertEquals(ApprovalStatus.EXPIRED, expired.approval.status)
            assertEquals(ErrorCode.PLAN_APPROVAL_TIMEOUT, expired.approval.errorCode)
        }
        assertEquals(2, recorder.expiryThreads.size)
    }

    @Test
    @Order(23)
    fun shutdownFromAListenerOnTheTimerThread() {
        val path = db()
        val host = open(path, ttlMs = 200)
        val outcome = java.util.concurrent.atomic.AtomicReference<String>()
        val done = CountDownLatch(1)
        host.addListener(object : PlanEventListener {
            override fun onEvent(event: ServerNotification) {
                if (event !is ServerNotification.PlanApprovalResolved) return
                // On the host's timer thread: shutdown must not try to join it.
                outcome.set(runCatching { host.shutdown() }.fold({ "ok" }, { it.toString() }))
                done.countDown()
            }
        })
        submit(host, planSession(host, workspace()).sessionId)
        assertTrue(done.await(10, TimeUnit.SECONDS))
        assertEquals("ok", outcome.get())
        failed(ErrorCode.HOST_CLOSED) { host.shellList(ShellListParams()) }
        open(path).shellList(ShellListParams()) // the lock was released
    }

    private class QuietFailure(message: String) : RuntimeException(message, null, false, false)

    private class QuietError(message: String) : Error(message, null, false, false)

    // ----------------------------------------------------------------------
    // JSON, shells, configuration

    @Test
    @Order(30)
    fun handleJsonSpeaksProtocolV9() {
        val host = open()
        val early = host.handleJson("""{"jsonrpc":"2.0","id":1,"method":"session/get","params":{"sessionId":"x"}}""")!!
        assertTrue(early.contains("\"code\":\"PROTOCOL_NOT_INITIALIZED\""), early)
        reached.add(ErrorCode.PROTOCOL_NOT_INITIALIZED)

        val wrong = host.handleJson("""{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":8}}""")!!
        assertTrue(wrong.contains("\"PROTOCOL_VERSION_UNSUPPORTED\""), wrong)
        reached.add(ErrorCode.PROTOCOL_VERSION_UNSUPPORTED)

        val init = host.handleJson("""{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":9,"clientName":"kotlin-test"}}""")!!
        assertTrue(init.contains("\"id\":3"), init)
        assertTrue(init.contains("\"protocolVersion\":9"), init)
        assertTrue(init.contains("\"schemaVersion\":10"), init)
        assertTrue(init.contains("\"approvalTtlMs\":1800000"), init)

        val ws = workspace()
        val created = host.handleJson(
            """{"jsonrpc":"2.0","id":4,"method":"session/create","params":{"sessionId":"json-1","workspaceRoot":${quote(ws.toString())},"mode":"plan"}}""",
        )!!
        assertTrue(created.contains("\"sessionId\":\"json-1\""), created)
        assertTrue(created.contains("\"mode\":\"plan\""), created)
        // The JSON connection and the typed API share one host.
        assertEquals(Mode.PLAN, host.sessionGet(SessionGetParams(sessionId = "json-1")).mode)

        val extra = host.handleJson("""{"jsonrpc":"2.0","id":5,"method":"session/get","params":{"sessionId":"json-1","feedback":"x"}}""")!!
        assertTrue(extra.contains("-32602") && extra.contains("\"INVALID_PARAMS\""), extra)
        val missing = host.handleJson("""{"jsonrpc":"2.0","id":6,"method":"session/get","params":{"sessionId":"nope"}}""")!!
        assertTrue(missing.contains("\"SESSION_NOT_FOUND\""), missing)
        val unknown = host.handleJson("""{"jsonrpc":"2.0","id":7,"method":"no/such","params":{}}""")!!
        assertTrue(unknown.contains("-32601"), unknown)
        val parse = host.handleJson("{not json")!!
        assertTrue(parse.contains("-32700"), parse)
        val shells = host.handleJson("""{"jsonrpc":"2.0","id":8,"method":"shell/list","params":{}}""")!!
        assertTrue(shells.contains("\"shells\""), shells)
        // A client notification gets no answer.
        assertNull(host.handleJson("""{"jsonrpc":"2.0","method":"initialized","params":{}}"""))
        // Each PlanHost has its own connection: a fresh host starts uninitialized.
        val other = open(db("other.db"))
        val fresh = other.handleJson("""{"jsonrpc":"2.0","id":1,"method":"shell/list","params":{}}""")!!
        assertTrue(fresh.contains("\"PROTOCOL_NOT_INITIALIZED\""), fresh)
    }

    @Test
    @Order(31)
    fun shellsAndConfiguration() {
        val path = db()
        val host = open(path)
        val catalog = host.shellList(ShellListParams())
        val ids = catalog.shells.map { it.id }
        assertTrue(ids.containsAll(listOf("bash", "sh")), ids.toString())
        assertTrue(catalog.shells.first { it.id == "sh" }.available, "/bin/sh exists")
        assertTrue(catalog.defaultShell in ids)
        assertEquals("sh", host.shellSetDefault(ShellSetDefaultParams(shellId = "sh")).defaultShell)
        assertEquals("sh", host.shellList(ShellListParams()).defaultShell)

        val sid = host.sessionCreate(SessionCreateParams(sessionId = "cfg", workspaceRoot = null, mode = null, permissionMode = null)).sessionId
        val configured = host.sessionConfigure(
            SessionConfigureParams(
                sessionId = sid,
                mode = Mode.PLAN,
                permissionMode = PermissionMode.ACCEPT_EDITS,
                provider = Clearable.Set("anthropic"),
                model = Clearable.Set("claude"),
                shell = Clearable.Set("bash"),
            ),
        )
        assertEquals(Mode.PLAN, configured.mode)
        assertEquals(PermissionMode.ACCEPT_EDITS, configured.permissionMode)
        assertEquals("anthropic", configured.provider)
        assertEquals("claude", configured.model)
        assertEquals("bash", configured.shell)
        // Absent fields leave the rest as it is.
        val partly = host.sessionConfigure(SessionConfigureParams(sessionId = sid, mode = Mode.AGENT))
        assertEquals(configured.copy(mode = Mode.AGENT), partly)
        // Clearing sets a field back to none; the shell returns to the default.
        val cleared = host.sessionConfigure(
            SessionConfigureParams(sessionId = sid, provider = Clearable.Clear, model = Clearable.Clear, shell = Clearable.Clear),
        )
        assertEquals(partly.copy(provider = null, model = null, shell = null), cleared)
        val restored = host.sessionConfigure(
            SessionConfigureParams(
                sessionId = sid,
                provider = Clearable.Set("anthropic"),
                model = Clearable.Set("claude"),
                shell = Clearable.Set("bash"),
            ),
        )
        assertEquals(partly, restored)

        host.shutdown()
        val again = open(path)
        assertEquals("sh", again.shellList(ShellListParams()).defaultShell, "the default shell is persisted")
        assertEquals(partly, again.sessionGet(SessionGetParams(sessionId = sid)), "configuration is persisted")
    }

    // ----------------------------------------------------------------------
    // Threads

    @Test
    @Order(40)
    fun concurrentLifecyclesFromEightThreads() {
        val host = open()
        val recorder = Recorder()
        host.addListener(recorder)
        val threads = 8
        val rounds = 3
        val barrier = CyclicBarrier(threads)
        val pool = Executors.newFixedThreadPool(threads)
        try {
            val futures = (0 until threads).map { n ->
                pool.submit<List<String>> {
                    val ws = workspace("ws-$n")
                    val sid = planSession(host, ws, "thread-$n").sessionId
                    barrier.await(10, TimeUnit.SECONDS)
                    (0 until rounds).map { round ->
                        host.sessionConfigure(SessionConfigureParams(sessionId = sid, mode = Mode.PLAN))
                        val approval = submit(host, sid, title = "t$n-$round", body = "plan $n/$round\n")
                        assertEquals("plan $n/$round\n", host.planReadArtifact(PlanReadArtifactParams(approvalId = approval.id)).markdown)
                        host.shellList(ShellListParams())
                        host.planList(ApprovalFilter(null, null, 5u)).approvals
                        val mode = PermissionMode.values()[(n + round) % 3]
                        val eid = host.planApprove(PlanApproveParams(approvalId = approval.id, permissionMode = mode)).approval.executionId!!
                        host.executionStart(ExecutionStartParams(executionId = eid))
                        assertEquals(ExecutionState.COMPLETED, host.executionComplete(ExecutionCompleteParams(executionId = eid)).executionState)
                        assertFailsWithCode(ErrorCode.SESSION_NOT_FOUND) { host.sessionGet(SessionGetParams(sessionId = "missing-$n")) }
                        approval.id
                    }
                }
            }
            val ids = futures.flatMap { it.get(60, TimeUnit.SECONDS) }
            assertEquals(threads * rounds, ids.toSet().size)
        } finally {
            pool.shutdownNow()
        }
        val all = host.planList(ApprovalFilter(null, ApprovalStatus.APPROVED, null)).approvals
        assertEquals(threads * rounds, all.size)
        assertTrue(all.all { it.executionState == ExecutionState.COMPLETED })
        assertEquals(threads * rounds, recorder.events.count { it is ServerNotification.PlanApprovalRequested })
        for (n in 0 until threads) {
            val session = host.sessionGet(SessionGetParams(sessionId = "thread-$n"))
            assertNull(session.activeTurn)
            assertEquals(Mode.AGENT, session.mode)
        }
    }

    @Test
    @Order(60)
    fun verifyAndDiffAreLibraryOperations() {
        val host = open()
        val ws = workspace("review")
        val sid = planSession(host, ws).sessionId
        val first = submit(host, sid, "Plan", "# Plan\n\n1. Read.\n2. Split.\n")
        host.planReject(PlanRejectParams(approvalId = first.id))
        // "Previous" is by (createdAt, id); ids are ordered by creation.
        val second = submit(host, sid, "Plan", "# Plan\n\n1. Read.\n2. Split in two.\n")

        val everything = host.planVerify(PlanVerifyParams(approvalId = null, sessionId = null))
        assertTrue(everything.ok)
        assertEquals(setOf(first.id, second.id), everything.artifacts.map { it.approvalId }.toSet())
        assertTrue(everything.artifacts.all { it.result == ArtifactCheck.OK && it.errorCode == null })

        // An orphan fails the session's verification, not one approval's.
        Files.writeString(ws.resolve(".pi/plan/stray.md"), "# stray\n")
        val bySession = host.planVerify(PlanVerifyParams(approvalId = null, sessionId = sid))
        assertFalse(bySession.ok)
        assertEquals(listOf(".pi/plan/stray.md"), bySession.orphans.map { it.path })
        val one = host.planVerify(PlanVerifyParams(approvalId = second.id, sessionId = null))
        assertTrue(one.ok)
        assertTrue(one.orphans.isEmpty())
        failed(ErrorCode.INVALID_PARAMS) { host.planVerify(PlanVerifyParams(approvalId = second.id, sessionId = sid)) }

        val diff = host.planDiff(PlanDiffParams(approvalId = second.id, againstApprovalId = null))
        assertEquals(first.id, diff.againstApprovalId)
        assertFalse(diff.identical)
        assertTrue(diff.unified!!.contains("-2. Split.\n+2. Split in two.\n"), diff.unified)
        val firstDiff = host.planDiff(PlanDiffParams(approvalId = first.id, againstApprovalId = null))
        assertNull(firstDiff.againstApprovalId)
        assertNull(firstDiff.unified)
        assertTrue(host.planDiff(PlanDiffParams(approvalId = second.id, againstApprovalId = second.id)).identical)

        Files.writeString(ws.resolve(first.artifact!!.path), "tampered\n")
        val tampered = host.planVerify(PlanVerifyParams(approvalId = first.id, sessionId = null))
        assertFalse(tampered.ok)
        assertEquals(ArtifactCheck.MISMATCH, tampered.artifacts.single().result)
        assertEquals(ErrorCode.ARTIFACT_INTEGRITY_MISMATCH, tampered.artifacts.single().errorCode)
        failed(ErrorCode.ARTIFACT_INTEGRITY_MISMATCH) { host.planDiff(PlanDiffParams(approvalId = second.id, againstApprovalId = null)) }

        // The typed codes are the wire's codes, one for one.
        for (code in ErrorCode.values()) {
            assertEquals(code.name, errorCodeWireName(code))
        }
    }

    private fun assertFailsWithCode(code: ErrorCode, block: () -> Unit) {
        assertEquals(code, assertThrows<PlanException.Failed> { block() }.code)
    }

    // ----------------------------------------------------------------------
    // Host-run commands

    /** A host using the helper an app ships; generate.sh puts it beside the library. */
    private fun openWithHelper(): PlanHost {
        val helper = Path.of(System.getProperty("user.dir")).resolve("../native/plan-exec-sandbox").normalize()
        return PlanHost(db(), HostConfig(null, null, sandboxHelper = helper.toString())).also { opened.add(it) }
    }

    /** Waits (bounded) for the end of [callId]; returns its output events and its end. */
    private fun commandEvents(recorder: Recorder, callId: String): Pair<List<CommandOutputNotification>, CommandExitedNotification> {
        val exited = recorder.await(ServerNotification.CommandExited::class.java, "the end of $callId") { it.v1.callId == callId }.v1
        val outputs = recorder.events.filterIsInstance<ServerNotification.CommandOutput>().map { it.v1 }.filter { it.callId == callId }
        return outputs to exited
    }

    @Test
    @Order(61)
    fun planCommandRunsReadOnlyAndAWriteIsRefusedByTheKernel() {
        val host = openWithHelper()
        val ws = workspace()
        Files.writeString(ws.resolve("notes.txt"), "plan me\n")
        val recorder = Recorder()
        host.addListener(recorder)
        planSession(host, ws, "cmd")
        val turn = host.turnStart(TurnStartParams(sessionId = "cmd", prompt = "", origin = Origin.INTERACTIVE))
        val input = "{\"command\": \"cat notes.txt; echo x > written.txt\"}"
        val results = host.turnToolCalls(TurnToolCallsParams(sessionId = "cmd", turnId = turn.turnId, calls = listOf(call("c1", "Bash", input)))).results
        val info = host.sandboxInfo()
        if (info.planSandbox != PlanSandbox.LANDLOCK) {
            println("the kernel sandbox is unavailable here (${info.reason}); asserting PLAN_SANDBOX_UNAVAILABLE")
            denied(results[0], ErrorCode.PLAN_SANDBOX_UNAVAILABLE)
            return
        }
        assertEquals(ToolCallDecision.ALLOW, results[0].decision)
        assertEquals(CommandSandbox.READ_ONLY, results[0].command!!.sandbox)
        assertEquals(false, results[0].command!!.network)
        val (outputs, exited) = commandEvents(recorder, "c1")
        assertEquals(CommandState.EXITED, exited.command.state)
        assertNotEquals(0, exited.command.exitCode, "the refused write fails the command")
        assertEquals("plan me\n", outputs.filter { it.stream == OutputStream.STDOUT }.joinToString("") { it.chunk })
        assertFalse(Files.exists(ws.resolve("written.txt")), "the kernel refused the write")
        assertEquals(exited.command, host.commandGet(CommandGetParams(sessionId = "cmd", callId = "c1")))
        failed(ErrorCode.COMMAND_NOT_FOUND) { host.commandGet(CommandGetParams(sessionId = "cmd", callId = "nope")) }
        failed(ErrorCode.COMMAND_NOT_ALLOWED) { host.commandStart(CommandStartParams(sessionId = "cmd", turnId = turn.turnId, callId = "c1", command = "ls", cwd = null, timeoutMs = null)) }
        host.turnComplete(TurnCompleteParams(sessionId = "cmd", turnId = turn.turnId))
    }

    @Test
    @Order(62)
    fun agentCommandOutputAndExitArriveAsTypedEvents() {
        // Under ask the Bash call awaits a person (toolConfirm), then runs on
        // the host in the workspace-write sandbox, with the text it was
        // decided with.
        val host = openWithHelper()
        val recorder = Recorder()
        host.addListener(recorder)
        host.sessionCreate(SessionCreateParams(sessionId = "agent", workspaceRoot = workspace().toString(), mode = Mode.AGENT, permissionMode = null))
        val turn = host.turnStart(TurnStartParams(sessionId = "agent", prompt = "", origin = Origin.INTERACTIVE))
        val command = "printf out; printf err >&2"
        val asked = host.turnToolCalls(TurnToolCallsParams(sessionId = "agent", turnId = turn.turnId, calls = listOf(call("b1", "Bash", "{\"command\": ${quote(command)}, \"timeoutMs\": 10000}")))).results.single()
        assertEquals(ToolCallDecision.CONFIRM, asked.decision)
        assertEquals(true, asked.hostRun)
        failed(ErrorCode.COMMAND_NOT_ALLOWED) { host.commandStart(CommandStartParams(sessionId = "agent", turnId = turn.turnId, callId = "b1", command = command, cwd = null, timeoutMs = 10_000uL)) }
        val confirmed = host.toolConfirm(ToolConfirmParams(sessionId = "agent", turnId = turn.turnId, callId = "b1", allow = true))
        assertEquals(ToolCallDecision.ALLOW, confirmed.decision)
        assertEquals(true, confirmed.hostRun)
        failed(ErrorCode.TOOL_CONFIRMATION_NOT_PENDING) { host.toolConfirm(ToolConfirmParams(sessionId = "agent", turnId = turn.turnId, callId = "b1", allow = false)) }
        recorder.drain()
        if (host.sandboxInfo().planSandbox != PlanSandbox.LANDLOCK) {
            failed(ErrorCode.SANDBOX_UNAVAILABLE) { host.commandStart(CommandStartParams(sessionId = "agent", turnId = turn.turnId, callId = "b1", command = command, cwd = null, timeoutMs = 10_000uL)) }
            return
        }
        val run = host.commandStart(CommandStartParams(sessionId = "agent", turnId = turn.turnId, callId = "b1", command = command, cwd = null, timeoutMs = 10_000uL))
        assertEquals(CommandSandbox.WORKSPACE_WRITE, run.sandbox)
        assertEquals(CommandState.RUNNING, run.state)
        val (outputs, exited) = commandEvents(recorder, "b1")
        assertTrue(outputs.all { it.sessionId == "agent" }, outputs.toString())
        assertEquals(outputs.indices.map { it.toULong() }, outputs.map { it.seq }, "seq counts from 0 across streams")
        assertEquals("out", outputs.filter { it.stream == OutputStream.STDOUT }.joinToString("") { it.chunk })
        assertEquals("err", outputs.filter { it.stream == OutputStream.STDERR }.joinToString("") { it.chunk })
        assertEquals("agent", exited.sessionId)
        assertEquals(CommandState.EXITED, exited.command.state)
        assertEquals(0, exited.command.exitCode)
        assertEquals(3uL, exited.command.stdoutBytes)
        assertEquals(3uL, exited.command.stderrBytes)
        assertEquals(exited.command, host.commandGet(CommandGetParams(sessionId = "agent", callId = "b1")))
        assertEquals(ServerNotification.CommandExited(exited), recorder.events.last(), "nothing of the call after its end")
        host.turnComplete(TurnCompleteParams(sessionId = "agent", turnId = turn.turnId))
    }

    // ----------------------------------------------------------------------
    // Coverage audit (runs last when the whole class runs)

    @Test
    @Order(Int.MAX_VALUE)
    fun everyCanonicalCodeWasReached() {
        val missing = CANONICAL.filterNot { it in reached }
        assertTrue(missing.isEmpty(), "codes no test reached: $missing")
    }

    companion object {
        /** Codes a test observed, across the class. */
        val reached: MutableSet<ErrorCode> = ConcurrentHashMap.newKeySet()

        /** Every canonical code the FFI can surface. */
        val CANONICAL = listOf(
            ErrorCode.SESSION_NOT_FOUND, ErrorCode.SESSION_ALREADY_EXISTS, ErrorCode.SESSION_BUSY, ErrorCode.SESSION_NOT_PROJECT_BOUND,
            ErrorCode.PLAN_REQUIRES_INTERACTIVE_SESSION, ErrorCode.PLAN_NOT_ACTIVE, ErrorCode.SUBMIT_PLAN_NOT_ALONE, ErrorCode.INVALID_PLAN_INPUT,
            ErrorCode.TOOL_DENIED_IN_PLAN, ErrorCode.TURN_NOT_ACTIVE, ErrorCode.APPROVAL_NOT_FOUND, ErrorCode.APPROVAL_NOT_PENDING,
            ErrorCode.PERMISSION_MODE_REQUIRED, ErrorCode.PLAN_APPROVAL_TIMEOUT, ErrorCode.ARTIFACT_SYMLINK, ErrorCode.ARTIFACT_WRITE_FAILED,
            ErrorCode.ARTIFACT_MISSING, ErrorCode.ARTIFACT_INTEGRITY_MISMATCH, ErrorCode.EXECUTION_NOT_FOUND, ErrorCode.EXECUTION_NOT_ACTIVE,
            ErrorCode.EXECUTION_CANCELLED, ErrorCode.HOST_RESTARTED, ErrorCode.HOST_ALREADY_RUNNING, ErrorCode.HOST_CLOSED, ErrorCode.SHELL_UNKNOWN,
            ErrorCode.INVALID_PARAMS, ErrorCode.SCHEMA_UNSUPPORTED, ErrorCode.DATABASE_UNREADABLE, ErrorCode.PROTOCOL_NOT_INITIALIZED,
            ErrorCode.PROTOCOL_VERSION_UNSUPPORTED,
        )
    }
}
