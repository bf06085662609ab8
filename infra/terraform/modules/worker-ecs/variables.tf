variable "name" {
  description = "Name of the service, task family, roles and log group."
  type        = string
  default     = "exactly-worker"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,48}$", var.name))
    error_message = "The name must be 1-48 characters of letters, digits, '-' and '_' (it prefixes IAM role names)."
  }
}

variable "cluster_arn" {
  description = "ARN of the ECS cluster. Backlog-per-task autoscaling reads RunningTaskCount from Container Insights, so enable containerInsights on it."
  type        = string

  validation {
    condition     = can(regex("^arn:[^:]+:ecs:[^:]+:[0-9]{12}:cluster/.+$", var.cluster_arn))
    error_message = "cluster_arn must be an ECS cluster ARN (arn:<partition>:ecs:<region>:<account>:cluster/<name>)."
  }
}

variable "container_image" {
  description = "Image of the worker. Its entrypoint must be the worker binary; container_command is appended."
  type        = string
}

variable "container_command" {
  description = "Arguments after the entrypoint."
  type        = list(string)
  default     = ["run"]
}

variable "cpu" {
  description = "Task CPU units (256, 512, 1024, 2048, 4096, 8192 or 16384)."
  type        = number
  default     = 256

  validation {
    condition     = contains([256, 512, 1024, 2048, 4096, 8192, 16384], var.cpu)
    error_message = "cpu must be a Fargate size: 256, 512, 1024, 2048, 4096, 8192 or 16384."
  }
}

variable "memory" {
  description = "Task memory in MiB; it must fit the CPU size (Fargate's table)."
  type        = number
  default     = 512
}

variable "cpu_architecture" {
  description = "ARM64 or X86_64; the image must match."
  type        = string
  default     = "ARM64"

  validation {
    condition     = contains(["ARM64", "X86_64"], var.cpu_architecture)
    error_message = "cpu_architecture must be ARM64 or X86_64."
  }
}

variable "subnet_ids" {
  description = "Subnets of the tasks. They need a route to SQS, DynamoDB, CloudWatch Logs and the image registry (NAT or VPC endpoints)."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0
    error_message = "Give at least one subnet."
  }
}

variable "security_group_ids" {
  description = "Security groups of the tasks. The worker only makes outbound HTTPS calls; port metrics_port serves /metrics, /healthz and /readyz."
  type        = list(string)

  validation {
    condition     = length(var.security_group_ids) > 0
    error_message = "Give at least one security group."
  }
}

variable "assign_public_ip" {
  description = "Give tasks a public IP (only for public subnets without NAT)."
  type        = bool
  default     = false
}

variable "desired_count" {
  description = "Number of tasks at creation. Afterwards autoscaling owns the count (the service ignores later changes to it)."
  type        = number
  default     = 1
}

variable "queues" {
  description = "Queues the worker consumes, keyed by a static name. arn and url are required; dlq_arn is the queue's DLQ, needed with move_to_dlq. The queue module's worker_queue output has this shape."
  type = map(object({
    arn                        = string
    url                        = string
    visibility_timeout_seconds = optional(number)
    dlq_arn                    = optional(string)
  }))

  validation {
    condition     = length(var.queues) > 0
    error_message = "Give at least one queue."
  }
}

variable "dedup_table_name" {
  description = "Dedup table name (WORKER_DEDUP_TABLE)."
  type        = string
  default     = "exactly-dedup"
}

variable "dedup_table_arn" {
  description = "Dedup table ARN; the task role may use only this table for dedup records."
  type        = string
}

variable "ledger_table_name" {
  description = "Ledger table name (WORKER_LEDGER_TABLE), for effect = \"ledger\"."
  type        = string
  default     = null
}

variable "ledger_table_arn" {
  description = "Ledger table ARN, for effect = \"ledger\"."
  type        = string
  default     = null
}

variable "outbox_table_name" {
  description = "Outbox table name (WORKER_OUTBOX_TABLE), for an effect that sends messages through the transactional outbox (the outbox-table module; the relay publishes them). Null: no outbox, no grant. Needs outbox_table_arn."
  type        = string
  default     = null
}

