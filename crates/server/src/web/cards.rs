//! The cards of pending approvals: one capability token each, held in
//! memory only, and the tokens of decided cards, which show the outcome
//! read-only.
//!
//! A token is 256 bits from the operating system's random source, bound to
//! (approval id, artifact SHA-256, expiry). It is compared in constant
//! time, and it dies at the first decision made with it, when the approval
//! is resolved any other way (a decision elsewhere, the deadline) and when
//! the server stops. Nothing here survives a restart, and nothing needs to:
//! a new host interrupts every pending approval. This module keeps tokens;
//! whether a decision is allowed is the host's to say.

use plan_core::{ApprovalId, PlanApproval};
use plan_protocol::CardStatus;

/// How many bytes a token has (256 bits).
pub(crate) const TOKEN_BYTES: usize = 32;

/// A capability token.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token([u8; TOKEN_BYTES]);

impl std::fmt::Debug for Token {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never printed: a token in a log line could be replayed.
        formatter.write_str("Token(..)")
    }
}

impl Token {
    fn fresh() -> Result<Token, getrandom::Error> {
        let mut bytes = [0_u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes)?;
        Ok(Token(bytes))
    }

    /// The token as it appears in a URL: 64 lower-case hex digits.
    pub(crate) fn to_hex(self) -> String {
        hex::encode(self.0)
    }

    /// A token from its URL form; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Token> {
        if text.len() != TOKEN_BYTES * 2 {
            return None;
        }
        let mut bytes = [0_u8; TOKEN_BYTES];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(Token(bytes))
    }

    /// Equality in time independent of where the two differ.
    fn matches(&self, other: &Token) -> bool {
        let difference = self
            .0
            .iter()
            .zip(other.0.iter())
            .fold(0_u8, |difference, (left, right)| difference | (left ^ right));
        std::hint::black_box(difference) == 0
    }
}

/// What a token is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    pub(crate) approval_id: ApprovalId,
    pub(crate) sha256: String,
    pub(crate) expires_at: i64,
}

#[derive(Debug)]
struct Card {
    token: Token,
    binding: Binding,
    /// Taken by a decision in progress: no second decision may start.
    spent: bool,
}

/// The status a page shows (the protocol's `CardStatus`).
pub(crate) fn status_of(approval: &PlanApproval) -> CardStatus {
    CardStatus {
        status: approval.status,
        permission_mode: approval.permission_mode,
        error_code: approval.error_code,
        decided_at: approval.decided_at,
    }
}

/// Every live and decided card. Behind the server's one mutex.
#[derive(Debug, Default)]
pub(crate) struct Cards {
    cards: Vec<Card>,
    /// The cards of approvals no longer pending, newest last, at most
    /// [`DECIDED_KEPT`]: their tokens show the outcome read-only and decide
    /// nothing.
    decided: std::collections::VecDeque<(Token, ApprovalId)>,
    stopped: bool,
}

/// How many decided cards keep showing their outcome (memory only; the
/// oldest is forgotten first and its URL is then simply not found).
const DECIDED_KEPT: usize = 1024;

impl Cards {
    /// The token of `approval`'s card, made on first use; `None` when the
    /// approval is not pending, has no artifact or the server stopped.
    pub(crate) fn token_for(&mut self, approval: &PlanApproval) -> Result<Option<Token>, getrandom::Error> {
        if self.stopped {
            return Ok(None);
        }
        let Ok(artifact) = approval.card_artifact() else {
            return Ok(None);
        };
        if let Some(card) = self
            .cards
            .iter()
            .find(|card| card.binding.approval_id == approval.id)
        {
            return Ok(Some(card.token));
        }
        let token = Token::fresh()?;
        self.cards.push(Card {
            token,
            binding: Binding {
                approval_id: approval.id.clone(),
                sha256: artifact.sha256.clone(),
                expires_at: approval.expires_at,
            },
            spent: false,
        });
        Ok(Some(token))
    }

    /// What a live, unspent token is bound to. Every card is compared, so
    /// the time taken does not say which one (or whether any) matched.
    pub(crate) fn binding(&self, token: &Token) -> Option<Binding> {
        let mut found = None;
        for card in &self.cards {
            if card.token.matches(token) && !card.spent {
                found = Some(card.binding.clone());
            }
        }
        found
    }

    /// Spends a live token for a decision: only the first caller gets its
    /// binding; every later one (a second tab) gets `None`.
    pub(crate) fn spend(&mut self, token: &Token) -> Option<Binding> {
        let mut found = None;
        for card in &mut self.cards {
            if card.token.matches(token) && !card.spent {
                card.spent = true;
                found = Some(card.binding.clone());
            }
        }
        found
    }

    /// Gives a spent token back after the host refused the decision and
    /// the approval is still pending (a missing mode, a busy session).
    pub(crate) fn unspend(&mut self, approval_id: &ApprovalId) {
        for card in &mut self.cards {
            if &card.binding.approval_id == approval_id {
                card.spent = false;
            }
        }
    }

    /// The approval a decided card's token names: it shows the outcome
    /// and decides nothing. Every kept card is compared, as in
    /// [`Cards::binding`].
    pub(crate) fn decided_approval(&self, token: &Token) -> Option<ApprovalId> {
        if self.stopped {
            return None;
        }
        let mut found = None;
        for (kept, approval_id) in &self.decided {
            if kept.matches(token) {
                found = Some(approval_id.clone());
            }
        }
        found
    }

    /// The approval left `pending`: its card can no longer decide (its
    /// token now shows the outcome, read-only).
    pub(crate) fn resolve(&mut self, approval: &PlanApproval) {
        let (ended_cards, kept_cards) = std::mem::take(&mut self.cards)
            .into_iter()
            .partition::<Vec<_>, _>(|card| card.binding.approval_id == approval.id);
        self.cards = kept_cards;
        for card in ended_cards {
            if self.decided.len() >= DECIDED_KEPT {
                self.decided.pop_front();
            }
            self.decided.push_back((card.token, card.binding.approval_id));
        }
    }

    /// The server stops: every token dies, decided ones too, so an open
    /// page's next request is not found and it says its host is gone.
    pub(crate) fn stop(&mut self) {
        self.stopped = true;
        self.cards.clear();
        self.decided.clear();
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_through_hex_and_refuse_other_text() {
        let token = Token([7; TOKEN_BYTES]);
        assert_eq!(Token::parse(&token.to_hex()), Some(token));
        assert_eq!(Token::parse("07"), None);
        assert_eq!(Token::parse(&"zz".repeat(TOKEN_BYTES)), None);
        assert!(!token.matches(&Token([8; TOKEN_BYTES])));
        assert_eq!(format!("{token:?}"), "Token(..)");
    }
}
