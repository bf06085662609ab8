variable "name" {
  description = "Prefix of the policy names: <name>-read, <name>-forget, <name>-outbox, <name>-console-read and <name>-console-write."
  type        = string
  default     = "exactly-operator"

  validation {
    condition     = can(regex("^[A-Za-z0-9+=,.@_-]{1,114}$", var.name))
    error_message = "The name must be 1-114 characters of letters, digits and +=,.@_- (IAM policy names, with -console-write added)."
  }
}

variable "path" {
  description = "IAM path of the policies (\"/\" or \"/some/path/\")."
  type        = string
  default     = "/"

  validation {
    condition     = can(regex("^/([!-~]+/)?$", var.path)) && length(var.path) <= 512
    error_message = "path must begin and end with \"/\" (\"/\" alone is the default path)."
  }
}

variable "dedup_table_arn" {
  description = "ARN of the dedup table the commands read (and forget deletes from)."
  type        = string

  validation {
    condition     = can(regex("^arn:[^:]+:dynamodb:[^:]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$", var.dedup_table_arn))
    error_message = "dedup_table_arn must be a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)."
  }
}

variable "queue_arns" {
  description = "ARNs of the queues worker inspect --queue reads (sqs:GetQueueAttributes, for their DeduplicationScope). Empty: inspect works with --key only."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.queue_arns : can(regex("^arn:[^:]+:sqs:[^:]+:[0-9]{12}:[A-Za-z0-9_.-]+$", arn))])
    error_message = "queue_arns must be SQS queue ARNs."
  }
}

variable "outbox_table_arn" {
  description = "ARN of the outbox table worker outbox lists and worker outbox release / drop change (a held group). Null: no outbox policy."
  type        = string
  default     = null

  validation {
    condition     = var.outbox_table_arn == null || can(regex("^arn:[^:]+:dynamodb:[^:]+:[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}$", var.outbox_table_arn))
    error_message = "outbox_table_arn must be a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)."
  }
}

variable "create_forget_policy" {
  description = "Create the forget policy (dynamodb:GetItem and DeleteItem on the table). It is attached to nothing either way; attaching it is the opt-in."
  type        = bool
  default     = true
}

variable "tags" {
  description = "Tags for the policies."
  type        = map(string)
  default     = {}
}

variable "dlq_arns" {
  description = "ARNs of the dead-letter queues of queue_arns, which worker console lists and redrives from, and worker inspect searches. Empty: the policies hold no DLQ statement."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for arn in var.dlq_arns : can(regex("^arn:[^:]+:sqs:[^:]+:[0-9]{12}:[A-Za-z0-9_.-]+$", arn))])
    error_message = "dlq_arns must be SQS queue ARNs."
  }
}

variable "create_console_policies" {
  description = "Create the worker console policies (<name>-console-read and <name>-console-write). Attached to nothing either way."
  type        = bool
  default     = true
}
