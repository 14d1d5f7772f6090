CREATE TABLE "event_day_counts" (
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"day" date NOT NULL,
	"shard" smallint NOT NULL,
	"count" bigint NOT NULL,
	CONSTRAINT "event_day_counts_project_id_day_name_shard_pk" PRIMARY KEY("project_id","day","name","shard")
);
--> statement-breakpoint
ALTER TABLE "event_day_counts" ADD CONSTRAINT "event_day_counts_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- The exact count per project, name and UTC day behind counts over a time range (issue 15), kept by
-- the statement-level triggers that keep event_counts (migration 0009), in the same statements. No
-- event is written or deleted from here to this migration's commit: the counts below are taken
-- after every transaction that wrote events with the functions before has committed.
LOCK TABLE "events" IN SHARE ROW EXCLUSIVE MODE;--> statement-breakpoint
-- Two statements, each taking its rows in key order, event_counts before event_day_counts, in both
-- functions: concurrent writers of one shard lock rows in the same order.
CREATE OR REPLACE FUNCTION "event_counts_add"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_counts AS c (project_id, name, shard, count)
  SELECT r.project_id, r.name, pg_backend_pid() % 16, count(*) FROM new_rows AS r
   GROUP BY r.project_id, r.name ORDER BY r.project_id, r.name
  ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count;
  INSERT INTO event_day_counts AS c (project_id, name, day, shard, count)
  SELECT r.project_id, r.name, (r.created_at AT TIME ZONE 'UTC')::date, pg_backend_pid() % 16, count(*) FROM new_rows AS r
   GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION "event_counts_subtract"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH removed AS MATERIALIZED (SELECT r.project_id, r.name, count(*) AS n FROM old_rows AS r GROUP BY r.project_id, r.name)
  INSERT INTO event_counts AS c (project_id, name, shard, count)
  SELECT r.project_id, r.name, pg_backend_pid() % 16, -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
   ORDER BY r.project_id, r.name
  ON CONFLICT (project_id, name, shard) DO UPDATE SET count = c.count + excluded.count;
  WITH removed AS MATERIALIZED (
    SELECT r.project_id, r.name, (r.created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM old_rows AS r GROUP BY 1, 2, 3
  )
  INSERT INTO event_day_counts AS c (project_id, name, day, shard, count)
  SELECT r.project_id, r.name, r.day, pg_backend_pid() % 16, -r.n FROM removed AS r
   WHERE EXISTS (SELECT 1 FROM projects AS p WHERE p.id = r.project_id)
   ORDER BY r.project_id, r.name, r.day
  ON CONFLICT (project_id, name, day, shard) DO UPDATE SET count = c.count + excluded.count;
  RETURN NULL;
END $$;--> statement-breakpoint
INSERT INTO "event_day_counts" ("project_id", "name", "day", "shard", "count")
SELECT "project_id", "name", ("created_at" AT TIME ZONE 'UTC')::date, 0, count(*) FROM "events" GROUP BY 1, 2, 3;
