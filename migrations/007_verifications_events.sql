-- A verification is a code's life, from its first text to approval, expiry,
-- cancel or lockout (SPEC "Verifications"). Its code lives in Redis and
-- dies there; its record lives here, written before the answer that changed
-- it, so a caller can ask what became of it after the code is gone.
CREATE TABLE verifications (
    id                  uuid        PRIMARY KEY,
    phone_e164          text        NOT NULL,
    country             text        NOT NULL DEFAULT '',
    -- The API key that started it ('' without keys): each key sees only its own.
    api_key             text        NOT NULL DEFAULT '',
    -- pending | approved | expired | canceled | failed
    status              text        NOT NULL,
    sends               int         NOT NULL,
    attempts_left       int         NOT NULL,
    -- The last text's provider status (queued, sent, delivered, undelivered,
    -- failed), NULL until a receipt names it.
    delivery_status     text,
    provider            text        NOT NULL DEFAULT '',
    provider_message_id text        NOT NULL DEFAULT '',
    request_id          text        NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL,
    expires_at          timestamptz NOT NULL
);
-- The pending verification of a number (verify finds it by the number).
CREATE INDEX verifications_pending_phone ON verifications (phone_e164) WHERE status = 'pending';
-- The expiry sweeper's scan.
CREATE INDEX verifications_pending_expiry ON verifications (expires_at) WHERE status = 'pending';
-- A receipt finds the verification of its text.
CREATE INDEX verifications_message ON verifications (provider_message_id) WHERE provider_message_id <> '';
CREATE INDEX verifications_phone_created ON verifications (phone_e164, created_at DESC);

-- The webhook outbox (SPEC "Events (webhooks)"): one row per event and
-- webhook, inserted in the transaction that changed what it tells, claimed by
-- one replica at a time (FOR UPDATE SKIP LOCKED, then a lease in
-- next_attempt_at), retried with backoff, kept as failed after
-- events.retry_for, pruned after events.retention once delivered.
CREATE TABLE event_outbox (
    seq             bigserial   PRIMARY KEY,
    -- The Standard Webhooks message id: the same on every retry.
    event_id        text        NOT NULL,
    -- The receiving webhook's URL.
    webhook         text        NOT NULL,
    type            text        NOT NULL,
    payload         jsonb       NOT NULL,
    -- pending | delivered | failed
    state           text        NOT NULL DEFAULT 'pending',
    attempts        int         NOT NULL DEFAULT 0,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    -- Past this a failed attempt makes the row failed (events.retry_for
    -- after it was written, or after an operator's retry).
    retry_until     timestamptz NOT NULL,
    delivered_at    timestamptz,
    UNIQUE (event_id, webhook)
);
CREATE INDEX event_outbox_due ON event_outbox (next_attempt_at) WHERE state = 'pending';
CREATE INDEX event_outbox_failed ON event_outbox (created_at DESC) WHERE state = 'failed';
CREATE INDEX event_outbox_delivered ON event_outbox (delivered_at) WHERE state = 'delivered';
