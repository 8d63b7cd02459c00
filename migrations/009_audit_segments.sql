-- The number of SMS segments a send's text takes (a carrier bills each), on
-- the send's row: NULL where no text was made (refusals, verifies, replays).
-- smallint: a code text is one segment, a long template a few. Not indexed,
-- so the final outcome's UPDATE stays HOT (migration 006).
ALTER TABLE audit_log ADD COLUMN segments smallint;
