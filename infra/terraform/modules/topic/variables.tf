variable "name" {
  description = "Base name of the topic. With fifo_topic the module appends \".fifo\"."
  type        = string

  validation {
    # 256 characters is the SNS limit; keep room for ".fifo".
    condition     = can(regex("^[A-Za-z0-9_-]{1,251}$", var.name))
    error_message = "The name must be 1-251 characters of letters, digits, '-' and '_', without the .fifo suffix (the module adds it)."
  }
}

variable "fifo_topic" {
  description = "Create a FIFO topic: the order of each message group and the deduplication ids reach every subscribed FIFO queue. Content-based deduplication stays off either way: the relay sends a deduplication id with every message."
  type        = bool
  default     = true
}

variable "queues" {
  description = "The queues subscribed to the topic, by a key of yours: arn and url (the queue module's queue_arn and queue_url), raw_message_delivery (true: the queue gets the published body and attributes; false: SNS's JSON envelope, which the worker unwraps too), filter_policy (JSON, null for none) and its filter_policy_scope (MessageAttributes or MessageBody), write_queue_policy (true: this module writes the queue's policy; false: pass queue_policy_documents[key] to the queue module's source_queue_policy_documents, which owns the queue's policy)."
  type = map(object({
    arn                  = string
    url                  = string
    raw_message_delivery = optional(bool, true)
    filter_policy        = optional(string)
    filter_policy_scope  = optional(string, "MessageAttributes")
    write_queue_policy   = optional(bool, false)
  }))

  validation {
    condition     = length(var.queues) > 0 && alltrue([for q in values(var.queues) : can(regex("^arn:[^:]+:sqs:[^:]+:[0-9]{12}:[A-Za-z0-9_.-]+$", q.arn))])
    error_message = "Give at least one queue, each with its SQS queue ARN (arn:<partition>:sqs:<region>:<account>:<name>) as arn."
  }

  validation {
    condition     = alltrue([for q in values(var.queues) : q.filter_policy == null || can(jsondecode(q.filter_policy))])
    error_message = "A filter_policy must be a JSON object (or null for none)."
  }

  validation {
    condition     = alltrue([for q in values(var.queues) : contains(["MessageAttributes", "MessageBody"], q.filter_policy_scope)])
    error_message = "filter_policy_scope must be MessageAttributes or MessageBody."
  }
}

variable "kms_master_key_id" {
  description = "KMS key (id, ARN or alias) SNS encrypts the topic's messages at rest with. Defaults to the AWS managed key alias/aws/sns. A customer key needs a key policy that lets the relay's role use it (give its ARN to the relay module's kms_key_arns)."
  type        = string
  default     = "alias/aws/sns"

  validation {
    condition     = var.kms_master_key_id != null && var.kms_master_key_id != ""
    error_message = "Encryption at rest stays on: give a key, or keep alias/aws/sns."
  }
}

variable "tags" {
  description = "Tags for the topic."
  type        = map(string)
  default     = {}
}
