CREATE TABLE `models` (
	`version` text PRIMARY KEY NOT NULL,
	`parent` text,
	`job_id` text,
	`checkpoint_dir` text NOT NULL,
	`status` text NOT NULL,
	`metrics` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `reflections` (
	`session_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`text` text NOT NULL,
	`source` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`session_id`, `attempt`),
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`tenant` text NOT NULL,
	`task_id` text NOT NULL,
	`env` text,
	`mode` text NOT NULL,
	`status` text NOT NULL,
	`instructions` text NOT NULL,
	`max_attempts` integer NOT NULL,
	`max_steps` integer NOT NULL,
	`memory` text NOT NULL,
	`sampling` text NOT NULL,
	`model_version` text NOT NULL,
	`metadata` text NOT NULL,
	`next_attempt` integer NOT NULL,
	`next_step` integer NOT NULL,
	`attempts` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sessions_tenant_id` ON `sessions` (`tenant`,`id`);--> statement-breakpoint
CREATE INDEX `sessions_task` ON `sessions` (`task_id`);--> statement-breakpoint
CREATE INDEX `sessions_status` ON `sessions` (`status`);--> statement-breakpoint
CREATE TABLE `steps` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`session_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`step` integer NOT NULL,
	`kind` text NOT NULL,
	`observation` text NOT NULL,
	`reward` real NOT NULL,
	`done` integer NOT NULL,
	`success` integer NOT NULL,
	`invalid_action` integer NOT NULL,
	`available_actions` text,
	`info` text,
	`prompt` text,
	`output` text,
	`action` text,
	`prompt_token_ids` text,
	`output_token_ids` text,
	`logprobs` text,
	`dropped_steps` integer,
	`model_version` text NOT NULL,
	`request_hash` text NOT NULL,
	`answer` text,
	`return` real,
	`advantage` real,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `steps_position` ON `steps` (`session_id`,`attempt`,`step`,`kind`);--> statement-breakpoint
CREATE TABLE `training_jobs` (
	`id` text PRIMARY KEY NOT NULL,
	`algorithm` text NOT NULL,
	`status` text NOT NULL,
	`config` text NOT NULL,
	`progress` real DEFAULT 0 NOT NULL,
	`metrics` text NOT NULL,
	`result_version` text,
	`error` text,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`finished_at` integer
);
