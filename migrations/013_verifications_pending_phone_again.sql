-- 011 dropped verifications_pending_phone as covered by
-- verifications_phone_created. It was not: under load, verify's look-up of
-- a number's pending verification slowed with every pending row
-- (docs/measurements/2026-11-27-verification-group-commit.md). The partial
-- index holds the pending rows alone, which is what verify asks for.
CREATE INDEX IF NOT EXISTS verifications_pending_phone ON verifications (phone_e164) WHERE status = 'pending';
