-- The funnel sums the batch columns of 0007 too: with them in the covering
-- index it reads the index alone, in GROUP BY order, instead of looking up
-- every row of the table.
DROP INDEX outcomes_funnel_v3;
CREATE INDEX outcomes_funnel_v4 ON outcomes (schema_id, version, dead, attempts, class, model, first_model,
	finished_at, tokens, heal_tokens, cost_usd, heal_cost_usd, priced, batch_attempts, batch_cost_usd);
