variable "name" {
  description = "Base name of the queue. With fifo_queue the module appends \".fifo\"; the DLQ defaults to \"<name>-dlq\" (plus \".fifo\")."
  type        = string

  validation {
    # 80 characters is the SQS limit; keep room for "-dlq.fifo".
    condition     = can(regex("^[A-Za-z0-9_-]{1,71}$", var.name))
    error_message = "The name must be 1-71 characters of letters, digits, '-' and '_', without the .fifo suffix (the module adds it)."
  }
}

variable "fifo_queue" {
  description = "Create a FIFO queue (and a FIFO DLQ). The worker's per-group ordering needs FIFO; standard queues work without ordering."
  type        = bool
  default     = true
}

variable "content_based_deduplication" {
  description = "Let SQS derive MessageDeduplicationId from a SHA-256 of the body when the producer sends none. FIFO only."
  type        = bool
  default     = false
}

variable "high_throughput_fifo" {
  description = "High-throughput FIFO: deduplication_scope = \"messageGroup\" and fifo_throughput_limit = \"perMessageGroupId\". The worker reads DeduplicationScope at start-up and scopes its dedup keys by group when this is on."
  type        = bool
  default     = false
}

variable "visibility_timeout_seconds" {
  description = "Visibility timeout of the queue, in seconds. The worker extends it while a handler runs; for Lambda it must be at least 6 x the function timeout."
  type        = number
  default     = 30

  validation {
    condition     = var.visibility_timeout_seconds >= 0 && var.visibility_timeout_seconds <= 43200 && floor(var.visibility_timeout_seconds) == var.visibility_timeout_seconds
    error_message = "The visibility timeout must be a whole number of seconds from 0 to 43200."
  }
}

variable "message_retention_seconds" {
  description = "How long SQS keeps a message, in seconds (60 to 1209600)."
  type        = number
  default     = 345600

  validation {
    condition     = var.message_retention_seconds >= 60 && var.message_retention_seconds <= 1209600
    error_message = "The message retention must be from 60 to 1209600 seconds."
  }
}

variable "receive_wait_time_seconds" {
  description = "Default long-poll wait of ReceiveMessage, in seconds (0 to 20). The worker asks for 20 itself; this covers other consumers."
  type        = number
  default     = 20

  validation {
    condition     = var.receive_wait_time_seconds >= 0 && var.receive_wait_time_seconds <= 20
    error_message = "The receive wait time must be from 0 to 20 seconds."
  }
}

variable "delay_seconds" {
  description = "Delivery delay of new messages, in seconds (0 to 900)."
  type        = number
  default     = 0

  validation {
    condition     = var.delay_seconds >= 0 && var.delay_seconds <= 900
    error_message = "The delay must be from 0 to 900 seconds."
  }
}

variable "max_message_size" {
  description = "Largest message SQS accepts, in bytes (1024 to 1048576). Above 262144 needs an AWS provider that knows the 1 MiB limit (v6)."
  type        = number
  default     = 262144

  validation {
    condition     = var.max_message_size >= 1024 && var.max_message_size <= 1048576
    error_message = "The maximum message size must be from 1024 to 1048576 bytes."
  }
}

variable "kms_master_key_id" {
  description = "KMS key (id, ARN or alias) for SSE-KMS. Null keeps SSE-SQS (SQS-managed keys). Encryption at rest is always on. With a customer key, give its ARN to the worker module's kms_key_arns."
  type        = string
  default     = null
}

variable "kms_data_key_reuse_period_seconds" {
  description = "How long SQS reuses a data key before calling KMS again, in seconds (60 to 86400). Only with kms_master_key_id."
  type        = number
  default     = 300

  validation {
    condition     = var.kms_data_key_reuse_period_seconds >= 60 && var.kms_data_key_reuse_period_seconds <= 86400
    error_message = "The data key reuse period must be from 60 to 86400 seconds."
  }
}

variable "create_dlq" {
  description = "Create a dead-letter queue of the same type (FIFO for a FIFO queue), a redrive policy to it and a redrive allow policy that admits only this queue."
  type        = bool
  default     = true
}

variable "max_receive_count" {
  description = "Receives after which SQS moves a message to the DLQ (redrive policy maxReceiveCount). Every receive counts, those of a message a Lambda batch hands back unstarted included: for a FIFO queue behind the worker-lambda module keep it above its batch_size (that module refuses less); the default 15 is batch 10 plus 5 attempts of a message's own."
  type        = number
  default     = 15

  validation {
    condition     = var.max_receive_count >= 1 && var.max_receive_count <= 1000 && floor(var.max_receive_count) == var.max_receive_count
    error_message = "max_receive_count must be a whole number from 1 to 1000."
  }
}

variable "dlq_name" {
  description = "Base name of the DLQ, without .fifo. Null means \"<name>-dlq\"."
  type        = string
  default     = null

  validation {
    condition     = var.dlq_name == null || can(regex("^[A-Za-z0-9_-]{1,75}$", var.dlq_name))
    error_message = "The DLQ name must be 1-75 characters of letters, digits, '-' and '_', without the .fifo suffix."
  }
}

variable "dlq_message_retention_seconds" {
  description = "How long the DLQ keeps a message, in seconds. SQS keeps a message's original enqueue time when it moves it to a DLQ, so this must be at least the queue's retention."
  type        = number
  default     = 1209600

  validation {
    condition     = var.dlq_message_retention_seconds >= 60 && var.dlq_message_retention_seconds <= 1209600
    error_message = "The DLQ message retention must be from 60 to 1209600 seconds."
  }
}

variable "dlq_visibility_timeout_seconds" {
  description = "Visibility timeout of the DLQ, in seconds. Null means the queue's."
  type        = number
  default     = null

  validation {
    condition     = var.dlq_visibility_timeout_seconds == null || (coalesce(var.dlq_visibility_timeout_seconds, 0) >= 0 && coalesce(var.dlq_visibility_timeout_seconds, 0) <= 43200)
    error_message = "The DLQ visibility timeout must be from 0 to 43200 seconds."
  }
}

variable "deny_insecure_transport" {
  description = "Give the queue and the DLQ a policy that denies every SQS action over plain HTTP (aws:SecureTransport = false). On by default: nothing the worker or AWS does needs HTTP. The module then owns the queue's policy: add your own statements with source_queue_policy_documents."
  type        = bool
  default     = true
}

variable "source_queue_policy_documents" {
  description = "IAM policy documents (JSON) merged into the queue's policy, such as an SNS topic's sqs:SendMessage grant. SQS keeps one policy per queue; give them here rather than in another aws_sqs_queue_policy, which would overwrite this one."
  type        = list(string)
  default     = []
}

variable "tags" {
  description = "Tags for both queues."
  type        = map(string)
  default     = {}
}
