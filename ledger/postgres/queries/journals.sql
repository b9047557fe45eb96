-- Booking in a transaction that moves a cursor too (journals.go).

-- name: TakenKeys
-- The journals booked under any of keys $1, with their payload hashes and
-- the reversal that undid each (0 for none): a reversed fact is booked
-- again under a key of its own.
SELECT j.idem_key, j.journal_id, j.payload_hash, coalesce(r.journal_id, 0)
FROM journal j LEFT JOIN journal r ON r.reverses = j.journal_id
WHERE j.idem_key = ANY($1);
