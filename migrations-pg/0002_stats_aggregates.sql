CREATE TABLE "stats_completions" (
	"tenant" text NOT NULL,
	"seq" integer NOT NULL,
	"session_id" text NOT NULL,
	CONSTRAINT "stats_completions_tenant_seq_pk" PRIMARY KEY("tenant","seq")
);
--> statement-breakpoint
CREATE TABLE "stats_groups" (
	"tenant" text NOT NULL,
	"group_key" text NOT NULL,
	"model_version" text NOT NULL,
	"env" text,
	"mode" text NOT NULL,
	"memory" text NOT NULL,
	"sessions" integer NOT NULL,
	"updated_at" bigint NOT NULL,
	"doc" json NOT NULL,
	CONSTRAINT "stats_groups_tenant_group_key_pk" PRIMARY KEY("tenant","group_key")
);
--> statement-breakpoint
CREATE TABLE "stats_retries" (
	"tenant" text NOT NULL,
	"chain_key" text NOT NULL,
	"session_id" text NOT NULL,
	"attempted" boolean NOT NULL,
	"success" boolean NOT NULL,
	"played" boolean NOT NULL,
	"return" double precision NOT NULL,
	"streak" integer,
	CONSTRAINT "stats_retries_tenant_chain_key_session_id_pk" PRIMARY KEY("tenant","chain_key","session_id")
);
--> statement-breakpoint
CREATE TABLE "stats_tenants" (
	"tenant" text PRIMARY KEY NOT NULL,
	"completed" integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE "stats_completions" ADD CONSTRAINT "stats_completions_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "stats_retries" ADD CONSTRAINT "stats_retries_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE no action ON UPDATE no action;