variable "outbox_table_arn" {
  description = "Outbox table ARN, with outbox_table_name: the role gets dynamodb:GetItem, PutItem, UpdateItem and ConditionCheckItem on this table only."
  type        = string
  default     = null
}

variable "effect" {
  description = "WORKER_EFFECT: ledger (DynamoDB writes committed in one transaction with the dedup record; needs ledger_table_name and ledger_table_arn), http (POST to http_url with the dedup key as idempotency key), noop, or the name of an effect your own binary registers (README, \"Your own effect\"; its image built with make image MAIN=./your/main)."
  type        = string

  validation {
    condition     = can(regex("^[^\\s]+$", var.effect))
    error_message = "effect must be a non-empty name without spaces: ledger, http, noop, or one your binary registers with effect.Register."
  }
}

variable "http_url" {
  description = "WORKER_HTTP_URL, for effect = \"http\"."
  type        = string
  default     = null
}

variable "dedup_key" {
  description = "WORKER_DEDUP_KEY: auto, body, attr:NAME or json:/pointer."
  type        = string
  default     = "auto"

  validation {
    condition     = can(regex("^(auto|body|attr:.+|json:/.*)$", var.dedup_key))
    error_message = "dedup_key must be auto, body, attr:NAME or json:/pointer."
  }
}

variable "dedup_ttl" {
  description = "WORKER_DEDUP_TTL, a Go duration: how long a completed record blocks duplicates."
  type        = string
  default     = "24h"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$", var.dedup_ttl))
    error_message = "dedup_ttl must be a Go duration such as 24h or 72h30m."
  }
}

variable "namespace" {
  description = "WORKER_NAMESPACE, the first part of every dedup key."
  type        = string
  default     = "exactly"
}

variable "concurrency" {
  description = "WORKER_CONCURRENCY, the bound on messages in flight per task. Null keeps the worker's default."
  type        = number
  default     = null

  validation {
    condition     = var.concurrency == null || coalesce(var.concurrency, 1) >= 1
    error_message = "concurrency must be at least 1."
  }
}

variable "shutdown_timeout_seconds" {
  description = "WORKER_SHUTDOWN_TIMEOUT in seconds: how long running handlers may finish after SIGTERM. Must be below stop_timeout."
  type        = number
  default     = 90

  validation {
    condition     = var.shutdown_timeout_seconds >= 1 && floor(var.shutdown_timeout_seconds) == var.shutdown_timeout_seconds
    error_message = "shutdown_timeout_seconds must be a whole number of at least 1."
  }
}

variable "stop_timeout" {
  description = "Container stopTimeout in seconds: ECS sends SIGKILL this long after SIGTERM. Fargate allows at most 120."
  type        = number
  default     = 120

  validation {
    condition     = var.stop_timeout >= 2 && var.stop_timeout <= 120
    error_message = "stop_timeout must be from 2 to 120 seconds (Fargate's maximum)."
  }
}

variable "metrics_port" {
  description = "Port of /metrics, /healthz and /readyz (WORKER_METRICS_ADDR=:port)."
  type        = number
  default     = 9090

  validation {
    condition     = var.metrics_port >= 1 && var.metrics_port <= 65535
    error_message = "metrics_port must be a TCP port."
  }
}

variable "metrics_format" {
  description = "WORKER_METRICS_FORMAT: prometheus (/metrics only), emf (CloudWatch Embedded Metric Format lines on stdout, which the awslogs driver turns into the metrics the alarms module watches) or both."
  type        = string
  default     = "both"

  validation {
    condition     = contains(["prometheus", "emf", "both"], var.metrics_format)
    error_message = "metrics_format must be prometheus, emf or both."
  }
}

variable "log_format" {
  description = "WORKER_LOG_FORMAT: json, text or auto (text on a terminal)."
  type        = string
  default     = "json"

  validation {
    condition     = contains(["json", "text", "auto"], var.log_format)
    error_message = "log_format must be json, text or auto."
  }
}

