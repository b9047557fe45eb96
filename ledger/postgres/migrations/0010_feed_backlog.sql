-- The feed consumer's backlog. txmanager's feed is one ordered stream for
-- every chain, and the consumer has one cursor in it; an event that cannot
-- be booked now for a reason of its chain alone (the chain halted, its
-- endpoint unreachable or without the receipt yet, a wallet of it not
-- opened yet) is moved here, in the transaction that moves the cursor past
-- it, so that the other chains' events go on. Nothing is lost: the event
-- is either booked, or here. A chain with a backlog moves every later
-- event it books here too, and books its backlog in seq order before any
-- of them: a reversal must follow the booking it reverses. A row is
-- deleted in the transaction that books its event.
CREATE TABLE feed_backlog (
    feed     text        NOT NULL CHECK (length(feed) BETWEEN 1 AND 100),
    seq      bigint      NOT NULL CHECK (seq > 0),
    chain_id bigint      NOT NULL CHECK (chain_id > 0),
    tx_id    text        NOT NULL,
    -- event is the event as the feed served it; event_at when txmanager
    -- committed it (its created_at): since when its fact waits.
    event    jsonb       NOT NULL,
    event_at timestamptz NOT NULL,
    -- reason is why the event was moved here: the chain was halted, its
    -- endpoint could not give the receipt (or none is configured), a
    -- wallet it moves was not opened yet, or (queued) the chain's older
    -- events were here; error what the attempt to book it said.
    reason   text        NOT NULL CHECK (reason IN ('halted', 'endpoint', 'no_endpoint', 'wallet_not_opened', 'queued')),
    error    text,
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (feed, seq)
);

-- A chain's backlog, oldest first: what the consumer books next of it.
CREATE INDEX feed_backlog_chain ON feed_backlog (feed, chain_id, seq);
