-- Schema v10 (ADR 0053): plan_approvals becomes the single plan checkpoint
-- table. Only this table is rebuilt; sessions, transcript_entries, settings
-- and scheduled_tasks keep their rows untouched. The runner writes
-- PRAGMA user_version = 10 after this file, as the last statement of the same
-- transaction.

CREATE TABLE plan_approvals_v10 (
  id                   TEXT PRIMARY KEY NOT NULL,
  session_id           TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  turn_id              TEXT NOT NULL,
  title                TEXT NOT NULL,
  question             TEXT NOT NULL,
  artifact_path        TEXT,
  artifact_sha256      TEXT,
  artifact_size        INTEGER,
  status               TEXT NOT NULL
                       CHECK (status IN ('pending','approved','rejected','expired','interrupted')),
  error_code           TEXT CHECK (error_code IS NULL OR (error_code <> '' AND error_code NOT GLOB '*[^A-Z_]*')),
  created_at           INTEGER NOT NULL,
  expires_at           INTEGER NOT NULL,
  decided_at           INTEGER,
  permission_mode      TEXT CHECK (permission_mode IN ('ask','accept-edits','auto')),
  execution_id         TEXT UNIQUE,
  execution_state      TEXT CHECK (execution_state IN ('queued','running','completed','interrupted')),
  legacy_proposal_json TEXT,
  legacy_feedback      TEXT,
  -- The artifact is recorded whole or not at all.
  CHECK ((artifact_path IS NULL) = (artifact_sha256 IS NULL)
     AND (artifact_path IS NULL) = (artifact_size IS NULL)),
  CHECK (artifact_path IS NULL OR (artifact_path GLOB '.pi/plan/?*.md'
     AND substr(artifact_path, 10) NOT GLOB '*/*')),
  CHECK (artifact_sha256 IS NULL OR (length(artifact_sha256) = 64
     AND artifact_sha256 NOT GLOB '*[^0-9a-f]*')),
  CHECK (artifact_size IS NULL OR artifact_size >= 0),
  -- A row created at v10 (it has no legacy proposal) has its artifact.
  CHECK (legacy_proposal_json IS NOT NULL OR artifact_path IS NOT NULL),
  -- Legacy feedback only exists beside a legacy proposal.
  CHECK (legacy_feedback IS NULL OR legacy_proposal_json IS NOT NULL),
  -- The execution fields are set together, by Approve only.
  CHECK ((permission_mode IS NULL) = (execution_id IS NULL)
     AND (execution_id IS NULL) = (execution_state IS NULL)),
  -- Approved rows created at v10 have them; every other row has none.
  CHECK ((status = 'approved' AND legacy_proposal_json IS NULL) = (execution_id IS NOT NULL)),
  -- A row created at v10 is decided exactly when it is no longer pending.
  CHECK (legacy_proposal_json IS NOT NULL OR (status = 'pending') = (decided_at IS NULL)),
  CHECK (expires_at >= created_at)
);

-- v8 rows are mapped, nothing is dropped. The title is the proposal's string
-- title only when proposal_json is strict JSON holding an object with one;
-- the CASE is nested so that json_type never sees text that is not JSON.
INSERT INTO plan_approvals_v10 (
  id, session_id, turn_id, title, question,
  artifact_path, artifact_sha256, artifact_size,
  status, error_code, created_at, expires_at, decided_at,
  permission_mode, execution_id, execution_state,
  legacy_proposal_json, legacy_feedback
)
SELECT
  id, session_id, turn_id,
  CASE WHEN typeof(proposal_json) = 'text' AND json_valid(proposal_json) THEN
    CASE WHEN json_type(proposal_json) = 'object' AND json_type(proposal_json, '$.title') = 'text'
      THEN json_extract(proposal_json, '$.title') ELSE '' END
  ELSE '' END,
  '',
  NULL, NULL, NULL,
  CASE status WHEN 'pending' THEN 'interrupted' WHEN 'changes_requested' THEN 'rejected' ELSE status END,
  CASE status WHEN 'pending' THEN 'HOST_RESTARTED' WHEN 'expired' THEN 'PLAN_APPROVAL_TIMEOUT' ELSE NULL END,
  created_at, created_at + 1800000, decided_at,
  NULL, NULL, NULL,
  proposal_json, feedback
FROM plan_approvals;

DROP TABLE plan_approvals;
ALTER TABLE plan_approvals_v10 RENAME TO plan_approvals;

-- At most one pending approval and at most one queued or running execution
-- per session, enforced by the database. The startup fence reads live rows
-- through these partial indexes, so its cost follows the live rows only.
CREATE UNIQUE INDEX plan_approvals_one_pending
  ON plan_approvals (session_id) WHERE status = 'pending';
CREATE UNIQUE INDEX plan_approvals_one_live_execution
  ON plan_approvals (session_id) WHERE execution_state IN ('queued','running');

-- Listing newest first, overall, by session and by status.
CREATE INDEX plan_approvals_by_created ON plan_approvals (created_at DESC, id DESC);
CREATE INDEX plan_approvals_by_session_created ON plan_approvals (session_id, created_at DESC, id DESC);
CREATE INDEX plan_approvals_by_status_created ON plan_approvals (status, created_at DESC, id DESC);
-- Counting by status (`db status`) walks the narrowest index there is: one
-- short text per entry, a fraction of the listing indexes' size.
CREATE INDEX plan_approvals_by_status ON plan_approvals (status);
