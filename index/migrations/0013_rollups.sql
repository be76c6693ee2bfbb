-- Figures the report reads without scanning every row: the heal funnel's
-- groups and each failure cluster's counts, kept up to date by triggers as
-- outcomes and failures are written and deleted (retention, dlq purge; a
-- failure leaves with its outcome, by the foreign key's cascade). The
-- report reads them when it selects by schema, version and model only;
-- a time range (--since) still reads the rows.

CREATE TABLE funnel_rollup (
	schema_id      TEXT    NOT NULL,
	version        TEXT    NOT NULL,
	dead           INTEGER NOT NULL,
	attempts       INTEGER NOT NULL,
	class          TEXT    NOT NULL,
	model          TEXT    NOT NULL,
	first_model    TEXT    NOT NULL,
	jobs           INTEGER NOT NULL,
	tokens         INTEGER NOT NULL,
	heal_tokens    INTEGER NOT NULL,
	cost_usd       REAL    NOT NULL,
	heal_cost_usd  REAL    NOT NULL,
	priced         INTEGER NOT NULL,
	batch_attempts INTEGER NOT NULL,
	batch_cost_usd REAL    NOT NULL,
	PRIMARY KEY (schema_id, version, dead, attempts, class, model, first_model)
) WITHOUT ROWID;

INSERT INTO funnel_rollup
	SELECT schema_id, version, dead, attempts, class, model, first_model, COUNT(*), SUM(tokens), SUM(heal_tokens),
	       SUM(cost_usd), SUM(heal_cost_usd), SUM(priced), SUM(batch_attempts), SUM(batch_cost_usd)
	FROM outcomes GROUP BY schema_id, version, dead, attempts, class, model, first_model;

CREATE TRIGGER funnel_rollup_in AFTER INSERT ON outcomes BEGIN
	INSERT INTO funnel_rollup VALUES (NEW.schema_id, NEW.version, NEW.dead, NEW.attempts, NEW.class, NEW.model, NEW.first_model,
		1, NEW.tokens, NEW.heal_tokens, NEW.cost_usd, NEW.heal_cost_usd, NEW.priced, NEW.batch_attempts, NEW.batch_cost_usd)
	ON CONFLICT DO UPDATE SET jobs = jobs + 1, tokens = tokens + excluded.tokens, heal_tokens = heal_tokens + excluded.heal_tokens,
		cost_usd = cost_usd + excluded.cost_usd, heal_cost_usd = heal_cost_usd + excluded.heal_cost_usd,
		priced = priced + excluded.priced, batch_attempts = batch_attempts + excluded.batch_attempts,
		batch_cost_usd = batch_cost_usd + excluded.batch_cost_usd;
END;

CREATE TRIGGER funnel_rollup_out AFTER DELETE ON outcomes BEGIN
	UPDATE funnel_rollup SET jobs = jobs - 1, tokens = tokens - OLD.tokens, heal_tokens = heal_tokens - OLD.heal_tokens,
		cost_usd = cost_usd - OLD.cost_usd, heal_cost_usd = heal_cost_usd - OLD.heal_cost_usd, priced = priced - OLD.priced,
		batch_attempts = batch_attempts - OLD.batch_attempts, batch_cost_usd = batch_cost_usd - OLD.batch_cost_usd
	WHERE schema_id = OLD.schema_id AND version = OLD.version AND dead = OLD.dead AND attempts = OLD.attempts
		AND class = OLD.class AND model = OLD.model AND first_model = OLD.first_model;
	DELETE FROM funnel_rollup WHERE schema_id = OLD.schema_id AND version = OLD.version AND dead = OLD.dead
		AND attempts = OLD.attempts AND class = OLD.class AND model = OLD.model AND first_model = OLD.first_model AND jobs = 0;
END;

-- Nothing updates these columns today; if a migration does, the rollup follows.
CREATE TRIGGER funnel_rollup_change AFTER UPDATE OF schema_id, version, dead, attempts, class, model, first_model,
		tokens, heal_tokens, cost_usd, heal_cost_usd, priced, batch_attempts, batch_cost_usd ON outcomes BEGIN
	UPDATE funnel_rollup SET jobs = jobs - 1, tokens = tokens - OLD.tokens, heal_tokens = heal_tokens - OLD.heal_tokens,
		cost_usd = cost_usd - OLD.cost_usd, heal_cost_usd = heal_cost_usd - OLD.heal_cost_usd, priced = priced - OLD.priced,
		batch_attempts = batch_attempts - OLD.batch_attempts, batch_cost_usd = batch_cost_usd - OLD.batch_cost_usd
	WHERE schema_id = OLD.schema_id AND version = OLD.version AND dead = OLD.dead AND attempts = OLD.attempts
		AND class = OLD.class AND model = OLD.model AND first_model = OLD.first_model;
	DELETE FROM funnel_rollup WHERE schema_id = OLD.schema_id AND version = OLD.version AND dead = OLD.dead
		AND attempts = OLD.attempts AND class = OLD.class AND model = OLD.model AND first_model = OLD.first_model AND jobs = 0;
	INSERT INTO funnel_rollup VALUES (NEW.schema_id, NEW.version, NEW.dead, NEW.attempts, NEW.class, NEW.model, NEW.first_model,
		1, NEW.tokens, NEW.heal_tokens, NEW.cost_usd, NEW.heal_cost_usd, NEW.priced, NEW.batch_attempts, NEW.batch_cost_usd)
	ON CONFLICT DO UPDATE SET jobs = jobs + 1, tokens = tokens + excluded.tokens, heal_tokens = heal_tokens + excluded.heal_tokens,
		cost_usd = cost_usd + excluded.cost_usd, heal_cost_usd = heal_cost_usd + excluded.heal_cost_usd,
		priced = priced + excluded.priced, batch_attempts = batch_attempts + excluded.batch_attempts,
		batch_cost_usd = batch_cost_usd + excluded.batch_cost_usd;
END;

-- Per cluster, over the lead failure rows (one per job run and cluster).
CREATE TABLE cluster_rollup (
	cluster    TEXT    PRIMARY KEY,
	jobs       INTEGER NOT NULL,
	dead       INTEGER NOT NULL,
	fixed      INTEGER NOT NULL,
	dead_fixed INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO cluster_rollup
	SELECT cluster, COUNT(*), SUM(dead), SUM(fixed), SUM(dead * fixed) FROM failures WHERE lead = 1 GROUP BY cluster;

CREATE TRIGGER cluster_rollup_in AFTER INSERT ON failures WHEN NEW.lead = 1 BEGIN
	INSERT INTO cluster_rollup VALUES (NEW.cluster, 1, NEW.dead, NEW.fixed, NEW.dead * NEW.fixed)
	ON CONFLICT DO UPDATE SET jobs = jobs + 1, dead = dead + excluded.dead, fixed = fixed + excluded.fixed,
		dead_fixed = dead_fixed + excluded.dead_fixed;
END;

CREATE TRIGGER cluster_rollup_out AFTER DELETE ON failures WHEN OLD.lead = 1 BEGIN
	UPDATE cluster_rollup SET jobs = jobs - 1, dead = dead - OLD.dead, fixed = fixed - OLD.fixed,
		dead_fixed = dead_fixed - OLD.dead * OLD.fixed
	WHERE cluster = OLD.cluster;
	DELETE FROM cluster_rollup WHERE cluster = OLD.cluster AND jobs = 0;
END;

CREATE TRIGGER cluster_rollup_change AFTER UPDATE OF cluster, lead, dead, fixed ON failures BEGIN
	UPDATE cluster_rollup SET jobs = jobs - 1, dead = dead - OLD.dead, fixed = fixed - OLD.fixed,
		dead_fixed = dead_fixed - OLD.dead * OLD.fixed
	WHERE cluster = OLD.cluster AND OLD.lead = 1;
	DELETE FROM cluster_rollup WHERE cluster = OLD.cluster AND jobs = 0;
	INSERT INTO cluster_rollup SELECT NEW.cluster, 1, NEW.dead, NEW.fixed, NEW.dead * NEW.fixed WHERE NEW.lead = 1
	ON CONFLICT DO UPDATE SET jobs = jobs + 1, dead = dead + excluded.dead, fixed = fixed + excluded.fixed,
		dead_fixed = dead_fixed + excluded.dead_fixed;
END;
