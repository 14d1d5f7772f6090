-- Billing usage snapshots (billing/usage.ts): per project and month, the counted emails created
-- before a moment, so a capped send counts only the emails since then. No back-fill: a project
-- without a row counts its month from the emails, and its first capped send writes the row.
CREATE TABLE "billing_usage_snapshots" (
	"project_id" text NOT NULL,
	"period" text NOT NULL,
	"counted_before" timestamp with time zone NOT NULL,
	"transactional" integer DEFAULT 0 NOT NULL,
	"campaigns" integer DEFAULT 0 NOT NULL,
	"workflows" integer DEFAULT 0 NOT NULL,
	"waiting" uuid[] DEFAULT '{}'::uuid[] NOT NULL,
	CONSTRAINT "billing_usage_snapshots_project_id_period_pk" PRIMARY KEY("project_id","period")
);
--> statement-breakpoint
ALTER TABLE "billing_usage_snapshots" ADD CONSTRAINT "billing_usage_snapshots_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;