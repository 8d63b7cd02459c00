-- audit_log becomes partitioned by month: years of rows stay fast to write
-- and to look up, and retention drops whole months instead of deleting rows.
-- The service creates partitions ahead of time and drops expired ones; the
-- default partition catches a row no monthly partition covers, so no write
-- ever fails for want of one.

ALTER TABLE audit_log RENAME TO audit_log_unpartitioned;
ALTER INDEX audit_log_pkey RENAME TO audit_log_unpartitioned_pkey;
ALTER INDEX audit_log_phone_created_at RENAME TO audit_log_unpartitioned_phone_created_at;
ALTER INDEX audit_log_provider_message_id RENAME TO audit_log_unpartitioned_provider_message_id;
ALTER INDEX audit_log_created_at RENAME TO audit_log_unpartitioned_created_at;

CREATE TABLE audit_log (LIKE audit_log_unpartitioned INCLUDING DEFAULTS)
    PARTITION BY RANGE (created_at);
-- A unique key must include the partition key; ids are unique on their own.
ALTER TABLE audit_log ADD PRIMARY KEY (id, created_at);
CREATE INDEX audit_log_phone_created_at ON audit_log (phone_e164, created_at DESC);
CREATE INDEX audit_log_provider_message_id ON audit_log (provider_message_id)
    WHERE provider_message_id IS NOT NULL;
CREATE INDEX audit_log_created_at ON audit_log USING brin (created_at);

CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;

-- A partition per month (UTC) that holds rows, and this month and the next
-- two. Months are counted in UTC wall time, whatever the session's zone.
DO $$
DECLARE
    first timestamptz := least(now(), coalesce((SELECT min(created_at) FROM audit_log_unpartitioned), now()));
    m timestamp := date_trunc('month', first AT TIME ZONE 'UTC');
    stop timestamp := date_trunc('month', now() AT TIME ZONE 'UTC') + interval '3 months';
BEGIN
    WHILE m < stop LOOP
        EXECUTE format('CREATE TABLE audit_log_%s PARTITION OF audit_log FOR VALUES FROM (%L) TO (%L)',
            to_char(m, 'YYYYMM'), m AT TIME ZONE 'UTC', (m + interval '1 month') AT TIME ZONE 'UTC');
        m := m + interval '1 month';
    END LOOP;
END
$$;

INSERT INTO audit_log SELECT * FROM audit_log_unpartitioned;
DROP TABLE audit_log_unpartitioned;
