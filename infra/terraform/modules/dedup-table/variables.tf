variable "name" {
  description = "Name of the dedup table. The default is the worker's default WORKER_DEDUP_TABLE."
  type        = string
  default     = "exactly-dedup"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{3,255}$", var.name))
    error_message = "A DynamoDB table name is 3-255 characters of letters, digits, '_', '-' and '.'."
  }
}

variable "ttl_attribute_name" {
  description = "TTL attribute of the dedup table. The worker writes expires_at (epoch seconds) on every record; no other name works."
  type        = string
  default     = "expires_at"

  validation {
    condition     = var.ttl_attribute_name == "expires_at"
    error_message = "The worker writes its expiry to expires_at; a TTL on any other attribute would never expire a dedup record."
  }
}

variable "point_in_time_recovery_enabled" {
  description = "Point-in-time recovery. Losing the dedup table re-runs every effect whose message is redelivered, so keep it on."
  type        = bool
  default     = true
}

variable "deletion_protection_enabled" {
  description = "Deletion protection for the tables. Turn it off only for throwaway stacks."
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

variable "create_ledger_table" {
  description = "Also create the ledger table that the demo effect (WORKER_EFFECT=ledger) writes to in one transaction with the dedup record."
  type        = bool
  default     = false
}

variable "ledger_table_name" {
  description = "Name of the ledger table. The default is the worker's default WORKER_LEDGER_TABLE."
  type        = string
  default     = "exactly-ledger"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{3,255}$", var.ledger_table_name))
    error_message = "A DynamoDB table name is 3-255 characters of letters, digits, '_', '-' and '.'."
  }
}

variable "tags" {
  description = "Tags for the tables."
  type        = map(string)
  default     = {}
}
