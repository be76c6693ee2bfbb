-- Batch mode: how many of a job run's attempts went through a provider
-- batch (OpenAI Batch API, Anthropic Message Batches) and what those
-- attempts cost (priced with the model's batch discount; part of
-- cost_usd). Rows indexed before this migration read 0 and 0.

ALTER TABLE outcomes ADD COLUMN batch_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outcomes ADD COLUMN batch_cost_usd REAL    NOT NULL DEFAULT 0;
