//! Which request gets which answer: the Host and Origin checks, the
//! page, the element, the state, the status the card polls and decisions.
//! Every decision goes to the host; this module only checks that the
//! request carries a live token for the approval it names.

use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use plan_core::{ApprovalId, ApprovalStatus, ErrorCode, PlanApproval};
use plan_host::{DecisionChannel, DecisionSource, HostError};
use plan_protocol::{
    CardDecided, CardDecision, CardDecisionKind, CardPlan, CardRefusal, CardState, PermissionModeSummary,
};

use super::cards::{Binding, Token, status_of};
use super::http::{self, Request, Response};
use super::{REQUEST_DEADLINE, Shared, WRITE_TIMEOUT};

/// The custom element, as the TypeScript client builds it (committed, so
/// that building this crate needs no Node).
pub(crate) const CARD_SCRIPT: &str = include_str!("../../assets/plan-approval-card.js");

/// The path of the element's script.
const SCRIPT_PATH: &str = "/plan-approval-card.js";

/// Serves the one request of a connection; `true` when it showed a card's
/// token (a card's route or a decision answered with success), which makes
/// its peer one the server keeps room for.
pub(crate) fn serve_connection(shared: &Shared, mut stream: TcpStream) -> bool {
    let Ok(peer) = stream.peer_addr() else {
        return false;
    };
    if stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err() {
        return false;
    }
    let (response, showed_token) = match http::read_request(&mut stream, Instant::now() + REQUEST_DEADLINE) {
        Ok(request) => {
            let response = route(shared, &request, peer);
            let token_route = request.target.starts_with("/card/") || request.target == "/decision";
            let showed_token = token_route && (200..300).contains(&response.status);
            (response, showed_token)
        }
        Err(refusal) => (Response::plain(refusal.status), false),
    };
    // A client that does not read is given up on after the write timeout;
    // there is nobody to tell.
    let _ = http::write_response(&mut stream, &response);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    showed_token
}

fn route(shared: &Shared, request: &Request, peer: SocketAddr) -> Response {
    if let Err(response) = check_origin(shared, request) {
        return response;
    }
    let path = request.target.as_str();
    match (request.method.as_str(), path) {
        ("GET", SCRIPT_PATH) => Response::new(200, "text/javascript; charset=utf-8", CARD_SCRIPT),
        ("POST", "/decision") => decide(shared, request, peer),
        (_, "/decision") => Response::plain(405),
        ("GET", _) => match card_path(path) {
            Some((token, CardRoute::Page)) => page(shared, token),
            Some((token, CardRoute::State)) => state(shared, token),
            Some((token, CardRoute::Status)) => status(shared, token),
            None => Response::plain(404),
        },
        _ => Response::plain(404),
    }
}

/// `Host` must name the bound address (a DNS-rebound name is refused);
/// `Origin`, when present, must be the page's own, and a `POST` must carry
/// it.
fn check_origin(shared: &Shared, request: &Request) -> Result<(), Response> {
    let host = request
        .single_header("host")
        .map_err(|refusal| Response::plain(refusal.status))?;
    if host != Some(shared.authority.as_str()) {
        return Err(Response::plain(421));
    }
    let origin = request
        .single_header("origin")
        .map_err(|refusal| Response::plain(refusal.status))?;
    match origin {
        Some(origin) if origin != shared.origin => Err(Response::plain(403)),
        None if request.method == "POST" => Err(Response::plain(403)),
        Some(_) | None => Ok(()),
    }
}

enum CardRoute {
    Page,
    State,
    Status,
}

/// `/card/<token>`, `/card/<token>/state`, `/card/<token>/status`.
fn card_path(path: &str) -> Option<(&str, CardRoute)> {
    let rest = path.strip_prefix("/card/")?;
    match rest.split_once('/') {
        None => Some((rest, CardRoute::Page)),
        Some((token, "state")) => Some((token, CardRoute::State)),
        Some((token, "status")) => Some((token, CardRoute::Status)),
        Some(_) => None,
    }
}

