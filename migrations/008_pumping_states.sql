-- The pumping holds and restrictions the webhooks have told of
-- (pumping.restricted), until they are lifted (pumping.lifted). Every
-- replica watches the holds; this table decides which one tells: the one
-- whose INSERT (or DELETE) took the row, so each change is told once per
-- deployment.
CREATE TABLE pumping_states (
    rule    text        NOT NULL,
    subject text        NOT NULL,
    since   timestamptz NOT NULL,
    why     text        NOT NULL,
    PRIMARY KEY (rule, subject)
);
