ALTER TABLE account ADD COLUMN balance numeric(78, 0) NOT NULL DEFAULT 0 CHECK (balance >= 0);
CREATE INDEX account_balance_idx ON account (balance);
