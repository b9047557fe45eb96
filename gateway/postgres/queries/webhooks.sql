-- Webhooks (webhooks.go): subscriptions and their signing secrets, the
-- fan-out of txmanager's event feed into deliveries, and the dispatchers'
-- claims on them.
--
-- A statement that returns subscriptions ends its row with the columns
-- scanSubscription reads, as GetSubscription does, and one that returns
-- deliveries with those scanDelivery reads, as DeliveryLog does;
-- TestQueries holds every copy to the original. The live secrets of a
-- subscription (SubscriptionTarget, ClaimDelivery), the events as a table
-- and the subscription filters (FanOut, ReplayDeliveries) are written out
-- in each statement that needs them, and TestQueries holds the copies to
-- each other.

-- name: CreateSubscription
-- Stores a new subscription of tenant $2.
INSERT INTO webhook_subscription (subscription_id, tenant_id, url, description, event_types, signers, enabled)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING subscription_id, tenant_id, url, description, event_types, signers, enabled, created_at, updated_at;

-- name: AddWebhookSecret
-- Adds signing secret $3 to subscription $2: it signs from now on, beside
-- the secrets not expired yet.
INSERT INTO webhook_secret (secret_id, subscription_id, secret) VALUES ($1, $2, $3);

-- name: GetSubscription
-- Tenant $2's subscription $1.
SELECT subscription_id, tenant_id, url, description, event_types, signers, enabled, created_at, updated_at
FROM webhook_subscription
WHERE subscription_id = $1 AND tenant_id = $2;

-- name: SubscriptionExists
-- Whether tenant $2 has subscription $1.
SELECT EXISTS (SELECT 1 FROM webhook_subscription WHERE subscription_id = $1 AND tenant_id = $2);

-- name: Subscriptions
-- A page of tenant $1's subscriptions, oldest first, at most $4: after
-- the cursor ($2, $3), the last row of the previous page, unless $2 is
-- NULL. The cursor filters in the index order of
-- webhook_subscription_tenant_idx.
SELECT subscription_id, tenant_id, url, description, event_types, signers, enabled, created_at, updated_at
FROM webhook_subscription
WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, subscription_id) > ($2, $3::uuid))
ORDER BY created_at, subscription_id LIMIT $4;

-- name: UpdateSubscription
-- Changes tenant $2's subscription $1: the url ($3), description ($4) and
-- enabled flag ($9) unless NULL, the event types ($6) when $5 and the
-- signers ($8, NULL for all of them) when $7. One statement, so that
-- concurrent updates of different fields both stick.
UPDATE webhook_subscription SET
	url = coalesce($3, url),
	description = coalesce($4, description),
	event_types = CASE WHEN $5::boolean THEN $6::text[] ELSE event_types END,
	signers = CASE WHEN $7::boolean THEN $8::text[] ELSE signers END,
	enabled = coalesce($9, enabled),
	updated_at = now()
WHERE subscription_id = $1 AND tenant_id = $2
RETURNING subscription_id, tenant_id, url, description, event_types, signers, enabled, created_at, updated_at;

-- name: DeleteSubscription
-- Deletes tenant $2's subscription $1; its secrets and deliveries go with
-- it (ON DELETE CASCADE).
DELETE FROM webhook_subscription WHERE subscription_id = $1 AND tenant_id = $2;

-- name: LockSubscription
-- Tenant $2's subscription $1, locked until the transaction ends: the row
-- lock orders concurrent rotations of its secrets.
SELECT subscription_id, tenant_id, url, description, event_types, signers, enabled, created_at, updated_at
FROM webhook_subscription
WHERE subscription_id = $1 AND tenant_id = $2 FOR UPDATE;

-- name: DeleteExpiredSecrets
-- Deletes subscription $1's secrets that no longer sign.
DELETE FROM webhook_secret WHERE subscription_id = $1 AND expires_at <= now();

-- name: RetireSecrets
-- Makes subscription $1's secrets stop signing in $2 seconds, or keeps an
-- earlier expiry they have: a rotation never extends a secret's life.
UPDATE webhook_secret SET expires_at = least(coalesce(expires_at, 'infinity'), now() + make_interval(secs => $2))
WHERE subscription_id = $1;

-- name: SubscriptionTarget
-- Where tenant $2's subscription $1 is delivered, and the secrets that
-- sign for it now, newest first.
SELECT url,
	ARRAY(SELECT w.secret FROM webhook_secret w WHERE w.subscription_id = d.subscription_id
		AND (w.expires_at IS NULL OR w.expires_at > now()) ORDER BY w.created_at DESC, w.secret_id)
FROM webhook_subscription d
WHERE subscription_id = $1 AND tenant_id = $2;

