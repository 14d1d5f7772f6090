CREATE TABLE "campaign_outcomes" (
	"campaign_id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"sent" integer DEFAULT 0 NOT NULL,
	"delivered" integer DEFAULT 0 NOT NULL,
	"opened" integer DEFAULT 0 NOT NULL,
	"clicked" integer DEFAULT 0 NOT NULL,
	"bounced" integer DEFAULT 0 NOT NULL,
	"complained" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "email_outcome_slots" (
	"project_id" text NOT NULL,
	"slot" timestamp with time zone NOT NULL,
	"sent" integer DEFAULT 0 NOT NULL,
	"delivered" integer DEFAULT 0 NOT NULL,
	"opened" integer DEFAULT 0 NOT NULL,
	"clicked" integer DEFAULT 0 NOT NULL,
	"bounced" integer DEFAULT 0 NOT NULL,
	"complained" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "email_outcome_slots_project_id_slot_pk" PRIMARY KEY("project_id","slot")
);
--> statement-breakpoint
ALTER TABLE "campaign_outcomes" ADD CONSTRAINT "campaign_outcomes_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "email_outcome_slots" ADD CONSTRAINT "email_outcome_slots_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- Fill both summaries from the emails already stored (analytics/outcome-rollups.ts keeps them from now on).
INSERT INTO "email_outcome_slots" ("project_id", "slot", "sent", "delivered", "opened", "clicked", "bounced", "complained")
SELECT e.project_id, date_bin('15 minutes', o.at, TIMESTAMPTZ '2000-01-01 00:00:00+00'),
       count(*) FILTER (WHERE o.outcome = 'sent'), count(*) FILTER (WHERE o.outcome = 'delivered'), count(*) FILTER (WHERE o.outcome = 'opened'),
       count(*) FILTER (WHERE o.outcome = 'clicked'), count(*) FILTER (WHERE o.outcome = 'bounced'), count(*) FILTER (WHERE o.outcome = 'complained')
  FROM "emails" AS e
 CROSS JOIN LATERAL (VALUES ('sent', coalesce(e.sent_at, e.bounced_at)), ('delivered', e.delivered_at), ('opened', e.opened_at),
                            ('clicked', e.clicked_at), ('bounced', e.bounced_at), ('complained', e.complained_at)) AS o(outcome, at)
 WHERE o.at IS NOT NULL
 GROUP BY 1, 2;
--> statement-breakpoint
INSERT INTO "campaign_outcomes" ("campaign_id", "project_id", "sent", "delivered", "opened", "clicked", "bounced", "complained")
SELECT e.campaign_id, e.project_id,
       count(*) FILTER (WHERE coalesce(e.sent_at, e.bounced_at) IS NOT NULL), count(e.delivered_at), count(e.opened_at),
       count(e.clicked_at), count(e.bounced_at), count(e.complained_at)
  FROM "emails" AS e
 WHERE e.campaign_id IS NOT NULL
 GROUP BY 1, 2;
