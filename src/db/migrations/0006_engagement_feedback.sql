CREATE TABLE "sns_messages" (
	"message_id" text PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "project_suspensions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"reason" text NOT NULL,
	"bounce_rate_7d" double precision NOT NULL,
	"bounce_rate_all" double precision NOT NULL,
	"complaint_rate_7d" double precision NOT NULL,
	"complaint_rate_all" double precision NOT NULL,
	"sent_last_7_days" integer NOT NULL,
	"sent_all_time" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "project_suspensions" ADD CONSTRAINT "project_suspensions_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "sns_messages_received_idx" ON "sns_messages" USING btree ("received_at");--> statement-breakpoint
CREATE INDEX "project_suspensions_project_created_idx" ON "project_suspensions" USING btree ("project_id","created_at");