/// The token's binding and the approval it names, when the token is live:
/// known, unspent, and its approval still pending (the host expires an
/// overdue one first) with the same artifact and deadline.
fn live(shared: &Shared, token: &str) -> Option<(Token, Binding, PlanApproval)> {
    if shared.host.is_closed() || shared.cards().is_stopped() {
        return None;
    }
    let token = Token::parse(token)?;
    let binding = shared.cards().binding(&token)?;
    let approval = shared.host.approval(&binding.approval_id).ok()?.approval;
    let same_artifact = approval
        .artifact
        .as_ref()
        .is_some_and(|artifact| artifact.sha256 == binding.sha256);
    if approval.status != ApprovalStatus::Pending
        || !same_artifact
        || approval.expires_at != binding.expires_at
    {
        return None;
    }
    Some((token, binding, approval))
}

/// The approval a token may show: a live token's, or a decided card's
/// (read-only: such a token decides nothing). `None` for anything else.
fn readable(shared: &Shared, token: &str) -> Option<(Token, PlanApproval)> {
    if let Some((token, _, approval)) = live(shared, token) {
        return Some((token, approval));
    }
    if shared.host.is_closed() {
        return None;
    }
    let token = Token::parse(token)?;
    let approval_id = shared.cards().decided_approval(&token)?;
    let approval = shared.host.approval(&approval_id).ok()?.approval;
    Some((token, approval))
}

fn page(shared: &Shared, token: &str) -> Response {
    let Some((token, approval)) = readable(shared, token) else {
        return Response::plain(404);
    };
    // The token is 64 hex digits: nothing in it needs escaping.
    let html = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n<meta name=\"color-scheme\" content=\"light dark\">\n\
         <title>Plan approval</title>\n\
         <script type=\"module\" src=\"{SCRIPT_PATH}\"></script>\n</head>\n<body>\n\
         {}\
         <plan-approval-card card-url=\"/card/{}\"></plan-approval-card>\n</body>\n</html>\n",
        without_script(shared, &approval),
        token.to_hex()
    );
    Response::new(200, "text/html; charset=utf-8", html)
}

/// What the page shows with JavaScript off (`<noscript>`): the plan's
/// title, question and text as the host read it after its size and hash
/// check, its status, its deadline (absolute, in UTC: without a script the
/// page cannot know the viewer's zone, and a countdown would stand still)
/// and the file that binds the decision, all as text (HTML-escaped, and
/// terminal controls shown escaped as the card and the CLI show them: the
/// agent wrote them). Deciding needs the card's script.
fn without_script(shared: &Shared, approval: &PlanApproval) -> String {
    let text = |text: &str, keep_lines: bool| html_text(text, keep_lines);
    let plan = match plan_check(shared, &approval.id) {
        CardPlan {
            ok: true,
            markdown: Some(markdown),
            ..
        } => format!("<pre>{}</pre>\n", text(&markdown, true)),
        CardPlan {
            error_code, message, ..
        } => format!(
            "<p><strong>The plan failed the host's integrity check ({}): {}. It cannot be approved.</strong></p>\n",
            error_code.map_or("unknown", ErrorCode::as_str),
            text(message.as_deref().unwrap_or_default(), false)
        ),
    };
    let status = status_of(approval);
    let status = match (status.status, status.permission_mode) {
        (ApprovalStatus::Approved, Some(mode)) => format!("approved ({mode})"),
        (other, _) => other.to_string(),
    };
    let file = approval.artifact.as_ref().map_or_else(String::new, |artifact| {
        let artifact = super::card_artifact(artifact);
        format!(
            "<p>Plan file: {}, {} bytes, {}</p>\n",
            text(&artifact.file_name, false),
            artifact.size,
            text(&artifact.fingerprint, false)
        )
    });
    let (deadline_iso, deadline) = utc_time(approval.expires_at);
    format!(
        "<noscript>\n<h1>{}</h1>\n<p>{}</p>\n<p>Status: {status}</p>\n\
         <p>Deadline: <time datetime=\"{deadline_iso}\">{deadline}</time></p>\n{file}{plan}\
         <p>Approving or rejecting on this page needs JavaScript: turn it on for this page, or decide \
         where the agent runs.</p>\n</noscript>\n",
        text(&approval.title, false),
        text(&approval.question, false),
    )
}

