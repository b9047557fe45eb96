-- Transits: transfers between chains (rebalancing). A client marks a
-- transfer's two transactions with one transit id (txmanager's INIT events
-- carry it): the source, on the chain funds leave, and the destination, on
-- the chain they arrive, which depends on the source. The feed consumer
-- books the source into the source wallet's in_transit account and the
-- destination out of the destination wallet's, each on its own chain, and
-- once both are booked the difference as the bridge's fee (see
-- ledger/booking/transit.go). A row is written by the consumer in the
-- transaction that books its page of the feed, with the journals it names.
--
-- status follows from which ends are booked: pending (linked, neither
-- booked: nothing in transit), open (one booked: value in transit),
-- completed (both, and the bridge fee). A reorg that takes an end's block
-- away reverses its journal (and the bridge fee's) and re-opens the
-- transit.
CREATE TABLE transit (
    transit_id             text        PRIMARY KEY CHECK (transit_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
    -- seq orders transits for lists, newest first.
    seq                    bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
    status                 text        NOT NULL CHECK (status IN ('pending', 'open', 'completed')),

    -- The source: txmanager's transaction, its chain and sender, and once
    -- booked its journal, the receipt it was booked from, and what it moved
    -- into in_transit. bridge is who took it (the transaction's recipient,
    -- or the token's payee for a plain token transfer), whose fee_expense
    -- account takes the bridge fee.
    source_tx_id           uuid        NOT NULL UNIQUE,
    source_chain_id        bigint      NOT NULL CHECK (source_chain_id > 0),
    source_wallet          bytea       NOT NULL CHECK (length(source_wallet) = 20),
    source_journal_id      bigint      REFERENCES journal,
    source_tx_hash         bytea       CHECK (length(source_tx_hash) = 32),
    source_block_hash      bytea       CHECK (length(source_block_hash) = 32),
    source_asset           text        CHECK (source_asset = 'native' OR source_asset ~ '^0x[0-9a-f]{40}$'),
    source_amount          amount      CHECK (source_amount > 0),
    bridge                 bytea       CHECK (length(bridge) = 20),

    -- The destination, likewise, once its INIT names the transit; what it
    -- moved out of in_transit.
    destination_tx_id      uuid        UNIQUE,
    destination_chain_id   bigint      CHECK (destination_chain_id > 0),
    destination_wallet     bytea       CHECK (length(destination_wallet) = 20),
    destination_journal_id bigint      REFERENCES journal,
    destination_tx_hash    bytea       CHECK (length(destination_tx_hash) = 32),
    destination_block_hash bytea       CHECK (length(destination_block_hash) = 32),
    destination_asset      text        CHECK (destination_asset = 'native' OR destination_asset ~ '^0x[0-9a-f]{40}$'),
    destination_amount     amount      CHECK (destination_amount > 0),

    -- bridge_fee is source_amount - destination_amount once completed
    -- (the two assets are one by the operator's declaration), booked by
    -- fee_journal_id unless it is zero. Negative when more arrived than
    -- left: booked all the same, and flagged.
    bridge_fee             amount,
    fee_journal_id         bigint      REFERENCES journal,
    fee_negative           boolean     GENERATED ALWAYS AS (bridge_fee < 0) STORED,

    -- opened_at is when value last went into transit (the transit left
    -- pending, or re-opened); completed_at when it completed; alerted_at
    -- when the age alert was raised for the current opening.
    opened_at              timestamptz,
    completed_at           timestamptz,
    alerted_at             timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT transit_source_booked_whole CHECK (num_nulls(source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount, bridge) IN (0, 6)),
    CONSTRAINT transit_destination_linked_whole CHECK (num_nulls(destination_tx_id, destination_chain_id, destination_wallet) IN (0, 3)),
    CONSTRAINT transit_destination_booked_whole CHECK (num_nulls(destination_journal_id, destination_tx_hash, destination_block_hash, destination_asset, destination_amount) IN (0, 5)),
    CONSTRAINT transit_destination_booked_linked CHECK (destination_journal_id IS NULL OR destination_tx_id IS NOT NULL),
    CONSTRAINT transit_status_follows_ends CHECK (status = CASE
        WHEN source_journal_id IS NOT NULL AND destination_journal_id IS NOT NULL THEN 'completed'
        WHEN source_journal_id IS NULL AND destination_journal_id IS NULL THEN 'pending'
        ELSE 'open' END),
    CONSTRAINT transit_fee_when_completed CHECK ((status = 'completed') = (bridge_fee IS NOT NULL)),
    CONSTRAINT transit_fee_journal CHECK (bridge_fee IS NULL OR (bridge_fee = 0) = (fee_journal_id IS NULL)),
    CONSTRAINT transit_fee_amount CHECK (bridge_fee IS NULL OR bridge_fee = source_amount - destination_amount),
    CONSTRAINT transit_opened CHECK ((status = 'pending') = (opened_at IS NULL)),
    CONSTRAINT transit_completed CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
    CONSTRAINT transit_alerted CHECK (alerted_at IS NULL OR status = 'open')
);

-- The age alert finds the open transits opened longest ago.
CREATE INDEX transit_open_idx ON transit (opened_at) WHERE status = 'open';
-- Lists by status, newest first.
CREATE INDEX transit_status_idx ON transit (status, seq);
