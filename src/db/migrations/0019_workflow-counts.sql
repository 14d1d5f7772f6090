CREATE TABLE "workflow_execution_counts" (
	"workflow_id" uuid NOT NULL,
	"status" text NOT NULL,
	"step_id" uuid NOT NULL,
	"shard" integer NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "workflow_execution_counts_workflow_id_status_step_id_shard_pk" PRIMARY KEY("workflow_id","status","step_id","shard")
);
--> statement-breakpoint
CREATE TABLE "workflow_step_counts" (
	"workflow_id" uuid NOT NULL,
	"step_id" uuid NOT NULL,
	"status" text NOT NULL,
	"shard" integer NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "workflow_step_counts_workflow_id_step_id_status_shard_pk" PRIMARY KEY("workflow_id","step_id","status","shard")
);
--> statement-breakpoint
ALTER TABLE "workflow_execution_counts" ADD CONSTRAINT "workflow_execution_counts_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_step_counts" ADD CONSTRAINT "workflow_step_counts_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- No execution or step execution is written from here to this migration's commit (the index's
-- build and the counts below), so none is counted twice or missed.
LOCK TABLE "workflow_executions", "workflow_step_executions" IN SHARE ROW EXCLUSIVE MODE;--> statement-breakpoint
-- The executions list of a rare ending (issue 15): its newest page read from that status's own
-- entries, where the workflow's index walked every execution when none had it.
CREATE INDEX "workflow_executions_workflow_ended_idx" ON "workflow_executions" USING btree ("workflow_id","status","started_at","id") WHERE status IN ('EXITED', 'FAILED', 'CANCELLED');--> statement-breakpoint
-- The exact counts behind GET /workflows/:id (each step's entered, completed, failed and waiting
-- executions, the active ones) and the `total` of its executions list (issue 15), kept by
-- statement-level triggers as migration 0009 keeps event_counts: they see every statement's rows
-- through its transition tables, whatever the path (enrolment, the runner, a webhook step, a
-- cancel, a contact's or workflow's cascade, a project's reset). Executions are counted per
-- workflow and status, the WAITING ones also per current step (the other statuses under the
-- all-zero step, as a key column cannot be NULL), so an execution walking its steps while RUNNING
-- changes no counter. An update writes only the keys whose number changed. A writer adds to the
-- row of its own backend (shard = its pid), as email_counts (migration 0018). Rows deleted with
-- their workflow (its cascade) have no counter left to subtract from.
CREATE FUNCTION "workflow_execution_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workflow_execution_counts AS c (workflow_id, status, step_id, shard, count)
  SELECT r.workflow_id, r.status, CASE WHEN r.status = 'WAITING' THEN coalesce(r.current_step_id, '00000000-0000-0000-0000-000000000000'::uuid) ELSE '00000000-0000-0000-0000-000000000000'::uuid END, pg_backend_pid(), count(*) FROM new_rows AS r
   GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (workflow_id, status, step_id, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "workflow_execution_counts_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workflow_execution_counts AS c (workflow_id, status, step_id, shard, count)
  SELECT d.workflow_id, d.status, d.step_id, pg_backend_pid(), d.n
    FROM (SELECT r.workflow_id, r.status, r.step_id, sum(r.n) AS n
            FROM (SELECT nw.workflow_id, nw.status, CASE WHEN nw.status = 'WAITING' THEN coalesce(nw.current_step_id, '00000000-0000-0000-0000-000000000000'::uuid) ELSE '00000000-0000-0000-0000-000000000000'::uuid END AS step_id, 1 AS n FROM new_rows AS nw
                  UNION ALL
                  SELECT od.workflow_id, od.status, CASE WHEN od.status = 'WAITING' THEN coalesce(od.current_step_id, '00000000-0000-0000-0000-000000000000'::uuid) ELSE '00000000-0000-0000-0000-000000000000'::uuid END, -1 FROM old_rows AS od) AS r
           GROUP BY 1, 2, 3) AS d
   WHERE d.n <> 0
   ORDER BY 1, 2, 3
  ON CONFLICT (workflow_id, status, step_id, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "workflow_execution_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH removed AS MATERIALIZED (
    SELECT r.workflow_id, r.status, CASE WHEN r.status = 'WAITING' THEN coalesce(r.current_step_id, '00000000-0000-0000-0000-000000000000'::uuid) ELSE '00000000-0000-0000-0000-000000000000'::uuid END AS step_id, count(*) AS n FROM old_rows AS r GROUP BY 1, 2, 3
  )
  INSERT INTO workflow_execution_counts AS c (workflow_id, status, step_id, shard, count)
  SELECT r.workflow_id, r.status, r.step_id, pg_backend_pid(), -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM workflows AS w WHERE w.id = r.workflow_id)
   ORDER BY 1, 2, 3
  ON CONFLICT (workflow_id, status, step_id, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "workflow_step_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workflow_step_counts AS c (workflow_id, step_id, status, shard, count)
  SELECT r.workflow_id, r.step_id, r.status, pg_backend_pid(), count(*) FROM new_rows AS r
   GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (workflow_id, step_id, status, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "workflow_step_counts_move"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workflow_step_counts AS c (workflow_id, step_id, status, shard, count)
  SELECT d.workflow_id, d.step_id, d.status, pg_backend_pid(), d.n
    FROM (SELECT r.workflow_id, r.step_id, r.status, sum(r.n) AS n
            FROM (SELECT workflow_id, step_id, status, 1 AS n FROM new_rows
                  UNION ALL
                  SELECT workflow_id, step_id, status, -1 FROM old_rows) AS r
           GROUP BY 1, 2, 3) AS d
   WHERE d.n <> 0
   ORDER BY 1, 2, 3
  ON CONFLICT (workflow_id, step_id, status, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE FUNCTION "workflow_step_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH removed AS MATERIALIZED (SELECT r.workflow_id, r.step_id, r.status, count(*) AS n FROM old_rows AS r GROUP BY 1, 2, 3)
  INSERT INTO workflow_step_counts AS c (workflow_id, step_id, status, shard, count)
  SELECT r.workflow_id, r.step_id, r.status, pg_backend_pid(), -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM workflows AS w WHERE w.id = r.workflow_id)
   ORDER BY 1, 2, 3
  ON CONFLICT (workflow_id, step_id, status, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE TRIGGER "workflow_executions_count_insert" AFTER INSERT ON "workflow_executions" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "workflow_execution_counts_add"();--> statement-breakpoint
CREATE TRIGGER "workflow_executions_count_update" AFTER UPDATE ON "workflow_executions" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "workflow_execution_counts_move"();--> statement-breakpoint
CREATE TRIGGER "workflow_executions_count_delete" AFTER DELETE ON "workflow_executions" REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "workflow_execution_counts_subtract"();--> statement-breakpoint
CREATE TRIGGER "workflow_step_executions_count_insert" AFTER INSERT ON "workflow_step_executions" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "workflow_step_counts_add"();--> statement-breakpoint
CREATE TRIGGER "workflow_step_executions_count_update" AFTER UPDATE ON "workflow_step_executions" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "workflow_step_counts_move"();--> statement-breakpoint
CREATE TRIGGER "workflow_step_executions_count_delete" AFTER DELETE ON "workflow_step_executions" REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "workflow_step_counts_subtract"();--> statement-breakpoint
INSERT INTO "workflow_execution_counts" ("workflow_id", "status", "step_id", "shard", "count")
SELECT r.workflow_id, r.status, CASE WHEN r.status = 'WAITING' THEN coalesce(r.current_step_id, '00000000-0000-0000-0000-000000000000'::uuid) ELSE '00000000-0000-0000-0000-000000000000'::uuid END, 0, count(*) FROM "workflow_executions" AS r GROUP BY 1, 2, 3;--> statement-breakpoint
INSERT INTO "workflow_step_counts" ("workflow_id", "step_id", "status", "shard", "count")
SELECT "workflow_id", "step_id", "status", 0, count(*) FROM "workflow_step_executions" GROUP BY 1, 2, 3;
