CREATE TABLE `stats_completions` (
	`tenant` text NOT NULL,
	`seq` integer NOT NULL,
	`session_id` text NOT NULL,
	PRIMARY KEY(`tenant`, `seq`),
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `stats_groups` (
	`tenant` text NOT NULL,
	`group_key` text NOT NULL,
	`model_version` text NOT NULL,
	`env` text,
	`mode` text NOT NULL,
	`memory` text NOT NULL,
	`sessions` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`doc` text NOT NULL,
	PRIMARY KEY(`tenant`, `group_key`)
);
--> statement-breakpoint
CREATE TABLE `stats_retries` (
	`tenant` text NOT NULL,
	`chain_key` text NOT NULL,
	`session_id` text NOT NULL,
	`attempted` integer NOT NULL,
	`success` integer NOT NULL,
	`played` integer NOT NULL,
	`return` real NOT NULL,
	`streak` integer,
	PRIMARY KEY(`tenant`, `chain_key`, `session_id`),
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `stats_tenants` (
	`tenant` text PRIMARY KEY NOT NULL,
	`completed` integer NOT NULL
);
