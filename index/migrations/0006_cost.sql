-- Cost and models: what every job run cost in US dollars (the sum of its
-- attempts' costs, computed by the workers from each attempt's reported
-- usage and the price of the model that answered it), and which models
-- answered. model keeps the model of the run's last attempt (the one
-- that produced the final answer); first_model is the model of its first
-- attempt, so a run healed by a fallback model reads model <> first_model.
-- Rows indexed before this migration have no cost (cost_usd 0, priced 0)
-- and first_model = model.

ALTER TABLE outcomes ADD COLUMN cost_usd      REAL    NOT NULL DEFAULT 0;  -- every attempt whose price is known
ALTER TABLE outcomes ADD COLUMN heal_cost_usd REAL    NOT NULL DEFAULT 0;  -- attempts 2..n
ALTER TABLE outcomes ADD COLUMN priced        INTEGER NOT NULL DEFAULT 0;  -- 1 when at least one attempt's price was known
ALTER TABLE outcomes ADD COLUMN first_model   TEXT    NOT NULL DEFAULT '';
UPDATE outcomes SET first_model = model;

ALTER TABLE attempts ADD COLUMN model    TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN cost_usd REAL;                             -- NULL: the model's price is unknown

-- The funnel and stats read cost and models too; grouped per model, in
-- GROUP BY order so the funnel still streams.
DROP INDEX outcomes_funnel_v2;
CREATE INDEX outcomes_funnel_v3 ON outcomes (schema_id, version, dead, attempts, class, model, first_model,
	finished_at, tokens, heal_tokens, cost_usd, heal_cost_usd, priced);

DROP VIEW v_outcomes;
CREATE VIEW v_outcomes AS
SELECT
	o.id                                                   AS outcome_id,
	o.job_id,
	o.run,                                                 -- 0 as submitted, n for the n-th replay
	o.schema_id,
	o.version,                                             -- schema version (hash of the canonical schema)
	CASE o.dead WHEN 1 THEN 'dead_lettered' ELSE 'succeeded' END AS status,
	o.class,                                               -- failure class; '' on success
	o.reason,
	o.model,                                               -- model of the last attempt (the final answer)
	o.first_model,                                         -- model of the first attempt; <> model: a fallback answered last
	o.attempts,                                            -- model calls, transport retries aside
	o.deliveries,
	o.prompt_tokens,
	o.completion_tokens,
	o.tokens,                                              -- prompt + completion, every attempt
	o.heal_tokens,                                         -- prompt + completion of attempts 2..n
	CASE WHEN o.priced = 1 THEN o.cost_usd END             AS cost_usd,       -- US dollars, every attempt; NULL when no price was known
	CASE WHEN o.priced = 1 THEN o.heal_cost_usd END        AS heal_cost_usd,  -- US dollars, attempts 2..n
	o.first_path,                                          -- first failing path of the last attempt (dead letters)
	CASE WHEN o.started_at > 0 THEN printf('%s.%03dZ', strftime('%Y-%m-%dT%H:%M:%S', o.started_at / 1000, 'unixepoch'), o.started_at % 1000) END AS started_at,
	CASE WHEN o.finished_at > 0 THEN printf('%s.%03dZ', strftime('%Y-%m-%dT%H:%M:%S', o.finished_at / 1000, 'unixepoch'), o.finished_at % 1000) END AS finished_at,
	CASE WHEN o.started_at > 0 AND o.finished_at >= o.started_at THEN o.finished_at - o.started_at END AS duration_ms,
	o.replayed,                                            -- 1 when a later run of the job exists or was asked for
	json_object('job', json_extract(p.body, '$.job'),
	            'attempts', COALESCE(json_extract(p.body, '$.trace'), json_array())) AS transcript
FROM outcomes o LEFT JOIN payloads p ON p.outcome_id = o.id;

DROP VIEW v_attempts;
CREATE VIEW v_attempts AS
SELECT
	o.id                                                   AS outcome_id,
	o.job_id,
	o.run,
	o.schema_id,
	o.version,
	CASE o.dead WHEN 1 THEN 'dead_lettered' ELSE 'succeeded' END AS status,
	COALESCE(NULLIF(json_extract(a.value, '$.n'), 0), a.key + 1) AS n,
	COALESCE(json_extract(a.value, '$.model'), o.model)    AS model,         -- the model that answered this call
	json_extract(a.value, '$.temperature')                 AS temperature,
	json_extract(a.value, '$.raw')                         AS raw,           -- the model's output as it came
	COALESCE(json_extract(a.value, '$.repairs'), '[]')     AS repairs,       -- sanitizer stages applied, JSON array
	COALESCE(json_extract(a.value, '$.class'), '')         AS class,         -- '' when the output was valid
	COALESCE(json_extract(a.value, '$.finish_reason'), '') AS finish_reason,
	COALESCE(json_extract(a.value, '$.diagnostics'), '[]') AS diagnostics,   -- JSON array of {path, keyword, message, expected, received}
	COALESCE(json_extract(a.value, '$.diagnostics_omitted'), 0) AS diagnostics_omitted,
	COALESCE(json_extract(a.value, '$.prompt_tokens'), 0)  AS prompt_tokens,
	COALESCE(json_extract(a.value, '$.completion_tokens'), 0) AS completion_tokens,
	COALESCE(json_extract(a.value, '$.cached_tokens'), 0)  AS cached_tokens,
	COALESCE(json_extract(a.value, '$.reasoning_tokens'), 0) AS reasoning_tokens,
	json_extract(a.value, '$.cost_usd')                    AS cost_usd,      -- US dollars; NULL when the model's price is unknown
	COALESCE(json_extract(a.value, '$.latency_ms'), 0)     AS latency_ms,
	COALESCE(json_extract(a.value, '$.transport_retries'), 0) AS transport_retries
FROM outcomes o JOIN payloads p ON p.outcome_id = o.id, json_each(p.body, '$.trace') a;
