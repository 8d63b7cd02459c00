-- The delivery loop claims each webhook's due rows on their own (a webhook
-- whose receiver is down is skipped while its circuit is open, see
-- events/circuit.go): an index led by the webhook lets a claim for one
-- receiver read only its rows, however long another's backlog has grown.
-- It replaces the index on next_attempt_at alone, so a written event still
-- updates one index for its due-ness.
DROP INDEX event_outbox_due;
CREATE INDEX event_outbox_due ON event_outbox (webhook, next_attempt_at) WHERE state = 'pending';
