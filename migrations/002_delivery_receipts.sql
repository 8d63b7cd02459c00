-- Delivery receipts: what the provider said became of each text.

ALTER TABLE audit_log
    ADD COLUMN delivery_error_code text,
    ADD COLUMN delivery_updated_at timestamptz;

-- Every receipt a provider sent, each status once: the timeline of a text.
-- Receipts that arrive before their audit row is written wait here and are
-- applied when it is.
CREATE TABLE delivery_receipts (
    provider    text        NOT NULL,
    message_id  text        NOT NULL,
    status      text        NOT NULL,
    error_code  text,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, message_id, status)
);
CREATE INDEX delivery_receipts_message_id ON delivery_receipts (message_id);

-- How far along a status is. Receipts arrive out of order; a text that was
-- delivered never goes back to "sent".
CREATE FUNCTION smsgw_delivery_rank(status text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE status
        WHEN 'accepted' THEN 1 WHEN 'scheduled' THEN 1 WHEN 'queued' THEN 1
        WHEN 'sending' THEN 2
        WHEN 'sent' THEN 3
        WHEN 'delivered' THEN 4 WHEN 'undelivered' THEN 4 WHEN 'failed' THEN 4 WHEN 'canceled' THEN 4
        WHEN 'read' THEN 5
        ELSE 0
    END
$$;
