variable "name" {
  description = "Name of the service, task family, roles and log group."
  type        = string
  default     = "exactly-relay"

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,48}$", var.name))
    error_message = "The name must be 1-48 characters of letters, digits, '-' and '_' (it prefixes IAM role names)."
  }
}

variable "cluster_arn" {
  description = "ARN of the ECS cluster."
  type        = string

  validation {
    condition     = can(regex("^arn:[^:]+:ecs:[^:]+:[0-9]{12}:cluster/.+$", var.cluster_arn))
    error_message = "cluster_arn must be an ECS cluster ARN (arn:<partition>:ecs:<region>:<account>:cluster/<name>)."
  }
}

variable "container_image" {
  description = "Image of the worker (the relay is the same binary). Its entrypoint must be the worker binary; container_command is appended."
  type        = string
}

variable "container_command" {
  description = "Arguments after the entrypoint: the relay command."
  type        = list(string)
  default     = ["relay"]
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
  description = "Subnets of the tasks. They need a route to DynamoDB, SQS, CloudWatch Logs and the image registry (NAT or VPC endpoints)."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) > 0
    error_message = "Give at least one subnet."
  }
}

variable "security_group_ids" {
  description = "Security groups of the tasks. The relay only makes outbound HTTPS calls; port metrics_port serves /metrics, /healthz and /readyz."
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
  description = "Number of relay tasks. One is enough (a deployment briefly runs two, which is safe); more only add redundancy."
  type        = number
  default     = 1

  validation {
    condition     = var.desired_count >= 0 && floor(var.desired_count) == var.desired_count
    error_message = "desired_count must be a whole number of at least 0."
  }
}

variable "outbox_table_name" {
  description = "Outbox table name (WORKER_OUTBOX_TABLE)."
  type        = string
  default     = "exactly-outbox"
}

variable "outbox_table_arn" {
  description = "Outbox table ARN; the task role may use only this table and its pending index. Its region is the relay's AWS_REGION."
  type        = string

  validation {
    condition     = can(regex("^arn:[^:]+:dynamodb:[^:]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$", var.outbox_table_arn))
    error_message = "outbox_table_arn must be a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)."
  }
}

variable "queue_arns" {
  description = "ARNs of the queues the outbox sends to: the task role gets sqs:SendMessage on these only. A message for any other queue fails to publish (OutboxFailed). Give queues, topics (topic_arns) or both."
  default     = []
  type        = list(string)

  validation {
    condition     = alltrue([for arn in var.queue_arns : can(regex("^arn:[^:]+:sqs:[^:]+:[0-9]{12}:[A-Za-z0-9_.-]+$", arn))])
    error_message = "Give the queues as SQS queue ARNs (arn:<partition>:sqs:<region>:<account>:<name>), not URLs."
  }
}

variable "topic_arns" {
  description = "ARNs of the SNS topics the outbox publishes to (the topic module's topic_arn): the task role gets sns:Publish on these only. At least one queue or topic is needed."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.topic_arns : can(regex("^arn:[^:]+:sns:[^:]+:[0-9]{12}:[A-Za-z0-9_-]{1,251}(\\.fifo)?$", arn))])
    error_message = "Give the topics as SNS topic ARNs (arn:<partition>:sns:<region>:<account>:<name>)."
  }
}

variable "kms_key_arns" {
  description = "Customer managed KMS keys of the destination queues (SSE-KMS): the task role gets kms:GenerateDataKey and kms:Decrypt on these only."
  type        = list(string)
  default     = []
}

variable "poll_interval" {
  description = "WORKER_RELAY_POLL, a Go duration: how often the relay queries the pending index."
  type        = string
  default     = "1s"

  validation {
    condition     = can(regex("^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$", var.poll_interval))
    error_message = "poll_interval must be a Go duration such as 1s or 500ms."
  }
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

variable "stop_timeout" {
  description = "Container stopTimeout in seconds: ECS sends SIGKILL this long after SIGTERM. Fargate allows at most 120."
  type        = number
  default     = 30

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
  description = "WORKER_METRICS_FORMAT: prometheus (/metrics only), emf (CloudWatch Embedded Metric Format lines on stdout, which the awslogs driver turns into the OutboxLag and OutboxFailed metrics the alarms module watches) or both."
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

variable "environment" {
  description = "Extra environment variables for the container. The settings this module manages (AWS_REGION, WORKER_OUTBOX_TABLE, WORKER_RELAY_POLL, WORKER_RELAY_RETENTION, WORKER_METRICS_ADDR, WORKER_METRICS_FORMAT, WORKER_LOG_FORMAT, WORKER_LOG_LEVEL) cannot be set here."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([for k in keys(var.environment) : !contains([
      "AWS_REGION", "WORKER_OUTBOX_TABLE", "WORKER_RELAY_POLL", "WORKER_RELAY_RETENTION",
      "WORKER_METRICS_ADDR", "WORKER_METRICS_FORMAT", "WORKER_LOG_FORMAT", "WORKER_LOG_LEVEL",
    ], k)])
    error_message = "Set the relay's WORKER_* settings and AWS_REGION through this module's variables, not environment."
  }
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