/// A time in milliseconds since the Unix epoch as RFC 3339 in UTC (for a
/// `<time datetime>`) and as people read it (`2027-01-15 08:30:00 UTC`),
/// to the second (the deadline's fraction is cut, never rounded up).
fn utc_time(unix_ms: i64) -> (String, String) {
    let time = plan_core::UtcTime::from_unix_ms(unix_ms);
    let rfc3339 = time.rfc3339();
    let shown = format!("{} UTC", rfc3339.trim_end_matches('Z').replacen('T', " ", 1));
    (rfc3339, shown)
}

/// Agent text as HTML text: `&`, `<`, `>` and quotes as entities, terminal
/// controls as `\x1b` / `\u202e` (line breaks kept in a block, CRLF as one).
fn html_text(text: &str, keep_lines: bool) -> String {
    let text = if keep_lines {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' if keep_lines => out.push(c),
            c if plan_core::is_terminal_control(c) => {
                let code = u32::from(c);
                if code <= 0xff {
                    out.push_str(&format!("\\x{code:02x}"));
                } else {
                    out.push_str(&format!("\\u{code:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// `GET /card/<token>/status`: the approval's status now, for a card that
/// polls (one short request at a time, so any number of cards share a
/// browser's few connections per host).
fn status(shared: &Shared, token: &str) -> Response {
    match readable(shared, token) {
        Some((_, approval)) => Response::json(200, &status_of(&approval)),
        None => Response::plain(404),
    }
}

fn state(shared: &Shared, token: &str) -> Response {
    let Some((_, approval)) = readable(shared, token) else {
        return Response::plain(404);
    };
    let Some(artifact) = approval.artifact.as_ref() else {
        return Response::plain(404);
    };
    let project = shared
        .host
        .session(&approval.session_id)
        .ok()
        .and_then(|state| state.session.workspace_root)
        .map(|root| super::project_name(&root));
    let state = CardState {
        approval_id: approval.id.to_string(),
        title: approval.title.clone(),
        question: approval.question.clone(),
        created_at: approval.created_at,
        expires_at: approval.expires_at,
        status: status_of(&approval),
        project,
        artifact: super::card_artifact(artifact),
        plan: plan_check(shared, &approval.id),
        permission_modes: PermissionModeSummary::all(),
    };
    Response::json(200, &state)
}

/// The plan as the host reads it now: after its size and hash check, or
/// what that check found.
fn plan_check(shared: &Shared, approval_id: &ApprovalId) -> CardPlan {
    match shared.host.read_artifact(approval_id) {
        Ok(content) => CardPlan {
            ok: true,
            markdown: Some(content.markdown),
            error_code: None,
            message: None,
        },
        Err(error) => CardPlan {
            ok: false,
            markdown: None,
            error_code: Some(error.code()),
            message: Some(error.message()),
        },
    }
}

fn decide(shared: &Shared, request: &Request, peer: SocketAddr) -> Response {
    let json_body = request
        .single_header("content-type")
        .ok()
        .flatten()
        .is_some_and(|kind| {
            kind.split(';')
                .next()
                .is_some_and(|kind| kind.trim() == "application/json")
        });
    if !json_body {
        return Response::plain(415);
    }
    let Ok(body) = serde_json::from_slice::<CardDecision>(&request.body) else {
        return Response::plain(400);
    };
    // A rejection grants nothing, so it names no mode (as `plan/reject`).
    if matches!(body.decision, CardDecisionKind::Reject) && body.permission_mode.is_some() {
        return Response::plain(400);
    }
    let Some((token, binding, _)) = live(shared, &body.token) else {
        return Response::plain(404);
    };
    // The decision must be about the artifact the card showed.
    if body.sha256 != binding.sha256 {
        return Response::plain(404);
    }
    // Only the first decision with a token reaches the host.
    if shared.cards().spend(&token).is_none() {
        return Response::plain(404);
    }
    let source = DecisionSource {
        channel: DecisionChannel::WebCard,
        remote_address: peer.to_string(),
    };
    let decided = match body.decision {
        CardDecisionKind::Approve => {
            shared
                .host
                .approve_noted(&binding.approval_id, body.permission_mode, &source)
        }
        CardDecisionKind::Reject => shared.host.reject_noted(&binding.approval_id, &source),
    };
    match decided {
        Ok((approval, _)) => Response::json(
            200,
            &CardDecided {
                status: status_of(&approval),
            },
        ),
        Err(error) => refused(shared, &binding.approval_id, &error),
    }
}

/// A decision the host refused: the token is given back while the
/// approval is still pending (a missing mode can be fixed); a token whose
/// approval is gone is simply not found.
fn refused(shared: &Shared, approval_id: &ApprovalId, error: &HostError) -> Response {
    let still_pending = shared
        .host
        .approval(approval_id)
        .is_ok_and(|row| row.approval.status == ApprovalStatus::Pending);
    if !still_pending {
        return Response::plain(404);
    }
    shared.cards().unspend(approval_id);
    let status = if error.code() == ErrorCode::PermissionModeRequired {
        400
    } else {
        409
    };
    // The plan as it is now goes with every refusal, so a card whose file
    // was rewritten while it was open shows that check's failure.
    Response::json(
        status,
        &CardRefusal {
            error_code: error.code(),
            message: error.message(),
            plan: plan_check(shared, approval_id),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::{CARD_SCRIPT, html_text, utc_time};

    #[test]
    fn a_deadline_is_shown_in_utc_to_the_second() {
        assert_eq!(
            utc_time(1_800_001_800_999),
            (
                "2027-01-15T08:30:00Z".to_owned(),
                "2027-01-15 08:30:00 UTC".to_owned()
            )
        );
        assert_eq!(utc_time(0).1, "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_time(-1).1, "1969-12-31 23:59:59 UTC");
        assert_eq!(utc_time(951_782_400_000).1, "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_time(4_107_542_400_000).1, "2100-03-01 00:00:00 UTC");
    }

    #[test]
    fn agent_text_on_the_page_is_text_with_controls_escaped() {
        assert_eq!(
            html_text("<b>\"x\" & 'y'</b>\u{1b}[2J\u{202e}", false),
            "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;\\x1b[2J\\u202e"
        );
        assert_eq!(html_text("a\r\nb\tc\n", true), "a\nb\tc\n");
        assert_eq!(html_text("a\nb", false), "a\\x0ab");
    }

    /// The character class of the card's `TERMINAL_CONTROL` regex, as
    /// `(first, last)` ranges.
    fn card_class() -> Vec<(u32, u32)> {
        let line = CARD_SCRIPT
            .lines()
            .find(|line| line.contains("const TERMINAL_CONTROL = /["))
            .unwrap_or_default();
        let class = line
            .split_once("/[")
            .and_then(|(_, rest)| rest.split_once("]/"))
            .map(|(class, _)| class)
            .unwrap_or_default();
        let points: Vec<u32> = class
            .split("\\u")
            .filter(|part| !part.is_empty())
            .map(|part| u32::from_str_radix(part.trim_end_matches('-'), 16).unwrap_or(u32::MAX))
            .collect();
        let mut ranges = Vec::new();
        let mut parts = class
            .split("\\u")
            .filter(|part| !part.is_empty())
            .zip(points.iter());
        while let Some((text, first)) = parts.next() {
            if text.ends_with('-') {
                let last = parts.next().map_or(u32::MAX, |(_, last)| *last);
                ranges.push((*first, last));
            } else {
                ranges.push((*first, *first));
            }
        }
        ranges
    }

    #[test]
    fn the_card_escapes_exactly_plan_cores_terminal_controls() {
        let ranges = card_class();
        assert!(!ranges.is_empty(), "no TERMINAL_CONTROL class in the card script");
        for c in (0..0x1_0000).filter_map(char::from_u32) {
            let in_card = ranges
                .iter()
                .any(|(first, last)| (*first..=*last).contains(&u32::from(c)));
            assert_eq!(
                in_card,
                plan_core::is_terminal_control(c),
                "U+{:04X}: the card and plan-core disagree",
                u32::from(c)
            );
        }
    }
}