-- name: SubscriptionSecrets
-- The secrets' metadata (never the secrets) of the subscriptions $1, in
-- one query, oldest first.
SELECT subscription_id, secret_id, created_at, expires_at FROM webhook_secret
WHERE subscription_id = ANY($1) ORDER BY subscription_id, created_at, secret_id;

-- name: DeliveryLog
-- A page of subscription $1's delivery log, newest event first, at most
-- $3: below event $2 unless it is NULL. A statement without a status
-- filter and one with (DeliveryLogByStatus) rather than one with an
-- optional status, so that each keeps its index under a generic plan:
-- this one the unique (subscription_id, event_seq).
SELECT delivery_id, subscription_id, event_seq, event_id, event_type, tx_id, status, attempts,
	next_attempt_at, last_status_code, last_error, first_attempt_at, created_at, delivered_at
FROM webhook_delivery
WHERE subscription_id = $1 AND ($2::bigint IS NULL OR event_seq < $2)
ORDER BY event_seq DESC LIMIT $3;

-- name: DeliveryLogByStatus
-- DeliveryLog of the deliveries in status $4 only, on
-- webhook_delivery_log_idx.
SELECT delivery_id, subscription_id, event_seq, event_id, event_type, tx_id, status, attempts,
	next_attempt_at, last_status_code, last_error, first_attempt_at, created_at, delivered_at
FROM webhook_delivery
WHERE subscription_id = $1 AND status = $4 AND ($2::bigint IS NULL OR event_seq < $2)
ORDER BY event_seq DESC LIMIT $3;

-- name: LatestAttempts
-- The latest $2 attempts of each of the deliveries $1, latest first, in
-- one query.
SELECT d.id, a.attempted_at, a.status_code, a.error, a.duration_ms
FROM unnest($1::uuid[]) AS d (id) CROSS JOIN LATERAL (
	SELECT attempted_at, status_code, error, duration_ms FROM webhook_attempt
	WHERE delivery_id = d.id ORDER BY attempt_id DESC LIMIT $2) a;

-- name: FeedCursor
-- The last feed sequence fanned out into deliveries.
SELECT seq FROM webhook_feed_cursor;

-- name: AdvanceFeedCursor
-- Moves the feed cursor from $1 to $2, if it is still at $1: the
-- compare-and-set of a fan-out. It locks the cursor row first, so a
-- concurrent fan-out waits here, then finds the cursor moved and writes
-- nothing.
UPDATE webhook_feed_cursor SET seq = $2, updated_at = now() WHERE seq = $1;

-- name: FanOut
-- Queues a delivery of each of the events (parallel arrays $1 to $8: seq,
-- id, type, tx id, chain id, signer, signer as "chain:0xaddress", body)
-- for every enabled subscription whose tenant owns the event's signer and
-- whose filters let it through. A delivery queued behind one of its
-- transaction waiting for a retry is due no earlier than that retry (see
-- RecordAttempt); one being attempted right now holds nothing up. The
-- last waiting delivery of the transaction has the latest time, since a
-- retry moves those behind it along: one index probe.
INSERT INTO webhook_delivery (delivery_id, subscription_id, event_seq, event_id, event_type, tx_id, event, next_attempt_at)
SELECT gen_random_uuid(), s.subscription_id, e.seq, e.id, e.type, e.tx_id, e.body::json,
	greatest(now(), (SELECT p.next_attempt_at FROM webhook_delivery p
		WHERE p.subscription_id = s.subscription_id AND p.tx_id = e.tx_id AND p.status = 'pending' AND p.claim_token IS NULL
		ORDER BY p.event_seq DESC LIMIT 1))
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $7::text[], $8::text[])
	AS e (seq, id, type, tx_id, chain_id, signer, signer_ref, body)
JOIN tenant_signer ts ON ts.chain_id = e.chain_id AND ts.signer = e.signer
JOIN webhook_subscription s ON s.tenant_id = ts.tenant_id
WHERE s.enabled
	AND (cardinality(s.event_types) = 0 OR e.type = ANY (s.event_types))
	AND (s.signers IS NULL OR e.signer_ref = ANY (s.signers))
ORDER BY e.seq
ON CONFLICT (subscription_id, event_seq) DO NOTHING;

-- name: ReplayDeliveries
-- Queues again, for tenant $10's subscription $9, those of the events ($1
-- to $8 as in FanOut) it matches today. A delivery that exists goes back
-- to pending with its attempts reset (an attempt in flight loses its
-- claim, so its result is dropped); one that does not is created.
INSERT INTO webhook_delivery (delivery_id, subscription_id, event_seq, event_id, event_type, tx_id, event)
SELECT gen_random_uuid(), s.subscription_id, e.seq, e.id, e.type, e.tx_id, e.body::json
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $7::text[], $8::text[])
	AS e (seq, id, type, tx_id, chain_id, signer, signer_ref, body)
