variable "function_name" {
  description = "Name of the function, its role and its log group."
  type        = string
  default     = "exactly-worker"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,56}$", var.function_name))
    error_message = "function_name must be 1-56 characters of letters, digits, '-' and '_' (it prefixes the role name)."
  }
}

variable "package_path" {
  description = "Path of the zip that `make dist` writes (dist/worker-lambda-arm64.zip or dist/worker-lambda-amd64.zip); it holds the bootstrap binary."
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
  description = "Function timeout in seconds (1 to 900). Every queue's visibility timeout must be at least 6 x this."
  type        = number
  default     = 30

  validation {
    condition     = var.timeout >= 1 && var.timeout <= 900 && floor(var.timeout) == var.timeout
    error_message = "timeout must be a whole number of seconds from 1 to 900."
  }
}

variable "queues" {
  description = "Queues that trigger the function, keyed by a static name; one event source mapping each. visibility_timeout_seconds is the queue's and must be at least 6 x timeout; dlq_arn is its DLQ, needed with move_to_dlq; max_receive_count is its redrive policy's maxReceiveCount, which for a FIFO queue must be above batch_size (null: not checked). The queue module's worker_queue output has this shape."
  type = map(object({
    arn                        = string
    url                        = string
    visibility_timeout_seconds = number
    dlq_arn                    = optional(string)
    max_receive_count          = optional(number)
  }))

  validation {
    condition     = length(var.queues) > 0
    error_message = "Give at least one queue."
  }
}

variable "batch_size" {
  description = "Messages per invocation: 1 to 10 on a FIFO queue; up to 10000 on a standard queue, where more than 10 needs maximum_batching_window_in_seconds of at least 1."
  type        = number
  default     = 10

  validation {
    condition     = var.batch_size >= 1 && var.batch_size <= 10000 && floor(var.batch_size) == var.batch_size
    error_message = "batch_size must be a whole number from 1 to 10000 (at most 10 on a FIFO queue)."
  }
}

variable "maximum_batching_window_in_seconds" {
  description = "Seconds each event source mapping gathers messages before it invokes the function (0 to 300). Standard queues only: FIFO event sources take no batching window (keep 0). At least 1 for batch_size above 10."
  type        = number
  default     = 0

  validation {
    condition     = var.maximum_batching_window_in_seconds >= 0 && var.maximum_batching_window_in_seconds <= 300 && floor(var.maximum_batching_window_in_seconds) == var.maximum_batching_window_in_seconds
    error_message = "maximum_batching_window_in_seconds must be a whole number from 0 to 300."
  }
}

variable "filter_patterns" {
  description = "Event filter patterns (JSON, Lambda's filtering syntax, such as {\"body\":{\"type\":[\"deposit\"]}}) of every event source mapping, at most 5. Lambda DELETES a message that matches none of them without invoking the function: the worker never sees it. Empty: no filter."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.filter_patterns) <= 5 && alltrue([for p in var.filter_patterns : can(jsondecode(p))])
    error_message = "filter_patterns takes at most 5 patterns, each a JSON object."
  }
}

variable "event_source_mapping_metrics" {
  description = "Metrics of the event source mappings themselves (metrics_config): [\"EventCount\"] publishes PolledEventCount, FilteredOutEventCount, InvokedEventCount, FailedInvokeEventCount, DeletedEventCount and others per mapping (CloudWatch charges them as custom metrics); [] publishes none."
  type        = list(string)
  default     = ["EventCount"]

  validation {
    condition     = alltrue([for m in var.event_source_mapping_metrics : m == "EventCount"])
    error_message = "event_source_mapping_metrics takes \"EventCount\" (the only metric group SQS event sources have) or nothing."
  }
}

variable "tracing_mode" {
  description = "X-Ray tracing of the function: \"PassThrough\" (Lambda traces only requests that arrive sampled) or \"Active\" (Lambda samples invocations itself; the role then gets xray:PutTraceSegments and xray:PutTelemetryRecords, which take no resource narrower than \"*\")."
  type        = string
  default     = "PassThrough"

  validation {
    condition     = contains(["PassThrough", "Active"], var.tracing_mode)
    error_message = "tracing_mode must be \"PassThrough\" or \"Active\"."
  }
}

variable "maximum_concurrency" {
  description = "Most concurrent invocations each event source mapping starts (2 to 1000)."
  type        = number
  default     = 10

  validation {
    condition     = var.maximum_concurrency >= 2 && var.maximum_concurrency <= 1000
    error_message = "maximum_concurrency must be from 2 to 1000."
  }
}

