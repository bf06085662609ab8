variable "function_name" {
  description = "Name of the function, its role, its log group and its sweep rule."
  type        = string
  default     = "exactly-relay"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,56}$", var.function_name))
    error_message = "function_name must be 1-56 characters of letters, digits, '-' and '_' (it prefixes the role and rule names)."
  }
}

variable "package_path" {
  description = "Path of the zip that `make dist` writes (dist/worker-lambda-arm64.zip or dist/worker-lambda-amd64.zip): the worker's bootstrap binary, which is the relay with WORKER_COMMAND=relay."
  type        = string
}

variable "architecture" {
  description = "arm64 (dist/worker-lambda-arm64.zip) or x86_64 (dist/worker-lambda-amd64.zip)."
  type        = string
  default     = "arm64"

  validation {
    condition     = contains(["arm64", "x86_64"], var.architecture)
    error_message = "architecture must be arm64 or x86_64."
  }
}

variable "memory_size" {
  description = "Memory of the function in MB (128 to 10240)."
  type        = number
  default     = 256

  validation {
    condition     = var.memory_size >= 128 && var.memory_size <= 10240
    error_message = "memory_size must be from 128 to 10240 MB."
  }
}

variable "timeout" {
  description = "Function timeout in seconds (1 to 900): a stream batch's groups, or a sweep of the whole pending index, must be published within it."
  type        = number
  default     = 60

  validation {
    condition     = var.timeout >= 1 && var.timeout <= 900 && floor(var.timeout) == var.timeout
    error_message = "timeout must be a whole number of seconds from 1 to 900."
  }
}

variable "reserved_concurrent_executions" {
  description = "Reserved concurrency of the function; -1 leaves it unreserved."
  type        = number
  default     = -1
}

variable "outbox_table_name" {
  description = "Outbox table name (WORKER_OUTBOX_TABLE)."
  type        = string
  default     = "exactly-outbox"
}

variable "outbox_table_arn" {
  description = "Outbox table ARN; the role may use only this table and its pending index."
  type        = string

  validation {
    condition     = can(regex("^arn:[^:]+:dynamodb:[^:]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$", var.outbox_table_arn))
    error_message = "outbox_table_arn must be a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)."
  }
}

variable "outbox_stream_arn" {
  description = "ARN of the outbox table's stream (the outbox-table module's stream_arn): the event source of the function, and the only stream its role may read."
  type        = string

  validation {
    condition     = can(regex("^arn:[^:]+:dynamodb:[^:]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}/stream/.+$", var.outbox_stream_arn))
    error_message = "outbox_stream_arn must be a DynamoDB stream ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>/stream/<label>)."
  }
}

variable "queue_arns" {
  description = "ARNs of the queues the outbox sends to: the role gets sqs:SendMessage on these only. A message for any other queue fails to publish (OutboxFailed). Give queues, topics (topic_arns) or both."
  default     = []
  type        = list(string)

  validation {
    condition     = alltrue([for arn in var.queue_arns : can(regex("^arn:[^:]+:sqs:[^:]+:[0-9]{12}:[A-Za-z0-9_.-]+$", arn))])
    error_message = "Give the queues as SQS queue ARNs (arn:<partition>:sqs:<region>:<account>:<name>), not URLs."
  }
}

variable "topic_arns" {
  description = "ARNs of the SNS topics the outbox publishes to (the topic module's topic_arn): the role gets sns:Publish on these only. At least one queue or topic is needed."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.topic_arns : can(regex("^arn:[^:]+:sns:[^:]+:[0-9]{12}:[A-Za-z0-9_-]{1,251}(\\.fifo)?$", arn))])
    error_message = "Give the topics as SNS topic ARNs (arn:<partition>:sns:<region>:<account>:<name>)."
  }
}

variable "kms_key_arns" {
  description = "Customer managed KMS keys of the destination queues (SSE-KMS): the role gets kms:GenerateDataKey and kms:Decrypt on these only."
  type        = list(string)
  default     = []
}

variable "retention" {
  description = "WORKER_RELAY_RETENTION, a Go duration: how long a published message stays in the table before TTL deletes it."
  type        = string
  default     = "24h"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$", var.retention))
    error_message = "retention must be a Go duration such as 24h or 72h."
  }
}

