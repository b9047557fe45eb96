-- Transits by wallet: the gateway lists a tenant's transits by one of its
-- signers, which may be either end's wallet. Each end has its own index,
-- newest first by seq, so a list by wallet reads the two and merges them
-- instead of scanning every transit.
CREATE INDEX transit_source_wallet_idx ON transit (source_wallet, source_chain_id, seq);
CREATE INDEX transit_destination_wallet_idx ON transit (destination_wallet, destination_chain_id, seq)
    WHERE destination_wallet IS NOT NULL;