variable "log_level" {
  description = "WORKER_LOG_LEVEL: debug, info, warn or error."
  type        = string
  default     = "info"

  validation {
    condition     = contains(["debug", "info", "warn", "error"], var.log_level)
    error_message = "log_level must be debug, info, warn or error."
  }
}

variable "move_to_dlq" {
  description = "WORKER_MOVE_TO_DLQ: send a permanently failing message straight to its queue's DLQ instead of cycling it until maxReceiveCount (which also dead-letters the rest of its FIFO group, handed back with it each time). The worker's default. Only then does the role get sqs:SendMessage (and sqs:GetQueueUrl) on the dlq_arns; every queue needs one."
  type        = bool
  default     = true
}

variable "environment" {
  description = "Extra environment variables for the container, such as a custom effect's own settings. The settings this module manages (WORKER_* and AWS_REGION) cannot be set here; secrets go in secrets."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([for k in keys(var.environment) : !contains([
      "AWS_REGION", "WORKER_QUEUES", "WORKER_DEDUP_TABLE", "WORKER_EFFECT", "WORKER_LEDGER_TABLE",
      "WORKER_DEDUP_KEY", "WORKER_DEDUP_TTL", "WORKER_CONCURRENCY", "WORKER_SHUTDOWN_TIMEOUT",
      "WORKER_METRICS_ADDR", "WORKER_HTTP_URL", "WORKER_LOG_FORMAT", "WORKER_LOG_LEVEL", "WORKER_MOVE_TO_DLQ", "WORKER_NAMESPACE", "WORKER_METRICS_FORMAT",
      "WORKER_OUTBOX_TABLE",
    ], k)])
    error_message = "Set WORKER_* settings and AWS_REGION through this module's variables, not environment."
  }
}

variable "secrets" {
  description = "Secrets for the container, by environment variable name: the ARN of an SSM Parameter Store parameter (arn:...:ssm:...:parameter/name) or of a Secrets Manager secret (arn:...:secretsmanager:...:secret:name-AbCdEf, optionally :json-key:version-stage:version-id). ECS reads them when a task starts and sets the variables; the execution role gets ssm:GetParameters and secretsmanager:GetSecretValue on exactly these ARNs, and the values never appear in the task definition or the Terraform state."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([for k in keys(var.secrets) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k)) && !contains([
      "AWS_REGION", "WORKER_QUEUES", "WORKER_DEDUP_TABLE", "WORKER_EFFECT", "WORKER_LEDGER_TABLE",
      "WORKER_DEDUP_KEY", "WORKER_DEDUP_TTL", "WORKER_CONCURRENCY", "WORKER_SHUTDOWN_TIMEOUT",
      "WORKER_METRICS_ADDR", "WORKER_HTTP_URL", "WORKER_LOG_FORMAT", "WORKER_LOG_LEVEL", "WORKER_MOVE_TO_DLQ", "WORKER_NAMESPACE", "WORKER_METRICS_FORMAT",
      "WORKER_OUTBOX_TABLE",
    ], k)])
    error_message = "secrets keys must be environment variable names, and not a setting this module manages (WORKER_* of its variables, AWS_REGION)."
  }

  validation {
    condition = alltrue([for arn in values(var.secrets) : can(regex(
      "^arn:[^:]+:(ssm:[^:]+:[0-9]{12}:parameter/.+|secretsmanager:[^:]+:[0-9]{12}:secret:[^:]+(:[^:]*:[^:]*:[^:]*)?)$", arn
    ))])
    error_message = "secrets values must be full ARNs: arn:<partition>:ssm:<region>:<account>:parameter/<name>, or arn:<partition>:secretsmanager:<region>:<account>:secret:<name-suffix>[:json-key:version-stage:version-id]."
  }
}

