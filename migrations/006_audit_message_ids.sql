-- A send's final outcome is an UPDATE of its "sending" row. While
-- provider_message_id had an index on audit_log, that UPDATE set an indexed
-- column, so it could never be HOT: every final outcome wrote a new heap
-- tuple elsewhere plus an entry in every index of audit_log. Delivery
-- receipts now find their text's row through this narrow table, written in
-- the same statement as the final outcome, and audit_log's pages keep room
-- for the new versions of their rows (fillfactor), so most final outcomes
-- and receipts are HOT updates (docs/audit.md, docs/benchmarks.md).
-- audit_log keeps every column it had.
CREATE TABLE audit_message_ids (
    provider   text        NOT NULL,
    message_id text        NOT NULL,
    -- The audit_log row's key.
    id         uuid        NOT NULL,
    created_at timestamptz NOT NULL
) PARTITION BY RANGE (created_at);
CREATE INDEX audit_message_ids_message_id ON audit_message_ids (message_id);
CREATE TABLE audit_message_ids_default PARTITION OF audit_message_ids DEFAULT;

-- audit_message_ids has a partition for each of audit_log's, over the same
-- range, named after it (audit_log_202611: audit_message_ids_202611), so
-- retention drops both; and every audit_log partition has fillfactor 70
-- (unless an operator set another).
-- Called here and after every partition maintenance (audit.Maintain). A
-- month whose audit_log partition was made some other way may have noted
-- message ids in the default partition already: they move to its own.
CREATE FUNCTION smsgw_audit_partitions_follow() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p record;
    twin text;
BEGIN
    FOR p IN SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound, c.reloptions
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'audit_log'::regclass
    LOOP
        twin := 'audit_message_ids' || substr(p.relname, length('audit_log') + 1);
        IF to_regclass(quote_ident(twin)) IS NULL THEN
            EXECUTE format('CREATE TABLE %I (LIKE audit_message_ids)', twin);
            EXECUTE format('WITH moved AS (DELETE FROM audit_message_ids_default m USING %I a
                WHERE a.id = m.id AND a.created_at = m.created_at RETURNING m.*) INSERT INTO %I SELECT * FROM moved',
                p.relname, twin);
            EXECUTE format('ALTER TABLE audit_message_ids ATTACH PARTITION %I %s', twin, p.bound);
        END IF;
        IF NOT EXISTS (SELECT FROM unnest(p.reloptions) o WHERE o LIKE 'fillfactor=%') THEN
            EXECUTE format('ALTER TABLE %I SET (fillfactor = 70)', p.relname);
        END IF;
    END LOOP;
    FOR p IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'audit_message_ids'::regclass
          AND to_regclass(quote_ident('audit_log' || substr(c.relname, length('audit_message_ids') + 1))) IS NULL
    LOOP
        EXECUTE format('DROP TABLE %I', p.relname);
    END LOOP;
END
$$;
SELECT smsgw_audit_partitions_follow();

INSERT INTO audit_message_ids (provider, message_id, id, created_at)
    SELECT provider, provider_message_id, id, created_at FROM audit_log
    WHERE provider IS NOT NULL AND provider_message_id IS NOT NULL;
DROP INDEX audit_log_provider_message_id;
