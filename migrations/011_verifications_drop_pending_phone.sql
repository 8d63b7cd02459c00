-- verifications_pending_phone (phone_e164 WHERE status = 'pending') is
-- covered by verifications_phone_created (phone_e164, created_at DESC):
-- verify's look-up of a number's newest pending verification reads the
-- number's few rows in that index. One index fewer on every send's record.
DROP INDEX IF EXISTS verifications_pending_phone;