variable "provisioned_pollers" {
  description = "Provisioned mode of each event source mapping: minimum_pollers (2 to 200, default 2) and maximum_pollers (2 to 10000, default 200) event pollers kept for the queue, billed while provisioned. Null (the default) leaves Lambda's standard scaling, capped by maximum_concurrency; Lambda takes one or the other, so maximum_concurrency is not set in provisioned mode."
  type = object({
    minimum_pollers = optional(number, 2)
    maximum_pollers = optional(number, 200)
  })
  default = null

  validation {
    condition     = var.provisioned_pollers == null || try(var.provisioned_pollers.minimum_pollers >= 2 && var.provisioned_pollers.minimum_pollers <= 200 && floor(var.provisioned_pollers.minimum_pollers) == var.provisioned_pollers.minimum_pollers, false)
    error_message = "provisioned_pollers.minimum_pollers must be a whole number from 2 to 200 (Lambda's range for SQS event sources)."
  }

  validation {
    condition     = var.provisioned_pollers == null || try(var.provisioned_pollers.maximum_pollers >= 2 && var.provisioned_pollers.maximum_pollers <= 10000 && floor(var.provisioned_pollers.maximum_pollers) == var.provisioned_pollers.maximum_pollers, false)
    error_message = "provisioned_pollers.maximum_pollers must be a whole number from 2 to 10000 (Lambda's range for SQS event sources)."
  }

  validation {
    condition     = var.provisioned_pollers == null || try(var.provisioned_pollers.minimum_pollers <= var.provisioned_pollers.maximum_pollers, false)
    error_message = "provisioned_pollers.minimum_pollers must not exceed maximum_pollers."
  }
}

variable "reserved_concurrent_executions" {
  description = "Reserved concurrency of the function; -1 leaves it unreserved."
  type        = number
  default     = -1
}

variable "dedup_table_name" {
  description = "Dedup table name (WORKER_DEDUP_TABLE)."
  type        = string
  default     = "exactly-dedup"
}

variable "dedup_table_arn" {
  description = "Dedup table ARN; the role may use only this table for dedup records."
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
  description = "WORKER_EFFECT: ledger (needs ledger_table_name and ledger_table_arn), http (needs http_url), noop, or the name of an effect your own binary registers (README, \"Your own effect\"; its zip built with make dist MAIN=./your/main)."
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
  description = "WORKER_CONCURRENCY: message groups of one batch handled in parallel. Null keeps the worker's default."
  type        = number
  default     = null

  validation {
    condition     = var.concurrency == null || coalesce(var.concurrency, 1) >= 1
    error_message = "concurrency must be at least 1."
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
  description = "Extra environment variables, such as a custom effect's own settings. The WORKER_* settings this module manages cannot be set here; secrets go in secrets."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([for k in keys(var.environment) : !contains([
      "WORKER_QUEUES", "WORKER_DEDUP_TABLE", "WORKER_EFFECT", "WORKER_LEDGER_TABLE",
      "WORKER_DEDUP_KEY", "WORKER_DEDUP_TTL", "WORKER_CONCURRENCY", "WORKER_HTTP_URL",
      "WORKER_LOG_FORMAT", "WORKER_LOG_LEVEL", "WORKER_MOVE_TO_DLQ", "WORKER_NAMESPACE",
      "WORKER_OUTBOX_TABLE",
    ], k)])
    error_message = "Set WORKER_* settings through this module's variables, not environment."
  }
}

variable "secrets" {
  description = "Secrets the effect reads, by name: the ARN of an SSM Parameter Store parameter (arn:...:ssm:...:parameter/name) or of a Secrets Manager secret (arn:...:secretsmanager:...:secret:name-AbCdEf). Lambda cannot inject secrets into the environment, so the function gets NAME_ARN = the ARN, and its role gets ssm:GetParameter or secretsmanager:GetSecretValue on exactly these ARNs: the effect's factory reads the value at cold start with worker.Env.AWS. Values never appear in the function's configuration or the Terraform state."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for k in keys(var.secrets) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k)) && !can(regex("^WORKER_", k))])
    error_message = "secrets keys must be environment variable names, not WORKER_*."
  }

  validation {
    condition = alltrue([for arn in values(var.secrets) : can(regex(
      "^arn:[^:]+:(ssm:[^:]+:[0-9]{12}:parameter/.+|secretsmanager:[^:]+:[0-9]{12}:secret:[^:]+)$", arn
    ))])
    error_message = "secrets values must be full ARNs: arn:<partition>:ssm:<region>:<account>:parameter/<name>, or arn:<partition>:secretsmanager:<region>:<account>:secret:<name-suffix>."
  }
}

variable "secrets_kms_key_arns" {
  description = "Customer managed KMS keys that encrypt the secrets. The role gets kms:Decrypt on these only, and only through SSM or Secrets Manager. Secrets under AWS managed keys need none."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.secrets_kms_key_arns : can(regex("^arn:[^:]+:kms:[^:]+:[0-9]{12}:key/.+$", arn))])
    error_message = "secrets_kms_key_arns must be KMS key ARNs (arn:<partition>:kms:<region>:<account>:key/<id>)."
  }
}

variable "policy_statements" {
  description = "What a custom effect calls besides the worker's queues and tables, as IAM statements keyed by Sid (letters and digits): the function's role gets them as a policy of their own (\"effect\"). Allow only; list actions without wildcards and name the resources."
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
  description = "Customer managed KMS keys of the queues (SSE-KMS): the role gets kms:Decrypt and kms:GenerateDataKey on these only."
  type        = list(string)
  default     = []
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
