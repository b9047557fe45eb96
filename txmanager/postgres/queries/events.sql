-- The outbox (events.go): events written with the changes they announce,
-- numbered into the feed by the sequencer, read by the feed's consumers.

-- name: WriteEvents
-- Inserts events of type $3, payloads $2[i] for transactions $1[i], in
-- that order. The shared barrier lock ($4), held until the transaction
-- ends, tells the sequencer an event is being written.
INSERT INTO event (tx_id, type, payload)
SELECT e.tx_id, $3, e.payload::jsonb
FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS e (tx_id, payload, ord), (SELECT pg_advisory_xact_lock_shared($4)) AS writing
ORDER BY e.ord;

-- name: SetLockTimeout
-- Bounds, for the rest of the transaction, how long the sequencer waits
-- for the writers in flight: SET LOCAL lock_timeout = $1.
SELECT set_config('lock_timeout', $1, true);

-- name: LockEventBarrier
-- Takes the event barrier ($1) exclusively until the transaction ends:
-- every event written so far is committed or rolled back, and no new one
-- can be written meanwhile.
SELECT pg_advisory_xact_lock($1);

-- name: NumberEvents
-- Gives the next feed sequence numbers to up to $1 unnumbered events, in
-- the order they were written, and counts them.
WITH ready AS (
	SELECT id, row_number() OVER (ORDER BY id) AS rn
	FROM event
	WHERE seq IS NULL
	ORDER BY id
	LIMIT $1
), numbered AS (
	UPDATE event e SET seq = (SELECT last_seq FROM event_sequence) + ready.rn
	FROM ready WHERE e.id = ready.id
	RETURNING 1
)
SELECT count(*) FROM numbered;

-- name: MoveFeedHead
-- Moves the feed's head past the $1 events just numbered and announces it
-- to the long polls' FeedWatch at commit, as "<schema> <head>" on the
-- channel txfence_feed (ListenFeed listens on it).
WITH moved AS (UPDATE event_sequence SET last_seq = last_seq + $1 RETURNING last_seq)
SELECT pg_notify('txfence_feed', current_schema() || ' ' || last_seq) FROM moved;

-- name: EventsAfter
-- Up to $2 events of the feed after sequence $1, in order.
SELECT e.seq, e.type, e.tx_id, t.chain_id, t.signer, e.created_at, e.payload
FROM event e JOIN tx t USING (tx_id)
WHERE e.seq > $1 ORDER BY e.seq LIMIT $2;

-- name: HeadSeq
-- The highest sequence numbered so far (0 before the first).
SELECT last_seq FROM event_sequence;

-- name: TxEvents
-- The events of one transaction already in the feed, in order.
SELECT e.seq, e.type, e.tx_id, t.chain_id, t.signer, e.created_at, e.payload
FROM event e JOIN tx t USING (tx_id)
WHERE e.tx_id = $1 AND e.seq IS NOT NULL ORDER BY e.seq;
