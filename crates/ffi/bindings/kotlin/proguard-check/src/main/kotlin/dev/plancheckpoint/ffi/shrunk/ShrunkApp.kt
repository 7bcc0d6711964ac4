package dev.plancheckpoint.ffi.shrunk

import dev.plancheckpoint.ffi.Mode
import dev.plancheckpoint.ffi.Origin
import dev.plancheckpoint.ffi.PermissionMode
import dev.plancheckpoint.ffi.PlanApproveParams
import dev.plancheckpoint.ffi.PlanEventListener
import dev.plancheckpoint.ffi.PlanException
import dev.plancheckpoint.ffi.PlanHost
import dev.plancheckpoint.ffi.HostConfig
import dev.plancheckpoint.ffi.ServerNotification
import dev.plancheckpoint.ffi.SessionCreateParams
import dev.plancheckpoint.ffi.ToolCall
import dev.plancheckpoint.ffi.ToolCallDecision
import dev.plancheckpoint.ffi.TurnStartParams
import dev.plancheckpoint.ffi.TurnToolCallsParams
import dev.plancheckpoint.ffi.ErrorCode
import java.nio.file.Files
import java.util.concurrent.CopyOnWriteArrayList
import kotlin.system.exitProcess

/**
 * A small app that the build shrinks, optimizes and obfuscates with ProGuard
 * under the jar's own keep rules (META-INF/proguard/plan-checkpoint-ffi.pro),
 * then runs: it goes through one plan's lifecycle and touches what JNA reaches
 * by name (structures, callbacks, the registered native functions) and what
 * the bindings convert (records, enums, errors). If the rules let ProGuard
 * rename or remove anything JNA needs, the first native call fails and this
 * exits non-zero.
 */
fun main() {
    val failures = mutableListOf<String>()
    fun check(condition: Boolean, what: String) {
        if (!condition) failures.add(what)
    }

    val dir = Files.createTempDirectory("plan-shrunk-app")
    try {
        val workspace = Files.createDirectories(dir.resolve("ws"))
        val events = CopyOnWriteArrayList<String>()
        val host = PlanHost(dir.resolve("plan.db").toString(), HostConfig())
        host.addListener(object : PlanEventListener {
            override fun onEvent(event: ServerNotification) {
                when (event) {
                    is ServerNotification.PlanApprovalRequested -> events.add("approvalRequested")
                    is ServerNotification.PlanApprovalResolved -> events.add("approvalResolved")
                    else -> {}
                }
            }
        })
        val session = host.sessionCreate(SessionCreateParams(sessionId = null, workspaceRoot = workspace.toString(), mode = Mode.PLAN, permissionMode = null))
        val turn = host.turnStart(TurnStartParams(sessionId = session.sessionId, prompt = "", origin = Origin.INTERACTIVE))
        val input = """{"title":"Shrunk","markdown":"# Plan\n1. Check the keep rules","question":"Go?"}"""
        val result = host.turnToolCalls(TurnToolCallsParams(sessionId = session.sessionId, turnId = turn.turnId, calls = listOf(ToolCall("c1", "SubmitPlan", input)))).results.single()
        check(result.decision == ToolCallDecision.ALLOW, "SubmitPlan was not allowed: ${result.error?.code}")
        val approvalId = result.approval?.id
        if (approvalId != null) {
            host.planApprove(PlanApproveParams(approvalId = approvalId, permissionMode = PermissionMode.ASK))
            try {
                host.planApprove(PlanApproveParams(approvalId = approvalId, permissionMode = PermissionMode.ASK))
                failures.add("a second approve succeeded")
            } catch (error: PlanException.Failed) {
                check(error.code == ErrorCode.APPROVAL_NOT_PENDING, "a second approve failed with ${error.code}")
            }
        }
        host.shutdown()
        host.close()
        check("approvalRequested" in events, "the listener missed ApprovalRequested: $events")
        check("approvalResolved" in events, "the listener missed ApprovalResolved: $events")
    } finally {
        dir.toFile().deleteRecursively()
    }

    if (failures.isEmpty()) {
        println("shrunk app: passed (a plan's lifecycle, listener events and a typed error, after ProGuard with the jar's keep rules)")
    } else {
        failures.forEach { System.err.println("shrunk app: $it") }
        exitProcess(1)
    }
}
