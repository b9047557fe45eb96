-- A feed's backlog (backlog.go): events whose chain's trouble kept them
-- from being booked when the feed reached them.

-- name: BacklogChains
-- Sums up feed $1's backlog by chain: how many events, and the oldest
-- one's seq and commit time.
SELECT chain_id, count(*), min(seq), min(event_at) FROM feed_backlog WHERE feed = $1 GROUP BY chain_id;

-- name: Backlog
-- The oldest $3 events of chain $2's backlog of feed $1, in seq order:
-- what is to be booked of the chain before anything else.
SELECT seq, chain_id, tx_id, event, event_at, reason, coalesce(error, '') FROM feed_backlog
WHERE feed = $1 AND chain_id = $2 ORDER BY seq LIMIT $3;

-- name: DrainBacklog
-- Deletes the backlog events $2 of feed $1 that a run books; the caller
-- counts the rows to learn whether another consumer booked some first.
DELETE FROM feed_backlog WHERE feed = $1 AND seq = ANY($2);

-- name: AddBacklog
-- Moves a run's events to feed $1's backlog (parallel arrays $2 to $8: seq,
-- chain, transaction, event, its time, reason, error). An event there
-- already (the feed read again from an earlier cursor) stays as it is.
INSERT INTO feed_backlog (feed, seq, chain_id, tx_id, event, event_at, reason, error)
SELECT $1, s, c, t, e::jsonb, a, r, x
FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::timestamptz[], $7::text[], $8::text[]) AS b(s, c, t, e, a, r, x)
ON CONFLICT (feed, seq) DO NOTHING;
