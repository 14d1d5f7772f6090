-- A campaign's outcomes per UTC quarter hour, written with the project's slots and the campaign's
-- totals (analytics/outcome-rollups.ts): a campaign's series sums its whole slots instead of
-- reading every one of its emails (1.8 s for a campaign of 1,000,000). docs/decisions.md § Analytics.
CREATE TABLE "campaign_outcome_slots" (
	"project_id" text NOT NULL,
	"campaign_id" uuid NOT NULL,
	"slot" timestamp with time zone NOT NULL,
	"sent" integer DEFAULT 0 NOT NULL,
	"delivered" integer DEFAULT 0 NOT NULL,
	"opened" integer DEFAULT 0 NOT NULL,
	"clicked" integer DEFAULT 0 NOT NULL,
	"bounced" integer DEFAULT 0 NOT NULL,
	"complained" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "campaign_outcome_slots_project_id_campaign_id_slot_pk" PRIMARY KEY("project_id","campaign_id","slot")
);
--> statement-breakpoint
ALTER TABLE "campaign_outcome_slots" ADD CONSTRAINT "campaign_outcome_slots_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
-- Fill it from the campaign emails already stored, as migration 0006 filled the other two.
INSERT INTO "campaign_outcome_slots" ("project_id", "campaign_id", "slot", "sent", "delivered", "opened", "clicked", "bounced", "complained")
SELECT e.project_id, e.campaign_id, date_bin('15 minutes', o.at, TIMESTAMPTZ '2000-01-01 00:00:00+00'),
       count(*) FILTER (WHERE o.outcome = 'sent'), count(*) FILTER (WHERE o.outcome = 'delivered'), count(*) FILTER (WHERE o.outcome = 'opened'),
       count(*) FILTER (WHERE o.outcome = 'clicked'), count(*) FILTER (WHERE o.outcome = 'bounced'), count(*) FILTER (WHERE o.outcome = 'complained')
  FROM "emails" AS e
 CROSS JOIN LATERAL (VALUES ('sent', coalesce(e.sent_at, e.bounced_at)), ('delivered', e.delivered_at), ('opened', e.opened_at),
                            ('clicked', e.clicked_at), ('bounced', e.bounced_at), ('complained', e.complained_at)) AS o(outcome, at)
 WHERE e.campaign_id IS NOT NULL AND o.at IS NOT NULL
 GROUP BY 1, 2, 3;
