-- Answers that texted nobody are counted, past a threshold, on rollup rows:
-- one row stands for `count` requests of one subject, kind, outcome and
-- reason in one minute, the first at created_at and the last at last_at.
-- A plain row counts 1 and has no last_at nor subject. Adding columns with a
-- constant default rewrites nothing, however large the table.
ALTER TABLE audit_log
    ADD COLUMN count   integer NOT NULL DEFAULT 1,
    ADD COLUMN last_at timestamptz,
    -- What a rollup counted: "phone:+37120000000", "ip:203.0.113.7",
    -- "pumping:range_1k:+3712000xxxx"...; null on a plain row and on a
    -- rollup folded past the per-second cap (any subject).
    ADD COLUMN subject text;
