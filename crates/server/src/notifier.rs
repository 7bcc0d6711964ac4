//! Runs the person's notifier ([`plan_host::HostOptions::notifier`]) once
//! for each plan that becomes pending, with a [`PendingPlanNotice`] (the
//! card URL in it when the web card is on) on its stdin, so the URL reaches
//! the person's phone without being copied from a terminal.
//!
//! Each run gets a thread of its own and plan-exec's limits: the listener
//! only starts the thread, so a notifier that fails, hangs or floods its
//! output never delays a decision, a deadline or another notification. The
//! token in the URL goes to the notifier alone; what is logged of a run
//! names the approval, never the URL. This module decides nothing about
//! approvals; it reports them.

use std::sync::{Arc, Weak};

use plan_core::PlanApproval;
use plan_host::{Host, HostEvent, NOTIFIER_LIMIT};
use plan_protocol::PendingPlanNotice;

use crate::web::WebCard;

/// Registers the listener that runs `host`'s notifier, if it has one.
/// `web` is the card server started for it, whose card URL the notice
/// carries; both are held weakly, so neither is kept alive by this.
pub fn start_for(host: &Arc<Host>, web: Option<&Arc<WebCard>>) {
    let Some(command) = host.notifier().map(str::to_owned) else {
        return;
    };
    let command: Arc<str> = Arc::from(command);
    let weak_host = Arc::downgrade(host);
    let web = web.map(Arc::downgrade);
    host.add_listener(Arc::new(move |event: HostEvent| {
        let HostEvent::ApprovalRequested(approval) = event else {
            return;
        };
        let (command, host, web) = (Arc::clone(&command), weak_host.clone(), web.clone());
        let started = std::thread::Builder::new()
            .name("plan-notifier".into())
            .spawn(move || notify(&command, &host, web.as_ref(), &approval));
        if started.is_err() {
            crate::log::line("plan-checkpoint: the notifier could not be started (no thread)");
        }
    }));
}

/// One run, on its own thread.
fn notify(command: &str, host: &Weak<Host>, web: Option<&Weak<WebCard>>, approval: &PlanApproval) {
    let Some(notice) = notice_of(host, web, approval) else {
        return;
    };
    let Ok(message) = serde_json::to_vec(&notice) else {
        return;
    };
    let outcome = plan_exec::run_notifier(command, &message, NOTIFIER_LIMIT);
    let failure = match outcome {
        plan_exec::NotifierOutcome::Exited(0) => return,
        plan_exec::NotifierOutcome::Exited(code) => format!("exited with status {code}"),
        plan_exec::NotifierOutcome::Signalled(signal) => format!("was ended by signal {signal}"),
        plan_exec::NotifierOutcome::TimedOut => format!(
            "was still running after {} s and was killed",
            NOTIFIER_LIMIT.as_secs()
        ),
        plan_exec::NotifierOutcome::FailedToStart(reason) => format!("could not start: {reason}"),
    };
    crate::log::line(&format!(
        "plan-checkpoint: the notifier for approval {} {failure}",
        approval.id
    ));
}

/// The notice of a pending approval with an artifact; `None` once the host
/// is gone.
fn notice_of(
    host: &Weak<Host>,
    web: Option<&Weak<WebCard>>,
    approval: &PlanApproval,
) -> Option<PendingPlanNotice> {
    approval.artifact.as_ref()?;
    let host = host.upgrade()?;
    let root = host
        .session(&approval.session_id)
        .ok()
        .and_then(|state| state.session.workspace_root);
    // Read again from the host: a plan decided before this thread ran gets
    // no new token (and no URL).
    let card_url = web
        .and_then(Weak::upgrade)
        .and_then(|web| web.card_url_of(&approval.id).ok());
    crate::web::pending_plan_notice(approval, root.as_deref(), card_url)
}
