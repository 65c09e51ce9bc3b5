-- The carts table the quick start writes. A cart's row exists before it is
-- ordered (the service only updates it); fence and token record the last
-- lock holder that wrote it, for the (fence, token) rule.
CREATE TABLE IF NOT EXISTS carts (
    id     text   PRIMARY KEY,
    status text   NOT NULL DEFAULT 'new',
    fence  bigint NOT NULL DEFAULT 0,  -- fences are 16-digit numbers: 64 bits
    token  text   NOT NULL DEFAULT ''
);
