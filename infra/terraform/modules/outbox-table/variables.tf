variable "name" {
  description = "Name of the outbox table. The default is the relay's default WORKER_OUTBOX_TABLE."
  type        = string
  default     = "exactly-outbox"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{3,255}$", var.name))
    error_message = "A DynamoDB table name is 3-255 characters of letters, digits, '_', '-' and '.'."
  }
}

variable "billing_mode" {
  description = "PAY_PER_REQUEST (on-demand) or PROVISIONED. With PROVISIONED, read_capacity and write_capacity apply to the table and to the pending index alike (every message written updates its group's head, which the index holds)."
  type        = string
  default     = "PAY_PER_REQUEST"

  validation {
    condition     = contains(["PAY_PER_REQUEST", "PROVISIONED"], var.billing_mode)
    error_message = "billing_mode must be PAY_PER_REQUEST or PROVISIONED."
  }
}

variable "read_capacity" {
  description = "Read capacity units of the table and of its pending index, with billing_mode = \"PROVISIONED\"."
  type        = number
  default     = null

  validation {
    condition     = var.read_capacity == null || coalesce(var.read_capacity, 1) >= 1
    error_message = "read_capacity must be at least 1."
  }
}

variable "write_capacity" {
  description = "Write capacity units of the table and of its pending index, with billing_mode = \"PROVISIONED\"."
  type        = number
  default     = null

  validation {
    condition     = var.write_capacity == null || coalesce(var.write_capacity, 1) >= 1
    error_message = "write_capacity must be at least 1."
  }
}

variable "point_in_time_recovery_enabled" {
  description = "Point-in-time recovery. The table holds messages committed but not yet published: losing it loses them, so keep it on."
  type        = bool
  default     = true
}

variable "deletion_protection_enabled" {
  description = "Deletion protection. Turn it off only for throwaway stacks."
  type        = bool
  default     = true
}

variable "manage_server_side_encryption" {
  description = "Write the server_side_encryption block (the AWS managed key, or server_side_encryption_kms_key_arn). Keep it on. false leaves DynamoDB's default, an AWS owned key: still encrypted at rest, but under no KMS key of the account. It exists for DynamoDB Local, which accepts SSE but never reports it, so the block shows as drift on every plan (make tf-apply-local)."
  type        = bool
  default     = true
}

variable "server_side_encryption_kms_key_arn" {
  description = "Customer managed KMS key for SSE. Null uses the AWS managed key (aws/dynamodb); encryption at rest is always on. Only with manage_server_side_encryption."
  type        = string
  default     = null
}

variable "table_class" {
  description = "STANDARD or STANDARD_INFREQUENT_ACCESS."
  type        = string
  default     = "STANDARD"

  validation {
    condition     = contains(["STANDARD", "STANDARD_INFREQUENT_ACCESS"], var.table_class)
    error_message = "table_class must be STANDARD or STANDARD_INFREQUENT_ACCESS."
  }
}

variable "tags" {
  description = "Tags for the table."
  type        = map(string)
  default     = {}
}