variable "stream_batch_size" {
  description = "Stream records per invocation (1 to 10000). Records name groups, and one drain publishes a group however many of its records the batch holds."
  type        = number
  default     = 100

  validation {
    condition     = var.stream_batch_size >= 1 && var.stream_batch_size <= 10000
    error_message = "stream_batch_size must be from 1 to 10000."
  }
}

variable "stream_maximum_batching_window_in_seconds" {
  description = "How long the mapping gathers records before it invokes (0 to 300). 0 publishes soonest; a few seconds means fewer invocations under load."
  type        = number
  default     = 0

  validation {
    condition     = var.stream_maximum_batching_window_in_seconds >= 0 && var.stream_maximum_batching_window_in_seconds <= 300
    error_message = "stream_maximum_batching_window_in_seconds must be from 0 to 300."
  }
}

variable "stream_parallelization_factor" {
  description = "Concurrent batches per stream shard (1 to 10)."
  type        = number
  default     = 1

  validation {
    condition     = var.stream_parallelization_factor >= 1 && var.stream_parallelization_factor <= 10
    error_message = "stream_parallelization_factor must be from 1 to 10."
  }
}

variable "stream_maximum_retry_attempts" {
  description = "Retries of a failing stream batch (0 to 10000) before its records are dropped. A dropped record costs latency only: the sweep publishes its group. Kept small because a failing batch blocks its shard."
  type        = number
  default     = 3

  validation {
    condition     = var.stream_maximum_retry_attempts >= 0 && var.stream_maximum_retry_attempts <= 10000
    error_message = "stream_maximum_retry_attempts must be from 0 to 10000: a bounded retry, since the sweep is the safety net."
  }
}

variable "stream_maximum_record_age_in_seconds" {
  description = "Stream records older than this are dropped unprocessed (60 to 604800): by then the sweep has published their groups."
  type        = number
  default     = 600

  validation {
    condition     = var.stream_maximum_record_age_in_seconds >= 60 && var.stream_maximum_record_age_in_seconds <= 604800
    error_message = "stream_maximum_record_age_in_seconds must be from 60 to 604800: a bounded age, since the sweep is the safety net."
  }
}

variable "stream_inserts_only" {
  description = "Invoke for new items only (a filter on eventName INSERT). Every message is a new item; the relay's own updates and TTL's deletions would wake it for nothing."
  type        = bool
  default     = true
}

variable "sweep_schedule_expression" {
  description = "EventBridge schedule of the sweep, the full query of the pending index that publishes what the stream did not: the longest a message waits when its stream record is lost."
  type        = string
  default     = "rate(1 minute)"

  validation {
    condition     = can(regex("^(rate\\([0-9]+ (minute|minutes|hour|hours|day|days)\\)|cron\\(.+\\))$", var.sweep_schedule_expression))
    error_message = "sweep_schedule_expression must be rate(...) or cron(...)."
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

variable "environment" {
  description = "Extra environment variables. The settings this module manages (WORKER_COMMAND, WORKER_OUTBOX_TABLE, WORKER_RELAY_RETENTION, WORKER_LOG_FORMAT, WORKER_LOG_LEVEL) cannot be set here."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([for k in keys(var.environment) : !contains([
      "WORKER_COMMAND", "WORKER_OUTBOX_TABLE", "WORKER_RELAY_RETENTION", "WORKER_LOG_FORMAT", "WORKER_LOG_LEVEL",
    ], k)])
    error_message = "Set the relay's WORKER_* settings through this module's variables, not environment."
  }
}

variable "log_retention_in_days" {
  description = "Retention of the function's log group, in days."
  type        = number
  default     = 30
}

variable "log_kms_key_id" {
  description = "KMS key ARN for the log group. Null uses CloudWatch Logs' own encryption."
  type        = string
  default     = null
}

variable "role_path" {
  description = "IAM path of the function's role (\"/\" or \"/some/path/\"), for organisations that scope roles by path."
  type        = string
  default     = "/"

  validation {
    condition     = can(regex("^/([!-~]+/)?$", var.role_path)) && length(var.role_path) <= 512
    error_message = "role_path must begin and end with \"/\" (\"/\" alone is the default path)."
  }
}

variable "permissions_boundary" {
  description = "ARN of an IAM policy set as the permissions boundary of the function's role. Null sets none."
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
