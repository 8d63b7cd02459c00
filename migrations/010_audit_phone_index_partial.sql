-- The number index holds only rows that have a number. Rows without one
-- (bad input, unauthorized calls, rollups over any subject) are never looked
-- up by number, yet each cost an index entry and its WAL: about a fifth of
-- such a row's bytes, and under a flood of bad numbers those are every row
-- the replica writes (docs/measurements/2026-11-26-bench-flood.md). A
-- lookup by number (phone_e164 = $1) implies NOT NULL and uses this index.
-- Rebuilding it blocks audit writes while it builds; the writer spools
-- rows meanwhile and writes them after.
DROP INDEX audit_log_phone_created_at;
CREATE INDEX audit_log_phone_created_at ON audit_log (phone_e164, created_at DESC)
    WHERE phone_e164 IS NOT NULL;
