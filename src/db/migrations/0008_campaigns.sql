CREATE TABLE "campaigns" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"subject" text NOT NULL,
	"body" text NOT NULL,
	"from_email" text NOT NULL,
	"from_name" text,
	"reply_to" text,
	"type" text DEFAULT 'MARKETING' NOT NULL,
	"status" text DEFAULT 'DRAFT' NOT NULL,
	"audience_type" text DEFAULT 'ALL' NOT NULL,
	"audience_condition" jsonb,
	"segment_id" uuid,
	"scheduled_for" timestamp with time zone,
	"total_recipients" integer DEFAULT 0 NOT NULL,
	"sent_at" timestamp with time zone,
	"completed_at" timestamp with time zone,
	"cancelled_at" timestamp with time zone,
	"send_job_id" uuid,
	"fanout_cursor_at" timestamp with time zone,
	"fanout_cursor_id" text,
	"fanout_done" boolean DEFAULT false NOT NULL,
	"pending_count" integer DEFAULT 0 NOT NULL,
	"progress_at" timestamp with time zone,
	"heartbeat_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "campaigns" ADD CONSTRAINT "campaigns_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "campaigns_project_created_idx" ON "campaigns" USING btree ("project_id","created_at","id");--> statement-breakpoint
CREATE INDEX "campaigns_project_updated_idx" ON "campaigns" USING btree ("project_id","updated_at","id");--> statement-breakpoint
CREATE INDEX "campaigns_project_lower_name_idx" ON "campaigns" USING btree ("project_id",lower("name"),"id");--> statement-breakpoint
CREATE INDEX "campaigns_project_status_idx" ON "campaigns" USING btree ("project_id","status");--> statement-breakpoint
CREATE INDEX "campaigns_active_idx" ON "campaigns" USING btree ("status","scheduled_for") WHERE "campaigns"."status" IN ('SCHEDULED', 'SENDING');