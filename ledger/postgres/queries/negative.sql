-- Wallets that bookings took below zero (negative.go).

-- name: NegativeWalletsAmong
-- Of the wallet accounts of parallel arrays $1 to $3 (chain, asset,
-- address), those whose balance is below zero, with it. Read in the
-- booking's transaction, which holds their balance rows: the balances are
-- exactly what its journals left.
SELECT a.chain_id, a.asset, a.address, b.amount::text
FROM unnest($1::bigint[], $2::text[], $3::bytea[]) AS k(chain_id, asset, address)
JOIN account a ON a.chain_id = k.chain_id AND a.asset = k.asset AND a.kind = 'wallet' AND a.address = k.address
JOIN balance b USING (account_id)
WHERE b.amount < 0;
