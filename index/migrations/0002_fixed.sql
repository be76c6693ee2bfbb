-- Whether a failure was fixed before its job ended, so the report can tell
-- a field the model cannot satisfy from a field it did satisfy in jobs that
-- died of another field. And the funnel grouped per schema version.
--
-- fixed is set on lead rows (the first row of a cluster within a job run):
-- 1 when the run's last validated attempt (an attempt whose output was
-- parsed and validated: class '' or 'schema', or one with diagnostics) came
-- after the cluster's first failure, kept every one of its diagnostics, and
-- had none of this cluster. Write computes it; the UPDATE below fills it for
-- the rows written before this migration, from the same tables.
--
-- From this migration on, Write stores one failures row per cluster per job
-- run (the lead row; its received value is the first failing attempt's),
-- not one per diagnostic per attempt: the other rows answered no query the
-- lead rows do not, and every diagnostic stays in the payload. Older rows
-- with lead = 0 are kept as they are.

ALTER TABLE failures ADD COLUMN fixed INTEGER NOT NULL DEFAULT 0;

UPDATE failures SET fixed = 1
WHERE lead = 1 AND EXISTS (
	SELECT 1 FROM attempts a
	WHERE a.outcome_id = failures.outcome_id
	  AND a.n = (SELECT MAX(v.n) FROM attempts v
	             WHERE v.outcome_id = failures.outcome_id AND (v.class IN ('', 'schema') OR v.diagnostics > 0))
	  AND a.n > failures.attempt
	  AND a.diagnostics = (SELECT COUNT(*) FROM failures k WHERE k.outcome_id = a.outcome_id AND k.attempt = a.n)
	  AND NOT EXISTS (SELECT 1 FROM failures s
	                  WHERE s.outcome_id = a.outcome_id AND s.attempt = a.n AND s.cluster = failures.cluster)
);

-- The report's reads over failures, covering fixed as well.
DROP INDEX failures_lead;
CREATE INDEX failures_by_cluster ON failures (cluster, at, dead, fixed, received) WHERE lead = 1;

-- The funnel per schema version, in GROUP BY order (streams without a
-- temporary b-tree).
DROP INDEX outcomes_funnel;
CREATE INDEX outcomes_funnel_v2 ON outcomes (schema_id, version, dead, attempts, class, finished_at, tokens, heal_tokens);
