-- Schema v9 (ADR 0054): the selectable command shell.
-- V9 and V10 always run together in one transaction; a database is never left at v9.

-- The session's selected shell id; NULL means the persisted default.
-- ADD COLUMN with no default only rewrites the schema entry: the table is not
-- rebuilt or scanned, so the cost does not grow with the number of sessions.
ALTER TABLE sessions ADD COLUMN shell TEXT;

-- The persisted default shell. JSON null means no shell was chosen yet and the
-- host falls back to its catalog's default; a value that exists is kept.
INSERT INTO settings (key, value_json) VALUES ('shell.default', 'null')
  ON CONFLICT (key) DO NOTHING;