JOIN tenant_signer ts ON ts.chain_id = e.chain_id AND ts.signer = e.signer
JOIN webhook_subscription s ON s.tenant_id = ts.tenant_id
WHERE s.subscription_id = $9 AND s.tenant_id = $10
	AND (cardinality(s.event_types) = 0 OR e.type = ANY (s.event_types))
	AND (s.signers IS NULL OR e.signer_ref = ANY (s.signers))
ORDER BY e.seq
ON CONFLICT (subscription_id, event_seq) DO UPDATE SET
	status = 'pending', attempts = 0, next_attempt_at = now(), claim_token = NULL,
	first_attempt_at = NULL, delivered_at = NULL;

-- name: ClaimDelivery
-- Claims one due delivery with token $1 for $2 seconds, and returns it
-- with where it goes and the secrets that sign it. Due: pending, its time
-- has come, its subscription enabled, and no earlier event of the same
-- subscription and transaction pending, so each transaction's events
-- arrive in order. SKIP LOCKED: claims skip the rows other nodes are
-- claiming.
WITH due AS (
	SELECT c.delivery_id FROM webhook_delivery c JOIN webhook_subscription cs USING (subscription_id)
	WHERE c.status = 'pending' AND c.next_attempt_at <= now() AND cs.enabled
		AND NOT EXISTS (SELECT 1 FROM webhook_delivery e
			WHERE e.subscription_id = c.subscription_id AND e.tx_id = c.tx_id AND e.status = 'pending' AND e.event_seq < c.event_seq)
	ORDER BY c.next_attempt_at
	LIMIT 1
	FOR UPDATE OF c SKIP LOCKED
)
UPDATE webhook_delivery d SET claim_token = $1, next_attempt_at = now() + make_interval(secs => $2),
	first_attempt_at = coalesce(d.first_attempt_at, now())
FROM due, webhook_subscription s
WHERE d.delivery_id = due.delivery_id AND s.subscription_id = d.subscription_id
RETURNING d.delivery_id, d.subscription_id, s.tenant_id, d.event_seq, d.event_id, d.event_type, d.tx_id, d.attempts, s.url,
	ARRAY(SELECT w.secret FROM webhook_secret w WHERE w.subscription_id = d.subscription_id
		AND (w.expires_at IS NULL OR w.expires_at > now()) ORDER BY w.created_at DESC, w.secret_id),
	d.event;

-- name: RecordAttempt
-- Writes the result of an attempt of delivery $1 under its claim $2 and
-- returns the delivery's status after it: delivered when $3, dead when
-- the failure came $4 seconds or more after the first attempt, pending
-- again in $5 seconds otherwise. $6 and $7 are the HTTP status and error,
-- $8 and $9 when the attempt was made and how long it took (ms). No row:
-- the claim is gone.
WITH d AS (
	UPDATE webhook_delivery SET
		attempts = attempts + 1,
		status = CASE WHEN $3::boolean THEN 'delivered'
			WHEN now() >= first_attempt_at + make_interval(secs => $4) THEN 'dead' ELSE 'pending' END,
		next_attempt_at = CASE WHEN $3::boolean THEN now() ELSE now() + make_interval(secs => $5) END,
		delivered_at = CASE WHEN $3::boolean THEN now() END,
		last_status_code = $6::integer, last_error = $7::text, claim_token = NULL
	WHERE delivery_id = $1 AND claim_token = $2
	RETURNING delivery_id, subscription_id, tx_id, event_seq, status, next_attempt_at
), a AS (
	INSERT INTO webhook_attempt (delivery_id, attempted_at, status_code, error, duration_ms)
	SELECT delivery_id, $8::timestamptz, $6::integer, $7::text, $9::bigint FROM d
), behind AS (
	-- The transaction's later deliveries cannot go before this retry:
	-- they are not due before it either, so that claims do not wade
	-- through them while a receiver is down.
	UPDATE webhook_delivery f SET next_attempt_at = d.next_attempt_at
	FROM d
	WHERE d.status = 'pending' AND f.subscription_id = d.subscription_id AND f.tx_id = d.tx_id
		AND f.status = 'pending' AND f.event_seq > d.event_seq AND f.next_attempt_at < d.next_attempt_at
)
SELECT status FROM d;

-- name: ReleaseClaim
-- Gives delivery $1 back unattempted, if claim $2 still holds it: due at
-- once for whichever node comes next, its dead letter horizon not started
-- when it had no attempt.
UPDATE webhook_delivery SET claim_token = NULL, next_attempt_at = now(),
	first_attempt_at = CASE WHEN attempts = 0 THEN NULL ELSE first_attempt_at END
WHERE delivery_id = $1 AND claim_token = $2;