variable "secrets_kms_key_arns" {
  description = "Customer managed KMS keys that encrypt the secrets (SecureString parameters, Secrets Manager secrets). The execution role gets kms:Decrypt on these only, and only through SSM or Secrets Manager. Secrets under AWS managed keys need none."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.secrets_kms_key_arns : can(regex("^arn:[^:]+:kms:[^:]+:[0-9]{12}:key/.+$", arn))])
    error_message = "secrets_kms_key_arns must be KMS key ARNs (arn:<partition>:kms:<region>:<account>:key/<id>)."
  }
}

variable "policy_statements" {
  description = "What a custom effect calls besides the worker's queues and tables, as IAM statements keyed by Sid (letters and digits): the task role gets them as a policy of their own (\"effect\"). Allow only; list actions without wildcards and name the resources."
  type = map(object({
    actions   = list(string)
    resources = list(string)
  }))
  default = {}

  validation {
    condition = alltrue([for sid, s in var.policy_statements : can(regex("^[A-Za-z0-9]+$", sid))
      && length(s.actions) > 0 && length(s.resources) > 0
      && alltrue([for a in s.actions : can(regex("^[a-z0-9-]+:[A-Za-z0-9]+$", a))])
    && !contains(s.resources, "*")])
    error_message = "policy_statements: Sid keys of letters and digits; each statement lists at least one action (service:Action, no wildcard) and one resource, not \"*\"."
  }
}

variable "kms_key_arns" {
  description = "Customer managed KMS keys of the queues (SSE-KMS): the task role gets kms:Decrypt and kms:GenerateDataKey on these only."
  type        = list(string)
  default     = []
}

variable "log_retention_in_days" {
  description = "Retention of the log group, in days."
  type        = number
  default     = 30
}

variable "log_kms_key_id" {
  description = "KMS key ARN for the log group. Null uses CloudWatch Logs' own encryption."
  type        = string
  default     = null
}

variable "enable_execute_command" {
  description = "Allow ECS Exec into the tasks."
  type        = bool
  default     = false
}

variable "autoscaling_enabled" {
  description = "Scale the service on backlog per task: the sum of ApproximateNumberOfMessagesVisible over the queues divided by RunningTaskCount (Container Insights)."
  type        = bool
  default     = true
}

variable "autoscaling_min_capacity" {
  description = "Fewest tasks. At least 1: backlog per task has no value at zero tasks, so target tracking could never scale out from zero."
  type        = number
  default     = 1

  validation {
    condition     = var.autoscaling_min_capacity >= 1
    error_message = "autoscaling_min_capacity must be at least 1."
  }
}

variable "autoscaling_max_capacity" {
  description = "Most tasks. With FIFO queues more tasks than active message groups do not add throughput."
  type        = number
  default     = 10
}

variable "autoscaling_target_backlog_per_task" {
  description = "Target of visible messages per task: the latency you accept divided by the mean processing time of a message, times the task's concurrency."
  type        = number
  default     = 100

  validation {
    condition     = var.autoscaling_target_backlog_per_task > 0
    error_message = "autoscaling_target_backlog_per_task must be positive."
  }
}

variable "autoscaling_scale_in_cooldown" {
  description = "Seconds after a scale-in before another scale-in."
  type        = number
  default     = 300
}

variable "autoscaling_scale_out_cooldown" {
  description = "Seconds after a scale-out before another scale-out."
  type        = number
  default     = 60
}

variable "role_path" {
  description = "IAM path of the task role and the execution role (\"/\" or \"/some/path/\"), for organisations that scope roles by path."
  type        = string
  default     = "/"

  validation {
    condition     = can(regex("^/([!-~]+/)?$", var.role_path)) && length(var.role_path) <= 512
    error_message = "role_path must begin and end with \"/\" (\"/\" alone is the default path)."
  }
}

variable "permissions_boundary" {
  description = "ARN of an IAM policy set as the permissions boundary of the task role and the execution role. Null sets none."
  type        = string
  default     = null

  validation {
    condition     = var.permissions_boundary == null || can(regex("^arn:[^:]+:iam::([0-9]{12}|aws):policy/.+$", coalesce(var.permissions_boundary, "-")))
    error_message = "permissions_boundary must be an IAM policy ARN (arn:<partition>:iam::<account>:policy/<name>)."
  }
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
