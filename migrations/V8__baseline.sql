CREATE TABLE sessions (
  id              TEXT PRIMARY KEY NOT NULL,
  title           TEXT NOT NULL DEFAULT '',
  workspace_root  TEXT,             -- absolute path; NULL: session not bound to a project
  mode            TEXT NOT NULL DEFAULT 'agent' CHECK (mode IN ('agent','plan')),
  permission_mode TEXT NOT NULL DEFAULT 'ask'   CHECK (permission_mode IN ('ask','accept-edits','auto')),
  provider        TEXT,
  model           TEXT,
  created_at      INTEGER NOT NULL, -- Unix epoch milliseconds
  updated_at      INTEGER NOT NULL
);

CREATE TABLE transcript_entries (
  id           INTEGER PRIMARY KEY,
  session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq          INTEGER NOT NULL,
  role         TEXT NOT NULL CHECK (role IN ('user','assistant','tool','system')),
  content_json TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  UNIQUE (session_id, seq)
);

-- ADR 0052: structured proposal, in-memory waiter, request-changes feedback.
CREATE TABLE plan_approvals (
  id            TEXT PRIMARY KEY NOT NULL,
  session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  turn_id       TEXT NOT NULL,
  proposal_json TEXT NOT NULL,      -- {"title":..,"summary":..,"steps":[..],"proposedCommands":[..]}
  status        TEXT NOT NULL CHECK (status IN ('pending','approved','rejected','changes_requested','expired')),
  feedback      TEXT,               -- request-changes text, NULL otherwise
  created_at    INTEGER NOT NULL,
  decided_at    INTEGER
);
CREATE INDEX plan_approvals_by_session ON plan_approvals (session_id, created_at);

CREATE TABLE settings (
  key        TEXT PRIMARY KEY NOT NULL,
  value_json TEXT NOT NULL
);

CREATE TABLE scheduled_tasks (
  id          TEXT PRIMARY KEY NOT NULL,
  session_id  TEXT REFERENCES sessions(id) ON DELETE SET NULL,
  mode        TEXT NOT NULL CHECK (mode IN ('agent','plan')),
  prompt      TEXT NOT NULL,
  schedule    TEXT NOT NULL,        -- cron expression
  enabled     INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0,1)),
  last_run_at INTEGER
);

PRAGMA user_version = 8;
