CREATE TABLE "auth_throttle" (
	"key" text PRIMARY KEY NOT NULL,
	"count" integer NOT NULL,
	"window_start" timestamp with time zone NOT NULL,
	"locked_until" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "billing_usage_carry" (
	"project_id" text NOT NULL,
	"period" text NOT NULL,
	"category" text NOT NULL,
	"count" integer NOT NULL,
	CONSTRAINT "billing_usage_carry_project_id_period_category_pk" PRIMARY KEY("project_id","period","category")
);
--> statement-breakpoint
CREATE TABLE "billing_warnings" (
	"project_id" text NOT NULL,
	"category" text NOT NULL,
	"period" text NOT NULL,
	"level" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "billing_warnings_project_id_category_period_level_pk" PRIMARY KEY("project_id","category","period","level")
);
--> statement-breakpoint
CREATE TABLE "payment_events" (
	"id" text PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "project_billing" (
	"project_id" text PRIMARY KEY NOT NULL,
	"limit_transactional" integer,
	"limit_campaigns" integer,
	"limit_workflows" integer,
	"limit_inbound" integer,
	"plan" text,
	"stripe_customer_id" text,
	"stripe_subscription_id" text,
	"subscription_status" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "project_invitations" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"email" text NOT NULL,
	"role" text NOT NULL,
	"invited_by" text,
	"expires_at" timestamp with time zone NOT NULL,
	"accepted_at" timestamp with time zone,
	"accepted_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workflow_executions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"workflow_id" uuid NOT NULL,
	"contact_id" text NOT NULL,
	"status" text NOT NULL,
	"current_step_id" uuid,
	"context" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"depth" integer DEFAULT 0 NOT NULL,
	"due_at" timestamp with time zone,
	"waiting_event" text,
	"lease_until" timestamp with time zone,
	"exit_reason" text,
	"error" text,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workflow_step_executions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"execution_id" uuid NOT NULL,
	"workflow_id" uuid NOT NULL,
	"step_id" uuid NOT NULL,
	"project_id" text NOT NULL,
	"status" text NOT NULL,
	"attempt" integer DEFAULT 1 NOT NULL,
	"output" jsonb,
	"error" text,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "workflow_steps" (
	"id" uuid PRIMARY KEY NOT NULL,
	"workflow_id" uuid NOT NULL,
	"project_id" text NOT NULL,
	"type" text NOT NULL,
	"name" text,
	"config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"position" jsonb,
	"template_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "workflow_transitions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"workflow_id" uuid NOT NULL,
	"from_step_id" uuid NOT NULL,
	"to_step_id" uuid NOT NULL,
	"branch" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workflow_transitions_no_self_link" CHECK ("workflow_transitions"."from_step_id" <> "workflow_transitions"."to_step_id")
);
--> statement-breakpoint
CREATE TABLE "workflows" (
	"id" uuid PRIMARY KEY NOT NULL,
	"project_id" text NOT NULL,
	"name" text NOT NULL,
	"description" text,
	"trigger_type" text DEFAULT 'EVENT' NOT NULL,
	"event_name" text NOT NULL,
	"enabled" boolean DEFAULT false NOT NULL,
	"allow_reentry" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "projects" ALTER COLUMN "secret_key" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "emails" ADD COLUMN "handed_off_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "secret_key_hash" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "secret_key_prefix" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "timezone" text DEFAULT 'UTC' NOT NULL;--> statement-breakpoint
ALTER TABLE "billing_usage_carry" ADD CONSTRAINT "billing_usage_carry_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "billing_warnings" ADD CONSTRAINT "billing_warnings_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_billing" ADD CONSTRAINT "project_billing_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_invitations" ADD CONSTRAINT "project_invitations_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_invitations" ADD CONSTRAINT "project_invitations_invited_by_users_id_fk" FOREIGN KEY ("invited_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_invitations" ADD CONSTRAINT "project_invitations_accepted_by_users_id_fk" FOREIGN KEY ("accepted_by") REFERENCES "public"."users"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sessions" ADD CONSTRAINT "sessions_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_executions" ADD CONSTRAINT "workflow_executions_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_executions" ADD CONSTRAINT "workflow_executions_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_executions" ADD CONSTRAINT "workflow_executions_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "public"."contacts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_step_executions" ADD CONSTRAINT "workflow_step_executions_execution_id_workflow_executions_id_fk" FOREIGN KEY ("execution_id") REFERENCES "public"."workflow_executions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_step_executions" ADD CONSTRAINT "workflow_step_executions_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_step_executions" ADD CONSTRAINT "workflow_step_executions_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_steps" ADD CONSTRAINT "workflow_steps_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_steps" ADD CONSTRAINT "workflow_steps_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_steps" ADD CONSTRAINT "workflow_steps_template_id_templates_id_fk" FOREIGN KEY ("template_id") REFERENCES "public"."templates"("id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_transitions" ADD CONSTRAINT "workflow_transitions_workflow_id_workflows_id_fk" FOREIGN KEY ("workflow_id") REFERENCES "public"."workflows"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_transitions" ADD CONSTRAINT "workflow_transitions_from_step_id_workflow_steps_id_fk" FOREIGN KEY ("from_step_id") REFERENCES "public"."workflow_steps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflow_transitions" ADD CONSTRAINT "workflow_transitions_to_step_id_workflow_steps_id_fk" FOREIGN KEY ("to_step_id") REFERENCES "public"."workflow_steps"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "workflows" ADD CONSTRAINT "workflows_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "auth_throttle_window_idx" ON "auth_throttle" USING btree ("window_start");--> statement-breakpoint
CREATE UNIQUE INDEX "project_invitations_pending_key" ON "project_invitations" USING btree ("project_id","email") WHERE accepted_at IS NULL;--> statement-breakpoint
CREATE INDEX "project_invitations_project_idx" ON "project_invitations" USING btree ("project_id","created_at");--> statement-breakpoint
CREATE INDEX "sessions_user_idx" ON "sessions" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "workflow_executions_active_key" ON "workflow_executions" USING btree ("workflow_id","contact_id") WHERE status IN ('RUNNING', 'WAITING');--> statement-breakpoint
CREATE INDEX "workflow_executions_workflow_contact_idx" ON "workflow_executions" USING btree ("workflow_id","contact_id");--> statement-breakpoint
CREATE INDEX "workflow_executions_workflow_started_idx" ON "workflow_executions" USING btree ("workflow_id","started_at","id");--> statement-breakpoint
CREATE INDEX "workflow_executions_due_idx" ON "workflow_executions" USING btree ("due_at") WHERE status IN ('RUNNING', 'WAITING');--> statement-breakpoint
CREATE INDEX "workflow_executions_waiting_event_idx" ON "workflow_executions" USING btree ("project_id","contact_id","waiting_event") WHERE status = 'WAITING';--> statement-breakpoint
CREATE INDEX "workflow_executions_contact_idx" ON "workflow_executions" USING btree ("contact_id");--> statement-breakpoint
CREATE INDEX "workflow_executions_project_due_idx" ON "workflow_executions" USING btree ("project_id","due_at") WHERE status = 'WAITING';--> statement-breakpoint
CREATE INDEX "workflow_step_executions_execution_idx" ON "workflow_step_executions" USING btree ("execution_id","started_at","id");--> statement-breakpoint
CREATE INDEX "workflow_step_executions_workflow_step_idx" ON "workflow_step_executions" USING btree ("workflow_id","step_id","status");--> statement-breakpoint
CREATE INDEX "workflow_steps_workflow_idx" ON "workflow_steps" USING btree ("workflow_id","created_at","id");--> statement-breakpoint
CREATE INDEX "workflow_steps_template_idx" ON "workflow_steps" USING btree ("template_id") WHERE template_id IS NOT NULL;--> statement-breakpoint
CREATE INDEX "workflow_steps_project_type_idx" ON "workflow_steps" USING btree ("project_id","type");--> statement-breakpoint
CREATE UNIQUE INDEX "workflow_transitions_from_branch_key" ON "workflow_transitions" USING btree ("from_step_id",coalesce("branch", ''));--> statement-breakpoint
CREATE INDEX "workflow_transitions_workflow_idx" ON "workflow_transitions" USING btree ("workflow_id");--> statement-breakpoint
CREATE INDEX "workflow_transitions_to_idx" ON "workflow_transitions" USING btree ("to_step_id");--> statement-breakpoint
CREATE INDEX "workflows_project_created_idx" ON "workflows" USING btree ("project_id","created_at","id");--> statement-breakpoint
CREATE INDEX "workflows_project_event_enabled_idx" ON "workflows" USING btree ("project_id","event_name") WHERE enabled;--> statement-breakpoint
CREATE INDEX "emails_project_sent_at_idx" ON "emails" USING btree ("project_id","sent_at") WHERE sent_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "emails_project_delivered_at_idx" ON "emails" USING btree ("project_id","delivered_at") WHERE delivered_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "emails_project_opened_at_idx" ON "emails" USING btree ("project_id","opened_at") WHERE opened_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "emails_project_clicked_at_idx" ON "emails" USING btree ("project_id","clicked_at") WHERE clicked_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "emails_project_bounced_at_idx" ON "emails" USING btree ("project_id","bounced_at") WHERE bounced_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "emails_project_complained_at_idx" ON "emails" USING btree ("project_id","complained_at") WHERE complained_at IS NOT NULL;--> statement-breakpoint
CREATE INDEX "events_campaign_clicks_idx" ON "events" USING btree (("data"->>'campaignId'),("data"->>'link')) WHERE name = 'email.clicked';--> statement-breakpoint
CREATE UNIQUE INDEX "projects_secret_key_hash_key" ON "projects" USING btree ("secret_key_hash");